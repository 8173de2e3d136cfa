"""Spec section 7: fitness scores and integer shaping.

* ``classification_scores``: hinge on the int8 logit margin, summed over the batch:
  ``s_m = sum_b min(logit[y_b] - max_{k != y_b} logit[k], M)``.
* ``shape_sign``: ``g_j = sign(s_{2j} - s_{2j+1})``.
* ``shape_rank``: centered ranks with ties averaged, ``c_m = 2*avgrank_m - (N-1)``
  (an integer), then ``g_j = c_{2j} - c_{2j+1}``.

``g`` (one small integer per antithetic pair) is all the update needs.
"""

from __future__ import annotations

import numpy as np


def classification_scores(logits, y, margin: int) -> np.ndarray:
    """Per-member score (int64) from int8 logits (N, batch, C) and labels (batch,)."""
    z = np.asarray(logits)
    y = np.asarray(y, dtype=np.int64)
    _, b, c = z.shape
    if y.shape != (b,):
        raise ValueError(f"labels shape {y.shape} does not match batch {b}")
    if y.size and (y.min() < 0 or y.max() >= c):
        raise ValueError(f"labels must lie in 0..{c - 1}")
    if c == 1:  # no other class: every term is the margin M (spec 7.1)
        return np.full(z.shape[0], margin * b, dtype=np.int64)
    z = z.astype(np.int16)  # logits are int8; margins lie in [-254, 254]
    rows = np.arange(b)
    true = z[:, rows, y]
    z[:, rows, y] = -32768  # exclude the true class
    # max over the other classes: one elementwise pass per class (a reduction over the
    # short last axis is several times slower in NumPy; the result is the same)
    other = z[..., 0].copy()
    for k in range(1, c):
        np.maximum(other, z[..., k], out=other)
    margins = true - other
    return np.minimum(margins, margin).sum(axis=1, dtype=np.int64)


def centered_ranks(scores) -> np.ndarray:
    """``c_m = 2*avgrank_m - (N-1)``, ties averaged; integers in [-(N-1), N-1]."""
    s = np.asarray(scores)
    n = s.shape[0]
    _, inv, counts = np.unique(s, return_inverse=True, return_counts=True)
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])  # first rank of each value
    twice_avg = 2 * start + counts - 1
    return (twice_avg[inv] - (n - 1)).astype(np.int64)


def shape_rank(scores) -> np.ndarray:
    c = centered_ranks(scores)
    return c[0::2] - c[1::2]


def shape_sign(scores) -> np.ndarray:
    s = np.asarray(scores, dtype=np.int64)
    return np.sign(s[0::2] - s[1::2])


def shape(scores, kind: str) -> np.ndarray:
    """Pair weights ``g`` (int64, one per pair) from member scores (spec 7.2)."""
    s = np.asarray(scores)
    if s.ndim != 1 or s.shape[0] % 2:
        raise ValueError(f"scores must be one value per member (even count), got {s.shape}")
    if not np.issubdtype(s.dtype, np.integer):
        raise ValueError(f"scores must be integers, got dtype {s.dtype}")
    if kind == "rank":
        return shape_rank(s)
    if kind == "sign":
        return shape_sign(s)
    raise ValueError(f"shaping {kind!r} not one of ('rank', 'sign')")
