"""The whole Accelerator under cocotb: ES steps through its command stream, every step's
weights, latent integers, scores and theta equal to ``pentegg.golden``'s
(sim/cocotb_accelerator.py). Verilator runs the issue's networks: xor (2-8-2, population
64, 20 steps, then the same 20 back to back in one run), a digits-shaped network
(64-16-10, population 32, batch 16, 5 steps) under both updates and both shapings, and
the host-scored path on CartPole-shaped inputs (4-16-2, population 16, 3 steps), in
low-rank mode; a third Verilator build in quantized mode (spec 6.1, latent update) runs
xor and the digits-shaped network. Icarus runs random configurations (one of its three
builds quantized). Any ``PENTEGG_SEED`` / ``COCOTB_RANDOM_SEED`` replays a run."""

import pytest

from pentegg.rtl.accelerator import Accelerator
from pentegg.sim import harness


def _build(**kw):
    params = {
        "lanes": 4,
        "max_layers": 2,
        "max_width": 64,
        "rank": 4,
        "digits": "binomial",
        "max_population": 64,
        "max_batch": 16,
        "update": "latent",
        "latent_bits": 8,
        "mem_latency": 2,
        "sample_bytes": 4096,
        "label_words": 64,
        "batch_words": 128,
        **kw,
    }
    return params, (lambda: Accelerator(**params))


@pytest.mark.parametrize("update", ["latent", "pentary"])
def test_verilator_xor_digits_and_cartpole_every_step_bit_exact(update):
    params, factory = _build(update=update)
    for testcase, env in (
        ("xor", {"steps": 20}),
        ("digits", {"shaping": "rank"}),
        ("digits", {"shaping": "sign"}),
        ("cartpole", {}),
    ):
        harness.run(
            "accelerator",
            params,
            "cocotb_accelerator",
            simulator="verilator",
            testcase=testcase,
            env=env,
            factory=factory,
        )


def test_verilator_quantized_mode_xor_and_digits_every_step_bit_exact():
    """Quantized mode (each member evaluates ``x . (W + sign E)^T``, the votes use
    ``E``): xor's 20 steps (one by one, then back to back) and the digits-shaped network's
    5 steps equal golden after every step."""
    params, factory = _build(mode="quantized")
    for testcase, env in (("xor", {"steps": 20}), ("digits", {"shaping": "rank"})):
        harness.run(
            "accelerator",
            params,
            "cocotb_accelerator",
            simulator="verilator",
            testcase=testcase,
            env=env,
            factory=factory,
        )


RANDOM_BUILDS = [
    # the ULX3S's memory latency (3: the weights through RegisteredRAM)
    {"lanes": 2, "max_width": 9, "max_layers": 3, "rank": 1, "digits": "uniform", "mem_latency": 3},
    {"lanes": 3, "max_width": 12, "rank": 16, "update": "pentary", "mem_latency": 1},
    {
        "lanes": 1,
        "max_width": 7,
        "rank": 4,
        "latent_bits": 5,
        "max_population": 16,
        "mode": "quantized",
    },
]


def _random_id(b):
    return f"{'q' if b.get('mode') == 'quantized' else 'lr'}-L{b['lanes']}-r{b['rank']}"


@pytest.mark.parametrize("build", RANDOM_BUILDS, ids=_random_id)
def test_icarus_random_configurations(build):
    params, factory = _build(**{"max_population": 12, "max_batch": 4, "label_words": 16, **build})
    harness.run(
        "accelerator",
        params,
        "cocotb_accelerator",
        testcase="random_jobs",
        env={"jobs": 4},
        factory=factory,
    )
