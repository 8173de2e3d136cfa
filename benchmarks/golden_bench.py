"""``pentegg bench golden``: speed of the golden model, as figures and ratios.

All figures are measured in this process, on this machine, best of ``repeat`` runs:

1. **Forward throughput.** Samples per second of the perturbed population (every member
   on the same batch, low-rank and quantized mode) against plain batched inference of
   the same network on the same number of samples (``population * batch`` distinct
   inputs through the central network). ``forward_throughput_ratio`` is low-rank
   population / plain inference. The per-member-input case (every member its own inputs,
   as in reinforcement learning) is reported too.
2. **Naive ES.** One ES step that materialises every member's full perturbed weight
   matrix ``W + sign*E`` (quantized-mode semantics, identical results) and runs a batched
   matmul per member, against pentegg's step. ``naive_speedup`` = naive time / pentegg
   low-rank step time.
3. **Step breakdown** at population 256 and 1024: noise generation, forward pass,
   scoring and shaping, update (Z accumulation and apply), in milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from pentegg.golden import (
    Config,
    accumulate_z,
    apply_latent,
    apply_pentary,
    central_forward,
    classification_scores,
    init_state,
    make_noise,
    moves,
    population_forward,
    shape,
    threshold,
)
from pentegg.golden.forward import activate, with_bias


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Smallest wall time of ``repeat`` calls, seconds (one warm-up call first)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _data(cfg: Config, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 128, (batch, cfg.layers[0])).astype(np.int8)
    y = rng.integers(0, cfg.layers[-1], batch)
    return x, y


def _trained_like_state(cfg: Config):
    """A state with non-zero weights (random init), so timings see real data."""
    return init_state(cfg.replace(init="random"))


def _time_forward(cfg, st, noise, x, repeat: int) -> float:
    return best_of(lambda: population_forward(cfg, st.weights, noise, x), repeat)


def forward_throughput(layers, population: int, batch: int, repeat: int) -> dict:
    res: dict = {"population": population, "batch": batch, "layers": list(layers)}
    samples = population * batch
    rng = np.random.default_rng(1)
    for mode in ("lowrank", "quantized"):
        cfg = Config(layers=tuple(layers), population=population, mode=mode).validate()
        st = _trained_like_state(cfg)
        noise = make_noise(cfg, 0)
        x, _ = _data(cfg, batch)
        res[f"{mode}_samples_per_s"] = samples / _time_forward(cfg, st, noise, x, repeat)
        xm = rng.integers(0, 128, (population, batch, cfg.layers[0])).astype(np.int8)
        res[f"{mode}_per_member_inputs_samples_per_s"] = samples / _time_forward(
            cfg, st, noise, xm, repeat
        )
    cfg = Config(layers=tuple(layers), population=population).validate()
    st = _trained_like_state(cfg)
    xp = rng.integers(0, 128, (samples, cfg.layers[0])).astype(np.int8)
    t = best_of(lambda: central_forward(cfg, st.weights, xp), repeat)
    res["inference_samples_per_s"] = samples / t
    res["forward_throughput_ratio"] = res["lowrank_samples_per_s"] / res["inference_samples_per_s"]
    res["forward_throughput_ratio_quantized"] = (
        res["quantized_samples_per_s"] / res["inference_samples_per_s"]
    )
    res["forward_throughput_ratio_per_member_inputs"] = (
        res["lowrank_per_member_inputs_samples_per_s"] / res["inference_samples_per_s"]
    )
    return res


def naive_es_step(cfg: Config, st, x, y):
    """Reference ES step with every member's weights materialised (no sharing)."""
    noise = make_noise(cfg, st.step)
    n = cfg.population
    sign = np.where(np.arange(n) % 2 == 0, 1, -1)[:, None, None]
    h = np.broadcast_to(x.astype(np.float32), (n, *x.shape))
    shifts = cfg.shifts()
    for l in range(cfg.n_layers):
        wm = st.weights[l][None].astype(np.int16) + sign * np.repeat(noise.E[l], 2, axis=0)
        acc = np.matmul(with_bias(h), np.swapaxes(wm, 1, 2).astype(np.float32))
        h = activate(acc.astype(np.int64), shifts[l], last=l == cfg.n_layers - 1)
        h = h.astype(np.float32)
    scores = classification_scores(h.astype(np.int64), y, cfg.margin)
    g = shape(scores, cfg.shaping)
    theta = threshold(cfg, g)
    for l in range(cfg.n_layers):
        full = np.repeat(noise.E[l], 2, axis=0).astype(np.int64) * sign  # every member's E
        z = np.einsum("m,mij->ij", np.repeat(g, 2) * sign[:, 0, 0], full) // 2
        apply_latent(cfg, st.latent[l], moves(z, theta))


