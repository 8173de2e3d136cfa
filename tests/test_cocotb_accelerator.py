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


@pytest.mark.parametrize("update", ["latent", "pentary"])
def test_verilator_quantized_mode_xor_and_digits_every_step_bit_exact(update):
    """Quantized mode (each member evaluates ``x . (W + sign E)^T``, the votes use
    ``E``): the digits-shaped network's 5 steps under both shapings, and (latent) xor's 20
    steps (one by one, then back to back) equal golden after every step."""
    params, factory = _build(mode="quantized", update=update)
    runs = [("digits", {"shaping": "rank"}), ("digits", {"shaping": "sign"})]
    if update == "latent":
        runs.insert(0, ("xor", {"steps": 20}))
    for testcase, env in runs:
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


def test_a_state_mismatch_names_the_layer_row_input_and_both_values():
    """The testbench's check of the device's weights and latent state (check_state)."""
    import asyncio

    import numpy as np

    from pentegg import accel_protocol as ap
    from pentegg.golden import Config, init_state
    from pentegg.sim.cocotb_accelerator import check_state
    from pentegg.sim.scoreboard import Mismatch, Scoreboard

    cfg = Config(layers=(3, 4, 2), population=4, init="random", seed=1).validate()
    state = init_state(cfg)

    class Host:  # the device's memories: golden's, with one weight and one V changed
        def __init__(self, layer, row, col):
            w = [x.copy() for x in state.weights]
            w[layer][row, col] = 2 if w[layer][row, col] != 2 else -2
            self.mems = {"weights": ap.weight_words(w), "latent": ap.latent_words(state.latent)}

        async def read(self, mem, n, signed=False):
            return list(self.mems[mem][:n])

    with pytest.raises(Mismatch) as e:
        asyncio.run(check_state(Host(1, 1, 3), cfg, state, Scoreboard("t"), "step 2"))
    want = state.weights[1][1, 3]
    assert str(e.value).startswith(
        f"t step 2: layer 1 weights [row, input]: first mismatch at index (1, 3) of 10: "
        f"expected {want}, got {2 if want != 2 else -2}"
    ), str(e.value)
    host = Host(0, 0, 0)
    host.mems["weights"] = ap.weight_words(state.weights)
    host.mems["latent"][5] += 1  # layer 0, row 1, input 1 (fan 4)
    with pytest.raises(Mismatch, match=r"layer 0 latent \[row, input\]: .* index \(1, 1\)"):
        asyncio.run(check_state(host, cfg, state, Scoreboard("t"), "step 2"))
    assert np.array_equal(ap.latent_words(state.latent)[:5], host.mems["latent"][:5])
