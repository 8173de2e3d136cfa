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


def _dsel(x, d):
    """``x`` times the digit of 3-bit code ``d`` (spec 1.2): select 0, x or 2x, negate."""
    m = Mux(d[0], x, Mux(d[1], x << 1, 0))
    return Mux(d[2], -m, m)


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
        q_addr = Signal(24)
        q_write = Signal()
        q_data = Signal(32)
        act = Signal()
        a1 = Signal()
        a2 = Signal()
        m.d.comb += act.eq(req & ((q_sel == 2) | ~busy))
        m.d.sync += [
            req.eq(bus.valid & ~act & ~a1 & ~a2),
            q_sel.eq(bus.addr[24:26]),
            q_addr.eq(bus.addr[:24]),
            q_write.eq(bus.write),
            q_data.eq(bus.wdata),
            a1.eq(act),
            a2.eq(a1),
        ]
        r1_sel = Signal(2)
        reg_data = Signal(32)
        rdata = Signal(32)  # zero but in an answer's cycle (the SoC ORs the answers)
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
            m.d.sync += reg_data.eq(Mux(q_addr[:6] == REGS["cmd"], busy, 0))
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
        # stage 0 issues the addresses of input k (and the row's A row at its end);
        # stage 1 has the data: the MACs; then the finish pipeline F1..F6 of each row
        layer = Signal(3)
        fan = Signal(8)
        n_out = Signal(8)
        bank_in = Signal(2)
        bank_out = Signal(2)
        last_layer = Signal()
        shared0 = Signal()  # layer 0 takes the base products
        base_op = Signal()
        k = Signal(8)
        o = Signal(8)
        wword = Signal(range(self.wwords + 1))
        wpos = Signal(3)
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
                m.d.sync += [
                    fan.eq(widths[layer] + 1),
                    n_out.eq(widths[layer + 1]),
                    # the input stays in bank 0 (a shared sample serves every pair); the
                    # layers alternate between banks 1 and 2
                    bank_in.eq(Mux(layer == 0, 0, Mux(layer[0], 1, 2))),
                    bank_out.eq(Mux(layer[0], 2, 1)),
                    last_layer.eq(layer + 1 == n_layers),
                    shared0.eq(op_shared & (layer == 0) & ~base_op),
                    k.eq(0),
                    o.eq(0),
                    wword.eq(wbase[layer]),
                    wpos.eq(0),
                ]
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
                    s1_bias.eq(k == fan - 1),
                    s1_first.eq(k == 0),
                    k.eq(k + 1),
                ]
                with m.If(k == fan - 1):
                    m.d.sync += k.eq(0)
                    m.next = "ROWS"
            with m.State("ROWS"):
                row_end = shared0 | (k == fan - 1)
                # a row's last input waits while the finish works on the row before (or
                # takes it: a row end in stage 1)
                go = ~row_end | base_op | ~fin_busy & ~(s1 & s1_last)
                m.d.comb += [
                    x_rp.addr.eq(Cat(k[:7], bank_in)),
                    w_rp.addr.eq(wword),
                    b_rp.addr.eq(o),
                    n_rp.addr.eq(nbase[layer] + self.max_fan + o),
                ]
                m.d.sync += [
                    s1.eq(go),
                    s1_xb.eq(0),
                    s1_bias.eq(k == fan - 1),
                    s1_first.eq(k == 0),
                    s1_last.eq(row_end),
                    s1_row1.eq(shared0),
                    s1_o.eq(o),
                    s1_pos.eq(wpos),
                ]
                with m.If(go & ~shared0):  # the weights' cursor runs on over row ends
                    m.d.sync += [wpos.eq(Mux(wpos == 4, 0, wpos + 1)), k.eq(k + 1)]
                    with m.If(wpos == 4):
                        m.d.sync += wword.eq(wword + 1)
                with m.If(go & row_end):
                    m.d.sync += [k.eq(0), o.eq(o + 1)]
                    with m.If(o + 1 == n_out):
                        m.next = "DRAIN"
            with m.State("DRAIN"):  # until the last row is written
                with m.If(~s1 & ~fin_busy & ~tail_busy):
                    m.d.sync += busy.eq(0)
                    m.next = "IDLE"

        # ---- stage 1: the MACs
        xw = x_rp.data
        xp = Mux(s1_bias, BIAS, xw[:8].as_signed())
        xm = Mux(s1_bias, BIAS, xw[8:16].as_signed())
        xb = [[Signal(signed(self.xb_bits), name=f"xb{s}_{c}") for c in range(r)] for s in "pm"]
        with m.If(s1 & s1_xb):
            b = n_rp.data
            for c in range(r):
                d = b[3 * c : 3 * c + 3]
                for s, x in ((0, xp), (1, xm)):
                    m.d.sync += xb[s][c].eq(Mux(s1_first, 0, xb[s][c]) + _dsel(x, d))
        wd = Array(w_rp.data[3 * i : 3 * i + 3] for i in range(5))[s1_pos]
        acc = [Signal(signed(self.acc_bits), name=f"acc{s}") for s in "pm"]
        terms = [_dsel(xp, wd), _dsel(xm, wd)]
        sums = [Mux(s1_first, 0, acc[s]) + terms[s] for s in range(2)]
        row = s1 & ~s1_xb & ~s1_row1
        with m.If(row):
            m.d.sync += [acc[0].eq(sums[0]), acc[1].eq(sums[1])]
        # BASE: the row's sum of member + is the base product
        m.d.comb += [
            b_wp.addr.eq(s1_o),
            b_wp.data.eq(sums[0]),
            b_wp.en.eq(s1 & s1_last & base_op),
        ]

        # ---- the finish of a row: its sums (or, shared layer 0, the base product) and its
        # A row wait in the finish's registers; cycles 0 .. r-1 accumulate the low-rank
        # terms p± = sum_c (x±.B)[c] A[o, c] of both members, a term a cycle; cycles r and
        # r + 1 hand member + and member - to the tail: a row every r + 2 cycles at most
        fc = Signal(range(r + 2))
        fin_acc = [Signal(signed(self.acc_bits), name=f"fin_acc{s}") for s in "pm"]
        fin_a = Signal(3 * r)
        fin_o = Signal(8)
        pacc = [Signal(signed(self.p_bits), name=f"p{s}") for s in "pm"]
        with m.If(s1 & s1_last & ~base_op):
            m.d.sync += [fin_busy.eq(1), fc.eq(0), fin_o.eq(s1_o), fin_a.eq(n_rp.data)]
            for s in range(2):
                m.d.sync += fin_acc[s].eq(Mux(s1_row1, b_rp.data, sums[s]))
        with m.Elif(fin_busy):
            m.d.sync += fc.eq(fc + 1)
            with m.If(fc == r + 1):
                m.d.sync += fin_busy.eq(0)
        cbits = max(1, (r - 1).bit_length())
        digit = Array(fin_a[3 * c : 3 * c + 3] for c in range(r))[fc[:cbits]]
        with m.If(fin_busy & (fc < r)):
            for s in range(2):
                term = _dsel(Array(xb[s])[fc[:cbits]], digit)
                m.d.sync += pacc[s].eq(Mux(fc == 0, 0, pacc[s]) + term)

        # ---- the tail, a member a cycle: T1 rshr(p, k), T2 acc +- it, T3 rshr by the
        # layer's shift, then saturate; member + waits for member - and both are written
        minus = fc == r + 1
        t1_v, t1_m = Signal(), Signal()
        t1_o = Signal(8)
        t1_t = Signal(signed(self.p_bits))
        t1_acc = Signal(signed(self.acc_bits))
        p_in = Mux(minus, pacc[1], pacc[0])
        rnd_k = Mux(pshift == 0, 0, Const(1, self.p_bits) << (pshift - 1)[:4])
        m.d.sync += [
            t1_v.eq(fin_busy & (fc >= r)),
            t1_m.eq(minus),
            t1_o.eq(fin_o),
            t1_t.eq((p_in + rnd_k) >> pshift),
            t1_acc.eq(Mux(minus, fin_acc[1], fin_acc[0])),
        ]
        t2_v, t2_m = Signal(), Signal()
        t2_o = Signal(8)
        t2_y = Signal(signed(self.acc_bits))
        m.d.sync += [
            t2_v.eq(t1_v),
            t2_m.eq(t1_m),
            t2_o.eq(t1_o),
            t2_y.eq(t1_acc + Mux(t1_m, -t1_t, t1_t)),
        ]
        sh = act_shift[layer]
        t3_v, t3_m = Signal(), Signal()
        t3_o = Signal(8)
        t3_z = Signal(signed(self.acc_bits))
        rnd_s = Mux(sh == 0, 0, Const(1, self.acc_bits) << (sh - 1)[:4])
        m.d.sync += [
            t3_v.eq(t2_v),
            t3_m.eq(t2_m),
            t3_o.eq(t2_o),
            t3_z.eq((t2_y + rnd_s) >> sh),
        ]
        m.d.comb += tail_busy.eq(t1_v | t2_v | t3_v)
        lo = Mux(last_layer, -127, 0)
        h = Mux(t3_z > 127, 127, Mux(t3_z < lo, lo, t3_z))[:8]
        h_plus = Signal(8)
        with m.If(t3_v & ~t3_m):
            m.d.sync += h_plus.eq(h)

        # ---- the activation memory's write port: the finish, or the core's (idle)
        with m.If(t3_v & t3_m):
            m.d.comb += [
                x_wp.addr.eq(Cat(t3_o[:7], bank_out)),
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
