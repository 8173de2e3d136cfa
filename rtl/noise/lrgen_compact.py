"""CompactLowRankGenerator: LRGEN + LRMUL keyed by (seed, step, pair, layer) with one
bit-serial noise engine, for the smallest area (spec 2, 3, 4.2).

The block of :class:`~pentegg.rtl.noise.lrgen.KeyedLowRankGenerator` (a parallel key mixer
and a lane with its own 32-bit xorshift stepper, about 390 LUT4 on an iCE40UP5K) in a
different trade: one :class:`~pentegg.rtl.noise.noise_engine.SerialNoiseEngine` mixes the keys
and generates both streams one bit per cycle, writing the rows of B and then of A into
two block RAMs; E is then computed from the two RAMs at one element per cycle. The
noise costs ``4 * rank`` cycles per row (binomial) before E starts instead of one, and a
third block RAM; the digits, E and the interface are the same. docs/rtl.md compares the
two blocks.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..bram import RegisteredRAM
from .lrgen import KEY_PORTS, configure, job_ports, lrmul_depth, lrmul_stages
from .noise_engine import SerialNoiseEngine, chunk_digits
from .prng import DIGITS_PER_WORD

__all__ = ["CompactLowRankGenerator", "compact_job_cycles"]


def compact_job_cycles(rank: int, out: int, fan: int, digits: str = "binomial") -> int:
    """Cycles a quantized job keeps ``busy`` high after its ``start`` cycle, without
    back-pressure (the class docstring's formula; tests check it)."""
    row = rank * (32 // DIGITS_PER_WORD[digits])  # R: cycles per row of noise
    beat = chunk_digits(rank, digits) * (32 // DIGITS_PER_WORD[digits])  # c: per chunk
    return 709 + 2 * (row - beat) + row * (fan + out - 2) + out * fan + 2 + lrmul_depth(rank)


class CompactLowRankGenerator(wiring.Component):
    """LRGEN + LRMUL keyed by (seed, step, pair, layer): A, B and E = PQUANT(A.B^T, f)
    (spec 3, 4.2), with the noise made by one bit-serial engine.

    A job: the engine computes the run key from ``seed`` and the B stream's start state
    (spec 2.3), then the ``fan`` rows of B, one every ``4 * rank`` cycles (binomial; ``8 *
    rank`` uniform), into the B RAM; then the A stream's start state and the ``out`` rows of
    A into the A RAM. In quantized mode (``mode`` = 0) E is then read out of the two RAMs
    in row-major order, one element per cycle. In low-rank mode (``mode`` = 1) each row
    also goes out on ``b`` (then ``a``) as it is made, and the job ends with the last
    row of A: the engine waits while a row is not taken.

    Parameters
    ----------
    rank : int
        1, 4, 16 or 64 (default 4).
    max_fan : int
        Largest ``fan``, 1..4097 (default 256). The B RAM has ``2**ceil(log2(max_fan))``
        words of ``3 * rank`` bits.
    max_out : int
        Largest ``out``, 1..4096 (default 256). The A RAM: ``2**ceil(log2(max_out))``
        words of ``3 * rank`` bits.
    digits : str
        ``"binomial"`` (default) or ``"uniform"`` (spec 2.5).
    pquant : str
        As :class:`~pentegg.rtl.noise.lrgen.LowRankGenerator`: ``"rom"``, ``"logic"`` or
        ``"auto"`` (default; the ROM up to rank 4).

    Interface attributes
    --------------------
    seed : In(32), step : In(16), pair : In(11), layer : In(3)
        The key of the job (spec 2.3). The run key is recomputed from ``seed`` in every job.
    out : In(range(max_out + 1)), fan : In(range(max_fan + 1))
        Shape of the layer's weight matrix (``fan`` counts the bias column), each at least
        1 and at most its maximum; other values give unspecified output.
    sigma_shift : In(4)
        0..8; ``f = log4(rank) + sigma_shift``. Larger values are unspecified.
    mode : In(1)
        0: quantized (stream ``e``); 1: low-rank (streams ``b`` then ``a``).
    start : In(1)
        Strobe: start a job. Ignored while ``busy``. All inputs must stay stable until
        ``busy`` falls.
    busy : Out(1)
        High from the cycle after ``start`` until the job's last transfer has happened.
    e : Out(stream.Signature(StructLayout({"e": signed(3), "dot": signed(dot_width)})))
        As :class:`~pentegg.rtl.noise.lrgen.LowRankGenerator`: the element of E and the dot
        product ``A[i] . B[k]`` it quantizes.
    a, b : Out(stream.Signature(ArrayLayout(signed(3), rank)))
        Rows of A and of B (low-rank mode), digit ``c`` in bits ``[3c+2:3c]``.

    Latency and throughput: with ``R = 4 * rank`` cycles per row of noise (``8 * rank``
    uniform) and ``c = min(R, 16)`` cycles per 16-bit chunk of a row, the first row of B is
    complete ``449 + R - c`` cycles after the ``start`` cycle (the run key and the B
    state: 14 passes of 32 cycles), then one row every ``R`` cycles; the A stream starts
    the cycle after B's last row and its first row is complete ``257 + R - c`` cycles
    later (8 passes), then one every ``R`` cycles. Two cycles after A's last row the
    first element of E is issued; it is valid ``2 + lrmul_depth(rank)`` cycles later (5
    at ranks 1 and 4), then one element per cycle while ``e.ready`` is high. A quantized
    job without back-pressure keeps ``busy`` high ``709 + 2 * (R - c) + R * (fan + out -
    2) + out * fan + 2 + lrmul_depth(rank)`` cycles (:func:`compact_job_cycles`; at rank
    4: ``714 + 16 * (fan + out - 2) + out * fan``). A low-rank job ends the cycle after
    A's last row is taken.
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
        super().__init__(job_ports(self, first=KEY_PORTS, busy={"start": In(1), "busy": Out(1)}))

    def elaborate(self, platform):
        m = Module()
        r = self.rank
        g = chunk_digits(r, self.digits)
        per_row = r // g  # chunks per row
        m.submodules.engine = engine = SerialNoiseEngine(digits=self.digits, chunk=g)
        abits = ceil_log2(self.max_fan)
        obits = ceil_log2(self.max_out)
        m.submodules.bmem = bmem = RegisteredRAM(3 * r, 1 << abits)
        m.submodules.amem = amem = RegisteredRAM(3 * r, 1 << obits)

        # Phases, one-hot: idle, B (engine: run key, B state, rows of B into the B RAM
        # and out on `b`), A (A state, rows of A), then E in quantized mode.
        ph_idle = Signal(init=1)
        ph_b = Signal()
        ph_a = Signal()
        ph_e = Signal()

        # Counters run up from 1 to `fan` or `out` (compared modulo the counter's range)
        # and wrap to 1 after their last value, so that they are at 1 between jobs.
        # `col` is the B RAM's address (row of B written, or column of E), `rownum` the
        # A RAM's. `col_last` and `row_last` compare the counters' flip-flops with the
        # inputs: no reload when `fan` or `out` change between jobs.
        col = Signal(abits, init=1 % (1 << abits) if abits else 0)
        rownum = Signal(obits, init=1 % (1 << obits) if obits else 0)
        col_last = Signal()
        row_last = Signal()
        m.d.comb += [
            col_last.eq(col == self.fan[:abits] if abits else 1),
            row_last.eq(rownum == self.out[:obits] if obits else 1),
        ]
        col_step = Signal()
        row_step = Signal()
        begin = Signal()  # start accepted
        m.d.comb += begin.eq(self.start & ph_idle)
        with m.If(col_step):
            m.d.sync += col.eq(Mux(col_last, 1, col + 1))
        with m.If(row_step):
            m.d.sync += rownum.eq(Mux(row_last, 1, rownum + 1))

        # Noise: rows assembled from chunks (the older chunks of a row wait in a shift
        # register), written into the RAM when complete and, in low-rank mode, offered on
        # `b` or `a`: the engine waits while a row is not taken.
        chunk = engine.o.payload.as_value()
        older = [Signal(3 * g, name=f"chunk{j}", reset_less=True) for j in range(per_row - 1)]
        lane = Signal(per_row, init=1)  # one-hot: the chunk's place in its row
        row = Cat(*older, chunk)
        row_out = engine.o.valid & lane[-1] & self.mode  # a row offered on `b` or `a`
        m.d.comb += [
            self.b.valid.eq(row_out & ph_b),
            self.a.valid.eq(row_out & ph_a),
            self.b.payload.eq(row),
            self.a.payload.eq(row),
            engine.o.ready.eq(~(lane[-1] & self.mode) | Mux(ph_b, self.b.ready, self.a.ready)),
        ]
        taken = engine.o.valid & engine.o.ready
        wrote = Signal()  # the last chunk of a row is taken this cycle
        m.d.comb += wrote.eq(taken & lane[-1])
        if per_row > 1:
            with m.If(taken):
                m.d.sync += lane.eq(lane.rotate_left(1))
                m.d.sync += [older[j].eq(older[j + 1]) for j in range(per_row - 2)]
                m.d.sync += older[-1].eq(chunk)
        m.d.comb += [
            bmem.w_addr.eq(col),
            bmem.w_data.eq(row),
            bmem.w_en.eq(wrote & ph_b),
            amem.w_addr.eq(rownum),
            amem.w_data.eq(row),
            amem.w_en.eq(wrote & ph_a),
        ]
        # The last row of a stream taken: the engine moves on the next cycle, from a
        # flip-flop (beats are at least four cycles apart, so none is missed meanwhile).
        b_done = Signal()
        a_done = Signal()
        kick = Signal()  # start the engine: the B stream (with the run key) or the A stream
        m.d.sync += [
            b_done.eq(wrote & ph_b & col_last),
            a_done.eq(wrote & ph_a & row_last),
            kick.eq(begin),
        ]
        m.d.comb += [
            engine.seed.eq(self.seed),
            engine.key.eq(Cat(ph_b, self.layer, self.pair, self.step)),
            engine.start.eq(kick | b_done),
            engine.reseed.eq(kick),
            engine.stop.eq(a_done),
        ]

        # E (quantized mode): read out of the two RAMs in row-major order, the pipeline
        # advancing on `adv`: issue (reads at `col` and `rownum`), 1: RAM registers,
        # 2: RAM output registers (the rows of A and B), then LRMUL and PQUANT
        # (lrmul_depth stages).
        depth = 2 + lrmul_depth(r)
        valid = [Signal(name=f"valid{j + 1}") for j in range(depth)]
        stop = Signal()  # the last element was issued; the job ends next cycle
        adv = Signal()
        issue = Signal()
        m.d.comb += [
            self.e.valid.eq(valid[-1]),
            adv.eq(~valid[-1] | self.e.ready),
            issue.eq(ph_e & ~stop & adv),
            col_step.eq((wrote & ph_b) | issue),
            row_step.eq((wrote & ph_a) | (issue & col_last)),
        ]
        with m.If(adv):
            m.d.sync += [valid[0].eq(issue), *(valid[j].eq(valid[j - 1]) for j in range(1, depth))]
        m.d.sync += stop.eq(issue & col_last & row_last)
        with m.If(begin):
            m.d.sync += [ph_idle.eq(0), ph_b.eq(1)]
        with m.If(b_done):
            m.d.sync += [ph_b.eq(0), ph_a.eq(1)]
        with m.If(a_done):
            m.d.sync += [ph_a.eq(0), ph_e.eq(~self.mode), ph_idle.eq(self.mode)]
        with m.If(stop):
            m.d.sync += [ph_e.eq(0), ph_idle.eq(1)]
        for ram, addr in ((bmem, col), (amem, rownum)):
            m.d.comb += [ram.r_addr.eq(addr), ram.r_en.eq(adv)]
        m.d.comb += self.busy.eq(~ph_idle | Cat(*valid).any())

        e, dot = lrmul_stages(
            m, amem.r_data, bmem.r_data, adv, r, self.sigma_shift, self.pquant, self.dot_width
        )
        m.d.comb += self.e.payload.eq(Cat(e, dot))
        return m
