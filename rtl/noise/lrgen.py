"""LRGEN + LRMUL (spec 3 and 4.2): the low-rank factors A, B and E = PQUANT(A.B^T, f).

* :class:`LowRankGenerator` (catalog ``lrgen-lane``): one lane. It takes the start states
  of a job's B and A streams from its ``x0`` stream (e.g. from a shared
  :class:`~pentegg.rtl.noise.keyer.StreamKeyer`) and has its own
  :class:`~pentegg.rtl.noise.prng.PentaryStreamCore` (``digits_per_beat = rank``: a beat
  is a row). The ``fan`` rows of B go into a block RAM (and out on ``b`` in low-rank
  mode); then the ``out`` rows of A go out on ``a`` (low-rank mode) or, in quantized mode,
  each row of A is held while the rows of B are read back from the RAM, one per cycle,
  and LRMUL forms ``E[i, k]`` and the raw dot product ``A[i] . B[k]`` row-major. B is
  generated once per job instead of once per output row (spec 3 allows either).
* :class:`KeyedLowRankGenerator` (catalog ``lrgen``): a StreamKeyer and one lane, keyed by
  (seed, step, pair, layer).
* :func:`lrmul_stages`: LRMUL and PQUANT as pipeline stages, shared with
  :class:`~pentegg.rtl.noise.lrgen_compact.CompactLowRankGenerator`.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..bram import RegisteredRAM
from ..params import check_choice, check_int
from ..pquant import PentaryQuantizer, pquant_int
from .keyer import KEYERS, LAYER_BITS, PAIR_BITS, STEP_BITS, StreamKeyer
from .prng import DIGIT_DISTS, PentaryStreamCore, digits_layout

__all__ = [
    "KEY_PORTS",
    "MAX_FAN",
    "MAX_OUT",
    "RANKS",
    "KeyedLowRankGenerator",
    "LowRankGenerator",
    "configure",
    "dot_width",
    "job_ports",
    "lrmul_depth",
    "lrmul_stages",
]

RANKS = (1, 4, 16, 64)
MAX_OUT = 4096  # spec 9.1: layer widths 1..4096
MAX_FAN = MAX_OUT + 1  # fan = in + 1 (bias column)
SIGMA_SHIFT_MAX = 8  # spec 9.1: sigma_shift in 0..8
SIGMA_BITS = 4
PQUANT_IMPLS = ("rom", "logic")


def rank_shift(rank: int) -> int:
    """log4(rank): 0, 1, 2, 3 for rank 1, 4, 16, 64."""
    return (rank.bit_length() - 1) // 2


def dot_width(rank: int) -> int:
    """Width of a signed register holding every dot product in [-4 rank, 4 rank]."""
    return (4 * rank).bit_length() + 1


def digit_product(a, b, *, ones: bool = False):
    """Product of two digit codes for ``a != 0`` (the caller zeroes it when ``a == 0``), as
    a 4-bit signed value: a mux and a negation, no multiplier.

    With ``ones``, the negation for ``a < 0`` is a bitwise inversion without its ``+1``:
    ``a * b = product + a[2]``, the sign bit entering an adder as a carry-in
    (:func:`adder_tree`). Each bit is then a function of four inputs: four LUT4 per
    product, plus one for ``a == 0`` driving the flip-flops' synchronous reset.
    """
    b4 = b.as_signed()
    mag = Mux(a[0], b4, b4 << 1)  # |a| == 1: codes 001 and 111; |a| == 2: 010 and 110
    if ones:
        return (mag ^ a[2].replicate(4)).as_signed()
    return Mux(a[2], -mag, mag)


def adder_tree(m: Module, terms: list, name: str, carries: list | None = None):
    """Balanced sum of signed terms, one bit wider per level. ``carries`` (1-bit values,
    at most one fewer than the terms) are added as the adders' carry-ins."""
    carries = list(carries or [])
    assert len(carries) < max(len(terms), 2)
    level = 0
    while len(terms) > 1:
        nxt = []
        for j in range(0, len(terms) - 1, 2):
            s = Signal(signed(max(len(terms[j]), len(terms[j + 1])) + 1), name=f"{name}{level}_{j}")
            total = terms[j] + terms[j + 1]
            if carries:
                total = total + carries.pop(0)
            m.d.comb += s.eq(total)
            nxt.append(s)
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms, level = nxt, level + 1
    return terms[0]


