# amaranth: UnusedElaboratable=no
"""LowRankGenerator (spec 3, 4.2): every element of E, A.B^T, A and B equals golden.

cocotb (sim/cocotb_lrgen.py) runs, per parameter set, random jobs (key, shape, sigma) in
both modes plus edge shapes, with random back-pressure on all three output streams:
ranks 1, 4 and 16 under Icarus (> 20 random cases in all), rank 4 with uniform digits and
with PQUANT as logic, and one larger configuration under Verilator.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.rtl.noise.lrgen import KeyedLowRankGenerator, LowRankGenerator
from pentegg.sim import harness
from pentegg.sim.amaranth_jobs import quantized_job_timing
from pentegg.sim.scoreboard import Scoreboard, lrgen_expected

SMALL = {"max_fan": 21, "max_out": 9}  # odd sizes: shapes cross word and beat boundaries
ICARUS_SETS = [
    ({"rank": 1, **SMALL}, 8),
    ({"rank": 4, **SMALL}, 8),
    ({"rank": 16, **SMALL}, 6),
    ({"rank": 4, "digits": "uniform", **SMALL}, 3),
    ({"rank": 4, "pquant": "logic", **SMALL}, 3),
    ({"rank": 4, "keyer": "serial", **SMALL}, 4),
]


def _id(item):
    p, _ = item
    extra = "-".join(f"{k}" for k in ("digits", "pquant", "keyer") if k in p)
    return f"rank{p['rank']}" + (f"-{extra}" if extra else "")


@pytest.mark.parametrize("item", ICARUS_SETS, ids=_id)
def test_cocotb_icarus(item):
    params, cases = item
    harness.run("lrgen", params, "cocotb_lrgen", env={"cases": cases, "ready": 0.7})


def test_cocotb_verilator_large():
    """Default-size RAM (max_fan 256), larger random shapes, under Verilator."""
    harness.run(
        "lrgen",
        {"rank": 4, "max_fan": 256, "max_out": 64},
        "cocotb_lrgen",
        simulator="verilator",
        env={"cases": 6, "ready": 0.8},
        testcase="random_jobs",
    )


def run_job_amaranth(dut, case, mode):
    """One job in the Amaranth simulator, all outputs always ready."""
    got = {"e": [], "dot": [], "a": [], "b": []}

    async def bench(ctx):
        for k, v in case.items():
            ctx.set(getattr(dut, k), v)
        ctx.set(dut.mode, mode)
        for s in (dut.e, dut.a, dut.b):
            ctx.set(s.ready, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        while True:
            busy = ctx.get(dut.busy)
            if ctx.get(dut.e.valid):
                p = ctx.get(dut.e.payload)
                got["e"].append(int(p.e))
                got["dot"].append(int(p.dot))
            if ctx.get(dut.a.valid):
                got["a"].append([int(d) for d in ctx.get(dut.a.payload)])
            if ctx.get(dut.b.valid):
                got["b"].append([int(d) for d in ctx.get(dut.b.payload)])
            await ctx.tick()
            if not busy:
                break

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


def test_amaranth_sim_rank64():
    """Rank 64 (8 words per row) in the Amaranth simulator, both modes."""
    rng = np.random.default_rng(harness.pick_seed("lrgen rank 64"))
    dut = KeyedLowRankGenerator(rank=64, max_fan=8, max_out=4)
    case = {
        "seed": int(rng.integers(1 << 32)),
        "step": 7,
        "pair": 100,
        "layer": 2,
        "out": 3,
        "fan": 5,
        "sigma_shift": int(rng.integers(9)),
    }
    a, b, e, dot = lrgen_expected(case, 64)
    board = Scoreboard("lrgen rank 64")
    got = run_job_amaranth(dut, case, 0)
    board.check("E", e.reshape(-1), got["e"])
    board.check("A.B^T", dot.reshape(-1), got["dot"])
    got = run_job_amaranth(dut, case, 1)
    board.check("A", a, np.array(got["a"]))
    board.check("B", b, np.array(got["b"]))


def test_spec_example_b_rows():
    """Spec 3: pair 5, layer 1, step 3, seed 0: B rows (1,1,1,-1) and (-1,-1,0,0)."""
    dut = KeyedLowRankGenerator(rank=4, max_fan=4, max_out=4)
    case = {"seed": 0, "step": 3, "pair": 5, "layer": 1, "out": 2, "fan": 2, "sigma_shift": 1}
    got = run_job_amaranth(dut, case, 1)
    assert got["b"] == [[1, 1, 1, -1], [-1, -1, 0, 0]]


def test_spec_example_b_rows_serial_keyer():
    """The same B rows with the serial keyer."""
    dut = KeyedLowRankGenerator(rank=4, max_fan=4, max_out=4, keyer="serial")
    case = {"seed": 0, "step": 3, "pair": 5, "layer": 1, "out": 2, "fan": 2, "sigma_shift": 1}
    got = run_job_amaranth(dut, case, 1)
    assert got["b"] == [[1, 1, 1, -1], [-1, -1, 0, 0]]


def e_timing(rank, out, fan, keyer="parallel"):
    """(cycles busy after the start cycle, cycles from the first to the last element of E)
    of one quantized job without back-pressure."""
    dut = KeyedLowRankGenerator(rank=rank, max_fan=32, max_out=8, keyer=keyer)
    case = {"seed": 5, "step": 1, "pair": 2, "layer": 3, "out": out, "fan": fan, "sigma_shift": 1}
    return quantized_job_timing(dut, case)


@pytest.mark.parametrize("rank", [1, 4, 16, 64])
def test_one_element_per_cycle(rank):
    """E comes out one element per cycle, rows back to back (the docstring's figures)."""
    busy, span = e_timing(rank, 7, 30)
    assert span == 7 * 30
    if rank == 4:
        assert busy == 29 + 30 + 8 + 7 * 30
        # fan 13: the A state is still ready when B ends
        assert e_timing(rank, 7, 13) == (29 + 13 + 8 + 7 * 13, 7 * 13)


def test_serial_keyer_timing():
    """Serial keyer, rank 4, fan below about 800: the A state, not B's rows, sets the
    pace; busy 2506 + out * fan cycles (the class docstring's figure)."""
    for out, fan in ((7, 30), (3, 5)):
        busy, span = e_timing(4, out, fan, keyer="serial")
        assert span == out * fan
        assert busy == 2506 + out * fan


def test_short_rows_wait_for_wide_a_rows():
    """Rank 16 with fan 1: a row of A spans m = 2 words, so each row costs m + 1 = 3
    cycles (the lane's docstring)."""
    assert e_timing(16, 5, 1)[1] == 3 * (5 - 1) + 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"rank": 2}, "rank=2 is not one of 1, 4, 16, 64"),
        ({"max_fan": 0}, "max_fan=0 is not an integer in 1..4097"),
        ({"max_fan": 4098}, "max_fan=4098"),
        ({"max_out": 4097}, "max_out=4097 is not an integer in 1..4096"),
        ({"digits": "normal"}, "digits='normal' is not one of binomial, uniform"),
        ({"pquant": "table"}, "pquant='table' is not one of auto, rom, logic"),
    ],
)
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LowRankGenerator(**kwargs)


def test_keyer_parameter_error():
    with pytest.raises(ValueError, match="keyer='fast' is not one of parallel, serial"):
        KeyedLowRankGenerator(keyer="fast")
