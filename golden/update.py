"""Spec section 8: Z accumulation and the weight update.

``Z_l = sum_j g_j * E_j`` per weight, where ``E_j`` is the pentary perturbation in
quantized mode and the unquantized product ``A_j B_j^T`` in low-rank mode.

A weight moves when its vote is significant::

    theta = (tau * isqrt(sum_j g_j^2)) >> 4
    move  = sign(Z) if |Z| > theta else 0      (Z == 0 never moves)

* ``pentary`` update: ``W = sat(W + move, -2, 2)``.
* ``latent`` update: ``V = sat(V + move, -Vmax, Vmax)`` and ``W = PQUANT(V, q)``.
"""

from __future__ import annotations

import numpy as np

from . import engine
from .arith import exact_matmul, isqrt, pquant, sat
from .config import Config
from .lowrank import Noise


def accumulate_z(cfg: Config, noise: Noise, g: np.ndarray, l: int) -> np.ndarray:
    """``Z`` of layer ``l`` (out, fan) int64 (the compiled engine's integer loop when it
    runs, else an exact float BLAS product; pinned equal in tests/test_engine.py)."""
    if engine.active(cfg) == "numba":
        return engine.lowrank_z(cfg, noise, g, l)
    return accumulate_z_numpy(cfg, noise, g, l)


def accumulate_z_numpy(cfg: Config, noise: Noise, g: np.ndarray, l: int) -> np.ndarray:
    """:func:`accumulate_z` through float BLAS holding exact integers (``exact_matmul``)."""
    g = np.asarray(g, dtype=np.int64)
    out, fan = cfg.shape(l)
    bound = cfg.z_bound(l)
    if cfg.mode == "quantized":
        return exact_matmul(g[None, :], noise.E[l].reshape(cfg.pairs, out * fan), bound).reshape(
            out, fan
        )
    a, b = noise.A[l], noise.B[l]
    r = cfg.rank
    ag = (a.astype(np.int64) * g[:, None, None]).transpose(1, 0, 2).reshape(out, cfg.pairs * r)
    bt = b.transpose(0, 2, 1).reshape(cfg.pairs * r, fan)
    return exact_matmul(ag, bt, bound)


def threshold(cfg: Config, g: np.ndarray) -> int:
    """Significance threshold ``theta = (tau * isqrt(sum g^2)) >> 4``."""
    g = np.asarray(g, dtype=np.int64)
    return (cfg.tau_q4() * isqrt(int((g * g).sum()))) >> 4


def moves(z: np.ndarray, theta: int) -> np.ndarray:
    """``sign(Z)`` where ``|Z| > theta``, else 0 (int8)."""
    return (np.sign(z) * (np.abs(z) > theta)).astype(np.int8)


def apply_pentary(w: np.ndarray, move: np.ndarray) -> np.ndarray:
    return sat(w.astype(np.int64) + move, -2, 2).astype(np.int8)


def apply_latent(cfg: Config, v: np.ndarray, move: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    vmax = cfg.latent_max()
    v = sat(v.astype(np.int64) + move, -vmax, vmax).astype(np.int16)
    return v, pquant(v, cfg.latent_shift)
