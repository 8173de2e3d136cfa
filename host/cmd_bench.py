"""``pentegg bench``: measurements that print figures and ratios (never pass/fail).

* ``bench golden``: the golden model's speed (benchmarks/golden_bench.py); every ratio is
  the median of per-round ratios from interleaved rounds (benchmarks/timing.py), printed
  with its spread.
* ``bench seeds SEEDS TRAIN_OPTIONS...``: ``pentegg train`` once per seed; mean, spread,
  steps and wall time of the result (the rows of docs/results.md).
* ``bench reference mlp``: the sklearn MLP reference row.
* ``bench reference float-eggroll``: the golden model and float Gaussian EGGROLL (JAX,
  jit-compiled; the optional extra ``reference``) train side by side on every seed,
  interleaved step by step: per-step times, their ratio, the golden step breakdown, the
  accuracy both reach (benchmarks/reference_timing.py).

Every JSON record carries ``"machine"`` (timing.machine_record): CPUs, versions, platform,
the load average at start and end, and the BLAS thread count with its source; the golden
and reference benchmarks add the golden engine (Numba version, threads, threading layer)
and the commit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys

from .cli import ArgParser, UsageError

DEFAULT_ROUNDS, MIN_ROUNDS, MAX_ROUNDS = 15, 3, 1000


def register(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmarks: figures and ratios, no pass/fail",
        description="Measure speed and learning: the golden model (golden, seeds, "
        "reference) and the hardware in cycle-exact simulation (evaluator, accelerator, "
        "link). Figures and ratios, no pass/fail.",
    )
    suites = p.add_subparsers(dest="suite", metavar="SUITE", parser_class=ArgParser, required=True)

    g = suites.add_parser("golden", help="population throughput, naive ES, step breakdown")
    g.add_argument("--batch", type=int, default=256, help="samples per member (default 256)")
    g.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help=f"interleaved rounds, {MIN_ROUNDS}..{MAX_ROUNDS} (default {DEFAULT_ROUNDS}): "
        "every round times each side of a comparison once; ratios are the median of the "
        "per-round ratios, printed with their spread",
    )
    g.add_argument(
        "--blas-threads",
        type=int,
        metavar="N",
        help="limit numpy's BLAS to N threads while measuring (1..256; needs threadpoolctl); "
        "default: as configured (the JSON record's machine.blas says how many)",
    )
    # replaced by --rounds: refused with a one-line error saying so
    g.add_argument("--repeat", help=argparse.SUPPRESS)
    g.add_argument(
        "--json",
        action="store_true",
        help="print the figures as one JSON object on the last line of stdout",
    )
    g.set_defaults(func=run_golden)

    s = suites.add_parser(
        "seeds",
        help="pentegg train over several seeds, aggregated",
        description="Run `pentegg train TRAIN_OPTIONS --seed S` for every "
        "seed S and print mean, standard deviation, min and max of the "
        "metric, steps and wall time.",
    )
    s.add_argument("seeds", type=_seed_list, help="seeds: 0-4 or 0,3,7")
    s.add_argument(
        "train_options",
        nargs=r"...",
        metavar="TRAIN_OPTIONS",
        help="options of pentegg train (without --seed/--out/--resume)",
    )
    s.add_argument("--json", action="store_true", help="last line of stdout: one JSON object")
    s.set_defaults(func=run_seeds)

    r = suites.add_parser(
        "reference",
        help="backprop MLP, or golden vs float Gaussian EGGROLL side by side",
        description="Reference learners on a classification task's int8 inputs and "
        "split. mlp: sklearn MLPClassifier. float-eggroll: float Gaussian EGGROLL "
        "(--backend jax: jit-compiled JAX, the optional extra 'reference'; numpy: "
        "benchmarks/float_eggroll.py) and the golden model train side by side on "
        "every seed for --steps steps, interleaved step by step: per-step times "
        "(medians), their per-round ratio golden/float, the golden step breakdown, "
        "the test accuracy both reach. JAX compile time is reported apart.",
    )
    r.add_argument("method", choices=("mlp", "float-eggroll"))
    r.add_argument("--task", default="digits", help="digits | xor | csv:PATH")
    r.add_argument("--seeds", type=_seed_list, default=[0, 1, 2, 3, 4])
    r.add_argument("--hidden", default="64", help="hidden widths, e.g. 64 or 64,32")
    r.add_argument("--steps", type=int, default=1500, help="float-eggroll ES steps")
    r.add_argument("--population", type=int, default=256)
    r.add_argument("--rank", type=int, default=4)
    r.add_argument("--batch", type=int, default=256)
    r.add_argument(
        "--backend",
        choices=("jax", "numpy"),
        default="jax",
        help="float-eggroll implementation (default jax)",
    )
    r.add_argument(
        "--breakdown-rounds",
        type=int,
        default=100,
        help="float-eggroll: phase-timed golden steps per seed after training (default 100)",
    )
    r.add_argument("--json", action="store_true", help="last line of stdout: one JSON object")
    r.set_defaults(func=run_reference)

    from .bench_hw import add_accelerator_suite, add_evaluator_suite, add_link_suite

    add_evaluator_suite(suites)
    add_accelerator_suite(suites)
    add_link_suite(suites)


def _seed_list(text: str) -> list[int]:
    bad = argparse.ArgumentTypeError(f"'{text}': give 1..1000 seeds in 0..2^32-1")
    try:
        if "-" in text:
            a, b = (int(v) for v in text.split("-", 1))
            if not 0 <= a <= b < 1 << 32 or b - a >= 1000:
                raise bad  # (checked before the list is built)
            seeds = list(range(a, b + 1))
        else:
            seeds = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a seed list like 0-4 or 0,3,7") from None
    if not seeds or len(seeds) > 1000 or min(seeds) < 0 or max(seeds) >= 1 << 32:
        raise bad
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"'{text}': a seed is given twice")
    return seeds


def _summary(values: list[float]) -> dict:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def _report(
    title: str, runs: list[dict], as_json: bool, extra: dict, load_at_start: list[float] | None
) -> int:
    """Print the summary of ``runs`` (and with ``as_json`` the JSON record, which carries
    the machine record with the load average at ``load_at_start`` and now)."""
    from .benchmarks import timing

    out = {
        **extra,
        "runs": runs,
        "value": _summary([r["value"] for r in runs]),
        "steps": _summary([float(r["steps"]) for r in runs]),
        "wall_s": _summary([float(r["wall_s"]) for r in runs]),
    }
    if "solved" in runs[0]:
        out["solved"] = sum(bool(r["solved"]) for r in runs)
    v, st, w = out["value"], out["steps"], out["wall_s"]
    log = (lambda m: print(m, file=sys.stderr)) if as_json else print
    log(f"{title}: {len(runs)} seeds")
    log(f"  value  {v['mean']:.4f} +- {v['std']:.4f}  (min {v['min']:.4f}, max {v['max']:.4f})")
    log(f"  steps  {st['mean']:.1f} (min {st['min']:.0f}, max {st['max']:.0f})")
    log(f"  wall   {w['mean']:.1f} s (min {w['min']:.1f}, max {w['max']:.1f})")
    if "solved" in out:
        log(f"  solved {out['solved']}/{len(runs)}")
    out["machine"] = {**timing.machine_record(load_at_start), **extra.get("machine", {})}
    log(timing.describe_machine(out["machine"]))
    if as_json:
        print(json.dumps(out))
    return 0


def run_seeds(args) -> int:
    from .benchmarks.timing import load_average
    from .cmd_train import add_train_parser, train_record

    load = load_average()
    opts = [o for o in args.train_options if o != "--"]
    if "--json" in opts:  # the remainder swallows bench's own --json
        opts = [o for o in opts if o != "--json"]
        args.json = True
    for bad in ("--seed", "--out", "--resume"):
        if bad in opts:
            raise UsageError(f"{bad} is set by bench seeds; remove it from TRAIN_OPTIONS")
    sub = ArgParser(prog="pentegg bench seeds").add_subparsers(parser_class=ArgParser)
    tp = add_train_parser(sub)
    tp.prog = "pentegg bench seeds ... TRAIN_OPTIONS"
    tp.help_command = "pentegg train"  # TRAIN_OPTIONS are train's
    runs = []
    for s in args.seeds:
        targs = tp.parse_args([*opts, "--seed", str(s), "--quiet", "--json"])
        rec = train_record(targs)
        print(
            f"seed {s}: {rec['metric']} {rec['value']:.4f} steps {rec['steps']} "
            f"wall {rec['wall_s']:.1f} s",
            file=sys.stderr if args.json else sys.stdout,
        )
        runs.append(rec)
    return _report(
        "pentegg train " + " ".join(opts),
        runs,
        args.json,
        {"command": "pentegg train " + " ".join(opts), "seeds": args.seeds},
        load,
    )


def run_reference(args) -> int:
    from .benchmarks import reference
    from .benchmarks.timing import load_average
    from .cmd_train import _int_list
    from .tasks import ClassificationTask, get_task

    load = load_average()

    task = get_task(args.task)
    if not isinstance(task, ClassificationTask):
        raise UsageError(f"bench reference: task {task.name} is not a classification task")
    try:
        hidden = _int_list(args.hidden)
    except argparse.ArgumentTypeError as e:
        raise UsageError(f"--hidden: {e}") from None
    if args.method == "float-eggroll":
        return _float_eggroll(args, task, hidden, load)
    runs = []
    for s in args.seeds:
        r = {"seed": s, **reference.mlp(task, hidden, s)}
        print(
            f"seed {s}: value {r['value']:.4f} steps {r['steps']} wall {r['wall_s']:.1f} s",
            file=sys.stderr if args.json else sys.stdout,
        )
        runs.append(r)
    return _report(
        f"{args.method} on {task.name}",
        runs,
        args.json,
        {"method": args.method, "task": task.name, "hidden": list(hidden)},
        load,
    )


def engine_record() -> dict:
    """The golden engine's part of the machine record: Numba (version, threads, threading
    layer, or None when it is not installed) and the commit measured."""
    rec: dict = {}
    try:
        import numba

        rec["numba"] = numba.__version__
        rec["numba_threads"] = numba.get_num_threads()
        rec["numba_threading_layer"] = numba.config.THREADING_LAYER
    except ImportError:
        rec["numba"] = None
    try:
        rec["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=os.path.dirname(os.path.abspath(__file__)),
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rec["commit"] = None
    return rec


def _float_eggroll(args, task, hidden, load) -> int:
    from .benchmarks.reference_timing import side_by_side
    from .benchmarks.timing import format_summary
    from .cmd_train import _config_from_args, add_train_parser
    from .golden import engine

    if not 1 <= args.steps <= 65534:
        raise UsageError(f"--steps {args.steps} out of range 1..65534")
    if not 0 <= args.breakdown_rounds <= 10000:
        raise UsageError(f"--breakdown-rounds {args.breakdown_rounds} out of range 0..10000")
    if not 1 <= args.batch <= 65536:
        raise UsageError(f"--batch {args.batch} out of range 1..65536")
    backend_info: dict = {}
    if args.backend == "jax":
        from .benchmarks.float_eggroll_jax import MissingJax
        from .benchmarks.float_eggroll_jax import backend_info as jax_info

        try:
            backend_info = jax_info()
        except MissingJax as e:
            raise UsageError(str(e)) from None
    sub = ArgParser(prog="pentegg bench reference").add_subparsers(parser_class=ArgParser)
    tp = add_train_parser(sub)
    opts = ["--task", args.task, "--hidden", args.hidden, "--population", str(args.population)]
    opts += ["--rank", str(args.rank), "--batch", str(args.batch)]

    def golden_cfg(seed: int):
        return _config_from_args(tp.parse_args([*opts, "--seed", str(seed)]), task)

    golden_cfg(args.seeds[0])  # a bad population or rank is a one-line error before any work
    log = (lambda m: print(m, file=sys.stderr)) if args.json else print
    log(
        f"golden ({engine.active(golden_cfg(args.seeds[0]))} engine) vs float EGGROLL "
        f"({args.backend}), {task.name}, layers {golden_cfg(0).layers}, population "
        f"{args.population}, rank {args.rank}, batch {args.batch}, {args.steps} steps x "
        f"{len(args.seeds)} seeds, interleaved"
    )
    res = side_by_side(
        task,
        golden_cfg,
        args.backend,
        args.seeds,
        args.steps,
        args.batch,
        breakdown_rounds=args.breakdown_rounds,
        log=log,
    )
    machine = engine_record()
    machine["golden_engine"] = engine.active(golden_cfg(args.seeds[0]))
    machine["float_backend"] = backend_info or {"backend": args.backend}
    sp = res["step_ratio_spread"]
    log(
        f"per ES step (median of {res['rounds']} interleaved rounds): golden "
        f"{res['golden_step_ms']:.2f} ms, float {res['float_step_ms']:.2f} ms; ratio "
        f"golden/float {format_summary(sp)}"
    )
    b = res["golden_breakdown_ms"]
    if b:
        log(
            f"golden step breakdown (median of {res['breakdown_rounds']}): noise "
            f"{b['noise_ms']:.2f} + forward {b['forward_ms']:.2f} + scoring+shaping "
            f"{b['scoring_ms']:.2f} + update {b['update_ms']:.2f} = {b['sum_ms']:.2f} ms"
        )
    log(
        f"warm-up apart: float compile {', '.join(f'{c:.1f}' for c in res['float_compile_s'])}"
        f" s; golden first step {', '.join(f'{c:.2f}' for c in res['golden_warmup_s'])} s"
    )
    extra = {
        "method": args.method,
        "task": task.name,
        "hidden": list(hidden),
        **{k: v for k, v in res.items() if k != "runs"},
        "golden_value": _summary([r["golden_value"] for r in res["runs"]]),
        "machine": machine,
    }
    return _report(
        f"float-eggroll ({args.backend}) on {task.name}", res["runs"], args.json, extra, load
    )


def run_golden(args) -> int:
    if args.repeat is not None:
        raise UsageError(
            "--repeat (best of N, one side after the other) was replaced by --rounds N "
            f"(interleaved rounds, median and spread; {MIN_ROUNDS}..{MAX_ROUNDS})"
        )
    if not 1 <= args.batch <= 4096:
        raise UsageError(f"--batch {args.batch} out of range 1..4096")
    if not MIN_ROUNDS <= args.rounds <= MAX_ROUNDS:
        raise UsageError(
            f"--rounds {args.rounds} out of range {MIN_ROUNDS}..{MAX_ROUNDS} "
            "(the median and spread need at least 3 rounds)"
        )
    if args.blas_threads is not None and not 1 <= args.blas_threads <= 256:
        raise UsageError(f"--blas-threads {args.blas_threads} out of range 1..256")
    from .benchmarks import golden_bench, timing

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(timing.blas_limit(args.blas_threads))
        except RuntimeError as e:
            raise UsageError(f"--blas-threads: {e}") from None
        load = timing.load_average()
        log = (lambda s: print(s, file=sys.stderr)) if args.json else print
        res = golden_bench.run(batch=args.batch, rounds=args.rounds, log=log)
        res["machine"] = timing.machine_record(load)  # inside the limit: the threads in use
        res["machine"].update(engine_record())
    log(timing.describe_machine(res["machine"]))
    note = timing.contention_note(res["machine"])
    if note:
        log(note)
    if args.json:
        print(json.dumps(res))
    return 0
