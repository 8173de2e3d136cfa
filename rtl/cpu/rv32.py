"""RV32Core: a small RV32I CPU for the control firmware of a compact accelerator.

It runs the accelerator's control firmware (host protocol, registers, scheduling); the
arithmetic of a training step stays in dedicated hardware. Size and clock come first:
one bus for instructions and data, the register file in block RAM, and a short pipeline
built for the iCE40UP5K, where one LUT level with its routing costs about 2.7 ns and a
32-bit carry chain about 11 ns (so no adder has a multiplexer before or after it in the
same cycle, and the 33-bit adder is split in two with carry select).
``sim/rv32_iss.py`` is its instruction-set model (the same instructions, the same
halting and the same treatment of unaligned addresses); ``tests/test_rtl_cpu.py`` runs
both side by side.
"""

from __future__ import annotations

from amaranth import Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from ..bram import NO_RW_CHECK, RWWatch
from ..params import check_int

__all__ = ["BUS_SIGNATURE", "CSR_CYCLE", "CSR_CYCLEH", "CycleCounter", "RV32Core"]

#: The core's one memory bus, seen from the core (see :class:`RV32Core`).
BUS_SIGNATURE = wiring.Signature(
    {
        "addr": Out(30),
        "wdata": Out(32),
        "wmask": Out(4),
        "write": Out(1),
        "valid": Out(1),
        "rdata": In(32),
        "ready": In(1),
    }
)

# major opcodes (instruction bits [6:2])
_LOAD, _MISC_MEM, _OP_IMM, _AUIPC = 0b00000, 0b00011, 0b00100, 0b00101
_STORE, _OP, _LUI = 0b01000, 0b01100, 0b01101
_BRANCH, _JALR, _JAL, _SYSTEM = 0b11000, 0b11001, 0b11011, 0b11100
_OPCODES = (_LOAD, _MISC_MEM, _OP_IMM, _AUIPC, _STORE, _OP, _LUI, _BRANCH, _JALR, _JAL, _SYSTEM)

#: The readable CSRs (``rdcycle``, ``rdcycleh``).
CSR_CYCLE, CSR_CYCLEH = 0xC00, 0xC80


def _classes(w) -> dict:
    """The class of the instruction word ``w`` (one LUT level each): exact for RV32I's
    opcodes, anything for others (which the legality check refuses)."""
    return {
        "alu": w[4] & ~w[2] & ~w[6],  # OP, OP-IMM
        "op": w[4] & ~w[2] & ~w[6] & w[5],
        "load": ~w[2] & ~w[4] & ~w[5] & ~w[6],
        "store": ~w[2] & ~w[4] & w[5] & ~w[6],
        "branch": ~w[2] & ~w[4] & w[6],
        "jalr": w[2] & ~w[3] & ~w[4] & w[6],
        "jal": w[3] & w[6],
        "lui": w[2] & w[4] & w[5],
        "auipc": w[2] & w[4] & ~w[5],
        "system": w[4] & w[6],
        "misc": w[3] & ~w[6],  # MISC-MEM (fence)
        # (two LUT levels:) rd is not x0; the first E1 pass writes rd (but for a CSR
        # read: SYSTEM with funct3 != 0); some pass writes rd (the same)
        "rdnz": w[7:12] != 0,
        "w1": w[2] & w[4] & ~w[6] | w[2] & w[3] & w[6],  # LUI, AUIPC, JAL
        "wr": w[2] & w[4] & ~w[6] | w[2] & w[6] & ~w[4] | ~w[2] & ~w[4] & ~w[5] & ~w[6],
    }


def _sext(value, width: int = 32):
    """``value`` sign-extended to ``width`` bits."""
    return Cat(value, value[-1].replicate(width - len(value)))


class CycleCounter(Elaboratable):
    """A 64-bit count of clock cycles (``count``, from ``init`` at reset) in four 16-bit
    segments: a segment counts in the cycle in which every lower one is all ones, known
    a cycle ahead (the lowest one at ``0xFFFE``), so no carry chain is longer than 16
    bits (a 64-bit one would take about 20 ns on the UP5K)."""

    def __init__(self, init: int = 0, rst: Signal | None = None):
        self.init = check_int("init", init, 0, (1 << 64) - 1)
        #: with ``rst`` (a signal of the domain), the count returns to ``init`` in the
        #: cycles it is high, and not with the domain's reset
        self.rst = rst
        self.count = Signal(64, init=init, reset_less=rst is not None)

    def elaborate(self, platform):
        m = Module()
        seg = [self.count[16 * k : 16 * k + 16] for k in range(4)]
        first = [(self.init >> (16 * k)) & 0xFFFF for k in range(4)]
        # ones[k]: segments 0..k are all ones (segment k + 1 counts)
        ones = [
            Signal(
                name=f"carry{k}",
                init=all(v == 0xFFFF for v in first[: k + 1]),
                reset_less=self.rst is not None,
            )
            for k in range(3)
        ]
        m.d.sync += seg[0].eq(seg[0] + 1)
        for k in range(3):
            m.d.sync += ones[k].eq(
                (seg[0] == 0xFFFE) & Cat(*(s == 0xFFFF for s in seg[1 : k + 1]), 1).all()
            )
            with m.If(ones[k]):
                m.d.sync += seg[k + 1].eq(seg[k + 1] + 1)
        if self.rst is not None:
            with m.If(self.rst):
                m.d.sync += [self.count.eq(self.init), *(c.eq(c.init) for c in ones)]
        return m


