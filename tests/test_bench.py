"""pentegg bench: the JSON records carry the documented figures."""

import json
import subprocess


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


def test_bench_reference_rows(pentegg_cmd):
    j = run(
        pentegg_cmd,
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
        "--json",
    )
    assert j["method"] == "float-eggroll" and 0 <= j["value"]["mean"] <= 1
