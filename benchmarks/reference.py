"""Reference rows of docs/results.md: a backprop MLP and float Gaussian EGGROLL.

Both see exactly the task's int8 inputs and split (digits: the fixed 80/20 split; csv:
the seeded split), so the rows differ from pentegg's only in the learning method.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from pentegg.tasks import ClassificationTask, step_rng

from .float_eggroll import FloatConfig, FloatEggroll


def mlp(task: ClassificationTask, hidden: tuple[int, ...], seed: int, max_iter: int = 500) -> dict:
    """sklearn MLPClassifier (Adam, ReLU) on the task's int8 inputs / 127."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier

    t = time.perf_counter()
    clf = MLPClassifier(hidden_layer_sizes=hidden, max_iter=max_iter, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(task.x_train / 127.0, task.y_train)
    acc = float(clf.score(task.x_test / 127.0, task.y_test))
    return {"value": acc, "steps": int(clf.n_iter_), "wall_s": time.perf_counter() - t}


def float_eggroll(
    task: ClassificationTask,
    hidden: tuple[int, ...],
    seed: int,
    steps: int,
    population: int,
    rank: int,
    batch: int,
    sigma: float = 0.05,
    lr: float = 0.01,
) -> dict:
    """Float Gaussian EGGROLL with the same batches schedule as pentegg's task."""
    cfg = FloatConfig(
        layers=task.layers(hidden), population=population, rank=rank, sigma=sigma, lr=lr, seed=seed
    )
    es = FloatEggroll(cfg)
    n = len(task.x_train)
    t = time.perf_counter()
    for s in range(steps):
        idx = np.arange(n) if batch >= n else step_rng(seed, s).choice(n, batch, replace=False)
        es.step(task.x_train[idx], task.y_train[idx])
    return {
        "value": es.accuracy(task.x_test, task.y_test),
        "steps": steps,
        "wall_s": time.perf_counter() - t,
    }
