"""VoteAccumulator (spec 8.1) under cocotb on Icarus: random jobs (shape, population,
keys, sigma_shift, extreme g), each Z equal to golden's ``accumulate_z`` on golden's noise
and each run's cycle count equal to ``vote_cycles`` (sim/cocotb_update.py)."""

import pytest

from pentegg.sim import harness

SETS = [
    {"lanes": 3, "rank": 4, "mode": "lowrank", "digits": "binomial"},
    {"lanes": 2, "rank": 1, "mode": "quantized", "digits": "uniform"},
    {"lanes": 4, "rank": 16, "mode": "quantized", "digits": "binomial"},
]


@pytest.mark.parametrize(
    "params", SETS, ids=lambda p: f"lanes{p['lanes']}-rank{p['rank']}-{p['mode']}"
)
def test_cocotb_icarus_votes(params):
    harness.run(
        "votes",
        {**params, "max_width": 9, "max_population": 12},
        "cocotb_update",
        env={"cases": 10},
    )
