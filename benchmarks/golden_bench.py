"""``pentegg bench golden``: speed of the golden model, as figures and ratios.

Every figure is measured in this process, on this machine, in interleaved rounds
(benchmarks/timing.py): each round calls every side being compared once, so a change of
machine load weighs on all of them alike. A ratio is the median of its per-round ratios
(reported with its quartiles and range); an absolute figure (ms, samples/s) is the median
of the per-round times.

1. **Forward throughput.** Samples per second of the perturbed population (every member
   on the same batch, low-rank and quantized mode) against plain batched inference of
   the same network on the same number of samples (``population * batch`` distinct
   inputs through the central network), all five sides in the same rounds.
   ``forward_throughput_ratio`` is low-rank population / plain inference (per round:
   inference time / population time). The per-member-input case (every member its own
   inputs, as in reinforcement learning) is reported too.
2. **Step breakdown** at population 256 and 1024: noise generation, forward pass,
   scoring and shaping, update (Z accumulation and apply), in milliseconds, the four
   parts interleaved; ``step_ms`` is the sum of the four medians.
3. **Naive ES.** One ES step that materialises every member's full perturbed weight
   matrix ``W + sign*E`` (quantized-mode semantics, identical results) and runs a batched
   matmul per member, against pentegg's low-rank step (``es_step_classify``), the two
   interleaved. ``naive_speedup`` = naive step time / pentegg step time, per round.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import numpy as np

from pentegg.golden import (
    Config,
    accumulate_z,
    apply_latent,
    apply_pentary,
    central_forward,
    classification_scores,
    es_step_classify,
    init_state,
    make_noise,
    moves,
    population_forward,
    shape,
    threshold,
)
from pentegg.golden.forward import activate, with_bias

from .timing import Interleaved, format_summary, interleave, summary

# ratio name -> (numerator side, denominator side) of the forward rounds: the time of plain
# inference over the time of the population on the same number of samples.
FORWARD_RATIOS = {
    "forward_throughput_ratio": ("inference", "lowrank"),
    "forward_throughput_ratio_quantized": ("inference", "quantized"),
    "forward_throughput_ratio_per_member_inputs": ("inference", "lowrank_per_member_inputs"),
}


def _data(cfg: Config, batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 128, (batch, cfg.layers[0])).astype(np.int8)
    y = rng.integers(0, cfg.layers[-1], batch)
    return x, y


def _trained_like_state(cfg: Config):
    """A state with non-zero weights (random init), so timings see real data."""
    return init_state(cfg.replace(init="random"))


def forward_throughput(layers, population: int, batch: int, rounds: int):
    """Samples/s of plain inference and of the perturbed population (low-rank and
    quantized, shared and per-member inputs), the five sides in ``rounds`` interleaved
    rounds. Returns (figures, the :class:`Interleaved` timings); the figures' ratios are
    medians of per-round ratios (``FORWARD_RATIOS``)."""
    res: dict = {"population": population, "batch": batch, "layers": list(layers)}
    samples = population * batch
    rng = np.random.default_rng(1)
    cfg = Config(layers=tuple(layers), population=population).validate()
    st = _trained_like_state(cfg)
    xp = rng.integers(0, 128, (samples, cfg.layers[0])).astype(np.int8)
    sides: dict[str, Callable[[], object]] = {
        "inference": partial(central_forward, cfg, st.weights, xp)
    }
    for mode in ("lowrank", "quantized"):
        cfg = Config(layers=tuple(layers), population=population, mode=mode).validate()
        st = _trained_like_state(cfg)
        noise = make_noise(cfg, 0)
        x, _ = _data(cfg, batch)
        xm = rng.integers(0, 128, (population, batch, cfg.layers[0])).astype(np.int8)
        sides[mode] = partial(population_forward, cfg, st.weights, noise, x)
        sides[f"{mode}_per_member_inputs"] = partial(population_forward, cfg, st.weights, noise, xm)
    timed = interleave(sides, rounds, ratios=FORWARD_RATIOS)
    for side in sides:
        res[f"{side}_samples_per_s"] = samples / timed.median(side)
    for name in FORWARD_RATIOS:
        res[name] = summary(timed.ratios[name])["median"]
    return res, timed


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


def step_breakdown(layers, population: int, batch: int, rounds: int):
    """Milliseconds of the four parts of a low-rank ES step (noise, forward, shaping,
    update), interleaved in ``rounds`` rounds; each part is its median, ``step_ms`` their
    sum. Returns (parts, the :class:`Interleaved` timings)."""
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

    sides = {
        "noise": partial(make_noise, cfg, 0),
        "forward": partial(population_forward, cfg, st.weights, noise, x),
        "shaping": lambda: shape(classification_scores(logits, y, cfg.margin), cfg.shaping),
        "update": update,
    }
    timed = interleave(sides, rounds)
    parts = {f"{side}_ms": timed.median(side) * 1e3 for side in sides}
    parts["step_ms"] = sum(parts.values())
    return parts, timed


def naive_comparison(layers, population: int, batch: int, rounds: int):
    """Milliseconds per ES step of :func:`naive_es_step` (quantized-mode semantics) and of
    pentegg's low-rank ``es_step_classify``, interleaved in ``rounds`` rounds;
    ``naive_speedup`` is the median of the per-round quotients naive / pentegg. Returns
    (figures, the :class:`Interleaved` timings)."""
    cfg_naive = Config(layers=tuple(layers), population=population, mode="quantized").validate()
    st_naive = _trained_like_state(cfg_naive)
    cfg = Config(layers=tuple(layers), population=population).validate()
    st = _trained_like_state(cfg)
    x, y = _data(cfg, batch)
    timed = interleave(
        {
            "naive": partial(naive_es_step, cfg_naive, st_naive, x, y),
            "pentegg": partial(es_step_classify, st, x, y),
        },
        rounds,
        ratios={"naive_speedup": ("naive", "pentegg")},
    )
    res = {
        "naive_step_ms": timed.median("naive") * 1e3,
        "pentegg_step_ms": timed.median("pentegg") * 1e3,
        "naive_speedup": summary(timed.ratios["naive_speedup"])["median"],
    }
    return res, timed


def run(
    layers=(64, 64, 10),
    batch: int = 256,
    populations=(256, 1024),
    rounds: int = 15,
    log: Callable[[str], None] = print,
) -> dict:
    """Every figure of ``pentegg bench golden``; prints them through ``log``.

    The record's ``ratios`` holds, for every ratio printed, its :func:`timing.summary`
    (median, quartiles, range, n) and its ``per_round`` values; ``timings_ms`` holds every
    side's per-round times in milliseconds, grouped by comparison."""
    out: dict = {"layers": list(layers), "batch": batch, "rounds": rounds}
    ratios: dict[str, dict] = {}
    timings: dict[str, Interleaved] = {}

    def ratio(name: str, timed: Interleaved) -> str:
        ratios[name] = {**summary(timed.ratios[name]), "per_round": timed.ratios[name]}
        return format_summary(ratios[name])

    log(
        f"golden benchmark: layers {tuple(layers)}, batch {batch}, {rounds} interleaved "
        "rounds; ratio = median of the per-round ratios (IQR, range), times = medians"
    )
    fw, timings["forward"] = forward_throughput(layers, 256, batch, rounds)
    out["forward"] = fw
    f = timings["forward"]
    log(f"forward, population 256 x batch {batch} = {256 * batch} samples:")
    log(f"  plain inference          {fw['inference_samples_per_s']:12,.0f} samples/s")
    log(
        f"  population, low-rank     {fw['lowrank_samples_per_s']:12,.0f} samples/s  "
        f"ratio {ratio('forward_throughput_ratio', f)}"
    )
    log(
        f"  population, quantized    {fw['quantized_samples_per_s']:12,.0f} samples/s  "
        f"ratio {ratio('forward_throughput_ratio_quantized', f)}"
    )
    log(
        f"  low-rank, inputs per member {fw['lowrank_per_member_inputs_samples_per_s']:9,.0f} "
        f"samples/s  ratio {ratio('forward_throughput_ratio_per_member_inputs', f)}"
    )
    out["step_ms"], out["breakdown"] = {}, {}
    for p in populations:
        b, timings[f"step_{p}"] = step_breakdown(layers, p, batch, rounds)
        out["breakdown"][str(p)] = b
        out["step_ms"][str(p)] = b["step_ms"]
        log(
            f"ES step, population {p}: {b['step_ms']:.1f} ms = noise {b['noise_ms']:.1f} + "
            f"forward {b['forward_ms']:.1f} + shaping {b['shaping_ms']:.1f} + update "
            f"{b['update_ms']:.1f}"
        )
    nv, timings["naive"] = naive_comparison(layers, 256, batch, rounds)
    out.update(nv)
    log(
        f"naive ES (materialised W+-E per member), population 256: "
        f"{nv['naive_step_ms']:.1f} ms/step; pentegg low-rank step {nv['pentegg_step_ms']:.1f} "
        f"ms/step; speedup {ratio('naive_speedup', timings['naive'])}"
    )
    out["forward_throughput_ratio"] = fw["forward_throughput_ratio"]
    out["ratios"] = ratios
    out["timings_ms"] = {k: v.to_dict()["times"] for k, v in timings.items()}
    return out
