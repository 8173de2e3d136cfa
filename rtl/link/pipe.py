"""StreamRegister: one register stage on a stream, valid and payload from flip-flops.

::

    i.valid, i.payload --> [valid_r, payload_r] --> o.valid, o.payload
    i.ready <-- ~valid_r | o.ready

It cuts the forward path (the source's state and payload multiplexers into the sink's
decode) at the cost of a cycle of latency; ``ready`` stays combinational, one LUT from
the sink's. Between the LinkEngine and the Accelerator's command decoder the engine's
word multiplexer into the decoder's zero test and next state (6 LUT levels) was the
128-lane ULX3S build's second-worst path at ``cd6a36f`` (seed 1, 11.34 ns).

Throughput: a word per cycle while ``o.ready`` is high; no word is lost or repeated
under any ``ready`` pattern.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["StreamRegister"]


class StreamRegister(wiring.Component):
    """A stream of ``width``-bit words (1..1024) through one register stage.

    Interface attributes
    --------------------
    i : In(stream.Signature(width))
        The source side: a word moves in when ``i.valid & i.ready``.
    o : Out(stream.Signature(width))
        The sink side: ``o.valid`` and ``o.payload`` are flip-flops.

    Latency one cycle; throughput one word per cycle.
    """

    def __init__(self, width: int):
        self.width = check_int("width", width, 1, 1024)
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        valid = Signal()
        payload = Signal(self.width, reset_less=True)  # read only while valid
        m.d.comb += [
            self.i.ready.eq(~valid | self.o.ready),
            self.o.valid.eq(valid),
            self.o.payload.eq(payload),
        ]
        with m.If(self.i.ready):
            m.d.sync += [valid.eq(self.i.valid), payload.eq(self.i.payload)]
        return m
