"""Bad input to the training commands (train, --resume, eval, plot): a one-line error and
exit code 2, never a traceback, and a run directory left byte for byte as it was. Each
case here once reached the user as a Python exception (a CLI fuzz of this session's
review: hand-edited state metadata, a broken curve file, a CSV that changed under a run,
an output path that is not a plot)."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pentegg.golden import load_state, save_state


def run(cmd, *args, cwd=None):
    return subprocess.run(
        [*cmd, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=cwd
    )


def digest(d: Path) -> dict[str, str]:
    return {
        str(f.relative_to(d)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(d.rglob("*"))
        if f.is_file()
    }


def assert_one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def table(n=40, shift=0, features=2):
    rng = np.random.default_rng(0)
    rows = [",".join([*(f"f{j}" for j in range(features)), "label"])]
    for i in range(n):
        y = i % 2
        rows.append(
            ",".join([*(f"{rng.normal(y * 3, 1):.3f}" for _ in range(features)), str(y + shift)])
        )
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def runs(pentegg_cmd, tmp_path_factory):
    """An xor run and a csv run of two steps each, made once; tests copy them."""
    base = tmp_path_factory.mktemp("runs")
    (base / "t.csv").write_text(table())
    for name, task in (("xor", "xor"), ("csv", f"csv:{base / 't.csv'}")):
        r = run(
            pentegg_cmd, "train", "--task", task, "--steps", "2", "--population", "8",
            "--quiet", "--out", str(base / name),
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    return base


def copy_run(runs, tmp_path, name="xor"):
    d = tmp_path / name
    shutil.copytree(runs / name, d)
    return d


def resume(pentegg_cmd, d, *extra, task="xor"):
    return run(pentegg_cmd, "train", "--task", task, "--resume", str(d), "--quiet", *extra)


@pytest.mark.parametrize(
    "curve, needle",
    [
        ("step,wall_s,metric,score_mean,score_max,moved\n1,0.1,x,1,1,0\n", "not a number"),
        ("step,wall_s\n1,0.1\n", "is not 'step,wall_s,metric"),
        ("step,wall_s,metric,score_mean,score_max,moved\n1,0.1\n", "wrong number of cells"),
        (b"\xff\xfe\x00binary", "not a curve file"),
    ],
    ids=["non-numeric", "header", "ragged", "binary"],
)
def test_resume_refuses_a_broken_curve_and_changes_nothing(
    pentegg_cmd, runs, tmp_path, curve, needle
):
    d = copy_run(runs, tmp_path)
    f = d / "curve.csv"
    f.write_bytes(curve if isinstance(curve, bytes) else curve.encode())
    before = digest(d)
    assert_one_line_error(resume(pentegg_cmd, d, "--steps", "3"), "curve.csv", needle)
    assert digest(d) == before


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda m: m.pop("batch"), "no 'batch'"),
        (lambda m: m.update(batch="x"), "batch = 'x'"),
        (lambda m: m.update(batch=-4), "batch = -4"),
        (lambda m: m.update(wall_s="x"), "wall_s = 'x'"),
        (lambda m: m.update(steps_target=1.5), "steps_target = 1.5"),
    ],
    ids=["no-batch", "batch-text", "batch-negative", "wall-text", "steps-float"],
)
def test_resume_refuses_hand_edited_metadata_and_changes_nothing(
    pentegg_cmd, runs, tmp_path, edit, needle
):
    """A state file re-signed after its metadata was edited (its checksum is valid)."""
    d = copy_run(runs, tmp_path)
    state, meta = load_state(d / "state.pegg")
    edit(meta)
    save_state(d / "state.pegg", state, meta=meta)
    before = digest(d)
    assert_one_line_error(resume(pentegg_cmd, d, "--steps", "3"), "state.pegg", needle)
    assert digest(d) == before


def test_resume_below_the_runs_step_is_refused_and_changes_nothing(pentegg_cmd, runs, tmp_path):
    d = copy_run(runs, tmp_path)
    before = digest(d)
    assert_one_line_error(resume(pentegg_cmd, d, "--steps", "1"), "at step 2 already")
    assert digest(d) == before


def test_resume_on_a_changed_csv_is_refused_and_changes_nothing(pentegg_cmd, runs, tmp_path):
    d = copy_run(runs, tmp_path, "csv")
    before = digest(d)
    f = runs / "t.csv"
    saved = f.read_bytes()
    try:
        f.write_text(table(n=41))
        r = resume(pentegg_cmd, d, "--steps", "3", task=f"csv:{f}")
    finally:
        f.write_bytes(saved)
    assert_one_line_error(r, "is not the file the run trained on")
    assert digest(d) == before
    r = resume(pentegg_cmd, d, "--steps", "3", task=f"csv:{f}")  # the same file: resumes
    assert r.returncode == 0, r.stderr


def test_eval_of_a_csv_with_other_columns_or_labels_is_one_line(pentegg_cmd, runs, tmp_path):
    three = tmp_path / "three.csv"
    three.write_text(table(features=3))
    r = run(pentegg_cmd, "eval", "--task", f"csv:{three}", "--model", str(runs / "csv"))
    assert_one_line_error(r, "3 feature columns; the model was trained on 2")
    other = tmp_path / "other.csv"
    other.write_text(table(shift=1))  # labels 1 and 2; the model knows 0 and 1
    r = run(pentegg_cmd, "eval", "--task", f"csv:{other}", "--model", str(runs / "csv"))
    assert_one_line_error(r, "class label 2 is not one the model was trained on")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--out", ""], "empty directory name"),
        (["--out", "{run}/state.pegg/x"], "Not a directory"),
        (["--batch", "100000000"], "out of range 1..65535"),
        (["--split-seed", "-1"], "out of range"),
        (["--split-seed", "3"], "--split-seed applies to csv:PATH tasks, not xor"),
        (["--device", "firmware", "--hidden", "4096,4096,4096"], "past the protocol's 2**24"),
        (
            ["--update", "pentary", "--latent-bits", "3"],
            "(the default; set it with --latent-shift)",
        ),
    ],
    ids=[
        "out-empty",
        "out-under-a-file",
        "batch-huge",
        "split-seed-negative",
        "split-seed-not-csv",
        "firmware-latent-past-24-bits",
        "a-default-made-invalid",
    ],
)
def test_train_options_that_cannot_work_are_one_line(pentegg_cmd, runs, tmp_path, args, needle):
    d = copy_run(runs, tmp_path)
    before = digest(d)
    args = [a.replace("{run}", str(d)) for a in args]
    r = run(pentegg_cmd, "train", "--task", "xor", "--steps", "1", "--quiet", *args, cwd=tmp_path)
    assert_one_line_error(r, needle)
    assert digest(d) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["xor"]  # nothing written beside


@pytest.mark.parametrize(
    "args, needle",
    [
        (["{run}", "-o", ""], "must end in .png"),
        (["{run}", "-o", "{run}/curve.csv"], "must end in .png"),
        (["{run}", "-o", "{run}/sub.png"], "is a directory"),
        (["{run}/state.pegg"], "not a pentegg learning curve"),
        (["{run}", "-o", "/nonexistent/x.png"], "no directory /nonexistent"),
    ],
    ids=["empty", "onto-the-curve", "a-directory", "not-a-curve", "no-directory"],
)
def test_plot_refuses_what_is_not_a_plot_or_a_curve(pentegg_cmd, runs, tmp_path, args, needle):
    d = copy_run(runs, tmp_path)
    (d / "sub.png").mkdir()  # a directory named like a plot
    before = digest(d)
    r = run(pentegg_cmd, "plot", *(a.replace("{run}", str(d)) for a in args), cwd=tmp_path)
    assert_one_line_error(r, needle)
    assert digest(d) == before


def test_plot_ignores_a_run_json_that_is_not_pentegg(pentegg_cmd, runs, tmp_path):
    d = copy_run(runs, tmp_path)
    (d / "run.json").write_text("[]")
    r = run(pentegg_cmd, "plot", str(d), "-o", str(tmp_path / "c.svg"))
    assert r.returncode == 0, r.stderr
    svg = (tmp_path / "c.svg").read_text()
    assert svg.lstrip().startswith("<?xml")
    assert f"<!-- {d} -->" in svg  # the directory names its line
    assert not list(tmp_path.glob(".*tmp*"))


def test_resume_refuses_another_split_seed(pentegg_cmd, runs, tmp_path):
    d = copy_run(runs, tmp_path, "csv")
    before = digest(d)
    r = resume(pentegg_cmd, d, "--steps", "3", "--split-seed", "5", task=f"csv:{runs / 't.csv'}")
    assert_one_line_error(r, "--split-seed cannot change on --resume")
    assert digest(d) == before


def test_split_seed_on_a_non_csv_resume_names_the_task(pentegg_cmd, runs, tmp_path):
    d = copy_run(runs, tmp_path)
    before = digest(d)
    r = resume(pentegg_cmd, d, "--steps", "3", "--split-seed", "3")
    assert_one_line_error(r, "--split-seed applies to csv:PATH tasks, not xor")
    assert digest(d) == before


def test_a_changed_csv_on_resume_is_named_before_its_labels_are_read(pentegg_cmd, runs, tmp_path):
    """A new label in the changed file: the refusal is "not the file", not the label."""
    d = copy_run(runs, tmp_path, "csv")
    f = runs / "t.csv"
    saved = f.read_bytes()
    try:
        f.write_text(table(shift=3))  # labels 3 and 4: the run knows 0 and 1
        r = resume(pentegg_cmd, d, "--steps", "3", task=f"csv:{f}")
    finally:
        f.write_bytes(saved)
    assert_one_line_error(r, "is not the file the run trained on")


def test_resume_into_another_runs_out_directory_is_refused_and_changes_neither(
    pentegg_cmd, runs, tmp_path
):
    """``--resume A --out B`` where B holds another run: refused (a plain ``--out B``
    is), not B's run silently replaced by A's continuation."""
    a = copy_run(runs, tmp_path / "a")
    b = copy_run(runs, tmp_path / "b")
    before_a, before_b = digest(a), digest(b)
    r = resume(pentegg_cmd, a, "--steps", "3", "--out", str(b))
    assert_one_line_error(r, "already holds another run")
    assert digest(a) == before_a and digest(b) == before_b


def test_a_csv_run_resumes_with_its_file_named_by_another_path(pentegg_cmd, runs, tmp_path):
    """The run trained on ``csv:<abs path>``; resuming with the same file named relative
    to the working directory (another spelling) continues it: the file's sha256 is what
    identifies it."""
    d = copy_run(runs, tmp_path, "csv")
    r = run(
        pentegg_cmd, "train", "--task", "csv:./t.csv", "--resume", str(d), "--steps", "3",
        "--quiet", cwd=runs,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    state, _ = load_state(d / "state.pegg")
    assert state.step == 3
