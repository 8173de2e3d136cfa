# amaranth: UnusedElaboratable=no
"""CompactLowRankGenerator (spec 2, 3, 4.2) and its SerialNoiseEngine: every element of
E, A.B^T, A and B equals golden.

cocotb (sim/cocotb_lrgen.py, the tests of the other LowRankGenerator blocks) runs random
jobs in both modes plus edge shapes with random back-pressure on all three streams:
ranks 1, 4 and 16 under Icarus (> 20 random cases in all), uniform digits, PQUANT as
logic, and a default-size block under Verilator. The Amaranth simulator checks the
engine's digits (with and without the run key, with back-pressure) and the job timing
of the class docstring.
"""

import random

import pytest
from amaranth.sim import Simulator

from pentegg.golden.prng import stream_digits, stream_key, stream_state
from pentegg.rtl.noise.lrgen_compact import CompactLowRankGenerator, compact_job_cycles
from pentegg.rtl.noise.noise_engine import SerialNoiseEngine
from pentegg.sim import harness
from pentegg.sim.amaranth_jobs import quantized_job_timing
from pentegg.sim.scoreboard import Scoreboard

SMALL = {"max_fan": 21, "max_out": 9}
ICARUS_SETS = [
    ({"rank": 1, **SMALL}, 7),
    ({"rank": 4, **SMALL}, 8),
    ({"rank": 16, **SMALL}, 5),
    ({"rank": 4, "digits": "uniform", **SMALL}, 3),
    ({"rank": 4, "pquant": "logic", **SMALL}, 3),
]


def slack(p) -> int:
    """Cycles of noise generation a job may take beyond the harness's shape-based limit."""
    return compact_job_cycles(p["rank"], p["max_out"], p["max_fan"], p.get("digits", "binomial"))


def _id(item):
    p, _ = item
    extra = "-".join(k for k in ("digits", "pquant") if k in p)
    return f"rank{p['rank']}" + (f"-{extra}" if extra else "")


@pytest.mark.parametrize("item", ICARUS_SETS, ids=_id)
def test_cocotb_icarus(item):
    params, cases = item
    env = {"cases": cases, "ready": 0.7, "slack": slack(params)}
    harness.run("lrgen-compact", params, "cocotb_lrgen", env=env)


def test_cocotb_verilator_large():
    """Default-size RAMs (max_fan 256), larger random shapes, under Verilator."""
    params = {"rank": 4, "max_fan": 256, "max_out": 64}
    harness.run(
        "lrgen-compact",
        params,
        "cocotb_lrgen",
        simulator="verilator",
        env={"cases": 4, "ready": 0.8, "slack": slack(params)},
        testcase="random_jobs",
    )


def engine_digits(dut, jobs, ready=1.0, seed=0, stop=True):
    """Run ``(seed, key fields, reseed, n_digits)`` jobs on a SerialNoiseEngine, one
    after the other; returns each job's digits and the cycles to its first beat. With
    ``stop`` False the next job starts while the engine is still streaming."""
    rng = random.Random(seed)
    out = []

    async def bench(ctx):
        for run_seed, fields, reseed, n in jobs:
            ctx.set(dut.seed, run_seed)
            ctx.set(dut.key, int(stream_key(*fields)))
            ctx.set(dut.reseed, int(reseed))
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            got, cycles, first = [], 0, None
            while len(got) < n:
                ctx.set(dut.o.ready, int(rng.random() < ready))
                if ctx.get(dut.o.valid) and ctx.get(dut.o.ready):
                    first = cycles if first is None else first
                    got.extend(ctx.get(dut.o.payload)[j] for j in range(dut.chunk))
                await ctx.tick()
                cycles += 1
            if stop:
                ctx.set(dut.stop, 1)
                await ctx.tick()
                ctx.set(dut.stop, 0)
            else:
                assert ctx.get(dut.busy)
            out.append((got[:n], first))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


ENGINE_JOBS = [
    (7, (3, 5, 1, 1), True, 400),  # run key from the seed, then the B stream
    (7, (3, 5, 1, 0), False, 300),  # the stored run key: the A stream
    (0xFFFFFFFF, (65534, 2047, 7, 1), True, 200),  # every key field at its maximum
    (0xFFFFFFFF, (0, 0, 0, 0), False, 100),
]


