"""The training loop behind ``pentegg train``: ES steps, evaluation, checkpoints.

A run directory (``--out DIR``) holds

* ``state.pegg``: the complete training state (spec 11), rewritten atomically every
  checkpoint and at the end;
* ``curve.csv``: step, wall seconds, metric and population statistics per evaluation;
* ``curve.png``: the learning curve against steps and against wall time;
* ``run.json``: the options of the run and its final result.

Resuming (``--resume DIR``) continues from ``state.pegg`` to the requested total number
of steps and ends with the same bits as an uninterrupted run, because every step's data
and noise are pure functions of (seed, step).
"""

from __future__ import annotations

import csv
import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .golden import TrainState, es_step, load_state, save_state, weights_sha256
from .golden.checkpoint import write_atomically as atomic_write
from .progress import Progress
from .tasks import Task

STATE_FILE = "state.pegg"
CURVE_FILE = "curve.csv"
PLOT_FILE = "curve.png"
RUN_FILE = "run.json"
CURVE_FIELDS = ("step", "wall_s", "metric", "score_mean", "score_max", "moved")


@dataclass
class RunResult:
    state: TrainState
    value: float
    solved: bool
    wall_s: float
    curve: list[dict] = field(default_factory=list)


def _write_curve(out: Path, curve: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CURVE_FIELDS, lineterminator="\n")
    w.writeheader()
    for row in curve:
        w.writerow({k: row[k] for k in CURVE_FIELDS})
    atomic_write(out / CURVE_FILE, buf.getvalue().encode())


def read_curve(path: Path) -> list[dict]:
    """The rows of a run's ``curve.csv``; :class:`~pentegg.golden.StateFileError` (one
    line, naming the file and row) when it is not the curve ``pentegg train`` writes."""
    from .golden import StateFileError

    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is not None and tuple(reader.fieldnames) != CURVE_FIELDS:
                raise StateFileError(
                    f"{path}: header {','.join(reader.fieldnames)!r} is not "
                    f"{','.join(CURVE_FIELDS)!r}"
                )
            rows = []
            for row in reader:
                if None in row or None in row.values():
                    raise StateFileError(
                        f"{path}: row {reader.line_num} has the wrong number of cells"
                    )
                try:
                    rows.append(
                        {
                            k: (int(v) if k in ("step", "moved") else float(v))
                            for k, v in row.items()
                        }
                    )
                except ValueError:
                    raise StateFileError(
                        f"{path}: row {reader.line_num} holds a value that is not a number"
                    ) from None
            return rows
    except (UnicodeDecodeError, csv.Error) as e:
        raise StateFileError(f"{path}: not a curve file ({type(e).__name__})") from None


def checkpoint(out: Path, state: TrainState, meta: dict, curve: list[dict]) -> None:
    _write_curve(out, curve)
    save_state(out / STATE_FILE, state, meta=dict(meta, curve_len=len(curve)))


