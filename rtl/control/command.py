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
protocol's ``samples_packed``, ``member_x_packed``, ``weights_packed``,
``latent_packed`` and ``logits_packed``) carries several elements of another memory a
word, 8 or 16 bits each, the first in the low bits: ``WMEM`` (``RMEM``) of a packed
select the host may write (read) at ``addr`` writes (reads) the memory's elements from
``(32 / bits) addr`` on; the accesses leave the decoder as element accesses of that
memory's select (a read's element is its low ``bits``: a signed memory's two's
complement). The other direction is decoded as of an unpacked select, which reaches no
memory.

Throughput: one command or data word per cycle on writes (a packed word: an element a
cycle); five cycles per word read from a memory (address, two waits, data, response
beat; a packed word: four per element and the beat), three per register read (the
register file's two-cycle read, the response beat), more under back-pressure.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_choice, check_int

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
    packed : dict of int to (int, int, str)
        Packed select -> (the select of the memory it reaches, element bits: 8 or 16,
        the host's access: ``"r"``, ``"w"`` or ``"rw"``); selects 0..15, a packed select
        not also a target (module docstring). The link engine refuses the other
        direction before it reaches the decoder.

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

    def __init__(self, packed: dict[int, tuple[int, int, str]] | None = None):
        self.packed = {}
        for k, (v, bits, access) in (packed or {}).items():
            check_int("packed select", k, 0, 15)
            check_int(f"packed[{k}] select", v, 0, 15)
            if bits not in (8, 16):
                raise ValueError(f"packed[{k}] element bits={bits!r} is not one of 8, 16")
            check_choice(f"packed[{k}] access", access, ("r", "w", "rw"))
            self.packed[k] = (v, bits, access)
        if set(self.packed) & {v for v, _, _ in self.packed.values()}:
            raise ValueError(f"packed={packed!r}: a select both packed and a target")
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
        # a packed command: its target's select and element address; per word the
        # elements after the first (a write's, from ``rest`` while ``in_elems``) or
        # before the last (a read's, gathered into ``rdata`` from the top)
        sel = Signal(4)
        pack = Signal()  # the command's select is packed
        half = Signal()  # ... with 16-bit elements (else 8)
        rest = Signal(24)
        in_elems = Signal()
        elem_n = Signal(2)  # elements of the word left - 1
        last_word = Signal()  # the word in ``rest`` is the command's last
        m.d.comb += [
            self.reg_waddr.eq(head[:8]),
            self.reg_raddr.eq(head[:8]),
            self.reg_wdata.eq(word),
            self.mem_sel.eq(sel),
            self.mem_addr.eq(addr),
            self.mem_wdata.eq(Cat(Mux(in_elems, rest[:16], word[:16]), word[16:])),
            self.run_kind.eq(head[:4]),
        ]
        last_elem = Mux(half, 1, 3)  # elem_n at a word's first element (elements - 1)

        with m.FSM():
            with m.State("HEAD"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [
                        head.eq(word),
                        addr.eq(word[:24]),
                        sel.eq(word[24:28]),
                        pack.eq(0),
                        half.eq(0),
                    ]
                    for k, (v, bits, access) in self.packed.items():
                        ops = [Op.WMEM] * ("w" in access) + [Op.RMEM] * ("r" in access)
                        hit = (word[24:28] == k) & Cat(word[28:] == op for op in ops).any()
                        with m.If(hit):
                            first = word[:22] << 2 if bits == 8 else word[:23] << 1
                            m.d.sync += [
                                addr.eq(first),
                                sel.eq(v),
                                pack.eq(1),
                                half.eq(bits == 16),
                            ]
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
                        m.d.sync += elem_n.eq(last_elem)  # a packed read's elements
                        m.next = "RADDR"
            with m.State("WDATA"):
                m.d.comb += [self.cmd.ready.eq(~self.busy), self.mem_wen.eq(take)]
                with m.If(take):
                    m.d.sync += [addr.eq(addr + 1), count.eq(count - 1), count_one.eq(count == 2)]
                    with m.If(pack):
                        m.d.sync += [
                            rest.eq(Mux(half, word[16:], word[8:])),
                            in_elems.eq(1),
                            elem_n.eq(last_elem - 1),
                            last_word.eq(count_one),
                        ]
                        m.next = "WELEMS"
                    with m.Elif(count_one):
                        m.next = "HEAD"
            # a packed word's elements after the first, one a cycle (while not busy, as
            # WDATA)
            with m.State("WELEMS"):
                m.d.comb += self.mem_wen.eq(~self.busy)
                with m.If(~self.busy):
                    m.d.sync += [
                        addr.eq(addr + 1),
                        rest.eq(Mux(half, rest >> 16, rest >> 8)),
                        elem_n.eq(elem_n - 1),
                    ]
                    with m.If(elem_n == 0):
                        m.d.sync += in_elems.eq(0)
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
                with m.If(pack):  # the element into the top, the earlier ones down
                    m.d.sync += [
                        rdata.eq(
                            Mux(
                                half,
                                Cat(rdata[16:], self.mem_rdata[:16]),
                                Cat(rdata[8:], self.mem_rdata[:8]),
                            )
                        ),
                        addr.eq(addr + 1),
                        elem_n.eq(elem_n - 1),
                    ]
                    with m.If(elem_n == 0):
                        m.next = "RSEND"
                    with m.Else():
                        m.next = "RADDR"
                with m.Else():
                    m.d.sync += rdata.eq(self.mem_rdata)
                    m.next = "RSEND"
            with m.State("RSEND"):
                m.d.comb += [self.rsp.valid.eq(1), self.rsp.payload.eq(rdata)]
                with m.If(self.rsp.ready):
                    m.d.sync += [count.eq(count - 1), count_one.eq(count == 2)]
                    m.d.sync += elem_n.eq(last_elem)
                    with m.If(~pack):
                        m.d.sync += addr.eq(addr + 1)
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
