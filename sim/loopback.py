"""A stream loopback through a small FIFO: the fixture of the harness's self-tests."""

from __future__ import annotations

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

__all__ = ["StreamLoopback"]


class StreamLoopback(wiring.Component):
    """``o`` returns the beats of ``i`` in order, through a ``depth``-entry FIFO.

    Interface attributes: ``i: In(stream.Signature(width))``,
    ``o: Out(stream.Signature(width))``.
    """

    def __init__(self, width: int = 8, depth: int = 4):
        self.width, self.depth = width, depth
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SyncFIFO(width=self.width, depth=self.depth)
        wiring.connect(m, wiring.flipped(self.i), fifo.w_stream)
        wiring.connect(m, fifo.r_stream, wiring.flipped(self.o))
        return m
