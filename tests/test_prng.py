"""The keyed PRNG (spec 2): exactness, restart, distinct keys, digit distribution."""

import numpy as np
import pytest
from scipy import stats

from pentegg.golden import prng
from pentegg.golden.prng import (
    digit_probabilities,
    mix32,
    run_key,
    stream_digits,
    stream_key,
    stream_state,
    stream_words,
    xs32,
)

M32 = 0xFFFFFFFF


def xs32_py(x: int) -> int:
    x ^= (x << 13) & M32
    x ^= x >> 17
    x ^= (x << 5) & M32
    return x


def mix32_py(x: int) -> int:
    for _ in range(6):
        x = xs32_py(x)
        x = (x + (x << 11)) & M32
    return x


def xs32_inverse(y: int) -> int:
    # undo x ^= x << 5, x ^= x >> 17, x ^= x << 13 (each by repeated application)
    def un_left(v, s):
        x = v
        for _ in range(32 // s + 1):
            x = v ^ ((x << s) & M32)
        return x

    def un_right(v, s):
        x = v
        for _ in range(32 // s + 1):
            x = v ^ (x >> s)
        return x

    return un_left(un_right(un_left(y, 5), 17), 13)


def mix32_inverse(y: int) -> int:
    inv2049 = pow(2049, -1, 1 << 32)
    for _ in range(6):
        y = (y * inv2049) & M32
        y = xs32_inverse(y)
    return y


def test_xs32_and_mix32_match_a_plain_python_model():
    xs = np.random.default_rng(0).integers(0, 1 << 32, 2000, dtype=np.uint64).astype(np.uint32)
    assert [int(v) for v in xs32(xs)] == [xs32_py(int(v)) for v in xs]
    assert [int(v) for v in mix32(xs)] == [mix32_py(int(v)) for v in xs]


def test_mix32_is_a_bijection_fixing_zero():
    xs = np.random.default_rng(1).integers(0, 1 << 32, 2000, dtype=np.uint64).astype(np.uint32)
    assert all(mix32_inverse(int(y)) == int(x) for x, y in zip(xs, mix32(xs), strict=True))
    assert int(mix32(np.uint32(0))) == 0


def test_run_key_has_bit_31_set_and_rejects_bad_seeds():
    for s in (0, 1, 2, 12345, M32):
        assert int(run_key(s)) >> 31 == 1
    with pytest.raises(ValueError, match="seed"):
        run_key(1 << 32)
    with pytest.raises(ValueError, match="seed"):
        run_key(-1)


def test_stream_key_layout_and_ranges():
    assert int(stream_key(1, 0, 0, 0)) == 1 << 15
    assert int(stream_key(0, 1, 0, 0)) == 1 << 4
    assert int(stream_key(0, 0, 1, 0)) == 1 << 1
    assert int(stream_key(0, 0, 0, 1)) == 1
    assert int(stream_key(65535, 2047, 7, 1)) == (1 << 31) - 1
    for kw, bad in (("step", 65536), ("pair", 2048), ("layer", 8), ("ab", 2)):
        args = {"step": 0, "pair": 0, "layer": 0, "ab": 0, kw: bad}
        with pytest.raises(ValueError, match=kw):
            stream_key(**args)


def test_distinct_keys_give_distinct_nonzero_states():
    # every key of a large run slice: 64 steps x 2048 pairs x 8 layers x A/B = 2**21 keys
    step, pair, layer, ab = np.meshgrid(
        np.arange(64), np.arange(2048), np.arange(8), np.arange(2), indexing="ij"
    )
    s = stream_state(7, step.ravel(), pair.ravel(), layer.ravel(), ab.ravel())
    assert (s != 0).all()
    assert np.unique(s).size == s.size


def test_distinct_keys_give_distinct_streams():
    s = stream_state(3, 5, np.arange(256), 1, 0)
    d = stream_digits(s, 64, "binomial")
    assert np.unique(d, axis=0).shape[0] == 256


def test_same_seed_same_digits_and_restart_replays():
    a = stream_digits(stream_state(11, 2, 3, 1, 1), 5000, "binomial")
    b = stream_digits(stream_state(11, 2, 3, 1, 1), 5000, "binomial")
    assert (a == b).all()
    # restart from the saved start state after consuming part of the stream
    s0 = stream_state(11, 2, 3, 1, 1)
    first = stream_words(s0, 37)
    replay = stream_words(s0, 37)
    assert (first == replay).all()
    # word i is xs32^i(x0): continuing from word 36 equals the longer stream
    longer = stream_words(s0, 74)
    assert (stream_words(xs32(first[-1]), 37) == longer[37:]).all()


def test_different_seeds_differ():
    a = stream_digits(stream_state(0, 0, 0, 0, 0), 256, "binomial")
    b = stream_digits(stream_state(1, 0, 0, 0, 0), 256, "binomial")
    assert (a != b).mean() > 0.5


@pytest.mark.parametrize("dist", ["binomial", "uniform"])
def test_digit_distribution_chi_square(dist):
    # 10**6 digits from 256 streams (pairs of one step/layer) of 4096 digits
    s = stream_state(2024, 17, np.arange(256), 2, 1)
    d = stream_digits(s, 4096, dist).ravel()
    assert d.size >= 10**6
    counts = np.array([(d == v).sum() for v in range(-2, 3)])
    p = np.array(list(digit_probabilities(dist).values()))
    chi2, pval = stats.chisquare(counts, p * d.size)
    assert pval > 1e-4, f"{dist}: counts {counts.tolist()}, chi2={chi2:.1f}, p={pval:.2e}"
    # and a wrong hypothesis is rejected: the test has power
    other = "uniform" if dist == "binomial" else "binomial"
    q = np.array(list(digit_probabilities(other).values()))
    assert stats.chisquare(counts, q * d.size).pvalue < 1e-12


def test_digit_values_and_moments():
    d = stream_digits(stream_state(5, 1, np.arange(64), 0, 0), 8192, "binomial")
    assert d.min() == -2 and d.max() == 2
    assert abs(d.mean()) < 0.01 and abs(d.var() - 1.0) < 0.01


def test_neighbouring_pairs_are_uncorrelated():
    d = stream_digits(stream_state(9, 4, np.arange(65), 1, 0), 20000, "binomial").astype(float)
    r = [np.corrcoef(d[j], d[j + 1])[0, 1] for j in range(64)]
    assert max(abs(v) for v in r) < 5 / np.sqrt(20000)


def test_keys_with_zero_xor_do_not_give_xor_related_streams():
    # a linear key schedule would make stream0 ^ stream1 ^ stream2 ^ stream3 == 0 exactly
    w = stream_words(stream_state(0, 0, np.arange(4), 0, 0), 256)
    x = w[0] ^ w[1] ^ w[2] ^ w[3]
    ones = np.unpackbits(x.view(np.uint8)).mean()
    assert 0.45 < ones < 0.55


def test_init_step_is_reserved():
    assert prng.INIT_STEP == 65535 and prng.MAX_STEP == 65534