class RV32Core(wiring.Component):
    """An RV32I core: every RV32I instruction, ``rdcycle``/``rdcycleh``, nothing else.

    Parameters
    ----------
    reset_addr : int
        Byte address of the first instruction fetched after reset (word aligned,
        0 .. 2**32 - 4; default 0).
    counters : bool
        ``True`` (default): ``rdcycle``/``rdcycleh`` (CSRs ``cycle`` 0xC00, ``cycleh``
        0xC80) read a 64-bit count of the clock cycles since reset. ``False``: they read
        0 (saves the counter and its read-out: 117 of the core's 1,054 LUT4 and 70 of
        its 805 flip-flops on the UP5K).

    Interface attributes
    --------------------
    bus : Out(BUS_SIGNATURE)
        Instruction fetches and data accesses, one at a time:

        * ``addr`` (30 bits): the word address (byte address >> 2); ``valid`` (1): a
          request; ``write`` (1): a store (0: a read); ``wmask`` (4): the byte enables of
          a store, bit ``i`` for ``wdata[8i : 8i + 8]`` (don't care on reads); ``wdata``
          (32): the store's bytes in their lanes (a byte store repeats its byte in all
          four lanes, a half-word store its half in both); ``rdata`` (32) in: the word
          read; ``ready`` (1) in.
        * A transfer happens in a cycle with ``valid & ready``: the slave performs the
          write (the bytes ``wmask`` selects), or the core takes ``rdata`` in that cycle.
          While ``valid & ~ready`` the core holds ``addr``, ``wdata``, ``wmask`` and
          ``write``. A new request may follow in the next cycle.
        * A slave may answer in the request's first cycle (combinational) or any number
          of cycles later; a block RAM answers the cycle after the request (one-cycle
          synchronous read: register the request, drive ``ready`` from that register
          for one cycle, ``rdata`` from the RAM). It must answer every request (the
          core has no time-out); ``ready`` outside ``valid`` is ignored. The core
          fetches instructions ahead (below): any read may be a fetch that is not used.
        * ``valid``, ``write``, ``wmask`` and ``wdata`` are registers; ``addr`` is one
          of two address registers (the fetch address, the data address) chosen by a
          third, one LUT level, but for bits 14..25 and 28..29, two (the data address's
          high half is registered in carry-select form; bits 26..27, a SoC's region
          decode, pass one). ``ready`` reaches registers through one or two LUT levels;
          ``rdata`` goes into registers (the instruction word, the load data), into a
          few more through one or two LUT levels (the opcode's class, a jump's offset)
          and through two or three into the fetch control (a jump stops the sequential
          fetch issued as it arrives).
    halted : Out(1)
        Goes high when the core executes ``ecall`` or ``ebreak`` (or an illegal
        instruction) and stays high until reset; the core then executes nothing more
        and makes at most two more requests (fetches of the instructions after it).
    fault : Out(1)
        Goes high together with ``halted`` when the instruction was illegal: an opcode or
        function code outside RV32I, a CSR access other than a read of ``cycle``/``cycleh``
        by ``csrrs``/``csrrsi`` with ``rs1``/``uimm`` = 0 (so ``csrw``, ``instret`` and
        ``time`` fault), ``fence.i``, ``mret``, ``wfi``, or a word whose two low bits
        are not ``11`` (the all-zero word included).

    Reset is the ``sync`` domain's reset (a SoC may wrap the core in a ``ResetInserter``).
    The core registers it: it reaches ``valid``'s register and one flip-flop, from which
    the control flip-flops return to their initial values in the cycle after (a local
    net, not the SoC's reset tree); the first fetch goes out two cycles after reset.
    ``pc`` (30 bits, an attribute for simulation, not a port) is the word address of the
    instruction in the execute unit (the last one it took); when halted, that of the
    halting instruction.

    Behaviour outside the happy path
    --------------------------------
    * Unaligned accesses do not trap; the low address bits a width does not use are
      ignored: ``lw``/``sw`` access the word at ``addr & ~3``, ``lh``/``lhu``/``sh`` the
      half word at ``addr & ~1`` (within the aligned word), ``lb``/``lbu``/``sb`` any
      byte. Jump and branch targets are truncated to a word (``target & ~3``): ``jalr``
      clears bit 0 as the ISA says, and bit 1 as well.
    * ``fence`` is a no-op (one bus, one access at a time: the data accesses are always
      in order). Instructions are fetched up to two ahead of the one executing (along
      the predicted path): a store to one of them is not seen by its execution (RV32I
      allows this without ``fence.i``, which is illegal here).
      ``ecall`` and ``ebreak`` stop the core (``halted`` without ``fault``).
    * ``x0``: register file entry 0 is never written (block RAM contents are zero at
      configuration; a write with ``rd`` = 0 is dropped), so it reads 0.
    * No interrupts, no exceptions, no other CSRs.

    Micro-architecture
    ------------------
    A front end fetches ahead and pre-decodes; the execute unit takes one instruction
    at a time:

    * fetch: the bus's next request is chosen from flip-flops, by priority: the data
      access (or ``jalr``'s target, or a mispredicted branch's other path) of the
      instruction executing; a jump's target (``jal``, a branch backward: static
      backward-taken prediction); the next sequential word, issued in the cycle its
      predecessor arrives (back to back with the slave's answer) unless that word is a
      jump, while the queue has room and no load or store is about to take the bus.
    * queue: the word arriving is registered as it is (``rbuf``, with its opcode class);
      the cycle after, it is pre-decoded into P (immediate, class flags, the legality
      check's terms, the register hazard) and a jump's target is computed (two 15-bit
      halves, carry select). rbuf and P hold two instructions: a fetch is issued only
      when its word will find rbuf free.
    * ``D``: while the execute unit is free it loads P's instruction and reads the
      register file (two read ports); it starts it (``go``) unless the instruction
      before writes a register it reads in this very cycle (W below).
    * ``E0``: the operands are selected into two 33-bit registers (rs1/rs2/immediate,
      the instruction's address, the cycle counter, 4), two LUT levels after the block
      RAM.
    * ``E1``: one adder computes everything: sums, differences, compares (bit 32 of a
      33-bit difference), addresses and the logic operations, written as sums of
      disjoint operands (``a | b = a + (b & ~a)``, ``a ^ b = 0 + (a ^ b)``,
      ``a & b = 0 + (a & b)``); a branch folds its sense and its prediction into the
      operands' sign bits so that the sign says "mispredicted". A data address (and
      ``jalr``'s target) goes to the bus at the end of E1.
    * ``W``: the result (or a load's data, aligned from the word registered as it
      arrived) is written to ``rd``, in the cycle after E1.

    Shifts iterate in the first operand register, 4 bits per cycle while 4 or more are
    left, then 1. ``slt``/``sltu`` take a second adder pass (the compare's sign as the
    carry in of ``0 + 0``), ``jalr`` one (the target first, then the link), a branch one
    in the cycle after its E1 (its other path, into the data address register). A
    mispredict is acted on the cycle after that: the queue, the fetch in flight and the
    instruction that entered E0 are dropped, and the other path is fetched.

    Cycles per instruction, one instruction after another, with a slave answering the
    cycle after the request (block RAM; a combinational slave saves a cycle on loads,
    stores and mispredicted branches, each wait state adds one per access), and with
    the compact SoC's (rtl/compact/soc.py: the answer two cycles after the request, a
    request every three cycles at most):

    ===========================================  ===========  =========  ===========
    instruction                                  block RAM    compact    (before)
    ===========================================  ===========  =========  ===========
    OP, OP-IMM (not shifts or compares), LUI,    3            3          3 / 4
    AUIPC, FENCE, ``rdcycle[h]``
    ... the next one reads the register this     +1           +1         +1 / +0
    one writes (W and D in the same cycle)
    branches predicted right, not taken          3            3          3 / 4
    (forward)
    JAL, branches predicted right, taken         3-4 (1)      5          3 / 4
    (backward)
    branches mispredicted                        8            9          6 / 8
    SLT, SLTI, SLTU, SLTIU                       5            5          5 / 5
    shifts by ``n``                              3 + n // 4 + n % 4 (3..13)
    JALR                                         6            7          6 / 7
    loads (+1 as above), stores (2)              5            6-7        5 / 7
    ===========================================  ===========  =========  ===========

    (1) 3 when the jump was fetched a cycle or more before the instruction ahead of it
    finished (a loop's branch), 4 when jumps follow each other. (2) The fetch of the
    instruction after the next waits for the data access: with the compact SoC, a load
    or store followed by another instruction takes 10 cycles for the two (block RAM: 8).
    The "before" column is the core before the fetch queue (block RAM / compact SoC).
    On the compact device's firmware (an ES step of the xor task) this core takes about
    9 % fewer cycles.

    Timing (iCE40UP5K, 48 MHz: 20.8 ns, of which about 2.7 ns per LUT level with its
    routing; a 15..17-bit carry chain with one LUT before or after it fits): no path
    goes from ``rdata`` or ``ready`` through the pre-decode, the hazard check or an
    adder; every adder is fed by flip-flops and feeds flip-flops (the E1 adder in
    carry-select form, 16 + 17 bits; the jump target, the next fetch address and the
    data address in 15 + 15-bit halves with the carry chosen before or after the
    register); the control flip-flops of the fetch unit are computed a cycle ahead, so
    that ``ready`` passes at most two LUT levels; the opcode's class is registered with
    the word, so that the pre-decode is two or three levels. In the iCEBreaker build
    (rtl/compact, 48 MHz) the paths left at about 20 ns are mostly outside the core
    (the flash boot's state machine, the MMIO and UART logic) and some from ``rdata``
    into the fetch control.

    Shifter: serial, in the first operand register; it costs 94 LUT4, of which 32 for
    the 4-bit step (without it a shift by 24 would take 24 cycles instead of 6). A barrel
    shifter does not fit between the block RAM and the operand register at 55 MHz on the
    UP5K (five multiplexer levels), and in a cycle of its own it made the core 1,132 LUT4
    instead of 933 (measured with Yosys, before the fetch queue). The firmware's shifts
    are mostly by constants (xorshift32's 13/17/5, CRC's 1, byte extraction by 8/16/24:
    2-7 extra cycles each).

    The register file is an ``amaranth.lib.memory`` of 32 words of 32 bits with two
    synchronous read ports and one write port (four ``SB_RAM40_4K`` on the iCE40: two
    copies of 2 x 16 bits), read only in D and written only in W; the hazard rule above
    keeps a read that D uses from a word written in the same cycle (``no_rw_check``).
    """

    def __init__(self, *, reset_addr: int = 0, counters: bool = True):
        check_int("reset_addr", reset_addr, 0, (1 << 32) - 4)
        if reset_addr % 4:
            raise ValueError(f"reset_addr={reset_addr:#x} is not word aligned")
        if not isinstance(counters, bool):
            check_int("counters", counters, 0, 1)
        self.reset_addr = reset_addr
        self.counters = bool(counters)
        super().__init__({"bus": Out(BUS_SIGNATURE), "halted": Out(1), "fault": Out(1)})
        #: the register file, created by ``elaborate`` (in simulation ``regfile.data[i]``
        #: is ``x<i>``)
        self.regfile = None
        #: word address of the last instruction fetched (for simulation)
        self.pc = Signal(30, init=reset_addr >> 2, reset_less=True)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        ready = bus.ready
        rdata = bus.rdata

        # ================================================================ state
        # The reset, registered: the domain's reset (a SoC's reset tree) reaches this one
        # flip-flop and ``b_valid``; the control flip-flops below return to their initial
        # values in the cycle after (``lrst``), from a local net.
        lrst = Signal(init=1)
        m.d.sync += lrst.eq(0)
        # execute unit: ``x_free`` (waiting for an instruction), then one-hot states; none
        # set: halted
        x_free = Signal(init=1, reset_less=True)
        x_e0 = Signal(reset_less=True)  # operands: register file outputs -> opa, opb
        x_e1 = Signal(reset_less=True)  # the adder: opa + opb -> sum
        x_shift = Signal(reset_less=True)  # serial shift of opa
        # set-less-than: the compare's sign -> operands of a second pass
        x_e2 = Signal(reset_less=True)
        x_mem = Signal(reset_less=True)  # a load or store waits for its data access
        second = Signal(reset_less=True)  # this E1 is a second pass
        writes = Signal(reset_less=True)  # this E1's sum goes to rd (in the next cycle, W)
        halted = Signal(reset_less=True)
        fault = Signal(reset_less=True)
        m.d.comb += [self.halted.eq(halted), self.fault.eq(fault)]
        ipc = self.pc  # the address of the instruction in the execute unit

        # the adder's registered sum, in carry-select form: the low half, its carry out and
        # the high half (with a compare's sign bit) for carry in 0 and 1
        sum_lo = Signal(16, reset_less=True)
        sum_c = Signal(reset_less=True)
        sum_h0 = Signal(17, reset_less=True)
        sum_h1 = Signal(17, reset_less=True)
        sumr = Cat(sum_lo, Mux(sum_c, sum_h1, sum_h0))
        sum32 = Signal(32)
        m.d.comb += sum32.eq(sumr[:32])
        top = Signal()  # the compare's sign (sumr[32]), from the registers by the adder
        m.d.comb += top.eq(sumr[32])
        x_br = Signal(reset_less=True)  # the cycle after a branch's E1
        e1_br = Signal(reset_less=True)  # this cycle is a branch's E1
        # a mispredicted branch, found in the cycle after its E1 and acted on in the next
        # (a flip-flop): drop what was fetched after it, and the instruction that entered
        # E0 after it
        flush = Signal(reset_less=True)
        m.d.sync += flush.eq(x_br & top)

        # ================================================================ bus unit
        # Every bus output comes from flip-flops: ``addr`` is the fetch address or the
        # data address (a multiplexer of two registers, by a third), the rest are
        # registers. A request is issued at the end of the cycle in which the bus is free
        # (idle, or its request answered): ``ready`` passes one LUT level (with
        # flip-flops) to the registers, ``rdata`` none but for the one flip-flop that
        # stops sequential fetching after a jump.
        f_addr = Signal(30, reset_less=True)  # instruction fetch address
        # the data access's address or jalr's target (from E1's adder), its high half in
        # carry-select form (the carry out of the low half, the high half for carry in 0
        # and 1): no LUT between the adder and these registers; bus.addr[14:] passes two
        # LUT levels (those bits only reach the SoC's region decode, into flip-flops)
        d_lo = Signal(14, reset_less=True)
        d_c = Signal(reset_less=True)
        d_h0 = Signal(16, reset_less=True)
        d_h1 = Signal(16, reset_less=True)
        # (but for bits 26 and 27, the SoC's region: ``d_rg``, the carry chosen before
        # the register, so that they pass one LUT level)
        d_rg = Signal(2, reset_less=True)
        d_hi = Mux(d_c, d_h1, d_h0)
        d_addr = Cat(d_lo, d_hi[:12], d_rg, d_hi[14:])
        a_sel = Signal(reset_less=True)  # bus.addr = d_addr
        b_valid = Signal()  # (the domain's reset)
        # (the registers below load with every request issued, the first one in the
        # cycle after reset: no reset of their own, which would enter their enables)
        b_data = Signal(reset_less=True)  # the request is a load's or store's data access
        b_write = Signal(reset_less=True)
        b_ldw = Signal(reset_less=True)  # ... a load whose word W writes to rd
        lv = Signal(reset_less=True)  # ... an instruction fetch whose word is used (not dropped)
        b_wmask = Signal(4, reset_less=True)
        wdata = Signal(32, reset_less=True)  # the store's data in its byte lanes (E0)
        m.d.comb += [
            bus.addr.eq(Mux(a_sel, d_addr, f_addr)),
            bus.valid.eq(b_valid),
            bus.write.eq(b_write),
            bus.wmask.eq(b_wmask),
            bus.wdata.eq(wdata),
        ]
        arrival = ready & lv  # an instruction word arrives
        data_done = b_valid & ready & b_data  # a load's word arrives, a store is done

        # ================================================================ fetch queue
        # rbuf: the word fetched (rpc its address), pre-decoded the cycle after into P
        # (when P is free); P: the next instruction for the execute unit
        rbuf = Signal(32, reset_less=True)
        rpc = Signal(30, reset_less=True)
        rfull = Signal(reset_less=True)
        rgot = Signal(reset_less=True)  # rbuf was loaded in the previous cycle
        pfull = Signal(reset_less=True)
        ldat = Signal(32, reset_less=True)  # the bus's read data, every cycle (loads)
        m.d.sync += ldat.eq(rdata)
        roff = Signal(12, reset_less=True)  # a jump's offset bits 2..4, 11..19 (words: 0..2, 9..17)
        r_sb = Signal(reset_less=True)
        r_u = Signal(reset_less=True)
        r_j = Signal(reset_less=True)
        rc = {k: Signal(name=f"r_{k}", reset_less=True) for k in _classes(rdata)}
        w = rdata
        with m.If(arrival):
            m.d.sync += [
                rbuf.eq(rdata),
                rpc.eq(bus.addr),
                roff.eq(
                    Mux(
                        w[3],
                        Cat(w[22:25], w[20], w[12:20]),  # J
                        Cat(w[9:12], w[7], w[31].replicate(8)),  # B
                    )
                ),
                # the immediate's format (outside RV32I: don't care)
                r_sb.eq(~w[2] & ~w[3] & ~w[4] & w[5]),  # STORE, BRANCH
                r_u.eq(w[2] & ~w[3] & w[4] & ~w[6]),  # LUI, AUIPC
                r_j.eq(w[2] & w[3] & w[6]),  # JAL
                # the opcode's class, exact for RV32I's opcodes (others: ``opc_ok``)
                *(rc[k].eq(v) for k, v in _classes(w).items()),
            ]
        m.d.sync += rgot.eq(arrival & ~flush)
        mv = rfull & ~pfull  # rbuf -> P
        # go: the instruction in P enters the execute unit (D)
        p_haz = Signal(reset_less=True)
        w_en = Signal(reset_less=True)
        go = pfull & x_free & ~(p_haz & w_en) & ~flush
        with m.If(flush):
            m.d.sync += [rfull.eq(0), pfull.eq(0)]
        with m.Else():
            m.d.sync += [rfull.eq(rfull & ~mv | arrival), pfull.eq(pfull & ~go | mv)]

        # ================================================================ register file
        self.regfile = rf = memory.Memory(shape=32, depth=32, init=[], attrs=NO_RW_CHECK)
        m.submodules.regfile = rf
        rp1 = rf.read_port(domain="sync")
        rp2 = rf.read_port(domain="sync")
        wp = rf.write_port()
        # W: the cycle after an E1 whose sum goes to rd, or after a load's data arrived
        d_rd = Signal(5, reset_less=True)
        w_rd = Signal(5, reset_less=True)
        w_ld = Signal(reset_less=True)  # W writes the load data
        m.d.sync += [
            w_en.eq(x_e1 & writes | ready & b_valid & b_ldw),
            w_rd.eq(d_rd),
            w_ld.eq(ready & b_valid & b_ldw),
        ]
        rs1 = rp1.data
        rs2 = rp2.data

        # ================================================================ pre-decode (P)
        # (from the opcode's class, registered with the word: shallow cones)
        word = rbuf
        opc = word[2:7]
        f3 = word[12:15]
        f7 = word[25:32]
        i_op = rc["op"]
        i_alu = rc["alu"]
        i_load = rc["load"]
        i_store = rc["store"]
        i_branch = rc["branch"]
        i_jal = rc["jal"]
        i_jalr = rc["jalr"]
        i_lui = rc["lui"]
        i_auipc = rc["auipc"]
        i_system = rc["system"]
        i_misc = rc["misc"]
        i_csr = i_system & (f3 != 0)
        i_slt = i_alu & (f3[1:] == 0b01)
        i_shift = i_alu & (f3[:2] == 0b01)
        i_xor = i_alu & (f3 == 0b100)
        i_or = i_alu & (f3 == 0b110)
        i_and = i_alu & (f3 == 0b111)
        i_beq = i_branch & ~f3[2]  # beq, bne
        i_rdnz = rc["rdnz"]
        dec = {
            "load": i_load,
            "store": i_store,
            "branch": i_branch,
            "jalr": i_jalr,
            "slt": i_slt,
            "shift": i_shift,
            "rdnz": i_rdnz,  # rd != x0
            # E0: opa = rs1 (else ea: the instruction's address, 0xFFFFFFFF or 0)
            "a_rs1": i_alu & ~i_xor & ~i_and | i_branch & f3[2] | i_load | i_store | i_jalr,
            # E0: the second operand b is rs2 (else imm), inverted with carry in 1
            "b_rs2": i_op | i_branch,
            "inv": i_branch & f3[2] | i_slt | i_op & (f3 == 0) & word[30],
            # a signed compare: operands sign-extended to 33 bits
            "signed": Mux(i_branch, f3[2] & ~f3[1], ~f3[0]),
            # branch: its sense (beq, bge, bgeu) ^ predicted taken
            "flip": i_branch & (f3[0] ^ word[31] ^ ~f3[2]),
            "alt": word[30],  # sra
            "lb": f3[:2] == 0,  # a byte access
            "lh": f3[:2] == 1,  # a half-word access
            "f3_0": f3[0],
            "f3_1": f3[1],
            "f3_2": f3[2],
        }
        # used when the instruction enters the execute unit
        pre = {
            # the first E1 pass writes rd
            "w1": i_rdnz & (i_alu & ~i_slt | rc["w1"] | i_csr),
            # E0: opb is a function of b and rs1 (else eb: cycle[h], 4 or 0)
            "b_core": ~(i_shift | i_jal | i_misc | i_system),
            # opb = b, b ^ rs1 (xor, beq, bne), b & ~rs1 (or: opa = rs1), b & rs1
            "lmode_0": i_xor | i_beq | i_and,
            "lmode_1": i_or | i_and,
            # the legality check, per class (completed in D)
            # (the opcode is one of RV32I's, its two low bits 11)
            "low_ok": (word[:2] == 0b11) & opc.matches(*_OPCODES),
            "ok_load": i_load & (f3 != 3) & (f3 != 6) & (f3 != 7),
            "ok_store": i_store & (f3[2] == 0) & (f3 != 3),
            "ok_branch": i_branch & (f3[1:] != 1),
            "ok_f3z": (i_jalr | i_misc) & (f3 == 0),
            "ok_u": i_jal | i_lui | i_auipc,
            "ok_opimm": i_alu
            & ~i_op
            & ((f3[:2] != 0b01) | (f3 == 1) & (f7 == 0) | (f3 == 5) & (f7[:5] == 0) & ~f7[6]),
            "ok_op": i_op & ((f7 == 0) | (f7 == 0b0100000) & ((f3 == 0) | (f3 == 5))),
            # ecall, ebreak
            "ok_stop": i_system & (f3 == 0) & (word[7:20] == 0) & (word[21:32] == 0),
            # csrrs / csrrsi rd, cycle[h], x0 / 0
            "ok_csr": i_system
            & (f3[:2] == 0b10)
            & (word[15:20] == 0)
            & ((word[20:32] == CSR_CYCLE) | (word[20:32] == CSR_CYCLEH)),
            "auipc_jal": i_auipc | i_jal,  # ea = ipc
            "beq": i_beq,  # ea = 0xFFFFFFFF
            "csr": i_csr,  # eb = cycle[h]
            "csr_hi": word[27],
            "link": i_jal,  # eb = 4
            "mem": i_load | i_store,  # will want the bus: no sequential fetch meanwhile
            "uses1": ~(i_lui | i_auipc | i_jal),  # the instruction reads rs1
            "uses2": i_op | i_branch | i_store,  # ... rs2
        }
        # the immediate
        # (from the format registered with the word: two LUT levels at most)
        imm = Signal(32)
        r_i = ~(r_sb | r_u | r_j)  # I-type
        r_s = r_sb & ~word[6]
        r_b = r_sb & word[6]
        sgn31 = word[31]
        m.d.comb += imm.eq(
            Cat(
                r_s & word[7] | r_i & word[20],
                Mux(r_sb, word[8:12], Mux(r_u, 0, word[21:25])),
                Mux(r_u, 0, word[25:31]),
                Mux(r_b, word[7], Mux(r_j, word[20], ~r_u & sgn31)),
                Mux(r_u | r_j, word[12:20], sgn31.replicate(8)),
                Mux(r_u, word[20:31], sgn31.replicate(11)),
                sgn31,
            )
        )
        p = {name: Signal(name=f"p_{name}", reset_less=True) for name in (*dec, *pre)}
        d = {name: Signal(name=f"d_{name}", reset_less=True) for name in dec}
        p_imm = Signal(32, reset_less=True)
        p_pc = Signal(30, reset_less=True)
        p_rs1 = Signal(5, reset_less=True)
        p_rs2 = Signal(5, reset_less=True)
        p_rd = Signal(5, reset_less=True)
        # the hazard: W writes rd of the instruction before (in program order) in the cycle
        # this one is read (a block RAM read in the cycle of a write to the same address
        # returns the old word): compared when it moves into P, with rd of the one that
        # moved before it (``last_rd``, ``last_wr``: it writes a register)
        last_rd = Signal(5, reset_less=True)
        last_wr = Signal(reset_less=True)
        i_wr = i_rdnz & (i_alu | rc["wr"] | i_csr)
        haz = last_wr & (
            pre["uses1"] & (word[15:20] == last_rd) | pre["uses2"] & (word[20:25] == last_rd)
        )
        with m.If(mv):
            m.d.sync += [p[k].eq(v) for k, v in (*dec.items(), *pre.items())]
            m.d.sync += [
                p_imm.eq(imm),
                p_pc.eq(rpc),
                p_rs1.eq(word[15:20]),
                p_rs2.eq(word[20:25]),
                p_rd.eq(word[7:12]),
                p_haz.eq(haz),
                last_rd.eq(word[7:12]),
                last_wr.eq(i_wr),
            ]
        with m.If(flush):  # the branch before the next instruction writes nothing
            m.d.sync += last_wr.eq(0)

        # the target of a jump (jal; a branch backward, predicted taken), computed from
        # the word in the cycle after it arrived (two 15-bit halves, carry select)
        # (the offset's bits that differ between the B and J formats are chosen as the
        # word arrives, one LUT after rdata: none before the adder)
        off = _sext(Cat(roff[:3], word[25:31], roff[3:]), 30)
        t_lo = Signal(16)
        t_h0 = Signal(15)
        t_h1 = Signal(16)
        m.d.comb += [
            t_lo.eq(Cat(rpc[:15], rpc[14]) + Cat(off[:15], rpc[14])),
            t_h0.eq(rpc[15:] + off[15:]),
            t_h1.eq(Cat(Const(1, 1), rpc[15:]) + Cat(Const(1, 1), off[15:])),
        ]
        tgt = Signal(30, reset_less=True)
        with m.If(rgot):
            m.d.sync += tgt.eq(Cat(t_lo[:15], Mux(t_lo[15], t_h1[1:], t_h0)))
        # jal, a branch with a negative offset, or an opcode 110x0 with bit 31 (illegal)
        jump_w = word[6] & word[5] & ~word[4] & (word[3] & word[2] | ~word[2] & word[31])

        # ================================================================ D
        # The execute unit loads P's instruction while it is free (the register file
        # read included); ``go`` says it starts (E0 follows).
        d_imm = Signal(32, reset_less=True)
        d_stop = Signal(reset_less=True)
        d_illegal = Signal(reset_less=True)
        ok = ("ok_load", "ok_store", "ok_branch", "ok_f3z", "ok_u", "ok_opimm", "ok_op")
        legal = p["low_ok"] & Cat(*(p[k] for k in ok), p["ok_stop"], p["ok_csr"]).any()
        stop = ~legal | p["ok_stop"]  # ecall, ebreak, illegal
        m.d.comb += [
            rp1.addr.eq(p_rs1),
            rp2.addr.eq(p_rs2),
            rp1.en.eq(x_free),
            rp2.en.eq(x_free),
        ]
        with m.If(x_free):
            m.d.sync += [d[k].eq(p[k]) for k in dec]
            m.d.sync += [
                d_imm.eq(p_imm),
                ipc.eq(p_pc),
                d_rd.eq(p_rd),
                d_stop.eq(stop),
                d_illegal.eq(~legal),
            ]
        # for the tests' collision monitor (sim/collisions.py): a register read whose word
        # E0 uses never meets a write of its address (the hazard rule)
        self.rw_watch = [
            RWWatch("regfile_rs1", rp1, wp, go & p["uses1"]),
            RWWatch("regfile_rs2", rp2, wp, go & p["uses2"]),
        ]
        d_f3 = Cat(d["f3_0"], d["f3_1"], d["f3_2"])

        # ================================================================ operands
        # opa, opb: 33 bits (bit 32: the sign extension of a compare); cin: carry in.
        # They load in every cycle (what they load outside the cycles before an E1 pass
        # is never used; a shift by 0 holds opa), through multiplexers selected by
        # flip-flops set a cycle ahead; a block RAM output passes one LUT at most.
        opa = Signal(33, reset_less=True)
        opb = Signal(33, reset_less=True)
        cin = Signal(reset_less=True)
        cycle = Signal(64)
        sa_rs1 = Signal(reset_less=True)  # opa <= rs1 (E0)
        sa_shift = Signal(reset_less=True)  # opa <= opa shifted
        ea = Signal(33, reset_less=True)  # opa's input otherwise
        # opb: b = rs2 ^ inv (``sb_rs2``) or ``eb``, then the logic operation with rs1
        # (``sb_lm``); ``eb`` holds the inverted immediate, cycle[h], 4 or 0; bit 32 is
        # b[31] for a signed compare (``sb_s``), else eb[32]. Two LUT levels after the
        # block RAM: its selects are flip-flops set a cycle ahead.
        eb = Signal(33, reset_less=True)
        sb_rs2 = Signal(reset_less=True)
        sb_lm = Signal(2, reset_less=True)
        sb_s = Signal(reset_less=True)
        # (loaded in every D cycle, whether the instruction starts or waits: E0 follows
        # the last one)
        m.d.sync += [
            sa_rs1.eq(x_free & p["a_rs1"]),
            sb_rs2.eq(x_free & p["b_core"] & p["b_rs2"]),
            sb_lm.eq(Mux(x_free & p["b_core"], Cat(p["lmode_0"], p["lmode_1"]), 0)),
            sb_s.eq(x_free & p["b_core"] & p["signed"]),
        ]
        b = Signal(32)
        m.d.comb += b.eq(Mux(sb_rs2, rs2 ^ d["inv"].replicate(32), eb[:32]))
        # the logic operations as sums of disjoint operands:
        # a | b = a + (b & ~a), a ^ b = 0 + (a ^ b), a & b = 0 + (a & b)
        opb_core = Signal(33)
        with m.Switch(sb_lm):
            with m.Case(0):
                m.d.comb += opb_core[:32].eq(b)
            with m.Case(1):
                m.d.comb += opb_core[:32].eq(b ^ rs1)
            with m.Case(2):
                m.d.comb += opb_core[:32].eq(b & ~rs1)
            with m.Case(3):
                m.d.comb += opb_core[:32].eq(b & rs1)
        m.d.comb += opb_core[32].eq(Mux(sb_s, b[31], eb[32]))

        # ---- data access
        with m.If(x_e0 & d["store"]):
            m.d.sync += wdata.eq(
                Mux(d_f3[1], rs2, Mux(d_f3[0], rs2[:16].replicate(2), rs2[:8].replicate(4)))
            )
        is_byte = d["lb"]
        is_half = d["lh"]
        is_word = d_f3[1]
        sgn = ~d_f3[2]
        # the load data, aligned and sign- or zero-extended, in W (from ``ldat``)
        # the byte lane of the load's bits 0..7 (registered in E1)
        bsel = Signal(2, reset_less=True)
        sidx = Signal(2, reset_less=True)  # the byte lane of its sign bit
        low = ldat.word_select(bsel, 8)
        mid = Mux(bsel[1], ldat[24:32], ldat[8:16])
        ext = sgn & Cat(ldat[7], ldat[15], ldat[23], ldat[31]).bit_select(sidx, 1)
        ld_word = Cat(
            low,
            Mux(is_byte, ext.replicate(8), mid),
            Mux(is_word, ldat[16:], ext.replicate(16)),
        )
        m.d.comb += [wp.addr.eq(w_rd), wp.data.eq(Mux(w_ld, ld_word, sum32)), wp.en.eq(w_en)]

        # ---- ea, eb: registered a cycle ahead. In D (the cycles the execute unit is
        # free), for E0: ea = the instruction's address (auipc, jal's link), 0xFFFFFFFF
        # (beq, bne), cycle[h] (rdcycle[h], as of D) or 0; eb = the immediate, inverted
        # for a subtraction or compare (bit 32: for an unsigned compare), 4 (jal's link)
        # or 0. In E0, for the second pass of jalr (its link) and of a branch (the other
        # path, in the cycle after its E1: the next instruction if it was predicted taken,
        # backward, else the target): ea = the instruction's address, eb = 4 or the
        # immediate.
        e0_pc = Signal(reset_less=True)  # (set in D) the next E0 loads ea = pc
        e0_4 = Signal(reset_less=True)  # ... eb = 4 (jalr, a branch predicted taken)
        e0_imm = Signal(reset_less=True)  # ... eb = the immediate (a branch, not taken)
        m.d.sync += [
            e0_pc.eq(go & (p["jalr"] | p["branch"])),
            e0_4.eq(go & (p["jalr"] | p["branch"] & p_imm[31])),
            e0_imm.eq(go & p["branch"] & ~p_imm[31]),
        ]
        if self.counters:
            cyc = Mux(p["csr_hi"], cycle[32:], cycle[:32])
        else:
            cyc = Const(0, 32)
        m.d.sync += [
            ea.eq(
                Mux(
                    x_free,
                    Mux(p["auipc_jal"], Cat(Const(0, 2), p_pc), 0)
                    | Mux(p["beq"], 0xFFFFFFFF, 0)
                    | Mux(p["csr"], cyc, 0),
                    Mux(e0_pc, Cat(Const(0, 2), ipc), 0),
                )
            ),
            eb.eq(
                Mux(
                    x_free,
                    Mux(p["b_core"], Cat(p_imm ^ p["inv"].replicate(32), p["inv"]), 0)
                    | Mux(p["link"], 4, 0),
                    Mux(e0_4, 4, 0) | Mux(e0_imm, d_imm, 0),
                )
            ),
        ]

        # ---- the serial shifter: 4 bits per cycle while 4 or more are left, then 1
        sh_cnt = Signal(5, reset_less=True)
        sh_step4 = Signal(reset_less=True)  # sh_cnt >= 4
        sh_zero = Signal(reset_less=True)  # a shift by 0: opa holds
        left = ~d_f3[2]
        fill = d["alt"] & opa[31] & ~left
        shifted = Signal(32)
        with m.If(sh_step4):
            m.d.comb += shifted.eq(
                Mux(left, Cat(Const(0, 4), opa[:28]), Cat(opa[4:32], fill.replicate(4)))
            )
        with m.Else():
            m.d.comb += shifted.eq(Mux(left, Cat(Const(0, 1), opa[:31]), Cat(opa[1:32], fill)))
        sh_last = (sh_cnt == 4) | (sh_cnt == 1) | (sh_cnt == 0)
        sh_next = Signal(5)
        m.d.comb += sh_next.eq(sh_cnt - Mux(sh_step4, 4, 1))
        m.d.sync += sa_shift.eq(x_e0 & d["shift"] | x_shift & ~sh_last)
        with m.If(x_e0):
            shamt = Mux(d["b_rs2"], rs2[:5], d_imm[:5])
            m.d.sync += [sh_cnt.eq(shamt), sh_step4.eq(shamt[2:] != 0), sh_zero.eq(shamt == 0)]
        with m.Elif(x_shift):
            m.d.sync += [sh_cnt.eq(sh_next), sh_step4.eq(sh_next[2:] != 0), sh_zero.eq(0)]

        # ---- the operand registers
        with m.If(~(x_shift & sh_zero)):
            m.d.sync += opa[:32].eq(Mux(sa_rs1, rs1, Mux(sa_shift, shifted, ea[:32])))
        # the sign bit: of rs1 for a signed compare; for a branch, flipped so that the
        # compare's sign says "mispredicted": blt..bgeu: sign(rs1 - rs2) ^ flip; beq/bne:
        # sign(0xFFFFFFFF + (rs1 ^ rs2) + flip * 2**32) = (rs1 != rs2) ^ flip
        with m.If(x_e0):
            m.d.sync += opa[32].eq(rs1[31] & d["signed"] & d["a_rs1"] ^ d["flip"])
        with m.Elif(~x_shift):
            m.d.sync += opa[32].eq(ea[32])
        m.d.sync += [
            opb.eq(opb_core),
            # set-less-than's second pass: 0 + 0 + the compare's sign
            cin.eq(Mux(x_e0, d["inv"], x_e2 & top)),
        ]

        # ================================================================ the adder (E1)
        # 16 + 17 bits with carry select: a 34-bit carry chain into flip-flops missed
        # 55 MHz on the UP5K by 2 ns
        add_lo = Signal(18)
        add_h0 = Signal(17)
        add_h1 = Signal(18)
        m.d.comb += [
            # (its carry out as the sum bit of x + x + carry: a logic cell of the chain, so
            # that sum_c's flip-flop shares it, rather than a carry leaving the chain)
            add_lo.eq(Cat(cin, opa[:16], opa[15]) + Cat(cin, opb[:16], opa[15])),
            add_h0.eq(opa[16:] + opb[16:]),
            add_h1.eq(Cat(Const(1, 1), opa[16:]) + Cat(Const(1, 1), opb[16:])),
        ]
        with m.If(x_e1):
            m.d.sync += [
                bsel.eq(Cat(add_lo[1] & d["lb"], add_lo[2] & ~d_f3[1])),
                sidx.eq(Cat(add_lo[1] | ~d["lb"], add_lo[2])),
                sum_lo.eq(add_lo[1:17]),
                sum_c.eq(add_lo[17]),
                sum_h0.eq(add_h0),
                sum_h1.eq(add_h1[1:18]),
            ]
        moff = add_lo[1:3]
        with m.If(x_e1 & d["store"]):
            m.d.sync += b_wmask.eq(
                Mux(
                    is_word,
                    0b1111,
                    Mux(is_half, Mux(moff[1], 0b1100, 0b0011), Const(1, 4) << moff),
                )
            )

        # ================================================================ counters
        if self.counters:
            # (reset by ``lrst``, not by the SoC's reset tree)
            m.submodules.cycle = counter = CycleCounter(rst=lrst)
            m.d.comb += cycle.eq(counter.count)

        # ================================================================ requests
        # The bus's next request, by priority: M, the data access or jalr's target fetch
        # of the instruction in its first E1 pass, or the other path of a mispredicted
        # branch (from the adder's second pass in the cycle after its E1), or one of them
        # waiting for the bus (``want_m``); J, a jump's target (``jpend``); S, the next
        # sequential fetch (``seq_on``: the last word fetched was not a jump, or ``lv``:
        # it is arriving; ``nxt`` = f_addr + 1, valid with ``nxt_ok``; no load or store in
        # E0). J and S need room in the queue (below). The terms are flip-flops; the
        # choice waits only for ``ready`` (the bus is free when idle or answered).
        want_m = Signal(reset_less=True)  # (but for a mispredict found in this cycle: ``flush``)
        m_fetch = Signal(reset_less=True)  # ... it is a fetch (jalr)
        m_store = Signal(reset_less=True)  # ... a store
        m_ldw = Signal(reset_less=True)  # ... a load whose word W writes to rd
        jpend = Signal(reset_less=True)
        seq_on = Signal(reset_less=True)
        f_from_d = Signal(reset_less=True)  # f_addr <= bus.addr (M's fetch from d_addr, last cycle)
        nxt_lo = Signal(16)
        nxt_h1 = Signal(15)
        m.d.comb += [
            nxt_lo.eq(Cat(f_addr[:15], f_addr[14]) + Cat(Const(1, 15), f_addr[14])),
            nxt_h1.eq(f_addr[15:] + 1),
        ]
        nxt = Signal(30, init=self.reset_addr >> 2, reset_less=True)  # reset: first fetch
        m.d.sync += nxt.eq(Cat(nxt_lo[:15], Mux(nxt_lo[15], nxt_h1, f_addr[15:])))
        d_memj = d["load"] | d["store"] | d["jalr"]
        m_e0 = x_e0 & d_memj & ~d_stop & ~flush  # M follows in E1
        with m.If(m_e0):
            m.d.sync += [
                m_fetch.eq(d["jalr"]),
                m_store.eq(d["store"]),
                m_ldw.eq(d["load"] & d["rdnz"]),
            ]
        with m.Elif(flush):
            m.d.sync += [m_fetch.eq(1), m_store.eq(0), m_ldw.eq(0)]
        # d_addr: the adder's sum in the cycle M is issued (E1; a branch's second pass)
        addr_ld = Signal(reset_less=True)
        m.d.sync += addr_ld.eq(m_e0 | e1_br)
        with m.If(addr_ld):
            m.d.sync += [
                d_lo.eq(add_lo[3:17]),
                d_c.eq(add_lo[17]),
                d_h0.eq(add_h0[:16]),
                d_h1.eq(add_h1[1:17]),
                d_rg.eq(Mux(add_lo[17], add_h1[13:15], add_h0[12:14])),
            ]
        want_mf = want_m | flush
        mf = m_fetch | flush
        # ``w_f``, a flip-flop: J or S is wanted (no M), and there is room in the queue: of
        # the words fetched or being fetched that the execute unit has not taken (a live
        # fetch, rbuf, P), at most one, so that the next fetch's word finds rbuf free.
        # It is computed a cycle ahead, for the case that no request is issued in this
        # cycle (the cycle after a request is issued, the bus is busy: but for a
        # combinational slave, which then waits a cycle longer). (A mispredict found in
        # the cycle takes the bus: f_addr may then load, and the cycle after it loads the
        # other path, ``f_from_d``.)
        w_f = Signal(init=1, reset_less=True)  # (reset: the first fetch, from nxt)
        w_next = Signal()  # the bus takes a request if it is free at the end of this cycle
        # (none in the cycle after reset: ``b_valid``, reset by the domain's reset, stays
        # low while the other flip-flops are reset by ``lrst``)
        # (``w_f`` assumes that the word which arrived last cycle is not a jump: if it is,
        # ``seq_on`` low, no fetch follows it; f_addr may then load, unused: the next fetch
        # is the jump's target)
        no_seq = rgot & ~seq_on
        m.d.comb += w_next.eq((want_mf | w_f & ~no_seq) & ~lrst)
        free = ~b_valid | ready
        issue = free & w_next
        fetch_pick = ~want_mf | mf
        # the sequential fetch issued as a word arrives is dropped if that word is a jump
        # (jal, jalr, a branch backward): only ``b_valid`` and ``seq_on`` see ``rdata``
        seq_after = Signal()
        m.d.comb += seq_after.eq(lv & w_f & ~flush & ~jpend)
        stop_rd = rdata[6] & rdata[5] & ~rdata[4] & (rdata[2] | rdata[31])
        kill = ready & seq_after & stop_rd
        m.d.sync += b_valid.eq(b_valid & ~ready | issue & ~kill)
        with m.If(arrival):
            m.d.sync += seq_on.eq(~stop_rd)
        # The next cycle's ``w_f`` if no request is issued in this one: as three cases,
        # ``ready`` low (``w_0``), a word arriving (``w_1a``, and the jump check) or
        # another answer (``w_1b``), each from flip-flops; ``ready`` and ``rdata`` pass
        # two LUT levels. (rbuf, P: full next cycle; a live fetch outstanding: ``lv``.)
        pfull_n = (pfull & ~go | mv) & ~flush
        rfull_0 = rfull & ~mv & ~flush  # (no word arrives)
        lv_0 = lv & ~flush  # (ready low)
        jpend_n = (rgot & jump_w | jpend & ~halted) & ~flush
        s_ok_n = ~f_from_d & ~(go & p["mem"])  # (nxt is valid, no load or store in E0)
        room_0 = ~(lv_0 & rfull_0 | lv_0 & pfull_n | rfull_0 & pfull_n)
        w_0 = (b_valid | ~w_next) & ~m_e0 & ~want_mf & room_0 & (jpend_n | (seq_on | lv_0) & s_ok_n)
        # (with ready high, a request is issued if w_next)
        a_1 = ~w_next & ~m_e0 & (~pfull_n | flush)  # (the word takes rbuf)
        w_1b = ~w_next & ~m_e0 & ~(rfull_0 & pfull_n) & (jpend_n | seq_on & s_ok_n)
        w_q = Signal()
        w_g = Signal()
        m.d.comb += [
            w_q.eq(Mux(ready, Mux(lv, a_1 & jpend_n, w_1b), w_0)),
            w_g.eq(lv & a_1 & s_ok_n),  # (if the word is not a jump: ``no_seq`` below)
        ]
        m.d.sync += w_f.eq(w_q | ready & w_g)
        m.d.sync += lv.eq(Mux(issue, fetch_pick & ~kill, lv & ~ready & ~flush))
        # (what they load when no request is issued is not used: ``b_valid`` is low)
        with m.If(free):
            m.d.sync += [
                a_sel.eq(want_mf),
                b_data.eq(want_mf & ~mf),
                b_write.eq(want_m & m_store & ~flush),
                b_ldw.eq(want_m & m_ldw & ~flush),
            ]
        with m.If(free & w_f | f_from_d):
            m.d.sync += f_addr.eq(Mux(f_from_d, bus.addr, Mux(jpend, tgt, nxt)))
        m.d.sync += [
            f_from_d.eq(issue & want_mf & mf),
            want_m.eq(m_e0 | want_mf & ~free),
            jpend.eq(rgot & jump_w & ~flush | jpend & ~flush & ~halted & ~(issue & ~want_mf)),
        ]

        # ================================================================ sequencing
        # (sums of products without hold multiplexers: no flip-flop here gets an enable,
        # which would take the SoC's reset into its logic)
        e1_first = x_e1 & ~second
        two_pass = d["jalr"] | d["slt"]  # jalr: the link after the target; slt: 0 + 0 + sign
        e0_go = x_e0 & ~d_stop & ~flush
        m.d.sync += [
            x_e0.eq(go),
            x_shift.eq(e0_go & d["shift"] | x_shift & ~sh_last),
            x_e1.eq(e0_go & ~d["shift"] | x_shift & sh_last | e1_first & d["jalr"] | x_e2),
            x_e2.eq(e1_first & d["slt"]),
            e1_br.eq(e0_go & d["branch"]),
            x_br.eq(e1_br),
            x_mem.eq(e1_first & (d["load"] | d["store"]) | x_mem & ~data_done),
            x_free.eq(
                x_free & ~go
                | x_e1 & (second | ~(d["load"] | d["store"] | two_pass))
                | data_done
                | flush
            ),
            second.eq(~x_free & (second | e1_first & two_pass)),
            writes.eq(Mux(x_free, p["w1"], Mux(e1_first & two_pass, d["rdnz"], writes))),
            halted.eq(halted | x_e0 & d_stop & ~flush),
            fault.eq(fault | x_e0 & d_stop & ~flush & d_illegal),
        ]
        with m.If(lrst):
            m.d.sync += [
                sig.eq(sig.init)
                for sig in (
                    x_free,
                    x_e0,
                    x_e1,
                    x_shift,
                    x_e2,
                    x_mem,
                    halted,
                    fault,
                    x_br,
                    e1_br,
                    lv,
                    rfull,
                    rgot,
                    pfull,
                    w_en,
                    w_ld,
                    want_m,
                    jpend,
                    seq_on,
                    w_f,
                    f_from_d,
                    addr_ld,
                    flush,
                    nxt,
                )
            ]
        return m
