"""The compiled integer engine of the golden model (Numba; the optional extra ``fast``).

Three functions of the ES step, each the same integers as its NumPy reference:

* :func:`lrgen` = :func:`pentegg.golden.lowrank.lrgen` (spec 2-3, the noise digits);
* :func:`lowrank_forward` = :func:`pentegg.golden.forward.population_forward_numpy` in
  low-rank mode (spec 5, 6.2);
* :func:`lowrank_z` = :func:`pentegg.golden.update.accumulate_z_numpy` in low-rank mode
  (spec 8.1).

``make_noise``, ``population_forward`` and ``accumulate_z`` call them when Numba is
installed (``PENTEGG_ENGINE=numpy`` forces the references); ``tests/test_engine.py`` pins
each equal to its reference bit for bit.

The forward pass, one fused loop nest per antithetic pair:

* activations are kept feature-major, ``(features, batch)``, so every inner loop is an
  ``acc[o, :] += w * h[i, :]`` over the batch: contiguous, vectorised, and skipped when
  the digit ``w`` is 0 (noise digits are 0 with probability 6/16, trained weights often);
* one parallel iteration is one antithetic pair ``j``: ``x.B_j`` (``r`` rows), then per
  output row ``o`` the pair's term ``p = rshr((x.B_j).A_j[o]^T, k)`` is formed once and
  both members get ``sat(rshr(base +- p, s))`` from it, where ``base`` is ``x.W^T``;
* when every member sees the same input (supervised batches), layer 0's ``x.W^T`` and
  ``x.B_j`` are computed once per step and per pair instead of per member;
* nothing of a pair leaves the core's caches between layers.

Exactness: no floating point takes part. Forward values are int32: :func:`supports` takes
a configuration only when :meth:`Config.engine_bound` (the largest magnitude any
intermediate of the forward pass reaches, rounding constants included) is below 2**31, so
no int32 value can wrap (the widest configuration the ranges allow reaches 133,201,672).
``Z`` is int64 (its bound reaches 2**32). PRNG words are held in int64 and every left
shift and the ``mix32`` addition are masked to 32 bits (arithmetic modulo 2**32).
"""

from __future__ import annotations

import os

import numpy as np

from .config import Config

_INT32_LIMIT = 1 << 31
ENGINES = ("auto", "numba", "numpy")
_kernel = None
_kernel_error: str | None = None


def requested() -> str:
    """The engine asked for by ``PENTEGG_ENGINE`` (``auto`` when unset)."""
    e = os.environ.get("PENTEGG_ENGINE", "auto").strip().lower() or "auto"
    if e not in ENGINES:
        raise ValueError(f"PENTEGG_ENGINE={e!r} not one of {ENGINES}")
    return e


def kernel():
    """The compiled kernel, or ``None`` when Numba is not installed (or not wanted)."""
    global _kernel, _kernel_error
    if _kernel is None and _kernel_error is None:
        if requested() == "numpy":
            _kernel_error = "PENTEGG_ENGINE=numpy"
        else:
            try:
                import numba

                if "NUMBA_THREADING_LAYER" not in os.environ:
                    # Numba's OpenMP layer leaves its workers spinning after a parallel
                    # loop, which starves OpenBLAS's threads in the next NumPy matmul
                    # (measured: the update's BLAS Z went from 0.25 ms to 36 ms);
                    # workqueue does not spin.
                    numba.config.THREADING_LAYER = "workqueue"
                from . import engine_kernels

                _kernel = engine_kernels.forward
            except ImportError as e:
                _kernel_error = f"numba not installed ({e})"
    return _kernel


def available() -> bool:
    """Whether the compiled engine can run (Numba installed, not switched off)."""
    return kernel() is not None


def supports(cfg: Config) -> bool:
    """Whether the compiled engine takes ``cfg``: low-rank mode, int32 bounds."""
    return cfg.mode == "lowrank" and cfg.engine_bound() < _INT32_LIMIT


def active(cfg: Config) -> str:
    """``numba`` or ``numpy``: the engine the population forward pass of ``cfg`` uses."""
    if supports(cfg) and kernel() is not None:
        return "numba"
    if requested() == "numba":
        raise RuntimeError(
            "PENTEGG_ENGINE=numba: "
            + (_kernel_error or f"configuration not supported (mode {cfg.mode})")
        )
    return "numpy"


def lrgen(cfg: Config, step: int, l: int) -> tuple[np.ndarray, np.ndarray]:
    """LRGEN (spec 3) of layer ``l`` for every pair of ``step``: ``A`` (P, out, r) and
    ``B`` (P, fan, r) int8, the digits of :func:`pentegg.golden.lowrank.lrgen` (pinned
    equal), from one compiled loop per stream instead of NumPy passes per word."""
    from . import engine_kernels
    from .prng import AB_A, AB_B, run_key

    out, fan = cfg.shape(l)
    key = int(run_key(cfg.seed))
    uniform = cfg.digits == "uniform"
    a = np.empty((cfg.pairs, out * cfg.rank), dtype=np.int8)
    b = np.empty((cfg.pairs, fan * cfg.rank), dtype=np.int8)
    engine_kernels.stream_digits(key, step, l, AB_A, uniform, a)
    engine_kernels.stream_digits(key, step, l, AB_B, uniform, b)
    return a.reshape(cfg.pairs, out, cfg.rank), b.reshape(cfg.pairs, fan, cfg.rank)


def lowrank_z(cfg: Config, noise, g: np.ndarray, l: int) -> np.ndarray:
    """``Z`` of layer ``l`` in low-rank mode (spec 8.1), (out, fan) int64: the engine's
    form of :func:`pentegg.golden.update.accumulate_z` (no BLAS call in the step, so no
    BLAS worker threads competing with the engine's)."""
    from . import engine_kernels

    out, fan = cfg.shape(l)
    z = np.empty((out, fan), dtype=np.int64)
    bt = np.ascontiguousarray(np.swapaxes(noise.B[l], 1, 2))
    engine_kernels.lowrank_z(np.asarray(g, dtype=np.int64), noise.A[l], bt, z)
    return z


def _flat(mats) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate int arrays into one int32 vector; return it and the offsets."""
    flat = [np.ascontiguousarray(m, dtype=np.int32).reshape(-1) for m in mats]
    offs = np.cumsum([0] + [f.size for f in flat[:-1]]).astype(np.int64)
    return np.concatenate(flat), offs


def lowrank_forward(cfg: Config, weights, noise, x: np.ndarray) -> np.ndarray:
    """Int8 logits of every member, (population, batch, classes): low-rank mode.

    ``x`` is a checked network input, (batch, in) shared or (population, batch, in).
    """
    k = kernel()
    shared = x.ndim == 2
    xt = np.ascontiguousarray(np.swapaxes(x if not shared else x[None], -1, -2), dtype=np.int32)
    w, woff = _flat(weights)
    a, aoff = _flat(noise.A)
    b, boff = _flat(noise.B)
    dims = np.asarray(cfg.layers, dtype=np.int64)
    shifts = np.asarray(cfg.shifts(), dtype=np.int64)
    out = np.empty((cfg.population, x.shape[-2], cfg.layers[-1]), dtype=np.int8)
    k(xt, shared, w, woff, a, aoff, b, boff, dims, shifts, cfg.pert_shift(), cfg.rank, out)
    return out
