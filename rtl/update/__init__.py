"""pentegg.rtl.update: the FitnessAggregator and the weight update (spec 7.2, 8).

* :mod:`.shaper`: :class:`Shaper`, pair weights ``g`` and the threshold ``theta``;
* :mod:`.isqrt`: :class:`Isqrt`, bit-serial ``floor(sqrt(n))``;
* :mod:`.votes`: :class:`VoteAccumulator`, ``Z`` of one layer from the regenerated noise;
* :mod:`.apply`: :class:`WeightUpdater`, moves and the pentary or latent update of W.
"""

from .apply import WeightUpdater
from .isqrt import Isqrt
from .shaper import Shaper
from .votes import VoteAccumulator

__all__ = ["Isqrt", "Shaper", "VoteAccumulator", "WeightUpdater"]
