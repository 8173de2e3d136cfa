"""``pentegg bench evaluator`` (and, later, the other hardware suites): cycle counts of
the RTL in cycle-exact simulation, with throughput ratios against plain inference."""

from __future__ import annotations

import json
import sys

from .cli import UsageError

__all__ = ["add_accelerator_suite", "add_evaluator_suite", "add_link_suite"]

#: pair-lanes of the simulated device of ``bench link`` (``--device sim``)
LINK_DEFAULT_LANES = 8


def _layers(text: str) -> tuple[int, ...]:
    import argparse

    try:
        layers = tuple(int(v) for v in text.replace("-", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a network like 64-64-10") from None
    if not 2 <= len(layers) <= 9 or min(layers) < 1 or max(layers) > 1024:
        raise argparse.ArgumentTypeError(f"'{text}': give 2..9 widths (1..8 layers), each 1..1024")
    return layers


def add_evaluator_suite(suites) -> None:
    e = suites.add_parser(
        "evaluator",
        help="PopulationEvaluator cycles in cycle-exact simulation, against plain inference",
        description="Run one population evaluation of the PopulationEvaluator RTL in "
        "Verilator (random weights, inputs and step; outputs checked bit for bit against "
        "golden) and print its cycles, the ideal inference_MACs / (2 * lanes) and their "
        "ratio, with the lanes' cycles by activity.",
    )
    e.add_argument("--lanes", type=int, default=16, help="pair-lanes, 1..256 (default 16)")
    e.add_argument("--batch", type=int, default=16, help="samples, 1..1024 (default 16)")
    e.add_argument("--mode", choices=("lowrank", "quantized"), default="lowrank")
    e.add_argument("--inputs", choices=("shared", "member"), default="shared")
    e.add_argument("--layers", type=_layers, default=(64, 64, 10), help="default 64-64-10")
    e.add_argument("--population", type=int, default=256, help="even, 2..4096 (default 256)")
    e.add_argument("--rank", type=int, choices=(1, 4, 16, 64), default=4)
    e.add_argument("--group", type=int, help="lanes per finalizer (default: the build's)")
    e.add_argument(
        "--noise-buffers",
        type=int,
        choices=(1, 2),
        default=1,
        help="copies of the noise banks: 2 fills the next round during this one (default 1)",
    )
    e.add_argument(
        "--e-generators",
        type=int,
        choices=(1, 2, 3, 4),
        default=1,
        help="quantized mode: E generators filling that many lanes at once, at most "
        "--lanes (default 1)",
    )
    e.add_argument(
        "--noise-generators",
        type=int,
        default=1,
        help="low-rank mode: noise generators filling that many lanes at once, 1..min(16, "
        "--lanes) (default 1)",
    )
    e.add_argument(
        "--ahead",
        action="store_true",
        help="measure an evaluation within a run of ES steps: the one before (at the step "
        "before, other weights and inputs) makes its first round's noise while it runs "
        "(needs --noise-buffers 2)",
    )
    e.add_argument("--simulator", choices=("verilator", "icarus"), default="verilator")
    e.add_argument("--seed", type=int, default=0, help="data and simulation seed (default 0)")
    e.add_argument("--json", action="store_true", help="last line of stdout: one JSON object")
    e.set_defaults(func=run_evaluator)


def _check_sizes(args) -> None:
    """The options both hardware benchmarks share: --lanes, --batch, --population."""
    if not 1 <= args.lanes <= 256:
        raise UsageError(f"--lanes {args.lanes} out of range 1..256")
    if not 1 <= args.batch <= 1024:
        raise UsageError(f"--batch {args.batch} out of range 1..1024")
    if args.population % 2 or not 2 <= args.population <= 4096:
        raise UsageError(f"--population {args.population}: an even number in 2..4096")
    if not 0 <= args.seed < 1 << 32:
        raise UsageError(f"--seed {args.seed} out of range 0..4294967295")


def run_evaluator(args) -> int:
    _check_sizes(args)
    try:
        from .benchmarks import evaluator_bench, timing
    except ImportError as e:
        raise UsageError(f"the hardware extras are not installed ({e.name})") from None
    from .rtl.evaluator.params import EvaluatorParams

    try:  # the build's parameters, checked before anything is built
        EvaluatorParams(
            lanes=args.lanes,
            max_layers=len(args.layers) - 1,
            max_width=max(args.layers),
            rank=args.rank,
            mode=args.mode,
            group=args.group,
            noise_buffers=args.noise_buffers,
            e_generators=args.e_generators,
            noise_generators=args.noise_generators,
        ).check()
    except ValueError as e:
        raise UsageError(f"bad build parameter: {e}") from None
    if args.ahead and args.noise_buffers != 2:
        raise UsageError(
            "--ahead: the next step's noise is made in the second noise buffer: "
            "give --noise-buffers 2"
        )
    log = (lambda s: print(s, file=sys.stderr)) if args.json else print
    load = timing.load_average()
    res = evaluator_bench.run(
        lanes=args.lanes,
        batch=args.batch,
        mode=args.mode,
        inputs=args.inputs,
        layers=args.layers,
        population=args.population,
        rank=args.rank,
        group=args.group,
        noise_buffers=args.noise_buffers,
        e_generators=args.e_generators,
        noise_generators=args.noise_generators,
        ahead=args.ahead,
        simulator=args.simulator,
        seed=args.seed,
        log=log,
    )
    res["machine"] = timing.machine_record(load)
    act = res["activity"]
    if args.ahead:
        log(f"first evaluation {res['first_cycles']} cycles (made its own first-round noise)")
    log(
        f"cycles           {res['cycles']}"
        + ("  (the second: its noise made ahead)" if args.ahead else "")
    )
    log(
        f"ideal cycles     {res['ideal_cycles']:.0f}  (inference MACs {res['inference_macs']} / "
        f"(2 * {res['lanes']} lanes))"
    )
    log(f"throughput_ratio {res['throughput_ratio']:.3f}")
    total = max(1, res["cycles"])
    log(
        "lanes' cycles    "
        + ", ".join(f"{k} {v} ({100 * v / total:.1f} %)" for k, v in act.items())
    )
    log(f"bit-exact with golden: yes ({res['simulator']}, {res['wall_s']:.0f} s wall)")
    if args.json:
        print(json.dumps(res))
    return 0


def _batches(text: str) -> tuple[int, int]:
    import argparse

    try:
        a, b = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': give two batch sizes like 16,32") from None
    if not 1 <= a < b <= 1024:
        raise argparse.ArgumentTypeError(f"'{text}': two increasing batch sizes in 1..1024")
    return a, b


def add_accelerator_suite(suites) -> None:
    e = suites.add_parser(
        "accelerator",
        help="whole ES step cycles of the Accelerator (evaluation, shaping, update)",
        description="Run one ES step of the Accelerator RTL in Verilator at two batch sizes "
        "(checked bit for bit against golden), split its cycles into evaluation, shaping "
        "and update, extrapolate the evaluation to --batch and print cycles per step and "
        "throughput_ratio = inference MACs / (2 * lanes * cycles).",
    )
    e.add_argument("--lanes", type=int, default=16, help="pair-lanes, 1..256 (default 16)")
    e.add_argument("--batch", type=int, default=256, help="step batch, 1..1024 (default 256)")
    e.add_argument(
        "--sim-batches",
        type=_batches,
        default=(16, 32),
        help="the two batch sizes simulated (default 16,32)",
    )
    e.add_argument("--layers", type=_layers, default=(64, 64, 10), help="default 64-64-10")
    e.add_argument("--population", type=int, default=256, help="even, 2..4096 (default 256)")
    e.add_argument("--rank", type=int, choices=(1, 4, 16, 64), default=4)
    e.add_argument("--update", choices=("latent", "pentary"), default="latent")
    e.add_argument(
        "--update-lanes",
        type=int,
        help="Z entries per cycle, 1..max(64, widest layer + 1) (default: lanes, at most 64)",
    )
    e.add_argument("--pivots", type=int, default=1, help="shaper pairs per sweep, 1..16")
    e.add_argument(
        "--group",
        type=int,
        help="lanes per finalizer, 1..lanes (default: the evaluator's, 8 at ranks 1 and 4)",
    )
    e.add_argument("--seed", type=int, default=0, help="data and simulation seed (default 0)")
    e.add_argument("--json", action="store_true", help="last line of stdout: one JSON object")
    e.set_defaults(func=run_accelerator)


def run_accelerator(args) -> int:
    _check_sizes(args)
    most = max(64, max(args.layers) + 1)
    if args.update_lanes is not None and not 1 <= args.update_lanes <= most:
        raise UsageError(f"--update-lanes {args.update_lanes} out of range 1..{most}")
    if not 1 <= args.pivots <= min(16, args.population // 2):
        raise UsageError(f"--pivots {args.pivots} out of range 1..{min(16, args.population // 2)}")
    if args.group is not None and not 1 <= args.group <= args.lanes:
        raise UsageError(f"--group {args.group} out of range 1..{args.lanes} (the lanes)")
    try:
        from .benchmarks import accelerator_bench, timing
    except ImportError as e:
        raise UsageError(f"the hardware extras are not installed ({e.name})") from None
    log = (lambda s: print(s, file=sys.stderr)) if args.json else print
    load = timing.load_average()
    res = accelerator_bench.run(
        lanes=args.lanes,
        batch=args.batch,
        sim_batches=args.sim_batches,
        layers=args.layers,
        population=args.population,
        rank=args.rank,
        update=args.update,
        update_lanes=args.update_lanes,
        pivots=args.pivots,
        seed=args.seed,
        extra=None if args.group is None else {"group": args.group},
        log=log,
    )
    res["machine"] = timing.machine_record(load)
    total = res["cycles_per_step"]
    log(
        f"cycles per step  {total}  (batch {res['batch']}, extrapolated from batches "
        f"{res['extrapolated_from_batches']})"
    )
    for k in ("eval_cycles", "shaping_cycles", "update_cycles", "other_cycles"):
        log(f"  {k:<15}{round(res[k]):>10}  ({100 * res[k] / total:.1f} %)")
    log(
        f"ideal cycles     {res['ideal_cycles']:.0f}  (inference MACs / (2 * {res['lanes']} lanes))"
    )
    log(f"throughput_ratio {res['throughput_ratio']:.3f}")
    log(f"bit-exact with golden: yes (verilator, {res['wall_s']:.0f} s wall)")
    if args.json:
        print(json.dumps(res))
    return 0


def add_link_suite(suites) -> None:
    e = suites.add_parser(
        "link",
        help="ES steps through the host protocol on the simulated device; bytes per step "
        "and the predicted step time on each board",
        description="Open the simulated device (the accelerator's Verilog behind the "
        "framed protocol, built for each task's default configuration), load the dataset "
        "and the initial state, then time ES steps one run per step with the state read "
        "back after each (as compare does) and several steps in one run (as train "
        "--device does). Prints wall time, device cycles and link bytes per step and the "
        "predicted step time on each board: cycles / clock + bytes * 10 / baud.",
    )
    e.add_argument(
        "--tasks",
        default="xor,digits",
        help="comma-separated classification tasks (default xor,digits)",
    )
    e.add_argument(
        "--device",
        choices=("sim", "sim-compact"),
        default="sim",
        help="the simulated device: sim, the accelerator (default); sim-compact, the "
        "compact device (the iCEBreaker's core; slow: use --tasks xor)",
    )
    e.add_argument(
        "--lanes",
        type=int,
        help=f"pair-lanes, 1..256 (default {LINK_DEFAULT_LANES}; sim only)",
    )
    e.add_argument(
        "--steps",
        type=int,
        help="steps per way (default 20 for xor, 3 with sim-compact; 2 for digits)",
    )
    e.add_argument("--json", action="store_true", help="last line of stdout: one JSON object")
    e.set_defaults(func=run_link)


def run_link(args) -> int:
    tasks = [t.strip() for t in args.tasks.split(",")]
    if not all(tasks):
        raise UsageError(f"--tasks {args.tasks!r}: an empty task name (give e.g. xor,digits)")
    if args.lanes is not None and args.device != "sim":
        raise UsageError(f"--lanes applies to --device sim, not {args.device}")
    lanes = LINK_DEFAULT_LANES if args.lanes is None else args.lanes
    for t in tasks:
        if t not in ("xor", "digits") and not t.startswith("csv:"):
            raise UsageError(f"--tasks: '{t}' is not a classification task (xor, digits, csv:P)")
    if not 1 <= lanes <= 256:
        raise UsageError(f"--lanes {lanes} out of range 1..256")
    if args.steps is not None and not 1 <= args.steps <= 1000:
        raise UsageError(f"--steps {args.steps} out of range 1..1000")
    try:
        from .benchmarks import link_bench, timing
    except ImportError as e:
        raise UsageError(f"the hardware extras are not installed ({e.name})") from None
    log = (lambda s: print(s, file=sys.stderr)) if args.json else print
    load = timing.load_average()
    steps = {t: args.steps for t in tasks} if args.steps else None
    res = link_bench.run(tasks=tasks, steps=steps, lanes=lanes, device=args.device, log=log)
    res["machine"] = timing.machine_record(load)
    if args.json:
        print(json.dumps(res))
    return 0
