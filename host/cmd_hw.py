"""``pentegg verilog`` and ``pentegg synth``: the RTL modules as Verilog, and their cost.

* ``pentegg verilog MODULE [--param NAME=VALUE ...] [-o FILE]`` writes standalone Verilog
  (module ``pentegg_MODULE``) whose header lists the ports; docs/rtl.md describes them.
* ``pentegg synth MODULE --device up5k|ecp5-85 [--param ...] [--json]`` synthesizes and
  places and routes through the YoWASP tools (found by the code, see rtl/toolchain.py) and
  prints LUT/FF/BRAM/SPRAM/DSP use and fmax; docs/resources.md describes the method.
  The ``accelerator`` and ``device`` start from the parameters of the device's board
  build (``up5k``: iCEBreaker, ``ecp5-85``: ULX3S-85F; ``--param`` overrides them) and
  also print ``step_ms``: the digits default step's cycles on that datapath, measured in
  Verilator (``pentegg bench accelerator``), at the fmax found (``--no-step`` skips it).
  The ``evaluator`` prints ``gmacs``: G inference-MAC/s, ``2 * lanes * throughput_ratio *
  fmax``, the ratio that of a digits evaluation with per-member inputs on its datapath,
  measured likewise (``--no-step`` skips it too).
  ``--endpoints`` adds how many timing endpoints arrive too late for each of several
  clocks, and the register groups with the most past the target; ``--breakdown`` where
  the LUTs and flip-flops go, block by block.

Unknown modules, unknown parameters and out-of-range values are one-line errors, exit 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = [
    "BOARD_OF_DEVICE",
    "HardwareError",
    "board_params",
    "checked_params",
    "register",
    "synth_params",
]

#: the board whose build parameters ``pentegg synth accelerator|device`` starts from
BOARD_OF_DEVICE = {"up5k": "icebreaker", "ecp5-85": "ulx3s-85f"}
#: the modules that are synthesized with their board's parameters, and get ``step_ms``
BOARD_MODULES = ("accelerator", "device")
#: the modules synthesized with a board build's parameters: module -> the build's core
BOARD_CORES = {"accelerator": "device", "device": "device", "compact": "compact"}


class HardwareError(Exception):
    """A user error in a hardware command (printed as one line, exit code 2)."""


def register(sub) -> None:
    from .rtl import MODULE_NAMES  # no Amaranth import: the CLI works without the hw extra

    modules = list(MODULE_NAMES)
    p = sub.add_parser(
        "verilog",
        help="write a hardware module as standalone Verilog",
        description="Elaborate an RTL module with the given parameters and write it as "
        "Verilog (module pentegg_MODULE); the header comment lists the ports.",
    )
    p.add_argument("module", choices=modules, metavar="MODULE", help=", ".join(modules))
    _param_arg(p)
    p.add_argument("-o", "--output", metavar="FILE", help="output file (default: stdout)")
    p.set_defaults(func=run_verilog)

    s = sub.add_parser(
        "synth",
        help="synthesize, place and route a module; print LUT/FF/BRAM/DSP and fmax",
        description="Synthesize MODULE with Yosys and place and route it with nextpnr "
        "(YoWASP packages), then print its resources and maximum clock frequency. "
        "docs/resources.md explains the method and holds the reference table.",
    )
    s.add_argument("module", choices=modules, metavar="MODULE", help=", ".join(modules))
    s.add_argument("--device", required=True, choices=("up5k", "ecp5-85"))
    _param_arg(s)
    s.add_argument("--json", action="store_true", help="end with one JSON object line")
    s.add_argument(
        "--freq",
        type=float,
        metavar="MHZ",
        help="target frequency given to nextpnr (default: 100 up5k, 250 ecp5-85; "
        "evaluator on ecp5-85: 125; accelerator and device on ecp5-85: 75)",
    )
    s.add_argument(
        "--seed",
        type=int,
        default=None,
        help="nextpnr placement seed (default: 1, then 2, 3, 4 while the router stalls "
        "on a placement it cannot route)",
    )
    s.add_argument(
        "--seeds",
        type=int,
        default=1,
        metavar="N",
        help="place and route the one netlist with N seeds (--seed .. --seed + N - 1, "
        "N 1..16) and report the median fmax, each seed's in the JSON (placements)",
    )
    s.add_argument(
        "--timing-weight",
        type=int,
        metavar="W",
        help="nextpnr's placer timing weight, 1..100 (default: nextpnr's, 10): how much "
        "the placement weighs a connection's criticality against its length",
    )
    s.add_argument(
        "--build-dir", metavar="DIR", help="keep the tool inputs, logs and reports in DIR"
    )
    s.add_argument(
        "--no-step",
        action="store_true",
        help="accelerator, device: do not simulate the digits step for step_ms; "
        "evaluator: do not simulate the per-member evaluation for gmacs",
    )
    s.add_argument(
        "--endpoints",
        action="store_true",
        help="also count the timing endpoints that arrive after the period of 50..150 MHz "
        "and list the register groups with the most past the target (JSON: late_endpoints)",
    )
    s.add_argument(
        "--breakdown",
        action="store_true",
        help="also say where the LUTs and flip-flops go, block by block of the module's "
        "first level of hierarchy, and each block's signals with the most LUTs (an "
        "estimate by cell name; JSON: breakdown)",
    )
    s.set_defaults(func=run_synth)


def check_build_dir(path: str | None) -> None:
    """A ``--build-dir`` that names a file (not a directory) is refused before any tool runs."""
    if path is not None and Path(path).exists() and not Path(path).is_dir():
        raise HardwareError(f"--build-dir {path}: exists and is not a directory")


def _param_arg(p) -> None:
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="elaboration parameter (repeatable); docs/rtl.md lists them per module",
    )


def _catalog():
    try:
        from .rtl import catalog
    except ImportError as e:
        raise HardwareError(
            f"the hardware extras are not installed ({e.name}): pip install -e '.[hw]'"
        ) from None
    return catalog


def board_params(module: str, device: str) -> dict:
    """The parameters of ``device``'s board build that ``module`` takes (empty for a
    module that is not synthesized with its board's parameters)."""
    if module not in BOARD_CORES:
        return {}
    from .boards import boards

    known = _catalog().MODULES[module].params
    board = boards()[BOARD_OF_DEVICE[device]]
    return {k: v for k, v in board.params_for(BOARD_CORES[module]).items() if k in known}


