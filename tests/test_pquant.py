"""PQUANT (spec 4.1) over its whole input range and at every threshold."""

from fractions import Fraction

import numpy as np
import pytest

from pentegg.golden import pquant


def reference(x: int, f: int) -> int:
    """Round x / 2**f to nearest, ties away from zero, saturate to [-2, 2]."""
    v = Fraction(abs(x), 1 << f)
    m = int(v + Fraction(1, 2))  # floor(v + 1/2) for v >= 0
    return (1 if x > 0 else -1 if x < 0 else 0) * min(2, m)


@pytest.mark.parametrize("f", range(0, 11))
def test_pquant_matches_rounding_reference_over_whole_range(f):
    lim = 4 << f  # well past saturation on both sides
    xs = np.arange(-lim, lim + 1)
    got = pquant(xs, f)
    want = np.array([reference(int(x), f) for x in xs])
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"first mismatch x={xs[bad[0]]}: got {got[bad[0]]}, want {want[bad[0]]}"


@pytest.mark.parametrize("f", range(0, 16))
def test_pquant_thresholds_and_ties(f):
    one = (1 << f) // 2 if f else 1  # |x| where level 1 starts
    two = 3 * (1 << f) // 2 if f else 2  # |x| where level 2 starts
    assert pquant(one - 1, f) == 0 and pquant(one, f) == 1
    assert pquant(two - 1, f) == 1 and pquant(two, f) == 2
    assert pquant(-one, f) == -1 and pquant(-(one - 1), f) == 0
    assert pquant(-two, f) == -2 and pquant(-(two - 1), f) == -1


@pytest.mark.parametrize("f", [0, 1, 2, 5])
def test_pquant_is_odd_and_saturates(f):
    xs = np.arange(-(1 << 20), (1 << 20) + 1, 997)
    assert (pquant(-xs, f) == -pquant(xs, f)).all()
    assert pquant(np.int64(1) << 40, f) == 2 and pquant(-(np.int64(1) << 40), f) == -2


def test_pquant_rejects_bad_shift():
    with pytest.raises(ValueError, match=r"0\.\.30"):
        pquant(1, 31)