def pquant_rom_image(rank: int) -> list[int]:
    """ROM contents for PQUANT of the dot product: address ``Cat(dot, sigma_shift)``, data
    the 3-bit code of ``PQUANT(dot, log4(rank) + sigma_shift)``."""
    dw = dot_width(rank)
    image = []
    for sigma in range(1 << SIGMA_BITS):
        f = rank_shift(rank) + sigma
        for code in range(1 << dw):
            dot = code - (1 << dw) if code >> (dw - 1) else code
            image.append(pquant_int(dot, f) & 0b111)
    return image


def lrmul_depth(rank: int) -> int:
    """Stages of :func:`lrmul_stages`: 3, or 4 from rank 16 on (sums of four registered)."""
    return 3 + (rank >= 16)


def lrmul_stages(m: Module, arow, brow, adv, r: int, sigma_shift, pquant: str, dw: int):
    """LRMUL and PQUANT (spec 4.2) as pipeline stages advancing on ``adv``: from a row of A
    and a row of B (``3 * r`` bits each, digit ``c`` in bits ``[3c+2:3c]``) to ``(e, dot)``
    registered :func:`lrmul_depth` enabled cycles later, ``e`` the 3-bit code of
    ``PQUANT(A[i] . B[k], log4(r) + sigma_shift)`` and ``dot`` the ``dw``-bit product.

    Stages: digit products registered; from rank 16 on, sums of four registered next;
    the dot product registered and the PQUANT ROM read (or PQUANT logic on the
    registered dot); ``e`` and ``dot`` registered.
    """
    split_tree = r >= 16
    # Digit products, zero (the flip-flops' synchronous reset) where A's digit is 0;
    # all but the last without the +1 of their negation: A's sign bits are added as
    # the adders' carry-ins (one adder per product but one).
    terms = [Signal(signed(4), name=f"product{c}", reset_less=True) for c in range(r)]
    signs = [Signal(name=f"sign{c}", reset_less=True) for c in range(r - 1)]
    with m.If(adv):
        for c in range(r):
            a_c, b_c = arow[3 * c : 3 * c + 3], brow[3 * c : 3 * c + 3]
            product = digit_product(a_c, b_c, ones=c < r - 1)
            m.d.sync += terms[c].eq(Mux(a_c == 0, 0, product))
            if c < r - 1:
                m.d.sync += signs[c].eq(a_c[2])
    carries = signs
    if split_tree:
        # groups of four: three carries each inside, the fourth kept for the top tree
        group_sums = [Signal(signed(6), name=f"sum4_{g}", reset_less=True) for g in range(r // 4)]
        kept = [Signal(name=f"carry4_{g}", reset_less=True) for g in range(r // 4 - 1)]
        with m.If(adv):
            for g, s in enumerate(group_sums):
                inside = signs[4 * g : 4 * g + 3]
                total = adder_tree(m, terms[4 * g : 4 * g + 4], f"sum4_{g}_", inside)
                m.d.sync += s.eq(total)
                if g < len(kept):
                    m.d.sync += kept[g].eq(signs[4 * g + 3])
        terms, carries = group_sums, kept
    dot = Signal(signed(dw))
    m.d.comb += dot.eq(adder_tree(m, terms, "dot", carries))

    dot4 = Signal(signed(dw), reset_less=True)
    dot5 = Signal(signed(dw), reset_less=True)
    e5 = Signal(signed(3))
    with m.If(adv):
        m.d.sync += [dot4.eq(dot), dot5.eq(dot4)]
    if pquant == "rom":
        m.submodules.pqrom = pqrom = RegisteredRAM(
            3, 1 << (dw + SIGMA_BITS), init=pquant_rom_image(r)
        )
        m.d.comb += [
            pqrom.r_addr.eq(Cat(dot, sigma_shift)),
            pqrom.r_en.eq(adv),
            e5.eq(pqrom.r_data),
        ]
    else:
        m.submodules.pquant = pq = PentaryQuantizer(
            dw, shift_offset=rank_shift(r), max_shift=SIGMA_SHIFT_MAX
        )
        m.d.comb += [pq.x.eq(dot4), pq.shift.eq(sigma_shift)]
        e5_q = Signal(signed(3), reset_less=True)
        with m.If(adv):
            m.d.sync += e5_q.eq(pq.q)
        m.d.comb += e5.eq(e5_q)
    return e5, dot5


def configure(block, *, rank, max_fan, max_out, digits, pquant) -> None:
    """Check the parameters every LowRankGenerator block shares (rank, max_fan, max_out,
    digits, pquant: ranges in :class:`LowRankGenerator`) and set them on ``block``, with
    ``pquant`` resolved and ``dot_width`` and ``e_layout`` derived."""
    block.rank = check_choice("rank", rank, RANKS)
    block.max_fan = check_int("max_fan", max_fan, 1, MAX_FAN)
    block.max_out = check_int("max_out", max_out, 1, MAX_OUT)
    block.digits = check_choice("digits", digits, DIGIT_DISTS)
    check_choice("pquant", pquant, ("auto", *PQUANT_IMPLS))
    block.pquant = ("rom" if rank <= 4 else "logic") if pquant == "auto" else pquant
    block.dot_width = dot_width(rank)
    block.e_layout = data.StructLayout({"e": signed(3), "dot": signed(block.dot_width)})


#: The key inputs of a keyed block (spec 2.3).
KEY_PORTS = {
    "seed": In(32),
    "step": In(STEP_BITS),
    "pair": In(PAIR_BITS),
    "layer": In(LAYER_BITS),
}


def job_ports(block, *, first: dict, busy: dict) -> dict:
    """Signature members of a configured block: ``first``, then the job's shape and mode
    inputs, then ``busy``, then the ``e``, ``a`` and ``b`` streams."""
    return {
        **first,
        "out": In(range(block.max_out + 1)),
        "fan": In(range(block.max_fan + 1)),
        "sigma_shift": In(SIGMA_BITS),
        "mode": In(1),
        **busy,
        "e": Out(stream.Signature(block.e_layout)),
        "a": Out(stream.Signature(digits_layout(block.rank))),
        "b": Out(stream.Signature(digits_layout(block.rank))),
    }


class LowRankGenerator(wiring.Component):
    """One LRGEN + LRMUL lane: from the start states of the B and A streams of one
    (step, pair, layer), the factors B and A and E = PQUANT(A.B^T, f).

    A (``out`` x ``rank``) is the stream (step, pair, layer, A), B (``fan`` x ``rank``) the
    stream (step, pair, layer, B), both row-major (spec 3); ``E[i, k] =
    PQUANT(A[i] . B[k], log4(rank) + sigma_shift)`` (spec 4.2). The lane has no key
    mixing: it loads the two streams' start states ``x0`` (spec 2.3) from its ``x0``
    stream, the B state first, then the A state, e.g. from a
    :class:`~pentegg.rtl.noise.keyer.StreamKeyer` shared by all lanes
    (:class:`KeyedLowRankGenerator` is one keyer and one lane).

    A job starts with the B state, accepted while ``busy`` is low; the run-time inputs
    are read from then on and must stay stable until ``busy`` falls. The ``fan`` rows of
    B go into a block RAM (and out on ``b`` in low-rank mode); then the lane takes the A
    state. In quantized mode (``mode`` = 0) the job emits ``out * fan`` elements on ``e``
    in row-major order; in low-rank mode (``mode`` = 1) the ``out`` rows of A on ``a``.

    Parameters
    ----------
    rank : int
        1, 4, 16 or 64 (default 4).
    max_fan : int
        Largest ``fan`` (columns of E, rows of B), 1..4097 (default 256). Sizes the B RAM:
        ``2**ceil(log2(max_fan))`` words of ``3 * rank`` bits.
    max_out : int
        Largest ``out`` (rows of E and A), 1..4096 (default 256).
    digits : str
        ``"binomial"`` (default) or ``"uniform"`` (spec 2.5).
    pquant : str
        ``"rom"``: PQUANT as a ROM addressed by (dot, sigma_shift), ``2**(dot_width + 4)``
        words of 3 bits (one iCE40 block RAM at rank 4); ``"logic"``: a
        :class:`~pentegg.rtl.pquant.PentaryQuantizer`; ``"auto"`` (default): ``"rom"`` for
        rank <= 4, ``"logic"`` above.

    Interface attributes
    --------------------
    x0 : In(stream.Signature(32))
        Start states: per job, the B stream's, then the A stream's (spec 2.3:
        ``mix32(stream_key ^ run_key)``, never zero). The first is taken while ``busy``
        is low, the second when the last row of B has been generated.
    out : In(range(max_out + 1)), fan : In(range(max_fan + 1))
        Shape of the layer's weight matrix, ``fan`` counting the bias column. Each must be
        at least 1 and at most its maximum; other values give unspecified output.
    sigma_shift : In(4)
        0..8 (spec 9.1); ``f = log4(rank) + sigma_shift``. Larger values are unspecified.
    mode : In(1)
        0: quantized (stream ``e``); 1: low-rank (streams ``b`` then ``a``).
    busy : Out(1)
        High from the cycle after the B state is taken until the job's last transfer has
        happened.
    e : Out(stream.Signature(StructLayout({"e": signed(3), "dot": signed(dot_width)})))
        ``e``: the element of E (3-bit digit code); ``dot``: ``A[i] . B[k]`` before
        quantization, ``dot_width = bits_for(-4 rank, 4 rank)`` bits (4, 6, 8, 10).
    a : Out(stream.Signature(ArrayLayout(signed(3), rank)))
        Rows of A, digit ``c`` in bits ``[3c+2:3c]``.
    b : Out(stream.Signature(ArrayLayout(signed(3), rank)))
        Rows of B, same layout.

    Latency and throughput: with ``m = max(1, rank / D)`` words per row (D = 8 binomial or
    4 uniform digits per word), B's rows start ``max(2, m)`` cycles after its state is
    taken (the handshake loads only the stream core; the phase and counters follow a cycle
    later, from a flip-flop), then one row per cycle (``m = 1``) or one every ``m`` cycles.
    The A state is taken from the cycle after B's last row. In quantized mode the first
    element of E is valid ``5 + max(2, m) + (rank >= 16)`` cycles after the A state is
    taken (binomial: 7 at ranks 1 and 4, 8 at rank 16, 14 at rank 64), then one element per
    cycle while ``e.ready`` is high: ``out * fan`` elements in ``out * fan`` cycles (if
    ``m > 1`` and ``fan <= m``, a row costs ``m + 1`` cycles). With the A state available
    when B ends and no back-pressure, a quantized job at rank 1 or 4 keeps ``busy`` high
    ``fan + 8 + out * fan`` cycles. ``e.ready`` is one LUT away from the enables of the
    whole E pipeline (no skid buffer): drive it from a flip-flop or a short path.
    """

    def __init__(
        self,
        *,
        rank: int = 4,
        max_fan: int = 256,
        max_out: int = 256,
        digits: str = "binomial",
        pquant: str = "auto",
    ):
        configure(self, rank=rank, max_fan=max_fan, max_out=max_out, digits=digits, pquant=pquant)
        super().__init__(
            job_ports(self, first={"x0": In(stream.Signature(32))}, busy={"busy": Out(1)})
        )

    def elaborate(self, platform):
        m = Module()
        r = self.rank
        m.submodules.core = core = PentaryStreamCore(digits=self.digits, digits_per_beat=r)
        row = core.o.payload.as_value()  # one row of A or B: r digit codes
        multiword = core.words_per_beat > 1

        # The B RAM: read data registered twice (RAM register, then output register).
        m.submodules.bmem = bmem = RegisteredRAM(3 * r, 1 << ceil_log2(self.max_fan))

        # Phases, one-hot, advancing in a ring on `next_phase`: idle, B rows into the RAM
        # (and out on b), wait for the A state, A rows (out on a, or issued against the
        # B rows for E). B and A have a flip-flop per mode (q: quantized, l: low-rank), so
        # that the ready inputs meet flip-flops only on their way to the enables.
        ph_idle = Signal(init=1)
        ph_bq = Signal()
        ph_bl = Signal()
        ph_wa = Signal()
        ph_aq = Signal()
        ph_al = Signal()
        next_phase = Signal()
        with m.If(next_phase):
            m.d.sync += [
                ph_bq.eq(ph_idle & ~self.mode),
                ph_bl.eq(ph_idle & self.mode),
                ph_wa.eq(ph_bq | ph_bl),
                ph_aq.eq(ph_wa & ~self.mode),
                ph_al.eq(ph_wa & self.mode),
                ph_idle.eq(ph_aq | ph_al),
            ]

        # Counters run up from 1 and end where they equal `fan` or `out`, compared modulo
        # the counter's range: loading a constant is the flip-flops' synchronous set and
        # reset, so a counter costs its carry chain and an equality, no load multiplexer.
        # `col` (1..fan, B row or column of E) also addresses the B RAM: distinct
        # addresses as fan <= 2**abits.
        abits = ceil_log2(self.max_fan)
        obits = ceil_log2(self.max_out)
        col = Signal(abits, reset_less=True)
        # `rownum` also counts the rows of B (1..fan), equal to `col` then: the B RAM's
        # write address. Reads at `col`: with distinct address signals Yosys gives the two
        # ports of an ECP5 block RAM their own addresses, and the read port its own enable
        # (with one shared port it emulates the read enable with logic after the RAM).
        rownum = Signal(max(abits, obits), reset_less=True)
        # col == fan and rownum == out, as flip-flops updated with the counters (from the
        # incremented value, or from fan == 1 and out == 1 when a counter restarts), so
        # that the phase and counter logic starts at flip-flops
        col_last = Signal(reset_less=True) if abits else 1
        row_last = Signal(reset_less=True) if obits else 1
        take_row = Signal()  # the next element issued starts a row of E

        # E pipeline, `depth` stages advancing together on `adv` (the single stall):
        #   issue: B RAM read at `col`
        #   1: RAM output; a row's first element here moves the next row of A into `arow`
        #   2: B row registered (block RAM outputs go straight into flip-flops: an ECP5
        #      block RAM takes 5.6 ns from clock to data), A row in `arow`
        #   3: digit products registered; from rank 16 on, sums of four registered next
        #   4: dot registered, PQUANT ROM read (or PQUANT logic on the registered dot)
        #   5: e and dot registered: the `e` stream's payload
        depth = 2 + lrmul_depth(r)
        valid = [Signal(name=f"valid{j + 1}") for j in range(depth)]
        # Stage 1 holds the first element of a row, with the last stage empty (`first1_free`)
        # or full (`first1_full`): `take` is then one LUT of `e.ready` and flip-flops.
        first1_free = Signal()
        first1_full = Signal()
        first1 = first1_free | first1_full
        pipe_busy = Signal()
        m.d.comb += pipe_busy.eq(Cat(*valid).any())
        adv = Signal()
        m.d.comb += adv.eq(~valid[-1] | self.e.ready)

        # Ready for a start state (a flip-flop): waiting for A, or idle with the pipeline
        # empty (a cycle late). The handshake loads only the stream core; the phase and
        # the counters move on the next cycle, from the flip-flop `x0_taken`, so that
        # `x0.valid` reaches no enable of the phase or counter logic.
        x0_ready = Signal()
        x0_accept = Signal()
        x0_taken = Signal()
        m.d.sync += x0_taken.eq(x0_accept)
        m.d.comb += [
            self.x0.ready.eq(x0_ready),
            x0_accept.eq(self.x0.valid & self.x0.ready),
            core.x0.valid.eq(x0_accept),
            core.x0.payload.eq(self.x0.payload),
            self.busy.eq(~ph_idle | x0_taken | pipe_busy),
        ]

        # The core is loaded the cycle before a phase with rows begins, so a row is
        # always there unless a row spans several words.
        row_ok = core.o.valid if multiword else 1
        # The job's last element has been issued: the phase moves on from this flip-flop
        # the next cycle (`e.ready` reaches the phase enables through no more logic).
        stop = Signal()
        b_go = Signal()  # a row of B into the RAM (and out on b)
        a_go = Signal()  # a row of A out on a
        issue = Signal()  # an element of E into the pipeline
        take = Signal()  # a row of A into `arow`
        core_ok = (~take_row | (row_ok & ~first1)) if multiword else 1
        m.d.comb += [
            b_go.eq(row_ok & (ph_bq | (ph_bl & self.b.ready))),
            a_go.eq(ph_al & row_ok & self.a.ready),
            issue.eq(ph_aq & ~stop & adv & core_ok),
            take.eq(first1_free | (first1_full & self.e.ready)),
            core.o.ready.eq(b_go | a_go | take),
            self.b.valid.eq(ph_bl & row_ok),
            self.a.valid.eq(ph_al & row_ok),
            self.a.payload.eq(core.o.payload),
            self.b.payload.eq(core.o.payload),
        ]

        m.d.sync += x0_ready.eq(
            ~x0_accept & ~x0_taken & (ph_wa | (b_go & col_last) | (ph_idle & ~pipe_busy))
        )
        row_step = a_go | (issue & col_last)
        m.d.comb += next_phase.eq(x0_taken | (b_go & col_last) | (a_go & row_last) | stop)
        m.d.sync += stop.eq(issue & col_last & row_last)
        col_restart = x0_taken | col_last
        col_next = (col + 1)[: len(col)]
        with m.If(x0_taken | b_go | issue):
            m.d.sync += col.eq(Mux(col_restart, 1, col_next))
            if abits:
                fan = self.fan[:abits]
                m.d.sync += col_last.eq(Mux(col_restart, fan == 1, col_next == fan))
        row_next = (rownum + 1)[: len(rownum)]
        with m.If(x0_taken | b_go | row_step):
            m.d.sync += rownum.eq(Mux(x0_taken, 1, row_next))
            if obits:
                out = self.out[:obits]
                m.d.sync += row_last.eq(Mux(x0_taken, out == 1, row_next[:obits] == out))
        with m.If(x0_taken):
            m.d.sync += take_row.eq(1)
        with m.Elif(issue):
            m.d.sync += take_row.eq(col_last)

        m.d.comb += [
            bmem.w_addr.eq(rownum[:abits]),
            bmem.w_data.eq(row),
            bmem.w_en.eq(b_go),
            bmem.r_addr.eq(col),
            bmem.r_en.eq(adv),
        ]

        with m.If(adv):
            m.d.sync += [
                valid[0].eq(issue),
                first1_free.eq(issue & take_row & ~valid[-2]),
                first1_full.eq(issue & take_row & valid[-2]),
                *(valid[j].eq(valid[j - 1]) for j in range(1, depth)),
            ]
        arow = Signal(3 * r, reset_less=True)  # the current row of A
        with m.If(take):
            m.d.sync += arow.eq(row)
        e5, dot5 = lrmul_stages(
            m, arow, bmem.r_data, adv, r, self.sigma_shift, self.pquant, self.dot_width
        )
        m.d.comb += [
            self.e.valid.eq(valid[-1]),
            self.e.payload.eq(Cat(e5, dot5)),
        ]
        return m


class KeyedLowRankGenerator(wiring.Component):
    """A :class:`~pentegg.rtl.noise.keyer.StreamKeyer` and one :class:`LowRankGenerator` lane:
    LRGEN + LRMUL keyed by (seed, step, pair, layer), as one block.

    This is what one lane costs together with a keyer of its own; in the accelerator one
    keyer serves every lane. For each job the keyer is asked for the B state (with the run
    key recomputed from ``seed``), then for the A state, which it mixes while the lane
    generates B.

    Parameters
    ----------
    rank, max_fan, max_out, digits, pquant
        As :class:`LowRankGenerator`.
    keyer : str
        The :class:`~pentegg.rtl.noise.keyer.StreamKeyer`'s form: ``"parallel"`` (default) or
        ``"serial"`` (about 120 LUT4 fewer on the UP5K, stream starts of 834 and 1666
        cycles: see the timing below).

    Interface attributes
    --------------------
    seed : In(32), step : In(16), pair : In(11), layer : In(3)
        The key of the job (spec 2.3).
    out, fan, sigma_shift, mode
        As :class:`LowRankGenerator`.
    start : In(1)
        Strobe: start a job. Ignored while ``busy``. All inputs must stay stable until
        ``busy`` falls.
    busy : Out(1)
        High from the cycle after ``start`` until the job's last transfer has happened.
    e, a, b
        As :class:`LowRankGenerator`.

    Latency and throughput: the keyer sees the B request the cycle after ``start`` and
    answers 28 cycles later (with the run key); B's rows start ``max(2, m)`` cycles after
    that (as :class:`LowRankGenerator`): 31 cycles after ``start`` at ranks 1 to 16. The A
    state takes the keyer 15 cycles after the B state was taken, so from ``fan >= 13``
    (ranks 1, 4) it is ready when B ends. Then as :class:`LowRankGenerator`: a quantized
    job at rank 4 without back-pressure keeps ``busy`` high ``29 + fan + 8 + out * fan``
    cycles when ``fan >= 13`` (the B state is taken 29 cycles after ``start``;
    ``tests/test_rtl_lrgen.py`` checks it at fans 13 and 30).

    With ``keyer="serial"`` the B state is taken 1666 cycles after ``start`` and the A
    state is ready 834 cycles after that: below a fan of about 800 the A state sets the
    pace, and a quantized rank-4 job without back-pressure keeps ``busy`` high
    ``2506 + out * fan`` cycles (checked at fans 5 and 30).
    """

    def __init__(
        self,
        *,
        rank: int = 4,
        max_fan: int = 256,
        max_out: int = 256,
        digits: str = "binomial",
        pquant: str = "auto",
        keyer: str = "parallel",
    ):
        self.keyer = check_choice("keyer", keyer, KEYERS)
        configure(self, rank=rank, max_fan=max_fan, max_out=max_out, digits=digits, pquant=pquant)
        self.lane = LowRankGenerator(
            rank=rank, max_fan=max_fan, max_out=max_out, digits=digits, pquant=pquant
        )
        # elaborated as a submodule of this block: no warning if this block never is
        self.lane._MustUse__silence = True
        super().__init__(job_ports(self, first=KEY_PORTS, busy={"start": In(1), "busy": Out(1)}))

    def elaborate(self, platform):
        m = Module()
        m.submodules.keyer = keyer = StreamKeyer(keyer=self.keyer)
        m.submodules.lane = lane = self.lane
        # requests left to post: 2 (B, with the run key), 1 (A), 0
        todo = Signal(2)
        busy = Signal()
        m.d.comb += busy.eq((todo != 0) | keyer.busy | lane.busy)
        with m.If(self.start & ~busy):
            m.d.sync += todo.eq(2)
        with m.Elif(keyer.k.valid & keyer.k.ready):
            m.d.sync += todo.eq(todo - 1)
        m.d.comb += [
            keyer.seed.eq(self.seed),
            keyer.k.valid.eq(todo != 0),
            keyer.k.payload.ab.eq(todo[1]),
            keyer.k.payload.reseed.eq(todo[1]),
            keyer.k.payload.layer.eq(self.layer),
            keyer.k.payload.pair.eq(self.pair),
            keyer.k.payload.step.eq(self.step),
            lane.out.eq(self.out),
            lane.fan.eq(self.fan),
            lane.sigma_shift.eq(self.sigma_shift),
            lane.mode.eq(self.mode),
            self.busy.eq(busy),
        ]
        wiring.connect(m, keyer.x0, lane.x0)
        wiring.connect(m, wiring.flipped(self.e), lane.e)
        wiring.connect(m, wiring.flipped(self.a), lane.a)
        wiring.connect(m, wiring.flipped(self.b), lane.b)
        return m
