"""Reference row of docs/results.md: a backprop MLP (float Gaussian EGGROLL, the other
reference, trains side by side with the golden model in benchmarks/reference_timing.py).

It sees exactly the task's int8 inputs and split (digits: the fixed 80/20 split; csv:
the seeded split), so the row differs from pentegg's only in the learning method.
"""

from __future__ import annotations

import time
import warnings

from pentegg.tasks import ClassificationTask


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
