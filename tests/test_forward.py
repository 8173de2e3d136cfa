"""Forward pass (spec 5) and perturbation modes (spec 6)."""

import numpy as np
import pytest

from pentegg.golden import (
    Config,
    InputError,
    central_forward,
    init_state,
    make_noise,
    member_forward_materialised,
    population_forward,
)
from pentegg.golden.forward import layer_population

CASES = [
    dict(layers=(7, 5, 3), population=6, rank=4, act_shifts=(2, 2)),
    dict(layers=(9, 6, 4, 3), population=8, rank=1, sigma_shift=0),
    dict(layers=(5, 4), population=4, rank=16, sigma_shift=3),
    dict(layers=(33, 17, 10), population=10, rank=64, act_shifts=(0, 9)),
]


def _inputs(cfg, shared, rng):
    shape = (5, cfg.layers[0]) if shared else (cfg.population, 5, cfg.layers[0])
    return rng.integers(-127, 128, shape)


@pytest.mark.parametrize("mode", ["lowrank", "quantized"])
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_vectorised_population_equals_materialised_members(mode, shared, case):
    """Low-rank mode equals x.W^T + sign*rshr(x.(A B^T)^T, k) with A B^T materialised;
    quantized mode equals the forward pass through materialised W +- E."""
    cfg = Config(mode=mode, seed=case, init="random", **CASES[case]).validate()
    st = init_state(cfg)
    rng = np.random.default_rng(case)
    x = _inputs(cfg, shared, rng)
    noise = make_noise(cfg, step=3 + case)
    got = population_forward(cfg, st.weights, noise, x)
    for m in range(cfg.population):
        want = member_forward_materialised(cfg, st.weights, noise, m, x)
        bad = np.argwhere(got[m] != want)
        assert bad.size == 0, (
            f"member {m}: first mismatch at {tuple(bad[0])}: got {got[m][tuple(bad[0])]}, "
            f"want {want[tuple(bad[0])]}"
        )


@pytest.mark.parametrize("mode", ["lowrank", "quantized"])
def test_antithetic_members_get_exactly_opposite_perturbations(mode):
    cfg = Config(layers=(12, 8), population=16, mode=mode, init="random").validate()
    st = init_state(cfg)
    x = np.random.default_rng(0).integers(-127, 128, (9, 12))
    noise = make_noise(cfg, 0)
    acc = layer_population(cfg, 0, st.weights[0], noise, x.astype(np.float32))
    base = np.concatenate([x, np.full((9, 1), 127)], 1) @ st.weights[0].T.astype(np.int64)
    pert = acc - base[None]
    assert (pert[0::2] == -pert[1::2]).all()
    assert np.abs(pert).max() > 0


@pytest.mark.parametrize("mode", ["lowrank", "quantized"])
def test_quantized_noise_is_pquant_of_lowrank_product(mode):
    from pentegg.golden import lrmul, pquant

    cfg = Config(layers=(6, 4), population=4, rank=4, mode="quantized", sigma_shift=1)
    nz = make_noise(cfg, 2)
    a, b = nz.A[0].astype(np.int64), nz.B[0].astype(np.int64)
    want = pquant(np.einsum("pir,pkr->pik", a, b), 2)
    assert (nz.E[0] == want).all() and (lrmul(a, b, 2) == want).all()


def test_lrgen_order_is_row_major_with_rank_digits_consecutive():
    from pentegg.golden import lrgen, stream_digits, stream_state

    a, b = lrgen(seed=4, step=9, pairs=3, layer=2, out=5, fan=7, rank=4, dist="binomial")
    da = stream_digits(stream_state(4, 9, 1, 2, 0), 5 * 4, "binomial")
    db = stream_digits(stream_state(4, 9, 1, 2, 1), 7 * 4, "binomial")
    assert (a[1] == da.reshape(5, 4)).all() and (b[1] == db.reshape(7, 4)).all()


def test_central_forward_is_the_unperturbed_model():
    cfg = Config(layers=(10, 6, 3), init="random").validate()
    st = init_state(cfg)
    x = np.random.default_rng(1).integers(-127, 128, (4, 10))
    h = x
    for l, w in enumerate(st.weights):
        acc = np.concatenate([h, np.full((4, 1), 127)], 1) @ w.T.astype(np.int64)
        s = cfg.shifts()[l]
        y = (acc + (1 << (s - 1))) >> s
        h = np.clip(y, 0, 127) if l == 0 else np.clip(y, -127, 127)
    assert (central_forward(cfg, st.weights, x) == h).all()


def test_hidden_activations_are_saturating_relu_and_logits_int8():
    cfg = Config(layers=(3, 2, 2), act_shifts=(0, 0), population=2).validate()
    w = [
        np.array([[2, 2, 2, 2], [-2, -2, -2, -2]], np.int8),
        np.array([[2, 2, 0], [-2, 0, 0]], np.int8),
    ]
    y = central_forward(cfg, w, [[127, 127, 127]])
    # hidden: 8*127 saturates to 127, and -8*127 clips to 0; logits: 2*127*2 -> 127, -254 -> -127
    assert y.tolist() == [[127, -127]]


def test_float_engine_switches_to_float64_when_bounds_need_it():
    from pentegg.golden.forward import _dtype

    assert _dtype(Config(layers=(64, 64, 10))) is np.float32
    big = Config(
        layers=(4096, 8), rank=64, sigma_shift=0, population=2, act_shifts=(8,), init="random"
    )
    assert big.engine_bound() >= 1 << 24 and _dtype(big) is np.float64
    st = init_state(big)
    x = np.full((2, 4096), 127)
    nz = make_noise(big, 0)
    # the NumPy path itself (population_forward would run the compiled engine here)
    from pentegg.golden.forward import population_forward_numpy

    for got in (
        population_forward(big, st.weights, nz, x),
        population_forward_numpy(big, st.weights, nz, x),
    ):
        for m in range(2):
            assert (got[m] == member_forward_materialised(big, st.weights, nz, m, x)).all()


@pytest.mark.parametrize(
    "x, match",
    [
        (np.zeros((3, 5), int), "input shape"),
        (np.full((2, 7), 128), "-127..127"),
        (np.full((2, 7), -128), "-127..127"),
        (np.zeros((2, 7), float), "integer"),
        (np.zeros((3, 2, 7), int), "members"),
    ],
)
def test_bad_inputs_are_refused(x, match):
    cfg = Config(layers=(7, 3), population=4)
    with pytest.raises(InputError, match=match):
        population_forward(cfg, init_state(cfg).weights, make_noise(cfg, 0), x)


def test_lrgen_first_pair_selects_a_slice_of_the_pairs():
    from pentegg.golden import lrgen

    a, b = lrgen(1, 2, 8, 0, 3, 4, 4, "binomial")
    a5, b5 = lrgen(1, 2, 2, 0, 3, 4, 4, "binomial", first_pair=5)
    assert (a5 == a[5:7]).all() and (b5 == b[5:7]).all()
