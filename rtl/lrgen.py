"""LRGEN + LRMUL (spec 3 and 4.2): the low-rank factors A, B and E = PQUANT(A.B^T, f).

One :class:`~pentegg.rtl.prng.PentaryPRNG` (``digits_per_beat = rank``, one beat is one
row of A or B) serves both streams of a job, one after the other:

1. B: the B stream's ``fan`` rows go into a block RAM (``rank`` digit codes per word) and,
   in low-rank mode, out on ``b``;
2. A: the A stream's ``out`` rows either go out on ``a`` (low-rank mode) or, in quantized
   mode, each A row is held while the B rows are read back from the RAM, one per cycle,
   and LRMUL forms ``E[i, k]`` and the raw dot product ``A[i] . B[k]`` in row-major order.

The B stream is therefore generated once per job instead of once per output row (spec 3
allows either: both give the same digits).
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .params import check_choice, check_int
from .pquant import PentaryQuantizer, pquant_int
from .prng import DIGIT_DISTS, LAYER_BITS, PAIR_BITS, STEP_BITS, PentaryPRNG, digits_layout

__all__ = ["MAX_FAN", "MAX_OUT", "RANKS", "LowRankGenerator", "dot_width"]

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


def digit_product(a, b):
    """Product of two digit codes as a 4-bit signed value (0, +-1, +-2, +-4): a mux and a
    negation, no multiplier."""
    b4 = b.as_signed()
    twice = a[1] & ~a[0]  # |a| == 2: codes 010 and 110
    mag = Mux(twice, b4 << 1, b4)
    return Mux(a == 0, 0, Mux(a[2], -mag, mag))


def adder_tree(m: Module, terms: list, name: str):
    """Balanced sum of signed terms, one bit wider per level."""
    level = 0
    while len(terms) > 1:
        nxt = []
        for j in range(0, len(terms) - 1, 2):
            s = Signal(signed(max(len(terms[j]), len(terms[j + 1])) + 1), name=f"{name}{level}_{j}")
            m.d.comb += s.eq(terms[j] + terms[j + 1])
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


class LowRankGenerator(wiring.Component):
    """LRGEN + LRMUL for one (step, pair, layer): A, B and E = PQUANT(A.B^T, f).

    A (``out`` x ``rank``) is the stream (step, pair, layer, A), B (``fan`` x ``rank``) the
    stream (step, pair, layer, B), both row-major (spec 3); ``E[i, k] =
    PQUANT(A[i] . B[k], log4(rank) + sigma_shift)`` (spec 4.2).

    A job starts with ``start`` (while ``busy`` is low) and reads the run-time inputs,
    which must stay stable until ``busy`` falls. In quantized mode (``mode`` = 0) the job
    emits ``out * fan`` elements on ``e`` in row-major order; in low-rank mode (``mode`` =
    1) it emits the ``fan`` rows of B on ``b``, then the ``out`` rows of A on ``a``.

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
    seed : In(32), step : In(16), pair : In(11), layer : In(3)
        The key of the job (spec 2.3).
    out : In(range(max_out + 1)), fan : In(range(max_fan + 1))
        Shape of the layer's weight matrix, ``fan`` counting the bias column. Each must be
        at least 1 and at most its maximum; other values give unspecified output.
    sigma_shift : In(4)
        0..8 (spec 9.1); ``f = log4(rank) + sigma_shift``. Larger values are unspecified.
    mode : In(1)
        0: quantized (stream ``e``); 1: low-rank (streams ``b`` then ``a``).
    start : In(1)
        Strobe: start a job. Ignored while ``busy``.
    busy : Out(1)
        High from the cycle after ``start`` until the job's last transfer has happened.
    e : Out(stream.Signature(StructLayout({"e": signed(3), "dot": signed(dot_width)})))
        ``e``: the element of E (3-bit digit code); ``dot``: ``A[i] . B[k]`` before
        quantization, ``dot_width = bits_for(-4 rank, 4 rank)`` bits (4, 6, 8, 10).
    a : Out(stream.Signature(ArrayLayout(signed(3), rank)))
        Rows of A, digit ``c`` in bits ``[3c+2:3c]``.
    b : Out(stream.Signature(ArrayLayout(signed(3), rank)))
        Rows of B, same layout.

    Latency and throughput: the B stream starts 28 cycles after ``start`` (run key and
    stream key mixing), rank 16 and 64 add ``rank / D - 1`` cycles (D = 8 binomial, 4
    uniform digits per word). B then takes ``fan`` cycles, one row per cycle (rank <= D;
    one row every ``rank / D`` cycles above), and the A key 15 more. In quantized mode the
    first element of E follows 5 cycles later, then one element per cycle while ``e.ready``
    is high, ``out * fan`` elements in ``out * fan`` cycles: the next row of A is generated
    while the current one is used (if a row of A spans ``m = rank / D > 1`` words and
    ``fan < m``, a row costs ``m`` cycles). A quantized job at rank 4 without
    back-pressure keeps ``busy`` high ``47 + fan + out * fan`` cycles.
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
        self.rank = check_choice("rank", rank, RANKS)
        self.max_fan = check_int("max_fan", max_fan, 1, MAX_FAN)
        self.max_out = check_int("max_out", max_out, 1, MAX_OUT)
        self.digits = check_choice("digits", digits, DIGIT_DISTS)
        check_choice("pquant", pquant, ("auto", *PQUANT_IMPLS))
        self.pquant = ("rom" if rank <= 4 else "logic") if pquant == "auto" else pquant
        self.dot_width = dot_width(rank)
        self.e_layout = data.StructLayout({"e": signed(3), "dot": signed(self.dot_width)})
        super().__init__(
            {
                "seed": In(32),
                "step": In(STEP_BITS),
                "pair": In(PAIR_BITS),
                "layer": In(LAYER_BITS),
                "out": In(range(self.max_out + 1)),
                "fan": In(range(self.max_fan + 1)),
                "sigma_shift": In(SIGMA_BITS),
                "mode": In(1),
                "start": In(1),
                "busy": Out(1),
                "e": Out(stream.Signature(self.e_layout)),
                "a": Out(stream.Signature(digits_layout(rank))),
                "b": Out(stream.Signature(digits_layout(rank))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        r = self.rank
        m.submodules.prng = prng = PentaryPRNG(digits=self.digits, digits_per_beat=r)
        row = prng.o.payload.as_value()  # one row of A or B: r digit codes

        abits = ceil_log2(self.max_fan)
        # Reads and writes of the B RAM never overlap (B is written before E reads it):
        # `no_rw_check` spares the collision-bypass logic Yosys would add otherwise.
        m.submodules.bmem = bmem = memory.Memory(
            shape=unsigned(3 * r), depth=1 << abits, init=[], attrs={"no_rw_check": 1}
        )
        wr = bmem.write_port()
        rd = bmem.read_port(domain="sync")

        col = Signal(range(self.max_fan + 1))  # counts fan..1
        rownum = Signal(range(self.max_out + 1))  # counts out..1
        # col == 1 and rownum == 1, kept as flip-flops (updated with the counters) so
        # that the state machine's decisions are one LUT away from the ready inputs
        col_last = Signal()
        row_last = Signal()
        # fan..1 modulo the depth: distinct addresses
        addr = col[:abits] if abits else 0

        m.d.comb += [
            prng.seed.eq(self.seed),
            prng.step.eq(self.step),
            prng.pair.eq(self.pair),
            prng.layer.eq(self.layer),
            wr.addr.eq(addr),
            wr.data.eq(row),
            rd.addr.eq(addr),
            self.a.payload.eq(prng.o.payload),
            self.b.payload.eq(prng.o.payload),
        ]

        # E pipeline. All stages advance together while the output register is free
        # (`advance`); every block RAM output goes straight into a flip-flop (ECP5 block
        # RAMs are slow to clock-to-out).
        #   issue: B RAM read at `col`; a row of A is taken into `arow` at a row's start
        #   s1: the RAM's output          s2: B row (and its A row) registered
        #   s3: digit products registered, adder tree -> dot (combinational); from rank 16
        #       on, sums of four products are registered first (one more stage)
        #   s4: dot registered, PQUANT ROM read
        #   s5: e (ROM data, or PQUANT logic of the registered dot) and dot registered
        split_tree = r >= 16
        depth = 5 + split_tree
        valid = [Signal(name=f"valid{j + 1}") for j in range(depth)]
        # The last stage feeds the output through a skid register: the stages advance
        # while the skid register is empty, so `e.ready` only reaches the skid logic and
        # the output multiplexer (the pipeline's enables come from a flip-flop).
        skid_valid = Signal()
        advance = ~skid_valid
        issue = Signal()
        arow = Signal(3 * r)  # the current row of A
        take_row = Signal(init=1)  # the next issue starts a row: take a row of A first
        # The next row of A waits in `anext`, fetched from the generator whatever the
        # output's back-pressure: `e.ready` does not reach the generator's logic.
        anext = Signal(3 * r)
        anext_valid = Signal()
        m.d.comb += rd.en.eq(advance)
        with m.If(advance):
            m.d.sync += [valid[0].eq(issue), *(valid[j].eq(valid[j - 1]) for j in range(1, depth))]
        with m.If(issue & take_row):
            m.d.sync += [arow.eq(anext), anext_valid.eq(0)]

        brow = Signal(3 * r, reset_less=True)
        arow1 = Signal(3 * r, reset_less=True)  # the row of A travelling with brow
        products = [Signal(signed(4), name=f"product{c}") for c in range(r)]
        terms = products
        if split_tree:
            terms = [Signal(signed(6), name=f"sum4_{g}") for g in range(r // 4)]
            with m.If(advance):
                m.d.sync += [
                    t.eq(adder_tree(m, products[4 * g : 4 * g + 4], f"sum4_{g}_"))
                    for g, t in enumerate(terms)
                ]
        dot = Signal(signed(self.dot_width))
        m.d.comb += dot.eq(adder_tree(m, terms, "dot"))
        dot4 = Signal(signed(self.dot_width))
        dot5 = Signal(signed(self.dot_width))
        with m.If(advance):
            m.d.sync += [
                brow.eq(rd.data),
                arow1.eq(arow),
                *(
                    p.eq(digit_product(arow1[3 * c : 3 * c + 3], brow[3 * c : 3 * c + 3]))
                    for c, p in enumerate(products)
                ),
                dot4.eq(dot),
                dot5.eq(dot4),
            ]
        e5 = Signal(signed(3))
        if self.pquant == "rom":
            m.submodules.pqrom = pqrom = memory.Memory(
                shape=unsigned(3),
                depth=1 << (self.dot_width + SIGMA_BITS),
                init=pquant_rom_image(r),
            )
            pqrd = pqrom.read_port(domain="sync")
            m.d.comb += [pqrd.addr.eq(Cat(dot, self.sigma_shift)), pqrd.en.eq(advance)]
            with m.If(advance):
                m.d.sync += e5.eq(pqrd.data)
        else:
            m.submodules.pquant = pq = PentaryQuantizer(
                self.dot_width, shift_offset=rank_shift(r), max_shift=SIGMA_SHIFT_MAX
            )
            m.d.comb += [pq.x.eq(dot4), pq.shift.eq(self.sigma_shift)]
            with m.If(advance):
                m.d.sync += e5.eq(pq.q)
        skid = Signal(self.e_layout)
        m.d.comb += [
            self.e.valid.eq(skid_valid | valid[-1]),
            self.e.payload.eq(Mux(skid_valid, skid, Cat(e5, dot5))),
        ]
        with m.If(skid_valid):
            with m.If(self.e.ready):
                m.d.sync += skid_valid.eq(0)
        with m.Elif(valid[-1] & ~self.e.ready):
            m.d.sync += [skid_valid.eq(1), skid.eq(Cat(e5, dot5))]
        # Whether any stage holds an element, as a flip-flop (it gates `start`).
        pipeline_busy = Signal()
        m.d.sync += pipeline_busy.eq(
            Mux(advance, issue | Cat(*valid[:-1]).any(), Cat(*valid).any())
            | (valid[-1] & ~self.e.ready)
            | (skid_valid & ~self.e.ready)
        )

        start_a = Signal()
        m.d.sync += start_a.eq(0)
        m.d.comb += prng.start.eq(start_a)
        with m.FSM(name="phase"):
            with m.State("IDLE"):
                m.d.comb += [prng.ab.eq(1), self.busy.eq(pipeline_busy)]
                with m.If(self.start & ~pipeline_busy):
                    m.d.comb += [prng.start.eq(1), prng.reseed.eq(1)]
                    m.d.sync += col.eq(self.fan), col_last.eq(self.fan == 1)
                    m.next = "B"
            with m.State("B"):
                # rows of B into the RAM (and out on b in low-rank mode)
                m.d.comb += [
                    prng.ab.eq(1),
                    self.busy.eq(1),
                    self.b.valid.eq(self.mode & prng.o.valid),
                    prng.o.ready.eq(~self.mode | self.b.ready),
                ]
                with m.If(prng.o.valid & prng.o.ready):
                    m.d.comb += wr.en.eq(1)
                    m.d.sync += col.eq(col - 1), col_last.eq(col == 2)
                    with m.If(col_last):
                        # the A stream, same run key, started from a flip-flop the next
                        # cycle: `b.ready` then stops at this state machine
                        m.d.sync += [
                            start_a.eq(1),
                            col.eq(self.fan),
                            col_last.eq(self.fan == 1),
                            rownum.eq(self.out),
                            row_last.eq(self.out == 1),
                            anext_valid.eq(0),
                        ]
                        m.next = "A"
            with m.State("A"):
                m.d.comb += self.busy.eq(1)
                with m.If(start_a):
                    pass  # the generator still shows the B stream this cycle
                with m.Elif(self.mode):
                    # low-rank: rows of A out on a
                    m.d.comb += [
                        self.a.valid.eq(prng.o.valid),
                        prng.o.ready.eq(self.a.ready),
                    ]
                    with m.If(prng.o.valid & self.a.ready):
                        m.d.sync += rownum.eq(rownum - 1), row_last.eq(rownum == 2)
                        with m.If(row_last):
                            m.next = "IDLE"
                with m.Else():
                    # quantized: a row of A goes from the generator to `anext`, then to
                    # `arow` at the row's first element, so the generator prepares the
                    # next row during this one
                    m.d.comb += [
                        prng.o.ready.eq(~anext_valid),
                        issue.eq((anext_valid | ~take_row) & advance),
                    ]
                    with m.If(prng.o.valid & ~anext_valid):
                        m.d.sync += [anext.eq(row), anext_valid.eq(1)]
                    with m.If(issue):
                        m.d.sync += [col.eq(col - 1), col_last.eq(col == 2), take_row.eq(0)]
                        with m.If(col_last):
                            m.d.sync += col.eq(self.fan), col_last.eq(self.fan == 1)
                            m.d.sync += [
                                rownum.eq(rownum - 1),
                                row_last.eq(rownum == 2),
                                take_row.eq(1),
                            ]
                            with m.If(row_last):
                                m.next = "IDLE"
        return m