def step_phases(state, x, y) -> tuple[object, dict]:
    """One classification ES step, phase by phase as golden ``es_step`` runs them; returns
    the new state (equal to ``es_step_classify``'s) and the wall ms of each phase."""
    cfg = state.cfg
    t0 = time.perf_counter()
    noise = make_noise(cfg, state.step)
    t1 = time.perf_counter()
    logits = population_forward(cfg, state.weights, noise, x)
    t2 = time.perf_counter()
    g = shape(classification_scores(logits, y, cfg.margin), cfg.shaping)
    theta = threshold(cfg, g)
    t3 = time.perf_counter()
    new = state.copy()
    for l in range(cfg.n_layers):
        mv = moves(accumulate_z(cfg, noise, g, l), theta)
        if cfg.update == "latent":
            new.latent[l], new.weights[l] = apply_latent(cfg, state.latent[l], mv)
        else:
            new.weights[l] = apply_pentary(state.weights[l], mv)
    new.step = state.step + 1
    t4 = time.perf_counter()
    ms = {
        "noise_ms": 1e3 * (t1 - t0),
        "forward_ms": 1e3 * (t2 - t1),
        "scoring_ms": 1e3 * (t3 - t2),
        "update_ms": 1e3 * (t4 - t3),
    }
    return new, ms


def step_breakdown(layers, population: int, batch: int, repeat: int) -> dict:
    cfg = Config(layers=tuple(layers), population=population).validate()
    st = _trained_like_state(cfg)
    x, y = _data(cfg, batch)
    noise = make_noise(cfg, 0)
    logits = population_forward(cfg, st.weights, noise, x)
    g = shape(classification_scores(logits, y, cfg.margin), cfg.shaping)

    def update():
        th = threshold(cfg, g)
        for l in range(cfg.n_layers):
            apply_latent(cfg, st.latent[l], moves(accumulate_z(cfg, noise, g, l), th))

    parts = {
        "noise_ms": best_of(lambda: make_noise(cfg, 0), repeat) * 1e3,
        "forward_ms": best_of(lambda: population_forward(cfg, st.weights, noise, x), repeat) * 1e3,
        "shaping_ms": best_of(
            lambda: shape(classification_scores(logits, y, cfg.margin), cfg.shaping), repeat
        )
        * 1e3,
        "update_ms": best_of(update, repeat) * 1e3,
    }
    parts["step_ms"] = sum(parts.values())
    return parts


def run(
    layers=(64, 64, 10),
    batch: int = 256,
    populations=(256, 1024),
    repeat: int = 3,
    log: Callable[[str], None] = print,
) -> dict:
    out: dict = {"layers": list(layers), "batch": batch, "repeat": repeat}
    log(f"golden benchmark: layers {tuple(layers)}, batch {batch}, best of {repeat}")
    fw = forward_throughput(layers, 256, batch, repeat)
    out["forward"] = fw
    log(f"forward, population 256 x batch {batch} = {256 * batch} samples:")
    log(f"  plain inference          {fw['inference_samples_per_s']:12,.0f} samples/s")
    log(
        f"  population, low-rank     {fw['lowrank_samples_per_s']:12,.0f} samples/s  "
        f"ratio {fw['forward_throughput_ratio']:.2f}"
    )
    log(
        f"  population, quantized    {fw['quantized_samples_per_s']:12,.0f} samples/s  "
        f"ratio {fw['forward_throughput_ratio_quantized']:.2f}"
    )
    log(
        f"  low-rank, inputs per member {fw['lowrank_per_member_inputs_samples_per_s']:9,.0f} "
        f"samples/s  ratio {fw['forward_throughput_ratio_per_member_inputs']:.2f}"
    )
    out["step_ms"], out["breakdown"] = {}, {}
    for p in populations:
        b = step_breakdown(layers, p, batch, repeat)
        out["breakdown"][str(p)] = b
        out["step_ms"][str(p)] = b["step_ms"]
        log(
            f"ES step, population {p}: {b['step_ms']:.1f} ms = noise {b['noise_ms']:.1f} + "
            f"forward {b['forward_ms']:.1f} + shaping {b['shaping_ms']:.1f} + update "
            f"{b['update_ms']:.1f}"
        )
    cfg = Config(layers=tuple(layers), population=256, mode="quantized").validate()
    st = _trained_like_state(cfg)
    x, y = _data(cfg, batch)
    t_naive = best_of(lambda: naive_es_step(cfg, st, x, y), repeat)
    t_ours = out["step_ms"]["256"] / 1e3
    out["naive_step_ms"] = t_naive * 1e3
    out["naive_speedup"] = t_naive / t_ours
    log(
        f"naive ES (materialised W+-E per member), population 256: {t_naive * 1e3:.1f} ms/step; "
        f"pentegg low-rank {t_ours * 1e3:.1f} ms/step; speedup {out['naive_speedup']:.2f}x"
    )
    out["forward_throughput_ratio"] = fw["forward_throughput_ratio"]
    return out
