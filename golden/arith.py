"""Spec section 0 (notation) and section 4 (PQUANT): integer helpers.

Every function here works elementwise on NumPy integer arrays (or Python ints) and
returns int64 arrays. ``>>`` on signed values is the arithmetic (floor) shift.
"""

from __future__ import annotations

import numpy as np

# Float BLAS is used as an exact integer engine where it pays: a float32 product sum
# is exact while every partial sum stays below 2**24, a float64 one below 2**53.
_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53


def rshr(x, s: int):
    """Rounding arithmetic right shift, ties towards +infinity (spec 0.2).

    ``rshr(x, s) = (x + 2**(s-1)) >> s`` for ``s >= 1`` and ``x`` for ``s == 0``.
    """
    x = np.asarray(x, dtype=np.int64)
    if s == 0:
        return x
    return (x + (1 << (s - 1))) >> s


def sat(x, lo: int, hi: int):
    """Saturate (clamp) to ``[lo, hi]`` (spec 0.3)."""
    return np.clip(np.asarray(x, dtype=np.int64), lo, hi)


def pquant(x, f: int):
    """PQUANT (spec 4.1): the five-level quantizer of a fixed-point value.

    The input is an integer ``x`` read as ``x / 2**f``. The result is that value rounded
    to the nearest integer, ties away from zero, then saturated to ``[-2, 2]``::

        m = min(2, (2*|x| + 2**f) >> (f + 1));  PQUANT(x, f) = sign(x) * m

    It is odd (``PQUANT(-x) == -PQUANT(x)``) so antithetic noise stays symmetric.
    """
    if not 0 <= f <= 30:
        raise ValueError(f"pquant: shift f={f} out of range 0..30")
    x = np.asarray(x, dtype=np.int64)
    mag = np.minimum(2, (2 * np.abs(x) + (1 << f)) >> (f + 1))
    return (np.sign(x) * mag).astype(np.int8)


def exact_matmul(a, b, bound: int):
    """``a @ b`` of integer arrays through float BLAS, exact by construction.

    ``bound`` is an upper bound on ``sum_k |a[..., i, k] * b[..., k, j]|`` computed from
    the parameters by the caller; it picks float32 (bound < 2**24) or float64
    (bound < 2**53) so that every partial sum is an exactly representable integer.
    Returns int64.
    """
    if bound < _F32_EXACT:
        dt = np.float32
    elif bound < _F64_EXACT:
        dt = np.float64
    else:  # pragma: no cover - guarded by Config.validate
        raise OverflowError(f"exact_matmul: bound {bound} exceeds 2**53")
    out = np.matmul(np.asarray(a, dtype=dt), np.asarray(b, dtype=dt))
    return out.astype(np.int64)


def isqrt(n: int) -> int:
    """Integer square root, ``floor(sqrt(n))`` for ``n >= 0`` (spec 0.4)."""
    import math

    return math.isqrt(int(n))


def bits_for(lo: int, hi: int) -> int:
    """Width of a two's-complement register that holds every integer in ``[lo, hi]``."""
    n = 1
    while not (-(1 << (n - 1)) <= lo and hi <= (1 << (n - 1)) - 1):
        n += 1
    return n