def run_training(
    task: Task,
    state: TrainState,
    steps: int,
    batch: int,
    *,
    eval_every: int,
    checkpoint_every: int,
    out: Path | None,
    meta: dict,
    curve: list[dict] | None = None,
    wall0: float = 0.0,
    progress: Progress | None = None,
    stepper=None,
) -> RunResult:
    """Train ``state`` until ``steps`` ES steps are done or the task is solved.

    ``stepper(state, k) -> (state, last_scores, last_moved)`` runs the ES steps: by
    default the golden model (:class:`GoldenStepper`), or a device
    (:class:`DeviceStepper`). Every evaluation and checkpoint sees the same states
    either way."""
    curve = list(curve or [])
    prog = progress or Progress(0, enabled=False)
    t0 = time.perf_counter() - wall0
    value = curve[-1]["metric"] if curve else float("nan")
    solved = bool(curve) and task.solved(value)
    last_scores = np.zeros(1)
    moved = 0
    step_fn = stepper or GoldenStepper(task, batch)
    while state.step < steps and not solved:
        # a chunk ends at the next evaluation, checkpoint or the end
        k = 1
        if step_fn.max_chunk > 1:
            s = state.step
            ends = (
                (s // eval_every + 1) * eval_every,
                (s // checkpoint_every + 1) * checkpoint_every,
            )
            k = max(1, min(steps, *ends) - s)
        state, last_scores, moved = step_fn(state, k)
        done = state.step
        if done % eval_every == 0 or done == steps:
            value = task.metric(state)
            solved = task.solved(value)
            curve.append(
                {
                    "step": done,
                    "wall_s": round(time.perf_counter() - t0, 3),
                    "metric": value,
                    "score_mean": float(last_scores.mean()),
                    "score_max": float(last_scores.max()),
                    "moved": moved,
                }
            )
        prog.update(done, f"{task.metric_name} {value:.3f}")
        if out is not None and (done % checkpoint_every == 0 or done == steps or solved):
            meta["wall_s"] = time.perf_counter() - t0
            checkpoint(out, state, meta, curve)
    prog.close()
    if not curve or curve[-1]["step"] != state.step:
        value = task.metric(state)
        solved = task.solved(value)
        curve.append(
            {
                "step": state.step,
                "wall_s": round(time.perf_counter() - t0, 3),
                "metric": value,
                "score_mean": float(last_scores.mean()),
                "score_max": float(last_scores.max()),
                "moved": moved,
            }
        )
    wall = time.perf_counter() - t0
    if out is not None:
        meta["wall_s"] = wall
        checkpoint(out, state, meta, curve)
    return RunResult(state, value, solved, wall, curve)


class GoldenStepper:
    """ES steps with the golden model, one at a time."""

    max_chunk = 1
    device = "golden"

    def __init__(self, task: Task, batch: int):
        self.task, self.batch = task, batch

    def __call__(self, state: TrainState, k: int):
        for _ in range(k):
            state, info = es_step(state, self.task.scorer(state.cfg, state.step, self.batch))
        return state, info.scores, info.moved


class DeviceStepper:
    """ES steps on a device (``pentegg.device.Trainer``), ``k`` per call: ``k - 1`` in
    one run, then the last alone so that its scores and moved weights are the step's."""

    max_chunk = 1 << 16

    def __init__(self, trainer, name: str):
        self.trainer, self.device = trainer, name
        self.loaded: TrainState | None = None

    def __call__(self, state: TrainState, k: int):
        if self.loaded is not state:
            self.trainer.start(state)
        if k > 1:
            state, _ = self.trainer.steps(state.step, k - 1)
        new, scores = self.trainer.steps(state.step, 1)
        moved = sum(int((a != b).sum()) for a, b in zip(new.weights, state.weights, strict=True))
        self.loaded = new
        return new, scores, moved


def result_record(task: Task, res: RunResult, batch: int, out: Path | None) -> dict:
    cfg = res.state.cfg
    rec = {
        "task": task.name,
        "mode": cfg.mode,
        "steps": res.state.step,
        "population": cfg.population,
        "rank": cfg.rank,
        "seed": cfg.seed,
        "metric": task.metric_name,
        "value": res.value,
        "wall_s": round(res.wall_s, 3),
        "weights_sha256": weights_sha256(res.state),
        "shaping": cfg.shaping,
        "update": cfg.update,
        "layers": list(cfg.layers),
        "batch": batch,
        "solved": res.solved,
        "out": str(out) if out else None,
    }
    return rec


def load_run(resume: Path) -> tuple[TrainState, dict, list[dict]]:
    """State, meta and curve of a run directory (for ``--resume``)."""
    if not resume.is_dir():
        from .cli import UsageError

        raise UsageError(f"--resume {resume}: not a directory")
    state, meta = load_state(resume / STATE_FILE)
    _check_meta(resume / STATE_FILE, meta)
    curve = read_curve(resume / CURVE_FILE) if (resume / CURVE_FILE).exists() else []
    curve = curve[: int(meta.get("curve_len", len(curve)))]
    return state, meta, curve


#: what a run's state file keeps beside the state (``meta``), and the values it takes
_META_FIELDS = {
    "batch": (int, 1),
    "steps_target": (int, 0),
    "curve_len": (int, 0),
    "wall_s": ((int, float), 0),
}


def _check_meta(path: Path, meta: dict) -> None:
    """:class:`~pentegg.golden.StateFileError` when the run's bookkeeping in the state
    file is not what ``pentegg train`` writes (a hand-edited file with a valid checksum)."""
    from .golden import StateFileError

    if "batch" not in meta:
        raise StateFileError(f"{path}: no 'batch' in the run's metadata")
    for name, (kind, lo) in _META_FIELDS.items():
        if name not in meta:
            continue
        v = meta[name]
        if isinstance(v, bool) or not isinstance(v, kind) or not (lo <= v < float("inf")):
            raise StateFileError(
                f"{path}: the run's metadata has {name} = {v!r}, not a number >= {lo}"
            )


def write_run_json(out: Path, record: dict, options: dict) -> None:
    atomic_write(
        out / RUN_FILE,
        (json.dumps({"options": options, "result": record}, indent=2) + "\n").encode(),
    )
