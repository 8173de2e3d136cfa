"""Shaper (spec 7.2, 8.2) in cocotb on Icarus, against golden: at least 10 random runs
per configuration, any seed (``PENTEGG_SEED`` / ``COCOTB_RANDOM_SEED`` replays one)."""

import pytest

from pentegg.rtl.update import Shaper
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
