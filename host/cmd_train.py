"""``pentegg train``, ``pentegg eval`` and ``pentegg plot``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .cli import UsageError

# model flags -> Config field, parser
MODEL_FLAGS = {
    "population": int,
    "rank": int,
    "mode": str,
    "shaping": str,
    "update": str,
    "digits": str,
    "sigma_shift": int,
    "tau": int,
    "latent_bits": int,
    "latent_shift": int,
    "margin": int,
    "init": str,
}


def _int_list(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a comma-separated list of integers"
        ) from None
    return vals


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"{v} must be at least 1")
    return v


#: pair-lanes a simulated accelerator may have: the evaluator's range
#: (rtl/evaluator/params.py checks the same at elaboration)
LANES_RANGE = (1, 256)


def _lanes(text: str) -> int:
    v = _positive(text)
    if v > LANES_RANGE[1]:
        raise argparse.ArgumentTypeError(f"{v} out of range {LANES_RANGE[0]}..{LANES_RANGE[1]}")
    return v


def _batch(text: str) -> int:
    v = _positive(text)
    if v > 65535:
        raise argparse.ArgumentTypeError(f"{v} out of range 1..65535")
    return v


def _dir(text: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty directory name")
    return Path(text)


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} s: must be above 0 and finite")
    return v


def _seed(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if not 0 <= v < 1 << 32:
        raise argparse.ArgumentTypeError(f"{v} out of range 0..4294967295")
    return v


def register(sub) -> None:
    add_train_parser(sub)
    _register_eval_plot(sub)


def add_train_parser(sub):
    p = sub.add_parser(
        "train",
        help="train a pentary network with Pentary-EGGROLL (golden model or a device)",
        description="Train a pentary network on a task with the golden model, the simulated "
        "accelerator or a board (--device). Unset options "
        "take the task's tuned defaults (docs/tasks.md), then the spec defaults "
        "(pentegg info).",
    )
    add_model_options(p)
    p.add_argument("--eval-every", type=_positive, help="evaluate the metric every N steps")
    p.add_argument(
        "--checkpoint-every",
        type=_positive,
        default=100,
        help="write the state every N steps (default 100, and at the end)",
    )
    p.add_argument("--out", type=_dir, help="run directory for state, curve and plot")
    p.add_argument(
        "--resume", type=_dir, metavar="DIR", help="continue the run in DIR up to --steps total"
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the result as one JSON object on the last line of stdout",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_device_flags(p, default="golden")
    p.set_defaults(func=run_train)
    return p


def add_model_options(p) -> None:
    """--task, --steps and the model flags (shared by train and compare)."""
    p.add_argument(
        "--task", required=True, help="digits | xor | cartpole | csv:PATH (your own table)"
    )
    p.add_argument("--steps", type=_positive, help="total ES steps (task default)")
    p.add_argument("--population", type=int, help="members, even, 2..4096")
    p.add_argument("--rank", type=int, help="low-rank noise rank: 1, 4, 16 or 64")
    p.add_argument("--mode", choices=("lowrank", "quantized"), help="perturbation mode")
    p.add_argument("--shaping", choices=("rank", "sign"), help="fitness shaping")
    p.add_argument("--update", choices=("latent", "pentary"), help="weight update rule")
    p.add_argument("--digits", choices=("binomial", "uniform"), help="noise digit distribution")
    p.add_argument("--seed", type=_seed, help="run seed (default 0)")
    p.add_argument(
        "--batch", type=_batch, help="samples (episodes for cartpole) per step, 1..65535"
    )
    p.add_argument("--hidden", type=_int_list, help="hidden widths, e.g. 64 or 64,32")
    p.add_argument("--sigma-shift", type=int, help="noise scale-down shift, 0..8")
    p.add_argument("--tau", type=int, help="update significance threshold, Q4, 0..4095")
    p.add_argument("--latent-bits", type=int, help="latent state width, 3..8")
    p.add_argument(
        "--latent-shift",
        type=int,
        help="latent to weight shift q, 0..q_max with 3*2^q <= 2*(2^(latent_bits-1)-1) "
        "(0..6 at 8 latent bits)",
    )
    p.add_argument("--margin", type=int, help="classification hinge margin, 1..254")
    p.add_argument(
        "--act-shifts",
        type=_int_list,
        help="activation shift per layer, comma-separated, each 0..15, e.g. 4,4 "
        "(default ceil(log2(fan)/2))",
    )
    p.add_argument("--init", choices=("random", "zero"), help="initial weights")
    p.add_argument(
        "--split-seed", type=_seed, help="csv: seed of the 80/20 split (0..2^32-1, default 0)"
    )


def add_device_flags(p, default: str | None) -> None:
    p.add_argument(
        "--device",
        default=default,
        required=default is None,
        metavar="DEV",
        help="golden (the NumPy model), sim (the accelerator's Verilog, simulated; built "
        "for the job and cached), sim-compact (the compact device, the iCEBreaker's core: "
        "its RV32I core and firmware, simulated), firmware (that firmware compiled for "
        "this computer: fast) or serial:PORT[@BAUD] (a board)"
        + (f"; default {default}" if default else ""),
    )
    p.add_argument(
        "--lanes",
        type=_lanes,
        default=SIM_LANES,
        help=f"sim: pair-lanes of the simulated accelerator, {LANES_RANGE[0]}.."
        f"{LANES_RANGE[1]}, at most the population's pairs (more are cut to them; "
        f"default {SIM_LANES})",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        help="seconds to wait for a device's response before a retry (default 5 for "
        "serial:PORT, 60 for a simulated device)",
    )


#: pair-lanes of ``--device sim`` when ``--lanes`` is not given
SIM_LANES = 8


def check_job_options(args) -> None:
    """``--split-seed`` is the csv tasks' and is refused for another task. (``--lanes``
    is taken with any ``--device`` and used by ``sim`` only, so that one command line
    runs on golden and on the simulated accelerator alike.)"""
    if args.split_seed is not None and not args.task.startswith("csv:"):
        raise UsageError(f"--split-seed applies to csv:PATH tasks, not {args.task}")


def open_stepper(args, task, cfg, batch):
    """The ES stepper of ``--device`` (golden, or a device opened for this job)."""
    from .train import DeviceStepper, GoldenStepper

    if args.device == "golden":
        return GoldenStepper(task, batch)
    from .device import Trainer, open_device

    samples = len(getattr(task, "x_train", ()))
    dev = open_device(
        args.device,
        cfg=cfg,
        batch=min(batch, samples) if samples else batch,
        samples=samples,
        lanes=args.lanes,
        timeout=args.timeout,
        quiet=getattr(args, "quiet", False),
        score_bound=task.score_bound(batch),
    )
    return DeviceStepper(Trainer(dev, task, cfg, batch), args.device)


def _register_eval_plot(sub) -> None:
    e = sub.add_parser(
        "eval",
        help="evaluate a saved model on a task",
        description="Evaluate a state file (or run directory) on a task's metric.",
    )
    e.add_argument("--task", required=True, help="digits | xor | cartpole | csv:PATH")
    e.add_argument("--model", required=True, type=Path, help="state.pegg or a run directory")
    e.add_argument("--json", action="store_true", help="print one JSON object")
    e.set_defaults(func=run_eval)

    pl = sub.add_parser(
        "plot",
        help="overlay the learning curves of runs",
        description="Overlay learning curves (metric against steps and wall "
        "time) of one or more run directories.",
    )
    pl.add_argument("runs", nargs="+", type=Path, metavar="DIR")
    pl.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("curves.png"),
        help="the plot to write: .png (default curves.png), .svg or .pdf",
    )
    pl.set_defaults(func=run_plot)


def _config_from_args(args, task):
    from .golden import Config

    d = task.defaults
    hidden = args.hidden or d.get("hidden", (64,))
    kw = {"layers": task.layers(tuple(hidden))}
    for name in MODEL_FLAGS:
        v = getattr(args, name)
        if v is None:
            v = d.get(name)
        if v is not None:
            kw[name] = v
    if args.act_shifts is not None:
        kw["act_shifts"] = args.act_shifts
    elif d.get("act_shifts") is not None:
        kw["act_shifts"] = d["act_shifts"]
    kw["seed"] = args.seed if args.seed is not None else 0
    for k, v in d.get("config", {}).items():
        if getattr(args, k, None) is None:
            kw[k] = v
    from .golden import ConfigError

    try:
        return Config(**kw).validate()
    except ConfigError as e:
        # a value the user did not give (a default) that another option made invalid:
        # say which option sets it
        name = str(e).split("=", 1)[0].strip()
        if name in MODEL_FLAGS and getattr(args, name, None) is None and name not in kw:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{e} (the default; set it with {flag})") from None
        raise


def run_train(args) -> int:
    rec = train_record(args)
    if args.json:
        print(json.dumps(rec))
    else:
        extra = " (solved)" if rec["solved"] else ""
        print(
            f"{rec['task']}: {rec['metric']} {rec['value']:.4f}{extra} after {rec['steps']} "
            f"steps, {rec['wall_s']:.1f} s; weights sha256 {rec['weights_sha256'][:16]}"
        )
        if rec["out"]:
            print(f"run saved in {rec['out']}/ (state.pegg, curve.csv, curve.png, run.json)")
    return 0


def _check_same_csv(args, meta: dict) -> None:
    """``--resume`` of a csv run needs the file it trained on (its sha256 in the state)."""
    from .tasks import file_sha256

    want = meta.get("csv_sha256")
    path = Path(args.task[4:]) if args.task.startswith("csv:") else None
    if want is None or path is None or not path.is_file():
        return  # (a missing file is the task's own one-line error)
    if file_sha256(path) != want:
        raise UsageError(
            f"--resume {args.resume}: {path} is not the file the run trained on (its "
            "sha256 differs); resume with that file"
        )


def train_record(args) -> dict:
    """Run ``pentegg train`` for parsed ``args``; return the result record."""
    from .golden import Config
    from .progress import Progress
    from .tasks import get_task
    from .train import (
        PLOT_FILE,
        STATE_FILE,
        RunResult,
        load_run,
        result_record,
        run_training,
        write_run_json,
    )

    check_job_options(args)
    meta: dict
    if args.resume:
        state, meta, curve = load_run(args.resume)
        # A csv run is the file's content (its sha256, checked below), not the spelling
        # of its path: csv:./t.csv or an absolute path resume csv:t.csv.
        csv_run = str(meta.get("task", "")).startswith("csv:") and "csv_sha256" in meta
        if meta.get("task") != args.task and not (csv_run and args.task.startswith("csv:")):
            raise UsageError(
                f"--resume {args.resume}: the run trained task "
                f"'{meta.get('task')}', not '{args.task}'"
            )
        changed = [
            f"--{n.replace('_', '-')}"
            for n in (*MODEL_FLAGS, "hidden", "act_shifts")
            if getattr(args, n) is not None
        ]
        if args.seed is not None and args.seed != state.cfg.seed:
            changed.append("--seed")
        if args.split_seed is not None and args.split_seed != meta.get("split_seed", 0):
            changed.append("--split-seed")
        if changed:
            raise UsageError(
                f"{', '.join(changed)} cannot change on --resume (the run's "
                "configuration is in its state file)"
            )
        _check_same_csv(args, meta)  # before the file is read with the run's scaler
        task = get_task(args.task, meta=meta)
        cfg = state.cfg
        batch = int(meta["batch"]) if args.batch is None else args.batch
        if batch != int(meta["batch"]):
            raise UsageError("--batch cannot change on --resume")
        steps = args.steps or int(meta.get("steps_target", state.step))
        if steps < state.step:
            raise UsageError(
                f"--steps {steps}: the run in {args.resume} is at step {state.step} "
                "already (--steps is the total to reach)"
            )
        out = args.out or args.resume
        if (
            args.out is not None
            and args.out.resolve() != args.resume.resolve()
            and (args.out / STATE_FILE).exists()
        ):
            raise UsageError(
                f"--out {args.out} already holds another run; give an empty directory, "
                f"or leave out --out to continue in {args.resume}"
            )
        wall0 = float(meta.get("wall_s", 0.0))
    else:
        task = get_task(args.task, split_seed=args.split_seed or 0)
        cfg = _config_from_args(args, task)
        if task.n_outputs < 2:
            raise UsageError("a task needs at least 2 classes")
        batch = args.batch or task.defaults.get("batch", 256)
        steps = args.steps or task.defaults.get("steps", 1000)
        from .golden import init_state

        state, curve, wall0 = init_state(cfg), [], 0.0
        meta = task.meta()
        out = args.out
        if out is not None and (out / STATE_FILE).exists():
            raise UsageError(
                f"--out {out} already holds a run; continue it with --resume "
                f"{out} or choose another directory"
            )
    if steps > 65535:
        raise UsageError(f"--steps {steps} out of range 1..65535 (spec 2.3)")
    if out is not None:
        if out.exists() and not out.is_dir():
            raise UsageError(f"--out {out}: exists and is not a directory")
        out.mkdir(parents=True, exist_ok=True)
    meta.update(task=task.name, batch=batch, steps_target=steps)
    eval_every = args.eval_every or task.defaults.get("eval_every", 25)
    prog = Progress(steps, label=task.name, enabled=False if args.quiet else None, start=state.step)
    stepper = open_stepper(args, task, cfg, batch)
    meta["device"] = args.device
    try:
        res: RunResult = run_training(
            task,
            state,
            steps,
            batch,
            eval_every=eval_every,
            checkpoint_every=args.checkpoint_every,
            out=out,
            meta=meta,
            curve=curve,
            wall0=wall0,
            progress=prog,
            stepper=stepper,
        )
    finally:
        if hasattr(stepper, "trainer"):
            stepper.trainer.dev.close()
    rec = result_record(task, res, batch, out)
    rec["device"] = args.device
    if out is not None:
        from .plot import plot_curves

        plot_curves([(out.name or str(out), res.curve)], out / PLOT_FILE, task.metric_name)
        opts = {
            k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "func"
        }
        opts["config"] = Config.to_dict(cfg)
        if hasattr(task, "split_seed"):  # the split the run used (csv), given or not
            opts["split_seed"] = task.split_seed
        write_run_json(out, rec, opts)
    return rec


def _model_path(p: Path) -> Path:
    from .train import STATE_FILE

    return p / STATE_FILE if p.is_dir() else p


def run_eval(args) -> int:
    from .golden import load_state, weights_sha256
    from .tasks import get_task

    state, meta = load_state(_model_path(args.model))
    task = get_task(args.task, meta=meta if args.task.startswith("csv:") else None)
    want = (task.n_inputs, task.n_outputs)
    have = (state.cfg.layers[0], state.cfg.layers[-1])
    if want != have:
        raise UsageError(
            f"{args.model}: the model maps {have[0]} inputs to {have[1]} outputs; "
            f"task {task.name} needs {want[0]} -> {want[1]}"
        )
    scope = "test split"
    if args.task.startswith("csv:") and meta.get("csv_sha256") not in (None, task.sha256):
        # a different file of the same format: evaluate every row with the training scaler
        task.x_test, task.y_test = task.x_all, task.y_all
        scope = "all rows (file differs from the training file)"
    value = task.metric(state)
    rec = {
        "task": task.name,
        "model": str(args.model),
        "metric": task.metric_name,
        "value": value,
        "steps": state.step,
        "weights_sha256": weights_sha256(state),
        "scope": scope,
    }
    if task.name == "cartpole":
        rec["solved"] = task.solved(value)
    if args.json:
        print(json.dumps(rec))
    else:
        print(
            f"{task.name}: {task.metric_name} {value:.4f} ({scope}; model after {state.step} "
            f"steps, weights sha256 {rec['weights_sha256'][:16]})"
        )
    return 0


#: the plot formats ``plot -o`` writes (by the file name's suffix)
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


def run_plot(args) -> int:
    from .plot import plot_curves
    from .train import CURVE_FILE, RUN_FILE, read_curve

    out = args.output
    if out.suffix.lower() not in PLOT_SUFFIXES:
        raise UsageError(
            f"-o {str(out)!r}: the plot's file name must end in "
            f"{', '.join(PLOT_SUFFIXES)} (it names the format)"
        )
    if out.is_dir():
        raise UsageError(f"-o {out}: is a directory")
    if not out.resolve().parent.is_dir():
        raise UsageError(f"-o {out}: no directory {out.parent}")
    runs, metrics = [], []
    for d in args.runs:
        f = d / CURVE_FILE if d.is_dir() else d
        if not f.exists():
            raise UsageError(f"{d}: no {CURVE_FILE} (is it a run directory?)")
        try:
            curve = read_curve(f)
        except (ValueError, KeyError, TypeError) as e:
            raise UsageError(f"not a pentegg learning curve: {e}") from None
        if not curve:
            raise UsageError(f"{f}: the learning curve has no points yet")
        label, metric = str(d), "metric"
        run_dir = d if d.is_dir() else d.parent  # a run directory or its curve.csv
        rj = run_dir / RUN_FILE
        if rj.exists():
            try:
                r = json.loads(rj.read_text())["result"]
                metric = str(r.get("metric", metric))
                label = (
                    f"{run_dir.resolve().name} ({r['task']}, {r['mode']}, {r['update']}, "
                    f"{r['shaping']}, seed {r['seed']})"
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                pass  # a run.json that is not pentegg's: the directory names the line
        runs.append((label, curve))
        metrics.append(metric)
    known = {m for m in metrics if m != "metric"}
    if len(known) == 1:  # a curve without its run.json joins the one metric named
        metrics = [known.pop()] * len(metrics)
    plot_curves(runs, args.output, metrics)
    print(f"wrote {args.output} ({len(runs)} runs)", file=sys.stdout)
    return 0
