# amaranth: UnusedElaboratable=no
"""Shaper (spec 7.2, 8.2) and Isqrt (spec 0.4) in the Amaranth simulator, against golden:
``g`` from ``golden.fitness.shape``, ``theta`` from ``golden.update.threshold``.

The score memory is modelled by a process with the DUT's read latency; every g-memory
write is recorded (a pair written twice, or not at all, is a failure).
"""

import itertools
import math
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.golden import Config, fitness, update
from pentegg.golden.arith import bits_for
from pentegg.rtl.update import Isqrt, Shaper
from pentegg.rtl.update.shaper import sum_g2_bound
from pentegg.sim import harness
from pentegg.sim.scoreboard import Scoreboard

SHAPINGS = ("rank", "sign")


def expected(scores, kind: str, tau: int) -> dict:
    """Golden g, sum g^2 and theta of one run."""
    s = np.asarray(scores, dtype=np.int64)
    g = fitness.shape(s, kind)
    cfg = Config(population=len(s), shaping=kind, tau=tau)
    return {"g": g, "sum_g2": int(np.dot(g, g)), "theta": update.threshold(cfg, g)}


def run_shaper(dut: Shaper, cases: list[dict]) -> list[dict]:
    """Run every case ``{"scores", "shaping", "tau"[, "population"]}`` on ``dut`` in one
    simulation; each result holds the g-memory writes, sum_g2, theta, error and the
    cycles from the start cycle to the done cycle."""
    lat = dut.mem_latency
    mem = {"scores": [0]}
    results = []
    junk = random.Random(len(cases))  # words read beyond the scores, or without s_en

    async def memory(ctx):
        pipe = [0] * lat
        async for _, _, addr, en in ctx.tick().sample(dut.s_addr, dut.s_en):
            sc = mem["scores"]
            word = sc[addr] if en and addr < len(sc) else junk.randint(-128, 127)
            pipe = [word, *pipe[:-1]]
            ctx.set(dut.s_data, pipe[-1])

    async def bench(ctx):
        for case in cases:
            mem["scores"] = list(case["scores"])
            n = case.get("population", len(case["scores"]))
            ctx.set(dut.population, n)
            ctx.set(dut.shaping, SHAPINGS.index(case["shaping"]))
            ctx.set(dut.tau, case["tau"])
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            writes = []
            cycles = 1
            while not ctx.get(dut.done):
                # a start strobe while busy is ignored
                ctx.set(dut.start, case.get("poke", -1) == cycles)
                if ctx.get(dut.g_en):
                    writes.append((ctx.get(dut.g_addr), ctx.get(dut.g_data)))
                await ctx.tick()
                cycles += 1
                assert cycles < 10 * n * n + 1000, "no done"
            ctx.set(dut.start, 0)  # (a start in the done cycle would begin a run)
            assert not ctx.get(dut.g_en)
            results.append(
                {
                    "writes": writes,
                    "sum_g2": ctx.get(dut.sum_g2),
                    "theta": ctx.get(dut.theta),
                    "error": ctx.get(dut.error),
                    "cycles": cycles,
                }
            )
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(memory)
    sim.add_testbench(bench)
    sim.run()
    return results


