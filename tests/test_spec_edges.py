"""The golden model at the edges of the spec's ranges and tables, where the other tests did
not reach: each expected value comes from docs/spec.md's text (the section named), and
each test failed against a one-character change of golden/ that the rest of the suite
let through (a mutation sweep, 2026-12-07)."""

import numpy as np
import pytest

from pentegg.golden import (
    Config,
    ConfigError,
    DigitRangeError,
    apply_latent,
    apply_pentary,
    bits_for,
    classification_scores,
    exact_matmul,
    init_state,
    pquant,
    predict,
    rank_shift,
    rshr,
    stream_state,
    threshold,
    unpack,
)
from pentegg.golden.forward import _dtype


# ---------------------------------------------------------------- spec 4: arithmetic
def test_rshr_by_one_rounds_half_up():
    assert [int(rshr(x, 1)) for x in (-3, -1, 1, 3)] == [-1, 0, 1, 2]


def test_pquant_at_the_largest_shift_30():
    """Level 1 from 2^(f-1), level 2 from 3 * 2^(f-1) (spec 4.1, f up to 30)."""
    xs = ((1 << 29) - 1, 1 << 29, 3 << 29, -(3 << 29))
    assert [int(pquant(x, 30)) for x in xs] == [0, 1, 2, -2]


def test_bits_for_a_power_of_two_bound_holds_it():
    assert [bits_for(-4 * r, 4 * r) for r in (1, 4, 16, 64)] == [4, 6, 8, 10]


def test_exact_matmul_is_exact_above_float32s_integers():
    got = exact_matmul(np.array([[1 << 24, 1]]), np.array([[1], [1]]), (1 << 24) + 1)
    assert got.tolist() == [[(1 << 24) + 1]]


def test_the_float_path_takes_float64_once_a_bound_reaches_2_to_the_24():
    cfg = Config(layers=(4096, 8), rank=16, population=2).validate()
    assert cfg.engine_bound() >= 1 << 24 and _dtype(cfg) is np.float64


def test_rank_shift_is_log4_of_the_rank():
    assert [rank_shift(r) for r in (1, 4, 16, 64)] == [0, 1, 2, 3]
    assert Config(rank=64, sigma_shift=1).pert_shift() == 4


# ---------------------------------------------------------------- spec 1.3: digits
def test_a_packed_word_with_bit_15_set_is_refused():
    with pytest.raises(DigitRangeError):
        unpack(np.array([0x8000], np.uint16), 1)


# ---------------------------------------------------------------- spec 7.1: scores
def test_the_margin_is_against_the_largest_other_logit_even_when_all_are_negative():
    assert classification_scores(np.array([[[10, -20, -30]]], np.int8), [0], 254).tolist() == [30]


def test_margins_span_minus_254_to_254_without_wrapping():
    z = np.array([[[-127, 127]], [[127, -127]]], np.int8)
    assert classification_scores(z, [0], 254).tolist() == [-254, 254]


@pytest.mark.parametrize("label", [3, -1])
def test_a_label_outside_the_classes_is_refused(label):
    with pytest.raises(ValueError, match=r"0\.\.2"):
        classification_scores(np.zeros((2, 1, 3), np.int8), [label], 32)


# ---------------------------------------------------------------- spec 8: the update
def test_theta_rounds_down():
    """theta = (tau * isqrt(sum g^2)) >> 4: sum 126, isqrt 11; 24 * 11 = 264 -> 16."""
    assert threshold(Config(tau=24), [-6, 9, 3]) == 16
    assert threshold(Config(tau=1), [-6, 9, 3]) == 0


def test_the_pentary_update_saturates_at_plus_minus_2():
    w = apply_pentary(np.array([2, -2, 1], np.int8), np.array([1, -1, 1], np.int8))
    assert w.tolist() == [2, -2, 2]


def test_the_latent_state_saturates_symmetrically():
    cfg = Config(latent_bits=8, latent_shift=3)
    assert cfg.latent_max() == 127
    v, _ = apply_latent(cfg, np.array([127, -127]), np.array([1, -1]))
    assert v.tolist() == [127, -127]


# ---------------------------------------------------------------- spec 5.3, 9: config
def test_the_default_activation_shift_at_fans_that_are_powers_of_4():
    """ceil(log2(fan) / 2): fan 4 -> 1, fan 16 -> 2."""
    assert Config(layers=(3, 15, 2)).shifts() == (1, 2)


def test_the_defaults_of_table_9_1_and_tau_of_8_2():
    assert Config(update="pentary", mode="quantized").tau_q4() == 28
    assert Config(update="pentary", mode="lowrank").tau_q4() == 96
    assert Config().tau_q4() == 16
    c = Config()
    got = (c.population, c.rank, c.sigma_shift, c.latent_bits, c.latent_shift, c.margin)
    assert got == (256, 4, 1, 8, 3, 32) and c.acc_bits == 32


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"tau": 4096}, r"tau=4096 .*0\.\.4095"),
        ({"latent_bits": 2}, r"latent_bits=2 .*3\.\.8"),
        ({"margin": 255}, r"margin=255 .*1\.\.254"),
        ({"acc_bits": 15}, r"acc_bits=15 .*16\.\.48"),
        ({"latent_bits": 3, "latent_shift": 2}, r"latent_shift=2 .*0\.\.1"),
    ],
)
def test_a_value_one_past_its_range_is_refused(kw, message):
    with pytest.raises(ConfigError, match=message):
        Config(**kw).validate()


def test_the_values_at_the_ends_of_their_ranges_are_taken():
    Config(latent_bits=3, latent_shift=1, tau=4095, margin=254, acc_bits=48).validate()


def test_the_accumulator_bound_rounds_the_perturbation_as_rshr_does():
    """Spec 9.2 for 2-1, rank 1, sigma_shift 3: 762 + rshr(1524, 3) = 762 + 191."""
    assert Config(layers=(2, 1), rank=1, sigma_shift=3, population=2).acc_bound(0) == 953


def test_the_vote_bound_of_sign_shaping_takes_g_at_most_1():
    """Spec 9.2: population 256 -> 128 pairs, |g| <= 1, |A B| <= 4 r = 16."""
    assert Config(shaping="sign").z_bound(0) == 128 * 1 * 16


# ---------------------------------------------------------------- spec 10.1: init
def test_init_random_draws_from_the_init_stream():
    """Stream (seed 3, step 0xFFFF, pair 0, layer 0, A): nibbles D, 6, 0 have popcounts
    3, 2, 0: digits 1, 0, -2 (spec 2.3, 10.1)."""
    assert int(stream_state(3, 0xFFFF, 0, 0, 0)) == 0x6A92E06D
    cfg = Config(layers=(2, 1), population=2, init="random", seed=3, update="pentary")
    assert init_state(cfg).weights[0].tolist() == [[1, 0, -2]]


def test_init_random_saturates_the_latent_state():
    """V = sat(W << q, -Vmax, Vmax): latent_bits 4, q 2: -2 << 2 = -8 -> -7."""
    cfg = Config(layers=(2, 1), population=2, init="random", seed=3, latent_bits=4, latent_shift=2)
    st = init_state(cfg)
    assert st.latent[0].tolist() == [[4, 0, -7]] and st.weights[0].tolist() == [[1, 0, -2]]


def test_tied_logits_predict_the_first_class():
    assert predict(init_state(Config(layers=(2, 3), population=2)), [[0, 0]]).tolist() == [0]
