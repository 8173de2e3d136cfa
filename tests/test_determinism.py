"""The same seed gives the same bits; a different seed gives different bits."""

import numpy as np

from pentegg.golden import Config, es_step_classify, init_state, weights_sha256


def _train(seed: int, steps: int = 12, **kw):
    cfg = Config(layers=(10, 8, 4), population=32, seed=seed, **kw).validate()
    rng = np.random.default_rng(0)
    x, y = rng.integers(-127, 128, (40, 10)), rng.integers(0, 4, 40)
    st = init_state(cfg)
    for _ in range(steps):
        st, _ = es_step_classify(st, x, y)
    return st


def test_same_seed_gives_the_same_bits_twice():
    for kw in ({}, {"mode": "quantized", "update": "pentary", "shaping": "sign"}):
        a, b = _train(3, **kw), _train(3, **kw)
        assert weights_sha256(a) == weights_sha256(b)
        for va, vb in zip(a.latent or [], b.latent or [], strict=True):
            assert (va == vb).all()


def test_different_seeds_give_different_weights():
    assert weights_sha256(_train(3)) != weights_sha256(_train(4))


def test_training_changes_the_weights():
    assert weights_sha256(_train(3, steps=0)) != weights_sha256(_train(3))
