"""PopulationEvaluator under cocotb against ``pentegg.golden`` (sim/cocotb_evaluator.py).

Six Icarus builds, three in each perturbation mode (low-rank: lanes 1, 8, 2, ranks 1, 4,
16; quantized: lanes 2, 4, 3, ranks 1, 16, 4; binomial and uniform digits; one to three
layers; group sizes; memory latency 1 and 2; one, four and two E generators in the
quantized builds) run five random run-time configurations
each: thirty per run, each with random layer widths from 1 to the maximum
(1 and odd widths favoured), a population that is usually not a multiple of
``2 * lanes``, random shifts, margin, seed and step, weights with the +-2 extremes,
a sample of +-127 inputs in every batch, shared or per-member inputs. Three Verilator
builds (low-rank rank 4 binomial at 8 lanes and 64 wide, quantized rank 1 uniform at one
lane, low-rank rank 16 uniform at 4 lanes) run ten such configurations each, thirty per
run, with batches of 1 to 32 on the first (1 and 32 favoured; 1 to 8 on the others), and
the first the digits network (64-64-10, population 256, rank 4, batch 8).
Any ``PENTEGG_SEED`` / ``COCOTB_RANDOM_SEED`` replays a run.
"""

import re
from pathlib import Path

import pytest

from pentegg.sim import harness
from pentegg.sim.evaluator_system import EvaluatorSystem

ICARUS_BUILDS = [
    {"lanes": 1, "max_layers": 2, "max_width": 8, "rank": 1, "digits": "binomial"},
    {
        "lanes": 2,
        "max_layers": 3,
        "max_width": 9,
        "rank": 1,
        "digits": "uniform",
        "mode": "quantized",
    },
    {
        "lanes": 4,
        "max_layers": 2,
        "max_width": 7,
        "rank": 16,
        "digits": "binomial",
        "group": 2,
        "mode": "quantized",
        "e_generators": 4,
    },
    {
        "lanes": 8,
        "max_layers": 2,
        "max_width": 12,
        "rank": 4,
        "digits": "uniform",
        "noise_write_lanes": 3,
        "noise_generators": 3,
    },
    {
        "lanes": 3,
        "max_layers": 3,
        "max_width": 16,
        "rank": 4,
        "digits": "binomial",
        "mem_latency": 1,
        "mode": "quantized",
        "e_generators": 2,
    },
    {
        "lanes": 2,
        "max_layers": 1,
        "max_width": 5,
        "rank": 16,
        "digits": "uniform",
        "noise_write_lanes": 2,
        "noise_generators": 2,
    },
]


def _system(params: dict, **memories):
    return lambda: EvaluatorSystem(**params, **memories)


def _ran(res: dict, board: str) -> None:
    """The run's log holds the summary of ``board`` (a testbench that returns at once
    without its setting checks nothing and passes): every line with it says all equal."""
    lines = [ln for ln in Path(res["log"]).read_text().splitlines() if board in ln]
    assert lines and all("all equal to golden" in ln for ln in lines), (board, res["log"])


def _id(p):
    mode = "q" if p.get("mode") == "quantized" else "lr"
    return f"{mode}-L{p['lanes']}-r{p['rank']}-{p['digits'][0]}-w{p['max_width']}x{p['max_layers']}"


def _icarus(params, testcase, env, family=None):
    """``testcase`` of sim/cocotb_evaluator.py on an Icarus build of ``params`` with the
    small test memories (``family``: harness.run's); returns harness.run's result."""
    return harness.run(
        "evaluator",
        params,
        "cocotb_evaluator",
        testcase=testcase,
        env={"max_cycles": 400_000, **env},
        factory=_system(params, weight_words=512, sample_bytes=2048, score_words=128),
        family=family,
    )


def _icarus_random_jobs(params, family=None):
    """Five random jobs on an Icarus build of ``params``."""
    return _icarus(params, "random_jobs", {"jobs": 5, "max_batch": 6}, family)


@pytest.mark.parametrize("params", ICARUS_BUILDS, ids=_id)
def test_cocotb_icarus_random_jobs(params):
    _icarus_random_jobs(params)


