"""pentegg.rtl.update: the ES update (spec 8).

* :mod:`.votes`: :class:`VoteAccumulator`, ``Z`` of one layer from the regenerated noise;
* :mod:`.apply`: :class:`WeightUpdater`, moves and the pentary or latent update of W.
"""
