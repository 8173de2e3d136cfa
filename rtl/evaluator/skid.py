"""SkidBuffer: a full-rate register stage on a stream, every signal across it from a
flip-flop.

::

    i.valid, i.payload --> [main] --> o.valid, o.payload
                       \\-> [skid] -/
    i.ready <-- ~skid.valid

The sink reads the main register. While the sink stalls, a word the source offered in
the cycle before it saw the stall (``i.ready`` is a flip-flop, so it still said ready)
goes into the skid register, and ``i.ready`` falls; when the sink takes the main word,
the skid word moves into main and ``i.ready`` rises again. So no combinational path
crosses the stage: the sink's ready reaches only the two registers' enables, the
source's valid only their loads. Unlike :class:`pentegg.rtl.link.pipe.StreamRegister`
(a word every other cycle) it passes a word every cycle.

Between the WeightStreamer and the PassEngine the engine's beat decision (its pass
state, the captures, the record FIFO) into the streamer's word FIFOs' read ports and
levels and its cursors' offsets was one loop: the 128-lane ULX3S build at ``7bac758``
(seed 1) had 40 endpoints past 10 ns on it (10.40 ns, 7 LUT levels, 8.22 ns routing),
and it was ``179b581`` seed 2's critical path (9.95 ns).
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """A stream of ``shape`` payloads through a two-word register stage.

    Parameters
    ----------
    shape : ShapeLike
        The payload (an int width or a layout).

    Interface attributes
    --------------------
    i : In(stream.Signature(shape))
        The source side; ``i.ready`` is a flip-flop's output (the skid register is empty).
    o : Out(stream.Signature(shape))
        The sink side; ``o.valid`` and ``o.payload`` are flip-flops.

    Latency one cycle (a word taken in is offered the next cycle at the earliest);
    throughput one word a cycle; words leave in order, none lost or repeated under any
    ``valid``/``ready`` pattern. Holds two words at most.
    """

    def __init__(self, shape):
        self.shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        main_v, skid_v = Signal(), Signal()
        main_d = Signal(self.shape, reset_less=True)  # read only while main_v
        skid_d = Signal(self.shape, reset_less=True)  # read only while skid_v
        m.d.comb += [
            self.i.ready.eq(~skid_v),
            self.o.valid.eq(main_v),
            self.o.payload.eq(main_d),
        ]
        take_in = self.i.valid & ~skid_v
        with m.If(~main_v | self.o.ready):
            # main is free after this cycle: the skid word first, else the source's
            with m.If(skid_v):
                m.d.sync += [main_d.eq(skid_d), main_v.eq(1), skid_v.eq(0)]
            with m.Else():
                m.d.sync += [main_d.eq(self.i.payload), main_v.eq(take_in)]
        with m.Elif(take_in):
            # the sink stalls with main full: the source's word waits in the skid
            m.d.sync += [skid_d.eq(self.i.payload), skid_v.eq(1)]
        return m