def checked_params(module: str, assignments: list[str], base: dict | None = None) -> dict:
    """``--param NAME=VALUE`` assignments over ``base``, checked against the module's
    parameters and ranges before any work (:class:`HardwareError`, one line)."""
    catalog = _catalog()
    try:
        params = {**(base or {}), **catalog.parse_params(module, assignments)}
        catalog.validate(module, params)
    except catalog.ParameterError as e:
        raise HardwareError(str(e)) from None
    return params


def synth_params(module: str, device: str, assignments: list[str]) -> dict:
    """The parameters ``pentegg synth MODULE --device DEVICE`` elaborates with: the board
    build's (:func:`board_params`), then the assignments."""
    return checked_params(module, assignments, board_params(module, device))


def _quiet_abandoned_elaboration() -> None:
    """An elaboration stopped by an error leaves submodules Amaranth never used; its
    UnusedElaboratable warnings at exit would bury the one-line error."""
    import warnings

    warnings.simplefilter("ignore")


def run_verilog(args) -> int:
    params = checked_params(args.module, args.param)
    try:
        text = _catalog().to_verilog(args.module, params)
    except ValueError as e:  # a limit only elaboration knows (e.g. of a sub-block)
        _quiet_abandoned_elaboration()
        raise HardwareError(str(e)) from None
    if args.output:
        try:
            with open(args.output, "w") as f:
                f.write(text)
        except OSError as e:  # no such directory, no permission, a directory
            raise HardwareError(f"--output {args.output}: cannot write it ({e.strerror})") from None
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def run_synth(args) -> int:
    from .rtl.synth import MAX_SEEDS, TIMING_WEIGHTS, SynthError, synthesize
    from .rtl.toolchain import ToolNotFound

    if args.no_step and args.module not in (*BOARD_MODULES, "evaluator"):
        only = ", ".join(BOARD_MODULES) + " and evaluator"
        raise HardwareError(f"--no-step applies to {only}, not {args.module}")
    params = synth_params(args.module, args.device, args.param)
    if board_params(args.module, args.device):
        board = BOARD_OF_DEVICE[args.device]
        print(
            f"params   the {board} build's (pentegg build --board {board}), --param overrides them"
        )
    if args.freq is not None and not 1 <= args.freq <= 1000:
        raise HardwareError(f"--freq {args.freq:g} is not a frequency in 1..1000 MHz")
    if not 1 <= args.seeds <= MAX_SEEDS:
        raise HardwareError(f"--seeds {args.seeds} is outside 1..{MAX_SEEDS}")
    if args.seed is not None and not 1 <= args.seed < 1 << 31:
        raise HardwareError(f"--seed {args.seed} is outside 1..{(1 << 31) - 1}")
    tw = args.timing_weight
    if tw is not None and tw not in TIMING_WEIGHTS:
        lo, hi = TIMING_WEIGHTS.start, TIMING_WEIGHTS.stop - 1
        raise HardwareError(f"--timing-weight {tw} is outside {lo}..{hi}")
    check_build_dir(args.build_dir)
    from .progress import stage_lines

    try:
        r = synthesize(
            args.module,
            args.device,
            params,
            freq=args.freq,
            seed=args.seed,
            seeds=args.seeds,
            build_dir=args.build_dir,
            endpoints=args.endpoints,
            breakdown=args.breakdown,
            timing_weight=tw,
            progress=stage_lines("synth"),
        )
    except (SynthError, ToolNotFound) as e:
        raise HardwareError(str(e)) from None
    except ValueError as e:  # a limit only elaboration for the device knows (SPRAM count)
        _quiet_abandoned_elaboration()
        raise HardwareError(str(e)) from None
    shown = ", ".join(f"{k}={v}" for k, v in r.params.items())
    print(f"module   {r.module} ({shown})")
    print(f"device   {r.device}")
    lut = "LUT4" if r.device == "up5k" else "LUT4 (a CCU2C or DPR16X4 counts 2)"
    print(f"{lut:<8} {r.luts}")
    print(f"FF       {r.ffs}")
    print(f"BRAM     {r.brams}")
    if r.device == "up5k":
        print(f"SPRAM    {r.sprams}")
    print(f"DSP      {r.dsps}")
    wrapped = ", ".join(f"{k} {v}" for k, v in r.wrapped_utilisation.items())
    if r.placed:
        if r.placements:
            first = r.seed
            last = first + args.seeds - 1
            target = f"nextpnr, target {r.target_mhz:g} MHz, median of seeds {first}..{last}"
            if r.timing_weight is not None:
                target += f", placer timing weight {r.timing_weight}"
            print(f"fmax     {r.fmax_mhz:.1f} MHz ({target})")
            for pl in r.placements:
                cp = pl["critical_path"] or {}
                where = f"{cp['from']} -> {cp['to']}, {cp['delay_ns']} ns" if cp else "-"
                print(f"  seed {pl['seed']:<3} {pl['fmax_mhz']:.1f} MHz ({where})")
        else:
            target = f"nextpnr, target {r.target_mhz:g} MHz, seed {r.seed}"
            if r.timing_weight is not None:
                target += f", placer timing weight {r.timing_weight}"
            if r.stalled_seeds:
                stalled = ", ".join(map(str, r.stalled_seeds))
                target += f"; the router stalled at seed {stalled}"
            print(f"fmax     {r.fmax_mhz:.1f} MHz ({target})")
        # with --seeds N the critical path and late endpoints below are one placement's,
        # the median's (the JSON's path_seed): say which
        of_seed = f" (seed {r.path_seed}'s)" if r.placements else ""
        print(f"placed   with the registered test wrapper: {wrapped}")
        cp = r.critical_path
        if cp:
            print(
                f"critical{of_seed} {cp['from']} -> {cp['to']}: {cp['delay_ns']} ns "
                f"({cp['logic_ns']} logic, {cp['routing_ns']} routing), {cp['levels']} levels"
            )
            print(f"  via    {', '.join(cp['through']) or '-'}")
            print(f"  rtl    {', '.join(cp['rtl']) or '-'}")
        print_late(r.late_endpoints, r.target_mhz, of_seed)
    else:
        print("fmax     none: the design does not fit the device")
        print(f"needs    with the registered test wrapper: {wrapped}")
    print_breakdown(r.breakdown)
    if r.flow != "default":
        how = {"abc": "the classic ABC", "abc9-dff": "ABC9 -dff"}.get(r.flow, r.flow)
        print(
            f"note     LUTs mapped with {how}: Yosys's default ABC9 run failed on this "
            "module (YoWASP Yosys 0.70; docs/resources.md)"
        )
    record = r.as_json()
    if args.module in BOARD_MODULES:
        record.update(_step_time(args, r))
    elif args.module == "evaluator":
        record.update(_gmacs(args, r))
    if args.json:
        print(json.dumps(record, sort_keys=False))
    return 0


