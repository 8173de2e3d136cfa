# amaranth: UnusedElaboratable=no
"""PentaryPRNG (spec 2): digit streams equal golden, replay, distinct keys.

The cocotb runs (sim/cocotb_prng.py) compare >= 100,000 digits per parameter set spread
over several keys, with random back-pressure; one heavy run uses Verilator.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.golden import stream_digits, stream_state
from pentegg.rtl.noise.prng import PentaryPRNG
from pentegg.sim import harness
from pentegg.sim.scoreboard import Scoreboard

ICARUS_SETS = [
    {"digits": "binomial", "digits_per_beat": 1},
    {"digits": "binomial", "digits_per_beat": 4},
    {"digits": "binomial", "digits_per_beat": 16},
    {"digits": "uniform", "digits_per_beat": 4},
    {"digits": "uniform", "digits_per_beat": 2},
    {"digits": "binomial", "digits_per_beat": 4, "keyer": "serial"},
]


def _id(p):
    return f"{p['digits']}-x{p['digits_per_beat']}" + ("-serial" if "keyer" in p else "")


@pytest.mark.parametrize("params", ICARUS_SETS, ids=_id)
def test_cocotb_icarus(params):
    harness.run("prng", params, "cocotb_prng", env={"digits": 100_000, "keys": 4, "ready": 0.8})


def test_cocotb_verilator_million_digits():
    """The heavy run: 1,000,000 digits over 5 keys under Verilator."""
    harness.run(
        "prng",
        {"digits": "binomial", "digits_per_beat": 8},
        "cocotb_prng",
        simulator="verilator",
        env={"digits": 1_000_000, "keys": 5, "ready": 0.9},
        testcase="streams_equal_golden",
    )


def amaranth_stream(dut, keys, count, ready=1.0, seed=0):
    """Run ``dut`` for each (key, reseed) and collect ``count`` digits per key."""
    rng = np.random.default_rng(seed)
    out = []

    async def bench(ctx):
        for key, reseed in keys:
            for name, v in zip(("seed", "step", "pair", "layer", "ab"), key, strict=True):
                ctx.set(getattr(dut, name), v)
            ctx.set(dut.reseed, reseed)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            got = []
            while len(got) < count:
                r = bool(rng.random() < ready)
                ctx.set(dut.o.ready, r)
                if r and ctx.get(dut.o.valid):
                    got.extend(int(d) for d in ctx.get(dut.o.payload))
                await ctx.tick()
            ctx.set(dut.o.ready, 0)
            out.append(got[:count])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize("per_beat", [1, 2, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("dist", ["binomial", "uniform"])
def test_amaranth_sim_every_width(dist, per_beat):
    """Every digits_per_beat, both distributions, two keys (the second reuses the run key)."""
    seed = harness.pick_seed(f"prng {dist} x{per_beat}")
    keys = [((seed, 3, 5, 1, 1), 1), ((seed, 3, 5, 1, 0), 0)]
    got = amaranth_stream(PentaryPRNG(digits=dist, digits_per_beat=per_beat), keys, 256, 0.7, seed)
    for (key, _), digits in zip(keys, got, strict=True):
        ref = stream_digits(stream_state(*key), 256, dist)
        Scoreboard(f"prng {dist} x{per_beat}").check(f"key {key}", ref, digits)


@pytest.mark.parametrize("per_beat", [1, 16])
def test_amaranth_sim_serial_keyer(per_beat):
    """The serial keyer: a reseed, a key reusing the run key, a restart during mixing."""
    seed = harness.pick_seed(f"prng serial x{per_beat}")
    keys = [((seed, 3, 5, 1, 1), 1), ((seed, 9, 2047, 7, 0), 0)]
    dut = PentaryPRNG(digits_per_beat=per_beat, keyer="serial")
    got = amaranth_stream(dut, keys, 64, 0.7, seed)
    for (key, _), digits in zip(keys, got, strict=True):
        ref = stream_digits(stream_state(*key), 64, "binomial")
        Scoreboard(f"prng serial x{per_beat}").check(f"key {key}", ref, digits)


def test_serial_keyer_timing():
    """Serial keyer: first beat 1666 cycles after start with reseed, 834 without."""
    assert first_beat(PentaryPRNG(digits_per_beat=4, keyer="serial")) == {1: 1666, 0: 834}


def test_spec_example_stream():
    """Spec 2.5: the B stream of (seed 0, step 3, pair 5, layer 1) starts 1 1 1 -1 -1 -1 0 0."""
    (got,) = amaranth_stream(PentaryPRNG(digits_per_beat=8), [((0, 3, 5, 1, 1), 1)], 8)
    assert got == [1, 1, 1, -1, -1, -1, 0, 0]


def test_timing_as_documented():
    """First beat 29 cycles after start with reseed, 15 without; one beat per cycle."""
    assert first_beat(PentaryPRNG(digits_per_beat=4)) == {1: 29, 0: 15}


def first_beat(dut):
    """{reseed: cycles from start to the first beat}; then checks one beat per cycle."""
    seen = {}

    async def bench(ctx):
        for reseed in (1, 0):
            ctx.set(dut.reseed, reseed)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            ctx.set(dut.o.ready, 1)
            cycles = 1
            while not ctx.get(dut.o.valid):
                assert ctx.get(dut.busy)
                await ctx.tick()
                cycles += 1
            seen[reseed] = cycles
            for _ in range(10):
                assert ctx.get(dut.o.valid)
                await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"digits": "gauss"}, "digits='gauss' is not one of binomial, uniform"),
        ({"digits_per_beat": 3}, "digits_per_beat=3 is not one of 1, 2, 4, 8, 16, 32, 64"),
        ({"digits_per_beat": 0}, "digits_per_beat=0"),
        ({"keyer": "fast"}, "keyer='fast' is not one of parallel, serial"),
    ],
)
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PentaryPRNG(**kwargs)
