"""pentegg train / eval / plot: JSON output, determinism, resume, checkpoints, errors."""

import json
import subprocess

import pytest

from pentegg.golden import load_state, weights_sha256

SMALL = ["--population", "16", "--hidden", "8", "--batch", "64", "--quiet"]


def run(cmd, *args, check=True):
    # no timeout: a run has a fixed number of steps and stdin is /dev/null, so it cannot
    # hang; a timeout would only fail on a loaded machine
    r = subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if check:
        assert r.returncode == 0, r.stderr
    return r


def last_json(r):
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_json_last_line_has_the_documented_fields(pentegg_cmd, tmp_path):
    r = run(
        pentegg_cmd,
        "train",
        "--task",
        "digits",
        "--steps",
        "6",
        *SMALL,
        "--json",
        "--out",
        tmp_path / "run",
    )
    rec = last_json(r)
    for k in (
        "task",
        "mode",
        "steps",
        "population",
        "rank",
        "seed",
        "metric",
        "value",
        "wall_s",
        "weights_sha256",
    ):
        assert k in rec
    assert rec["task"] == "digits" and rec["steps"] == 6 and rec["population"] == 16
    assert rec["metric"] == "test_accuracy" and 0 <= rec["value"] <= 1
    st, _ = load_state(tmp_path / "run" / "state.pegg")
    assert rec["weights_sha256"] == weights_sha256(st) and st.step == 6
    files = {p.name for p in (tmp_path / "run").iterdir()}
    assert {"state.pegg", "curve.csv", "curve.png", "run.json"} <= files
    assert not [f for f in files if f.endswith(".tmp")]


