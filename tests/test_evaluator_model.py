"""The PopulationEvaluator's decomposition (sim/evaluator_model.py) equals golden."""

import numpy as np
import pytest

from pentegg.golden import Config, init_state, lrgen, make_noise, population_forward
from pentegg.golden.fitness import classification_scores
from pentegg.sim.evaluator_model import (
    BOTH,
    evaluate,
    layout,
    noise_image,
    schedule,
    schedule_cycles,
)


def _random_config(rng) -> Config:
    nl = int(rng.integers(1, 4))
    return Config(
        layers=tuple(int(v) for v in rng.integers(1, 12, nl + 1)),
        population=int(2 * rng.integers(1, 6)),
        rank=int(rng.choice([1, 4, 16])),
        mode=str(rng.choice(["lowrank", "quantized"])),
        digits=str(rng.choice(["binomial", "uniform"])),
        sigma_shift=int(rng.integers(0, 9)),
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=tuple(int(v) for v in rng.integers(0, 6, nl)),
    ).validate()


@pytest.mark.parametrize("case", range(30))
def test_decomposition_equals_population_forward_and_scores(case):
    """Lane MACs without the bias column, u-rows, u accumulated from h, p = A.u and the
    finalizer's sum give golden's logits and spec 7.1 scores, shared and per-member."""
    rng = np.random.default_rng(case)
    cfg = _random_config(rng)
    st = init_state(cfg)
    step = int(rng.integers(0, 100))
    batch = int(rng.integers(1, 5))
    n0 = cfg.layers[0]
    for shared in (True, False):
        shape = (batch, n0) if shared else (cfg.population, batch, n0)
        x = rng.integers(-127, 128, shape)
        expected = population_forward(cfg, st.weights, make_noise(cfg, step), x)
        assert (evaluate(cfg, st.weights, step, x) == expected).all()
    y = rng.integers(0, cfg.layers[-1], batch)
    _, scores = evaluate(cfg, st.weights, step, x[0] if x.ndim == 3 else x, y)
    shared_logits = population_forward(cfg, st.weights, make_noise(cfg, step), x[0])
    assert (scores == classification_scores(shared_logits, y, cfg.margin)).all()


def test_noise_image_holds_every_digit_of_the_pair_once():
    """The slots hold B_0's rows (u-row slots and its bias row) and, per row pair of
    each layer, A_l in bank 0 with B_{l+1} in bank 1, including B_{l+1}'s bias row."""
    cfg = Config(layers=(5, 3, 2), rank=4, population=4, seed=9).validate()
    img = noise_image(cfg, 7, 1)
    lay = layout(cfg.layers, 4)
    a0, b0 = (t[0] for t in lrgen(9, 7, 1, 0, 3, 6, 4, "binomial", first_pair=1))
    a1, b1 = (t[0] for t in lrgen(9, 7, 1, 1, 2, 4, 4, "binomial", first_pair=1))
    bank, addr = lay.u_slot(1, 4)
    assert list(img[bank, addr]) == [b0[4, 2], b0[4, 3]]
    bank, addr = lay.ub_slot(1)
    assert list(img[bank, addr]) == [b0[5, 2], b0[5, 3]]
    addr = lay.f_addr(0, 1, 3)  # rows 2 and 3 of layer 0: A_0 row 2, B_1 rows 2 and 3
    assert list(img[0, addr]) == [a0[2, 3], 0]
    assert list(img[1, addr]) == [b1[2, 3], b1[3, 3]]  # row 3 is B_1's bias row
    addr = lay.f_addr(1, 0, 2)  # last layer: A only
    assert list(img[0, addr]) == [a1[0, 2], a1[1, 2]]
    assert list(img[1, addr]) == [0, 0]
    assert lay.depth == 5 + 1 + (2 + 1) * 4  # U slots per bank, Ub, 3 row pairs


def test_every_layer_block_comes_two_blocks_after_the_one_it_needs():
    """... or, after layer 0's block for both members (shared inputs, low-rank), one
    (member 2j's layer 1) or two blocks after it."""
    for shared in (True, False):
        for lowrank in (True, False):
            blocks = schedule(3, shared, 4, lowrank)
            for i, (kind, s, l) in enumerate(blocks):
                if kind == "L" and l > 0:
                    if ("L", BOTH, l - 1) in blocks:
                        assert blocks.index(("L", BOTH, l - 1)) == i - 1 - s
                    else:
                        assert blocks.index(("L", s, l - 1)) == i - 2
            l0 = [b for b in blocks if b[0] == "L" and b[2] == 0]
            assert l0 == ([("L", BOTH, 0)] if shared and lowrank else [("L", 0, 0), ("L", 1, 0)])


def test_schedule_cycles_of_the_digits_network():
    """64-64-10, rank 4: 32 + 5 passes of 64 cycles per member, u-rows 2 x 64 per
    member (per-member inputs); with shared inputs layer 0's 32 passes serve the pair."""
    cfg = Config().validate()
    c = schedule_cycles(cfg, batch=16, lanes=16, shared=False)
    assert c["lane_cycles_per_sample"] == 2 * (32 * 64 + 5 * 64) + 2 * 2 * 64
    assert c["rounds"] == 8
    assert c["fill_cycles_per_round"] == 16 * 217
    # six generators fill 16 lanes in three groups; 128 lanes in 22
    c6 = schedule_cycles(cfg, batch=16, lanes=16, shared=False, generators=6)
    assert c6["fill_cycles_per_round"] == 3 * 217
    assert c6["cycles"] == c["cycles"] - 8 * 13 * 217
    c128 = schedule_cycles(cfg, batch=16, lanes=128, shared=False, generators=6)
    assert (c128["rounds"], c128["fill_cycles_per_round"]) == (1, 22 * 217)
    # shared inputs: one u-row block, and layer 0 once for the pair
    c = schedule_cycles(cfg, batch=16, lanes=16, shared=True)
    assert c["lane_cycles_per_sample"] == 32 * 64 + 2 * 5 * 64 + 2 * 64
