"""Spec section 10: initial state, one ES step, evaluation.

A :class:`TrainState` is the complete training state: the configuration, the index of
the next ES step, the pentary weights and (latent update) the latent integers ``V``.
Everything else is recomputed from the seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import engine
from .arith import pquant, sat
from .config import Config, ConfigError
from .fitness import classification_scores, shape
from .forward import central_forward, population_forward
from .lowrank import Noise, lrgen, lrmul
from .prng import AB_A, INIT_STEP, MAX_STEP, stream_digits, stream_state
from .update import accumulate_z, apply_latent, apply_pentary, moves, threshold


@dataclass
class TrainState:
    cfg: Config
    step: int
    weights: list[np.ndarray]
    latent: list[np.ndarray] | None = None

    def copy(self) -> TrainState:
        return TrainState(
            self.cfg,
            self.step,
            [w.copy() for w in self.weights],
            None if self.latent is None else [v.copy() for v in self.latent],
        )


@dataclass
class StepInfo:
    step: int
    scores: np.ndarray
    g: np.ndarray
    theta: int
    moved: int
    extra: dict = field(default_factory=dict)


def init_weights(cfg: Config) -> list[np.ndarray]:
    """Initial pentary weights (spec 10.1): zero, or row-major digits of the init stream
    (step 0xFFFF, pair 0, layer l, A)."""
    ws = []
    for l in range(cfg.n_layers):
        out, fan = cfg.shape(l)
        if cfg.init == "zero":
            ws.append(np.zeros((out, fan), dtype=np.int8))
        else:
            s0 = stream_state(cfg.seed, INIT_STEP, 0, l, AB_A)
            ws.append(stream_digits(s0, out * fan, cfg.digits).reshape(out, fan))
    return ws


def init_state(cfg: Config) -> TrainState:
    cfg.validate()
    w = init_weights(cfg)
    latent = None
    if cfg.update == "latent":
        vmax = cfg.latent_max()
        latent = [
            sat(wi.astype(np.int16) << cfg.latent_shift, -vmax, vmax).astype(np.int16) for wi in w
        ]
        w = [pquant(v, cfg.latent_shift) for v in latent]
    return TrainState(cfg, 0, w, latent)


def make_noise(cfg: Config, step: int) -> Noise:
    """All noise of ES step ``step`` (spec 3, 4.2)."""
    if not 0 <= step <= MAX_STEP:
        raise ConfigError(f"step={step} out of range: allowed 0..{MAX_STEP}")
    a_list, b_list, e_list = [], [], []
    for l in range(cfg.n_layers):
        out, fan = cfg.shape(l)
        if engine.available():  # compiled LRGEN, pinned equal to lrgen
            a, b = engine.lrgen(cfg, step, l)
        else:
            a, b = lrgen(cfg.seed, step, cfg.pairs, l, out, fan, cfg.rank, cfg.digits)
        a_list.append(a)
        b_list.append(b)
        if cfg.mode == "quantized":
            e_list.append(lrmul(a, b, cfg.pert_shift()))
    return Noise(step, a_list, b_list, e_list if cfg.mode == "quantized" else None)


Forward = Callable[[np.ndarray], np.ndarray]


def es_step(
    state: TrainState, evaluate: Callable[[Forward], np.ndarray]
) -> tuple[TrainState, StepInfo]:
    """One ES step. ``evaluate(forward)`` returns one integer score per member, where
    ``forward(x)`` gives the int8 logits of every member for input ``x``.

    Returns the new state (the input is not modified) and a :class:`StepInfo`.
    """
    cfg = state.cfg
    noise = make_noise(cfg, state.step)
    scores = np.asarray(evaluate(lambda x: population_forward(cfg, state.weights, noise, x)))
    if scores.shape != (cfg.population,):
        raise ValueError(f"evaluate returned shape {scores.shape}, expected ({cfg.population},)")
    g = shape(scores, cfg.shaping)
    theta = threshold(cfg, g)
    new = state.copy()
    moved = 0
    for l in range(cfg.n_layers):
        mv = moves(accumulate_z(cfg, noise, g, l), theta)
        if cfg.update == "latent":
            new.latent[l], w = apply_latent(cfg, state.latent[l], mv)
        else:
            w = apply_pentary(state.weights[l], mv)
        moved += int((w != state.weights[l]).sum())
        new.weights[l] = w
    new.step = state.step + 1
    return new, StepInfo(state.step, scores, g, theta, moved)


def es_step_classify(state: TrainState, x, y) -> tuple[TrainState, StepInfo]:
    """One ES step on a labelled batch: scores are spec 7.1's margin hinge."""
    margin = state.cfg.margin
    return es_step(state, lambda fwd: classification_scores(fwd(x), y, margin))


def predict(state: TrainState, x) -> np.ndarray:
    """Class of each sample: the first index of the largest logit (spec 5.4)."""
    return central_forward(state.cfg, state.weights, x).argmax(axis=1)


def accuracy(state: TrainState, x, y) -> float:
    """Fraction of correct predictions (reporting only)."""
    return float((predict(state, x) == np.asarray(y)).mean())
