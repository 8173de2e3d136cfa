"""pentegg.rtl: the accelerator's hardware modules in Amaranth HDL (docs/rtl.md).

* :class:`PentaryQuantizer` (PQUANT, spec 4.1),
* :class:`StreamKeyer` (key mixing, spec 2.2-2.3, one per device),
  :class:`PentaryStreamCore` and :class:`PentaryPRNG` (spec 2),
  :class:`LowRankGenerator` (one LRGEN + LRMUL lane, spec 3, 4.2) and
  :class:`KeyedLowRankGenerator` (a keyer and a lane);
* :class:`SerialNoiseEngine` (key mixing and stream words, one bit per cycle) and
  :class:`CompactLowRankGenerator` (LRGEN + LRMUL keyed, built on it: the smallest);
* :class:`PopulationEvaluator` (``rtl/evaluator/``: LRADD + POPEVAL, spec 5, 6, 7.1):
  every member's perturbed forward pass of an ES step on pair-lanes;
* ``rtl/update/``: :class:`Shaper` (g, sum g^2, isqrt, theta; spec 7.2, 8.2),
  :class:`VoteAccumulator` (Z from regenerated noise, 8.1) and :class:`WeightUpdater`
  (moves, pentary or latent update, 8.2-8.4);
* ``rtl/control/``: command decoder, register file, controller (spec 10.2), init writer
  (10.1); :class:`Accelerator` (``rtl/accelerator.py``) is the top that trains;
* :mod:`.catalog` names them for the CLI and the tests, :mod:`.synth` measures them.

The classes are imported on first use, so that ``import pentegg.rtl`` (and the CLI) work
without Amaranth installed.
"""

from __future__ import annotations

import importlib

#: Modules of ``pentegg verilog`` / ``pentegg synth`` (rtl/catalog.py defines them).
MODULE_NAMES = (
    "pquant",
    "prng",
    "keyer",
    "lrgen",
    "lrgen-compact",
    "evaluator",
    "lrgen-lane",
    "shaper",
    "accelerator",
    "device",
    "votes",
    "weight-update",
    "compact",
    "rv32",
)

_EXPORTS = {
    "PentaryQuantizer": ".pquant",
    "StreamKeyer": ".noise.keyer",
    "PentaryStreamCore": ".noise.prng",
    "PentaryPRNG": ".noise.prng",
    "LowRankGenerator": ".noise.lrgen",
    "KeyedLowRankGenerator": ".noise.lrgen",
    "SerialNoiseEngine": ".noise.noise_engine",
    "CompactLowRankGenerator": ".noise.lrgen_compact",
    "PopulationEvaluator": ".evaluator.evaluator",
    "Shaper": ".update.shaper",
    "VoteAccumulator": ".update.votes",
    "WeightUpdater": ".update.apply",
    "Accelerator": ".accelerator",
    "LinkEngine": ".link.engine",
    "Device": ".link.device",
    "RV32Core": ".cpu.rv32",
    "CompactDevice": ".compact.soc",
}

__all__ = ["MODULE_NAMES", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
