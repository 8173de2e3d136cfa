# amaranth: UnusedElaboratable=no
"""PentaryQuantizer (PQUANT, spec 4.1): exhaustive, in the Amaranth simulator and in cocotb."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.golden import pquant
from pentegg.rtl.noise.lrgen import dot_width, pquant_rom_image, rank_shift
from pentegg.rtl.pquant import PentaryQuantizer, pquant_int
from pentegg.sim import harness
from pentegg.sim.scoreboard import Scoreboard

# (parameters, why): every shift kind, the LRGEN rank-4 use, narrow and wide inputs
CASES = [
    ({"width": 4, "shift": 0}, "constant f = 0"),
    ({"width": 5, "shift": 3}, "constant f, thresholds inside the range"),
    ({"width": 6, "shift_offset": 1, "max_shift": 8}, "LRGEN rank 4: f = 1 + sigma"),
    ({"width": 9}, "run-time f over 0..30"),
    ({"width": 1}, "one-bit input"),
]


def exhaustive_amaranth(params) -> int:
    dut = PentaryQuantizer(**params)
    w = params["width"]
    xs = np.arange(-(1 << (w - 1)), 1 << (w - 1))
    shifts = [None] if dut.fixed_shift is not None else list(range(dut.max_shift + 1))
    board = Scoreboard(f"pquant {params}")

    async def bench(ctx):
        for s in shifts:
            if s is not None:
                ctx.set(dut.shift, s)
            f = dut.shift_offset + (dut.fixed_shift if s is None else s)
            got = []
            for x in xs.tolist():
                ctx.set(dut.x, x)
                got.append(ctx.get(dut.q))
            board.check(f"q at f={f} (index = x + {1 << (w - 1)})", pquant(xs, f), got, "q")

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return board.checked["q"]


@pytest.mark.parametrize("params", [c[0] for c in CASES], ids=[c[1] for c in CASES])
def test_exhaustive_amaranth_sim(params):
    w = params["width"]
    n_shifts = (
        1 if "shift" in params else params.get("max_shift", 30 - params.get("shift_offset", 0)) + 1
    )
    assert exhaustive_amaranth(params) == (1 << w) * n_shifts


@pytest.mark.parametrize("params", [c[0] for c in CASES[:4]], ids=[c[1] for c in CASES[:4]])
def test_exhaustive_cocotb_icarus(params):
    harness.run("pquant", params, "cocotb_pquant")


def test_threshold_rule_matches_golden_wide():
    """The rule the logic and the ROM images use, on a wide range of inputs and shifts."""
    rng = np.random.default_rng(harness.pick_seed("pquant rule"))
    xs = rng.integers(-(1 << 31), 1 << 31, size=2000)
    for f in range(31):
        ref = pquant(xs, f)
        got = [pquant_int(int(x), f) for x in xs]
        Scoreboard("pquant_int").check(f"f={f}", ref, got)


@pytest.mark.parametrize("rank", [1, 4, 16, 64])
def test_lrgen_rom_image_is_golden_pquant(rank):
    image = np.array(pquant_rom_image(rank))
    dw = dot_width(rank)
    codes = np.arange(1 << dw)
    dots = np.where(codes >> (dw - 1), codes - (1 << dw), codes)
    for sigma in range(16):
        got = image[sigma << dw : (sigma + 1) << dw]
        got = np.where(got >= 4, got - 8, got)
        Scoreboard(f"rom rank {rank}").check(
            f"sigma {sigma}", pquant(dots, rank_shift(rank) + sigma), got
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"width": 0}, "width=0 is not an integer in 1..32"),
        ({"width": 33}, "width=33"),
        ({"width": 4, "shift": 31}, "shift=31 is not an integer in 0..30"),
        ({"width": 4, "shift_offset": 2, "shift": 29}, "shift=29 is not an integer in 0..28"),
        ({"width": 4, "max_shift": 31}, "max_shift=31"),
        ({"width": 4, "shift": 1, "max_shift": 3}, "max_shift applies only"),
        ({"width": 4.0}, "width=4.0"),
    ],
)
def test_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        PentaryQuantizer(**kwargs)
