"""Shaper: the pair weights ``g`` (spec 7.2) and the threshold ``theta`` (spec 8.2).

The first half of the FitnessAggregator. It reads the ``N`` member scores from an
external score memory, writes ``g_j`` (one per pair) into the g memory, and computes
``sum_j g_j^2``, ``isqrt`` of it and ``theta = (tau * isqrt(sum g^2)) >> 4``.

Rank shaping without sorting. With ``less_m`` the number of scores below ``s_m`` and
``equal_m`` the number equal to it (``m`` included), the centered rank of spec 7.2 is
``c_m = 2*less_m + equal_m - N``, so for the pair ``(a, b) = (s_2j, s_2j+1)``

    g_j = sum_x d(x),   d(x) = 2*([x < a] - [x < b]) + ([x == a] - [x == b])

over all ``N`` scores ``x``. Every ``d(x)`` has the sign of ``a - b`` (for ``a > b`` it is
1 at ``x == b`` and ``x == a``, 2 between them, else 0), so the hardware counts the
magnitude ``M = |g_j|`` with ``e = |d(x)|`` in {0, 1, 2} and keeps ``Q = M^2`` up to
date without a multiplier: ``(M + e)^2 - M^2`` is ``2M + 1`` for ``e = 1`` and
``4(M + 1)`` for ``e = 2``, both plain wiring of ``M`` and of ``M + 1`` (kept in a
register of its own), so ``Q`` takes one addition per score. The sign of ``g_j`` comes
from comparing ``b`` with ``a`` as ``b`` is loaded (the same comparators).

A *sweep* holds ``pivots`` pairs (their ``2*pivots`` scores loaded as pivots) and streams
all ``N`` scores past them, one per cycle; sweeps follow each other without a gap (the
next sweep's pivots are read right after the last score of this one). Sign shaping reads
the pivots only: ``g_j = sign(a - b)``, ``g_j^2 = |g_j|``. A read's score goes through
four registered stages: the score; its comparisons with every pivot (``<``, ``==``; for
scores wider than 16 bits, of each half, combined in the next stage); per
pair, ``|d|`` and the ``Q`` step (from the next ``M``, so that ``Q``'s adder starts at
flip-flops); ``M``, ``M + 1`` and ``Q``. In the last sweep, pairs at or beyond
``N / 2`` (when ``pivots`` does not divide ``N / 2``) read scores past ``N`` (addresses
wrap at ``max_population``); their counters may wrap, and they are neither written nor
summed.

At the end of a sweep its ``g`` values go out one per cycle on the g memory's write port
(negated for ``a < b``) while the next sweep runs, and their squares are added to
``sum_g2``. Then :class:`~pentegg.rtl.update.isqrt.Isqrt` takes ``k + 1`` cycles and a
shift-add multiply 12 (one per bit of ``tau``, LSB first, a ``k + 1``-bit adder), no
multiplier or DSP anywhere.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int
from .isqrt import Isqrt

__all__ = ["POPULATION_BITS", "TAU_BITS", "Shaper", "sum_g2_bound"]

#: Width of the run-time ``population`` input (spec 9.1: up to 4096; wider values are
#: representable so that an out-of-range one is an error, not a truncation).
POPULATION_BITS = 13
TAU_BITS = 12
#: Scores wider than this are compared in two registered halves (fmax).
SPLIT_COMPARE_BITS = 16
#: Fixed cycles of a run beside the reads (see :meth:`Shaper.cycles`).
_OVERHEAD = 9


def sum_g2_bound(n: int) -> int:
    """The largest ``sum_j g_j^2`` of rank shaping at population ``n``:
    ``2n(n^2 - 1)/3``, reached without ties by pairing the highest rank with the lowest,
    the second with the second lowest, ... (``g = 2(n-1), 2(n-3), ..., 2``). Ties average
    ranks, which cannot raise it (the maximum over pairings is convex in ``c`` and
    invariant under permuting it). Sign shaping gives at most ``n / 2``."""
    return 2 * n * (n * n - 1) // 3


class Shaper(wiring.Component):
    """Pair weights ``g`` and the threshold ``theta`` from the members' scores.

    Parameters
    ----------
    max_population : int
        Even, 2..4096: the largest run-time ``population``.
    score_bits : int
        8..32: signed width of one member score (a classification score lies in
        ``[-254*batch, margin*batch]``, a control task's return is a non-negative integer).
    mem_latency : int
        1..4: cycles from ``s_addr`` to its ``s_data`` (1: ``lib.memory`` synchronous
        read port).
    pivots : int
        1..16 and at most ``max_population / 2``: pairs per sweep. Each pivot pair costs
        two ``score_bits`` comparators (``<`` and ``==`` against each score), two pivot
        registers, ``M`` and ``M + 1`` counters, a ``Q`` step register and accumulator
        and its share of the write-out shift register; rank shaping takes about
        ``N^2 / (2 * pivots)`` cycles.

    Widths (``Nmax = max_population``)
    ----------------------------------
    * ``g_bits = bits_for(-2(Nmax-1), 2(Nmax-1))`` (``|g| <= 2(N-1)`` under rank shaping);
    * ``sum_g2``: unsigned, the width of ``2 Nmax (Nmax^2 - 1) / 3``
      (:func:`sum_g2_bound`; 36 bits for 4096);
    * ``isqrt``: ``k = ceil(sum_bits / 2)`` bits; ``theta``: ``k + 12 - 4`` bits;
    * per pivot pair: ``M`` (the width of ``2(Nmax-1)``), ``M + 1`` (one bit more) and
      ``Q`` (the width of ``4(Nmax-1)^2``), unsigned.

    Interface attributes
    --------------------
    population : In(13)
        ``N``; valid when even and in ``2..max_population``, otherwise the run sets
        ``error``, writes nothing and ends (``done``) two cycles after ``start``.
    shaping : In(1)
        0 rank, 1 sign.
    tau : In(12)
        The threshold scale (Q4), 0..4095.
    start : In(1)
        Strobe: begin a run (ignored while ``busy``). ``population``, ``shaping`` and
        ``tau`` must stay unchanged until ``done``.
    busy : Out(1)
        High from the cycle after ``start`` to the cycle before ``done``.
    done : Out(1)
        Strobe, one cycle, at the end of a run.
    error : Out(1)
        Set at ``done`` if ``population`` was out of range; cleared by the next ``start``.
    theta : Out(k + 8)
        ``(tau * isqrt(sum_g2)) >> 4``, valid from ``done`` until the next ``start``
        (0 after an error).
    sum_g2 : Out(sum_bits)
        ``sum_j g_j^2``, valid like ``theta``.
    s_addr : Out(range(max_population)), s_en : Out(1), s_data : In(signed(score_bits))
        The score memory's read port: ``s_data`` is the score of member ``s_addr`` read
        ``mem_latency`` cycles after a cycle with ``s_en`` high.
    g_addr : Out(range(max(max_population // 2, 2))), g_data : Out(signed(g_bits)), g_en : Out(1)
        The g memory's write port: ``g_j`` of pair ``g_addr`` when ``g_en``. Each pair is
        written once per run, in ascending order.

    Latency and throughput (``N`` = population, ``p`` = pivots, ``L`` = mem_latency,
    ``S = ceil(N / (2p))`` sweeps, ``k`` isqrt bits): the scores are read in
    ``S * (2p + N)`` cycles (rank) or ``S * 2p`` (sign), one per cycle without a gap,
    from the second cycle after ``start``; ``done`` follows the last read after ``L`` (the
    memory), 4 (score register, compare, ``|d|`` and step, ``M``/``Q`` update), ``p + 1``
    (g write-out), 1 (end of the sweeps seen), ``k + 1`` (isqrt) and 12 (``tau * root``)
    cycles::

        rank:  done - start = S * (2p + N) + L + p + k + 21
        sign:  done - start = S * 2p       + L + p + k + 21

    (For ``p = 1``: ``N^2/2 + N`` reads in rank shaping, ``N`` in sign shaping.) One run
    at a time: ``start`` is taken again from the ``done`` cycle on.
    """

    def __init__(
        self,
        *,
        max_population: int = 256,
        score_bits: int = 16,
        mem_latency: int = 1,
        pivots: int = 1,
    ):
        self.max_population = check_int("max_population", max_population, 2, 4096)
        if max_population % 2:
            raise ValueError(f"max_population={max_population!r} is not an even integer in 2..4096")
        self.score_bits = check_int("score_bits", score_bits, 8, 32)
        self.mem_latency = check_int("mem_latency", mem_latency, 1, 4)
        self.pivots = check_int("pivots", pivots, 1, min(16, max_population // 2))
        nmax = max_population
        self.max_pairs = nmax // 2
        self.g_max = 2 * (nmax - 1)
        self.g_bits = self.g_max.bit_length() + 1
        self.m_bits = self.g_max.bit_length()
        self.q_bits = (self.g_max * self.g_max).bit_length()
        self.sum_bits = sum_g2_bound(nmax).bit_length()
        self.root_bits = (self.sum_bits + 1) // 2
        self.theta_bits = self.root_bits + TAU_BITS - 4
        super().__init__(
            {
                "population": In(POPULATION_BITS),
                "shaping": In(1),
                "tau": In(TAU_BITS),
                "start": In(1),
                "busy": Out(1),
                "done": Out(1),
                "error": Out(1),
                "theta": Out(self.theta_bits),
                "sum_g2": Out(self.sum_bits),
                "s_addr": Out(range(nmax)),
                "s_en": Out(1),
                "s_data": In(signed(self.score_bits)),
                "g_addr": Out(range(max(self.max_pairs, 2))),  # at least one bit
                "g_data": Out(signed(self.g_bits)),
                "g_en": Out(1),
            }
        )

    def cycles(self, n: int, shaping: str = "rank") -> int:
        """``done`` cycle minus ``start`` cycle of a run at population ``n``."""
        p = self.pivots
        sweeps = -(-n // (2 * p))
        reads = sweeps * (2 * p + (n if shaping == "rank" else 0))
        return reads + self.mem_latency + p + self.root_bits + TAU_BITS + _OVERHEAD

    def elaborate(self, platform):
        m = Module()
        p, lat, sb = self.pivots, self.mem_latency, self.score_bits
        nmax = self.max_population
        P2 = 2 * p
        m.submodules.isqrt = isq = Isqrt(self.sum_bits)

        n = self.population
        rank = ~self.shaping
        pairs = n[1:]  # N / 2
        # population is stable while busy: everything derived from it is registered
        n_ok = Signal()
        m.d.sync += n_ok.eq(~n[0] & (n >= 2) & (n <= nmax))
        n_m2 = Signal(signed(POPULATION_BITS + 1))  # N - 2, loaded at the run's start

        # ---- issue side: the read addresses, in sweeps ------------------------------
        busy = Signal()
        issuing = Signal()
        in_stream = Signal()  # 0: pivot reads, 1: the stream (rank only)
        # the pivot read address, 2 * (first pair of the sweep) + piv_i, as a counter (no
        # adder between flip-flops and s_addr: the score memory's address multiplexer
        # follows; it had 6 of the 128-lane ULX3S build's 109 endpoints past 10 ns at
        # b56882b, seed 1, 10.48 ns)
        pa = Signal(range(2 * (self.max_pairs + p) + P2))
        # Down counters whose sign bit is the end condition (no comparator on the path):
        # more = (pairs from the sweep's first on) - p - 1 (the sweep is the last when negative);
        # k_left = N - 2 - (stream reads done), negative at the last stream read.
        more = Signal(signed(POPULATION_BITS + 1))
        k_left = Signal(signed(POPULATION_BITS + 1))
        piv_i = Signal(range(P2))
        k = Signal(range(nmax + 1))  # stream address
        last_pair = more[-1]
        piv_end = piv_i == P2 - 1
        stream_end = k_left[-1]
        # the tag of this cycle's read (fin: the last read of a sweep)
        t_piv = Signal()
        t_str = Signal()
        t_fin = Signal()
        t_idx = Signal(range(P2))
        m.d.comb += [
            t_piv.eq(issuing & ~in_stream),
            t_str.eq(issuing & in_stream),
            t_idx.eq(piv_i),
            t_fin.eq(issuing & Mux(in_stream, stream_end, piv_end & ~rank)),
            self.s_en.eq(issuing),
            self.s_addr.eq(Mux(in_stream, k, pa)),
        ]
        with m.If(issuing):
            with m.If(~in_stream):
                m.d.sync += [piv_i.eq(Mux(piv_end, 0, piv_i + 1)), pa.eq(pa + 1)]
                with m.If(piv_end):
                    with m.If(rank):  # the sweep's stream, then its pivots' address again
                        m.d.sync += [in_stream.eq(1), k.eq(0), k_left.eq(n_m2)]
                        m.d.sync += pa.eq(pa - (P2 - 1))
                    with m.Else():  # the next sweep's first pivot: pa + 1
                        m.d.sync += more.eq(more - p)
                        with m.If(last_pair):
                            m.d.sync += issuing.eq(0)
            with m.Else():
                m.d.sync += [k.eq(k + 1), k_left.eq(k_left - 1)]
                with m.If(stream_end):
                    m.d.sync += [in_stream.eq(0), pa.eq(pa + P2), more.eq(more - p)]
                    with m.If(last_pair):
                        m.d.sync += issuing.eq(0)

        # ---- the tags follow the reads through the memory's latency ------------------
        def tag(name):
            return {
                "piv": Signal(name=f"{name}_piv"),
                "str": Signal(name=f"{name}_str"),
                "fin": Signal(name=f"{name}_fin"),
                "idx": Signal(range(P2), name=f"{name}_idx"),
            }

        prev = {"piv": t_piv, "str": t_str, "fin": t_fin, "idx": t_idx}
        delayed = []
        for j in range(lat):
            cur = tag(f"d{j}")
            m.d.sync += [cur[f].eq(prev[f]) for f in cur]
            delayed.append(cur)
            prev = cur
        # stage 1: the score arrives (s_data with tag `prev`) and is registered
        t1 = tag("s1")
        x1 = Signal(signed(sb))
        m.d.sync += [t1[f].eq(prev[f]) for f in t1]
        m.d.sync += x1.eq(self.s_data)
        # stage 2: compared with every pivot; pivots are loaded here
        piv = [Signal(signed(sb), name=f"piv{i}") for i in range(P2)]
        for i in range(P2):
            with m.If(t1["piv"] & (t1["idx"] == i)):
                m.d.sync += piv[i].eq(x1)
        t2 = tag("s2")
        m.d.sync += [t2[f].eq(t1[f]) for f in t2]
        if sb <= SPLIT_COMPARE_BITS:
            lt = Signal(P2)  # x < pivot i
            eq = Signal(P2)  # x == pivot i
            m.d.sync += [
                lt.eq(Cat(x1 < piv[i] for i in range(P2))),
                eq.eq(Cat(x1 == piv[i] for i in range(P2))),
            ]
        else:  # wide scores: each half compared, the halves combined in stage 3
            h = sb // 2
            lt_hi, eq_hi, lt_lo, eq_lo = (
                Signal(P2, name=n) for n in ("lt_hi", "eq_hi", "lt_lo", "eq_lo")
            )
            m.d.sync += [
                lt_hi.eq(Cat(x1[h:].as_signed() < piv[i][h:].as_signed() for i in range(P2))),
                eq_hi.eq(Cat(x1[h:] == piv[i][h:] for i in range(P2))),
                lt_lo.eq(Cat(x1[:h] < piv[i][:h] for i in range(P2))),
                eq_lo.eq(Cat(x1[:h] == piv[i][:h] for i in range(P2))),
            ]
            lt = lt_hi | (eq_hi & lt_lo)
            eq = eq_hi & eq_lo
        # stage 3: |d(x)| of each pair for a stream score: `two` strictly between a and
        # b, `one` equal to one of them (a != b); the sign of each pair as its b passes
        t3 = tag("s3")
        m.d.sync += [t3[f].eq(t2[f]) for f in t3]
        two = Signal(p)
        one = Signal(p)
        neg = [Signal(name=f"neg{j}") for j in range(p)]  # a < b
        ne = [Signal(name=f"ne{j}") for j in range(p)]  # a != b
        # stage 4: M, M + 1 and Q = M^2 per pair. (M + e)^2 - M^2 is 2M + 1 (e = 1) or
        # 4(M + 1) (e = 2), wiring of M and M + 1; this `step` is registered in stage 3
        # from the next M (so that Q's adder starts at flip-flops).
        mag = [Signal(self.m_bits, name=f"m{j}") for j in range(p)]
        mag1 = [Signal(self.m_bits + 1, name=f"m1_{j}") for j in range(p)]  # M + 1
        step = [Signal(self.m_bits + 3, name=f"step{j}") for j in range(p)]
        sq = [Signal(self.q_bits, name=f"q{j}") for j in range(p)]
        clear = t3["piv"] & (t3["idx"] == 0)  # a sweep's first pivot: M, Q start at 0
        for j in range(p):
            la, lb, ea, eb = lt[2 * j], lt[2 * j + 1], eq[2 * j], eq[2 * j + 1]
            two_n = t2["str"] & (la ^ lb) & ~ea & ~eb
            one_n = t2["str"] & (ea ^ eb)
            mm, m1 = mag[j], mag1[j]
            e = Cat(one[j], two[j])
            mm_n = Mux(clear, 0, mm + e)
            m1_n = Mux(clear, 1, m1 + e)
            m.d.sync += [
                two[j].eq(two_n),
                one[j].eq(one_n),
                mm.eq(mm_n),
                m1.eq(m1_n),
                step[j].eq(
                    Mux(two_n, Cat(Const(0, 2), m1_n), Mux(one_n, Cat(Const(1, 1), mm_n), 0))
                ),
                sq[j].eq(Mux(clear, 0, sq[j] + step[j])),
            ]
            # pivot b of pair j was compared with a (loaded in an earlier cycle)
            with m.If(t2["piv"] & (t2["idx"] == 2 * j + 1)):
                m.d.sync += [neg[j].eq(~la & ~ea), ne[j].eq(~ea)]

        # ---- write-out: one g per cycle after each sweep -----------------------------
        fin_d = Signal()
        m.d.sync += fin_d.eq(t3["fin"])
        out_m = [Signal(self.m_bits, name=f"out_m{j}") for j in range(p)]
        out_q = [Signal(self.q_bits, name=f"out_q{j}") for j in range(p)]
        out_n = [Signal(name=f"out_neg{j}") for j in range(p)]
        w_left = Signal(range(p + 1))
        w_pair = Signal(range(self.max_pairs + p + 1))
        w_rem = Signal(signed(POPULATION_BITS))  # pairs not yet written - 1
        acc = Signal(self.sum_bits)
        w_ok = (w_left != 0) & ~w_rem[-1]
        m.d.comb += [
            self.g_en.eq(w_ok),
            self.g_addr.eq(w_pair),
            self.g_data.eq(Mux(out_n[0], -out_m[0], out_m[0])),
        ]
        with m.If(fin_d):
            m.d.sync += w_left.eq(p)
            for j in range(p):
                m.d.sync += [
                    out_m[j].eq(Mux(rank, mag[j], ne[j])),
                    out_q[j].eq(Mux(rank, sq[j], ne[j])),
                    out_n[j].eq(neg[j]),
                ]
        with m.Elif(w_left != 0):
            m.d.sync += [w_left.eq(w_left - 1), w_pair.eq(w_pair + 1)]
            for j in range(p - 1):
                m.d.sync += [
                    out_m[j].eq(out_m[j + 1]),
                    out_q[j].eq(out_q[j + 1]),
                    out_n[j].eq(out_n[j + 1]),
                ]
            with m.If(w_ok):
                m.d.sync += [acc.eq(acc + out_q[0]), w_rem.eq(w_rem - 1)]

        # ---- control: sweeps, then isqrt, then theta = (tau * root) >> 4 ---------------
        # Registered (one cycle late, set from the check on): once low it stays low.
        in_flight = Signal()
        mul = Signal(self.root_bits + TAU_BITS)  # tau * root, shift-add: tau in the low bits
        addend = Signal(self.root_bits)
        mul_i = Signal(range(TAU_BITS + 1))
        done = Signal()
        error = Signal()
        m.d.comb += [
            self.busy.eq(busy),
            self.done.eq(done),
            self.error.eq(error),
            # both hold from done to the next start (cleared at start)
            self.theta.eq(mul >> 4),
            self.sum_g2.eq(acc),
            isq.n.eq(acc),
        ]
        # One flip-flop per phase (one-hot), so that no enable decodes a state number.
        s_check = Signal()  # the cycle after start: population checked
        s_sweep = Signal()  # reads, compares, write-out
        s_isqrt = Signal()
        s_mul = Signal()
        begin = self.start & ~busy
        bad = s_check & ~n_ok
        m.d.sync += in_flight.eq(
            s_check
            | Cat(
                issuing, fin_d, w_left != 0, *(t["piv"] | t["str"] for t in (*delayed, t1, t2, t3))
            ).any()
        )
        sweeps_over = s_sweep & ~in_flight
        mul_last = s_mul & (mul_i == 1)
        m.d.comb += isq.start.eq(sweeps_over)
        m.d.sync += [
            s_check.eq(begin),
            s_sweep.eq((s_check & n_ok) | (s_sweep & in_flight)),
            s_isqrt.eq(sweeps_over | (s_isqrt & ~isq.done)),
            s_mul.eq((s_isqrt & isq.done) | (s_mul & ~mul_last)),
            done.eq(bad | mul_last),
            busy.eq(begin | (busy & ~bad & ~mul_last)),
        ]
        with m.If(begin):
            m.d.sync += [error.eq(0), mul.eq(0), acc.eq(0)]
        with m.If(bad):
            m.d.sync += error.eq(1)
        with m.If(s_check):
            m.d.sync += [
                issuing.eq(n_ok),
                in_stream.eq(0),
                piv_i.eq(0),
                pa.eq(0),
                more.eq(pairs - (p + 1)),
                n_m2.eq(n - 2),
                w_pair.eq(0),
                w_rem.eq(pairs - 1),
            ]
        with m.If(s_isqrt & isq.done):
            m.d.sync += [
                mul_i.eq(TAU_BITS),
                mul.eq(self.tau),
                addend.eq(Mux(self.tau[0], isq.root, 0)),
            ]
        with m.If(s_mul):
            m.d.sync += [
                # LSB first: the top adds root if the bit of tau shifting out is set
                # (`addend`, chosen a cycle ahead so that the adder starts at flip-flops)
                mul.eq(Cat(mul[1:TAU_BITS], mul[TAU_BITS:] + addend)),
                addend.eq(Mux(mul[1], isq.root, 0)),
                mul_i.eq(mul_i - 1),
            ]
        return m
