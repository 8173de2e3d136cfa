"""``pentegg verilog`` and ``pentegg synth``: the RTL modules as Verilog, and their cost.

* ``pentegg verilog MODULE [--param NAME=VALUE ...] [-o FILE]`` writes standalone Verilog
  (module ``pentegg_MODULE``) whose header lists the ports; docs/rtl.md describes them.
* ``pentegg synth MODULE --device up5k|ecp5-85 [--param ...] [--json]`` synthesizes and
  places and routes through the YoWASP tools (found by the code, see rtl/toolchain.py) and
  prints LUT/FF/BRAM/DSP use and fmax; docs/resources.md describes the method.

Unknown modules, unknown parameters and out-of-range values are one-line errors, exit 2.
"""

from __future__ import annotations

import json
import sys

__all__ = ["HardwareError", "register"]


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
        help="target frequency given to nextpnr (default: 100 up5k, 250 ecp5-85)",
    )
    s.add_argument("--seed", type=int, default=1, help="nextpnr placement seed (default 1)")
    s.add_argument(
        "--build-dir", metavar="DIR", help="keep the tool inputs, logs and reports in DIR"
    )
    s.set_defaults(func=run_synth)


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


def _params(args) -> dict:
    catalog = _catalog()
    try:
        params = catalog.parse_params(args.module, args.param)
        catalog.validate(args.module, params)  # ranges are checked before any work
    except catalog.ParameterError as e:
        raise HardwareError(str(e)) from None
    return params


def run_verilog(args) -> int:
    params = _params(args)
    text = _catalog().to_verilog(args.module, params)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def run_synth(args) -> int:
    from .rtl.synth import SynthError, synthesize
    from .rtl.toolchain import ToolNotFound

    params = _params(args)
    if args.freq is not None and not args.freq > 0:
        raise HardwareError(f"--freq {args.freq} is not a positive frequency in MHz")
    try:
        r = synthesize(
            args.module,
            args.device,
            params,
            freq=args.freq,
            seed=args.seed,
            build_dir=args.build_dir,
        )
    except (SynthError, ToolNotFound) as e:
        raise HardwareError(str(e)) from None
    shown = ", ".join(f"{k}={v}" for k, v in r.params.items())
    print(f"module   {r.module} ({shown})")
    print(f"device   {r.device}")
    lut = "LUT4" if r.device == "up5k" else "LUT4 (a CCU2C or DPR16X4 counts 2)"
    print(f"{lut:<8} {r.luts}")
    print(f"FF       {r.ffs}")
    print(f"BRAM     {r.brams}")
    print(f"DSP      {r.dsps}")
    wrapped = ", ".join(f"{k} {v}" for k, v in r.wrapped_utilisation.items())
    if r.placed:
        target = f"nextpnr, target {r.target_mhz:g} MHz, seed {args.seed}"
        print(f"fmax     {r.fmax_mhz:.1f} MHz ({target})")
        print(f"placed   with the registered test wrapper: {wrapped}")
        cp = r.critical_path
        if cp:
            print(
                f"critical {cp['from']} -> {cp['to']}: {cp['delay_ns']} ns "
                f"({cp['logic_ns']} logic, {cp['routing_ns']} routing), {cp['levels']} levels"
            )
            print(f"  via    {', '.join(cp['through']) or '-'}")
            print(f"  rtl    {', '.join(cp['rtl']) or '-'}")
    else:
        print("fmax     none: the design does not fit the device")
        print(f"needs    with the registered test wrapper: {wrapped}")
    if r.flow != "default":
        print(
            "note     mapped with `-dff`: Yosys's default ABC9 run failed on this module "
            "(YoWASP Yosys 0.70; docs/resources.md)"
        )
    if args.json:
        print(json.dumps(r.as_json(), sort_keys=False))
    return 0
