"""pentegg.rtl.update: the FitnessAggregator and the weight update (spec 7.2, 8).

* :mod:`.shaper`: :class:`Shaper`, pair weights ``g`` and the threshold ``theta``;
* :mod:`.isqrt`: :class:`Isqrt`, bit-serial ``floor(sqrt(n))``.
"""

from .isqrt import Isqrt
from .shaper import Shaper

__all__ = ["Isqrt", "Shaper"]
