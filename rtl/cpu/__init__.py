"""The control processor: an RV32I core (:class:`RV32Core`), its bus
(:data:`BUS_SIGNATURE`) and the firmware build (:mod:`.toolchain`, C through the PyPI
``ziglang`` compiler). ``sim/rv32_iss.py`` is the core's instruction-set model."""

from .rv32 import BUS_SIGNATURE, RV32Core

__all__ = ["BUS_SIGNATURE", "RV32Core"]
