"""Spec section 5 (forward pass) and section 6 (perturbation modes).

Activations are int8 in [-127, 127]. Each layer appends the constant ``BIAS_INPUT`` to
its input, accumulates exactly, then

* hidden layers: ``h = sat(rshr(acc, s_l), 0, 127)``   (saturating ReLU)
* last layer:    ``y = sat(rshr(acc, s_L), -127, 127)`` (int8 logits)

Member ``m`` belongs to pair ``j = m // 2`` with sign ``+1`` for even ``m`` and ``-1``
for odd ``m``. Its accumulator is

* quantized mode: ``acc = x . (W + sign * E_j)^T``  (``E_j`` = PQUANT(A_j B_j^T, f))
* low-rank mode:  ``acc = x . W^T + sign * rshr((x . B_j) . A_j^T, k)``

Inputs are shared by all members (``x`` of shape (batch, in)) or per member
(shape (population, batch, in)). Everything is vectorised over members and samples.

Implementation note: :func:`population_forward` runs the compiled integer engine of
golden/engine.py when it can (low-rank mode, Numba installed), otherwise
:func:`population_forward_numpy`. Inside the NumPy path values are carried in float32
(float64 if a bound needs it) holding exact integers. :meth:`Config.engine_bound` is the
largest magnitude any intermediate can reach; the dtype is chosen so that it is exactly
representable, and :func:`member_forward_materialised` (plain int64) pins the result in
the tests.
"""

from __future__ import annotations

import numpy as np

from . import engine
from .arith import rshr, sat
from .config import ACT_MAX, BIAS_INPUT, Config
from .lowrank import Noise


class InputError(ValueError):
    """Network input of the wrong shape or outside the int8 activation range."""


def check_input(cfg: Config, x) -> np.ndarray:
    """Validate a network input: integers in [-127, 127], last axis = layers[0]."""
    a = np.asarray(x)
    if a.ndim not in (2, 3) or a.shape[-1] != cfg.layers[0]:
        raise InputError(
            f"input shape {a.shape}: expected (batch, {cfg.layers[0]}) or "
            f"({cfg.population}, batch, {cfg.layers[0]})"
        )
    if a.ndim == 3 and a.shape[0] != cfg.population:
        raise InputError(
            f"per-member input has {a.shape[0]} members, population is {cfg.population}"
        )
    if not np.issubdtype(a.dtype, np.integer):
        raise InputError(f"input dtype {a.dtype} is not an integer type")
    if a.size and (a.min() < -ACT_MAX or a.max() > ACT_MAX):
        raise InputError(f"input values must lie in -{ACT_MAX}..{ACT_MAX}")
    return a


def with_bias(x: np.ndarray) -> np.ndarray:
    """Append the constant bias input (spec 5.1)."""
    pad = np.full((*x.shape[:-1], 1), BIAS_INPUT, dtype=x.dtype)
    return np.concatenate([x, pad], axis=-1)


def activate(acc: np.ndarray, shift: int, last: bool) -> np.ndarray:
    """Rescale and saturate an accumulator (spec 5.3)."""
    y = rshr(acc, shift)
    return sat(y, -ACT_MAX, ACT_MAX) if last else sat(y, 0, ACT_MAX)


# ----------------------------------------------------------------- exact engine
def _dtype(cfg: Config):
    return np.float32 if cfg.engine_bound() < 1 << 24 else np.float64


def _rshr_f(x: np.ndarray, s: int) -> np.ndarray:
    """rshr on exact-integer floats, in place: floor((x + 2**(s-1)) / 2**s)."""
    if s:
        x += 1 << (s - 1)
        x *= 1.0 / (1 << s)
        np.floor(x, out=x)
    return x


def _activate_f(acc: np.ndarray, shift: int, last: bool) -> np.ndarray:
    _rshr_f(acc, shift)
    return np.clip(acc, -ACT_MAX if last else 0, ACT_MAX, out=acc)


