# amaranth: UnusedElaboratable=no
"""Shaper (spec 7.2, 8.2) in cocotb on Icarus, against golden: at least 10 random runs
per configuration, any seed (``PENTEGG_SEED`` / ``COCOTB_RANDOM_SEED`` replays one); its
Isqrt (spec 0.4) over the input range the Shaper gives it, at populations 256 and 4096
(sim/cocotb_isqrt.py)."""

import pytest

from pentegg.rtl.update import Isqrt, Shaper
from pentegg.rtl.update.shaper import sum_g2_bound
from pentegg.sim import harness

CONFIGS = [
    {"max_population": 64, "score_bits": 16, "mem_latency": 1, "pivots": 1},
    {"max_population": 24, "score_bits": 10, "mem_latency": 2, "pivots": 2},
    {"max_population": 16, "score_bits": 24, "mem_latency": 3, "pivots": 1},
]


@pytest.mark.parametrize("params", CONFIGS, ids=["lat1", "lat2-pivots2", "lat3-24bit"])
def test_random_runs_match_golden_icarus(params):
    harness.run(
        "shaper",
        params,
        "cocotb_shaper",
        env={"cases": 16},
        factory=lambda: Shaper(**params),
    )


@pytest.mark.parametrize("population", [256, 4096])
def test_isqrt_over_the_shapers_range_icarus(population):
    """Every input below 2^12 and the squares +-1 of roots at every power of two, random
    roots and the largest, up to sum_g2_bound(population): the Shaper's Isqrt width;
    roots back to back, each ``done`` exactly ``k + 1`` cycles after its start."""
    width = Shaper(max_population=population).sum_bits
    top = sum_g2_bound(population)
    harness.run(
        "isqrt",
        {"width": width, "top": top},
        "cocotb_isqrt",
        factory=lambda: Isqrt(width),
    )