def check(board: Scoreboard, dut: Shaper, cases, results) -> None:
    for i, (case, res) in enumerate(zip(cases, results, strict=True)):
        n, kind, tau = len(case["scores"]), case["shaping"], case["tau"]
        exp = expected(case["scores"], kind, tau)
        what = f"case {i} (N={n}, {kind}, tau={tau})"
        assert not res["error"], f"{what}: error flag set"
        addrs = [a for a, _ in res["writes"]]
        board.check(f"{what} g addresses", list(range(n // 2)), addrs, "addresses")
        board.check(f"{what} g", exp["g"], [d for _, d in res["writes"]], "g")
        board.check(f"{what} sum_g2", [exp["sum_g2"]], [res["sum_g2"]], "sum_g2")
        board.check(f"{what} theta", [exp["theta"]], [res["theta"]], "theta")
        board.check(f"{what} cycles", [dut.cycles(n, kind)], [res["cycles"]], "cycles")


def random_scores(rng: random.Random, n: int, bits: int) -> list[int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    style = rng.choice(["wide", "ties", "few", "extreme", "equal"])
    if style == "wide":
        return [rng.randint(lo, hi) for _ in range(n)]
    if style == "ties":
        return [rng.randint(-3, 3) for _ in range(n)]
    if style == "few":
        vals = [rng.randint(lo, hi) for _ in range(rng.randint(1, 4))]
        return [rng.choice(vals) for _ in range(n)]
    if style == "extreme":
        return [rng.choice([lo, hi, lo + 1, hi - 1, 0]) for _ in range(n)]
    v = rng.randint(lo, hi)
    return [v] * n


def test_spec_worked_example_rank_and_sign():
    """Spec 7.2 / 8.2: scores [3,7,7,1,5,3] -> rank g [-6,9,3], sign [-1,1,1];
    theta(tau 16) = 11 for rank."""
    dut = Shaper(max_population=8, score_bits=8)
    scores = [3, 7, 7, 1, 5, 3]
    cases = [{"scores": scores, "shaping": k, "tau": 16} for k in SHAPINGS]
    res = run_shaper(dut, cases)
    assert [d for _, d in res[0]["writes"]] == [-6, 9, 3]
    assert res[0]["sum_g2"] == 126 and res[0]["theta"] == 11
    assert [d for _, d in res[1]["writes"]] == [-1, 1, 1]
    assert res[1]["sum_g2"] == 3 and res[1]["theta"] == 1
    check(Scoreboard("shaper example"), dut, cases, res)


@pytest.mark.parametrize(
    "params",
    [
        {"max_population": 64, "score_bits": 16, "mem_latency": 1},
        {"max_population": 64, "score_bits": 8, "mem_latency": 2},
        {"max_population": 64, "score_bits": 32, "mem_latency": 3, "pivots": 3},
        {"max_population": 16, "score_bits": 12, "mem_latency": 1, "pivots": 2},
        {"max_population": 2, "score_bits": 8, "mem_latency": 4},
    ],
    ids=["lat1", "lat2-8bit", "lat3-32bit-pivots3", "pivots2-max16", "max2-lat4"],
)
def test_random_populations_match_golden(params):
    """Random N in 2..max (N = 2 and N = max always), both shapings, tau 0/16/4095 or
    random; wide, tied, few-valued, extreme (min/max of score_bits) and all-equal
    scores, some with a start strobe while busy: g, its addresses, sum g^2, theta and
    the cycle count."""
    rng = random.Random(harness.pick_seed(f"shaper {params}"))
    dut = Shaper(**params)
    nmax = params["max_population"]
    sizes = [2, nmax, 2, nmax] + [2 * rng.randint(1, nmax // 2) for _ in range(26)]
    cases = [
        {
            "scores": random_scores(rng, n, params["score_bits"]),
            "shaping": SHAPINGS[i % 2],
            "tau": rng.choice([0, 16, 4095, rng.randint(0, 4095)]),
            "poke": rng.choice([-1, 1, 3, rng.randint(1, 40)]),
        }
        for i, n in enumerate(sizes)
    ]
    board = Scoreboard(f"shaper {params}")
    check(board, dut, cases, run_shaper(dut, cases))


def test_population_256_cycles_measured():
    """N = 256, rank and sign, random scores: results equal golden and the measured cycles
    equal the formula (rank: 128 sweeps of 258 reads)."""
    rng = random.Random(harness.pick_seed("shaper 256"))
    dut = Shaper(max_population=256, score_bits=16)
    cases = [
        {"scores": random_scores(rng, 256, 16), "shaping": k, "tau": rng.randint(0, 4095)}
        for k in SHAPINGS
    ]
    res = run_shaper(dut, cases)
    check(Scoreboard("shaper 256"), dut, cases, res)
    k = dut.root_bits
    assert [r["cycles"] for r in res] == [128 * 258 + 1 + 1 + k + 21, 256 + 1 + 1 + k + 21]


def test_worst_case_sum_and_theta_fit():
    """The rank worst case (highest paired with lowest: sum g^2 = 2N(N^2-1)/3) at N =
    max_population, with tau 4095: sum_g2 and theta reach their widest values exactly."""
    n = 32
    dut = Shaper(max_population=n, score_bits=8)
    order = [v for k in range(n // 2) for v in (n - 1 - k, k)]  # pairs (31,0), (30,1), ...
    cases = [{"scores": [v - 16 for v in order], "shaping": "rank", "tau": 4095}]
    res = run_shaper(dut, cases)
    assert res[0]["sum_g2"] == sum_g2_bound(n)
    assert sum_g2_bound(n).bit_length() == dut.sum_bits
    check(Scoreboard("shaper worst"), dut, cases, res)


@pytest.mark.parametrize("population", [0, 1, 3, 17, 18, 8191])
def test_out_of_range_population_sets_error_and_writes_nothing(population):
    """Odd, < 2 or > max_population: error set, no g written, done; the next valid run
    clears error and is correct."""
    dut = Shaper(max_population=16, score_bits=8)
    bad = {"scores": [1] * 16, "population": population, "shaping": "rank", "tau": 16}
    good = {"scores": [3, 7, 7, 1, 5, 3], "shaping": "rank", "tau": 16}
    res = run_shaper(dut, [bad, good])
    assert res[0]["error"] == 1 and res[0]["writes"] == [] and res[0]["theta"] == 0
    assert res[0]["cycles"] == 2
    check(Scoreboard("shaper after error"), dut, [good], res[1:])


@pytest.mark.parametrize("nmax", [2, 6, 64, 256, 4096])
def test_widths_follow_the_worst_cases(nmax):
    """g_bits = bits_for(-2(N-1), 2(N-1)); sum_g2 holds 2N(N^2-1)/3, which is the largest
    sum of g^2 (brute force over every score order with ties for N <= 6)."""
    dut = Shaper(max_population=nmax)
    assert dut.g_bits == bits_for(-2 * (nmax - 1), 2 * (nmax - 1))
    assert dut.sum_bits == sum_g2_bound(nmax).bit_length()
    assert math.isqrt(sum_g2_bound(nmax)) < 1 << dut.root_bits
    assert (4095 * math.isqrt(sum_g2_bound(nmax))) >> 4 < 1 << dut.theta_bits
    if nmax <= 6:
        worst = max(
            int(np.sum(fitness.shape(np.array(s), "rank") ** 2))
            for s in itertools.product(range(nmax), repeat=nmax)
        )
        assert worst == sum_g2_bound(nmax)


def test_cycle_formula_for_large_populations():
    """The documented cycle formula (checked in simulation above) at N = 256 and 4096."""
    dut = Shaper(max_population=4096, score_bits=16)
    k = dut.root_bits
    assert dut.cycles(256, "rank") == 128 * 258 + 1 + 1 + k + 21
    assert dut.cycles(4096, "rank") == 2048 * 4098 + 1 + 1 + k + 21
    assert dut.cycles(256, "sign") == 256 + 1 + 1 + k + 21


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_population": 3}, "max_population=3 is not an even integer in 2..4096"),
        ({"max_population": 4098}, "max_population=4098 is not an integer in 2..4096"),
        ({"max_population": 0}, "max_population=0"),
        ({"score_bits": 7}, "score_bits=7 is not an integer in 8..32"),
        ({"score_bits": 33}, "score_bits=33"),
        ({"mem_latency": 0}, "mem_latency=0 is not an integer in 1..4"),
        ({"mem_latency": 5}, "mem_latency=5"),
        ({"max_population": 4, "pivots": 3}, "pivots=3 is not an integer in 1..2"),
        ({"pivots": 17}, "pivots=17 is not an integer in 1..16"),
    ],
)
def test_parameter_errors_name_the_range(kwargs, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        Shaper(**kwargs)


def _isqrt_run(width: int, values) -> list[int]:
    dut = Isqrt(width)
    got = []

    async def bench(ctx):
        for v in values:
            ctx.set(dut.n, v)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await ctx.tick().repeat(dut.root_bits)
            assert ctx.get(dut.done)
            got.append(ctx.get(dut.root))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_isqrt_exhaustive_12_bits():
    """Every 12-bit input, latency root_bits + 1 (done) each."""
    ns = list(range(1 << 12))
    got = _isqrt_run(12, ns)
    Scoreboard("isqrt 12-bit").check("root (index = n)", [math.isqrt(v) for v in ns], got)


@pytest.mark.parametrize("width", [1, 2, 3, 36, 37, 64])
def test_isqrt_corner_values(width):
    """0, 1, k^2 - 1, k^2, k^2 + 1 for k near the top and a few random k, and the maximum."""
    top = (1 << width) - 1
    r = math.isqrt(top)
    rng = random.Random(harness.pick_seed(f"isqrt {width}"))
    ks = {1, 2, 3, r, r - 1, r // 2, *(rng.randint(1, r) for _ in range(5))}
    ns = {0, 1, top}
    for k in ks:
        ns |= {k * k - 1, k * k, k * k + 1}
    ns = sorted(v for v in ns if 0 <= v <= top)
    got = _isqrt_run(width, ns)
    Scoreboard(f"isqrt {width}-bit").check(f"root of {ns}", [math.isqrt(v) for v in ns], got)


def test_isqrt_rejects_bad_width():
    with pytest.raises(ValueError, match=r"width=0 is not an integer in 1\.\.64"):
        Isqrt(0)
