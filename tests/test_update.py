"""Fitness shaping (spec 7) and the update (spec 8)."""

import numpy as np
import pytest
from scipy import stats

from pentegg.golden import (
    Config,
    accumulate_z,
    centered_ranks,
    classification_scores,
    es_step,
    init_state,
    make_noise,
    moves,
    shape,
    threshold,
)

VARIANTS = [
    (mode, shaping, update)
    for mode in ("lowrank", "quantized")
    for shaping in ("rank", "sign")
    for update in ("latent", "pentary")
]


@pytest.mark.parametrize("n", [2, 6, 64, 257 * 2])
def test_centered_ranks_are_twice_average_ranks_minus_n_minus_1(n):
    s = np.random.default_rng(n).integers(0, 5, n)  # many ties
    want = 2 * (stats.rankdata(s, method="average") - 1) - (n - 1)
    c = centered_ranks(s)
    assert c.dtype.kind == "i" and (c == want).all() and c.sum() == 0


def test_sign_shaping():
    assert shape(np.array([5, 3, 3, 3, 1, 9]), "sign").tolist() == [1, 0, -1]


def test_shaping_rejects_odd_or_float_scores():
    with pytest.raises(ValueError, match="even"):
        shape(np.arange(5), "rank")
    with pytest.raises(ValueError, match="integers"):
        shape(np.ones(4), "rank")


def test_classification_score_is_clipped_margin_sum():
    logits = np.array([[[10, 3, -2], [0, 50, 60]]])  # one member, two samples
    y = np.array([0, 1])
    # sample 0: 10 - 3 = 7; sample 1: 50 - 60 = -10; M = 5 clips the first
    assert classification_scores(logits, y, 5).tolist() == [5 - 10]
    assert classification_scores(logits, y, 32).tolist() == [7 - 10]


@pytest.mark.parametrize("mode,shaping,update", VARIANTS)
def test_equal_scores_within_every_pair_leave_weights_unchanged(mode, shaping, update):
    cfg = Config(
        layers=(6, 5, 3), population=16, mode=mode, shaping=shaping, update=update, tau=0
    ).validate()
    st = init_state(cfg)
    scores = np.repeat(np.random.default_rng(0).integers(-50, 50, 8), 2)
    new, info = es_step(st, lambda fwd: scores)
    assert (info.g == 0).all() and info.moved == 0
    for a, b in zip(st.weights, new.weights, strict=True):
        assert (a == b).all()
    if update == "latent":
        for a, b in zip(st.latent, new.latent, strict=True):
            assert (a == b).all()
    assert new.step == st.step + 1


def test_zero_vote_never_moves_even_at_tau_zero():
    assert moves(np.array([0, 1, -1]), 0).tolist() == [0, 1, -1]
    assert moves(np.array([5, 6, -6]), 5).tolist() == [0, 1, -1]


def test_threshold_scales_with_sqrt_of_sum_g_squared():
    cfg = Config(tau=32)
    assert threshold(cfg, np.array([3, 4])) == (32 * 5) >> 4
    assert threshold(cfg, np.zeros(4, int)) == 0


@pytest.mark.parametrize("mode", ["lowrank", "quantized"])
def test_votes_are_the_fitness_weighted_noise_sum(mode):
    cfg = Config(layers=(4, 3), population=8, mode=mode).validate()
    nz = make_noise(cfg, 1)
    g = np.array([3, -1, 0, 7])
    if mode == "quantized":
        want = sum(int(g[j]) * nz.E[0][j].astype(np.int64) for j in range(4))
    else:
        want = sum(
            int(g[j]) * (nz.A[0][j].astype(np.int64) @ nz.B[0][j].astype(np.int64).T)
            for j in range(4)
        )
    assert (accumulate_z(cfg, nz, g, 0) == want).all()


@pytest.mark.parametrize("mode,shaping,update", VARIANTS)
def test_planted_objective_improves(mode, shaping, update):
    """Members are scored by agreement with a fixed random pentary teacher."""
    teacher_cfg = Config(layers=(8, 6, 4), seed=999, population=2, init="random")
    teacher = init_state(teacher_cfg)
    rng = np.random.default_rng(5)
    x = rng.integers(-127, 128, (64, 8))
    from pentegg.golden import accuracy, predict

    y = predict(teacher, x)
    cfg = Config(
        layers=(8, 6, 4),
        population=64,
        mode=mode,
        shaping=shaping,
        update=update,
        seed=1,
        tau=16 if update == "latent" else 32,
        latent_shift=1,
    ).validate()
    st = init_state(cfg)
    before = accuracy(st, x, y)
    from pentegg.golden import es_step_classify

    for _ in range(40):
        st, _ = es_step_classify(st, x, y)
    after = accuracy(st, x, y)
    assert after >= before + 0.2, (before, after)
