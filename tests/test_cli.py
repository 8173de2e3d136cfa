"""The CLI foundation: --help, --version, info, and one-line errors with exit code 2."""

import json
import subprocess

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
    "args", [["--bogus"], ["info", "--nope"], ["no-such-command"], ["train", "--steps", "x"]]
)
def test_bad_flags_give_one_line_and_exit_2(pentegg_cmd, args):
    r = run(pentegg_cmd, *args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "error" in r.stderr and "Traceback" not in r.stderr
