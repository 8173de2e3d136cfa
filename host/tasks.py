"""Training tasks: data, int8 preprocessing, scoring and the reported metric.

A task turns raw data into the int8 network inputs of spec 5.1 (host-side
preprocessing, documented in docs/tasks.md) and supplies, for ES step ``t``, the
function that scores every member. Everything a step needs is a pure function of
(seed, t), so a resumed run sees exactly the data an uninterrupted run would.
"""

from __future__ import annotations

import csv
import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .golden import classification_scores

ACT_MAX = 127


class TaskError(ValueError):
    """Bad task name or bad task data (one-line message for the user)."""


def step_rng(seed: int, step: int, stream: int = 0) -> np.random.Generator:
    """The host-side data generator of ES step ``step``: PCG64 keyed by (seed, step,
    stream), identical on every platform."""
    return np.random.default_rng([seed, step, stream])


@dataclass
class Task(ABC):
    """Base class. Subclasses set the fields and implement the abstract methods."""

    name: str
    n_inputs: int
    n_outputs: int
    metric_name: str
    defaults: dict = field(default_factory=dict)

    def layers(self, hidden: tuple[int, ...]) -> tuple[int, ...]:
        return (self.n_inputs, *hidden, self.n_outputs)

    @abstractmethod
    def scorer(self, cfg, step: int, batch: int) -> Callable:
        """``evaluate(forward) -> scores`` for ES step ``step``."""

    @abstractmethod
    def metric(self, state) -> float:
        """The task's metric (accuracy, mean return) of ``state``, for reporting."""

    def solved(self, value: float) -> bool:
        return False

    def score_bound(self, batch: int) -> int:
        """The largest ``|score|`` of a member on ``batch`` samples or episodes (spec 7.1
        for classification: ``254 * batch``); a device must hold it."""
        return 254 * batch

    def meta(self) -> dict:
        return {"task": self.name}


# ----------------------------------------------------------------- classification
class ClassificationTask(Task):
    """A labelled int8 dataset with a fixed train/test split."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def batch_indices(self, cfg, step: int, batch: int) -> np.ndarray:
        """The training samples of ES step ``step``: all of them when ``batch`` covers
        the set, else ``batch`` drawn without replacement by the step's generator."""
        n = len(self.x_train)
        if batch >= n:
            return np.arange(n)
        return step_rng(cfg.seed, step).choice(n, batch, replace=False)

    def scorer(self, cfg, step: int, batch: int):
        idx = self.batch_indices(cfg, step, batch)
        x, y = self.x_train[idx], self.y_train[idx]
        return lambda forward: classification_scores(forward(x), y, cfg.margin)

    def metric(self, state) -> float:
        from .golden import accuracy

        return accuracy(state, self.x_test, self.y_test)

    def train_metric(self, state) -> float:
        from .golden import accuracy

        return accuracy(state, self.x_train, self.y_train)


def quantize_digits_pixels(pixels: np.ndarray) -> np.ndarray:
    """digits rule: ``x = min(8 * pixel, 127)`` for pixel intensities 0..16."""
    return np.minimum(np.asarray(pixels, dtype=np.int64) * 8, ACT_MAX).astype(np.int8)


class DigitsTask(ClassificationTask):
    """sklearn ``load_digits`` (1,797 8x8 images, 10 classes), split 80/20 with
    ``train_test_split(test_size=0.2, random_state=0, stratify=y)``: 1,437 / 360."""

    def __init__(self):
        super().__init__(
            "digits",
            64,
            10,
            "test_accuracy",
            defaults=dict(steps=1500, population=256, hidden=(64,), batch=256),
        )
        try:
            from sklearn.datasets import load_digits
            from sklearn.model_selection import train_test_split
        except ImportError as e:  # pragma: no cover - installed by ./run
            raise TaskError(
                "the digits task needs scikit-learn (pip install pentegg[train])"
            ) from e
        d = load_digits()
        x = quantize_digits_pixels(d.data)
        self.x_train, self.x_test, self.y_train, self.y_test = train_test_split(
            x, d.target, test_size=0.2, random_state=0, stratify=d.target
        )


class XorTask(ClassificationTask):
    """``bits``-bit parity (2 bits: XOR). Inputs are -127/+127 per bit; every one of the
    2**bits patterns is both the training set and the test set."""

    def __init__(self, bits: int = 2):
        if not 2 <= bits <= 12:
            raise TaskError(f"xor: bits={bits} out of range 2..12")
        super().__init__(
            "xor" if bits == 2 else f"parity{bits}",
            bits,
            2,
            "accuracy",
            defaults=dict(steps=300, population=64, hidden=(8,), batch=1 << bits, eval_every=1),
        )
        pats = (np.arange(1 << bits)[:, None] >> np.arange(bits)) & 1
        self.x_train = self.x_test = np.where(pats == 1, ACT_MAX, -ACT_MAX).astype(np.int8)
        self.y_train = self.y_test = pats.sum(axis=1) % 2

    def solved(self, value: float) -> bool:
        return value >= 1.0