def test_a_runs_files_take_the_umasks_permissions(pentegg_cmd, tmp_path):
    """state.pegg, curve.csv and run.json are written through temporary files (renamed
    into place); they get the permissions any new file gets under the umask (0o644 under
    022), as curve.png does, not mkstemp's owner-only 0o600; a file's mode set by the
    user is kept when a --resume rewrites it."""
    import os

    r = subprocess.run(
        [*pentegg_cmd, "train", "--task", "xor", "--steps", "2", "--population", "8",
         "--quiet", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.umask(0o022),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "run").iterdir()}
    assert {"state.pegg", "curve.csv", "run.json"} <= set(modes)
    assert modes == dict.fromkeys(modes, 0o644), modes
    # a mode the user gave a file stays through the rewrites of a --resume
    (tmp_path / "run" / "state.pegg").chmod(0o600)
    r = subprocess.run(
        [*pentegg_cmd, "train", "--task", "xor", "--steps", "3", "--quiet",
         "--resume", str(tmp_path / "run")],
        capture_output=True, text=True, stdin=subprocess.DEVNULL,
        preexec_fn=lambda: os.umask(0o022),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run" / "state.pegg").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "run" / "run.json").stat().st_mode & 0o777 == 0o644


def test_same_seed_same_bits_different_seed_different_bits(pentegg_cmd):
    def trained_sha(seed):
        args = ["train", "--task", "digits", "--steps", "5", *SMALL, "--json", "--seed", seed]
        return last_json(run(pentegg_cmd, *args))["weights_sha256"]

    assert trained_sha(3) == trained_sha(3) != trained_sha(4)


@pytest.mark.parametrize("task", ["digits", "cartpole"])
def test_resume_ends_bit_identical_to_an_uninterrupted_run(pentegg_cmd, tmp_path, task):
    extra = ["--eval-every", "1000"] if task == "cartpole" else []
    full = last_json(
        run(
            pentegg_cmd,
            "train",
            "--task",
            task,
            "--steps",
            "12",
            *SMALL,
            *extra,
            "--checkpoint-every",
            "4",
            "--json",
            "--out",
            tmp_path / "full",
        )
    )
    run(
        pentegg_cmd,
        "train",
        "--task",
        task,
        "--steps",
        "5",
        *SMALL,
        *extra,
        "--checkpoint-every",
        "4",
        "--json",
        "--out",
        tmp_path / "part",
    )
    assert load_state(tmp_path / "part" / "state.pegg")[0].step == 5
    resumed = last_json(
        run(
            pentegg_cmd,
            "train",
            "--task",
            task,
            "--steps",
            "12",
            "--quiet",
            "--json",
            "--resume",
            tmp_path / "part",
        )
    )
    assert resumed["steps"] == 12
    assert resumed["weights_sha256"] == full["weights_sha256"]
    a, _ = load_state(tmp_path / "full" / "state.pegg")
    b, _ = load_state(tmp_path / "part" / "state.pegg")
    for va, vb in zip(a.latent, b.latent, strict=True):
        assert (va == vb).all()


def test_resume_refuses_to_change_the_configuration(pentegg_cmd, tmp_path):
    run(pentegg_cmd, "train", "--task", "digits", "--steps", "2", *SMALL, "--out", tmp_path / "r")
    r = run(
        pentegg_cmd,
        "train",
        "--task",
        "digits",
        "--steps",
        "4",
        "--population",
        "32",
        "--resume",
        tmp_path / "r",
        check=False,
    )
    assert r.returncode == 2 and "--population cannot change on --resume" in r.stderr
    r = run(pentegg_cmd, "train", "--task", "xor", "--resume", tmp_path / "r", check=False)
    assert r.returncode == 2 and "trained task 'digits'" in r.stderr


def test_out_refuses_to_overwrite_an_existing_run(pentegg_cmd, tmp_path):
    run(pentegg_cmd, "train", "--task", "xor", "--steps", "2", "--quiet", "--out", tmp_path / "r")
    before = (tmp_path / "r" / "state.pegg").read_bytes()
    r = run(
        pentegg_cmd,
        "train",
        "--task",
        "xor",
        "--steps",
        "2",
        "--quiet",
        "--out",
        tmp_path / "r",
        check=False,
    )
    assert r.returncode == 2 and "already holds a run" in r.stderr
    assert (tmp_path / "r" / "state.pegg").read_bytes() == before


def test_eval_reproduces_the_training_metric(pentegg_cmd, tmp_path):
    tr = last_json(
        run(pentegg_cmd, "train", "--task", "xor", "--json", "--quiet", "--out", tmp_path / "x")
    )
    ev = last_json(run(pentegg_cmd, "eval", "--task", "xor", "--model", tmp_path / "x", "--json"))
    assert ev["value"] == tr["value"] == 1.0
    assert ev["weights_sha256"] == tr["weights_sha256"]
    r = run(pentegg_cmd, "eval", "--task", "digits", "--model", tmp_path / "x", check=False)
    assert r.returncode == 2 and "needs 64 -> 10" in r.stderr


def test_eval_refuses_a_corrupt_model(pentegg_cmd, tmp_path):
    p = tmp_path / "bad.pegg"
    p.write_bytes(b"PENTEGG\0garbage" + bytes(64))
    r = run(pentegg_cmd, "eval", "--task", "xor", "--model", p, check=False)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "corrupt" in r.stderr or "version" in r.stderr


def test_plot_overlays_runs(pentegg_cmd, tmp_path):
    for s in (0, 1):
        run(
            pentegg_cmd,
            "train",
            "--task",
            "xor",
            "--seed",
            s,
            "--quiet",
            "--out",
            tmp_path / f"r{s}",
        )
    out = tmp_path / "both.png"
    run(pentegg_cmd, "plot", tmp_path / "r0", tmp_path / "r1", "-o", out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # both runs are in it, each with its label (matplotlib's SVG names each text)
    svg = tmp_path / "both.svg"
    r = run(pentegg_cmd, "plot", tmp_path / "r0", tmp_path / "r1", "-o", svg)
    assert "(2 runs)" in r.stdout
    text = svg.read_text()
    for s in (0, 1):
        assert f"<!-- r{s} (xor, lowrank, latent, rank, seed {s}) -->" in text
    r = run(pentegg_cmd, "plot", tmp_path / "nope", check=False)
    assert r.returncode == 2 and "no curve.csv" in r.stderr


@pytest.mark.parametrize(
    "args, msg",
    [
        (["--task", "mnist"], "unknown task 'mnist'"),
        (["--task", "digits", "--population", "7"], "population=7"),
        (["--task", "digits", "--rank", "3"], "rank=3"),
        (["--task", "digits", "--steps", "0"], "must be at least 1"),
        (["--task", "digits", "--steps", "70000"], "out of range 1..65535"),
        (["--task", "digits", "--hidden", "6x"], "comma-separated"),
        (["--task", "digits", "--seed", "-1"], "out of range"),
        (["--task", "digits", "--mode", "full"], "invalid choice"),
        (["--task", "digits", "--resume", "/nonexistent/run"], "not a directory"),
        (["--task", "xor", "--device", "sim", "--lanes", "999"], "999 out of range 1..256"),
        (["--task", "xor", "--device", "sim", "--lanes", "0"], "must be at least 1"),
    ],
)
def test_bad_train_options_one_line_exit_2(pentegg_cmd, args, msg):
    r = run(pentegg_cmd, "train", *args, check=False)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_plot_gives_runs_of_another_metric_a_row_of_their_own(tmp_path):
    """An accuracy run and a CartPole return run are not drawn on one y axis: each
    metric gets its own row of panels (the PNG is twice as tall), runs of one metric
    share theirs."""
    import struct

    from pentegg.plot import plot_curves

    curve = [{"step": s, "wall_s": s / 10, "metric": s / 4} for s in range(4)]

    def height(metrics):
        out = tmp_path / f"{len(set(metrics))}.png"
        plot_curves([("a", curve), ("b", curve)], out, metrics)
        return struct.unpack(">I", out.read_bytes()[20:24])[0]

    one = height(["test_accuracy", "test_accuracy"])
    assert height(["test_accuracy", "mean_return"]) == 2 * one
    assert height("test_accuracy") == one


def test_plot_cli_puts_a_curve_without_its_run_json_beside_the_metric_named(pentegg_cmd, tmp_path):
    """`pentegg plot` reads each run's metric from its run.json (beside a curve.csv given
    by path too); a curve without one joins the one metric the others name (one row of
    panels), runs naming two metrics get two rows, and a curve without a run.json beside
    two metrics a third."""
    import struct

    def make(name, metric=None):
        d = tmp_path / name
        d.mkdir()
        rows = ["step,wall_s,metric,score_mean,score_max,moved"]
        rows += [f"{s},{s / 10},{s / 4},0,0,0" for s in range(1, 4)]
        (d / "curve.csv").write_text("\n".join(rows) + "\n")
        if metric:
            result = dict(task="t", mode="lowrank", update="latent", shaping="rank", seed=0)
            (d / "run.json").write_text(json.dumps({"result": {**result, "metric": metric}}))
        return d

    acc, bare, ret = make("acc", "test_accuracy"), make("bare"), make("ret", "mean_return")

    def height(*runs):
        out = tmp_path / "p.png"
        r = run(pentegg_cmd, "plot", *runs, "-o", out)
        assert r.returncode == 0, r.stderr
        return struct.unpack(">I", out.read_bytes()[20:24])[0]

    one = height(acc, bare / "curve.csv")
    assert height(acc / "curve.csv", ret) == 2 * one
    assert height(acc, bare, ret) == 3 * one  # which of the two is bare's? a row of its own
