"""CompactEngine: the compact device's datapath, one antithetic pair's forward pass.

The firmware (rtl/compact/firmware) keeps the schedule of spec 10.2; the engine does the
arithmetic of one pair at a time, both members in the same cycles, in low-rank mode
(spec 5, 6.2):

* ``NOISE l, A|B``: the digits of one stream of the pair (``A_l`` or ``B_l``, spec 2-3)
  from its start state ``x0`` (the ``X0`` register: the firmware mixes the keys, spec
  2.2-2.3, once per step for every stream) through a
  :class:`~pentegg.rtl.noise.prng.PentaryStreamCore`, a rank row of ``r`` digits a cycle,
  into the noise memory;
* ``BASE``: a shared sample's layer-0 product ``x . W_0^T`` (bias input 127) into the
  base memory, once per sample for every pair (golden shares it the same way);
* ``LAYER l``: ``x± . B`` (``r`` sums per member, all in one pass), then per output row
  ``o``: ``acc± = x± . W_l[o]^T`` (or the base product: layer 0 of a shared sample) and
  ``h± = act(acc± ± rshr((x± . B) . A[o]^T, k))`` (spec 5.3: ``rshr`` by the layer's
  shift, saturated to 0..127, or to -127..127 in the last layer), into the other bank.

Memories (one read and one write port each; iCE40 block RAMs): the weights (the host's
weight memory, spec 1.4 words: the firmware reads and writes it through the bus), the
activations (four banks of 128 ``{x−, x+}`` byte pairs: the input in bank 0, which a
shared sample keeps for every pair; layer ``l`` writes bank ``1 + (l & 1)`` and reads the
one layer ``l - 1`` wrote), the noise (a word of ``r`` digits per row: layer ``l``'s ``B``
rows from ``l * (2 max_width + 1)``, its ``A`` rows ``max_width + 1`` further), the base
products. Every pentary product is a select of 0, ``x`` or ``2x`` and a negation.

Bus (the core's; word address bits 25:24 select):

========  =========================================================================
0         the weight memory: word ``i`` (16 bits) at word ``i``
1         the activations: bank ``b`` (0..3), index ``k`` at word ``128 b + k``: bits 7:0
          ``x+``, bits 15:8 ``x−`` (int8); the input in bank 0, the logits in bank
          ``1 + ((n_layers - 1) & 1)``
2         registers (word = index): 0 ``CMD`` (write: bits 1:0 the op, 1 NOISE, 2 BASE,
          3 LAYER; bit 3 NOISE's stream, 0 A, 1 B; bits 6:4 the layer; bit 7 ``shared``:
          LAYER 0 takes the base products; read: bit 0 busy), 1 ``X0`` (NOISE's start
          state), 4 ``N_LAYERS``, 5 ``PERT_SHIFT`` (``k = log4(r) + sigma_shift``),
          ``8 + i`` ``WIDTH i``, ``16 + l`` ``ACT_SHIFT l``, ``24 + l`` ``WBASE l`` (layer
          ``l``'s first weight word)
========  =========================================================================

Every access is answered three cycles after its request, its data from a register (zero
in every other cycle); an access to a memory waits while an op runs (the firmware reads
``CMD`` until it is idle).

Throughput: a pass takes a cycle per input (``fan``), both members in the same cycle.
``LAYER`` takes ``fan`` cycles for ``x.B`` (all ``r`` sums at once), ``fan`` per output
row (``r + 2`` at least: the finish's) and a few to drain; ``BASE`` ``fan`` per row;
``NOISE`` a cycle per row and 3.
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from ...golden.arith import bits_for
from ..bram import NO_RW_CHECK
from ..cpu.rv32 import BUS_SIGNATURE
from ..noise.prng import PentaryStreamCore
from ..params import check_choice, check_int

__all__ = ["OPS", "REGS", "CompactEngine", "weight_words"]

#: ``CMD`` ops
OPS = {"noise": 1, "base": 2, "layer": 3}
#: Register indices (``width``, ``act_shift``, ``wbase``: the first of a row)
REGS = {
    "cmd": 0,
    "x0": 1,
    "n_layers": 4,
    "pert_shift": 5,
    "width": 8,
    "act_shift": 16,
    "wbase": 24,
}
BIAS = 127


def weight_words(max_layers: int, max_width: int) -> int:
    """The weight memory's words: each layer packed from a word boundary (spec 1.3)."""
    return max_layers * -(-(max_width * (max_width + 1)) // 5)


class CompactEngine(wiring.Component):
    """The compact device's datapath (module docstring).

    Parameters
    ----------
    max_layers : int
        1..8.
    max_width : int
        1..127 (an activation bank holds 128 entries).
    rank : int
        1 or 4.
    digits : str
        ``"binomial"`` or ``"uniform"``.

    Interface attributes
    --------------------
    bus : In(BUS_SIGNATURE)
        The core's bus, ``valid`` qualified by the SoC's region decode.
    busy : Out(1)
        An op runs.
    """

    def __init__(
        self, *, max_layers: int = 2, max_width: int = 64, rank: int = 4, digits="binomial"
    ):
        self.max_layers = check_int("max_layers", max_layers, 1, 8)
        self.max_width = check_int("max_width", max_width, 1, 127)
        self.rank = check_choice("rank", rank, (1, 4))
        self.digits = check_choice("digits", digits, ("binomial", "uniform"))
        self.max_fan = max_width + 1
        self.wwords = weight_words(max_layers, max_width)
        self.layer_rows = 2 * max_width + 1  # a layer's B rows (fan), then its A rows
        self.nrows = max_layers * self.layer_rows
        # widths (spec 9.2): |x.B| and |x.W| <= 127 * 2 * fan; the low-rank product
        # <= r * 2 times that; an accumulator <= the two
        xb_max = BIAS * 2 * self.max_fan
        self.xb_bits = bits_for(-xb_max, xb_max)
        p_max = self.rank * 2 * xb_max
        self.p_bits = bits_for(-p_max, p_max)
        acc_max = xb_max + p_max
        self.acc_bits = bits_for(-acc_max, acc_max) + 1  # +1: rshr's rounding constant
        super().__init__({"bus": In(BUS_SIGNATURE), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        r, ml, mw = self.rank, self.max_layers, self.max_width
        bus = self.bus

        # ---------------------------------------------------------------- registers
        x0 = Signal(32)
        n_layers = Signal(4)
        pshift = Signal(4)
        widths = Array(Signal(8, name=f"width{i}") for i in range(ml + 1))
        act_shift = Array(Signal(4, name=f"act_shift{i}") for i in range(ml))
        wbase = Array(Signal(range(self.wwords + 1), name=f"wbase{i}") for i in range(ml))

        # ---------------------------------------------------------------- memories
        wmem = memory.Memory(shape=16, depth=self.wwords, init=[], attrs=NO_RW_CHECK)
        xmem = memory.Memory(shape=16, depth=512, init=[], attrs=NO_RW_CHECK)
        nmem = memory.Memory(shape=3 * r, depth=self.nrows, init=[], attrs=NO_RW_CHECK)
        bmem = memory.Memory(shape=signed(self.xb_bits), depth=mw, init=[], attrs=NO_RW_CHECK)
        m.submodules.wmem, m.submodules.xmem = wmem, xmem
        m.submodules.nmem, m.submodules.bmem = nmem, bmem
        w_rp, w_wp = wmem.read_port(), wmem.write_port()
        x_rp, x_wp = xmem.read_port(), xmem.write_port()
        n_rp, n_wp = nmem.read_port(), nmem.write_port()
        b_rp, b_wp = bmem.read_port(), bmem.write_port()

        busy = Signal()
        m.d.comb += self.busy.eq(busy)

        # ---------------------------------------------------------------- the bus
        # a request is taken into flip-flops every cycle (it is held until ``ready``);
        # ``act``: the captured request acts (memories: only while idle); its read data
        # come a cycle later, are registered, and ``ready`` follows
        req = Signal()
        q_sel = Signal(2)
        # the widest index a memory takes (the weights' words, the activations' 512)
        q_addr = Signal(max(9, (self.wwords - 1).bit_length()))
        q_write = Signal()
        q_data = Signal(32)
        act = Signal()
        a1 = Signal()
        a2 = Signal()
        m.d.comb += act.eq(req & ((q_sel == 2) | ~busy))
        m.d.sync += [
            req.eq(bus.valid & ~act & ~a1 & ~a2),
            q_sel.eq(bus.addr[24:26]),
            q_addr.eq(bus.addr),
            q_write.eq(bus.write),
            q_data.eq(bus.wdata),
            a1.eq(act),
            a2.eq(a1),
        ]
        r1_sel = Signal(2)
        reg_data = Signal()  # CMD's busy bit (the other registers read 0)
        rdata = Signal(16)  # zero but in an answer's cycle (the SoC ORs the answers)
        m.d.sync += [r1_sel.eq(q_sel), rdata.eq(0)]
        with m.If(a1):
            with m.Switch(r1_sel):
                with m.Case(0):
                    m.d.sync += rdata.eq(w_rp.data)
                with m.Case(1):
                    m.d.sync += rdata.eq(x_rp.data)
                with m.Default():
                    m.d.sync += rdata.eq(reg_data)
        m.d.comb += [bus.ready.eq(a2), bus.rdata.eq(rdata)]
        cpu_mem = act & ~busy  # the cycle a memory access acts
        start = Signal()
        op_shared = Signal()
        with m.If(act & (q_sel == 2)):
            m.d.sync += reg_data.eq((q_addr[:6] == REGS["cmd"]) & busy)
            with m.If(q_write):
                with m.Switch(q_addr[:6]):
                    with m.Case(REGS["cmd"]):
                        m.d.comb += start.eq(q_data[:2] != 0)
                        m.d.sync += op_shared.eq(q_data[7])
                    with m.Case(REGS["x0"]):
                        m.d.sync += x0.eq(q_data)
                    with m.Case(REGS["n_layers"]):
                        m.d.sync += n_layers.eq(q_data)
                    with m.Case(REGS["pert_shift"]):
                        m.d.sync += pshift.eq(q_data)
                    for i in range(ml + 1):
                        with m.Case(REGS["width"] + i):
                            m.d.sync += widths[i].eq(q_data)
                    for i in range(ml):
                        with m.Case(REGS["act_shift"] + i):
                            m.d.sync += act_shift[i].eq(q_data)
                        with m.Case(REGS["wbase"] + i):
                            m.d.sync += wbase[i].eq(q_data)

        # ---------------------------------------------------------------- noise
        m.submodules.core = core = PentaryStreamCore(digits=self.digits, digits_per_beat=r)
        m.d.comb += core.x0.payload.eq(x0)
        n_ab = Signal()  # 0: A, 1: B
        n_row = Signal(8)
        n_rows = Signal(8)
        nbase = Array(Const(i * self.layer_rows, range(self.nrows + 1)) for i in range(ml))

        # ---------------------------------------------------------------- passes
        # Every path is short (the UP5K's 48 MHz): stage 0 issues the memories' addresses
        # of input k from counters and registered flags; stage 1 registers the memories'
        # data (and picks the weight digit); stage 2 is the MACs (x.B: both members' r sums;
        # a row: both members' sums). A row's end hands its sums and A row to the finish:
        # FA picks a rank term, FB accumulates the low-rank product; the tail T1..T6
        # (rounding, shift, acc +-, rounding, shift, saturate) takes a member a cycle.
        layer = Signal(3)
        n_out = Signal(8)
        fan_m1 = Signal(8)  # the row's last input index (the bias)
        bank_in = Signal(2)
        bank_out = Signal(2)
        last_layer = Signal()
        shared0 = Signal()  # layer 0 takes the base products
        base_op = Signal()
        k = Signal(8)
        k_rem = Signal(8)  # inputs after k in the row
        k_last = Signal()  # k == fan_m1
        o = Signal(8)
        o_last = Signal()  # o == n_out - 1
        o_rem = Signal(8)
        wword = Signal(range(self.wwords + 1))
        wpos = Signal(3)
        rnd_k = Signal(self.p_bits)  # rshr's rounding constants (0 for a shift of 0)
        rnd_s = Signal(self.acc_bits)
        sh_s = Signal(4)
        fin_busy = Signal()  # the finish works on a row
        tail_busy = Signal()

        s1 = Signal()  # stage 1 valid
        s1_xb = Signal()  # an x.B input (else a row's)
        s1_bias = Signal()
        s1_first = Signal()
        s1_last = Signal()  # the row's last input
        s1_row1 = Signal()  # a shared layer-0 row (its base product, no MAC)
        s1_o = Signal(8)
        s1_pos = Signal(3)
        m.d.sync += s1.eq(0)
        s2 = Signal()  # stage 2 valid
        s2_xb, s2_first, s2_last, s2_row1 = Signal(), Signal(), Signal(), Signal()

        def advance_k():
            """The next input of the row (k_last: the row's last)."""
            m.d.sync += [k.eq(k + 1), k_rem.eq(k_rem - 1), k_last.eq(k_rem == 1)]

        def restart_k():
            m.d.sync += [k.eq(0), k_rem.eq(fan_m1), k_last.eq(0)]  # fan >= 2

        with m.FSM():
            with m.State("IDLE"):
                with m.If(start):  # the CMD word is in q_data this cycle
                    m.d.sync += [busy.eq(1), layer.eq(q_data[4:7])]
                    with m.Switch(q_data[:2]):
                        with m.Case(OPS["noise"]):
                            ab, nl = q_data[3], q_data[4:7]
                            m.d.sync += [
                                n_ab.eq(ab),
                                n_row.eq(0),
                                n_rows.eq(Mux(ab, widths[nl] + 1, widths[nl + 1])),
                            ]
                            m.d.comb += core.x0.valid.eq(1)  # the stream starts
                            m.next = "N_ROWS"
                        with m.Case(OPS["base"]):
                            m.d.sync += [base_op.eq(1), layer.eq(0)]
                            m.next = "SETUP"
                        with m.Case(OPS["layer"]):
                            m.d.sync += base_op.eq(0)
                            m.next = "SETUP"

            # ---- NOISE: one stream's rows (A: out rows, B: fan rows); its first beat is
            # valid the cycle after x0 (the core drops what was left of the last stream)
            with m.State("N_ROWS"):
                m.d.comb += core.o.ready.eq(1)
                with m.If(core.o.valid):
                    row = nbase[layer] + Mux(n_ab, 0, self.max_fan) + n_row
                    m.d.comb += [
                        n_wp.addr.eq(row),
                        n_wp.data.eq(core.o.payload.as_value()),
                        n_wp.en.eq(1),
                    ]
                    m.d.sync += n_row.eq(n_row + 1)
                    with m.If(n_row + 1 == n_rows):
                        m.d.sync += busy.eq(0)
                        m.next = "IDLE"

            # ---- BASE and LAYER
            with m.State("SETUP"):
                sh = act_shift[layer]
                m.d.sync += [
                    fan_m1.eq(widths[layer]),
                    n_out.eq(widths[layer + 1]),
                    # the input stays in bank 0 (a shared sample serves every pair); the
                    # layers alternate between banks 1 and 2
                    bank_in.eq(Mux(layer == 0, 0, Mux(layer[0], 1, 2))),
                    bank_out.eq(Mux(layer[0], 2, 1)),
                    last_layer.eq(layer + 1 == n_layers),
                    shared0.eq(op_shared & (layer == 0) & ~base_op),
                    wword.eq(wbase[layer]),
                    wpos.eq(0),
                    o.eq(0),
                    rnd_k.eq(Mux(pshift == 0, 0, Const(1, self.p_bits) << (pshift - 1)[:4])),
                    rnd_s.eq(Mux(sh == 0, 0, Const(1, self.acc_bits) << (sh - 1)[:4])),
                    sh_s.eq(sh),
                ]
                m.next = "SETUP2"
            with m.State("SETUP2"):  # from the registers SETUP loaded
                restart_k()
                m.d.sync += [o_rem.eq(n_out - 1), o_last.eq(n_out == 1)]
                with m.If(base_op):
                    m.next = "ROWS"
                with m.Else():
                    m.next = "XB"
            with m.State("XB"):  # x.B: input k of both members against B row k
                m.d.comb += [
                    x_rp.addr.eq(Cat(k[:7], bank_in)),
                    n_rp.addr.eq(nbase[layer] + k),
                ]
                m.d.sync += [
                    s1.eq(1),
                    s1_xb.eq(1),
                    s1_bias.eq(k_last),
                    s1_first.eq(k == 0),
                ]
                advance_k()
                with m.If(k_last):
                    restart_k()
                    m.next = "ROWS"
            with m.State("ROWS"):
                row_end = shared0 | k_last
                # a row's last input waits while the finish works on the row before (or
                # may still take it: a row end in stage 1 or 2)
                go = ~row_end | base_op | ~(fin_busy | s2 & s2_last | s1 & s1_last)
                m.d.comb += [
                    x_rp.addr.eq(Cat(k[:7], bank_in)),
                    w_rp.addr.eq(wword),
                    b_rp.addr.eq(o),
                    n_rp.addr.eq(nbase[layer] + self.max_fan + o),
                ]
                m.d.sync += [
                    s1.eq(go),
                    s1_xb.eq(0),
                    s1_bias.eq(k_last),
                    s1_first.eq(k == 0),
                    s1_last.eq(row_end),
                    s1_row1.eq(shared0),
                    s1_o.eq(o),
                    s1_pos.eq(wpos),
                ]
                with m.If(go & ~shared0):  # the weights' cursor runs on over row ends
                    m.d.sync += wpos.eq(Mux(wpos == 4, 0, wpos + 1))
                    with m.If(wpos == 4):
                        m.d.sync += wword.eq(wword + 1)
                    advance_k()
                with m.If(go & row_end):
                    restart_k()
                    m.d.sync += [o.eq(o + 1), o_rem.eq(o_rem - 1), o_last.eq(o_rem == 1)]
                    with m.If(o_last):
                        m.next = "DRAIN"
            with m.State("DRAIN"):  # until the last row is written
                with m.If(~s1 & ~s2 & ~fin_busy & ~tail_busy):
                    m.d.sync += busy.eq(0)
                    m.next = "IDLE"

        # ---- stage 1: the memories' data into registers
        xw = x_rp.data
        s2_o = Signal(8)
        s2_x = [Signal(signed(8), name=f"s2_x{s}") for s in "pm"]
        s2_w = Signal(3)  # the weight digit
        s2_n = Signal(3 * r)  # the B row (x.B) or the A row (a row's end)
        s2_b = Signal(signed(self.xb_bits))
        m.d.sync += [
            s2.eq(s1),
            s2_xb.eq(s1_xb),
            s2_first.eq(s1_first),
            s2_last.eq(s1_last),
            s2_row1.eq(s1_row1),
            s2_o.eq(s1_o),
            s2_x[0].eq(Mux(s1_bias, BIAS, xw[:8].as_signed())),
            s2_x[1].eq(Mux(s1_bias, BIAS, xw[8:16].as_signed())),
            s2_w.eq(Array(w_rp.data[3 * i : 3 * i + 3] for i in range(5))[s1_pos]),
            s2_n.eq(n_rp.data),
            s2_b.eq(b_rp.data),
        ]

        def mac(acc, first, x, d):
            """``acc`` (restarting at ``first``) plus ``x`` times the digit ``d``: one
            carry chain (a negative digit adds the inverted magnitude and a carry in, the
            carry entering through an extra low bit on both operands)."""
            width = len(acc)
            mag = Signal(signed(len(x) + 1))
            m.d.comb += mag.eq(Mux(d[0], x, Mux(d[1], x << 1, 0)))
            neg = d[2]
            opnd = Mux(neg, ~mag, mag)
            opnd = Cat(opnd, opnd[-1].replicate(width - len(mag)))  # sign-extended
            base = Mux(first, 0, acc)
            total = Cat(neg, base) + Cat(neg, opnd)
            return total[1 : width + 1].as_signed()

        # ---- stage 2: the MACs
        xb = [[Signal(signed(self.xb_bits), name=f"xb{s}_{c}") for c in range(r)] for s in "pm"]
        with m.If(s2 & s2_xb):
            for c in range(r):
                for s in range(2):
                    m.d.sync += xb[s][c].eq(
                        mac(xb[s][c], s2_first, s2_x[s], s2_n[3 * c : 3 * c + 3])
                    )
        acc = [Signal(signed(self.acc_bits), name=f"acc{s}") for s in "pm"]
        sums = [mac(acc[s], s2_first, s2_x[s], s2_w) for s in range(2)]
        with m.If(s2 & ~s2_xb & ~s2_row1):
            m.d.sync += [acc[0].eq(sums[0]), acc[1].eq(sums[1])]
        # BASE: the row's sum of member + is the base product
        m.d.comb += [
            b_wp.addr.eq(s2_o),
            b_wp.data.eq(sums[0]),
            b_wp.en.eq(s2 & s2_last & base_op),
        ]

        # ---- the finish: a row's sums (or the base product) and its A row wait here;
        # cycles fc = 0 .. r-1 pick a rank term (FA), FB accumulates p±; cycles r + 1
        # and r + 2 hand member + and member - to the tail; a row every r + 3 cycles
        fc = Signal(range(r + 4))
        fin_acc = [Signal(signed(self.acc_bits), name=f"fin_acc{s}") for s in "pm"]
        fin_a = Signal(3 * r)
        fin_o = Signal(8)
        with m.If(s2 & s2_last & ~base_op):
            m.d.sync += [fin_busy.eq(1), fc.eq(0), fin_o.eq(s2_o), fin_a.eq(s2_n)]
            for s in range(2):
                m.d.sync += fin_acc[s].eq(Mux(s2_row1, s2_b, sums[s]))
        with m.Elif(fin_busy):
            m.d.sync += fc.eq(fc + 1)
            with m.If(fc == r + 2):
                m.d.sync += fin_busy.eq(0)
        cbits = max(1, (r - 1).bit_length())
        fa = Signal()
        fa_first = Signal()
        fa_x = [Signal(signed(self.xb_bits), name=f"fa_x{s}") for s in "pm"]
        fa_d = Signal(3)
        m.d.sync += [
            fa.eq(fin_busy & (fc < r)),
            fa_first.eq(fc == 0),
            fa_d.eq(Array(fin_a[3 * c : 3 * c + 3] for c in range(r))[fc[:cbits]]),
        ]
        for s in range(2):
            m.d.sync += fa_x[s].eq(Array(xb[s])[fc[:cbits]])
        pacc = [Signal(signed(self.p_bits), name=f"p{s}") for s in "pm"]
        with m.If(fa):
            for s in range(2):
                m.d.sync += pacc[s].eq(mac(pacc[s], fa_first, fa_x[s], fa_d))

        # ---- the tail, a member a cycle (member + at fc = r + 1, member - at r + 2)
        feed = fin_busy & (fc > r)
        minus = fc == r + 2
        t1_v, t1_m = Signal(), Signal()
        t1_o = Signal(8)
        t1_u = Signal(signed(self.p_bits + 1))
        t1_acc = Signal(signed(self.acc_bits))
        m.d.sync += [
            t1_v.eq(feed),
            t1_m.eq(minus),
            t1_o.eq(fin_o),
            t1_u.eq(Mux(minus, pacc[1], pacc[0]) + rnd_k),
            t1_acc.eq(Mux(minus, fin_acc[1], fin_acc[0])),
        ]
        t2_v, t2_m = Signal(), Signal()
        t2_o = Signal(8)
        t2_t = Signal(signed(self.p_bits))
        t2_acc = Signal(signed(self.acc_bits))
        m.d.sync += [
            t2_v.eq(t1_v),
            t2_m.eq(t1_m),
            t2_o.eq(t1_o),
            t2_t.eq(t1_u >> pshift),
            t2_acc.eq(t1_acc),
        ]
        t3_v, t3_m = Signal(), Signal()
        t3_o = Signal(8)
        t3_y = Signal(signed(self.acc_bits))
        m.d.sync += [
            t3_v.eq(t2_v),
            t3_m.eq(t2_m),
            t3_o.eq(t2_o),
            t3_y.eq(Mux(t2_m, t2_acc - t2_t, t2_acc + t2_t)),
        ]
        t4_v, t4_m = Signal(), Signal()
        t4_o = Signal(8)
        t4_v2 = Signal(signed(self.acc_bits + 1))
        m.d.sync += [t4_v.eq(t3_v), t4_m.eq(t3_m), t4_o.eq(t3_o), t4_v2.eq(t3_y + rnd_s)]
        t5_v, t5_m = Signal(), Signal()
        t5_o = Signal(8)
        t5_z = Signal(signed(self.acc_bits))
        m.d.sync += [t5_v.eq(t4_v), t5_m.eq(t4_m), t5_o.eq(t4_o), t5_z.eq(t4_v2 >> sh_s)]
        m.d.comb += tail_busy.eq(t1_v | t2_v | t3_v | t4_v | t5_v)
        lo = Mux(last_layer, -127, 0)
        h = Mux(t5_z > 127, 127, Mux(t5_z < lo, lo, t5_z))[:8]
        h_plus = Signal(8)
        with m.If(t5_v & ~t5_m):
            m.d.sync += h_plus.eq(h)

        # ---- the activation memory's write port: the tail's member -, or the core's
        with m.If(t5_v & t5_m):
            m.d.comb += [
                x_wp.addr.eq(Cat(t5_o[:7], bank_out)),
                x_wp.data.eq(Cat(h_plus, h)),
                x_wp.en.eq(1),
            ]
        with m.Elif(cpu_mem & q_write & (q_sel == 1)):
            m.d.comb += [x_wp.addr.eq(q_addr), x_wp.data.eq(q_data), x_wp.en.eq(1)]
        m.d.comb += [
            w_wp.addr.eq(q_addr),
            w_wp.data.eq(q_data),
            w_wp.en.eq(cpu_mem & q_write & (q_sel == 0)),
        ]
        # the core's reads (idle only): the read ports' addresses
        with m.If(~busy):
            m.d.comb += [w_rp.addr.eq(q_addr), x_rp.addr.eq(q_addr)]
        return m
