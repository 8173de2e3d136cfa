"""Comparison of what a design produced against the golden model.

Sequences are compared in bulk (NumPy), and a failure names the first differing index
with both values, so that a mismatch in a 100,000-digit stream reads like::

    prng digits (key 0:3:5:1:1): first mismatch at index 40961 of 100000:
    expected 1, got -1

The functions raise :class:`Mismatch` (an ``AssertionError``), so they work the same in
pytest, in Amaranth testbenches and in cocotb tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pentegg.golden import lrgen, lrmul, rank_shift

__all__ = ["Mismatch", "Scoreboard", "compare", "flatten_beats", "lrgen_expected"]


class Mismatch(AssertionError):
    """Design output differs from the reference."""

    def __init__(self, what: str, index, expected, got, total: int):
        self.what, self.index, self.expected, self.got, self.total = (
            what,
            index,
            expected,
            got,
            total,
        )
        super().__init__(
            f"{what}: first mismatch at index {index} of {total}: expected {expected}, got {got}"
        )


def compare(what: str, expected, got) -> int:
    """Check ``got == expected`` element by element (any shape: compared flattened in
    row-major order, the index reported is the multi-index for arrays of rank > 1).

    Returns the number of elements compared; raises :class:`Mismatch` on the first
    difference, or on a length difference (reported at the first missing or extra index).
    """
    exp = np.asarray(expected)
    flat_e, flat_g = exp.reshape(-1), np.asarray(got).reshape(-1)
    n = min(flat_e.size, flat_g.size)
    diff = np.flatnonzero(flat_e[:n] != flat_g[:n])
    if diff.size:
        i = int(diff[0])
        index = np.unravel_index(i, exp.shape) if exp.ndim > 1 else i
        index = tuple(int(v) for v in index) if isinstance(index, tuple) else index
        raise Mismatch(what, index, _item(flat_e[i]), _item(flat_g[i]), flat_e.size)
    if flat_e.size != flat_g.size:
        i = n
        if flat_g.size < flat_e.size:
            raise Mismatch(what, i, _item(flat_e[i]), "nothing (stream ended)", flat_e.size)
        raise Mismatch(what, i, "nothing (end of reference)", _item(flat_g[i]), flat_e.size)
    return int(flat_e.size)


def _item(v):
    return v.item() if hasattr(v, "item") else v


class Scoreboard:
    """Accumulates comparisons for one test and reports a summary.

    ``check(what, expected, got)`` compares at once (raising on the first mismatch);
    ``checked`` counts the elements that matched, per kind.
    """

    def __init__(self, name: str, log=None):
        self.name = name
        self.log = log
        self.checked: dict[str, int] = {}

    def check(self, what: str, expected, got, kind: str | None = None) -> int:
        n = compare(f"{self.name} {what}", expected, got)
        key = kind or what
        self.checked[key] = self.checked.get(key, 0) + n
        return n

    def summary(self) -> str:
        parts = ", ".join(f"{n} {k}" for k, n in self.checked.items())
        return f"{self.name}: all equal to golden ({parts})"

    def report(self) -> None:
        if self.log is not None:
            self.log.info(self.summary())


def flatten_beats(beats: Sequence[Sequence[int]]) -> np.ndarray:
    """Concatenate per-beat digit lists into one int array."""
    if not beats:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.asarray(b, dtype=np.int64).reshape(-1) for b in beats])


def lrgen_expected(case: dict, rank: int, dist: str = "binomial"):
    """Golden ``(A, B, E, A.B^T)`` of one LowRankGenerator job.

    ``case`` holds the job's ``seed, step, pair, layer, out, fan, sigma_shift``; A is
    (out, rank), B (fan, rank), E and the dot products (out, fan), all integer arrays.
    """
    a, b = lrgen(
        case["seed"],
        case["step"],
        1,
        case["layer"],
        case["out"],
        case["fan"],
        rank,
        dist,
        first_pair=case["pair"],
    )
    a, b = a[0], b[0]
    e = lrmul(a, b, rank_shift(rank) + case["sigma_shift"])
    return a, b, e, a.astype(np.int64) @ b.T.astype(np.int64)
