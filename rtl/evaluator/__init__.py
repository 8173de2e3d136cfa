"""pentegg.rtl.evaluator: the PopulationEvaluator (the seed's LRADD + POPEVAL) and its parts.

* :mod:`.evaluator`: :class:`PopulationEvaluator`, the top;
* :mod:`.params`: elaboration parameters and derived widths;
* :mod:`.lane`: :class:`PairLane`, two multiplier-free MACs;
* :mod:`.weights`: :class:`WeightStreamer`, two weight rows from the spec 1.4 packing;
* :mod:`.noise_fill`: :class:`NoiseFill`, a round's noise into the noise banks;
* :mod:`.pass_engine`: :class:`PassEngine`, the lanes' passes;
* :mod:`.finalizer`: :class:`Finalizer`, perturbation, activation, u vectors, scores;
* :mod:`.loader`: :class:`InputLoader`; :mod:`.scores`: :class:`ScoreAccumulator`;
* :mod:`.sequencer`: :class:`Sequencer`, the schedule as pass commands.

docs/rtl.md describes the block diagram, the schedule and the memory map.
"""
