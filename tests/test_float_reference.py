"""The JAX float EGGROLL reference computes what benchmarks/float_eggroll.py computes."""

import numpy as np
import pytest

from pentegg.benchmarks.float_eggroll import FloatConfig, FloatEggroll

jax = pytest.importorskip("jax")

from pentegg.benchmarks.float_eggroll_jax import (  # noqa: E402
    JaxConfig,
    JaxEggroll,
    init_params,
    make_functions,
)


def test_jax_step_equals_the_numpy_float_step_for_the_same_noise():
    """Same weights, noise and batch: forward, z-scored fitness, factored update, Adam."""
    cfg = JaxConfig(layers=(6, 5, 3), population=8, rank=4, seed=2)
    es = FloatEggroll(FloatConfig(cfg.layers, cfg.population, cfg.rank, cfg.sigma, cfg.lr, 2))
    params = init_params(cfg)
    for a, b in zip(params, es.w, strict=True):
        assert (a == b).all()
    fns = make_functions(cfg)
    state = (params, [0 * w for w in params], [0 * w for w in params], np.float32(0))
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = rng.integers(0, 128, (16, 6)).astype(np.int8), rng.integers(0, 3, 16)
        noise = es.noise()
        es.noise = lambda noise=noise: noise
        es.step(x, y)
        state = fns["step_with_noise"](state, noise, x, y)
        for got, want in zip(state[0], es.w, strict=True):
            np.testing.assert_allclose(np.asarray(got), want, atol=1e-5)


def test_jax_trainer_is_deterministic():
    cfg = JaxConfig(layers=(2, 8, 2), population=32, seed=1)
    x = np.array([[0, 0], [0, 127], [127, 0], [127, 127]], np.int8)
    y = np.array([0, 1, 1, 0])
    accs = []
    for _ in range(2):
        es = JaxEggroll(cfg)
        assert es.compile(x, y) > 0
        for s in range(5):
            es.step(s, x, y)
        accs.append([np.asarray(w) for w in es.state[0]])
    for a, b in zip(*accs, strict=True):
        assert (a == b).all()
