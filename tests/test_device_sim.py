"""The host driver against the simulated device (the accelerator's Verilog in the native
Verilator harness, behind the framed protocol): ``pentegg compare`` and ``pentegg train
--device sim`` equal the golden model to the bit; a difference is found and named; bad
devices and jobs give one-line errors."""

from __future__ import annotations

import json
import subprocess

import pytest

XOR = ["--task", "xor", "--lanes", "4"]
DIGITS = ["--task", "digits", "--hidden", "16", "--population", "32", "--batch", "16"]


def _run(pentegg_cmd, *args, timeout=900):
    return subprocess.run(
        [*pentegg_cmd, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def _last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["lowrank", "quantized"])
def test_compare_xor_on_sim_is_identical_step_by_step(pentegg_cmd, mode):
    r = _run(
        pentegg_cmd, "compare", *XOR, "--mode", mode, "--steps", "6", "--device", "sim", "--json"
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rec = _last_json(r.stdout)
    assert rec["mode"] == mode, rec
    assert rec["identical"] and rec["steps"] == 6 and rec["first_mismatch"] is None
    assert {"task", "device", "steps", "identical", "first_mismatch", "wall_s"} <= set(rec)
    assert r.stdout.count("identical (sha256") == 6


@pytest.mark.parametrize(
    "mode,shaping,update",
    [
        ("lowrank", "rank", "latent"),
        ("lowrank", "sign", "pentary"),
        ("quantized", "rank", "latent"),
    ],
)
def test_compare_digits_shaped_network_on_sim_is_identical(pentegg_cmd, mode, shaping, update):
    r = _run(
        pentegg_cmd,
        "compare",
        *DIGITS,
        "--mode",
        mode,
        "--shaping",
        shaping,
        "--update",
        update,
        "--steps",
        "3",
        "--lanes",
        "4",
        "--device",
        "sim",
        "--json",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rec = _last_json(r.stdout)
    assert rec["identical"] and rec["steps"] == 3


def test_compare_host_scored_cartpole_on_sim_is_identical(pentegg_cmd):
    r = _run(
        pentegg_cmd,
        "compare",
        "--task",
        "cartpole",
        "--population",
        "16",
        "--steps",
        "2",
        "--lanes",
        "4",
        "--device",
        "sim",
        "--json",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert _last_json(r.stdout)["identical"]


@pytest.mark.parametrize("mode", ["lowrank", "quantized"])
def test_train_on_sim_reproduces_golden_weights_sha256(pentegg_cmd, mode):
    args = ["train", *XOR, "--mode", mode, "--steps", "30", "--json", "--quiet"]
    gold = _last_json(_run(pentegg_cmd, *args).stdout)
    r = _run(pentegg_cmd, *args, "--device", "sim")
    assert r.returncode == 0, r.stderr
    sim = _last_json(r.stdout)
    assert sim["device"] == "sim" and gold["device"] == "golden"
    assert sim["weights_sha256"] == gold["weights_sha256"]
    assert (sim["steps"], sim["value"], sim["solved"]) == (
        gold["steps"],
        gold["value"],
        gold["solved"],
    )
    first = _last_json(_run(pentegg_cmd, *args[:-4], "--steps", "1", "--json", "--quiet").stdout)
    assert first["weights_sha256"] != gold["weights_sha256"]  # the weights moved


@pytest.mark.parametrize("first_device, then", [("sim", "golden"), ("golden", "sim")])
def test_a_run_checkpointed_on_one_device_resumes_on_the_other_with_the_same_bits(
    pentegg_cmd, tmp_path, first_device, then
):
    """Five steps on one device, five more resumed on the other: the weights and the
    learning curve (but its wall times) are those of ten golden steps in one run."""
    from pentegg.train import read_curve

    gold = tmp_path / "golden"
    r = _run(pentegg_cmd, "train", *XOR, "--steps", "10", "--out", gold, "--json", "--quiet")
    whole = _last_json(r.stdout)
    out = tmp_path / "run"
    first = ["train", *XOR, "--steps", "5", "--out", str(out), "--quiet"]
    r = _run(pentegg_cmd, *first, "--device", first_device)
    assert r.returncode == 0, r.stderr
    second = ["train", "--task", "xor", "--resume", str(out), "--steps", "10", "--json"]
    r = _run(pentegg_cmd, *second, "--device", then, "--quiet")
    assert r.returncode == 0, r.stderr
    rec = _last_json(r.stdout)
    assert rec["device"] == then and rec["weights_sha256"] == whole["weights_sha256"]

    def curve(d):
        return [
            {k: v for k, v in row.items() if k != "wall_s"} for row in read_curve(d / "curve.csv")
        ]

    assert curve(out) == curve(gold)


def test_compare_names_the_first_difference_and_exits_1(monkeypatch, capsys):
    """A device whose read-back differs in one latent value: compare stops at that step
    and names the layer, the index and both values."""
    from pentegg import device as device_mod
    from pentegg.cli import main

    real = device_mod.Trainer.read_state

    def corrupt(self, step):
        state = real(self, step)
        if step == 2:
            state.latent[1][1, 3] += 1
        return state

    monkeypatch.setattr(device_mod.Trainer, "read_state", corrupt)
    code = main(["compare", *XOR, "--steps", "4", "--device", "sim", "--json", "--quiet"])
    out = capsys.readouterr().out
    assert code == 1, out
    rec = _last_json(out)
    m = rec["first_mismatch"]
    assert not rec["identical"] and rec["steps"] == 1
    assert (m["step"], m["what"], m["layer"], m["index"]) == (1, "latent", 1, [1, 3])
    assert m["device"] == m["golden"] + 1
    assert "MISMATCH at step 1: latent layer 1 index [1, 3]" in out


@pytest.mark.parametrize(
    "args,message",
    [
        (["compare", *XOR, "--device", "golden"], "compare needs a device"),
        (
            ["compare", *XOR, "--device", "serial:/dev/nonexistent-pentegg"],
            "cannot open serial port /dev/nonexistent-pentegg: no such device",
        ),
        (["compare", *XOR, "--device", "tcp:1"], "unknown device 'tcp:1'"),
        (
            ["compare", *XOR, "--population", "6000", "--device", "sim"],
            "population=6000 out of range",
        ),
        (
            ["train", *XOR, "--device", "serial:/dev/nonexistent-pentegg"],
            "cannot open serial port /dev/nonexistent-pentegg: no such device",
        ),
    ],
)
def test_bad_devices_and_jobs_give_one_line_errors(pentegg_cmd, args, message):
    r = _run(pentegg_cmd, *args)
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "error" in line and message in line, r.stderr


def test_trainer_refuses_a_job_larger_than_the_device():
    from pentegg.device import DeviceError, check_build
    from pentegg.golden import Config

    info = {
        "mode": "lowrank",
        "digits": "binomial",
        "update": "latent",
        "rank": 4,
        "latent_bits": 8,
        "max_layers": 2,
        "max_width": 16,
        "max_population": 32,
        "max_batch": 16,
        "batch_words": 64,
        "sample_bytes": 1024,
        "label_words": 64,
        "member_bytes": 256,
        "logit_bytes": 64,
    }
    cfg = Config(layers=(64, 16, 10), population=64)
    with pytest.raises(DeviceError) as e:
        check_build(info, cfg, batch=16, samples=100)
    msg = str(e.value)
    # a dataset larger than the sample memory is sent a batch at a time: the batch fits
    assert "width 64" in msg and "population 64" in msg and "batch of" not in msg
    assert "\n" not in msg
    with pytest.raises(DeviceError, match=r"a batch of 32 x 64 \(the sample memory holds 1024"):
        check_build(info, Config(layers=(64, 16, 10), population=32), batch=32, samples=100)
