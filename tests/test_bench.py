"""pentegg bench: the JSON records carry the documented figures."""

import json
import os
import subprocess

import pytest


def run(cmd, *args):
    # no timeout: the runs are finite and stdin is /dev/null, so they cannot hang; a
    # timeout would only fail on a loaded machine
    r = subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def assert_machine_record(j):
    m = j["machine"]
    for key in ("cpus", "python", "numpy", "platform", "load_avg_start", "load_avg_end"):
        assert key in m
    assert {"library", "threads", "source"} <= set(m["blas"])


def test_bench_golden_json_has_ratios_and_step_times(pentegg_cmd):
    j = run(pentegg_cmd, "bench", "golden", "--batch", "16", "--rounds", "3", "--json")
    assert j["rounds"] == 3
    assert j["forward_throughput_ratio"] > 0 and j["naive_speedup"] > 0
    assert set(j["step_ms"]) == {"256", "1024"}
    for p in ("256", "1024"):
        b = j["breakdown"][p]
        parts = b["noise_ms"] + b["forward_ms"] + b["shaping_ms"] + b["update_ms"]
        assert abs(parts - b["step_ms"]) < 1e-6
    assert_machine_record(j)


def test_bench_golden_ratios_are_medians_of_interleaved_per_round_ratios(pentegg_cmd):
    j = run(pentegg_cmd, "bench", "golden", "--batch", "16", "--rounds", "3", "--json")
    t, f = j["timings_ms"], j["forward"]
    sides = {
        "forward_throughput_ratio": ("forward", "inference", "lowrank"),
        "forward_throughput_ratio_quantized": ("forward", "inference", "quantized"),
        "forward_throughput_ratio_per_member_inputs": (
            "forward",
            "inference",
            "lowrank_per_member_inputs",
        ),
        "naive_speedup": ("naive", "naive", "pentegg"),
    }
    assert set(j["ratios"]) == set(sides)
    for name, (group, num, den) in sides.items():
        r = j["ratios"][name]
        # one ratio per round, each the quotient of the two sides' times in that round
        want = [a / b for a, b in zip(t[group][num], t[group][den], strict=True)]
        assert r["n"] == 3 and r["per_round"] == pytest.approx(want, rel=1e-12)
        assert r["median"] == pytest.approx(sorted(want)[1], rel=1e-12)
        assert r["min"] <= r["q1"] <= r["median"] <= r["q3"] <= r["max"]
    for name in sides:
        if name.startswith("forward"):
            assert f[name] == j["ratios"][name]["median"]
    assert j["forward_throughput_ratio"] == j["ratios"]["forward_throughput_ratio"]["median"]
    assert j["naive_speedup"] == j["ratios"]["naive_speedup"]["median"]


