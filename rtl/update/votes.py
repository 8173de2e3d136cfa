"""VoteAccumulator (spec 8.1): the votes ``Z`` of one layer, from the regenerated noise.

For ES step ``t``, layer ``l`` of shape ``(out, fan)`` and pairs ``j = 0..P-1``::

    low-rank:   Z[o, k] = sum_j g_j * sum_c A_j[o, c] * B_j[k, c]
    quantized:  Z[o, k] = sum_j g_j * PQUANT(sum_c A_j[o, c] * B_j[k, c], f)

with ``f = log4(r) + sigma_shift`` (spec 4.2). The noise of a pair is regenerated from its
keys (spec 2.3) by one :class:`~pentegg.rtl.noise.keyer.StreamKeyer` and two
:class:`~pentegg.rtl.noise.prng.PentaryStreamCore` (one row of ``rank`` digits per beat),
as in :class:`~pentegg.rtl.evaluator.noise_fill.NoiseFill`, and never kept beyond the
pair: ``B_j`` (``fan`` rows) is written into a buffer of ``lanes`` small memories (row
``k`` in memory ``k % lanes`` at address ``k // lanes``; two buffers, so that pair
``j + 1``'s rows are written while pair ``j``'s are read), ``A_j`` is taken one row per
output row ``o``.

Per pair, the datapath walks ``o`` (rows), ``kb`` (groups of ``lanes`` columns,
``k = kb * lanes + lane``) and ``c`` (rank), one ``(o, kb, c)`` per cycle. The
coefficient of a cycle, shared by the ``lanes`` columns, is ``g_j * A[o, c]`` (low-rank)
or ``A[o, c]`` (quantized): with ``A`` a digit, a select of ``0``, ``g`` or ``2g`` and a
negation. Each lane adds the coefficient times its ``B[k, c]`` (again a select and a
negation, no multiplier) to its accumulator; after the ``r`` cycles of a group the
accumulators are added to the ``Z`` words (read-modify-write, the first pair writes), in
quantized mode as ``g_j * PQUANT(acc, f)``.

``Z`` is a memory of ``max_width * ceil((max_width + 1) / lanes)`` words of ``lanes``
entries of ``z_bits`` (spec 9.2's worst case for ``max_population``): entry ``(o, k)``
is lane ``k % lanes`` of word ``o * ceil(fan / lanes) + k // lanes``. Its read port is
the component's (``z_addr``/``z_data``) while the accumulator is idle.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..bram import NO_RW_CHECK, RegisteredRAM, RWWatch
from ..evaluator.lane import digit_ctrl
from ..evaluator.params import (
    MAX_POPULATION,
    MAX_STEP,
    MODES,
    RANKS,
    SIGMA_SHIFT_MAX,
    bits_for,
    rank_shift,
)
from ..evaluator.pass_engine import lane_copies
from ..noise.keyer import StreamKeyer
from ..noise.prng import DIGIT_DISTS, PentaryStreamCore
from ..params import check_choice, check_int
from ..pquant import PentaryQuantizer

__all__ = [
    "MODES",
    "RANKS",
    "VoteAccumulator",
    "bits_for",
    "g_bound",
    "lanes_max",
    "times_digit",
    "vote_cycles",
    "z_bound",
    "z_layout",
]

MAX_WIDTH = 4096
#: ``lanes`` may always be 1..64; above that up to ``max_width + 1``, a whole row of the
#: widest layer (its bias column included) per Z word: more lanes could never be used.
LANES_MAX = 64


def lanes_max(max_width: int) -> int:
    """The most ``lanes`` of a block with rows of up to ``max_width + 1`` weights."""
    return max(LANES_MAX, max_width + 1)


def g_bound(population: int) -> int:
    """Largest ``|g_j|`` (spec 7.2, rank shaping): ``2 * (population - 1)``."""
    return 2 * (population - 1)


def z_bound(population: int, rank: int, mode: str) -> int:
    """Spec 9.2: ``|Z| <= P * max|g| * max|e|`` (``max|e|`` = 2 quantized, 4r low-rank)."""
    return (population // 2) * g_bound(population) * (2 if mode == "quantized" else 4 * rank)


def z_layout(lanes: int, max_width: int) -> tuple[int, int]:
    """``(depth, addr_bits)`` of the ``Z`` memory: ``max_width * ceil((max_width + 1) /
    lanes)`` words of ``lanes`` entries."""
    depth = max_width * -(-(max_width + 1) // lanes)
    return depth, max(1, ceil_log2(depth))


def vote_cycles(
    *, pairs: int, out: int, fan: int, lanes: int, rank: int, digits: str = "binomial"
) -> int:
    """Cycles of one :class:`VoteAccumulator` run: ``done`` is high this many cycles after
    the ``start`` cycle (validated by simulation in tests/test_rtl_update.py)::

        55 + X + max(0, Wb - 2) + T + (pairs - 1) * max(T + 2, X + 32)

    with ``T = out * ceil(fan / lanes) * rank`` a pair's computation (one ``(o, kb, c)``
    per cycle), ``X = max(0, fan * Wb - 15)`` the part of a pair's ``B`` fill that the
    request of its ``A`` key does not hide, ``Wb = max(1, rank / D)`` (``D`` = 8 binomial,
    4 uniform digits per word) the stream core's cycles per row. The noise of pair
    ``j + 1`` (two keyer requests, 15 cycles each, and the ``B`` fill) is fetched while
    pair ``j`` is computed, so a pair takes ``T + 2`` cycles when its computation is the
    longer, ``X + 32`` when the fetch is; the first pair's fetch (and, for ``Wb > 2``, its
    first row of ``A``) is not hidden; 55 covers the range check, the run key, the first
    fetch, the start and the pipeline.
    """
    wb = max(1, rank // (8 if digits == "binomial" else 4))
    t = out * -(-fan // lanes) * rank
    x = max(0, fan * wb - 15)
    return 55 + x + max(0, wb - 2) + t + (pairs - 1) * max(t + 2, x + 32)


def times_digit(x, d):
    """``x * d`` for a digit code ``d`` (spec 1.2): select ``0``, ``x`` or ``x << 1``,
    negate when ``d < 0``. No multiplier."""
    c = digit_ctrl(d)
    mag = Mux(c["nz"], Mux(c["is2"], x << 1, x), 0)
    return Mux(c["neg"], -mag, mag)


class VoteAccumulator(wiring.Component):
    """``Z`` of one layer of one ES step (spec 8.1), accumulated over all pairs.

    Parameters
    ----------
    lanes : int
        ``Z`` entries (columns ``k``) updated per cycle, 1..max(64, max_width + 1):
        ``max_width + 1`` takes a whole row of the widest layer per cycle.
    rank : int
        1, 4, 16 or 64 (spec 3).
    mode : str
        ``"lowrank"`` (default): ``Z = sum_j g_j A_j B_j^T``; ``"quantized"``:
        ``Z = sum_j g_j PQUANT(A_j B_j^T, f)``.
    digits : str
        ``"binomial"`` (default) or ``"uniform"`` (spec 2.5).
    max_width : int
        Largest layer width, 1..4096: ``out <= max_width``, ``fan <= max_width + 1``.
    max_population : int
        Largest population, even, 2..4096. Sizes ``g_bits`` and ``z_bits``.

    Derived attributes: ``g_bits = bits_for(2 * (max_population - 1))``,
    ``z_bits = bits_for(P * 2 * (max_population - 1) * max|e|)`` (spec 9.2, equal to
    golden ``Config.widths()["z"]``), ``z_depth`` words of the ``Z`` memory,
    ``z_addr_bits``.

    Interface attributes
    --------------------
    start : In(1)
        Strobe, taken while ``busy`` is low. The run-time inputs must stay stable until
        ``busy`` falls.
    population : In(range(max_population + 1))
        Even, 2..max_population; pairs ``P = population / 2``.
    out : In(range(max_width + 1)), fan : In(range(max_width + 2))
        The layer's shape, 1..max_width and 1..max_width + 1 (``fan`` counts the bias).
    seed : In(32), step : In(16), layer : In(3)
        Keys of the noise (spec 2.3). ``step`` 0..65534.
    sigma_shift : In(4)
        Quantized mode: ``f = log4(rank) + sigma_shift``, 0..8. Ignored in low-rank mode.
    busy : Out(1)
        From the cycle after ``start`` until ``done`` (one cycle, the range check, for a
        refused start).
    done : Out(1)
        One-cycle strobe: ``Z`` is complete (or the start was refused, ``error``).
    error : Out(1)
        Set with ``done`` when a start had a run-time input out of range (nothing is
        computed, ``Z`` unchanged); cleared by the next ``start``.
    g_addr : Out(range(max_population // 2)), g_data : In(signed(g_bits))
        Read port of the shaped fitness (``g_j`` at address ``j``). ``g_addr`` is held
        for at least 30 cycles before ``g_data`` is sampled: any synchronous read latency
        up to 2 cycles works.
    z_addr : In(z_addr_bits), z_data : Out(ArrayLayout(signed(z_bits), lanes))
        Read port of ``Z`` while ``busy`` is low: ``z_data`` is the word at the ``z_addr``
        of four cycles before (latency 4: the address register beside the block RAMs,
        their read register, their output register, a fabric register).

    Timing: :func:`vote_cycles`, ``55 + X + max(0, Wb - 2) + T + (pairs - 1) * max(T +
    2, X + 32)`` cycles from ``start`` to ``done``, ``T = out * ceil(fan / lanes) * rank``
    (one ``(o, kb, c)`` per cycle while computing), ``X = max(0, fan * Wb - 15)`` (``Wb``
    cycles per row of ``B`` from the stream core: 1 up to rank 8 binomial / 4 uniform).
    The keyer requests and the ``B`` fill of pair ``j + 1`` run while pair ``j`` is
    computed: ``B`` is double-buffered (two buffers of ``ceil(fan / lanes)`` rows per lane
    memory) and the next ``A`` key waits in a register until ``core_a`` has given the
    current pair's last row.
    """

    def __init__(
        self,
        *,
        lanes: int = 4,
        rank: int = 4,
        mode: str = "lowrank",
        digits: str = "binomial",
        max_width: int = 64,
        max_population: int = 256,
    ):
        self.max_width = check_int("max_width", max_width, 1, MAX_WIDTH)
        self.lanes = check_int("lanes", lanes, 1, lanes_max(max_width))
        self.rank = check_choice("rank", rank, RANKS)
        self.mode = check_choice("mode", mode, MODES)
        self.digits = check_choice("digits", digits, DIGIT_DISTS)
        self.max_population = check_int("max_population", max_population, 2, MAX_POPULATION)
        if max_population % 2:
            raise ValueError(
                f"max_population={max_population!r} is not an even integer in 2..{MAX_POPULATION}"
            )
        self.max_pairs = max_population // 2
        self.max_fan = max_width + 1
        self.nkb_max = -(-self.max_fan // lanes)
        self.z_depth, self.z_addr_bits = z_layout(lanes, max_width)
        self.g_bits = bits_for(g_bound(max_population))
        self.z_bits = bits_for(z_bound(max_population, rank, mode))
        gmax = g_bound(max_population)
        if mode == "lowrank":
            self.coef_bits = bits_for(2 * gmax)
            self.acc_bits = bits_for(4 * rank * gmax)
        else:
            self.coef_bits = 3
            self.acc_bits = bits_for(4 * rank)
        super().__init__(
            {
                "start": In(1),
                "population": In(range(max_population + 1)),
                "out": In(range(max_width + 1)),
                "fan": In(range(max_width + 2)),
                "seed": In(32),
                "step": In(16),
                "layer": In(3),
                "sigma_shift": In(4),
                "busy": Out(1),
                "done": Out(1),
                "error": Out(1),
                "g_addr": Out(range(max(self.max_pairs, 2))),
                "g_data": In(signed(self.g_bits)),
                "z_addr": In(self.z_addr_bits),
                "z_data": Out(data.ArrayLayout(signed(self.z_bits), lanes)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        r, lanes = self.rank, self.lanes
        m.submodules.keyer = keyer = StreamKeyer()
        m.submodules.core_a = core_a = PentaryStreamCore(digits=self.digits, digits_per_beat=r)
        m.submodules.core_b = core_b = PentaryStreamCore(digits=self.digits, digits_per_beat=r)

        # ---- memories: B rows (one small memory per lane) and Z. Both never read a word
        # in the cycle it is written (NO_RW_CHECK, watched by the tests with every read
        # counted as used): a B memory is read in one buffer while the other is filled,
        # and a Z word is read again only after its write (stage 4, below).
        self.rw_watch = []
        b_depth = max(self.nkb_max, 2)
        b_mem, b_rd, b_wr = [], [], []
        for i in range(lanes):
            # two buffers (the address's top bit): the pair being computed and the next
            # one, being filled
            mem = memory.Memory(
                shape=3 * r, depth=2 << ceil_log2(b_depth), init=[], attrs=NO_RW_CHECK
            )
            m.submodules[f"b_mem{i}"] = mem
            b_mem.append(mem)
            b_rd.append(mem.read_port())
            b_wr.append(mem.write_port())
            self.rw_watch.append(RWWatch(f"b_mem{i}", b_rd[i], b_wr[i], 1))
        zshape = data.ArrayLayout(signed(self.z_bits), lanes)
        # Z reads through the block RAMs' output registers (RegisteredRAM: DP16KD with
        # OUTREG on the ECP5) and then a fabric register (z_q), read latency 3 with the
        # address at stage 1: a block RAM's unregistered output (about 5 ns from the
        # clock) into the fabric register had 127 of the 128-lane ULX3S build's 229
        # endpoints past 10 ns at acf8080 and about 300 of 477 at a321e40 (seed 1, 12.08
        # ns); the output registers without the fabric register put the adders between
        # them and the block RAMs' write data (700b5c1, reverted: 366 endpoints, 13.68 ns)
        # The read address reaches the block RAMs from registers beside them (addr_reg:
        # a copy per 8 blocks), loaded a cycle before the read: the state's choice
        # between the stage 1 address and the port's (Mux(busy, ...)) into the address
        # pins of its DP16KD (39 at 33 lanes) across the die was the critical path of two
        # of the three 128-lane ULX3S builds at bd77a19 (seeds 1 and 3: 10.28 and 10.42
        # ns, about 9.4 of it routing). The port's read latency is 4.
        m.submodules.z_mem = z_mem = RegisteredRAM(zshape.size, max(self.z_depth, 2), addr_reg=True)
        m.d.comb += z_mem.r_en.eq(1)
        z_rd = SimpleNamespace(addr=z_mem.r_addr_q)
        z_wr = SimpleNamespace(addr=z_mem.w_addr, data=z_mem.w_data, en=z_mem.w_en)
        self.rw_watch.append(RWWatch("z_mem", z_rd, z_wr, 1))
        z_q = Signal(zshape.size, reset_less=True)
        m.d.sync += z_q.eq(z_mem.r_data)

        busy = Signal()
        m.d.comb += self.busy.eq(busy)
        pairs = Signal(range(self.max_pairs + 1))
        m.d.comb += pairs.eq(self.population >> 1)
        j = Signal(range(max(self.max_pairs, 2)))  # the pair being computed
        jn = Signal(range(max(self.max_pairs, 2)))  # the pair being prefetched
        m.d.comb += self.g_addr.eq(jn)
        g = Signal(signed(self.g_bits))
        g_next = Signal(signed(self.g_bits))
        # g's multiples by the digits -2, -1 and 2, registers loaded with g (the
        # coefficient is then a select: the negation's carry chain after the A digit's
        # select reached stage 1's coefficient register, 3 of the 128-lane ULX3S build's
        # 80 endpoints past 10 ns at 5e791fe, seed 1, 10.21 ns)
        g_times = {
            d: Signal(signed(self.coef_bits), name=f"g_times{'m' if d < 0 else ''}{abs(d)}")
            for d in ((-2, -1, 2) if self.mode == "lowrank" else ())
        }
        reseed = Signal()
        wbuf = Signal()  # the B buffer being filled; the other one is read
        a_x0 = Signal(32)  # the next pair's A key, held until core_a is free
        load_a = Signal()  # core_a restarts on a_x0
        a_loaded = Signal()  # ... done for the next pair's computation
        a_done = Signal()  # the pair being computed has taken its last row of A

        # ---- keyer: per pair, B then A
        req_taken = Signal()
        key_ab = Signal()  # 1: B (the request of the PF_KEY_B state)
        in_key = Signal()
        m.d.comb += [
            keyer.seed.eq(self.seed),
            keyer.cancel.eq(0),
            keyer.k.valid.eq(in_key & ~req_taken),
            keyer.k.payload.ab.eq(key_ab),
            keyer.k.payload.layer.eq(self.layer),
            keyer.k.payload.pair.eq(jn),
            keyer.k.payload.step.eq(self.step),
            keyer.k.payload.reseed.eq(reseed),
            keyer.x0.ready.eq(in_key),
            core_b.x0.payload.eq(keyer.x0.payload),
            core_a.x0.payload.eq(a_x0),
            core_b.x0.valid.eq(in_key & key_ab & keyer.x0.valid),
            core_a.x0.valid.eq(load_a),
        ]
        with m.If(keyer.k.valid & keyer.k.ready):
            m.d.sync += [req_taken.eq(1), reseed.eq(0)]
        answered = in_key & keyer.x0.valid

        # ---- B fill: fan rows from core_b into the lane memories
        fill_on = Signal()
        fill_k = Signal(range(self.max_fan + 1))
        fill_lane = Signal(range(max(lanes, 2)))
        fill_addr = Signal(range(b_depth))
        take_b = fill_on & core_b.o.valid
        m.d.comb += core_b.o.ready.eq(fill_on)
        for i in range(lanes):
            m.d.comb += [
                b_wr[i].addr.eq(Cat(fill_addr, wbuf)),
                b_wr[i].data.eq(core_b.o.payload.as_value()),
                b_wr[i].en.eq(take_b & (fill_lane == i)),
            ]
        with m.If(take_b):
            m.d.sync += fill_k.eq(fill_k + 1)
            with m.If(fill_lane == lanes - 1):
                m.d.sync += [fill_lane.eq(0), fill_addr.eq(fill_addr + 1)]
            with m.Else():
                m.d.sync += fill_lane.eq(fill_lane + 1)
            with m.If(fill_k + 1 == self.fan):
                m.d.sync += fill_on.eq(0)

        # ---- issue stage: one (o, kb, c) per cycle
        o = Signal(range(self.max_width + 1))
        kcol = Signal(range(self.max_fan + lanes + 1))  # kb * lanes
        kb = Signal(range(b_depth))
        c = Signal(range(r + 1))
        zaddr = Signal(self.z_addr_bits)
        need_a = Signal()
        a_row = Signal(3 * r)  # the row of A, rotated so that digit c is at the bottom
        a_now = Mux(need_a, core_a.o.payload.as_value(), a_row)
        a_dig = a_now[0:3]
        computing = Signal()
        issue = computing & (~need_a | core_a.o.valid)
        m.d.comb += core_a.o.ready.eq(computing & need_a)
        # "last" flags as flip-flops, set as the counters move (short enable paths)
        last_c = Signal()  # c == r - 1
        last_kb = Signal()  # kcol + lanes >= fan
        last_o = Signal()  # o == out - 1
        last_issue = issue & last_c & last_kb & last_o
        for i in range(lanes):
            m.d.comb += [b_rd[i].addr.eq(Cat(kb, ~wbuf)), b_rd[i].en.eq(1)]

        # stage 1: B digits, products, lane accumulators
        s1_valid = Signal()
        s1_coef = Signal(signed(self.coef_bits))
        s1_c = Signal(range(r))
        s1_first = Signal()
        s1_last = Signal()
        s1_zaddr = Signal(self.z_addr_bits)
        s1_fresh = Signal()  # the first pair: Z is written, not accumulated
        # quantized mode multiplies by g after the accumulation: g travels with the
        # pipeline (the next pair's g is taken while this pair's last group drains)
        s1_g = Signal(signed(self.g_bits))
        s1b_g = Signal(signed(self.g_bits))
        # the coefficient and its negation (selects, no adder), so that stage 1b's
        # product of it with a B digit is a choice among registers: the product's
        # negation, a carry chain before the accumulator's adder, put the accumulators
        # among the 128-lane ULX3S build's slowest endpoints at 44e9bb5 (121 to 212 past
        # 8 ns, up to 9.79 ns, at each of three seeds)
        s1_ncoef = Signal(signed(self.coef_bits))
        if self.mode == "lowrank":  # times_digit(g, a_dig), from g's multiples
            d = digit_ctrl(a_dig)
            pos = (g_times[-2], g_times[-1], g_times[2], g)  # -2g, -g, 2g, g
            neg = (g_times[2], g, g_times[-2], g_times[-1])  # their negations
            coef, ncoef = (
                Mux(d["nz"], Mux(d["neg"], Mux(d["is2"], v[0], v[1]), Mux(d["is2"], v[2], v[3])), 0)
                for v in (pos, neg)
            )
        else:
            coef = a_dig.as_signed()
            ncoef = -coef  # -2..2: three bits
        m.d.sync += [
            s1_valid.eq(issue),
            s1_coef.eq(coef),
            s1_ncoef.eq(ncoef),
            s1_c.eq(c),
            s1_first.eq(c == 0),
            s1_last.eq(last_c),
            s1_zaddr.eq(zaddr),
            s1_fresh.eq(j == 0),
            s1_g.eq(g),
        ]
        with m.If(issue):
            m.d.sync += [a_row.eq(Cat(a_now[3:], a_now[:3])), need_a.eq(0)]
            with m.If(last_c):
                m.d.sync += [c.eq(0), zaddr.eq(zaddr + 1), last_c.eq(r == 1)]
                with m.If(last_kb):
                    m.d.sync += [
                        kb.eq(0),
                        kcol.eq(0),
                        o.eq(o + 1),
                        need_a.eq(1),
                        last_kb.eq(lanes >= self.fan),
                        last_o.eq(o + 2 == self.out),
                    ]
                with m.Else():
                    m.d.sync += [
                        kb.eq(kb + 1),
                        kcol.eq(kcol + lanes),
                        last_kb.eq(kcol + 2 * lanes >= self.fan),
                    ]
            with m.Else():
                m.d.sync += [c.eq(c + 1), last_c.eq(c + 2 == r)]

        # stage 1 selects digit c of each lane's B row (read at issue) into a register;
        # stage 1b adds the coefficient times it to the lane's accumulator
        s1b_valid = Signal()
        s1b_last = Signal()
        s1b_zaddr = Signal(self.z_addr_bits)
        s1b_fresh = Signal()
        # the lanes' data registers take no reset (written before read; acc restarts at
        # the first term): the reset net reaches only control state
        s1b_dig = [Signal(3, name=f"s1b_dig{i}", reset_less=True) for i in range(lanes)]
        m.d.sync += [
            s1b_valid.eq(s1_valid),
            s1b_last.eq(s1_last),
            s1b_zaddr.eq(s1_zaddr),
            s1b_fresh.eq(s1_fresh),
            s1b_g.eq(s1_g),
        ]
        for i in range(lanes):
            row = b_rd[i].data
            m.d.sync += s1b_dig[i].eq(row.word_select(s1_c, 3) if r > 1 else row)
        # what every lane uses of stage 1b (its valid, first and coefficient) and of stage
        # 3 (fresh) comes from copies of the registers, one per COPY_LANES lanes, so no
        # register drives all the lanes, whose accumulators and Z block RAMs spread
        # along the chip (the 128-lane accelerator at e4e6c56: 294 accumulator and 321
        # Z write endpoints over 9.5 ns after routing, s1b_valid 464 loads, s3_fresh 693)
        # (only a valid bit needs a reset: the others are read only with one)
        v_c = lane_copies(m, "s1b_valid", s1_valid, lanes, reset_less=False)
        first_c = lane_copies(m, "s1b_first", s1_first, lanes)
        coef_c = lane_copies(m, "s1b_coef", s1_coef, lanes)
        ncoef_c = lane_copies(m, "s1b_ncoef", s1_ncoef, lanes)
        acc = [Signal(signed(self.acc_bits), name=f"acc{i}", reset_less=True) for i in range(lanes)]
        for i in range(lanes):
            with m.If(v_c[i]):
                # times_digit(coef, digit) as a choice of 0, +-coef, +-2 coef
                dc = digit_ctrl(s1b_dig[i])
                mult = Mux(dc["neg"], ncoef_c[i], coef_c[i])
                prod = Mux(dc["nz"], Mux(dc["is2"], mult << 1, mult), 0)
                m.d.sync += acc[i].eq(Mux(first_c[i], 0, acc[i]) + prod)

        # stage 2: the group's sums (acc) -> contributions; Z read
        s2_valid = Signal()
        s2_zaddr = Signal(self.z_addr_bits)
        s2_fresh = Signal()
        s2_g = Signal(signed(self.g_bits))
        m.d.sync += [
            s2_valid.eq(s1b_valid & s1b_last),
            s2_zaddr.eq(s1b_zaddr),
            s2_fresh.eq(s1b_fresh),
            s2_g.eq(s1b_g),
        ]
        s3_valid = Signal()
        s3_zaddr = Signal(self.z_addr_bits)
        s3_add = [
            Signal(signed(self.z_bits), name=f"s3_add{i}", reset_less=True) for i in range(lanes)
        ]
        m.d.sync += [s3_valid.eq(s2_valid), s3_zaddr.eq(s2_zaddr)]
        fresh_c = lane_copies(m, "s3_fresh", s2_fresh, lanes)
        for i in range(lanes):
            if self.mode == "lowrank":
                contrib = acc[i]
            else:
                pq = PentaryQuantizer(
                    self.acc_bits, shift_offset=rank_shift(r), max_shift=SIGMA_SHIFT_MAX
                )
                m.submodules[f"pquant{i}"] = pq
                m.d.comb += [pq.x.eq(acc[i]), pq.shift.eq(self.sigma_shift)]
                contrib = times_digit(s2_g, pq.q)
            m.d.sync += s3_add[i].eq(contrib)
        # The Z word is read at stage 1 (its address with the group's terms) and comes out
        # of z_q at stage 3, for the add (the block RAM's output straight
        # into the adder and the write port was the 64-lane ECP5 synthesis's critical
        # path at 928b7e3: 13.11 ns, 7.59 of it the RAMs' own delays). A word's next read
        # samples the RAM after its write (stage 4, four cycles after its read): the
        # words of a pair are distinct, and two pairs' issues are max(T + 2, X + 32)
        # cycles apart (vote_cycles), with WAIT and BEGIN between them.
        # The sum goes through a register (stage 4) before the block RAMs' write port:
        # from the fresh flag's copies through the adders into the block RAMs' write data
        # was the critical path of the 128-lane ULX3S build at b56882b (seed 1, 11.23 ns,
        # 8.72 of it routing; 38 of its 109 endpoints past 10 ns)
        s3_old = zshape(z_q)  # the word read at stage 1, in stage 3
        z_new = Signal(zshape)
        for i in range(lanes):
            m.d.comb += z_new[i].eq(Mux(fresh_c[i], 0, s3_old[i]) + s3_add[i])
        s4_valid = Signal()
        s4_zaddr = Signal(self.z_addr_bits)
        s4_data = Signal(zshape.size, reset_less=True)
        m.d.sync += [s4_valid.eq(s3_valid), s4_zaddr.eq(s3_zaddr), s4_data.eq(z_new)]
        m.d.comb += [
            # in stage 1 the blocks read the address the issue stage had (s1_zaddr)
            z_mem.r_addr.eq(Mux(busy, zaddr, self.z_addr)),
            self.z_data.eq(z_q),
            # stage 4: write back
            z_wr.addr.eq(s4_zaddr),
            z_wr.en.eq(s4_valid),
            z_wr.data.eq(s4_data),
        ]

        # ---- control
        bad = Signal()
        m.d.comb += bad.eq(
            self.population[0]
            | (self.population < 2)
            | (self.population > self.max_population)
            | (self.out == 0)
            | (self.out > self.max_width)
            | (self.fan == 0)
            | (self.fan > self.max_fan)
            | (self.step > MAX_STEP)
            | ((self.sigma_shift > SIGMA_SHIFT_MAX) if self.mode == "quantized" else Const(0))
        )
        # The noise of pair j + 1 (keys, B rows into the other buffer, the A key held) is
        # fetched while pair j is computed: the prefetch engine (PF_*) runs beside the
        # main FSM, which starts a pair's computation when both are ready.
        pf_go = Signal()  # strobe: prefetch pair jn
        pf_done = Signal()
        with m.FSM(name="prefetch"):
            with m.State("PF_IDLE"):
                with m.If(pf_go):
                    m.next = "PF_KEY_B"
            with m.State("PF_KEY_B"):
                m.d.comb += [in_key.eq(1), key_ab.eq(1)]
                with m.If(answered):
                    m.d.sync += [
                        req_taken.eq(0),
                        fill_on.eq(1),
                        fill_k.eq(0),
                        fill_lane.eq(0),
                        fill_addr.eq(0),
                    ]
                    m.next = "PF_KEY_A"
            with m.State("PF_KEY_A"):
                m.d.comb += [in_key.eq(1), key_ab.eq(0)]
                with m.If(answered):
                    m.d.sync += [req_taken.eq(0), a_x0.eq(keyer.x0.payload)]
                    m.next = "PF_FILL"
            with m.State("PF_FILL"):
                with m.If(~fill_on):
                    m.d.sync += g_next.eq(self.g_data)  # g_addr = jn for 30+ cycles
                    m.next = "PF_DONE"
            with m.State("PF_DONE"):
                m.d.comb += pf_done.eq(1)
                with m.If(pf_go):
                    m.next = "PF_KEY_B"
                with m.Elif(~busy):
                    m.next = "PF_IDLE"

        with m.If(load_a):
            m.d.sync += a_loaded.eq(1)
        with m.If(issue & need_a & last_o):
            m.d.sync += a_done.eq(1)
        # the pipeline empty, a flag a cycle behind its stages' valid flags: FINISH follows
        # the last issue (computing still high in that cycle, so the flag is low as FINISH
        # begins) and nothing enters the pipeline in FINISH. The valid flags through the
        # state into busy were the 128-lane ULX3S build's critical path at e059f3a (seed
        # 2, 10.09 ns, 8.62 of it routing); FINISH takes a cycle more.
        drained = Signal()
        m.d.sync += drained.eq(
            ~computing & ~s1_valid & ~s1b_valid & ~s2_valid & ~s3_valid & ~s4_valid
        )
        # the range checks through a register: the run's inputs are steady from its start
        # strobe on (the layer's widths are loaded a cycle before it), so CHECK, the
        # cycle after the strobe, decides from the register. The checks, the start and
        # the prefetch's first go in one cycle were 4 of the 128-lane ULX3S build's 13
        # endpoints past 10 ns at 5b051d8 (seed 1, 10.39 ns, 8.19 of it routing).
        bad_r = Signal()
        m.d.sync += bad_r.eq(bad)
        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += busy.eq(1)
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.sync += self.error.eq(bad_r)
                with m.If(bad_r):
                    m.d.sync += busy.eq(0)
                    m.next = "REFUSED"
                with m.Else():
                    m.d.sync += [j.eq(0), jn.eq(0), reseed.eq(1)]
                    m.d.comb += pf_go.eq(1)
                    m.next = "WAIT"
            with m.State("REFUSED"):
                m.d.comb += self.done.eq(1)
                m.next = "IDLE"
            with m.State("WAIT"):  # pair j's noise is being fetched
                with m.If(pf_done):
                    # B is read from the buffer just filled; the prefetch moves on to
                    # pair j + 1 into the other one
                    m.d.sync += [g.eq(g_next), wbuf.eq(~wbuf)]
                    if g_times:
                        m.d.sync += [
                            g_times[-2].eq(-(g_next << 1)),
                            g_times[-1].eq(-g_next),
                            g_times[2].eq(g_next << 1),
                        ]
                    with m.If(jn + 1 != pairs):
                        m.d.comb += pf_go.eq(1)
                        m.d.sync += jn.eq(jn + 1)
                    m.next = "BEGIN"
            with m.State("BEGIN"):
                m.d.sync += [
                    a_loaded.eq(0),
                    a_done.eq(0),
                    computing.eq(1),
                    need_a.eq(1),
                    o.eq(0),
                    kb.eq(0),
                    kcol.eq(0),
                    c.eq(0),
                    zaddr.eq(0),
                    last_c.eq(r == 1),
                    last_kb.eq(lanes >= self.fan),
                    last_o.eq(self.out == 1),
                ]
                m.next = "COMPUTE"
            with m.State("COMPUTE"):
                with m.If(last_issue):
                    m.d.sync += computing.eq(0)
                    with m.If(j + 1 == pairs):
                        m.next = "FINISH"
                    with m.Else():
                        m.d.sync += j.eq(j + 1)
                        m.next = "WAIT"
            with m.State("FINISH"):
                with m.If(drained):
                    m.d.sync += busy.eq(0)
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
        # core_a restarts on the next pair's key as soon as the key is fetched and the
        # pair being computed has taken its last row of A (so that the next pair's first
        # row is ready when its computation begins), or in WAIT if later
        m.d.comb += load_a.eq(
            pf_done
            & ~a_loaded
            & (fsm.ongoing("WAIT") | (fsm.ongoing("COMPUTE") & a_done & (jn != j)))
        )
        return m
