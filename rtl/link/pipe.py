"""StreamRegister: one register stage on a stream, every signal across it from a
flip-flop.

::

    i.valid, i.payload --> [valid_r, payload_r] --> o.valid, o.payload
    i.ready <-- ~valid_r

A word moves in when the register is empty and out when the sink takes it, so no
combinational path crosses the stage in either direction: the source's state and
payload multiplexers do not reach the sink's decode, nor the sink's ready the
source's state. The price is a cycle of latency and half the throughput, a word every
other cycle, which the links it serves (a UART's bytes, the command and response words
between the LinkEngine and the Accelerator, a few cycles a word) never approach; a
full-rate stage is :class:`pentegg.rtl.evaluator.skid.SkidBuffer` (two registers).
Between the LinkEngine and the Accelerator's command decoder the engine's word
multiplexer into the decoder's zero test and next state (6 LUT levels) was the
128-lane ULX3S build's second-worst path at ``cd6a36f`` (seed 1, 11.34 ns); between
the UART receiver (beside its pin) and the engine's COBS decoder (across the die), the
decoder's ready into the receiver's overrun count was its critical path at
``22de219`` (seed 1, 12.37 ns, 10.16 of it routing).
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..evaluator.pass_engine import REPLICA_ATTR
from ..params import check_int

__all__ = ["StreamRegister"]


class StreamRegister(wiring.Component):
    """A stream of ``width``-bit words (1..1024) through one register stage.

    Parameters
    ----------
    width : int
        Bits per word, 1..1024.
    copies : int
        1..width (default 1): the valid flag in this many flip-flops, copy ``k`` the
        load enable of the payload's ``k``-th slice (``ceil(width / copies)`` bits), so
        that no one net enables every payload bit. A slice loads the source's payload
        in every cycle its copy says empty (the word that moves in is the one it holds
        next cycle; what it takes while nothing moves in is never offered).

    Interface attributes
    --------------------
    i : In(stream.Signature(width))
        The source side: a word moves in when ``i.valid & i.ready``; ``i.ready`` is a
        flip-flop's output (the register is empty).
    o : Out(stream.Signature(width))
        The sink side: ``o.valid`` and ``o.payload`` are flip-flops.

    Latency one cycle (a word taken in is offered the next cycle); throughput one word
    every two cycles; no word is lost or repeated under any ``valid``/``ready`` pattern.
    """

    def __init__(self, width: int, copies: int = 1):
        self.width = check_int("width", width, 1, 1024)
        self.copies = check_int("copies", copies, 1, width)
        super().__init__({"i": In(stream.Signature(width)), "o": Out(stream.Signature(width))})

    def elaborate(self, platform):
        m = Module()
        n = self.copies
        valid = [
            Signal(name=f"valid{k}" if n > 1 else "valid", attrs={REPLICA_ATTR: 1} if n > 1 else {})
            for k in range(n)
        ]
        payload = Signal(self.width, reset_less=True)  # read only while valid
        m.d.comb += [
            self.i.ready.eq(~valid[0]),
            self.o.valid.eq(valid[0]),
            self.o.payload.eq(payload),
        ]
        # every copy from itself (all hold the same value): a copy's next value is a
        # function of three nets (itself, the sink's ready, the source's valid), one
        # LUT beside it, not a fourth from valid0 across the chip
        for v in valid:
            with m.If(v):
                with m.If(self.o.ready):
                    m.d.sync += v.eq(0)
            with m.Elif(self.i.valid):
                m.d.sync += v.eq(1)
        chunk = -(-self.width // n)
        for k, v in enumerate(valid):
            lo, hi = k * chunk, min(self.width, (k + 1) * chunk)
            if lo < hi:
                with m.If(~v):
                    m.d.sync += payload[lo:hi].eq(self.i.payload[lo:hi])
        return m
