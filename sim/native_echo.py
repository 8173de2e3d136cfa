"""A stand-in for the link device of the native simulation's tests: a byte echo.

:class:`EchoDevice` has the link device's ports (``rx`` bytes in, ``tx`` bytes out, both
``stream.Signature(8)``) and returns every byte it receives, 0x00 delimiters included,
through a FIFO. After each 0x00 it sends it holds its output for ``latency`` cycles, so
that a frame's "response" ends ``latency`` cycles after the next one arrived: the native
harness must keep clocking while a response is outstanding.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

__all__ = ["EchoDevice"]


class EchoDevice(wiring.Component):
    """``tx`` returns the bytes of ``rx`` in order, through a ``depth``-byte FIFO."""

    def __init__(self, depth: int = 16, latency: int = 0):
        if depth < 1 or latency < 0:
            raise ValueError(f"depth={depth} must be >= 1 and latency={latency} >= 0")
        self.depth, self.latency = depth, latency
        super().__init__({"rx": In(stream.Signature(8)), "tx": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SyncFIFO(width=8, depth=self.depth)
        wiring.connect(m, wiring.flipped(self.rx), fifo.w_stream)
        wait = Signal(range(self.latency + 1))
        m.d.comb += [
            self.tx.payload.eq(fifo.r_data),
            self.tx.valid.eq(fifo.r_rdy & (wait == 0)),
            fifo.r_en.eq(self.tx.ready & (wait == 0)),
        ]
        if self.latency:
            with m.If(wait != 0):
                m.d.sync += wait.eq(wait - 1)
            with m.Elif(self.tx.valid & self.tx.ready & (self.tx.payload == 0)):
                m.d.sync += wait.eq(self.latency)
        return m