def test_bench_golden_records_a_blas_thread_limit(pentegg_cmd):
    pytest.importorskip("threadpoolctl")
    j = run(
        pentegg_cmd,
        "bench",
        "golden",
        "--batch",
        "16",
        "--rounds",
        "3",
        "--blas-threads",
        1,
        "--json",
    )
    assert j["machine"]["blas"]["threads"] == 1
    assert j["machine"]["blas"]["source"] == "threadpoolctl"


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--rounds", "2"], "--rounds 2 out of range 3..1000"),
        (["--rounds", "1001"], "--rounds 1001 out of range 3..1000"),
        (["--rounds", "x"], "invalid int value: 'x'"),
        (["--repeat", "3"], "--repeat (best of N, one side after the other) was replaced by"),
        (["--repeat", "x"], "was replaced by --rounds N"),
        (["--batch", "0"], "--batch 0 out of range 1..4096"),
        (["--blas-threads", "0"], "--blas-threads 0 out of range 1..256"),
    ],
)
def test_bench_golden_bad_options_one_line_exit_2(pentegg_cmd, args, msg):
    r = subprocess.run(
        [*pentegg_cmd, "bench", "golden", *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_bench_seeds_aggregates_train_runs(pentegg_cmd):
    j = run(pentegg_cmd, "bench", "seeds", "0-2", "--task", "xor", "--json")
    assert j["seeds"] == [0, 1, 2] and len(j["runs"]) == 3
    assert j["solved"] == 3 and j["value"]["mean"] == 1.0
    assert len({r["weights_sha256"] for r in j["runs"]}) == 3
    assert j["command"] == "pentegg train --task xor"
    assert_machine_record(j)


REFERENCE_ARGS = (
    "bench",
    "reference",
    "float-eggroll",
    "--task",
    "xor",
    "--seeds",
    "0",
    "--steps",
    "50",
    "--population",
    "32",
    "--hidden",
    "8",
    "--breakdown-rounds",
    "3",
    "--json",
)


def _check_side_by_side(j, backend):
    assert j["method"] == "float-eggroll" and j["backend"] == backend
    assert 0 <= j["value"]["mean"] <= 1 and 0 <= j["golden_value"]["mean"] <= 1
    assert j["rounds"] == 50 and j["golden_step_ms"] > 0 and j["float_step_ms"] > 0
    sp = j["step_ratio_spread"]
    assert j["step_ratio"] == sp["median"] and sp["min"] <= sp["q1"] <= sp["q3"] <= sp["max"]
    b = j["golden_breakdown_ms"]
    parts = b["noise_ms"] + b["forward_ms"] + b["scoring_ms"] + b["update_ms"]
    assert abs(parts - b["sum_ms"]) < 1e-9
    assert_machine_record(j)
    assert "numba" in j["machine"] and "golden_engine" in j["machine"]
    assert len(j["runs"][0]["weights_sha256"]) == 64


def test_bench_reference_float_eggroll_numpy_backend_side_by_side(pentegg_cmd):
    _check_side_by_side(run(pentegg_cmd, *REFERENCE_ARGS, "--backend", "numpy"), "numpy")


def test_bench_reference_float_eggroll_jax_side_by_side(pentegg_cmd):
    pytest.importorskip("jax")
    j = run(pentegg_cmd, *REFERENCE_ARGS)
    _check_side_by_side(j, "jax")
    assert j["float_compile_s"][0] > 0 and j["machine"]["float_backend"]["jax"]


def test_bench_reference_without_jax_names_the_extra(pentegg_cmd, tmp_path):
    """Without JAX the command says in one line how to install it, exit code 2."""
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text(
        "raise ModuleNotFoundError('No module named jax', name='jax')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    r = subprocess.run(
        [*pentegg_cmd, *REFERENCE_ARGS],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "pip install -e '.[reference]'" in r.stderr


def test_make_resources_keeps_the_document_row_of_a_row_it_neither_ran_nor_cached():
    """``make_resources --match`` renders a whole table: a row it did not measure and has
    no cached record of keeps its line from the document instead of vanishing."""
    from pentegg.benchmarks.make_resources import HEADERS, render

    cmd = ["synth", "evaluator", "--device", "up5k", "--param", "lanes=4", "--json"]
    line = (
        "| evaluator lanes 4 | UP5K | 1 | 2 | 3 | 0 | 5 | - | 6 | `abc` | `pentegg "
        + " ".join(cmd)
        + "` |"
    )
    old = "\n".join([HEADERS["evaluator-synth"], line])
    out = render("evaluator-synth", [("lanes 4", cmd, None)], old)
    assert out.splitlines() == [*HEADERS["evaluator-synth"].splitlines(), line]
    # a row measured before the gmacs column: "-" in it, after fmax
    narrow = line.replace("| 5 | - | 6 |", "| 5 | 6 |")
    out = render("evaluator-synth", [("lanes 4", cmd, None)], narrow)
    assert out.splitlines()[-1] == line
    gone = render("evaluator-synth", [("lanes 4", cmd, None)], HEADERS["evaluator-synth"])
    assert gone == HEADERS["evaluator-synth"]


def test_make_resources_evaluator_rows_carry_gmacs_and_its_ratio():
    """An evaluator synthesis row shows ``gmacs`` with the per-member ratio it assumed,
    after fmax; a record without it (``--no-step``) shows "-"."""
    from pentegg.benchmarks.make_resources import render

    cmd = ["synth", "evaluator", "--device", "ecp5-85", "--param", "lanes=128", "--json"]
    rec = dict(module="evaluator", device="ecp5-85", luts=1, ffs=2, brams=3, dsps=0)
    rec |= dict(fmax_mhz=125.0, wrapped_utilisation={"TRELLIS_COMB": "6/83640"}, commit="abc")
    row = render(
        "evaluator-synth",
        [("lanes 128", cmd, rec | {"gmacs": 28.0, "gmacs_throughput_ratio": 0.875})],
    ).splitlines()[-1]
    assert "| 125.00 | 28.00 (0.875) | 6/83640 | `abc` |" in row
    row = render("evaluator-synth", [("lanes 128", cmd, rec)]).splitlines()[-1]
    assert "| 125.00 | - | 6/83640 | `abc` |" in row