def print_late(late: dict | None, target_mhz: float, of_seed: str = "") -> None:
    """``--endpoints``: how many endpoints arrive too late for each clock, and where
    (the groups past ``target_mhz``'s period); ``of_seed`` names the placement's seed
    when several were placed."""
    if not late:
        return
    counts = ", ".join(f"{n} at {f} MHz" for f, n in late["over_period"].items())
    label = f"late{of_seed}"
    print(f"{label:<8} of {late['endpoints']} timing endpoints, past the period: {counts}")
    n = late.get("from_pins")
    if n:
        print(
            f"  ({n} arrival{'s' if n != 1 else ''} later than the clock's critical path: "
            "a pin's (an input such as the reset, or an output), left out)"
        )
    if late["groups"]:
        period = 1000 / target_mhz
        print(f"  groups with the most past the target's period ({period:.2f} ns):")
    for name, n, worst in late["groups"]:
        print(f"  {n:>6}  {name} (worst {worst} ns)")


def print_breakdown(rows: list[dict] | None) -> None:
    """``--breakdown``: the wrapped netlist's cells by block (rtl/synth.py
    ``block_breakdown``), most LUTs first."""
    if not rows:
        return
    total = sum(r["luts"] for r in rows)
    print("blocks   the netlist for placement (module and test wrapper), each cell in the")
    print("         block its name carries, an estimate: LUT4, FF, BRAM, share of the LUT4,")
    print("         the signals with the most LUT4 (JSON: signals)")
    for r in rows:
        name = r["block"] + (f" x{r['instances']}" if r["instances"] > 1 else "")
        share = 100 * r["luts"] / total if total else 0.0
        top = ", ".join(f"{s['signal']} {s['luts']}" for s in r.get("signals", [])[:3])
        line = f"  {name:<24} {r['luts']:>7} {r['ffs']:>7} {r['brams']:>5} {share:>5.1f} %"
        print(line + (f"  ({top})" if top else ""))


