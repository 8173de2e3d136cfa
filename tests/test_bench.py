"""pentegg bench: the JSON records carry the documented figures."""

import json
import os
import subprocess

import pytest


def run(cmd, *args):
    r = subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_bench_golden_json_has_ratios_and_step_times(pentegg_cmd):
    j = run(pentegg_cmd, "bench", "golden", "--batch", "16", "--repeat", "1", "--json")
    assert j["forward_throughput_ratio"] > 0 and j["naive_speedup"] > 0
    assert set(j["step_ms"]) == {"256", "1024"}
    for p in ("256", "1024"):
        b = j["breakdown"][p]
        parts = b["noise_ms"] + b["forward_ms"] + b["shaping_ms"] + b["update_ms"]
        assert abs(parts - b["step_ms"]) < 1e-6
    f = j["forward"]
    assert (
        abs(
            f["forward_throughput_ratio"]
            - f["lowrank_samples_per_s"] / f["inference_samples_per_s"]
        )
        < 1e-9
    )


def test_bench_seeds_aggregates_train_runs(pentegg_cmd):
    j = run(pentegg_cmd, "bench", "seeds", "0-2", "--task", "xor", "--json")
    assert j["seeds"] == [0, 1, 2] and len(j["runs"]) == 3
    assert j["solved"] == 3 and j["value"]["mean"] == 1.0
    assert len({r["weights_sha256"] for r in j["runs"]}) == 3
    assert j["command"] == "pentegg train --task xor"


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
    assert j["step_ratio"] > 0 and j["step_ratio_spread"]["min"] <= j["step_ratio"]
    b = j["golden_breakdown_ms"]
    parts = b["noise_ms"] + b["forward_ms"] + b["scoring_ms"] + b["update_ms"]
    assert abs(parts - b["sum_ms"]) < 1e-9
    m = j["machine"]
    assert m["cpus"] >= 1 and len(m["loadavg_start"]) == 3 and "blas_threads" in m
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
        [*pentegg_cmd, *REFERENCE_ARGS], capture_output=True, text=True, timeout=300, env=env
    )
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert "pip install -e '.[reference]'" in r.stderr