def _affine(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``with_bias(x) @ m`` for ``m`` of shape (..., fan, k), without the concatenation."""
    return np.matmul(x, m[..., :-1, :]) + BIAS_INPUT * m[..., -1:, :]


def layer_population(cfg: Config, l: int, w: np.ndarray, noise: Noise, x: np.ndarray) -> np.ndarray:
    """Accumulators of layer ``l`` for every member (spec 6): (population, batch, out).

    ``x`` is the layer input in the engine dtype, (batch, in) shared or
    (population, batch, in) per member.
    """
    p = cfg.pairs
    out, fan = cfg.shape(l)
    dt = x.dtype
    shared = x.ndim == 2
    base = _affine(x, w.T.astype(dt))  # (batch, out) or (N, batch, out)
    xm = x if shared else x.reshape(p, -1, fan - 1)  # per member: (P, 2*batch, in)
    if cfg.mode == "quantized":
        e = noise.E[l].astype(dt)  # (P, out, fan)
        if shared:
            pe = _affine(xm, e.reshape(p * out, fan).T)  # (batch, P*out)
            pert = pe.reshape(-1, p, out).transpose(1, 0, 2)
        else:
            pert = _affine(xm, np.swapaxes(e, 1, 2))  # (P, 2*batch, out)
    else:
        a, b = noise.A[l].astype(dt), noise.B[l].astype(dt)  # (P, out, r), (P, fan, r)
        r = cfg.rank
        if shared:
            xbv = _affine(xm, b.transpose(1, 0, 2).reshape(fan, p * r))
            xbv = xbv.reshape(-1, p, r).transpose(1, 0, 2)  # (P, batch, r)
        else:
            xbv = _affine(xm, b)  # (P, 2*batch, r)
        pert = _rshr_f(np.matmul(xbv, np.swapaxes(a, 1, 2)), cfg.pert_shift())
    sign = np.array([1, -1], dtype=dt)[None, :, None, None]
    if shared:
        acc = base[None, None] + pert[:, None] * sign
    else:
        acc = base.reshape(p, 2, -1, out) + pert.reshape(p, 2, -1, out) * sign
    return acc.reshape(cfg.population, -1, out)


def population_forward(cfg: Config, weights: list[np.ndarray], noise: Noise, x) -> np.ndarray:
    """Int8 logits of every member: (population, batch, classes) int8.

    Runs the compiled integer engine (golden/engine.py) when it takes ``cfg`` and Numba
    is installed, else :func:`population_forward_numpy`; the two are pinned equal.
    """
    x = check_input(cfg, x)
    if engine.active(cfg) == "numba":
        return engine.lowrank_forward(cfg, weights, noise, x)
    return population_forward_numpy(cfg, weights, noise, x)


def population_forward_numpy(cfg: Config, weights: list[np.ndarray], noise: Noise, x) -> np.ndarray:
    """:func:`population_forward` in NumPy (float BLAS holding exact integers)."""
    h = check_input(cfg, x).astype(_dtype(cfg))
    shifts = cfg.shifts()
    for l in range(cfg.n_layers):
        acc = layer_population(cfg, l, weights[l], noise, h)
        h = _activate_f(acc, shifts[l], last=l == cfg.n_layers - 1)
    return h.astype(np.int8)


def central_forward(cfg: Config, weights: list[np.ndarray], x) -> np.ndarray:
    """Int8 logits of the unperturbed model: (batch, classes) int8."""
    h = check_input(cfg, x)
    if h.ndim != 2:
        raise InputError("central_forward takes a shared (batch, in) input")
    h = h.astype(_dtype(cfg))
    shifts = cfg.shifts()
    for l in range(cfg.n_layers):
        acc = _affine(h, weights[l].T.astype(h.dtype))
        h = _activate_f(acc, shifts[l], last=l == cfg.n_layers - 1)
    return h.astype(np.int8)


def member_forward_materialised(
    cfg: Config, weights: list[np.ndarray], noise: Noise, m: int, x
) -> np.ndarray:
    """Reference: member ``m`` through explicitly materialised perturbed weights, int64.

    Slow (one member at a time); tests pin the vectorised path to it. Quantized mode
    uses ``W + sign*E``; low-rank mode computes ``x.W^T + sign*rshr(x.(B A^T), k)`` with
    ``A B^T`` materialised as a matrix.
    """
    h = check_input(cfg, x).astype(np.int64)
    if h.ndim == 3:
        h = h[m]
    j, sign = m // 2, 1 - 2 * (m % 2)
    shifts = cfg.shifts()
    for l in range(cfg.n_layers):
        xb = with_bias(h)
        if cfg.mode == "quantized":
            wm = weights[l].astype(np.int64) + sign * noise.E[l][j].astype(np.int64)
            acc = xb @ wm.T
        else:
            ab = noise.A[l][j].astype(np.int64) @ noise.B[l][j].astype(np.int64).T
            acc = xb @ weights[l].astype(np.int64).T + sign * rshr(xb @ ab.T, cfg.pert_shift())
        h = activate(acc, shifts[l], last=l == cfg.n_layers - 1)
    return h.astype(np.int8)


def lowrank_term(x, a, b, k: int) -> np.ndarray:
    """The low-rank perturbation term of one member (spec 6.2), before its sign:
    ``rshr((with_bias(x) . B) . A^T, k)`` for ``x`` (in,), ``a`` (out, r), ``b`` (fan, r)."""
    xb = with_bias(np.asarray(x, dtype=np.int64))
    return rshr((xb @ np.asarray(b, dtype=np.int64)) @ np.asarray(a, dtype=np.int64).T, k)
