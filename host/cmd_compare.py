"""``pentegg compare``: the golden model and a device side by side, step by step."""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from .cli import UsageError
from .cmd_train import (
    _config_from_args,
    add_device_flags,
    add_model_options,
    check_job_options,
)


def register(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="train on the golden model and a device side by side; stop at the first difference",
        description="Run the same ES steps on the golden model and on a device (sim or a "
        "board). After every step the member scores, the weights and the latent state must "
        "be equal to the bit; the first difference names its step, layer and index. Exit 0 "
        "when identical, 1 at a mismatch.",
    )
    add_model_options(p)
    add_device_flags(p, default=None)
    p.add_argument("--json", action="store_true", help="one JSON object on the last line")
    p.add_argument("--quiet", action="store_true", help="no per-step lines")
    p.set_defaults(func=run_compare, steps_default=10)


def first_difference(want, got):
    """(flat index, want, got) of the first difference of two arrays, or None."""
    want, got = np.asarray(want).ravel(), np.asarray(got).ravel()
    if want.shape != got.shape:
        return (-1, f"{want.size} values", f"{got.size} values")
    diff = np.flatnonzero(want != got)
    if diff.size == 0:
        return None
    i = int(diff[0])
    return (i, int(want[i]), int(got[i]))


def compare_states(golden_state, dev_state) -> dict | None:
    """The first difference between two states: what, layer, (row, column), values."""
    for what in ("weights", "latent"):
        gs, ds = getattr(golden_state, what), getattr(dev_state, what)
        if gs is None:
            continue
        for l, (g, d) in enumerate(zip(gs, ds, strict=True)):
            diff = first_difference(g, d)
            if diff:
                i, want, got = diff
                idx = [int(j) for j in np.unravel_index(i, g.shape)] if i >= 0 else None
                return {"what": what, "layer": l, "index": idx, "golden": want, "device": got}
    return None


def run_compare(args) -> int:
    from .device import Trainer, open_device
    from .golden import es_step, init_state, weights_sha256
    from .tasks import get_task

    if args.device == "golden":
        raise UsageError("--device golden: compare needs a device (sim or serial:PORT)")
    check_job_options(args)
    task = get_task(args.task, split_seed=args.split_seed or 0)
    cfg = _config_from_args(args, task)
    batch = args.batch or task.defaults.get("batch", 256)
    steps = args.steps or args.steps_default
    if steps > 65535:
        raise UsageError(f"--steps {steps} out of range 1..65535 (spec 2.3)")
    samples = len(getattr(task, "x_train", ()))
    t0 = time.perf_counter()
    dev = open_device(
        args.device,
        cfg=cfg,
        batch=min(batch, samples) if samples else batch,
        samples=samples,
        lanes=args.lanes,
        timeout=args.timeout,
        quiet=args.quiet,
        score_bound=task.score_bound(batch),
    )
    mismatch = None
    golden = init_state(cfg)
    done = 0
    try:
        trainer = Trainer(dev, task, cfg, batch)
        trainer.start(golden)
        for _ in range(steps):
            t = golden.step
            golden, info = es_step(golden, task.scorer(cfg, t, batch))
            dev_state, scores = trainer.steps(t, 1)
            diff = first_difference(info.scores, scores)
            if diff:
                i, want, got = diff
                mismatch = {
                    "step": t,
                    "what": "scores",
                    "layer": None,
                    "index": [i],
                    "golden": want,
                    "device": got,
                }
            else:
                mismatch = compare_states(golden, dev_state)
                if mismatch:
                    mismatch = {"step": t, **mismatch}
            if mismatch:
                break
            done += 1
            if not args.quiet:
                print(
                    f"step {t}: scores, weights{' and latent' if cfg.update == 'latent' else ''}"
                    f" identical (sha256 {weights_sha256(golden)[:16]})",
                    flush=True,
                )
    finally:
        dev.close()
    wall = time.perf_counter() - t0
    if mismatch:
        m = mismatch
        if m["layer"] is None:
            where = f"member {m['index'][0]}"
        else:
            where = f"layer {m['layer']} index {m['index']}"
        print(
            f"MISMATCH at step {m['step']}: {m['what']} {where}: golden {m['golden']}, "
            f"device {m['device']}",
            file=sys.stdout,
        )
    else:
        print(f"identical: {done} steps of {task.name} on {args.device} ({wall:.1f} s)")
    if args.json:
        print(
            json.dumps(
                {
                    "task": task.name,
                    "device": args.device,
                    # the job, as train's record names it
                    "mode": cfg.mode,
                    "update": cfg.update,
                    "shaping": cfg.shaping,
                    "rank": cfg.rank,
                    "population": cfg.population,
                    "batch": batch,
                    "layers": list(cfg.layers),
                    "seed": cfg.seed,
                    "steps": done,
                    "identical": mismatch is None,
                    "first_mismatch": mismatch,
                    "wall_s": round(wall, 3),
                    "weights_sha256": weights_sha256(golden),
                }
            )
        )
    return 1 if mismatch else 0