def _why_not_simulated(args, r) -> str | None:
    """Why a figure that needs a simulation at fmax (``step_ms``, ``gmacs``) has none."""
    if args.no_step:
        return "not measured (--no-step)"
    if not r.placed:
        return "none: the design does not fit the device, so it has no fmax"
    return None


def _gmacs(args, r) -> dict:
    """The evaluator's ``gmacs``: G inference-MAC/s, ``2 * lanes * throughput_ratio *
    fmax``, with the ratio of one digits evaluation with per-member inputs measured in
    Verilator on the build's datapath (``gmacs_throughput_ratio``), or why not."""
    why = _why_not_simulated(args, r)
    if why is None:
        from .benchmarks import evaluator_bench

        print(
            "gmacs    simulating a digits evaluation with per-member inputs "
            "(pentegg bench evaluator --inputs member)..."
        )
        b = evaluator_bench.run_for_build(r.params, log=lambda s: print(s, file=sys.stderr))
        lanes, ratio = r.params["lanes"], b["throughput_ratio"]
        gmacs = 2 * lanes * ratio * r.fmax_mhz / 1e3
        ahead = ", its first round's noise made by the step before" if b["ahead"] else ""
        print(
            f"gmacs    {gmacs:.2f} G inference-MAC/s: 2 x {lanes} lanes x throughput_ratio "
            f"{ratio:.3f} (64-64-10, population 256, batch {b['batch']}, per-member inputs, "
            f"{b['cycles']} cycles{ahead}) x {r.fmax_mhz:.1f} MHz"
        )
        return {
            "gmacs": round(gmacs, 2),
            "gmacs_throughput_ratio": round(ratio, 4),
            "gmacs_cycles": b["cycles"],
            "gmacs_batch": b["batch"],
            "gmacs_ahead": b["ahead"],
            "gmacs_first_cycles": b["first_cycles"],
        }
    print(f"gmacs    {why}")
    return {"gmacs": None, "gmacs_throughput_ratio": None, "gmacs_note": why}


def _step_time(args, r) -> dict:
    """``step_cycles`` and ``step_ms`` (the digits default step at fmax), or why not."""
    why = _why_not_simulated(args, r)
    if why is None:
        from .benchmarks import accelerator_bench

        print("step     simulating the digits default step (pentegg bench accelerator)...")
        b = accelerator_bench.run_for_build(r.params, log=lambda s: print(s, file=sys.stderr))
        ms = b["cycles_per_step"] / (r.fmax_mhz * 1e3)
        print(
            f"step_ms  {ms:.1f} ms: {b['cycles_per_step']} cycles of the digits default "
            f"step (64-64-10, population 256, batch 256, throughput_ratio "
            f"{b['throughput_ratio']:.3f}) at {r.fmax_mhz:.1f} MHz"
        )
        return {
            "step_cycles": b["cycles_per_step"],
            "step_ms": round(ms, 2),
            "step_throughput_ratio": round(b["throughput_ratio"], 4),
        }
    print(f"step_ms  {why}")
    return {"step_cycles": None, "step_ms": None, "step_note": why}
