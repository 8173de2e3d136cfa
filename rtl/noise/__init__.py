"""pentegg.rtl.noise: the noise blocks (spec 2-4): keyed pentary streams and LRGEN/LRMUL.

* :mod:`.keyer`: :class:`StreamKeyer`, stream start states ``x0 = mix32(key ^ S)``
  (parallel, one per device; or bit-serial for area);
* :mod:`.prng`: :class:`PentaryStreamCore` (one stream from its ``x0``) and
  :class:`PentaryPRNG` (keyer + core): what the PopulationEvaluator's noise fill uses;
* :mod:`.lrgen`: :class:`LowRankGenerator` (one LRGEN + LRMUL lane),
  :class:`KeyedLowRankGenerator` (keyer + lane) and ``lrmul_stages`` (LRMUL + PQUANT as
  pipeline stages, reused by the evaluator's quantized mode);
* :mod:`.lrgen_compact` / :mod:`.noise_engine`: :class:`CompactLowRankGenerator`, the
  smallest standalone keyed generator (one bit-serial engine); not used by the
  accelerator, kept as the block that meets the 200-LUT4 standalone target.
"""
