"""Golden model against float EGGROLL, side by side: ``pentegg bench reference
float-eggroll``.

For each seed, the golden model (``pentegg train``'s configuration and step: the same
``es_step`` on the task's batch of step ``s``) and the float learner (JAX by default,
benchmarks/float_eggroll_jax.py) both train for ``steps`` ES steps, **interleaved** by
:func:`pentegg.benchmarks.timing.interleave`: round ``s`` times golden step ``s`` and float
step ``s``, each alone, in alternating order (golden first in even rounds, float first in
odd ones). Both see the same batch indices (``pentegg.tasks.step_rng``). Reported:

* ``golden_step_ms``, ``float_step_ms``: medians over every round of every seed;
* ``step_ratio``: the median of the per-round ratios golden / float, with its spread
  (:func:`pentegg.benchmarks.timing.summary`: quartiles, min, max);
* warm-up apart: the JAX compile time and the golden model's first step (which loads or
  compiles the Numba engine) are measured before round 0 and never enter the medians;
* the golden step breakdown (noise, forward, scoring + shaping, update), median over
  ``breakdown_rounds`` phase-by-phase steps on each seed's final state;
* the test accuracy both reach, and the golden run's ``weights_sha256`` (the same bits
  ``pentegg train --seed S`` gives).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from pentegg.golden import TrainState, es_step, init_state, weights_sha256
from pentegg.tasks import ClassificationTask, step_rng

from .golden_bench import step_phases
from .timing import interleave, summary

PHASES = ("noise_ms", "forward_ms", "scoring_ms", "update_ms")


class NumpyFloat:
    """benchmarks/float_eggroll.py behind the JAX learner's interface."""

    compile_s = 0.0

    def __init__(self, cfg):
        from .float_eggroll import FloatConfig, FloatEggroll

        self.es = FloatEggroll(
            FloatConfig(cfg.layers, cfg.population, cfg.rank, cfg.sigma, cfg.lr, cfg.seed)
        )

    def compile(self, x, y) -> float:
        return 0.0

    def step(self, s: int, x, y) -> None:
        self.es.step(x, y)

    def accuracy(self, x, y) -> float:
        return self.es.accuracy(x, y)


def make_float(backend: str, cfg):
    if backend == "jax":
        from .float_eggroll_jax import JaxEggroll

        return JaxEggroll(cfg)
    return NumpyFloat(cfg)


def side_by_side(
    task: ClassificationTask,
    golden_cfg_for_seed: Callable[[int], object],
    backend: str,
    seeds: list[int],
    steps: int,
    batch: int,
    sigma: float = 0.05,
    lr: float = 0.01,
    breakdown_rounds: int = 100,
    log: Callable[[str], None] = print,
) -> dict:
    from .float_eggroll_jax import JaxConfig

    n = len(task.x_train)

    def batch_idx(seed: int, s: int) -> np.ndarray:
        return np.arange(n) if batch >= n else step_rng(seed, s).choice(n, batch, replace=False)

    times: dict[str, list[float]] = {"golden": [], "float": []}
    ratios: list[float] = []
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    compile_s, warm_s = [], []

    def one_seed(seed: int) -> dict:
        gcfg = golden_cfg_for_seed(seed)
        fcfg = JaxConfig(gcfg.layers, gcfg.population, gcfg.rank, sigma, lr, seed)
        learner = make_float(backend, fcfg)
        idx0 = batch_idx(seed, 0)
        compile_s.append(learner.compile(task.x_train[idx0], task.y_train[idx0]))
        state: TrainState = init_state(gcfg)
        t = time.perf_counter()
        es_step(state, task.scorer(gcfg, 0, batch))  # warm-up: loads the engine
        warm_s.append(time.perf_counter() - t)
        done = {"golden": 0, "float": 0}  # each side's next step

        def golden_step():
            nonlocal state
            s = done["golden"]
            state = es_step(state, task.scorer(gcfg, s, batch))[0]
            done["golden"] = s + 1

        def float_step():
            s = done["float"]
            idx = batch_idx(seed, s)
            learner.step(s, task.x_train[idx], task.y_train[idx])
            done["float"] = s + 1

        timed = interleave(
            {"golden": golden_step, "float": float_step},
            steps,
            ratios={"step_ratio": ("golden", "float")},
            warmup=0,
        )
        for side in times:
            times[side] += timed.times[side]
        ratios.extend(timed.ratios["step_ratio"])
        g_wall, f_wall = sum(timed.times["golden"]), sum(timed.times["float"])
        for r in range(breakdown_rounds):
            idx = batch_idx(seed, steps + r)
            _, ph = step_phases(state, task.x_train[idx], task.y_train[idx])
            for p in PHASES:
                phases[p].append(ph[p])
        run = {
            "seed": seed,
            "value": learner.accuracy(task.x_test, task.y_test),
            "golden_value": task.metric(state),
            "weights_sha256": weights_sha256(state),
            "steps": steps,
            "wall_s": f_wall,
            "golden_wall_s": g_wall,
        }
        log(
            f"seed {seed}: float ({backend}) test accuracy {run['value']:.4f}, golden "
            f"{run['golden_value']:.4f}; steps {steps}: golden {g_wall:.1f} s, float "
            f"{f_wall:.1f} s (compile {compile_s[-1]:.1f} s apart)"
        )
        return run

    runs = [one_seed(seed) for seed in seeds]
    breakdown = {p: statistics.median(v) for p, v in phases.items()} if breakdown_rounds else {}
    if breakdown:
        breakdown["sum_ms"] = sum(breakdown[p] for p in PHASES)
    ratio = summary(ratios)
    return {
        "backend": backend,
        "golden_step_ms": 1e3 * statistics.median(times["golden"]),
        "float_step_ms": 1e3 * statistics.median(times["float"]),
        "step_ratio": ratio["median"],
        "step_ratio_spread": ratio,
        "golden_step_ms_spread": summary([1e3 * v for v in times["golden"]]),
        "float_step_ms_spread": summary([1e3 * v for v in times["float"]]),
        "rounds": len(ratios),
        "float_compile_s": compile_s,
        "golden_warmup_s": warm_s,
        "golden_breakdown_ms": breakdown,
        "breakdown_rounds": breakdown_rounds * len(seeds),
        "runs": runs,
    }
