"""Spec section 3 (LRGEN) and section 4.2 (LRMUL): the low-rank pentary noise.

For ES step ``t``, antithetic pair ``j`` and layer ``l`` with weight matrix
``W_l`` of shape ``(out, fan)`` (``fan = in + 1`` counts the bias column):

* ``A`` (out x r) is stream ``(t, j, l, A)``: ``A[i, c] = digit[i*r + c]``;
* ``B`` (fan x r) is stream ``(t, j, l, B)``: ``B[k, c] = digit[k*r + c]``;
* quantized mode: ``E = PQUANT(A @ B.T, f)`` with ``f = log4(r) + sigma_shift``.

Everything is generated for all pairs of a step at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .arith import exact_matmul, pquant
from .prng import AB_A, AB_B, stream_digits, stream_state


def rank_shift(rank: int) -> int:
    """``log4(rank)``: 1/sqrt(r) as a right shift (r in {1, 4, 16, 64})."""
    return {1: 0, 4: 1, 16: 2, 64: 3}[rank]


def lrgen(
    seed: int,
    step: int,
    pairs: int,
    layer: int,
    out: int,
    fan: int,
    rank: int,
    dist: str,
    first_pair: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """LRGEN: the factors of pairs ``first_pair .. first_pair + pairs - 1`` of one
    (step, layer).

    Returns ``A`` with shape (pairs, out, rank) and ``B`` with shape (pairs, fan, rank),
    both int8 digits.
    """
    j = np.arange(first_pair, first_pair + pairs)
    sa = stream_state(seed, step, j, layer, AB_A)
    sb = stream_state(seed, step, j, layer, AB_B)
    a = stream_digits(sa, out * rank, dist).reshape(pairs, out, rank)
    b = stream_digits(sb, fan * rank, dist).reshape(pairs, fan, rank)
    return a, b


def lrmul(a: np.ndarray, b: np.ndarray, f: int) -> np.ndarray:
    """LRMUL + PQUANT: ``E[..., i, k] = PQUANT(sum_c A[..., i, c] * B[..., k, c], f)``.

    ``a`` is (..., out, r), ``b`` is (..., fan, r); the result is (..., out, fan) int8.
    """
    a, b = np.asarray(a), np.asarray(b)
    r = a.shape[-1]
    d = exact_matmul(a, np.swapaxes(b, -1, -2), bound=4 * r)
    return pquant(d, f)


@dataclass
class Noise:
    """The noise of one ES step: per layer, ``A`` (P, out, r), ``B`` (P, fan, r) and in
    quantized mode ``E`` (P, out, fan)."""

    step: int
    A: list[np.ndarray]
    B: list[np.ndarray]
    E: list[np.ndarray] | None