@pytest.mark.parametrize(
    "digits, chunk", [("binomial", 4), ("binomial", 1), ("binomial", 2), ("uniform", 2)]
)
def test_engine_digits_equal_golden(digits, chunk):
    """The engine's digits are the spec's stream (2.3-2.5), with and without computing
    the run key, first beat 448 / 256 cycles after start."""
    dut = SerialNoiseEngine(digits=digits, chunk=chunk)
    board = Scoreboard(f"engine {digits} chunk={chunk}")
    for (run_seed, fields, reseed, n), (got, first) in zip(
        ENGINE_JOBS, engine_digits(dut, ENGINE_JOBS), strict=True
    ):
        want = stream_digits(stream_state(run_seed, *fields), n, digits)
        board.check(f"digits of {fields} seed={run_seed}", want, got)
        assert first == (448 if reseed else 256)
    board.report()


def test_engine_waits_for_ready():
    """Random back-pressure: no digit lost or repeated (the engine stands still)."""
    dut = SerialNoiseEngine()
    got = engine_digits(dut, ENGINE_JOBS[:2], ready=0.3, seed=harness.pick_seed("engine"))
    for (run_seed, fields, _, n), (digits, _) in zip(ENGINE_JOBS[:2], got, strict=True):
        want = stream_digits(stream_state(run_seed, *fields), n, "binomial")
        Scoreboard("engine back-pressure").check(f"digits of {fields}", want, digits)


def test_engine_restart_replays():
    """Starting the same key again (stored run key) replays the same digits, and a start
    in the middle of a stream abandons it."""
    dut = SerialNoiseEngine()
    jobs = [(9, (1, 2, 3, 1), True, 40), (9, (1, 2, 3, 1), False, 8), (9, (1, 2, 3, 1), False, 64)]
    (first, _), (middle, _), (again, _) = engine_digits(dut, jobs, stop=False)
    assert first == again[:40]
    want = stream_digits(stream_state(9, 1, 2, 3, 1), 40, "binomial")
    Scoreboard("engine restart").check("replayed digits", want, again[:40])
    # the job started while the first was still streaming: its own 8 digits, from the start
    Scoreboard("engine restart").check("restarted digits", want[:8], middle)


def quantized_busy(rank, out, fan, digits="binomial"):
    """Cycles busy after the start cycle and cycles from the first to the last element
    of E, for one quantized job without back-pressure."""
    dut = CompactLowRankGenerator(rank=rank, max_fan=32, max_out=8, digits=digits)
    case = {"seed": 5, "step": 1, "pair": 2, "layer": 3, "out": out, "fan": fan, "sigma_shift": 1}
    return quantized_job_timing(dut, case)


@pytest.mark.parametrize(
    "rank, out, fan, digits",
    [
        (4, 7, 30, "binomial"),
        (4, 1, 1, "binomial"),
        (1, 3, 5, "binomial"),
        (16, 2, 3, "binomial"),
        (4, 5, 6, "uniform"),
    ],
)
def test_job_timing_and_one_element_per_cycle(rank, out, fan, digits):
    """E comes out one element per cycle, rows back to back, and the job takes the
    docstring's number of cycles (compact_job_cycles)."""
    busy, span = quantized_busy(rank, out, fan, digits)
    assert span == out * fan
    assert busy == compact_job_cycles(rank, out, fan, digits)


def test_rank4_job_formula():
    assert compact_job_cycles(4, 7, 30) == 714 + 16 * (30 + 7 - 2) + 7 * 30


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rank": 2}, "rank=2 is not one of 1, 4, 16, 64"),
        ({"max_fan": 0}, "max_fan=0 is not an integer in 1..4097"),
        ({"max_out": 4097}, "max_out=4097 is not an integer in 1..4096"),
        ({"digits": "normal"}, "digits='normal' is not one of binomial, uniform"),
        ({"pquant": "table"}, "pquant='table' is not one of auto, rom, logic"),
    ],
)
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CompactLowRankGenerator(**kwargs)


def test_engine_parameter_errors():
    with pytest.raises(ValueError, match="chunk=4 is not one of 1, 2"):
        SerialNoiseEngine(digits="uniform", chunk=4)
