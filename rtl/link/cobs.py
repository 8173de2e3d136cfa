"""COBS (Consistent Overhead Byte Stuffing) for the host link (docs/protocol.md, "Frames").

* :class:`CobsDecoder`: the received byte stream (``0x00`` delimiters included) in,
  decoded frame bytes and an end-of-frame beat per non-empty frame out. Combinational,
  one byte per cycle.
* :class:`CobsEncoder`: encodes a frame held in a memory (random access, read latency
  one cycle) and ends it with a delimiter. It scans ahead for the next zero instead of
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

    Interface attributes
    --------------------
    start : In(1)
        Strobe (while ``busy`` is low): encode ``length`` bytes (sampled at ``start``).
    length : In(addr_bits)
    addr : Out(addr_bits), data : In(8)
        The byte source: ``data`` is the byte at the ``addr`` of the previous cycle
        (a memory read port with latency 1, always enabled).
    o : Out(stream.Signature(8))
    busy : Out(1)
        From the cycle after ``start`` until the delimiter has been sent.

    Throughput: each byte is read twice, once to find the end of its block and once to
    send it, one cycle each: about two cycles per byte, plus three per block (a block
    ends at a zero or after 254 bytes). ``addr`` depends combinationally on ``o.ready``.
    """

    def __init__(self, addr_bits: int):
        self.addr_bits = check_int("addr_bits", addr_bits, 1, 24)
        super().__init__(
            {
                "start": In(1),
                "length": In(addr_bits),
                "addr": Out(addr_bits),
                "data": In(8),
                "o": Out(stream.Signature(8)),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        n = self.addr_bits + 1
        length = Signal(n)
        p = Signal(n)  # the current block's first byte
        q = Signal(n)  # scan: the first byte not in the block
        r = Signal(n)  # emit: the next byte to send
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [length.eq(self.length), p.eq(0), q.eq(0)]
                    m.next = "SCAN"
            with m.State("SCAN"):
                m.d.comb += self.addr.eq(q)
                with m.If((q == length) | (q - p == 254)):
                    m.next = "CODE"
                with m.Else():
                    m.next = "SCAN_D"
            with m.State("SCAN_D"):  # data: the byte at q; the next one is read meanwhile
                m.d.comb += self.addr.eq(q + 1)
                with m.If(self.data == 0):
                    m.next = "CODE"
                with m.Else():
                    m.d.sync += q.eq(q + 1)
                    with m.If((q + 1 == length) | (q + 1 - p == 254)):
                        m.next = "CODE"
            with m.State("CODE"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(q - p + 1)]
                with m.If(self.o.ready):
                    m.d.sync += r.eq(p)
                    m.next = "EMIT"
            with m.State("EMIT"):
                m.d.comb += self.addr.eq(r)
                with m.If(r == q):
                    m.next = "NEXT"
                with m.Else():
                    m.next = "EMIT_D"
            with m.State("EMIT_D"):  # data: the byte at r
                m.d.comb += [self.addr.eq(r), self.o.valid.eq(1), self.o.payload.eq(self.data)]
                with m.If(self.o.ready):
                    m.d.comb += self.addr.eq(r + 1)
                    m.d.sync += r.eq(r + 1)
                    with m.If(r + 1 == q):
                        m.next = "NEXT"
            with m.State("NEXT"):
                with m.If(q - p == 254):  # a full block: no zero consumed
                    m.d.sync += p.eq(q)
                    m.next = "SCAN"
                with m.Elif(q == length):
                    m.next = "DELIM"
                with m.Else():  # skip the zero that ended the block
                    m.d.sync += [p.eq(q + 1), q.eq(q + 1)]
                    m.next = "SCAN"
            with m.State("DELIM"):
                m.d.comb += [self.o.valid.eq(1), self.o.payload.eq(0)]
                with m.If(self.o.ready):
                    m.next = "IDLE"
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))
        return m
