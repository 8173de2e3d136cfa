"""CommandDecoder: the accelerator's word-level command set (docs/rtl.md, "Commands").

A command is a 32-bit header word, ``op`` in bits ``[31:28]``, followed by its operands:

========  ====================================  =======================================
op        header fields, following words        response words
========  ====================================  =======================================
1 WREG    ``reg = [7:0]``; value                none
2 RREG    ``reg = [7:0]``                       the register's value
3 WMEM    ``sel = [27:24]``, ``addr = [23:0]``;  none
          count ``n`` (0: none); ``n`` words
4 RMEM    ``sel``, ``addr``; count ``n``        ``n`` words
5 RUN     ``kind = [3:0]``                      none (poll ``status``)
========  ====================================  =======================================

Memory words carry their value in the low bits (a weight word 16 bits, a sample byte 8,
a score ``score_bits`` sign-extended). A *packed* select (the ``packed`` parameter: the
protocol's ``samples_packed`` and ``member_x_packed``) writes a byte memory four bytes a
word: ``WMEM`` of a packed select at ``addr`` writes the byte memory's bytes from
``4 addr`` on, each word's bits ``[7:0]`` first; the accesses leave the decoder as byte
writes of the byte memory's select. Writes (registers and memories), memory reads and
``RUN`` wait while the accelerator is ``busy``; ``RREG`` never waits, so a host polls
``status`` and ``step`` during a run. An unknown ``op`` sets ``bad_command`` (until the
next ``RUN``) and the word is dropped (the next word is read as a header).

Throughput: one command or data word per cycle on writes (four cycles per word of a
packed select: a byte a cycle); five cycles per word read from
a memory (address, two waits, data, response beat), three per register read (the
register file's two-cycle read, the response beat), more under back-pressure.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["CommandDecoder", "Op"]


class Op(enum.Enum, shape=4):
    WREG = 1
    RREG = 2
    WMEM = 3
    RMEM = 4
    RUN = 5


class CommandDecoder(wiring.Component):
    """Commands in, register and memory accesses and run strobes out (module docstring).

    Parameters
    ----------
    packed : dict of int to int
        Packed select -> the select of the byte memory it writes (each 0..15, a packed
        select not also a byte memory's): a ``WMEM`` of a packed select writes four
        bytes a word (module docstring). ``RMEM`` of a packed select is not decoded
        specially (the link engine refuses it).

    Interface attributes
    --------------------
    cmd : In(stream.Signature(32)), rsp : Out(stream.Signature(32))
    busy : In(1)
        The accelerator runs: writes, memory reads and RUN wait.
    reg_waddr : Out(8), reg_wdata : Out(32), reg_wen : Out(1)
    reg_raddr : Out(8), reg_rdata : In(32)
        Register file ports (read latency 2: ``reg_raddr`` holds from the RREG header on).
    mem_sel : Out(4), mem_addr : Out(24), mem_wdata : Out(32), mem_wen : Out(1),
    mem_ren : Out(1), mem_rdata : In(32)
        Host memory port; ``mem_rdata`` is sampled three cycles after ``mem_ren`` (the
        address held), so the read data of a memory of read latency two can be
        registered before the host's select of them (no block RAM output meets that
        multiplexer unregistered).
    run : Out(1), run_kind : Out(4)
        Strobe: start a run of ``run_kind``.
    bad_command : Out(1)
        Sticky: an unknown op was received (cleared by a RUN).
    """

    def __init__(self, packed: dict[int, int] | None = None):
        self.packed = {}
        for k, v in (packed or {}).items():
            check_int("packed select", k, 0, 15)
            check_int(f"packed[{k}]", v, 0, 15)
            self.packed[k] = v
        if set(self.packed) & set(self.packed.values()):
            raise ValueError(f"packed={packed!r}: a select both packed and a byte memory")
        super().__init__(
            {
                "cmd": In(stream.Signature(32)),
                "rsp": Out(stream.Signature(32)),
                "busy": In(1),
                "reg_waddr": Out(8),
                "reg_wdata": Out(32),
                "reg_wen": Out(1),
                "reg_raddr": Out(8),
                "reg_rdata": In(32),
                "mem_sel": Out(4),
                "mem_addr": Out(24),
                "mem_wdata": Out(32),
                "mem_wen": Out(1),
                "mem_ren": Out(1),
                "mem_rdata": In(32),
                "run": Out(1),
                "run_kind": Out(4),
                "bad_command": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        head = Signal(32)
        count = Signal(32)
        # count == 1 as a flag set with count (the 32-bit compare before the address's
        # and the state's enables: 4 of the 128-lane ULX3S build's 109 endpoints past
        # 10 ns at b56882b, seed 1)
        count_one = Signal()
        addr = Signal(24)
        rdata = Signal(32)
        word = self.cmd.payload
        take = self.cmd.valid & self.cmd.ready
        # a packed WMEM: its byte memory's select, the byte address, and per word the
        # three bytes after the first (written from ``rest`` while ``in_bytes``)
        sel = Signal(4)
        pack = Signal()  # the command's select is packed
        rest = Signal(24)
        in_bytes = Signal()
        byte_n = Signal(2)  # bytes of ``rest`` left - 1
        last_word = Signal()  # the word in ``rest`` is the command's last
        m.d.comb += [
            self.reg_waddr.eq(head[:8]),
            self.reg_raddr.eq(head[:8]),
            self.reg_wdata.eq(word),
            self.mem_sel.eq(sel),
            self.mem_addr.eq(addr),
            self.mem_wdata.eq(Cat(Mux(in_bytes, rest[:8], word[:8]), word[8:])),
            self.run_kind.eq(head[:4]),
        ]

        with m.FSM():
            with m.State("HEAD"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [
                        head.eq(word),
                        addr.eq(word[:24]),
                        sel.eq(word[24:28]),
                        pack.eq(0),
                    ]
                    with m.If(word[28:] == Op.WMEM):
                        for k, v in self.packed.items():
                            with m.If(word[24:28] == k):
                                m.d.sync += [addr.eq(word[:22] << 2), sel.eq(v), pack.eq(1)]
                    with m.Switch(word[28:]):
                        with m.Case(Op.WREG):
                            m.next = "WREG"
                        with m.Case(Op.RREG):
                            m.next = "RREG"
                        with m.Case(Op.WMEM, Op.RMEM):
                            m.next = "COUNT"
                        with m.Case(Op.RUN):
                            m.next = "RUN"
                        with m.Default():
                            m.d.sync += self.bad_command.eq(1)
            with m.State("WREG"):
                m.d.comb += [self.cmd.ready.eq(~self.busy), self.reg_wen.eq(take)]
                with m.If(take):
                    m.next = "HEAD"
            # the register file's read takes two cycles (its latency), head holding the
            # address
            with m.State("RREG"):
                m.next = "RREG_1"
            with m.State("RREG_1"):
                m.next = "RREG_SEND"
            with m.State("RREG_SEND"):
                m.d.comb += [self.rsp.valid.eq(1), self.rsp.payload.eq(self.reg_rdata)]
                with m.If(self.rsp.ready):
                    m.next = "HEAD"
            with m.State("COUNT"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [count.eq(word), count_one.eq(word == 1)]
                    with m.If(word == 0):
                        m.next = "HEAD"
                    with m.Elif(head[28:] == Op.WMEM):
                        m.next = "WDATA"
                    with m.Else():
                        m.next = "RADDR"
            with m.State("WDATA"):
                m.d.comb += [self.cmd.ready.eq(~self.busy), self.mem_wen.eq(take)]
                with m.If(take):
                    m.d.sync += [addr.eq(addr + 1), count.eq(count - 1), count_one.eq(count == 2)]
                    with m.If(pack):
                        m.d.sync += [
                            rest.eq(word[8:]),
                            in_bytes.eq(1),
                            byte_n.eq(2),
                            last_word.eq(count_one),
                        ]
                        m.next = "WBYTES"
                    with m.Elif(count_one):
                        m.next = "HEAD"
            # a packed word's bytes 1..3, a byte a cycle (while not busy, as WDATA)
            with m.State("WBYTES"):
                m.d.comb += self.mem_wen.eq(~self.busy)
                with m.If(~self.busy):
                    m.d.sync += [addr.eq(addr + 1), rest.eq(rest >> 8), byte_n.eq(byte_n - 1)]
                    with m.If(byte_n == 0):
                        m.d.sync += in_bytes.eq(0)
                        with m.If(last_word):
                            m.next = "HEAD"
                        with m.Else():
                            m.next = "WDATA"
            with m.State("RADDR"):
                m.d.comb += self.mem_ren.eq(~self.busy)
                with m.If(~self.busy):
                    m.next = "RWAIT"
            with m.State("RWAIT"):
                m.next = "RWAIT2"
            with m.State("RWAIT2"):
                m.next = "RDATA"
            with m.State("RDATA"):
                m.d.sync += rdata.eq(self.mem_rdata)
                m.next = "RSEND"
            with m.State("RSEND"):
                m.d.comb += [self.rsp.valid.eq(1), self.rsp.payload.eq(rdata)]
                with m.If(self.rsp.ready):
                    m.d.sync += [addr.eq(addr + 1), count.eq(count - 1), count_one.eq(count == 2)]
                    with m.If(count_one):
                        m.next = "HEAD"
                    with m.Else():
                        m.next = "RADDR"
            with m.State("RUN"):
                m.d.comb += self.run.eq(~self.busy)
                with m.If(~self.busy):
                    m.d.sync += self.bad_command.eq(0)
                    m.next = "HEAD"
        return m
