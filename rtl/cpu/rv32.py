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

#: The readable CSRs (``rdcycle``, ``rdcycleh``).
CSR_CYCLE, CSR_CYCLEH = 0xC00, 0xC80


def _sext(value, width: int = 32):
    """``value`` sign-extended to ``width`` bits."""
    return Cat(value, value[-1].replicate(width - len(value)))


class CycleCounter(Elaboratable):
    """A 64-bit count of clock cycles (``count``, from ``init`` at reset) in four 16-bit
    segments: a segment counts in the cycle in which every lower one is all ones, known
    a cycle ahead (the lowest one at ``0xFFFE``), so no carry chain is longer than 16
    bits (a 64-bit one would take about 20 ns on the UP5K)."""

    def __init__(self, init: int = 0):
        self.init = check_int("init", init, 0, (1 << 64) - 1)
        self.count = Signal(64, init=init)

    def elaborate(self, platform):
        m = Module()
        seg = [self.count[16 * k : 16 * k + 16] for k in range(4)]
        first = [(self.init >> (16 * k)) & 0xFFFF for k in range(4)]
        # ones[k]: segments 0..k are all ones (segment k + 1 counts)
        ones = [
            Signal(name=f"carry{k}", init=all(v == 0xFFFF for v in first[: k + 1]))
            for k in range(3)
        ]
        m.d.sync += seg[0].eq(seg[0] + 1)
        for k in range(3):
            m.d.sync += ones[k].eq(
                (seg[0] == 0xFFFE) & Cat(*(s == 0xFFFF for s in seg[1 : k + 1]), 1).all()
            )
            with m.If(ones[k]):
                m.d.sync += seg[k + 1].eq(seg[k + 1] + 1)
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
        0 (saves the counter and its read-out: 175 of the core's 933 LUT4 and 99
        flip-flops on the UP5K).

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
          core has no time-out); ``ready`` outside ``valid`` is ignored.
        * ``wdata`` is a register, ``addr`` a multiplexer of registers (two or three LUT
          levels), ``wmask``, ``write`` and ``valid`` one or two LUT levels after
          registers; ``rdata`` and ``ready`` only go into registers (through the
          instruction's pre-decode, a load's alignment), never to an output.
    halted : Out(1)
        Goes high when the core executes ``ecall`` or ``ebreak`` (or an illegal
        instruction) and stays high until reset; the core then makes no more requests.
    fault : Out(1)
        Goes high together with ``halted`` when the instruction was illegal: an opcode or
        function code outside RV32I, a CSR access other than a read of ``cycle``/``cycleh``
        by ``csrrs``/``csrrsi`` with ``rs1``/``uimm`` = 0 (so ``csrw``, ``instret`` and
        ``time`` fault), ``fence.i``, ``mret``, ``wfi``, or a word whose two low bits
        are not ``11`` (the all-zero word included).

    Reset is the ``sync`` domain's reset (a SoC may wrap the core in a ``ResetInserter``).
    ``pc`` (30 bits, an attribute for simulation, not a port) is the word address of the
    last instruction fetched; when halted, that of the halting instruction.

    Behaviour outside the happy path
    --------------------------------
    * Unaligned accesses do not trap; the low address bits a width does not use are
      ignored: ``lw``/``sw`` access the word at ``addr & ~3``, ``lh``/``lhu``/``sh`` the
      half word at ``addr & ~1`` (within the aligned word), ``lb``/``lbu``/``sb`` any
      byte. Jump and branch targets are truncated to a word (``target & ~3``): ``jalr``
      clears bit 0 as the ISA says, and bit 1 as well.
    * ``fence`` is a no-op (one bus, one access at a time: memory is always ordered).
      ``ecall`` and ``ebreak`` stop the core (``halted`` without ``fault``).
    * ``x0``: register file entry 0 is never written (block RAM contents are zero at
      configuration; a write with ``rd`` = 0 is dropped), so it reads 0.
    * No interrupts, no exceptions, no other CSRs.

    Micro-architecture
    ------------------
    A front end fetches the next instruction while the current one executes and
    pre-decodes the fetched word into registers (its immediate, class flags, the
    legality check's terms). The execute unit then takes it in one instruction at a
    time:

    * ``D``: the register file is read (two read ports), the pre-decoded flags move to
      the execute unit, the next sequential address (``pc + 4``) and the target
      (``pc + imm``) are computed by two 30-bit adders;
    * ``E0``: the operands are selected into two 33-bit registers (rs1/rs2/immediate,
      the instruction's address, the cycle counter, 4) and the next fetch starts: from
      ``pc + 4``, or from the target for ``jal`` and backward branches (static
      backward-taken prediction);
    * ``E1``: one adder computes everything: sums, differences, compares (bit 32 of a
      33-bit difference), addresses and the logic operations, written as sums of
      disjoint operands (``a | b = a + (b & ~a)``, ``a ^ b = 0 + (a ^ b)``,
      ``a & b = 0 + (a & b)``); a branch folds its sense and its prediction into the
      operands' sign bits so that the sign says "mispredicted";
    * ``W``: the result (or a load's data) is written to ``rd``, in the cycle after E1.

    An instruction that reads the register the previous one writes is taken in a cycle
    after that write (a block RAM read in the cycle of a write to the same address
    returns the old word). Shifts iterate in the first operand register, 4 bits per cycle
    while 4 or more are left, then 1. ``slt``/``sltu`` take a second adder pass (the
    compare's sign as the carry in of ``0 + 0``), ``jalr`` one (the link first, then the
    target). The instruction fetched after a branch is dropped when the branch was
    mispredicted.

    Cycles per instruction with a slave answering the cycle after the request (block
    RAM), one instruction after another (a combinational slave saves a cycle on loads,
    stores and mispredicted branches; each wait state adds one per access):

    ============================================  =====================================
    instruction                                   cycles
    ============================================  =====================================
    OP, OP-IMM (not shifts or compares), LUI,     3; 4 when it reads the register the
    AUIPC, JAL, FENCE, ``rdcycle[h]``             instruction before it writes
    branches predicted right (backward taken,     3 (+1 as above)
    forward not taken)
    branches mispredicted                         6
    SLT, SLTI, SLTU, SLTIU                        5
    shifts by ``n``                               3 + n // 4 + n % 4 (3..13)
    JALR                                          6
    loads                                         5 (+1 as above)
    stores                                        5
    ============================================  =====================================

    Shifter: serial, in the first operand register; it costs 94 LUT4, of which 32 for
    the 4-bit step (without it a shift by 24 would take 24 cycles instead of 6). A barrel
    shifter does not fit between the block RAM and the operand register at 55 MHz on the
    UP5K (five multiplexer levels), and in a cycle of its own it made the core 1,132 LUT4
    instead of 933 (measured with Yosys). The firmware's shifts are mostly by constants
    (xorshift32's 13/17/5, CRC's 1, byte extraction by 8/16/24: 2-7 extra cycles each).

    The register file is an ``amaranth.lib.memory`` of 32 words of 32 bits with two
    synchronous read ports and one write port (four ``SB_RAM40_4K`` on the iCE40: two
    copies of 2 x 16 bits), read only in D and written only in W; the hazard rule above
    keeps a read from using a word written in the same cycle (``no_rw_check``).
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
        self.pc = Signal(30, init=reset_addr >> 2)

    def elaborate(self, platform):
        m = Module()
        bus = self.bus

        # ================================================================ state
        # front end: ``fetching``: a fetch is outstanding (``valid``);
        # ``have``: ``ir`` holds a fetched instruction (``ipc`` its address, ``imm`` its
        # immediate) that the execute unit has not accepted yet
        fetching = Signal(init=1)
        have = Signal()
        ir = Signal(32)
        ipc = self.pc
        imm = Signal(32)
        # execute unit: ``x_free`` (waiting for an instruction; with ``x_br`` the branch
        # before it has not resolved yet), then one-hot states; none set: halted
        x_free = Signal(init=1)
        x_e0 = Signal()  # operands: register file outputs -> opa, opb
        x_e1 = Signal()  # the adder: opa + opb -> sum
        x_shift = Signal()  # serial shift of opa
        x_e2 = Signal()  # set-less-than: the compare's sign -> operands of a second pass
        x_mem = Signal()  # the data access (after the fetch started in E0 is done)
        x_br = Signal()  # a branch waits for the instruction fetched after it
        second = Signal()  # this E1 is a second pass
        writes = Signal()  # this E1's sum goes to rd (in the next cycle, W)
        halted = Signal()
        fault = Signal()
        m.d.comb += [self.halted.eq(halted), self.fault.eq(fault)]

        # the adder's registered sum, in carry-select form: the low half, its carry out and
        # the high half (with a compare's sign bit) for carry in 0 and 1
        sum_lo = Signal(16, reset_less=True)
        sum_c = Signal(reset_less=True)
        sum_h0 = Signal(17, reset_less=True)
        sum_h1 = Signal(17, reset_less=True)
        sumr = Cat(sum_lo, Mux(sum_c, sum_h1, sum_h0))
        sum32 = Signal(32)
        m.d.comb += sum32.eq(sumr[:32])

        # instruction addresses (words): the next sequential one and the target of the
        # instruction accepted last; the bus address is one of them or the sum (a data
        # access, a jalr target)
        seq = Signal(30, init=self.reset_addr >> 2)  # reset: the first fetch
        tgt = Signal(30)
        sel_tgt = Signal()
        sel_sum = Signal()
        addr = Signal(30)
        m.d.comb += addr.eq(Mux(sel_sum, sumr[2:32], Mux(sel_tgt, tgt, seq)))

        # ================================================================ register file
        self.regfile = rf = memory.Memory(shape=32, depth=32, init=[], attrs=NO_RW_CHECK)
        m.submodules.regfile = rf
        rp1 = rf.read_port(domain="sync")
        rp2 = rf.read_port(domain="sync")
        wp = rf.write_port()
        # W: the cycle after an E1 whose sum goes to rd, or after a load's data arrived
        d_rd = Signal(5)
        w_en = Signal()
        w_rd = Signal(5)
        w_ld = Signal()  # W writes the load data
        ldata = Signal(32, reset_less=True)  # the load data, aligned and extended
        loading = Signal()  # the load's data arrives in this cycle
        m.d.sync += [w_en.eq(x_e1 & writes | loading), w_rd.eq(d_rd), w_ld.eq(loading)]
        m.d.comb += [wp.addr.eq(w_rd), wp.data.eq(Mux(w_ld, ldata, sum32)), wp.en.eq(w_en)]
        rs1 = rp1.data
        rs2 = rp2.data

        # ================================================================ fetch
        arrival = fetching & bus.ready
        with m.If(arrival):
            m.d.sync += fetching.eq(0)
        word = bus.rdata
        with m.If(arrival):
            m.d.sync += [ir.eq(word), ipc.eq(addr), have.eq(1)]
            with m.Switch(word[2:7]):
                with m.Case(_STORE):
                    m.d.sync += imm.eq(_sext(Cat(word[7:12], word[25:32])))
                with m.Case(_BRANCH):
                    m.d.sync += imm.eq(
                        _sext(Cat(Const(0, 1), word[8:12], word[25:31], word[7], word[31]))
                    )
                with m.Case(_LUI, _AUIPC):
                    m.d.sync += imm.eq(Cat(Const(0, 12), word[12:32]))
                with m.Case(_JAL):
                    m.d.sync += imm.eq(
                        _sext(Cat(Const(0, 1), word[21:31], word[20], word[12:20], word[31]))
                    )
                with m.Default():  # I-type
                    m.d.sync += imm.eq(_sext(word[20:32]))

        # ================================================================ accept (D)
        # The instruction fetched after a branch is accepted when the branch has resolved
        # (x_br); it is dropped if the branch was mispredicted (the compare's sign bit is
        # "mispredicted": E0 folded the branch's sense and prediction into the operands).
        # An instruction that reads the register W writes is accepted a cycle later (a
        # register read in the cycle it is written would return the old word). W writes
        # rd of the instruction accepted last: compared when the next one arrives.
        p_haz = Signal()
        hazard = Signal()  # w_en & p_haz, registered a cycle ahead
        accept = have & x_free & ~hazard
        br_pred = Signal()  # the branch in x_br was predicted taken (fetched from tgt)
        top = Signal(reset_less=True)  # the compare's sign (sumr[32]) as one flip-flop
        squash = x_br & top
        # accepted and not squashed (in x_br there is no hazard: a branch writes nothing)
        go = have & Mux(x_br, ~top, x_free & ~hazard)
        m.d.comb += [
            rp1.addr.eq(ir[15:20]),
            rp2.addr.eq(ir[20:25]),
            rp1.en.eq(accept),
            rp2.en.eq(accept),
        ]
        with m.If(go):
            m.d.sync += [seq.eq(ipc + 1), tgt.eq(ipc + imm[2:])]

        # ---- decode: from the fetched word when it arrives (into ``p``), copied into the
        # registers of the execute unit (``d``) when it is accepted
        opc = word[2:7]
        f3 = word[12:15]
        f7 = word[25:32]
        i_op = opc == _OP
        i_alu = i_op | (opc == _OP_IMM)
        i_load = opc == _LOAD
        i_store = opc == _STORE
        i_branch = opc == _BRANCH
        i_jal = opc == _JAL
        i_jalr = opc == _JALR
        i_lui = opc == _LUI
        i_auipc = opc == _AUIPC
        i_csr = (opc == _SYSTEM) & (f3 != 0)
        i_slt = i_alu & (f3[1:] == 0b01)
        i_shift = i_alu & (f3[:2] == 0b01)
        i_xor = i_alu & (f3 == 0b100)
        i_or = i_alu & (f3 == 0b110)
        i_and = i_alu & (f3 == 0b111)
        i_beq = i_branch & ~f3[2]  # beq, bne
        i_rdnz = word[7:12] != 0
        dec = {
            "load": i_load,
            "store": i_store,
            "branch": i_branch,
            "jalr": i_jalr,
            "slt": i_slt,
            "shift": i_shift,
            "rdnz": i_rdnz,  # rd != x0
            # the first E1 pass writes rd
            "w1": i_rdnz & (i_alu & ~i_slt | i_lui | i_auipc | i_jal | i_jalr | i_csr),
            # E0 starts the next fetch (from seq, or from tgt: jal, backward branches)
            "ov": ~i_jalr,
            # E0: opa = rs1 (else ea: the instruction's address, 0xFFFFFFFF or 0)
            "a_rs1": i_alu & ~i_xor & ~i_and | i_branch & f3[2] | i_load | i_store,
            # E0: the second operand b is rs2 (else imm), inverted with carry in 1
            "b_rs2": i_op | i_branch,
            "inv": i_branch & f3[2] | i_slt | i_op & (f3 == 0) & word[30],
            # a signed compare: operands sign-extended to 33 bits
            "signed": Mux(i_branch, f3[2] & ~f3[1], ~f3[0]),
            # branch: its sense (beq, bge, bgeu) ^ predicted taken
            "flip": i_branch & (f3[0] ^ word[31] ^ ~f3[2]),
            # E0: opb is a function of b and rs1 (else eb: cycle[h], 4 or 0)
            "b_core": ~(i_shift | i_jal | i_jalr | (opc == _MISC_MEM) | (opc == _SYSTEM)),
            "alt": word[30],  # sra
            "lb": f3[:2] == 0,  # a byte access
            "lh": f3[:2] == 1,  # a half-word access
            "f3_0": f3[0],
            "f3_1": f3[1],
            "f3_2": f3[2],
            # opb = b, b ^ rs1 (xor, beq, bne), b & ~rs1 (or: opa = rs1), b & rs1
            "lmode_0": i_xor | i_beq | i_and,
            "lmode_1": i_or | i_and,
        }
        # used when the instruction is accepted
        pre = {
            # the legality check, per class (completed when the instruction is accepted)
            "low_ok": word[:2] == 0b11,
            "ok_load": i_load & (f3 != 3) & (f3 != 6) & (f3 != 7),
            "ok_store": i_store & (f3[2] == 0) & (f3 != 3),
            "ok_branch": i_branch & (f3[1:] != 1),
            "ok_f3z": (i_jalr | (opc == _MISC_MEM)) & (f3 == 0),
            "ok_u": i_jal | i_lui | i_auipc,
            "ok_opimm": (opc == _OP_IMM)
            & ((f3[:2] != 0b01) | (f3 == 1) & (f7 == 0) | (f3 == 5) & (f7[:5] == 0) & ~f7[6]),
            "ok_op": i_op & ((f7 == 0) | (f7 == 0b0100000) & ((f3 == 0) | (f3 == 5))),
            # ecall, ebreak
            "ok_stop": (opc == _SYSTEM) & (f3 == 0) & (word[7:20] == 0) & (word[21:32] == 0),
            # csrrs / csrrsi rd, cycle[h], x0 / 0
            "ok_csr": (opc == _SYSTEM)
            & (f3[:2] == 0b10)
            & (word[15:20] == 0)
            & ((word[20:32] == CSR_CYCLE) | (word[20:32] == CSR_CYCLEH)),
            "auipc_jal": i_auipc | i_jal | i_jalr,  # ea = ipc
            "beq": i_beq,  # ea = 0xFFFFFFFF
            "csr": i_csr,  # eb = cycle[h]
            "csr_hi": word[27],
            "link": i_jal | i_jalr,  # eb = 4
            "tgt_next": i_jal | i_branch & word[31],  # fetch next from tgt
        }
        p = {name: Signal(name=f"p_{name}") for name in (*dec, *pre)}
        d = {name: Signal(name=f"d_{name}") for name in dec}
        p_uses1, p_uses2 = Signal(), Signal()
        uses1 = ~(i_lui | i_auipc | i_jal)  # the instruction reads rs1
        uses2 = i_op | i_branch | i_store  # ... rs2
        haz_word = uses1 & (word[15:20] == d_rd) | uses2 & (word[20:25] == d_rd)
        m.d.sync += hazard.eq((x_e1 & writes | loading) & Mux(arrival, haz_word, p_haz))
        with m.If(arrival):
            m.d.sync += [p[k].eq(v) for k, v in (*dec.items(), *pre.items())]
            m.d.sync += [p_haz.eq(haz_word), p_uses1.eq(uses1), p_uses2.eq(uses2)]
        # for the tests' collision monitor (sim/collisions.py): a register read whose word
        # E0 uses never meets a write of its address (the hazard rule)
        self.rw_watch = [
            RWWatch("regfile_rs1", rp1, wp, accept & p_uses1),
            RWWatch("regfile_rs2", rp2, wp, accept & p_uses2),
        ]
        d_f3 = Cat(d["f3_0"], d["f3_1"], d["f3_2"])
        d_lmode = Cat(d["lmode_0"], d["lmode_1"])
        ok = ("ok_load", "ok_store", "ok_branch", "ok_f3z", "ok_u", "ok_opimm", "ok_op")
        legal = p["low_ok"] & Cat(*(p[k] for k in ok), p["ok_stop"], p["ok_csr"]).any()
        stop = ~legal | p["ok_stop"]  # ecall, ebreak, illegal
        d_stop = Signal()
        d_illegal = Signal()
        with m.If(accept):
            m.d.sync += [d[k].eq(p[k]) for k in dec]
            m.d.sync += [
                d_rd.eq(ir[7:12]),
                d_stop.eq(stop),
                d_illegal.eq(~legal),
            ]
        # (what is set here for a squashed instruction is never used)
        with m.If(accept):
            m.d.sync += [
                have.eq(0),
                x_br.eq(0),
                x_free.eq(0),
                # E0 starts the next fetch (from seq or tgt; jalr: later, from the sum)
                fetching.eq(p["ov"] & ~stop),
                br_pred.eq(imm[31]),
                sel_tgt.eq(p["tgt_next"]),
                sel_sum.eq(0),
                second.eq(0),
                writes.eq(p["w1"]),
            ]
        with m.If(accept & squash):
            # fetch the branch's other path, taken (tgt) or not taken (seq)
            m.d.sync += [x_free.eq(1), fetching.eq(1), sel_tgt.eq(~br_pred)]

        # ================================================================ operands
        # opa, opb: 33 bits (bit 32: the sign extension of a compare); cin: carry in.
        # They load in every cycle (what they load outside the cycles before an E1 pass
        # is never used; a shift by 0 holds opa), through multiplexers selected by
        # flip-flops set a cycle ahead; a block RAM output passes one LUT at most.
        opa = Signal(33)
        opb = Signal(33)
        cin = Signal()
        cycle = Signal(64)
        sa_rs1 = Signal()  # opa <= rs1 (E0, jalr's first E1)
        sa_shift = Signal()  # opa <= opa shifted
        sb_core = Signal()  # opb <= a function of b and rs1 (E0, jalr's first E1)
        ea = Signal(33)  # opa's input otherwise
        eb = Signal(33)  # opb's input otherwise (in x_mem: the load data)
        jalr_e0 = x_e0 & d["jalr"]  # its first E1 loads the target's operands rs1, imm
        m.d.sync += [
            sa_rs1.eq(accept & p["a_rs1"] | jalr_e0),
            sb_core.eq(accept & p["b_core"] | jalr_e0),
        ]

        # the second operand (rs2 or the immediate), inverted for a subtraction or compare
        b = Signal(32)
        m.d.comb += [
            b.eq(Mux(d["b_rs2"], rs2, imm) ^ d["inv"].replicate(32)),
        ]
        # the logic operations as sums of disjoint operands:
        # a | b = a + (b & ~a), a ^ b = 0 + (a ^ b), a & b = 0 + (a & b)
        opb_core = Signal(33)
        with m.Switch(d_lmode):
            with m.Case(0):
                m.d.comb += opb_core[:32].eq(b)
            with m.Case(1):
                m.d.comb += opb_core[:32].eq(b ^ rs1)
            with m.Case(2):
                m.d.comb += opb_core[:32].eq(b & ~rs1)
            with m.Case(3):
                m.d.comb += opb_core[:32].eq(b & rs1)
        m.d.comb += opb_core[32].eq(Mux(d["signed"], b[31], d["inv"]))

        # ---- data access
        moff = sumr[:2]
        data_phase = x_mem & ~fetching  # the fetch started in E0 is done
        wdata = Signal(32)  # the store's data in its byte lanes (registered in E0)
        with m.If(x_e0):
            m.d.sync += wdata.eq(
                Mux(d_f3[1], rs2, Mux(d_f3[0], rs2[:16].replicate(2), rs2[:8].replicate(4)))
            )
        is_byte = d["lb"]
        is_half = d["lh"]
        is_word = d_f3[1]
        sgn = ~d_f3[2]
        m.d.comb += [
            bus.addr.eq(Mux(data_phase, sumr[2:32], addr)),
            bus.valid.eq(fetching | data_phase),
            bus.write.eq(data_phase & d["store"]),
            bus.wdata.eq(wdata),
            bus.wmask.eq(
                Mux(
                    is_word,
                    0b1111,
                    Mux(is_half, Mux(moff[1], 0b1100, 0b0011), Const(1, 4) << moff),
                )
            ),
        ]
        mem_done = data_phase & bus.ready
        m.d.comb += loading.eq(mem_done & d["load"] & d["rdnz"])
        # the load data, aligned and sign- or zero-extended, for W
        bsel = Signal(2)  # the byte lane of the load's bits 0..7 (registered in E1)
        sidx = Signal(2)  # the byte lane of its sign bit
        low = word.word_select(bsel, 8)
        mid = Mux(bsel[1], word[24:32], word[8:16])
        ext = sgn & Cat(word[7], word[15], word[23], word[31]).bit_select(sidx, 1)
        with m.If(mem_done):
            m.d.sync += ldata.eq(
                Cat(
                    low,
                    Mux(is_byte, ext.replicate(8), mid),
                    Mux(is_word, word[16:], ext.replicate(16)),
                )
            )

        # ---- ea, eb: registered a cycle ahead (no enables)
        with m.If(accept & p["auipc_jal"]):
            # auipc, jal, jalr's link: the instruction's address
            m.d.sync += ea.eq(Cat(Const(0, 2), ipc))
        with m.Elif(accept & p["beq"]):
            m.d.sync += ea.eq(0xFFFFFFFF)
        with m.Else():
            m.d.sync += ea.eq(0)
        with m.If(accept & p["csr"]):
            # cycle[h] as of the instruction's D
            if self.counters:
                m.d.sync += eb.eq(Mux(p["csr_hi"], cycle[32:], cycle[:32]))
            else:
                m.d.sync += eb.eq(0)
        with m.Elif(accept & p["link"]):
            m.d.sync += eb.eq(4)
        with m.Else():
            m.d.sync += eb.eq(0)

        # ---- the serial shifter: 4 bits per cycle while 4 or more are left, then 1
        sh_cnt = Signal(5)
        sh_step4 = Signal()  # sh_cnt >= 4
        sh_zero = Signal()  # a shift by 0: opa holds
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
            shamt = Mux(d["b_rs2"], rs2[:5], imm[:5])
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
            opb.eq(Mux(sb_core, opb_core, eb)),
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
                top.eq(Mux(add_lo[17], add_h1[17], add_h0[16])),
                sum_h0.eq(add_h0),
                sum_h1.eq(add_h1[1:18]),
            ]

        # ================================================================ counters
        if self.counters:
            m.submodules.cycle = counter = CycleCounter()
            m.d.comb += cycle.eq(counter.count)

        # ================================================================ sequencing
        m.d.sync += x_e0.eq(go)
        with m.If(x_e0):
            with m.If(d_stop):
                m.d.sync += [halted.eq(1), fault.eq(d_illegal)]
            with m.Elif(d["shift"]):
                m.d.sync += x_shift.eq(1)
            with m.Else():
                m.d.sync += x_e1.eq(1)

        with m.If(x_shift & sh_last):
            m.d.sync += [x_shift.eq(0), x_e1.eq(1)]

        with m.If(x_e1):
            m.d.sync += x_e1.eq(0)
            with m.If(~second):
                with m.If(d["branch"]):
                    m.d.sync += [x_br.eq(1), x_free.eq(1)]
                with m.Elif(d["load"] | d["store"]):
                    m.d.sync += x_mem.eq(1)
                with m.Elif(d["jalr"] | d["slt"]):
                    # jalr: the target rs1 + imm after the link; slt: 0 + 0 + sign
                    m.d.sync += [second.eq(1), writes.eq(d["slt"] & d["rdnz"])]
                    with m.If(d["jalr"]):
                        m.d.sync += x_e1.eq(1)
                    with m.Else():
                        m.d.sync += x_e2.eq(1)
                with m.Else():
                    m.d.sync += [x_free.eq(1)]
            with m.Elif(d["jalr"]):
                # fetch from the target
                m.d.sync += [x_free.eq(1), fetching.eq(1), sel_sum.eq(1)]
            with m.Else():
                m.d.sync += [x_free.eq(1)]

        with m.If(x_e2):
            m.d.sync += [x_e2.eq(0), x_e1.eq(1)]

        with m.If(mem_done):
            m.d.sync += [x_mem.eq(0), x_free.eq(1)]
        return m
