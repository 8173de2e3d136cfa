"""The CLI foundation: --help, --version, info, and one-line errors with exit code 2."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pentegg import __version__
from pentegg.golden import SPEC_VERSION, Config


def run(cmd, *args):
    # no timeout: these calls cannot wait on anything (stdin is /dev/null), and a timeout
    # only measures how loaded the machine is
    return subprocess.run([*cmd, *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)


def test_version(pentegg_cmd):
    r = run(pentegg_cmd, "--version")
    assert r.returncode == 0 and r.stdout.strip() == f"pentegg {__version__}"


def test_help_lists_commands(pentegg_cmd):
    r = run(pentegg_cmd, "--help")
    assert r.returncode == 0
    for c in ("info", "train", "eval", "plot", "bench"):
        assert c in r.stdout


def test_info_prints_spec_version_and_every_default(pentegg_cmd):
    r = run(pentegg_cmd, "info")
    assert r.returncode == 0 and f"spec {SPEC_VERSION}" in r.stdout
    for name in Config().to_dict():
        assert name in r.stdout
    j = json.loads(run(pentegg_cmd, "info", "--json").stdout.strip().splitlines()[-1])
    assert j["spec"] == SPEC_VERSION
    assert j["defaults"]["population"] == Config().population
    assert j["defaults"]["act_shifts"] == list(Config().shifts())


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (
            ["info", "--nope"],
            "info: error: unrecognized arguments: --nope (see pentegg info --help)",
        ),
        (
            ["bench", "link", "--qq"],
            "link: error: unrecognized arguments: --qq (see pentegg bench link",
        ),
        (["no-such-command"], "invalid choice: 'no-such-command'"),
        (["train", "--steps", "x"], "--steps: 'x' is not an integer"),
        (["bench", "seeds", "1,1", "--task", "xor"], "a seed is given twice"),
        # refused before anything is built
        (["bench", "seeds", "0-4294967296", "--task", "xor"], "give 1..1000 seeds in 0..2^32-1"),
        (
            ["bench", "reference", "mlp", "--task", "xor", "--hidden", "x"],
            "--hidden: 'x' is not a comma-separated list of integers",
        ),
        (["compare", "--task", "xor", "--device", "serial:"], "expected serial:PORT[@BAUD]"),
        (["compare", "--task", "xor", "--device", "nosuch"], "unknown device 'nosuch'"),
        (
            ["compare", "--task", "xor", "--device", "firmware", "--steps", "65536"],
            "--steps 65536 out of range 1..65535",
        ),
    ],
)
def test_bad_flags_give_one_line_naming_the_problem_and_exit_2(pentegg_cmd, args, reason):
    r = run(pentegg_cmd, *args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "error" in r.stderr and reason in r.stderr, r.stderr


def test_a_bad_train_option_of_bench_seeds_points_to_a_help_that_exists(pentegg_cmd):
    """TRAIN_OPTIONS are pentegg train's: the error names that command's --help, which
    runs, not the usage pattern "pentegg bench seeds ... TRAIN_OPTIONS"."""
    r = run(pentegg_cmd, "bench", "seeds", "0-1", "--task", "xor", "--rank", "x")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.rstrip().endswith("(see pentegg train --help)"), r.stderr


def test_info_gives_the_range_steps_takes(pentegg_cmd):
    """`pentegg info`'s steps range is what --steps accepts (1..65535), not the step
    indices (0..65534)."""
    line = next(ln for ln in run(pentegg_cmd, "info").stdout.splitlines() if "steps " in ln)
    assert "range 1..65535" in line, line
    assert run(pentegg_cmd, "train", "--task", "xor", "--steps", "0").returncode == 2


ROOT = Path(__file__).resolve().parents[1]


def stand_in_venv(venv: Path, pentegg_script: str) -> Path:
    """An environment ``./run`` takes as prepared (its install stamp matches
    pyproject.toml, so it installs nothing) whose ``pentegg`` is ``pentegg_script``."""
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    stamp = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    (venv / ".pentegg-install").write_text(stamp + "\n")
    fake = venv / "bin" / "pentegg"
    fake.write_text(f"#!/bin/sh\n{pentegg_script}\n")
    fake.chmod(0o755)
    return venv


def test_run_takes_a_venv_given_by_its_absolute_path(tmp_path):
    """``PENTEGG_VENV=/abs/path ./run pentegg ...`` runs that environment's pentegg (its
    ``bin`` first on PATH), not one found elsewhere on PATH: a stand-in environment whose
    ``pentegg`` prints a marker."""
    venv = stand_in_venv(tmp_path / "venv", 'echo "stand-in pentegg $*"')
    r = subprocess.run(
        [str(ROOT / "run"), "pentegg", "--version"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PENTEGG_VENV": str(venv)},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "stand-in pentegg --version"


@pytest.mark.parametrize("via", ["path", "symlink"])
def test_run_keeps_the_callers_directory_and_resolves_a_relative_venv_from_it(tmp_path, via):
    """``./run pentegg`` runs in the directory it is called from, so that relative paths
    in pentegg's arguments (``--out runs/x``, ``csv:table.csv``) mean what they say there,
    and a relative ``PENTEGG_VENV`` is taken from there too: a stand-in pentegg prints its
    working directory. Called through a symlink elsewhere, it still finds the repository
    (its pyproject.toml, which the stand-in's install stamp matches)."""
    work = tmp_path / "work"
    stand_in_venv(work / "venv", 'echo "$PWD"')
    script = ROOT / "run"
    if via == "symlink":
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "pentegg-run").symlink_to(script)
        script = tmp_path / "bin" / "pentegg-run"
    r = subprocess.run(
        [str(script), "pentegg"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=work,
        env={**os.environ, "PENTEGG_VENV": "venv"},
    )
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).resolve() == work.resolve()
