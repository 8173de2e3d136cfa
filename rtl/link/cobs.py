"""COBS (Consistent Overhead Byte Stuffing) for the host link (docs/protocol.md, "Frames").

* :class:`CobsDecoder`: the received byte stream (``0x00`` delimiters included) in,
  decoded frame bytes and an end-of-frame beat per non-empty frame out. Combinational,
  one byte per cycle.
* :class:`CobsEncoder`: encodes a frame held in a memory (random access, read latency
  ``latency`` cycles) and ends it with a delimiter. It scans ahead for the next zero instead of
  holding a 254-byte block in a FIFO.

Both produce the bytes of ``pentegg.link.cobs_encode``/``cobs_decode`` exactly.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["CobsDecoder", "CobsEncoder", "decoded_layout"]

#: A decoded beat: a frame byte (``end`` = 0), or the end of a non-empty frame
#: (``end`` = 1, ``data`` unused, ``error`` = 1 for a block running past the delimiter).
decoded_layout = data.StructLayout({"data": 8, "end": 1, "error": 1})


class CobsDecoder(wiring.Component):
    """Decodes COBS frames on the fly.

    Interface attributes
    --------------------
    i : In(stream.Signature(8))
        Raw bytes, delimiters included.
    o : Out(stream.Signature(decoded_layout))
        One beat per decoded byte (a code byte that ends a block shorter than 254 bytes
        becomes the zero it stands for, emitted when the next block starts, so a trailing
        zero is never emitted), and one ``end`` beat per delimiter that closes a non-empty
        frame. ``error`` on the ``end`` beat: the last code byte pointed past the
        delimiter. Empty frames (two delimiters in a row) produce nothing.

    Latency 0 (combinational from ``i`` to ``o``); throughput one byte per cycle.
    """

    def __init__(self):
        super().__init__({"i": In(stream.Signature(8)), "o": Out(stream.Signature(decoded_layout))})

    def elaborate(self, platform):
        m = Module()
        left = Signal(8)  # bytes left in the current block; 0: the next byte is a code
        code_255 = Signal()  # the last code byte was 255 (no zero after its block)
        started = Signal()  # a byte of this frame has been received
        byte = self.i.payload
        out = self.o.payload
        # does this input byte produce an output beat?
        is_delim = byte == 0
        is_code = ~is_delim & (left == 0)
        emits = is_delim & started | is_code & started & ~code_255 | ~is_delim & (left != 0)
        m.d.comb += [
            self.o.valid.eq(self.i.valid & emits),
            self.i.ready.eq(self.o.ready | ~emits),
            out.data.eq(0),
            out.end.eq(is_delim),
            out.error.eq(left != 0),
        ]
        with m.If(~is_delim & (left != 0)):
            m.d.comb += out.data.eq(byte)
        with m.If(self.i.valid & self.i.ready):
            with m.If(is_delim):
                m.d.sync += [left.eq(0), started.eq(0), code_255.eq(0)]
            with m.Elif(is_code):
                m.d.sync += [left.eq(byte - 1), started.eq(1), code_255.eq(byte == 255)]
            with m.Else():
                m.d.sync += left.eq(left - 1)
        return m


class CobsEncoder(wiring.Component):
    """Encodes the ``length`` bytes at addresses ``0..length-1`` of a byte source and
    sends them, then a ``0x00`` delimiter, on ``o``.

    Parameters
    ----------
    addr_bits : int
        Width of ``length`` and ``addr`` (1..24).
    latency : int
        Read latency of the byte source, 1..4 (default 1): ``data`` is the byte at the
        ``addr`` of ``latency`` cycles before. The link engine reads at latency 3 (its
        address registered before the header's select, the frame buffer's block RAM
        output registered once more), so that no path runs from a block RAM's output
        into the encoder's state.

    Interface attributes
    --------------------
    start : In(1)
        Strobe (while ``busy`` is low): encode ``length`` bytes (sampled at ``start``).
    length : In(addr_bits)
    addr : Out(addr_bits), data : In(8)
        The byte source (a memory read port, always enabled, plus ``latency - 1``
        registers). ``addr`` is a function of the state only (not of ``o.ready``).
    addr_prev : Out(addr_bits)
        ``addr - 1`` (modulo ``2**addr_bits``) while bytes are read (the scan's and the
        emit's states), from one register of its own (no subtractor after ``addr``'s
        multiplexer, no choice by the state): the link engine's frame buffer holds
        response byte ``i`` at ``i - 1``.
    o : Out(stream.Signature(8))
    busy : Out(1)
        From the cycle after ``start`` until the delimiter has been sent.

    Throughput: each byte is read twice, once to find the end of its block and once to
    send it. The scan reads a byte per cycle (``latency`` cycles to start it); the send
    takes ``latency + 1`` cycles per byte (the address waits for ``o.ready``); plus
    three cycles per block (a block ends at a zero or after 254 bytes). At latency 3,
    about five cycles per byte: a UART byte takes 10 bit times of many cycles each.
    """

    def __init__(self, addr_bits: int, *, latency: int = 1):
        self.addr_bits = check_int("addr_bits", addr_bits, 1, 24)
        self.latency = check_int("latency", latency, 1, 4)
        super().__init__(
            {
                "start": In(1),
                "length": In(addr_bits),
                "addr": Out(addr_bits),
                "addr_prev": Out(addr_bits),
                "data": In(8),
                "o": Out(stream.Signature(8)),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        n = self.addr_bits + 1
        lat = self.latency
        p = Signal(n)  # the current block's first byte
        q = Signal(n)  # scan: the first byte not in the block (the byte ``data`` is)
        a = Signal(n)  # scan: the next address read (``q + latency`` once started)
        r = Signal(n)  # emit: the next byte to send
        # addr_prev: a - 1 in the scan's states, r - 1 in the emit's, one register set
        # with a and r (a changes only in the scan's states and when they are entered, r
        # only in the emit's and when they are entered), so no choice by the state lies
        # between it and the frame buffer's read address (the state through that choice
        # into the block RAM's address was the critical path of the 128-lane ULX3S build
        # for 100 MHz at dd3e446, seed 2: 10.17 ns, 8.57 of it routing)
        a1 = Signal(n)
        # length - q and q - p (the block's bytes so far) as counters set with q and p,
        # so that the block's end is a compare of a register with a constant, not a
        # subtraction and a compare of two (those into the state had 3 of the 128-lane
        # ULX3S build's endpoints past 9.3 ns at dace236, at both seeds)
        rem = Signal(n)
        blk = Signal(range(256))
        w = Signal(range(lat + 1))  # cycles of a read so far
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [p.eq(0), q.eq(0), a.eq(0), w.eq(0)]
                    m.d.sync += [a1.eq(-1), rem.eq(self.length), blk.eq(0)]
                    m.next = "SCAN"
            with m.State("SCAN"):  # issue the reads of q .. q + latency - 1
                m.d.comb += self.addr.eq(a)
                with m.If((rem == 0) | (blk == 254)):
                    m.next = "CODE"
                with m.Else():
                    m.d.sync += [a.eq(a + 1), a1.eq(a1 + 1), w.eq(w + 1)]
                    with m.If(w == lat - 1):
                        m.next = "SCAN_D"
            with m.State("SCAN_D"):  # data: the byte at q; the one at a is read meanwhile
                m.d.comb += self.addr.eq(a)
                with m.If(self.data == 0):
                    m.next = "CODE"
                with m.Else():
                    m.d.sync += [q.eq(q + 1), a.eq(a + 1), a1.eq(a1 + 1)]
                    m.d.sync += [rem.eq(rem - 1), blk.eq(blk + 1)]
                    with m.If((rem == 1) | (blk == 253)):
                        m.next = "CODE"
            with m.State("CODE"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(blk + 1)]
                with m.If(self.o.ready):
                    m.d.sync += [r.eq(p), a1.eq(p - 1), w.eq(0)]
                    m.next = "EMIT"
            with m.State("EMIT"):  # read the byte at r
                m.d.comb += self.addr.eq(r)
                with m.If(r == q):
                    m.next = "NEXT"
                with m.Else():
                    m.d.sync += w.eq(w + 1)
                    with m.If(w == lat - 1):
                        m.next = "EMIT_D"
            with m.State("EMIT_D"):  # data: the byte at r, held until it is taken
                m.d.comb += self.addr.eq(r)
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(self.data)]
                with m.If(self.o.ready):
                    m.d.sync += [r.eq(r + 1), a1.eq(a1 + 1), w.eq(0)]
                    with m.If(r + 1 == q):
                        m.next = "NEXT"
                    with m.Else():
                        m.next = "EMIT"
            with m.State("NEXT"):
                m.d.sync += w.eq(0)
                with m.If(blk == 254):  # a full block: no zero consumed
                    m.d.sync += [p.eq(q), a.eq(q), a1.eq(q - 1), blk.eq(0)]
                    m.next = "SCAN"
                with m.Elif(rem == 0):
                    m.next = "DELIM"
                with m.Else():  # skip the zero that ended the block
                    m.d.sync += [p.eq(q + 1), q.eq(q + 1), a.eq(q + 1), a1.eq(q)]
                    m.d.sync += [rem.eq(rem - 1), blk.eq(0)]
                    m.next = "SCAN"
            with m.State("DELIM"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(0)]
                with m.If(self.o.ready):
                    m.next = "IDLE"
        m.d.comb += [self.addr_prev.eq(a1), self.busy.eq(~fsm.ongoing("IDLE"))]
        return m
