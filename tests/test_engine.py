"""The compiled integer engine (golden/engine.py) equals the NumPy golden path, bit for bit."""

import numpy as np
import pytest

from pentegg.golden import (
    Config,
    engine,
    es_step_classify,
    init_state,
    make_noise,
    member_forward_materialised,
    shape,
    update,
    weights_sha256,
)
from pentegg.golden.forward import population_forward_numpy
from pentegg.golden.lowrank import lrgen

pytest.importorskip("numba")

CASES = [
    dict(layers=(64, 64, 10), population=256),  # the digits default
    dict(layers=(7, 5, 3), population=6, rank=4, act_shifts=(2, 2)),
    dict(layers=(9, 6, 4, 3), population=8, rank=1, sigma_shift=0),
    dict(layers=(5, 4), population=4, rank=16, sigma_shift=3),
    dict(layers=(33, 17, 10), population=10, rank=64, act_shifts=(0, 9)),
    dict(layers=(3, 40, 1), population=2, rank=4, sigma_shift=8, act_shifts=(15, 0)),
]


def _inputs(cfg, shared, rng, batch=5):
    shape = (batch, cfg.layers[0]) if shared else (cfg.population, batch, cfg.layers[0])
    x = rng.integers(-127, 128, shape)
    x.reshape(-1)[:4] = (127, -127, 127, -127)  # the extremes, for saturation
    return x


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_compiled_forward_equals_numpy_forward(case, shared):
    cfg = Config(seed=case, init="random", **CASES[case]).validate()
    assert engine.supports(cfg) and engine.active(cfg) == "numba"
    st = init_state(cfg)
    x = _inputs(cfg, shared, np.random.default_rng(case), batch=37 if case else 256)
    noise = make_noise(cfg, step=7 + case)
    got = engine.lowrank_forward(cfg, st.weights, noise, x)
    want = population_forward_numpy(cfg, st.weights, noise, x)
    assert got.dtype == np.int8 and got.shape == want.shape
    bad = np.argwhere(got != want)
    assert bad.size == 0, f"first mismatch at {tuple(bad[0])}"


def test_compiled_forward_equals_materialised_members_with_saturating_weights():
    """All-+2 weights drive every hidden unit and logit into saturation."""
    cfg = Config(layers=(6, 4, 3), population=4, act_shifts=(0, 0)).validate()
    w = [np.full((4, 7), 2, np.int8), np.full((3, 5), -2, np.int8)]
    x = np.full((3, 6), 127)
    noise = make_noise(cfg, 0)
    got = engine.lowrank_forward(cfg, w, noise, x)
    for m in range(cfg.population):
        assert (got[m] == member_forward_materialised(cfg, w, noise, m, x)).all()


@pytest.mark.parametrize("case", range(len(CASES)))
def test_compiled_z_equals_numpy_z(case):
    cfg = Config(seed=case, **CASES[case]).validate()
    noise = make_noise(cfg, step=3)
    rng = np.random.default_rng(case)
    g = shape(rng.integers(-50, 50, cfg.population), "rank")
    g[:1] = 0  # a pair that contributes nothing
    for l in range(cfg.n_layers):
        got = engine.lowrank_z(cfg, noise, g, l)
        assert (got == update.accumulate_z_numpy(cfg, noise, g, l)).all()


def test_training_with_either_engine_gives_the_same_bits(monkeypatch):
    cfg = Config(layers=(10, 8, 4), population=32, seed=5).validate()
    rng = np.random.default_rng(0)
    x, y = rng.integers(-127, 128, (40, 10)), rng.integers(0, 4, 40)

    def train():
        st = init_state(cfg)
        for _ in range(8):
            st, _ = es_step_classify(st, x, y)
        return st

    fast = train()
    # every compiled path off: the forward pass and Z (active) and LRGEN (available)
    from pentegg.golden import model

    calls = []
    monkeypatch.setattr(engine, "active", lambda cfg: "numpy")
    monkeypatch.setattr(engine, "available", lambda: False)
    monkeypatch.setattr(model, "lrgen", lambda *a: calls.append(a) or lrgen(*a))
    slow = train()
    assert len(calls) == 8 * cfg.n_layers  # NumPy's LRGEN made every step's noise
    assert weights_sha256(fast) == weights_sha256(slow)
    for a, b in zip(fast.latent, slow.latent, strict=True):
        assert (a == b).all()


def test_engine_takes_low_rank_mode_only():
    assert engine.supports(Config())
    assert not engine.supports(Config(mode="quantized"))


def test_int32_bound_holds_for_the_widest_allowed_configuration():
    """Widest layer (4096), rank 64, no sigma shift: the largest forward-pass bound the
    parameter ranges allow is far below 2**31, so the int32 engine never wraps."""
    cfg = Config(layers=(4096, 4096), rank=64, sigma_shift=0, acc_bits=48)
    assert cfg.engine_bound() < 1 << 28 and engine.supports(cfg)


def test_engine_choice_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("PENTEGG_ENGINE", "numpy")
    assert engine.requested() == "numpy"
    monkeypatch.setenv("PENTEGG_ENGINE", "gpu")
    with pytest.raises(ValueError, match="PENTEGG_ENGINE"):
        engine.requested()


@pytest.mark.parametrize("digits", ["binomial", "uniform"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_compiled_lrgen_equals_lrgen(case, digits):
    from pentegg.golden import lrgen

    cfg = Config(seed=1000 + case, digits=digits, **CASES[case]).validate()
    for step in (0, 1, 65534):
        for l in range(cfg.n_layers):
            out, fan = cfg.shape(l)
            want = lrgen(cfg.seed, step, cfg.pairs, l, out, fan, cfg.rank, digits)
            got = engine.lrgen(cfg, step, l)
            assert (got[0] == want[0]).all() and (got[1] == want[1]).all()
            assert got[0].dtype == np.int8 and got[1].dtype == np.int8
