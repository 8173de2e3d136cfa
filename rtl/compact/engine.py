"""CompactEngine: the compact device's datapath, one antithetic pair's forward pass and
its votes.

The firmware (rtl/compact/firmware) keeps the schedule of spec 10.2; the engine does the
arithmetic of one pair at a time, in low-rank mode (spec 5, 6.2), both members' rows
through two MACs that share each weight digit read, everything else one member after
the other (the UP5K's logic cells are its limit, not its cycles):

* ``NOISE l, A|B``: the digits of one stream of the pair (``A_l`` or ``B_l``, spec 2-3)
  from its start state ``x0`` (the ``X0`` register: the firmware mixes the keys, spec
  2.2-2.3, once per step for every stream) through a
  :class:`~pentegg.rtl.noise.prng.PentaryStreamCore`, a rank row of ``r`` digits a cycle,
  into the noise memory;
* ``BASE``: a shared sample's layer-0 product ``x . W_0^T`` (bias input 127) into the
  base memory, once per sample for every pair (golden shares it the same way). The
  engine holds four shared samples at once (slots, CMD bits 9:8: the input of slot
  ``s`` in activation bank ``3 * (s & 1)``, low bytes for ``s < 2``, high bytes else;
  its base products in the base memory's slot ``s``), so that the firmware generates a
  pair's noise once for four samples;
* ``LAYER l``: ``x+ . B`` (member +: the activations' low bytes; ``r`` sums, all in one
  pass), then ``x− . B`` (member −: their high bytes), then per output row ``o`` one pass
  for both members, ``acc± = x± . W_l[o]^T`` (or the base product: layer 0 of a shared
  sample), and ``h± = act(acc± ± rshr((x± . B) . A[o]^T, k))`` (spec 5.3: ``rshr`` by
  the layer's shift, saturated to 0..127, or to -127..127 in the last layer), member +
  then member −, into the member's byte of the other bank. Layer 0 of a shared sample
  has one ``x . B`` pass: both members' input, ``x . B``, base product and ``p = (x . B)
  . A[o]^T`` are the same (spec 6.2), so each row's ``p`` goes through the tail twice,
  with ``+`` and with ``−``;
* ``VOTE l``: the pair's votes of layer ``l`` (spec 8.1, low-rank: ``g A B^T``) for a
  block of rows: ``Z[(o - z_row) fan + k] (+)= g * sum_c A[o, c] B[k, c]`` for the rows
  ``o = z_row .. z_row + z_rows - 1`` and every input ``k`` (``fan = width l + 1``;
  ``z_rows * fan <= Z_WORDS``, which the firmware keeps), from the pair's noise in the
  noise memory and its ``g`` (the ``G`` register); ``first`` (CMD bit 7) writes the
  votes instead of adding them. The firmware runs it per pair of the step for each
  block, then reads the block's votes and applies the moves.

Memories (one read and one write port each; iCE40 block RAMs): the weights (the host's
weight memory, spec 1.4 words: the firmware reads and writes it through the bus), the
activations (four banks of 128 ``{x−, x+}`` byte pairs: the input in bank 0, which a
shared sample keeps for every pair, the shared samples of slots 1 and 3 in bank 3;
layer ``l`` writes bank ``1 + (l & 1)`` and reads the one layer ``l - 1`` wrote), the
noise (a word of ``r`` digits per row: row ``i`` of layer ``l``'s ``B`` at
``2 l * 2**b + i``, of its ``A`` at ``(2 l + 1) * 2**b + i``, ``2**b`` the least power
of two above ``max_width``: addresses without adders), the base products (four slots
of ``2**ceil(log2(max_width))`` rows: one block RAM at 64), the votes (``Z_WORDS``
words of ``z_bits``). The weights, the activations, the noise and the votes are cut
into slices of bits as narrow as one block RAM holding their depth is (``_sliced``), so
that no multiplexer of several block RAMs' data lies between them and the digit
selects. Every pentary product is a select of 0, ``x`` or ``2x`` and a negation.

Bus (the core's; word address bits 25:24 select):

========  =========================================================================
0         the weight memory: word ``i`` (16 bits) at word ``i``
1         the activations: bank ``b`` (0..3), index ``k`` at word ``128 b + k``: bits 7:0
          ``x+``, bits 15:8 ``x−`` (int8); the input in bank 0, the logits in bank
          ``1 + ((n_layers - 1) & 1)``
2         registers (word = index): 0 ``CMD`` (write: bits 2:0 the op, 1 NOISE, 2 BASE,
          3 LAYER, 4 VOTE; bit 3 NOISE's stream, 0 A, 1 B; bits 6:4 the layer; bit 7
          ``shared``: LAYER 0 takes the base products, or VOTE's ``first``; bits 9:8
          the slot of a shared sample, BASE's and a shared LAYER's (:data:`SLOTS`);
          read: bit 0 busy), 1 ``X0`` (NOISE's start state), 2 ``G`` (VOTE's ``g``), 3 ``Z_ROW``,
          6 ``Z_ROWS`` (VOTE's block), 4 ``N_LAYERS``, 5 ``PERT_SHIFT`` (``k = log4(r) +
          sigma_shift``), ``16 + l`` ``ACT_SHIFT l``, ``24 + l`` ``WBASE l`` (layer
          ``l``'s first weight word), ``32 + i`` ``WIDTH i``
3         the votes: word ``i`` (read only; ``z_bits``, sign-extended to 32)
========  =========================================================================

Every access is answered three cycles after its request, its data from a register (zero
in every other cycle); an access to a memory waits while an op runs (the firmware reads
``CMD`` until it is idle).

Throughput: a pass takes a cycle per input (``fan``). ``LAYER`` takes ``fan`` cycles for
each member's ``x.B`` (all ``r`` sums at once), ``fan`` per output row for both members
(``2r + 2`` at least: the finish's, both members') and about 21 to set up and drain:
for 64-16-10 at rank 4, 225 cycles for layer 1 (409 when the rows took the members in
turn, ``fan`` a row each), and 801 for digits' 64-64-10 (1,465). A shared layer 0
takes ``fan`` for ``x.B``, ``r + 3`` per row for both members at once and about 12 to
set up and drain: 189 cycles for 64-16-10 (347 when it took the members in turn,
``r + 2`` a row each; 240 with both members in the same cycles throughout, the
datapath before, which did not fit).
``BASE`` takes ``fan`` per row; ``NOISE`` a cycle per row and 4; ``VOTE`` ``r`` cycles
per vote (one rank term a cycle: a select of ``g``, ``2 g`` or ``4 g`` and one adder),
two more per row and about 6.
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ...golden.arith import bits_for
from ..bram import NO_RW_CHECK, RWWatch
from ..cpu.rv32 import BUS_SIGNATURE
from ..noise.prng import PentaryStreamCore
from ..params import check_choice, check_int

__all__ = [
    "OPS",
    "REGS",
    "SLOTS",
    "SLOT_SHIFT",
    "Z_WORDS",
    "CompactEngine",
    "activation_tail",
    "weight_words",
]

#: ``CMD`` ops
OPS = {"noise": 1, "base": 2, "layer": 3, "vote": 4}
#: Shared samples the engine holds at once (``CMD`` bits 9:8: the slot of BASE and of a
#: shared LAYER 0): a slot's input in bank ``3 * (s & 1)`` of the activations, in the
#: words' low (``s < 2``) or high bytes, its base products in the base memory's slot
#: ``s``; the firmware then runs a pair's noise once for up to four samples
SLOTS = 4
SLOT_SHIFT = 8
#: Register indices (``width``, ``act_shift``, ``wbase``: the first of a row)
REGS = {
    "cmd": 0,
    "x0": 1,
    "g": 2,
    "z_row": 3,
    "n_layers": 4,
    "pert_shift": 5,
    "z_rows": 6,
    "act_shift": 16,
    "wbase": 24,
    "width": 32,  # max_layers + 1 of them (up to 9: past 24 + 8 would meet the others)
}
BIAS = 127
#: The vote memory's words: ``VOTE`` accumulates ``Z`` of a block of rows of one layer
#: (``z_rows * fan <= Z_WORDS``)
Z_WORDS = 1024


def weight_words(max_layers: int, max_width: int) -> int:
    """The weight memory's words: each layer packed from a word boundary (spec 1.3)."""
    return max_layers * -(-(max_width * (max_width + 1)) // 5)


#: iCE40 block RAM (4 Kbit): its widths and the depth each allows
_BRAM_MODES = ((16, 256), (8, 512), (4, 1024), (2, 2048))


def activation_tail(m: Module, y, shift, last):
    """The tail's stages T4..T6 (spec 5.3): ``h = sat(rshr(y, shift))`` to 0..127, or to
    -127..127 where ``last``, as an 8-bit value three cycles after ``y``, a value a cycle.
    ``rshr(y, s) = ((2 y >> s) + 1) >> 1`` (no rounding constant): T4 shifts, T5 rounds
    and compares T4's value for the saturation beside it, T6 chooses. ``shift`` and
    ``last`` are held while a value is in the stages.

    With ``u = 2 y >> s`` and ``z = (u + 1) >> 1``: ``z > 127 <=> u >= 255``, ``z < -127
    <=> u <= -256``, ``z < 0 <=> u <= -2`` (the compares after the round, then the
    choice, into the result were the iCEBreaker build's critical path at 48 MHz, seed 2:
    20.31 ns)."""
    u = Signal(signed(len(y) + 1), name="t4_u")
    m.d.sync += u.eq(Cat(Const(0, 1), y).as_signed() >> shift)
    z = Signal(signed(len(y)), name="t5_z")
    hi, lo = Signal(name="t5_hi"), Signal(name="t5_lo")
    m.d.sync += [
        z.eq((u + 1) >> 1),
        hi.eq(u >= 255),
        lo.eq(Mux(last, u <= -256, u <= -2)),
    ]
    h = Signal(8, name="t6_h")
    m.d.sync += h.eq(Mux(hi, 127, Mux(lo, Mux(last, -127, 0), z)))
    return h


class _Port:
    """A memory port's signals (``addr``, ``data``, ``en``), for :func:`_sliced`."""

    def __init__(self, name, width, depth, en_bits):
        self.addr = Signal(range(depth), name=f"{name}_addr")
        self.data = Signal(width, name=f"{name}_data")
        self.en = Signal(en_bits, name=f"{name}_en")


def _sliced(m, name, width, depth, granularity=None):
    """A memory of ``width``-bit words cut into slices of bits, each as wide as an iCE40
    block RAM holding ``depth`` words is (16 bits up to 256 words, 8 up to 512, 4 up to
    1024, 2 beyond): one block RAM per slice where the depth allows, and no
    multiplexer of several block RAMs' data. Returns a read port (synchronous, one
    cycle) and a write port (``en``: one bit per ``granularity`` bits, else one)."""
    sw = next((w for w, d in _BRAM_MODES if depth <= d), 1)
    if granularity is not None:
        sw = min(sw, granularity)
    rp = _Port(f"{name}_r", width, depth, 1)
    wp = _Port(f"{name}_w", width, depth, width // granularity if granularity else 1)
    for i, lo in enumerate(range(0, width, sw)):
        hi = min(width, lo + sw)
        mem = memory.Memory(shape=hi - lo, depth=depth, init=[], attrs=NO_RW_CHECK)
        m.submodules[f"{name}{i}"] = mem
        r, w = mem.read_port(), mem.write_port()
        en = wp.en[lo // granularity] if granularity else wp.en
        m.d.comb += [
            r.addr.eq(rp.addr),
            rp.data[lo:hi].eq(r.data),
            w.addr.eq(wp.addr),
            w.data.eq(wp.data[lo:hi]),
            w.en.eq(en),
        ]
    return rp, wp


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
    max_population : int
        2..4096, even: sizes ``G`` and the votes (spec 9.2: ``|g| <= 2 (N - 1)``,
        ``|Z| <= N/2 * max|g| * 4 r``).

    Interface attributes
    --------------------
    bus : In(BUS_SIGNATURE)
        The core's bus, ``valid`` qualified by the SoC's region decode.
    busy : Out(1)
        An op runs.
    """

    def __init__(
        self,
        *,
        max_layers: int = 2,
        max_width: int = 64,
        rank: int = 4,
        digits="binomial",
        max_population: int = 256,
    ):
        self.max_layers = check_int("max_layers", max_layers, 1, 8)
        self.max_width = check_int("max_width", max_width, 1, 127)
        self.rank = check_choice("rank", rank, (1, 4))
        self.digits = check_choice("digits", digits, ("binomial", "uniform"))
        self.max_population = check_int("max_population", max_population, 2, 4096)
        if max_population % 2:
            raise ValueError(f"max_population={max_population}: must be even (2..4096)")
        self.max_fan = max_width + 1
        self.base_row_bits = ceil_log2(max_width)
        self.wwords = weight_words(max_layers, max_width)
        # the noise memory's row index: Cat(row, A, layer), a power of two per stream
        self.row_bits = (self.max_fan - 1).bit_length()
        self.nrows = max_layers << (self.row_bits + 1)
        # widths (spec 9.2): |x.B| and |x.W| <= 127 * 2 * fan; the low-rank product
        # <= r * 2 times that; an accumulator <= the two
        xb_max = BIAS * 2 * self.max_fan
        self.xb_bits = bits_for(-xb_max, xb_max)
        p_max = self.rank * 2 * xb_max
        self.p_bits = bits_for(-p_max, p_max)
        acc_max = xb_max + p_max
        self.acc_bits = bits_for(-acc_max, acc_max) + 1  # +1: a spare bit for rshr
        # the votes (spec 8.1, 9.2): |g| <= 2 (N - 1); a weight's term of one pair
        # g * sum_c A[o, c] B[k, c] <= 4 r |g|; Z <= N / 2 such terms
        g_max = 2 * (max_population - 1)
        self.g_bits = bits_for(-g_max, g_max)
        t_max = 4 * self.rank * g_max
        self.t_bits = bits_for(-t_max, t_max)
        z_max = max_population // 2 * t_max
        self.z_bits = bits_for(-z_max, z_max)
        super().__init__({"bus": In(BUS_SIGNATURE), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        r, ml = self.rank, self.max_layers
        bus = self.bus

        # ---------------------------------------------------------------- registers
        x0 = Signal(32)
        g = Signal(signed(self.g_bits))
        z_row = Signal(7)
        z_rows = Signal(8)
        n_layers = Signal(4)
        pshift = Signal(4)
        widths = Array(Signal(8, name=f"width{i}") for i in range(ml + 1))
        act_shift = Array(Signal(4, name=f"act_shift{i}") for i in range(ml))
        wbase = Array(Signal(range(self.wwords + 1), name=f"wbase{i}") for i in range(ml))

        # ---------------------------------------------------------------- memories
        # the weights, activations and noise in slices of bits as narrow as their depth
        # lets one block RAM hold (no multiplexer after the memories: their read data go
        # straight into stage 1's digit selects)
        w_rp, w_wp = _sliced(m, "wmem", 16, self.wwords)
        x_rp, x_wp = _sliced(m, "xmem", 16, 512, granularity=8)
        n_rp, n_wp = _sliced(m, "nmem", 3 * r, self.nrows)
        # the base memory: a slot of 2**ob rows per shared sample (SLOTS of them)
        ob = self.base_row_bits
        bmem = memory.Memory(
            shape=signed(self.xb_bits), depth=SLOTS << ob, init=[], attrs=NO_RW_CHECK
        )
        m.submodules.bmem = bmem
        b_rp, b_wp = bmem.read_port(), bmem.write_port()
        z_rp, z_wp = _sliced(m, "zmem", self.z_bits, Z_WORDS)

        busy = Signal()
        m.d.comb += self.busy.eq(busy)

        # ---------------------------------------------------------------- the bus
        # a request is taken into flip-flops every cycle (it is held until ``ready``);
        # ``act``: the captured request acts (memories: only while idle); its read data
        # come a cycle later, are registered, and ``ready`` follows
        req = Signal()
        q_sel = Signal(2)
        # the widest index a memory takes (the weights' words, the activations' 512,
        # the votes' Z_WORDS)
        q_addr = Signal(max(9, (Z_WORDS - 1).bit_length(), (self.wwords - 1).bit_length()))
        q_write = Signal()
        q_data = Signal(32)
        act = Signal()
        a1 = Signal()
        a2 = Signal()
        m.d.comb += act.eq(req & ((q_sel == 2) | ~busy))
        # a register write's target, decoded as the request is captured: ``q_regw`` a
        # write to the registers, ``q_hit[i]`` the register index is ``i``, so that a
        # register's enable is ``req`` and two flip-flops (the decode of the captured
        # index after ``req`` into the registers' enables was the iCEBreaker build's
        # critical path at 48 MHz, b48cbeb, seed 1: ``req`` into ``g``, 22.34 ns, 16.12
        # of it routing)
        reg_index = [
            *(v for n, v in REGS.items() if n not in ("act_shift", "wbase", "width")),
            *(REGS["act_shift"] + i for i in range(ml)),
            *(REGS["wbase"] + i for i in range(ml)),
            *(REGS["width"] + i for i in range(ml + 1)),
        ]
        q_hit = {i: Signal(name=f"q_hit{i}") for i in reg_index}
        q_regw = Signal()
        m.d.sync += [h.eq(bus.addr[:6] == i) for i, h in q_hit.items()]
        m.d.sync += q_regw.eq(bus.write & (bus.addr[24:26] == 2))
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
        rdata = Signal(32)  # zero but in an answer's cycle (the SoC ORs the answers)
        m.d.sync += [r1_sel.eq(q_sel), rdata.eq(0)]
        with m.If(a1):
            with m.Switch(r1_sel):
                with m.Case(0):
                    m.d.sync += rdata.eq(w_rp.data)
                with m.Case(1):
                    m.d.sync += rdata.eq(x_rp.data)
                with m.Case(2):
                    m.d.sync += rdata.eq(reg_data)
                with m.Case(3):
                    m.d.sync += rdata.eq(z_rp.data.as_signed())
        m.d.comb += [bus.ready.eq(a2), bus.rdata.eq(rdata)]
        cpu_mem = act & ~busy  # the cycle a memory access acts
        start = Signal()  # registered: the cycle after a CMD write (its op is not 0)
        # which op starts, one-hot beside ``start`` (its decode of CMD before the
        # states' and the noise core's enables was among the iCEBreaker build's late
        # paths at 48 MHz, seed 3: 15 of the core's state bits)
        start_op = {name: Signal(name=f"start_{name}") for name in OPS}
        cmd = Signal(7)  # the CMD word's bits 6:0 (the op: bits 2:0)
        m.d.sync += [start.eq(0), *(f.eq(0) for f in start_op.values())]
        op_shared = Signal()
        slot = Signal(2)  # CMD bits 9:8: the shared sample's slot (BASE, shared LAYER 0)
        with m.If(act & (q_sel == 2)):
            m.d.sync += reg_data.eq(q_hit[REGS["cmd"]] & busy)
        with m.If(req & q_regw):  # act & (q_sel == 2) & q_write
            with m.If(q_hit[REGS["cmd"]]):
                m.d.sync += [
                    start.eq(q_data[:3] != 0),
                    *(start_op[name].eq(q_data[:3] == v) for name, v in OPS.items()),
                    cmd.eq(q_data[:7]),
                    op_shared.eq(q_data[7]),
                    slot.eq(q_data[8:10]),
                ]
            for name, reg in (
                ("x0", x0),
                ("g", g),
                ("z_row", z_row),
                ("z_rows", z_rows),
                ("n_layers", n_layers),
                ("pert_shift", pshift),
            ):
                with m.If(q_hit[REGS[name]]):
                    m.d.sync += reg.eq(q_data)
            for i in range(ml + 1):
                with m.If(q_hit[REGS["width"] + i]):
                    m.d.sync += widths[i].eq(q_data)
            for i in range(ml):
                with m.If(q_hit[REGS["act_shift"] + i]):
                    m.d.sync += act_shift[i].eq(q_data)
                with m.If(q_hit[REGS["wbase"] + i]):
                    m.d.sync += wbase[i].eq(q_data)

        # ---------------------------------------------------------------- noise
        m.submodules.core = core = PentaryStreamCore(digits=self.digits, digits_per_beat=r)
        m.d.comb += core.x0.payload.eq(x0)
        n_ab = Signal()  # 0: A, 1: B
        n_rem = Signal(8)  # the stream's rows not written yet
        n_last = Signal()  # n_rem == 1
        n_row = Signal(self.row_bits)  # the stream's row written next
        lbits = max(1, (ml - 1).bit_length())

        def nrow(row, a):
            """The noise memory's row ``row`` of layer ``layer``'s B (a = 0) or A rows."""
            return Cat(row[: self.row_bits], a, layer[:lbits])

        # ---------------------------------------------------------------- passes
        # LAYER: x.B of member + (the words' low bytes), then of member − (their high
        # bytes), then a pass per output row for both. Every path is short (the UP5K's
        # clock): stage 0 issues the memories' addresses of input k from counters and
        # registered flags (the read addresses from flip-flops only); stage 1 registers
        # the memories' data (and picks the weight digit); stage 2 is the MACs: x.B's r
        # sums in one pass over the inputs, then a pass per output row (two MACs, one
        # weight digit). A row's end hands its sums and A row to the finish: FA takes a
        # rank term (member +'s x.B sum c, then member −'s, and the A row's low digit,
        # the row rotating), FB accumulates the low-rank product; the tail T1..T5
        # (shift, round, acc ±, shift, round), T6 (saturate), then the write of the
        # member's byte.
        layer = Signal(3)
        member = Signal()  # x.B's pass: 0 member + (the low bytes), 1 member −
        n_out = Signal(8)
        bank_in = Signal(2)
        bank_out = Signal(2)
        last_layer = Signal()
        shared0 = Signal()  # layer 0 takes the base products
        base_op = Signal()
        x_hi = Signal()  # the input is in the words' high bytes (a slot 2, 3 sample)
        b_slot = Signal(2)  # the base memory's slot
        k = Signal(8)
        fan_m2 = Signal(8)  # the row's last input index (the bias) - 1
        k_last = Signal()  # k == fan_m2 + 1 (the bias input)
        o = Signal(8)
        o_last = Signal()  # o == n_out - 1
        o_rem = Signal(8)
        w_o = Signal(8)  # the next row written (the base memory's, the activations')
        wword = Signal(range(self.wwords + 1))
        wpos = Signal(3)
        sh_s = Signal(4)
        fin_busy = Signal()  # the finish works on a row
        pend = Signal()  # a row's end is on its way to the finish or in it
        in_rows = Signal()  # the rows' pass (ROWS; else x.B's)
        drained = Signal()  # DRAIN: the pipeline was empty the cycle before
        m.d.sync += drained.eq(0)
        tail_busy = Signal()

        s1 = Signal()  # stage 1 valid
        s1_xb = Signal()  # an x.B input (else a row's)
        s1_bias = Signal()
        s1_first = Signal()
        s1_last = Signal()  # the pass's last input
        s1_row1 = Signal()  # a shared layer-0 row (its base product, no MAC)
        s1_pos = Signal(3)  # the weight digit's index in its word
        s1_hi = Signal()  # the input's high bytes (member −'s x.B, a slot 2, 3 sample)
        s1_m = Signal()  # member −'s x.B pass
        m.d.sync += s1.eq(0)
        s2 = Signal()  # stage 2 valid
        s2_xb, s2_first, s2_last, s2_row1 = Signal(), Signal(), Signal(), Signal()
        s2_bias, s2_m = Signal(), Signal()

        # the input counter's two moves, requested by the states and applied in one
        # place (restart first), so that its next value is one choice of three, not a
        # chain of every state's (the iCEBreaker build's critical path once VOTE added
        # its own)
        k_adv = Signal()
        k_rst = Signal()

        def advance_k():
            """The next input of the row (k_last: the row's last)."""
            m.d.comb += k_adv.eq(1)

        def restart_k():
            m.d.comb += k_rst.eq(1)

        with m.If(k_rst):
            m.d.sync += [k.eq(0), k_last.eq(0)]  # fan >= 2
        with m.Elif(k_adv):
            # k_last from a compare with a register, not a down-counter of its own: the
            # counters' enable reaches half the flip-flops (the enable was the
            # iCEBreaker build's critical path at 48 MHz, seeds 1 and 3: 22.67 ns)
            m.d.sync += [k.eq(k + 1), k_last.eq(k == fan_m2)]

        # the control: one-hot states (every state a flip-flop, its next value a
        # function of a few flip-flops)
        names = ("IDLE", "N_SETUP", "N_ROWS", "SETUP", "SETUP2", "XB", "ROWS", "DRAIN")
        names += ("V_SETUP", "V_A", "V_A2", "V_K", "V_DRAIN")
        st = {n: Signal(name=f"st_{n.lower()}", init=n == "IDLE") for n in names}

        def goto(frm, to):
            m.d.sync += [st[frm].eq(0), st[to].eq(1)]

        # the op's layer widths (its inputs, its outputs) into registers while idle, from
        # CMD (loaded with ``start``): the setup states take them from flip-flops, not
        # through the widths' multiplexers (which were the iCEBreaker build's critical
        # path into the noise op's row count)
        w_in = Signal(8)
        w_out = Signal(8)
        cmd_layer = Mux(cmd[:3] == OPS["base"], 0, cmd[4:7])
        next_widths = Array([*widths[1:], Const(0, 8)])
        with m.If(st["IDLE"]):
            m.d.sync += [w_in.eq(widths[cmd_layer]), w_out.eq(next_widths[cmd_layer])]
            with m.If(start):
                m.d.sync += [busy.eq(1), layer.eq(cmd[4:7]), member.eq(0)]
            with m.If(start_op["noise"]):
                m.d.sync += n_ab.eq(cmd[3])
                m.d.comb += core.x0.valid.eq(1)  # the stream starts
                goto("IDLE", "N_SETUP")
            with m.If(start_op["base"]):
                m.d.sync += [base_op.eq(1), layer.eq(0)]
                goto("IDLE", "SETUP")
            with m.If(start_op["layer"]):
                m.d.sync += base_op.eq(0)
                goto("IDLE", "SETUP")
            with m.If(start_op["vote"]):
                goto("IDLE", "V_SETUP")

        # ---- NOISE: one stream's rows (A: out rows, B: fan rows); its first beat is
        # valid the cycle after x0 (the core drops what was left of the last stream)
        # and waits there for N_ROWS
        with m.If(st["N_SETUP"]):
            m.d.sync += [
                n_row.eq(0),
                n_rem.eq(Mux(n_ab, w_in + 1, w_out)),
                n_last.eq(Mux(n_ab, w_in == 0, w_out == 1)),
            ]
            goto("N_SETUP", "N_ROWS")
        with m.If(st["N_ROWS"]):
            m.d.comb += core.o.ready.eq(1)
            with m.If(core.o.valid):
                m.d.comb += [
                    n_wp.addr.eq(nrow(n_row, ~n_ab)),
                    n_wp.data.eq(core.o.payload.as_value()),
                    n_wp.en.eq(1),
                ]
                m.d.sync += [
                    n_row.eq(n_row + 1),
                    n_rem.eq(n_rem - 1),
                    n_last.eq(n_rem == 2),
                ]
                with m.If(n_last):
                    m.d.sync += busy.eq(0)
                    goto("N_ROWS", "IDLE")

        # ---- BASE and LAYER
        # a slot is a shared sample's (BASE, or a shared LAYER; per-member inputs: slot 0)
        in_slot = Mux(base_op | op_shared, slot, 0)
        with m.If(st["SETUP"]):
            m.d.sync += [
                fan_m2.eq(w_in - 1),
                n_out.eq(w_out),
                # the input stays in bank 0 (a shared sample serves every pair; slots
                # 1 and 3 in bank 3, slots 2 and 3 in the high bytes); the layers
                # alternate between banks 1 and 2
                bank_in.eq(Mux(layer == 0, Mux(in_slot[0], 3, 0), Mux(layer[0], 1, 2))),
                x_hi.eq((layer == 0) & in_slot[1]),
                b_slot.eq(in_slot),
                bank_out.eq(Mux(layer[0], 2, 1)),
                last_layer.eq(layer + 1 == n_layers),
                shared0.eq(op_shared & (layer == 0) & ~base_op),
                wword.eq(wbase[layer]),
                wpos.eq(0),
                o.eq(0),
                w_o.eq(0),
                sh_s.eq(act_shift[layer]),
            ]
            goto("SETUP", "SETUP2")
        with m.If(st["SETUP2"]):  # from the registers SETUP loaded
            restart_k()
            m.d.sync += [o_rem.eq(n_out - 1), o_last.eq(n_out == 1)]
            m.d.sync += in_rows.eq(base_op)
            with m.If(base_op):
                goto("SETUP2", "ROWS")
            with m.Else():
                goto("SETUP2", "XB")
        with m.If(st["XB"]):  # x.B: input k against B row k (all r sums)
            m.d.sync += [
                s1.eq(1),
                s1_xb.eq(1),
                s1_bias.eq(k_last),
                s1_first.eq(k == 0),
                s1_last.eq(0),
                s1_row1.eq(0),
                s1_hi.eq(member | x_hi),
                s1_m.eq(member),
            ]
            advance_k()
            with m.If(k_last):
                restart_k()
                # member +'s pass, then member −'s (their sums kept apart: xbp, xb),
                # but one pass for a shared layer 0 (both members' x.B is the same)
                with m.If(shared0 | member):
                    m.d.sync += [in_rows.eq(1), member.eq(0)]
                    goto("XB", "ROWS")
                with m.Else():
                    m.d.sync += member.eq(1)
        with m.If(st["ROWS"]):
            row_end = shared0 | k_last
            # a row's last input waits while the finish works on the row before
            go = ~row_end | ~pend
            m.d.sync += [
                s1.eq(go),
                s1_xb.eq(0),
                s1_bias.eq(k_last),
                s1_first.eq(k == 0),
                s1_last.eq(row_end),
                s1_row1.eq(shared0),
                s1_pos.eq(wpos),
                s1_hi.eq(x_hi),
            ]
            with m.If(go & ~shared0):  # the weights' cursor runs on over row ends
                m.d.sync += wpos.eq(Mux(wpos == 4, 0, wpos + 1))
                with m.If(wpos == 4):
                    m.d.sync += wword.eq(wword + 1)
                advance_k()
            with m.If(go & row_end):
                restart_k()
                m.d.sync += pend.eq(~base_op)
                m.d.sync += [o.eq(o + 1), o_rem.eq(o_rem - 1), o_last.eq(o_rem == 1)]
                with m.If(o_last):
                    goto("ROWS", "DRAIN")
        with m.If(st["DRAIN"]):  # until the last row is written
            # registered: nothing enters the pipeline here, so it stays empty
            m.d.sync += drained.eq(~s1 & ~s2 & ~fin_busy & ~tail_busy)
            with m.If(drained):
                m.d.sync += busy.eq(0)
                goto("DRAIN", "IDLE")

        # ---- VOTE l: Z[i] (+)= g * sum_c A[o, c] B[k, c] (spec 8.1) for the block's rows
        # o = z_row .. z_row + z_rows - 1 and every input k of layer l (the pair's
        # noise in the noise memory), i = (o - z_row) * fan + k; bit 7 of CMD (``first``)
        # writes the term instead of adding it. Per row: its A row is read (V_A) and
        # kept (V_A2); per input k (V_K): its B row is read, then r cycles take a rank
        # term each (one select of g, 2 g or 4 g: |A| |B| is 0, 1, 2 or 4; then one
        # adder), and Z[i] is read with the last term's sum and written back the cycle
        # after. A k every r cycles.
        v_cc = Signal(range(r))  # V_K: the cycle of the current k (its read at 0)
        zaddr = Signal(range(Z_WORDS))  # the vote memory's word of the next k
        arow = Signal(3 * r)  # the row's A digits
        m.d.sync += v_cc.eq(0)
        with m.If(st["V_SETUP"]):
            m.d.sync += [
                fan_m2.eq(w_in - 1),
                o.eq(z_row),
                o_rem.eq(z_rows - 1),
                o_last.eq(z_rows == 1),
                in_rows.eq(1),
                zaddr.eq(0),
            ]
            goto("V_SETUP", "V_A")
        with m.If(st["V_A"]):  # the A row's read
            goto("V_A", "V_A2")
        with m.If(st["V_A2"]):
            m.d.sync += [arow.eq(n_rp.data), in_rows.eq(0)]
            restart_k()
            goto("V_A2", "V_K")
        v_issue = Signal()  # V_K reads B row k (its first cycle)
        with m.If(st["V_K"]):
            m.d.comb += v_issue.eq(v_cc == 0)
            if r > 1:
                m.d.sync += v_cc.eq(Mux(v_cc == r - 1, 0, v_cc + 1))
            with m.If(v_cc == r - 1):
                advance_k()
                with m.If(k_last):
                    with m.If(o_last):
                        goto("V_K", "V_DRAIN")
                    with m.Else():
                        m.d.sync += [o.eq(o + 1), o_rem.eq(o_rem - 1), o_last.eq(o_rem == 1)]
                        m.d.sync += in_rows.eq(1)
                        goto("V_K", "V_A")
        # the rank terms: ph[c] in the cycle of term c's select (ph[0]: the B row's data);
        # the select (g, 2 g or 4 g, or 0, and the sign) into registers, the sum the
        # cycle after
        ph = Signal(r)
        m.d.sync += ph.eq(Cat(v_issue, ph[:-1]))
        v_addr = Signal(range(Z_WORDS))
        with m.If(v_issue):
            m.d.sync += [v_addr.eq(zaddr), zaddr.eq(zaddr + 1)]
        aq = Signal(3 * r)
        bq = Signal(3 * r)
        da = Mux(ph[0], arow[:3], aq[:3])
        db = Mux(ph[0], n_rp.data[:3], bq[:3])
        m.d.sync += [
            aq.eq(Mux(ph[0], arow, aq) >> 3),
            bq.eq(Mux(ph[0], n_rp.data, bq) >> 3),
        ]
        # |a| = 2: code 010 or 110 (bit 0 clear, bit 1 set); 0: bits 1:0 clear
        two_a, two_b = ~da[0] & da[1], ~db[0] & db[1]
        zero = ~(da[0] | da[1]) | ~(db[0] | db[1])
        t_mag = Signal(signed(self.g_bits + 2))
        t_neg = Signal()
        t_first = Signal()
        m.d.sync += [
            t_mag.eq(Mux(zero, 0, Mux(two_a & two_b, g << 2, Mux(two_a | two_b, g << 1, g)))),
            t_neg.eq(da[2] ^ db[2]),
            t_first.eq(ph[0]),
        ]
        v_acc = Signal(signed(self.t_bits))
        opnd = Mux(t_neg, ~t_mag, t_mag)
        opnd = Cat(opnd, opnd[-1].replicate(self.t_bits - len(t_mag)))
        base = Mux(t_first, 0, v_acc)
        m.d.sync += v_acc.eq((Cat(t_neg, base) + Cat(t_neg, opnd))[1 : self.t_bits + 1])
        # d1: the last term's sum, and the read of Z[i]; d2: the new Z[i] into a
        # register; d3: written back (the block RAM's data through the adder into
        # another's write data was among the iCEBreaker build's late paths at 48 MHz,
        # 21.02 ns; the votes of one op are at distinct indices, so no read meets a
        # write in flight)
        d1, d2, d3 = Signal(), Signal(), Signal()
        z_raddr = Signal(range(Z_WORDS))
        z_waddr = Signal(range(Z_WORDS))
        z_waddr3 = Signal(range(Z_WORDS))
        z_sum = Signal(signed(self.z_bits))
        z_first = op_shared  # CMD bit 7
        m.d.sync += [
            d1.eq(ph[r - 1]),
            d2.eq(d1),
            d3.eq(d2),
            z_waddr.eq(z_raddr),
            z_waddr3.eq(z_waddr),
            z_sum.eq(v_acc + Mux(z_first, 0, z_rp.data.as_signed())),
        ]
        with m.If(ph[r - 1]):
            m.d.sync += z_raddr.eq(v_addr)
        m.d.comb += [
            z_wp.addr.eq(z_waddr3),
            z_wp.data.eq(z_sum),
            z_wp.en.eq(d3),
        ]
        with m.If(st["V_DRAIN"]):
            m.d.sync += drained.eq((ph == 0) & ~d1 & ~d2 & ~d3)
            with m.If(drained):
                m.d.sync += busy.eq(0)
                goto("V_DRAIN", "IDLE")

        # ---- stage 1: the memories' data into registers
        xw = x_rp.data
        s2_x = Signal(signed(8))  # member +'s input (or x.B's member, or a BASE's)
        s2_xm = Signal(signed(8))  # member −'s input (a row's second MAC)
        s2_d = Signal(3)  # the digit: of the B row (x.B) or of the weight word (a row)
        s2_n = Signal(3 * r)  # the A row (a row's end)
        s2_b = Signal(signed(self.xb_bits))
        w_digits = Array(w_rp.data[3 * i : 3 * i + 3] for i in range(5))
        m.d.sync += [
            s2.eq(s1),
            s2_xb.eq(s1_xb),
            s2_first.eq(s1_first),
            s2_last.eq(s1_last),
            s2_row1.eq(s1_row1),
            s2_bias.eq(s1_bias),
            s2_m.eq(s1_m),
            s2_x.eq(Mux(s1_bias, BIAS, Mux(s1_hi, xw[8:16], xw[:8]).as_signed())),
            s2_xm.eq(Mux(s1_bias, BIAS, xw[8:16].as_signed())),
            s2_d.eq(w_digits[s1_pos]),
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

        # ---- stage 2: the MACs (x.B: r sums; a row: x.W of both members, one weight
        # digit against the two inputs). x.B's pass for member + (or a shared layer 0's)
        # leaves its sums in ``xb``; the cycle after its last MAC (``xb_keep``, from a
        # flip-flop) they are copied into ``xbp``, as member −'s pass, which leaves its
        # own in ``xb``, starts. ``xbp`` rotates through the finish (its term ``c`` in
        # ``xbp[0]`` in the finish's cycle ``c``): its registers' logic cells hold a
        # choice of two, where a choice of 2r sums at the finish's input took seven LUTs
        # a bit (the iCEBreaker build's logic cells)
        xb = [Signal(signed(self.xb_bits), name=f"xb{c}") for c in range(r)]
        xbp = [Signal(signed(self.xb_bits), name=f"xbp{c}") for c in range(r)]
        with m.If(s2 & s2_xb):
            m.d.sync += [
                xb[c].eq(mac(xb[c], s2_first, s2_x, s2_n[3 * c : 3 * c + 3])) for c in range(r)
            ]
        xb_keep = Signal()
        m.d.sync += xb_keep.eq(s2 & s2_xb & s2_bias & ~s2_m)
        with m.If(xb_keep):
            m.d.sync += [xbp[c].eq(xb[c]) for c in range(r)]
        acc = Signal(signed(self.xb_bits))  # member +'s row (or a BASE row)
        acc_m = Signal(signed(self.xb_bits))  # member −'s row
        sums = mac(acc, s2_first, s2_x, s2_d)
        sums_m = mac(acc_m, s2_first, s2_xm, s2_d)
        with m.If(s2 & ~s2_xb & ~s2_row1):
            m.d.sync += [acc.eq(sums), acc_m.eq(sums_m)]
        # BASE: a row's sum is its base product, written the cycle after the row's last
        # MAC from acc (the MAC's carry chain into the block RAM's write data was among
        # the iCEBreaker build's late paths at 48 MHz, 21.41 ns at seed 4)
        b_we = Signal()
        b_waddr = Signal(len(b_wp.addr))
        m.d.sync += [b_we.eq(s2 & s2_last & base_op), b_waddr.eq(Cat(w_o[:ob], b_slot))]
        m.d.comb += [b_wp.addr.eq(b_waddr), b_wp.data.eq(acc), b_wp.en.eq(b_we)]

        # ---- the finish: a row's two sums (or the base product) and its A row wait
        # here; cycles fc = 0 .. r-1 take member +'s rank terms (FA: xbp and the A
        # row's low digit, the A row rotating), FB accumulates p, cycle r + 1 hands member
        # +'s row to the tail; cycles r .. 2r-1 take member −'s (xb[fc - r]), cycle 2r + 1
        # hands it to the tail: a row every 2r + 2 cycles at least. A shared layer 0's row
        # (both members' input, x.B, base product and p are the same; only p's sign
        # differs, spec 6.2): cycle r + 1 hands member +'s row to the tail and cycle r + 2
        # member −'s, a row every r + 3 cycles
        fc = Signal(range(2 * r + 2))
        fin_acc = Signal(signed(self.xb_bits))  # member +'s sum (or both's: the base)
        fin_acc_m = Signal(signed(self.xb_bits))  # member −'s
        fin_a = Signal(3 * r)
        # the row's sum: a shared layer-0 row's base product at once, a MAC row's from
        # acc the cycle after its last MAC (the carry chain into fin_acc was the
        # iCEBreaker build's critical path at 48 MHz, seeds 2 and 4: 20.66 ns); the
        # tail takes it r + 1 cycles after the row's end at the earliest, and the next
        # row's end loads it after that
        fin_ld = Signal()
        m.d.sync += fin_ld.eq(s2 & s2_last & ~base_op & ~s2_row1)
        with m.If(fin_ld):
            m.d.sync += [fin_acc.eq(acc), fin_acc_m.eq(acc_m)]
        with m.If(s2 & s2_last & ~base_op):
            m.d.sync += [fin_busy.eq(1), fc.eq(0), fin_a.eq(s2_n)]
            with m.If(s2_row1):
                m.d.sync += fin_acc.eq(s2_b)
        with m.Elif(fin_busy):
            m.d.sync += [fc.eq(fc + 1), fin_a.eq(Cat(fin_a[3:], fin_a[:3]))]
            with m.If(fc < r):  # member +'s terms: xbp rotates, back in place after r
                m.d.sync += [xbp[c].eq(xbp[(c + 1) % r]) for c in range(r)]
            # the next row's end may issue: it reaches the finish as the last cycle
            # (fc = 2r + 1, or r + 2 in a shared layer 0) ends
            with m.If(fc == Mux(shared0, r - 1, 2 * r - 2)):
                m.d.sync += pend.eq(0)
            with m.If(fc == Mux(shared0, r + 2, 2 * r + 1)):
                m.d.sync += fin_busy.eq(0)
        cbits = (r - 1).bit_length()
        fa = Signal()
        fa_first = Signal()
        fa_x = Signal(signed(self.xb_bits))
        fa_d = Signal(3)
        m.d.sync += [
            fa.eq(fin_busy & (fc < Mux(shared0, r, 2 * r))),
            fa_first.eq((fc == 0) | (fc == r)),
            fa_d.eq(fin_a[:3]),
            # member +'s term c from xbp[0] (rotated there), member −'s from xb[c - r]
            # (r a power of two: c - r is c's low bits)
            fa_x.eq(Mux(fc < r, xbp[0], Array(xb)[fc[:cbits]] if r > 1 else xb[0])),
        ]
        pacc = Signal(signed(self.p_bits))
        with m.If(fa):
            m.d.sync += pacc.eq(mac(pacc, fa_first, fa_x, fa_d))

        # ---- the tail: rshr(v, s) = ((2 v >> s) + 1) >> 1 (s >= 0); T1 takes p and the
        # row's sum as the next row's end may replace them
        # member −'s feed: cycle r + 2 (a shared layer 0) or 2r + 1
        feed_m = fc == Mux(shared0, r + 2, 2 * r + 1)
        feed = fin_busy & ((fc == r + 1) | feed_m)
        # the fed row's member (0: +), down the tail with it
        t_m = [Signal(name=f"t{i}_m") for i in range(1, 7)]  # T1 .. T6
        m.d.sync += [t_m[0].eq(feed_m)]
        m.d.sync += [t_m[i].eq(t_m[i - 1]) for i in range(1, 6)]
        t2_m, t6_m = t_m[1], t_m[5]
        t1_v = Signal()
        t1_u = Signal(signed(self.p_bits + 1))
        t1_acc = Signal(signed(self.xb_bits))
        m.d.sync += [
            t1_v.eq(feed),
            t1_u.eq(Cat(Const(0, 1), pacc).as_signed() >> pshift),
            t1_acc.eq(Mux(feed_m & ~shared0, fin_acc_m, fin_acc)),
        ]
        t2_v = Signal()
        t2_t = Signal(signed(self.p_bits))
        t2_acc = Signal(signed(self.xb_bits))
        m.d.sync += [t2_v.eq(t1_v), t2_t.eq((t1_u + 1) >> 1), t2_acc.eq(t1_acc)]
        t3_v = Signal()
        t3_y = Signal(signed(self.acc_bits))
        m.d.sync += [t3_v.eq(t2_v), t3_y.eq(Mux(t2_m, t2_acc - t2_t, t2_acc + t2_t))]
        t4_v, t5_v, t6_v = Signal(), Signal(), Signal()
        m.d.sync += [t4_v.eq(t3_v), t5_v.eq(t4_v), t6_v.eq(t5_v)]
        t6_h = activation_tail(m, t3_y, sh_s, last_layer)
        m.d.comb += tail_busy.eq(t1_v | t2_v | t3_v | t4_v | t5_v | t6_v)
        # the next row written: after a row's member + the same row's member − follows
        with m.If(t6_v & t6_m | s2 & s2_last & base_op):
            m.d.sync += w_o.eq(w_o + 1)

        # ---- the activation memory's write port: the tail's member (its byte), or the core's
        with m.If(t6_v):
            m.d.comb += [
                x_wp.addr.eq(Cat(w_o[:7], bank_out)),
                x_wp.data.eq(Cat(t6_h, t6_h)),
                x_wp.en.eq(Cat(~t6_m, t6_m)),
            ]
        with m.Elif(cpu_mem & q_write & (q_sel == 1)):
            m.d.comb += [x_wp.addr.eq(q_addr), x_wp.data.eq(q_data), x_wp.en.eq(0b11)]
        m.d.comb += [
            w_wp.addr.eq(q_addr),
            w_wp.data.eq(q_data),
            w_wp.en.eq(cpu_mem & q_write & (q_sel == 0)),
        ]
        # the read ports' addresses, from flip-flops only (not the state): the passes'
        # (x.B: B row k; a row: its A row o) or, idle, the core's
        m.d.comb += [
            x_rp.addr.eq(Mux(busy, Cat(k[:7], bank_in), q_addr)),
            w_rp.addr.eq(Mux(busy, wword, q_addr)),
            b_rp.addr.eq(Cat(o[:ob], b_slot)),
            n_rp.addr.eq(nrow(Mux(in_rows, o, k), in_rows)),
            z_rp.addr.eq(Mux(busy, z_raddr, q_addr)),
        ]
        # the memories carry no_rw_check: a read whose word is used is never of an
        # address written in its cycle. The core's accesses act only while the engine is
        # idle, one at a time (a read or a write); the passes (XB, ROWS) read the
        # weights, the input bank (the tail writes the other bank) and the noise rows
        # (written only in N_ROWS), and a shared layer 0 the base products (written only
        # by BASE); VOTE reads the noise rows, and Z[i] in the cycle of the last term's
        # sum, while it writes Z[i - 1]. The tests' collision monitor checks these conditions.
        cpu_read = cpu_mem & ~q_write
        passes = st["XB"] | st["ROWS"]
        self.rw_watch = [
            RWWatch("wmem", w_rp, w_wp, busy | cpu_read & (q_sel == 0)),
            RWWatch("xmem", x_rp, x_wp, passes | cpu_read & (q_sel == 1)),
            RWWatch("nmem", n_rp, n_wp, passes | st["V_A"] | st["V_K"]),
            RWWatch("bmem", b_rp, b_wp, st["ROWS"] & shared0),
            RWWatch("zmem", z_rp, z_wp, d1 | cpu_read & (q_sel == 3)),
        ]
        return m
