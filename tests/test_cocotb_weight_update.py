"""WeightUpdater (spec 8.2-8.4) under cocotb on Icarus, against golden: random layers
with saturating V and W, theta edges and both updates (sim/cocotb_weight_update.py), and
starts with out-of-range values, which write nothing. Any seed (``PENTEGG_SEED`` /
``COCOTB_RANDOM_SEED`` replays one)."""

import pytest

from pentegg.sim import harness

SETS = [
    # max_width 10 leaves out = 11..15 and fan = 12..15 in the ports: refused starts
    {"update": "latent", "latent_bits": 8, "lanes": 1, "max_width": 10, "z_bits": 22},
    {"update": "latent", "latent_bits": 3, "lanes": 3, "max_width": 10, "z_bits": 12},
    {"update": "pentary", "latent_bits": 8, "lanes": 4, "max_width": 10, "z_bits": 22},
    # more lanes than one copy of the Z word's load flag serves (COPY_LANES)
    {"update": "latent", "latent_bits": 5, "lanes": 10, "max_width": 13, "z_bits": 16},
]


@pytest.mark.parametrize(
    "params", SETS, ids=lambda p: f"{p['update']}{p['latent_bits']}-lanes{p['lanes']}"
)
def test_cocotb_icarus_weight_update(params):
    harness.run("weight-update", params, "cocotb_weight_update", env={"cases": 10})
