"""CompactEngine: the compact device's datapath, one antithetic pair's forward pass.

The firmware (rtl/compact/firmware) keeps the schedule of spec 10.2; the engine does the
arithmetic of one pair at a time, both members in the same cycles, in low-rank mode
(spec 5, 6.2):

* ``NOISE``: ``A_l`` and ``B_l`` of the pair for every layer (streams ``(step, pair, l,
  A|B)``, spec 2-3) from a :class:`~pentegg.rtl.noise.keyer.StreamKeyer` and a
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
          3 LAYER; bits 6:4 the layer; bit 7 ``shared``: LAYER 0 takes the base products;
          read: bit 0 busy), 1 ``SEED``, 2 ``STEP``, 3 ``PAIR``, 4 ``N_LAYERS``,
          5 ``PERT_SHIFT`` (``k = log4(r) + sigma_shift``), ``8 + i`` ``WIDTH i``,
          ``16 + l`` ``ACT_SHIFT l``, ``24 + l`` ``WBASE l`` (layer ``l``'s first weight word)
========  =========================================================================

Every access is answered three cycles after its request, its data from a register (zero
in every other cycle); an access to a memory waits while an op runs (the firmware reads
``CMD`` until it is idle).

Throughput: a pass takes a cycle per input (``fan``), both members in the same cycle.
``LAYER`` takes ``fan`` cycles for ``x.B`` (all ``r`` sums at once), ``fan`` per output
row (one per row for a shared layer 0) and 9 to drain; ``BASE`` ``fan`` per row and 3;
``NOISE`` about 15 cycles per stream start (29 after a new seed) and a cycle per row.
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from ...golden.arith import bits_for
from ..bram import NO_RW_CHECK
from ..cpu.rv32 import BUS_SIGNATURE
from ..noise.keyer import StreamKeyer
from ..noise.prng import PentaryStreamCore
from ..params import check_choice, check_int

__all__ = ["OPS", "REGS", "CompactEngine", "weight_words"]

#: ``CMD`` ops
OPS = {"noise": 1, "base": 2, "layer": 3}
#: Register indices (``width``, ``act_shift``, ``wbase``: the first of a row)
REGS = {
    "cmd": 0,
    "seed": 1,
    "step": 2,
    "pair": 3,
    "n_layers": 4,
    "pert_shift": 5,
    "width": 8,
    "act_shift": 16,
    "wbase": 24,
}
BIAS = 127
#: cycles from a pass's last issue until its last result is written
DRAIN = 9


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
        seed = Signal(32)
        reseed = Signal(init=1)  # the run key is to be computed (a new seed)
        step = Signal(16)
        pair = Signal(11)
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
                    with m.Case(REGS["seed"]):
                        m.d.sync += [seed.eq(q_data), reseed.eq(1)]
                    with m.Case(REGS["step"]):
                        m.d.sync += step.eq(q_data)
                    with m.Case(REGS["pair"]):
                        m.d.sync += pair.eq(q_data)
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
        m.submodules.keyer = keyer = StreamKeyer()
        m.submodules.core = core = PentaryStreamCore(digits=self.digits, digits_per_beat=r)
        wiring.connect(m, keyer.x0, core.x0)
        m.d.comb += keyer.seed.eq(seed)
        n_layer = Signal(3)
        n_ab = Signal()  # 0: A, 1: B
        n_row = Signal(8)
        n_rows = Signal(8)
        n_key = Signal()  # a key request is out
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
        drain = Signal(range(DRAIN + 1))

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
                            m.d.sync += [n_layer.eq(0), n_ab.eq(0), n_key.eq(0)]
                            m.next = "N_KEY"
                        with m.Case(OPS["base"]):
                            m.d.sync += [base_op.eq(1), layer.eq(0)]
                            m.next = "SETUP"
                        with m.Case(OPS["layer"]):
                            m.d.sync += base_op.eq(0)
                            m.next = "SETUP"

            # ---- NOISE: per layer the A stream (out rows), then the B stream (fan rows)
            with m.State("N_KEY"):
                m.d.comb += [
                    keyer.k.valid.eq(1),
                    keyer.k.payload.ab.eq(n_ab),
                    keyer.k.payload.layer.eq(n_layer),
                    keyer.k.payload.pair.eq(pair),
                    keyer.k.payload.step.eq(step),
                    keyer.k.payload.reseed.eq(reseed),
                ]
                with m.If(keyer.k.ready):
                    m.d.sync += [
                        reseed.eq(0),
                        n_row.eq(0),
                        n_rows.eq(Mux(n_ab, widths[n_layer] + 1, widths[n_layer + 1])),
                    ]
                    m.next = "N_LOAD"
            with m.State("N_LOAD"):  # the stream's start state reaches the core; beats
                # valid before it (the last stream's rest of a word) are not this stream's
                with m.If(keyer.x0.valid):
                    m.next = "N_ROWS"
            with m.State("N_ROWS"):
                m.d.comb += core.o.ready.eq(1)
                with m.If(core.o.valid):
                    row = nbase[n_layer] + Mux(n_ab, 0, self.max_fan) + n_row
                    m.d.comb += [
                        n_wp.addr.eq(row),
                        n_wp.data.eq(core.o.payload.as_value()),
                        n_wp.en.eq(1),
                    ]
                    m.d.sync += n_row.eq(n_row + 1)
                    with m.If(n_row + 1 == n_rows):
                        m.d.sync += n_ab.eq(~n_ab)
                        with m.If(n_ab):
                            m.d.sync += n_layer.eq(n_layer + 1)
                            with m.If(n_layer + 1 == n_layers):
                                m.d.sync += busy.eq(0)
                                m.next = "IDLE"
                            with m.Else():
                                m.next = "N_KEY"
                        with m.Else():
                            m.next = "N_KEY"

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
                m.d.comb += [
                    x_rp.addr.eq(Cat(k[:7], bank_in)),
                    w_rp.addr.eq(wword),
                    b_rp.addr.eq(o),
                    n_rp.addr.eq(nbase[layer] + self.max_fan + o),
                ]
                m.d.sync += [
                    s1.eq(1),
                    s1_xb.eq(0),
                    s1_bias.eq(k == fan - 1),
                    s1_first.eq(k == 0),
                    s1_last.eq(row_end),
                    s1_row1.eq(shared0),
                    s1_o.eq(o),
                    s1_pos.eq(wpos),
                ]
                with m.If(~shared0):  # the weights' cursor runs on over row ends
                    m.d.sync += [wpos.eq(Mux(wpos == 4, 0, wpos + 1)), k.eq(k + 1)]
                    with m.If(wpos == 4):
                        m.d.sync += wword.eq(wword + 1)
                with m.If(row_end):
                    m.d.sync += [k.eq(0), o.eq(o + 1)]
                    with m.If(o + 1 == n_out):
                        m.d.sync += drain.eq(DRAIN)
                        m.next = "DRAIN"
            with m.State("DRAIN"):
                m.d.sync += drain.eq(drain - 1)
                with m.If(drain == 0):
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
        # a row's result: its sum, or (shared layer 0) the base product
        f1 = Signal()
        f1_acc = [Signal(signed(self.acc_bits), name=f"f1_acc{s}") for s in "pm"]
        f1_o = Signal(8)
        f1_a = Signal(3 * r)
        m.d.sync += f1.eq(s1 & s1_last & ~base_op)
        with m.If(s1 & s1_last):
            m.d.sync += [f1_o.eq(s1_o), f1_a.eq(n_rp.data)]
            for s in range(2):
                m.d.sync += f1_acc[s].eq(Mux(s1_row1, b_rp.data, sums[s]))
        # BASE: the row's sum of member + is the base product
        m.d.comb += [
            b_wp.addr.eq(s1_o),
            b_wp.data.eq(sums[0]),
            b_wp.en.eq(s1 & s1_last & base_op),
        ]

        # ---- the finish: F1 products with A, F2 their sum, F3 rshr by k, F4 acc +- it,
        # F5 rshr by the layer's shift, F6 saturate and write
        f2 = Signal()
        f2_o = Signal(8)
        f2_acc = [Signal(signed(self.acc_bits), name=f"f2_acc{s}") for s in "pm"]
        f2_t = [[Signal(signed(self.p_bits), name=f"f2_t{s}{c}") for c in range(r)] for s in "pm"]
        m.d.sync += [f2.eq(f1), f2_o.eq(f1_o), f2_acc[0].eq(f1_acc[0]), f2_acc[1].eq(f1_acc[1])]
        for s in range(2):
            for c in range(r):
                m.d.sync += f2_t[s][c].eq(_dsel(xb[s][c], f1_a[3 * c : 3 * c + 3]))
        f3 = Signal()
        f3_o = Signal(8)
        f3_acc = [Signal(signed(self.acc_bits), name=f"f3_acc{s}") for s in "pm"]
        f3_p = [Signal(signed(self.p_bits), name=f"f3_p{s}") for s in "pm"]
        m.d.sync += [f3.eq(f2), f3_o.eq(f2_o), f3_acc[0].eq(f2_acc[0]), f3_acc[1].eq(f2_acc[1])]
        for s in range(2):
            total = f2_t[s][0]
            for c in range(1, r):
                total = total + f2_t[s][c]
            m.d.sync += f3_p[s].eq(total)
        f4 = Signal()
        f4_o = Signal(8)
        f4_acc = [Signal(signed(self.acc_bits), name=f"f4_acc{s}") for s in "pm"]
        f4_t = [Signal(signed(self.p_bits), name=f"f4_t{s}") for s in "pm"]
        m.d.sync += [f4.eq(f3), f4_o.eq(f3_o), f4_acc[0].eq(f3_acc[0]), f4_acc[1].eq(f3_acc[1])]
        for s in range(2):
            rounded = f3_p[s] + Mux(pshift == 0, 0, Const(1, self.p_bits) << (pshift - 1)[:4])
            m.d.sync += f4_t[s].eq(rounded >> pshift)
        f5 = Signal()
        f5_o = Signal(8)
        f5_y = [Signal(signed(self.acc_bits), name=f"f5_y{s}") for s in "pm"]
        m.d.sync += [
            f5.eq(f4),
            f5_o.eq(f4_o),
            f5_y[0].eq(f4_acc[0] + f4_t[0]),
            f5_y[1].eq(f4_acc[1] - f4_t[1]),
        ]
        sh = act_shift[layer]
        f6 = Signal()
        f6_o = Signal(8)
        f6_z = [Signal(signed(self.acc_bits), name=f"f6_z{s}") for s in "pm"]
        m.d.sync += [f6.eq(f5), f6_o.eq(f5_o)]
        for s in range(2):
            rounded = f5_y[s] + Mux(sh == 0, 0, Const(1, self.acc_bits) << (sh - 1)[:4])
            m.d.sync += f6_z[s].eq(rounded >> sh)
        lo = Mux(last_layer, -127, 0)
        h = [Mux(f6_z[s] > 127, 127, Mux(f6_z[s] < lo, lo, f6_z[s]))[:8] for s in range(2)]

        # ---- the activation memory's write port: the finish, or the core's (idle)
        with m.If(f6):
            m.d.comb += [
                x_wp.addr.eq(Cat(f6_o[:7], bank_out)),
                x_wp.data.eq(Cat(h[0], h[1])),
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