def test_cocotb_icarus_random_jobs_in_the_ice40_forms():
    """The evaluator as the UP5K builds elaborate it (``family="ice40"``: the lanes'
    term registers cleared outside beats, the lean finalizer, one noise bank slice),
    with two finalizer groups: five random jobs equal golden's."""
    params = {"lanes": 4, "max_layers": 2, "max_width": 9, "rank": 4, "digits": "binomial"}
    res = _icarus_random_jobs({**params, "group": 2}, family="ice40")
    # the build is the iCE40's form: the second group has no copies of the shared stages
    # (the ECP5's form of the same system has them)
    text = (Path(res["build_dir"]) / "pentegg_evaluator.v").read_text()
    assert "op_P2_g1" not in text and "hi_at" not in text
    plain = harness.catalog.verilog_text(_system({**params, "group": 2})(), "pentegg_evaluator")
    assert "op_P2_g1" in plain and "hi_at" in plain


VERILATOR_BUILDS = [
    {"lanes": 8, "max_layers": 2, "max_width": 64, "rank": 4, "digits": "binomial"},
    {**ICARUS_BUILDS[1], "lanes": 1},  # quantized, rank 1, uniform digits
    {"lanes": 4, "max_layers": 2, "max_width": 12, "rank": 16, "digits": "uniform"},
]


@pytest.mark.parametrize("params", VERILATOR_BUILDS, ids=[_id(p) for p in VERILATOR_BUILDS])
def test_cocotb_verilator_random_jobs_large_batches_and_the_digits_network(params):
    """Ten random jobs on each build, with batches up to 32 on the first (8 on the
    others), which also runs the digits network (64-64-10, population 256, batch 8)."""
    digits = params["max_width"] >= 64  # the first: batches up to 32, the others 8
    res = harness.run(
        "evaluator",
        params,
        "cocotb_evaluator",
        simulator="verilator",
        testcase=["random_jobs", "digits_network"] if digits else "random_jobs",
        env={
            "jobs": 10,
            "max_batch": 32 if digits else 8,
            **({"digits_network": 8} if digits else {}),
            "max_cycles": 4_000_000,
        },
        factory=_system(params, weight_words=2048, sample_bytes=4096, score_words=512),
    )
    jobs = [ln for ln in Path(res["log"]).read_text().splitlines() if re.search(r"job \d+: ", ln)]
    assert len(jobs) == 10, jobs  # every random job ran (and was checked: no failure)
    if digits:  # (its testbench returns at once without its setting)
        _ran(res, "evaluator digits network: all equal to golden")


@pytest.mark.parametrize(
    "params",
    [
        {"lanes": 2, "max_layers": 2, "max_width": 8, "rank": 4, "digits": "binomial"},
        {
            "lanes": 3,
            "max_layers": 2,
            "max_width": 7,
            "rank": 4,
            "digits": "uniform",
            "mode": "quantized",
        },
    ],
    ids=["lowrank", "quantized"],
)
def test_cocotb_icarus_runs_of_steps_with_noise_made_ahead(params):
    """Two noise buffers, runs of three consecutive ES steps: each evaluation made ahead
    (``pre`` / ``keep``) equals golden and makes no noise for its first round (one
    noise fill fewer than from cold)."""
    params = {**params, "noise_buffers": 2}
    res = _icarus(params, "runs_of_steps", {"steps": 3, "jobs": 2, "max_batch": 4})
    _ran(res, "evaluator runs of steps")


def test_cocotb_icarus_a_score_mismatch_names_member_sample_layer_and_output():
    """A shared-input score sums a member's terms over the batch: checked against golden
    for another margin and for another last-layer weight, the testbench's failure names
    the member and the sample, and for the weight the layer, output index and both
    logits (sim/cocotb_evaluator.py, ``locate_score_mismatch``)."""
    res = _icarus(ICARUS_BUILDS[0], "score_mismatch_is_located", {"locate": 1, "max_batch": 4})
    located = [ln for ln in Path(res["log"]).read_text().splitlines() if "located: member" in ln]
    assert len(located) == 2, located
    assert "logits equal golden's" in located[0]
    assert re.search(r"layer \d+ \[member \d+, output index \d+\]: expected -?\d+, got", located[1])