def file_sha256(path: Path) -> str:
    """The sha256 a csv run keeps of its file (``csv_sha256`` in its state)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _show(cell: str, limit: int = 40) -> str:
    """A cell as an error message shows it: control characters escaped, long cells cut."""
    s = cell if cell.isprintable() else cell.encode("unicode_escape").decode("ascii")
    return s if len(s) <= limit else s[: limit - 3] + "..."


class CsvTask(ClassificationTask):
    """The user's own table: numeric feature columns, last column an integer class
    label, optional header row. Rows are split 80/20 by a seeded permutation
    (``split_seed``); each feature is scaled to int8 by the rule fitted on the training
    rows: ``x = sat(round(127 * (v - c) / h), -127, 127)`` with ``c = (min+max)/2``,
    ``h = (max-min)/2`` (a constant column maps to 0)."""

    MIN_ROWS = 10

    def __init__(
        self,
        path: str,
        split_seed: int = 0,
        scaler: dict | None = None,
        classes: list[int] | None = None,
    ):
        self.path = Path(path)
        if (
            isinstance(split_seed, bool)
            or not isinstance(split_seed, int)
            or not (0 <= split_seed < 1 << 32)
        ):
            raise TaskError(f"{path}: split seed {split_seed!r} is not an integer in 0..2^32-1")
        header, rows = self._read(self.path)
        self.columns = header
        feats = np.array([r[0] for r in rows], dtype=np.float64)
        labels_raw = np.array([r[1] for r in rows], dtype=np.int64)
        if classes is None:
            self.classes = np.unique(labels_raw)
        else:  # a trained model's: its outputs stand for these labels
            self.classes = self._model_classes(classes)
            unknown = np.setdiff1d(labels_raw, self.classes)
            if len(unknown):
                raise TaskError(
                    f"{self.path}: class label {int(unknown[0])} is not one the model was "
                    f"trained on ({', '.join(str(int(c)) for c in self.classes[:8])}"
                    f"{', ...' if len(self.classes) > 8 else ''})"
                )
        if len(self.classes) < 2:
            raise TaskError(
                f"{self.path}: the label column '{header[-1]}' has a single class "
                f"({int(self.classes[0])}); need at least 2"
            )
        if len(self.classes) > 4096:
            raise TaskError(f"{self.path}: {len(self.classes)} classes; at most 4096")
        labels = np.searchsorted(self.classes, labels_raw)
        n = len(rows)
        perm = np.random.default_rng(split_seed).permutation(n)
        n_test = max(1, round(0.2 * n))
        test, train = perm[:n_test], perm[n_test:]
        if scaler is None:
            lo, hi = feats[train].min(axis=0), feats[train].max(axis=0)
            with np.errstate(over="ignore"):  # features near the float range: h = inf
                scaler = {"center": ((lo + hi) / 2).tolist(), "half": ((hi - lo) / 2).tolist()}
        else:
            self._check_scaler(scaler, feats.shape[1])
        self.scaler = scaler
        x = self.scale(feats)
        self.split_seed = split_seed
        self.sha256 = file_sha256(self.path)
        self.x_all, self.y_all = x, labels
        self.x_train, self.y_train = x[train], labels[train]
        self.x_test, self.y_test = x[test], labels[test]
        super().__init__(
            f"csv:{path}",
            feats.shape[1],
            len(self.classes),
            "test_accuracy",
            defaults=dict(CSV_DEFAULTS),
        )

    def _check_scaler(self, scaler, n_features: int) -> None:
        """The training scaler a model keeps: one center and half-range per feature."""
        try:
            parts = [np.asarray(scaler[k], dtype=np.float64) for k in ("center", "half")]
        except (KeyError, TypeError, ValueError):
            raise TaskError(f"{self.path}: the model's feature scaler is malformed") from None
        for v in parts:
            if v.ndim != 1 or np.isnan(v).any():
                raise TaskError(f"{self.path}: the model's feature scaler is malformed")
            if v.shape != (n_features,):
                raise TaskError(
                    f"{self.path}: {n_features} feature columns; the model was trained on "
                    f"{v.shape[0]}"
                )

    def _model_classes(self, classes) -> np.ndarray:
        try:
            c = np.asarray(classes, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            c = None
        if c is None or c.ndim != 1 or len(c) < 2 or (np.diff(c) <= 0).any():
            raise TaskError(f"{self.path}: the model's class list is malformed")
        return c

    def scale(self, feats: np.ndarray) -> np.ndarray:
        c = np.asarray(self.scaler["center"])
        h = np.asarray(self.scaler["half"])
        safe = np.where(h > 0, h, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):  # the float range's edges
            q = np.where(h > 0, np.rint(ACT_MAX * (feats - c) / safe), 0.0)
        q = np.nan_to_num(q, nan=0.0)
        return np.clip(q, -ACT_MAX, ACT_MAX).astype(np.int8)

    @staticmethod
    def _read(path: Path):
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise TaskError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise TaskError(f"{path}: is a directory, not a CSV file") from None
        except UnicodeDecodeError:
            raise TaskError(f"{path}: not a UTF-8 text file") from None
        try:
            lines = list(csv.reader(text.splitlines()))
        except csv.Error as e:
            raise TaskError(f"{path}: not a CSV table ({e})") from None
        while lines and not any(c.strip() for c in lines[-1]):
            lines.pop()
        if not lines:
            raise TaskError(f"{path}: the file is empty")
        width = len(lines[0])
        if width < 2:
            raise TaskError(
                f"{path}: row 1 has {width} column; need at least one feature "
                "column and the label column"
            )

        def is_num(s: str) -> bool:
            try:
                float(s)
                return True
            except ValueError:
                return False

        has_header = not all(is_num(c.strip()) for c in lines[0])
        header = (
            [c.strip() or f"column {i + 1}" for i, c in enumerate(lines[0])]
            if has_header
            else [f"column {i + 1}" for i in range(width)]
        )
        body = lines[1:] if has_header else lines
        first = 2 if has_header else 1
        rows = []
        for i, row in enumerate(body):
            rn = first + i
            if len(row) != width:
                raise TaskError(f"{path}: row {rn} has {len(row)} columns, expected {width}")
            vals = []
            for j, cell in enumerate(row[:-1]):
                s = cell.strip()
                if s == "":
                    raise TaskError(f"{path}: row {rn}, column '{header[j]}': missing value")
                try:
                    v = float(s)
                except ValueError:
                    raise TaskError(
                        f"{path}: row {rn}, column '{header[j]}': '{_show(s)}' is not a number"
                    ) from None
                if not math.isfinite(v):
                    raise TaskError(
                        f"{path}: row {rn}, column '{header[j]}': '{_show(s)}' is not a finite "
                        "number"
                    )
                vals.append(v)
            lab = row[-1].strip()
            if lab == "":
                raise TaskError(f"{path}: row {rn}, column '{header[-1]}': missing class label")
            try:
                y = int(lab)
            except ValueError:
                raise TaskError(
                    f"{path}: row {rn}, column '{header[-1]}': class label '{_show(lab)}' "
                    "is not an integer"
                ) from None
            if not -(1 << 63) <= y < 1 << 63:
                raise TaskError(
                    f"{path}: row {rn}, column '{header[-1]}': class label '{_show(lab)}' "
                    "is out of range (64-bit integers)"
                )
            rows.append((vals, y))
        if len(rows) < CsvTask.MIN_ROWS:
            raise TaskError(f"{path}: {len(rows)} data rows; need at least {CsvTask.MIN_ROWS}")
        return header, rows

    def meta(self) -> dict:
        return {
            "task": self.name,
            "csv_sha256": self.sha256,
            "split_seed": self.split_seed,
            "scaler": self.scaler,
            "classes": self.classes.tolist(),
            "columns": self.columns,
        }


CSV_DEFAULTS = dict(steps=1000, population=256, hidden=(32,), batch=256)

# ------------------------------------------------------------------------ registry
TASK_NAMES = ("digits", "xor", "cartpole", "csv:PATH")


def get_task(name: str, split_seed: int = 0, meta: dict | None = None) -> Task:
    """The task called ``name`` (``digits``, ``xor``, ``cartpole``, ``csv:PATH``)."""
    if name == "digits":
        return DigitsTask()
    if name == "xor":
        return XorTask(2)
    if name.startswith("parity") and name[6:].isdigit():
        return XorTask(int(name[6:]))
    if name == "cartpole":
        from .cartpole import CartPoleTask

        return CartPoleTask()
    if name.startswith("csv:"):
        path = name[4:]
        if not path:
            raise TaskError("csv: give the file as csv:PATH")
        scaler = classes = None
        if meta and meta.get("scaler") is not None:
            scaler = meta["scaler"]
            split_seed = meta.get("split_seed", split_seed)
            classes = meta.get("classes")
        return CsvTask(path, split_seed=split_seed, scaler=scaler, classes=classes)
    raise TaskError(f"unknown task '{name}' (choose from {', '.join(TASK_NAMES)})")


# run-time parameters (spec 9.1) a task may set for itself (spec 12)
TASK_RUNTIME_PARAMS = (
    "sigma_shift",
    "act_shifts",
    "shaping",
    "tau",
    "latent_shift",
    "margin",
    "init",
)


def task_defaults(name: str) -> dict:
    """The defaults of spec section 12 for a task: layers, population, batch, steps, and
    the run-time parameters the task sets for itself."""
    if name.startswith("csv:"):
        d = CSV_DEFAULTS
        layers = ("n", *d["hidden"], "c")
    else:
        t = get_task(name)
        d = t.defaults
        layers = t.layers(tuple(d["hidden"]))
    return {
        "layers": tuple(layers),
        "population": d["population"],
        "batch": d["batch"],
        "steps": d["steps"],
        **{k: d[k] for k in TASK_RUNTIME_PARAMS if k in d},
    }
