# amaranth: UnusedElaboratable=no
"""PopulationEvaluator in the Amaranth simulator, both perturbation modes: every member's
logits (per-member inputs) or spec 7.1 scores (shared inputs) equal ``pentegg.golden``'s
``population_forward`` and ``classification_scores``, on random small configurations
(low-rank) and on chosen quantized ones (lanes 1/2/4, ranks 1/4/16, odd widths,
populations not a multiple of ``2 lanes``, weights at +-2, saturating inputs).

The cocotb tests (tests/test_cocotb_evaluator.py) run many more configurations and the
digits network on Icarus and Verilator; these are the fast checks of the same behaviour.
"""

import dataclasses

import numpy as np
import pytest

from pentegg.golden import Config, init_state
from pentegg.golden.forward import activate, layer_population
from pentegg.golden.model import make_noise
from pentegg.rtl.evaluator.evaluator import PopulationEvaluator
from pentegg.rtl.evaluator.noise_fill import noise_fill_cycles
from pentegg.sim import harness
from pentegg.sim.collisions import CollisionMonitor
from pentegg.sim.evaluator_bench import (
    EvalJob,
    evaluator_watches,
    run_amaranth,
    run_amaranth_jobs,
)
from pentegg.sim.evaluator_model import schedule
from pentegg.sim.scoreboard import Scoreboard


def check_equals_golden(job, res, label):
    """The run ended without an error flag and its results equal golden's: the scores
    (shared inputs) or every member's logits (per-member inputs)."""
    assert res["error"] == 0
    logits, scores = job.expected()
    board = Scoreboard(label)
    if job.shared:
        board.check("scores[member]", scores, res["scores"])
    else:
        board.check("logits[member, sample, class]", logits, res["logits"])


def shared_job(cfg, rng, batch, labels=None, batch_idx=None):
    """A shared-input job on ``cfg``'s initial weights: four random samples, random
    labels and batch indices (or the ones given), a random step."""
    n0 = cfg.layers[0]
    return EvalJob(
        cfg,
        init_state(cfg).weights,
        int(rng.integers(0, 1000)),
        samples=rng.integers(-127, 128, (4, n0)),
        labels=rng.integers(0, cfg.layers[-1], 4) if labels is None else labels,
        batch_idx=rng.integers(0, 4, batch) if batch_idx is None else batch_idx,
    )


def random_job(rng):
    """A random configuration within small maxima, its evaluator and its job."""
    max_layers = int(rng.integers(1, 4))
    max_width = int(rng.choice([4, 7, 8, 12]))
    nl = int(rng.integers(1, max_layers + 1))
    layers = tuple(int(rng.integers(1, max_width + 1)) for _ in range(nl + 1))
    rank = int(rng.choice([1, 4, 16]))
    lanes = int(rng.integers(1, 5))
    group = int(rng.integers(1, lanes + 1))
    pop = int(2 * rng.integers(1, 2 * lanes + 3))
    cfg = Config(
        layers=layers,
        population=pop,
        rank=rank,
        digits=str(rng.choice(["binomial", "uniform"])),
        sigma_shift=int(rng.integers(0, 9)),
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=tuple(int(v) for v in rng.integers(0, 6, nl)),
        margin=int(rng.integers(1, 255)),
    ).validate()
    st = init_state(cfg)
    step = int(rng.integers(0, 1000))
    batch = int(rng.integers(1, 4))
    if rng.integers(2):
        ns = int(rng.integers(batch, batch + 4))
        samples = rng.integers(-127, 128, (ns, layers[0]))
        samples[0, :] = 127  # an input that saturates the first layer
        job = EvalJob(
            cfg,
            st.weights,
            step,
            samples=samples,
            labels=rng.integers(0, layers[-1], ns),
            batch_idx=rng.integers(0, ns, batch),
        )
    else:
        job = EvalJob(
            cfg, st.weights, step, member_x=rng.integers(-127, 128, (pop, batch, layers[0]))
        )
    write_lanes = int(rng.integers(1, 4))
    g = min(write_lanes, lanes)
    # noise generators: 1 or a multiple of the write group, at most the lanes
    gens = [1, *(k * g for k in range(1, lanes + 1) if 1 < k * g <= lanes)]
    dut = PopulationEvaluator(
        lanes=lanes,
        max_width=max_width,
        max_layers=max_layers,
        rank=rank,
        digits=cfg.digits,
        group=group,
        mem_latency=int(rng.integers(1, 5)),
        noise_buffers=int(rng.integers(1, 3)),
        noise_write_lanes=write_lanes,
        noise_generators=int(rng.choice(gens)),
    )
    return job, dut


@pytest.mark.parametrize("case", range(8))
def test_evaluator_equals_golden_on_random_configurations(case):
    rng = np.random.default_rng(harness.pick_seed(f"evaluator amaranth {case}"))
    job, dut = random_job(rng)
    watch = CollisionMonitor(evaluator_watches(dut))
    res = run_amaranth(job, dut, max_cycles=200_000, collisions=watch)
    watch.check()
    check_equals_golden(
        job, res, f"evaluator {job.cfg.layers} rank {job.cfg.rank} lanes {dut.params.lanes}"
    )


def _use_forms(monkeypatch, family):
    """Elaborate the evaluator's forms of ``family`` ("ecp5", the simulator's default, or
    "ice40": the lanes' ``clear_terms``, the finalizer's ``lean``) in the simulator."""
    from pentegg.rtl.evaluator import finalizer as finalizer_mod
    from pentegg.rtl.evaluator import lane as lane_mod

    ice40 = family == "ice40"
    monkeypatch.setattr(lane_mod, "clear_terms_for", lambda platform: ice40)
    monkeypatch.setattr(finalizer_mod, "lean_for", lambda platform: ice40)


# Quantized mode (spec 6.1): (layers, population, rank, lanes, shared, sigma_shift, digits)
QUANTIZED_CASES = [
    ((3, 5, 2), 6, 4, 2, True, 0, "binomial"),
    ((7, 3), 10, 1, 4, False, 0, "uniform"),
    ((5, 7, 3), 2, 16, 1, True, 1, "binomial"),
    ((1, 9, 1), 14, 4, 4, False, 2, "binomial"),
    ((9, 4, 5, 3), 8, 1, 2, True, 1, "uniform"),
    ((2, 8, 2), 4, 16, 1, False, 0, "binomial"),
]


@pytest.mark.parametrize(
    "case,family",
    [*((case, "ecp5") for case in range(len(QUANTIZED_CASES))), (0, "ice40"), (3, "ice40")],
)
def test_quantized_evaluator_equals_golden_w_plus_sign_e(case, family, monkeypatch):
    """Every member evaluates ``x . (W + sign E)^T`` with ``E = PQUANT(A B^T, f)``
    (golden's ``Noise.e``): scores (shared) or logits (per member) equal golden's.
    Weights are random with a +-2 row and column, one input row saturates (+-127), and
    small shifts make hidden activations and logits saturate. One, two and four E
    generators fill the noise banks. A shared and a per-member case also in the iCE40's
    forms (the lean finalizer)."""
    _use_forms(monkeypatch, family)
    layers, pop, rank, lanes, shared, sigma, digits = QUANTIZED_CASES[case]
    rng = np.random.default_rng(harness.pick_seed(f"evaluator quantized {case}"))
    nl = len(layers) - 1
    cfg = Config(
        layers=layers,
        population=pop,
        rank=rank,
        mode="quantized",
        digits=digits,
        sigma_shift=sigma,
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=tuple(int(v) for v in rng.integers(0, 4, nl)),
        margin=int(rng.integers(1, 255)),
    ).validate()
    weights = [w.copy() for w in init_state(cfg).weights]
    for w in weights:
        w[0, :] = rng.choice([-2, 2], w.shape[1])  # a row at the extremes
        w[:, -1] = rng.choice([-2, 2], w.shape[0])  # bias column at the extremes
    step = int(rng.integers(0, 65535))
    batch = int(rng.integers(1, 4))
    if shared:
        ns = batch + 2
        samples = rng.integers(-127, 128, (ns, layers[0]))
        samples[0] = rng.choice([-127, 127], layers[0])
        job = EvalJob(
            cfg,
            weights,
            step,
            samples=samples,
            labels=rng.integers(0, layers[-1], ns),
            batch_idx=np.concatenate([[0], rng.integers(0, ns, batch - 1)]).astype(int),
        )
    else:
        x = rng.integers(-127, 128, (pop, batch, layers[0]))
        x[:, 0] = 127
        job = EvalJob(cfg, weights, step, member_x=x)
    dut = PopulationEvaluator(
        lanes=lanes,
        max_width=max(12, max(layers)),
        max_layers=max(2, nl),
        rank=rank,
        mode="quantized",
        digits=digits,
        mem_latency=int(rng.integers(1, 5)),
        noise_buffers=1 + case % 2,
        e_generators=min(lanes, 1 + case % 4),  # 1, 2 and 4 E generators
    )
    watch = CollisionMonitor(evaluator_watches(dut))
    res = run_amaranth(job, dut, max_cycles=300_000, collisions=watch)
    watch.check()
    check_equals_golden(job, res, f"quantized evaluator {layers} rank {rank} lanes {lanes}")


def test_a_round_that_begins_with_room_after_one_that_ended_without_pushes_its_first_pass_once():
    """The sequencer's emit decision ``ok`` is a flip-flop of the queues' room; it must
    follow the room in every phase, not only while it emits. In this job (quantized,
    per-member inputs, 4 lanes, two rounds) the weight queues have no room after the
    first round's last push and room when the second begins: with ``ok`` loaded in
    PH_EMIT alone (54e5111) the stale decision pushed the round's first pass twice (8
    logit beats more than golden's; other jobs lose a pass and never finish)."""
    rng = np.random.default_rng(1740715779)
    layers, pop = (7, 3), 10
    cfg = Config(
        layers=layers,
        population=pop,
        rank=1,
        mode="quantized",
        digits="uniform",
        sigma_shift=0,
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=(int(rng.integers(0, 4)),),
        margin=int(rng.integers(1, 255)),
    ).validate()
    weights = [w.copy() for w in init_state(cfg).weights]
    for w in weights:
        w[0, :] = rng.choice([-2, 2], w.shape[1])
        w[:, -1] = rng.choice([-2, 2], w.shape[0])
    step = int(rng.integers(0, 65535))
    batch = int(rng.integers(1, 4))
    x = rng.integers(-127, 128, (pop, batch, layers[0]))
    x[:, 0] = 127
    job = EvalJob(cfg, weights, step, member_x=x)
    dut = PopulationEvaluator(
        lanes=4,
        max_width=12,
        max_layers=2,
        rank=1,
        mode="quantized",
        digits="uniform",
        mem_latency=2,
        noise_buffers=2,
        e_generators=2,
    )
    res = run_amaranth(job, dut, max_cycles=20_000)
    check_equals_golden(job, res, "evaluator, a round begun after a full queue")


class _EmitDecisionMonitor:
    """Every cycle the sequencer is in PH_EMIT, its registered emit decision ``ok`` (what
    enables the cursors, the block registers and the phase) equals the push's condition
    ``cmd.valid & cmd.ready``; in every cycle, its one-hot phase ``ph`` has exactly one
    flip-flop set (``bad_flag``: the first cycle it has not). Counts the cycles checked
    and the pushes."""

    def __init__(self, dut):
        self.dut, self.bad, self.bad_flag, self.emits, self.pushes = dut, [], [], 0, 0

    def process(self):
        async def proc(ctx):
            seq = self.dut.dbg["seq"]
            d = seq.dbg
            sigs = (d["ok"], d["ph"], seq.cmd.valid, seq.cmd.ready)
            cycle = 0
            async for _, _, ok, ph, valid, ready in ctx.tick().sample(*sigs):
                if bin(ph).count("1") != 1 and not self.bad_flag:
                    self.bad_flag.append((cycle, f"{ph:010b}"))
                if (ph >> d["PH_EMIT"]) & 1:
                    self.emits += 1
                    push = bool(valid and ready)
                    self.pushes += push
                    if bool(ok) != push and not self.bad:
                        self.bad.append((cycle, int(ok), int(valid), int(ready)))
                cycle += 1

        return proc


def _wide_cycles_ok(cfg, batch: int, p, shared: bool, narrow: int, wide: int) -> None:
    """The wide forms take the narrow forms' cycles plus at most a finalizer window (``T``:
    ``p.period`` cycles, of the evaluator's parameters ``p``) per u-row pass in low-rank
    mode, none in quantized mode. A u-row pass starts a cycle late (the bubble before
    its first beat, ``PassEngine``'s ``pre``), and so reaches the finalizer a cycle
    late: its record may then wait for the finalizer's next window (on 5-4-3 with shared
    inputs, 3 lanes: 28 cycles for 18 u-row passes, in whole windows), or cost nothing
    when the lanes wait for the finalizer anyway. ``ceil(rank / 2)`` u-row passes per
    sample and member sign of each round. With per-member inputs the wide loader takes a
    word every other cycle at most (the accelerator's input register offers no more), so
    a network whose passes wait for their inputs may take a cycle more per input word:
    ``rounds * batch * 2 * n_0``. With shared inputs the wide finalizer writes each
    sample's score term a cycle later (a second register per group), so each round
    drains a cycle later, and the next round's first op may then wait for the
    finalizer's next window: at most ``T`` per round."""
    u_blocks = sum(
        kind == "U"
        for kind, _s, _q in schedule(cfg.n_layers, shared, cfg.rank, cfg.mode == "lowrank")
    )
    rounds = -(-cfg.pairs // p.lanes)
    passes = rounds * batch * u_blocks if cfg.mode == "lowrank" else 0
    words = 0 if shared else rounds * batch * 2 * cfg.layers[0]
    drains = rounds if shared else 0
    bound = p.period * (passes + drains) + words
    assert 0 <= wide - narrow <= bound, (
        f"narrow {narrow}, wide {wide}, {passes} u-row passes, {words} input words, "
        f"{drains} rounds' terms: at most {bound} more"
    )


def _random_inputs_job(cfg, rng, batch, shared, step=None) -> EvalJob:
    """A job of ``cfg`` at its initial weights: shared inputs (:func:`shared_job`, a
    random step), or random per-member inputs at ES step ``step`` (drawn after the
    inputs when None)."""
    if shared:
        return shared_job(cfg, rng, batch)
    x = rng.integers(-127, 128, (cfg.population, batch, cfg.layers[0]))
    if step is None:
        step = int(rng.integers(0, 1000))
    return EvalJob(cfg, init_state(cfg).weights, step, member_x=x)


@pytest.mark.parametrize(
    ("mode", "shared", "lanes", "noise_buffers", "wide"),
    [
        ("quantized", False, 4, 2, False),
        ("quantized", True, 3, 1, True),
        ("lowrank", True, 3, 2, False),
        ("lowrank", False, 2, 1, False),
        ("lowrank", False, 3, 2, True),
    ],
)
def test_the_emit_decision_equals_the_push_in_every_emit_cycle(
    mode, shared, lanes, noise_buffers, wide, monkeypatch
):
    """The sequencer's ``ok`` is a flip-flop of the next cycle's room; in every PH_EMIT
    cycle, the first of each round included, it must be what the push is. Loaded in
    PH_EMIT alone (54e5111) it kept the last round's decision into the next round's
    first cycle (a pass pushed twice or lost) whenever the room changed in between.
    Exactly one flip-flop of the one-hot phase (``in_emit`` the emit's) must be set in
    every cycle, in the narrow and the wide forms (they leave the emit in different
    places)."""
    from pentegg.rtl.evaluator import params as params_mod

    monkeypatch.setattr(params_mod, "WIDE_LANES", 1 if wide else params_mod.WIDE_LANES)
    label = f"evaluator emit decision {mode} {shared} {lanes} {wide}"
    rng = np.random.default_rng(harness.pick_seed(label))
    layers, pop = (7, 5, 3), 4 * lanes + 2  # three rounds, the last part-full
    cfg = Config(
        layers=layers,
        population=pop,
        rank=4,
        mode=mode,
        sigma_shift=0,
        init="random",
        seed=int(rng.integers(1 << 32)),
    ).validate()
    batch = int(rng.integers(1, 4))
    job = _random_inputs_job(cfg, rng, batch, shared)
    dut = PopulationEvaluator(
        lanes=lanes,
        max_width=8,
        max_layers=2,
        rank=4,
        mode=mode,
        mem_latency=2,
        noise_buffers=noise_buffers,
        e_generators=2 if mode == "quantized" else 1,
    )
    mon = _EmitDecisionMonitor(dut)
    res = run_amaranth(job, dut, max_cycles=200_000, collisions=mon)
    assert not mon.bad, f"first difference (cycle, ok, cmd.valid, cmd.ready): {mon.bad[0]}"
    assert not mon.bad_flag, f"first cycle not one-hot (cycle, ph): {mon.bad_flag[0]}"
    assert mon.pushes > 0 and mon.emits > mon.pushes, (
        f"{mon.emits} emit cycles, {mon.pushes} pushes: no cycle without room was checked"
    )
    check_equals_golden(job, res, f"evaluator emit decision {mode} shared={shared}")


class _DrainedMonitor:
    """Every cycle the evaluator's registered ``drained`` is 1, the finalizer's term and
    logit FIFOs are empty and the score unit is idle; counts the cycles checked and the
    cycles a beat waited in a FIFO (so that the check is not vacuous)."""

    def __init__(self, dut):
        self.dut, self.bad, self.drained, self.waiting = dut, [], 0, 0

    def process(self):
        async def proc(ctx):
            d = self.dut.dbg
            fifos = d["fin"].fifos
            sigs = (d["drained"], fifos["terms"].level, fifos["logits"].level, d["sc"].busy)
            cycle = 0
            async for _, _, drained, t_level, l_level, sc_busy in ctx.tick().sample(*sigs):
                self.waiting += bool(t_level or l_level)
                if drained:
                    self.drained += 1
                    if (t_level or l_level or sc_busy) and not self.bad:
                        self.bad.append((cycle, int(t_level), int(l_level), int(sc_busy)))
                cycle += 1

        return proc


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "member"])
def test_drained_never_holds_while_a_beat_waits_for_the_score_unit_or_the_logits_reader(
    shared, wide, monkeypatch
):
    """The sequencer leaves a round (and the evaluation) on ``drained``: it must not be 1
    while a score term or a logit beat is in the finalizer's FIFOs or the score unit is
    busy. The FIFOs' outputs are registers (``SyncFIFOBuffered``): a beat written into
    an empty FIFO is valid two cycles later. The finalizer's ``holding`` covers the cycle
    between; so, on these networks, does its ``idle`` (the op's end-of-block flag holds
    a window past the write, ``T`` >= 4 cycles), so that this check also passes without
    ``holding``: it guards the whole of ``drained``, not that one term."""
    from pentegg.rtl.evaluator import params as params_mod

    monkeypatch.setattr(params_mod, "WIDE_LANES", 1 if wide else params_mod.WIDE_LANES)
    rng = np.random.default_rng(harness.pick_seed(f"evaluator drained {shared} {wide}"))
    cfg = Config(
        layers=(5, 4, 3),
        population=14,  # 7 pairs: three rounds on 3 lanes, the last part-full
        rank=4,
        sigma_shift=1,
        act_shifts=(1, 0),
        init="random",
        seed=int(rng.integers(1 << 32)),
    ).validate()
    job = _random_inputs_job(cfg, rng, 2, shared)
    dut = PopulationEvaluator(lanes=3, max_width=8, max_layers=2, rank=4, mem_latency=2)
    mon = _DrainedMonitor(dut)
    res = run_amaranth(job, dut, max_cycles=100_000, collisions=mon)
    assert not mon.bad, (
        f"first cycle drained with a beat left (cycle, term FIFO level, logit FIFO level, "
        f"score unit busy): {mon.bad[0]}"
    )
    assert mon.drained > 0 and mon.waiting > 0, (mon.drained, mon.waiting)
    check_equals_golden(job, res, f"evaluator drained shared={shared} wide={wide}")


def test_a_u_row_pass_two_after_a_record_does_not_take_the_bank_read_of_its_last_op():
    """Per-member inputs, rank 16 (T = 16), 2 lanes in one finalizer group: u-row passes
    q and q + 2 read the same noise bank, and the last STORE op of q's record reads its
    slot there as it enters P. Had the finalizer released q's captures before that op's
    go (as it does for a layer pass's record), q + 1's flush, and so q + 2's beats, would
    come earlier and win the bank's port over that read (the logits differ from golden's)."""
    rng = np.random.default_rng(20261129)
    cfg = Config(
        layers=(4, 3),
        population=12,
        rank=16,
        sigma_shift=7,
        seed=3816563192,
        init="random",
        act_shifts=(0,),
        margin=77,
    ).validate()
    job = EvalJob(cfg, init_state(cfg).weights, 490, member_x=rng.integers(-127, 128, (12, 1, 4)))
    dut = PopulationEvaluator(
        lanes=2, max_width=4, max_layers=1, rank=16, group=2, mem_latency=2, noise_buffers=1
    )
    res = run_amaranth(job, dut, max_cycles=200_000)
    assert res["error"] == 0
    logits, _ = job.expected()
    Scoreboard("evaluator u-row passes").check(
        "logits[member, sample, class]", logits, res["logits"]
    )


def test_more_than_four_finalizers_share_the_lane_controls_through_replicas_and_equal_golden():
    """Six lanes, one finalizer each: the pass engine's last shared control stage is two
    replicas, each feeding three finalizers' copies (rtl/evaluator/pass_engine.py): the
    controls reach the lanes in the same cycle as through one register. Both input
    modes' results equal golden's."""
    rng = np.random.default_rng(20261201)
    cfg = Config(
        layers=(5, 7, 3),
        population=14,
        rank=4,
        sigma_shift=2,
        seed=912873,
        init="random",
        act_shifts=(1, 2),
        margin=40,
    ).validate()
    weights = init_state(cfg).weights
    for shared in (True, False):
        if shared:
            samples = rng.integers(-127, 128, (4, 5))
            job = EvalJob(
                cfg,
                weights,
                77,
                samples=samples,
                labels=rng.integers(0, 3, 4),
                batch_idx=np.array([3, 0, 2]),
            )
        else:
            job = EvalJob(cfg, weights, 77, member_x=rng.integers(-127, 128, (14, 2, 5)))
        dut = PopulationEvaluator(lanes=6, max_width=8, max_layers=2, rank=4, group=1)
        assert dut.params.finalizers == 6
        res = run_amaranth(job, dut, max_cycles=200_000)
        check_equals_golden(job, res, f"evaluator six finalizers, shared {shared}")


def _small_job(rng, layers, population, act_shifts, batch, shared, step) -> EvalJob:
    """A random low-rank job of ES step ``step`` (rank 4, random init, margin 30) on
    ``layers``: shared inputs (5 samples, ``batch`` of them by index) or per-member
    ones."""
    cfg = Config(
        layers=layers,
        population=population,
        rank=4,
        sigma_shift=1,
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=act_shifts,
        margin=30,
    ).validate()
    weights = init_state(cfg).weights
    n0, n_out = layers[0], layers[-1]
    if shared:
        return EvalJob(
            cfg,
            weights,
            step,
            samples=rng.integers(-127, 128, (5, n0)),
            labels=rng.integers(0, n_out, 5),
            batch_idx=rng.integers(0, 5, batch),
        )
    return EvalJob(cfg, weights, step, member_x=rng.integers(-127, 128, (population, batch, n0)))


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "member"])
def test_the_ice40_forms_give_golden_scores_in_the_same_cycles(shared, monkeypatch):
    """The iCE40's forms (the lanes' term registers cleared outside beats,
    ``clear_terms``; the finalizer's ``lean`` form: its groups share one control, y1's
    own compares, one product; the simulator elaborates the ECP5's), with two finalizer
    groups (of 2 lanes and 1): the scores and logits equal golden's, in the cycles of
    the ECP5's forms."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator clear terms {shared}"))
    job = _small_job(rng, (6, 9, 3), 10, (2, 1), 3, shared, step=3)
    cycles = []
    for family in ("ecp5", "ice40"):
        _use_forms(monkeypatch, family)
        dut = PopulationEvaluator(lanes=3, max_width=16, max_layers=2, rank=4, group=2)
        res = run_amaranth(job, dut, max_cycles=300_000)
        check_equals_golden(job, res, f"evaluator, the {family}'s forms")
        cycles.append(res["cycles"])
    assert cycles[0] == cycles[1], cycles


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "member"])
def test_copies_of_the_activation_write_address_give_golden_scores_in_the_same_cycles(
    shared, wide, monkeypatch
):
    """The activation memory's write address and select in copies (``act_write_copies``;
    a copy per 16 lanes on a board, here per 2 lanes so that 5 lanes have 3, of 2, 2 and
    1 lanes), in the narrow forms and in the wide ones (forced; there the loader's write
    flag comes in a copy per address copy too, ``aw_en_c``): the finalizer's and the
    loader's writes reach every lane, so the scores and logits equal golden's, in the
    cycles of one copy."""
    from pentegg.rtl.evaluator import params as params_mod

    key = f"evaluator act copies {shared}" + (" wide" if wide else "")
    rng = np.random.default_rng(harness.pick_seed(key))
    job = _small_job(rng, (5, 7, 6, 3), 12, (2, 1, 1), 2, shared, step=5)
    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    cycles = []
    for per_copy in (16, 2):
        monkeypatch.setattr(params_mod, "ACT_WRITE_LANES", per_copy)
        dut = PopulationEvaluator(lanes=5, max_width=8, max_layers=3, rank=4, group=2)
        assert dut.params.act_write_copies == {16: 1, 2: 3}[per_copy]
        assert dut.params.wide == wide
        res = run_amaranth(job, dut, max_cycles=300_000)
        check_equals_golden(job, res, f"evaluator, a write address copy per {per_copy} lanes")
        cycles.append(res["cycles"])
    assert cycles[0] == cycles[1], cycles


def _wide_form_cases():
    """Every (inputs, mode, layers) once, 12 cases, with the lane arrangement rotated so
    that each arrangement meets each layer count, each mode and each kind of input, and
    each (mode, inputs) pair (a covering design of the 36 combinations)."""
    arrangements = [(3, None, "3-lanes"), (4, 2, "4-lanes-2-groups"), (5, 1, "5-groups")]
    layer_sets = [((7, 2, 5, 1), "3-layers"), ((5, 4, 3), "2-layers"), ((6, 3), "1-layer")]
    cases = []
    for i, (layers, layers_id) in enumerate(layer_sets):
        for j, mode in enumerate(("lowrank", "quantized")):
            for k, shared in enumerate((True, False)):
                lanes, group, lanes_id = arrangements[(i + j + 2 * k) % 3]
                inputs = "shared" if shared else "member"
                cid = f"{inputs}-{mode}-{layers_id}-{lanes_id}"
                cases.append(pytest.param(lanes, group, layers, mode, shared, id=cid))
    return cases


@pytest.mark.parametrize("lanes,group,layers,mode,shared", _wide_form_cases())
def test_the_wide_forms_give_golden_scores_in_the_narrow_forms_cycles(
    lanes, group, layers, mode, shared, monkeypatch
):
    """The wide builds' forms (``wide``, 32 lanes and more: the sequencer enters a layer
    from registered copies of its constants, loaded when a block leaves its layer, its
    first block loaded outside the emit; the pass engine pops its command queue a cycle
    after a take), forced here on 3 lanes: on three layers of widths 7, 2, 5 and 1 (a
    one-pass layer, a one-output one), on two layers of widths 5, 4 and 3 (with shared
    inputs the only case whose scores see the samples through a hidden layer), and on
    one layer (a sample is then one block of layer 0 for both members with shared
    inputs), the scores and logits equal golden's, in the cycles of the narrow forms
    (and at most a finalizer window per u-row pass, with per-member inputs a cycle per
    input word, with shared inputs a window per round: :func:`_wide_cycles_ok`); also on 4
    lanes in two finalizer groups of 2 (the scores' lane index then g's and i's bits side
    by side), the last round's last lane without a pair, and on 5 lanes of one lane
    each (the groups' run-time values then copied from two middle copies)."""
    from pentegg.rtl.evaluator import params as params_mod

    key = f"evaluator entry registers {mode} {shared}" + {4: "", 2: " 1", 3: " 2"}[len(layers)]
    key += "" if lanes == 3 else f" {lanes} {group}"
    rng = np.random.default_rng(harness.pick_seed(key))
    pop = 14  # 7 pairs: three rounds on 3 lanes, two on 4 or 5; the last part-full
    cfg = Config(
        layers=layers,
        population=pop,
        rank=4,
        mode=mode,
        sigma_shift=1,
        act_shifts=(1, 0, 2)[: len(layers) - 1],
        init="random",
        seed=int(rng.integers(1 << 32)),
    ).validate()
    batch = 3
    job = _random_inputs_job(cfg, rng, batch, shared, step=7)
    cycles = []
    for from_lanes in (params_mod.WIDE_LANES, 1):
        monkeypatch.setattr(params_mod, "WIDE_LANES", from_lanes)
        dut = PopulationEvaluator(
            lanes=lanes,
            group=group,
            max_width=8,
            max_layers=3,
            rank=4,
            mode=mode,
            e_generators=2 if mode == "quantized" else 1,
        )
        assert dut.params.wide == (from_lanes == 1)
        res = run_amaranth(job, dut, max_cycles=300_000)
        check_equals_golden(job, res, f"evaluator, wide forms {from_lanes == 1}")
        cycles.append(res["cycles"])
    _wide_cycles_ok(cfg, batch, dut.params, shared, *cycles)


def test_passes_wait_for_a_slow_input_source_in_both_forms(monkeypatch):
    """Per-member inputs offered one word every 24 cycles, so that the passes wait for
    their input slots: the wide forms (forced on 3 lanes; their pass engine keeps its
    own copy of the loader's slot flags) give golden's scores and logits in the narrow
    forms' cycles (and at most a finalizer window per u-row pass and a cycle per input
    word), which a slot flag
    that stays set after its release would not."""
    from pentegg.rtl.evaluator import params as params_mod

    rng = np.random.default_rng(harness.pick_seed("evaluator slow input source"))
    cfg = Config(
        layers=(6, 5, 3),
        population=10,
        rank=4,
        sigma_shift=1,
        act_shifts=(1, 2),
        init="random",
        seed=int(rng.integers(1 << 32)),
    ).validate()
    job = _random_inputs_job(cfg, rng, 3, False, step=5)
    cycles = []
    for from_lanes in (params_mod.WIDE_LANES, 1):
        monkeypatch.setattr(params_mod, "WIDE_LANES", from_lanes)
        dut = PopulationEvaluator(lanes=3, max_width=8, max_layers=2, rank=4)
        assert dut.params.wide == (from_lanes == 1)
        res = run_amaranth(job, dut, max_cycles=300_000, inp_gap=24)
        check_equals_golden(job, res, f"evaluator, slow input, wide forms {from_lanes == 1}")
        cycles.append(res["cycles"])
    _wide_cycles_ok(cfg, job.batch, dut.params, False, *cycles)


def _five_six_three(rng) -> Config:
    """The 5-6-3 network (population 14, rank 4) of the noise-write tests below."""
    return Config(
        layers=(5, 6, 3),
        population=14,
        rank=4,
        sigma_shift=0,
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=(2, 1),
    ).validate()


def _scores_and_cycles(job, builds) -> list[int]:
    """Run ``job`` on each ``(label, evaluator)`` build: no error flag, golden's scores;
    returns their cycles."""
    _, scores = job.expected()
    cycles = []
    for label, dut in builds:
        res = run_amaranth(job, dut, max_cycles=200_000)
        assert res["error"] == 0, label
        Scoreboard(f"evaluator {label}").check("scores[member]", scores, res["scores"])
        cycles.append(res["cycles"])
    return cycles


@pytest.mark.parametrize("noise_buffers", [1, 2])
def test_grouped_noise_writes_give_the_same_scores_in_the_same_cycles(noise_buffers):
    """``noise_write_lanes`` 3 (a bank written 18 bits at a time, the earlier lanes'
    slots from the staging memory) on 5 lanes: rounds of 5 and 2 pairs, so groups of 3,
    2, and 2 lanes of 3. Scores equal golden's, and equal ``noise_write_lanes`` 1's, in
    at most two more cycles per round (the grouped writes pass one more register, so a
    round's noise lands a cycle later)."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator grouped noise {noise_buffers}"))
    cfg = _five_six_three(rng)
    layers = cfg.layers
    samples = rng.integers(-127, 128, (6, layers[0]))
    job = EvalJob(
        cfg,
        init_state(cfg).weights,
        int(rng.integers(0, 1000)),
        samples=samples,
        labels=rng.integers(0, layers[-1], 6),
        batch_idx=rng.integers(0, 6, 3),
    )
    cycles = _scores_and_cycles(
        job,
        [
            (
                f"noise_write_lanes {g}",
                PopulationEvaluator(
                    lanes=5, max_width=8, noise_buffers=noise_buffers, noise_write_lanes=g
                ),
            )
            for g in (1, 3)
        ],
    )
    rounds = -(-cfg.population // 2 // 5)
    assert 0 <= cycles[1] - cycles[0] <= 2 * rounds, (
        f"cycles: {cycles[0]} (1 lane per write), {cycles[1]} (3), {rounds} rounds"
    )


@pytest.mark.parametrize(("write_lanes", "gens"), [(1, 2), (3, 3), (2, 4)])
def test_noise_generators_give_the_same_scores_in_fewer_cycles(write_lanes, gens):
    """``noise_generators`` 2, 3 (with ``noise_write_lanes`` 3: each write a whole
    group, no staging) and 4 (two groups of 2) on 6 lanes: rounds of 6 and 1 pairs, so
    a last group with lanes past the round's. Scores equal golden's, and a round's fill
    is shorter: the evaluation takes at least a fill of ``6 - ceil(6 / G)`` lanes' noise
    fewer cycles than with one generator (a lane's fill is 30 writes for this network)."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator noise generators {gens}"))
    cfg = _five_six_three(rng)
    layers = cfg.layers
    job = shared_job(cfg, rng, 3)
    cycles = _scores_and_cycles(
        job,
        [
            (
                f"noise_generators {ng}",
                PopulationEvaluator(
                    lanes=6, max_width=8, noise_write_lanes=write_lanes, noise_generators=ng
                ),
            )
            for ng in (1, gens)
        ],
    )
    per_lane = noise_fill_cycles(layers, 1) - noise_fill_cycles(layers, 0)
    assert per_lane == 30
    saved = (6 - -(-6 // gens)) * per_lane
    assert cycles[0] - cycles[1] >= saved, f"cycles: {cycles}, a fill {saved} shorter expected"


class _WriteInFlightMonitor:
    """Every cycle, the evaluator's "a noise write in flight" flags (``noise_late0/1``,
    what the sequencer counts as the fill still busy) equal "a bank write enable is
    high" (the registered writes the flag stands for)."""

    def __init__(self, dut):
        self.dut, self.bad, self.writes = dut, [], 0

    def process(self):
        async def proc(ctx):
            dbg = self.dut.dbg
            sigs = []
            for b in range(2):
                sigs += [dbg[f"noise_late{b}"], dbg[f"noise_we{b}"]]
            cycle = 0
            async for _, _, *vals in ctx.tick().sample(*sigs):
                for b in range(2):
                    late, en = vals[2 * b], vals[2 * b + 1]
                    self.writes += en != 0
                    if bool(late) != (en != 0) and not self.bad:
                        self.bad.append((cycle, b, int(late), int(en)))
                cycle += 1

        return proc


@pytest.mark.parametrize(
    ("mode", "write_lanes", "gens"),
    [("lowrank", 1, 1), ("lowrank", 3, 1), ("lowrank", 3, 3), ("quantized", 1, 1)],
)
def test_the_write_in_flight_flag_is_high_exactly_while_a_noise_bank_is_written(
    mode, write_lanes, gens
):
    """The sequencer starts a round's passes only when the fill's last registered bank
    write has landed: the flag it reads (a flip-flop of its own, loaded with the
    enables' condition) is high in exactly the cycles a bank's write enable is, with one
    lane per write, with the staged three-lane writes and with three generators' writes,
    in both modes."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator write in flight {mode}"))
    layers = (5, 6, 3)
    cfg = Config(layers=layers, population=14, rank=4, sigma_shift=0, mode=mode).validate()
    job = shared_job(cfg, rng, 2)
    params = {"noise_write_lanes": write_lanes} if write_lanes > 1 else {}
    if gens > 1:
        params["noise_generators"] = gens
    dut = PopulationEvaluator(lanes=5, max_width=8, mode=mode, **params)
    mon = _WriteInFlightMonitor(dut)
    res = run_amaranth(job, dut, max_cycles=200_000, collisions=mon)
    assert res["error"] == 0
    assert mon.writes > 0, "no noise bank write seen"
    assert not mon.bad, f"first difference (cycle, bank, flag, enables): {mon.bad[0]}"


def test_noise_write_lanes_range_is_checked_and_groups_at_most_the_lanes():
    for bad in (0, 7):
        with pytest.raises(ValueError, match=rf"^noise_write_lanes={bad} .* 1\.\.6$"):
            PopulationEvaluator(lanes=8, noise_write_lanes=bad)
    assert PopulationEvaluator(lanes=2, noise_write_lanes=3).params.noise_group == 2
    assert PopulationEvaluator(lanes=8, noise_write_lanes=3).params.noise_group == 3
    q = PopulationEvaluator(lanes=8, mode="quantized", noise_write_lanes=3)
    assert q.params.noise_group == 1


def test_noise_generators_range_and_write_group_are_checked():
    for bad, lanes in ((0, 8), (17, 32), (5, 4)):
        top = min(16, lanes)
        with pytest.raises(ValueError, match=rf"^noise_generators={bad} .* 1\.\.{top}$"):
            PopulationEvaluator(lanes=lanes, noise_generators=bad)
    with pytest.raises(ValueError, match=r"^noise_generators 4 must be 1 or a multiple of .* 3 "):
        PopulationEvaluator(lanes=8, noise_write_lanes=3, noise_generators=4)
    p = PopulationEvaluator(lanes=128, noise_write_lanes=3, noise_generators=6).params
    assert (p.noise_gens, p.noise_bank_lanes) == (6, 132)
    assert PopulationEvaluator(lanes=128, noise_write_lanes=3).params.noise_bank_lanes == 129
    q = PopulationEvaluator(lanes=8, mode="quantized", noise_write_lanes=3, noise_generators=4)
    assert q.params.noise_gens == 1


# (what is out of range, its inputs over the valid base, the flag it sets)
OUT_OF_RANGE = [
    ("no layers", {"n_layers": 0}, 0),
    ("more layers than max_layers", {"n_layers": 3}, 0),
    ("a width of 0", {"widths": {1: 0}}, 1),
    ("a width above max_width", {"widths": {2: 9}}, 1),
    ("an odd population", {"population": 5}, 2),
    ("a population of 0", {"population": 0}, 2),
    ("a population above 4096", {"population": 4098}, 2),
    ("a batch of 0", {"batch": 0}, 3),
    ("a batch above max_batch", {"batch": 5}, 3),
    ("sigma_shift 9", {"sigma_shift": 9}, 4),
    ("an activation shift of 16", {"act_shifts": {1: 16}}, 4),
    ("margin 0", {"margin": 0}, 5),
    ("margin 255", {"margin": 255}, 5),
    ("step 65535", {"step": 65535}, 6),
    ("noise beyond noise_depth", {"widths": {0: 8, 1: 8, 2: 8}}, 7),
]


def test_a_run_time_value_out_of_range_sets_its_flag_and_nothing_runs():
    """Each run-time input outside its range, one at a time, set in the cycle of
    ``start``: ``error`` holds exactly its flag (the previous run's flags are gone),
    ``busy`` falls within a few cycles (the noise check: after the configuration phase),
    and no weight is read and no score written."""
    from amaranth.sim import Simulator

    dut = PopulationEvaluator(
        lanes=2, max_layers=2, max_width=8, rank=4, max_batch=4, noise_depth=16
    )
    base = {
        "n_layers": 2,
        "widths": {0: 3, 1: 4, 2: 2},
        "population": 4,
        "batch": 2,
        "sigma_shift": 0,
        "act_shifts": {0: 0, 1: 0},
        "margin": 1,
        "step": 0,
        "shared": 1,
    }
    seen = []

    async def bench(ctx):
        for name, change, flag in OUT_OF_RANGE:
            for key, value in {**base, **change}.items():
                if isinstance(value, dict):
                    for i, v in {**base.get(key, {}), **value}.items():
                        ctx.set(getattr(dut, key)[i], v)
                else:
                    ctx.set(getattr(dut, key), value)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            reads = writes = cycles = 0
            while cycles < 200:
                _, _, busy, w_en, sc_wen = await ctx.tick().sample(dut.busy, dut.w_en, dut.sc_wen)
                cycles, reads, writes = cycles + 1, reads + w_en, writes + sc_wen
                if not busy:
                    break
            seen.append((name, ctx.get(dut.error), cycles, reads, writes))
            assert ctx.get(dut.error) == 1 << flag, f"{name}: error {ctx.get(dut.error):#x}"
            assert (reads, writes) == (0, 0), f"{name}: {reads} weight reads, {writes} scores"
            assert cycles <= (100 if flag == 7 else 3), f"{name}: busy for {cycles} cycles"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == len(OUT_OF_RANGE)


@pytest.mark.parametrize("bad", ["an odd population", "noise beyond noise_depth"])
def test_a_run_after_a_refused_start_equals_golden(bad):
    """A start refused by a check (in the start's checks, or after the configuration
    phase: the noise check) leaves nothing that changes the next run: its scores equal
    golden's. The refused start's registers load whether or not a check fails."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator after refusal {bad}"))
    cfg = Config(
        layers=(3, 4, 2), population=6, rank=4, seed=int(rng.integers(1 << 32)), init="random"
    ).validate()
    job = shared_job(cfg, rng, batch=3)
    dut = PopulationEvaluator(
        lanes=2, max_layers=2, max_width=8, rank=4, max_batch=4, noise_depth=24
    )
    name, change, flag = next(case for case in OUT_OF_RANGE if case[0] == bad)
    change = dict(change)
    widths = {0: 3, 1: 4, 2: 2, **change.pop("widths", {})}
    settings = {"n_layers": 2, "population": 8, "batch": 2, "margin": 1, "shared": 1, **change}

    async def refused(ctx):
        for i, v in widths.items():
            ctx.set(dut.widths[i], v)
        for key, value in settings.items():
            ctx.set(getattr(dut, key), value)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        await ctx.tick().until(~dut.busy)
        assert ctx.get(dut.error) == 1 << flag, f"{name}: error {ctx.get(dut.error):#x}"

    res = run_amaranth(job, dut, max_cycles=200_000, prelude=refused)
    check_equals_golden(job, res, f"a run after {name}")


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("past", [0, 1, 65535 - 3])
def test_a_label_at_or_past_the_classes_sets_flag_8_and_the_run_ends(past, wide, monkeypatch):
    """Shared inputs: a batch sample's label at the number of classes or above (checked
    by the loader a cycle after the label arrives, the wide builds' two cycles) sets
    flag 8 alone, and the run still ends; the labels just below (every other test) set
    none."""
    from pentegg.rtl.evaluator import params as params_mod

    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    rng = np.random.default_rng(harness.pick_seed(f"evaluator bad label {past}"))
    layers = (5, 4, 3)
    cfg = Config(layers=layers, population=6, rank=4, sigma_shift=0).validate()
    labels = rng.integers(0, 3, 4)
    labels[2] = 3 + past
    job = shared_job(cfg, rng, 3, labels=labels, batch_idx=np.array([0, 2, 1]))
    dut = PopulationEvaluator(lanes=2, max_width=8, mem_latency=int(rng.integers(1, 4)))
    assert dut.params.wide == wide
    res = run_amaranth(job, dut, max_cycles=200_000)
    assert res["error"] == 1 << 8, f"error {res['error']:#x}"


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
def test_a_run_after_one_with_a_bad_label_sets_no_flag_and_equals_golden(wide, monkeypatch):
    """Flag 8 is the run's own: the run after one with a label past the classes, its
    labels in range, ends without it and with golden's scores (the loader's flag of the
    run before is not read before this run's load starts)."""
    from pentegg.rtl.evaluator import params as params_mod

    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    rng = np.random.default_rng(harness.pick_seed("evaluator after a bad label"))
    cfg = Config(layers=(5, 4, 3), population=6, rank=4, sigma_shift=0).validate()
    labels = rng.integers(0, 3, 4)
    labels[2] = 3
    bad = shared_job(cfg, rng, 3, labels=labels, batch_idx=np.array([0, 2, 1]))
    good = shared_job(cfg, rng, 3)
    dut = PopulationEvaluator(lanes=2, max_width=8)
    res = run_amaranth_jobs([(bad, {}), (good, {}), (bad, {})], dut, max_cycles=200_000)
    assert [r["error"] for r in res] == [1 << 8, 0, 1 << 8]
    check_equals_golden(good, res[1], "the run after a bad label")


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("mode", ["lowrank", "quantized"])
def test_runs_that_switch_between_shared_and_per_member_inputs_equal_golden(
    mode, wide, monkeypatch
):
    """``shared`` and ``widths`` are a run's settings, read from the start on: one
    evaluator runs shared, per-member, per-member, shared and shared inputs back to back
    (so that each kind follows the other and itself), with an input width ``n_0`` of 5
    or 7 that changes between most of them, and every run equals golden. Layer 0 has two
    outputs, so that a block of it is one pass and the run's first command already
    releases the input slot of a per-member run (a copy of ``shared`` in the sequencer
    loaded only while it emits gives that command the run before's value: the quantized
    runs fail)."""
    from pentegg.rtl.evaluator import params as params_mod

    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    rng = np.random.default_rng(harness.pick_seed(f"evaluator switch inputs {mode} {wide}"))

    def config(n0):
        return Config(
            layers=(n0, 2, 3),
            population=6,
            rank=4,
            mode=mode,
            seed=int(rng.integers(1 << 32)),
            init="random",
        ).validate()

    def member_job(cfg):
        x = rng.integers(-127, 128, (cfg.population, 2, cfg.layers[0]))
        return EvalJob(cfg, init_state(cfg).weights, int(rng.integers(0, 1000)), member_x=x)

    runs = [(True, 5), (False, 7), (False, 5), (True, 5), (True, 7)]
    jobs = []
    for kind, n0 in runs:
        cfg = config(n0)
        jobs.append(shared_job(cfg, rng, batch=2) if kind else member_job(cfg))
    dut = PopulationEvaluator(lanes=2, max_width=8, max_batch=4, mode=mode)
    assert dut.params.wide == wide
    res = run_amaranth_jobs([(job, {}) for job in jobs], dut, max_cycles=400_000)
    for i, (job, r) in enumerate(zip(jobs, res, strict=True)):
        kind = "shared" if job.shared else "per-member"
        check_equals_golden(job, r, f"run {i} ({kind}, n_0 {job.cfg.layers[0]})")


@pytest.mark.parametrize("shared", [True, False])
def test_the_shortest_samples_end_the_batch_and_the_run_at_their_last_sample(shared):
    """One layer of two outputs, quantized: a sample is two one-pass blocks (both members'
    layer 0), emitted in two cycles while the command queue has room, so the sequencer's
    registered last-sample and last-round flags are read two cycles after the counts
    change (a flag a cycle later than that would end the batch a sample late)."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator shortest samples {shared}"))
    cfg = Config(
        layers=(3, 2),
        population=6,
        rank=1,
        mode="quantized",
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=(2,),
        margin=7,
    ).validate()
    batch = 3
    if shared:
        samples = rng.integers(-127, 128, (batch + 1, 3))
        job = EvalJob(
            cfg,
            init_state(cfg).weights,
            5,
            samples=samples,
            labels=rng.integers(0, 2, batch + 1),
            batch_idx=np.array([1, 0, 3]),
        )
    else:
        job = EvalJob(
            cfg, init_state(cfg).weights, 5, member_x=rng.integers(-127, 128, (6, batch, 3))
        )
    dut = PopulationEvaluator(
        lanes=1, max_width=4, max_layers=1, rank=1, mode="quantized", mem_latency=1
    )
    res = run_amaranth(job, dut, max_cycles=50_000)
    check_equals_golden(job, res, f"shortest samples, shared {shared}")


def _boundary_inputs(cfg, weights, noise, targets):
    """Per-member inputs (population, len(targets), n0) whose sample ``b`` makes the
    accumulator of ``targets[b] = (layer, output, value)`` equal ``value`` for every
    member (golden's ``layer_population``), found over a grid of three inputs (the first
    two every value, the third five); None where no input of the grid does."""
    axes = [np.arange(-127, 128), np.arange(-127, 128), np.array([-127, -64, 0, 64, 127])]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    x = np.broadcast_to(grid, (cfg.population, *grid.shape)).astype(np.float64)
    accs, h = [], x
    for l in range(cfg.n_layers):
        accs.append(layer_population(cfg, l, weights[l], noise, h).astype(np.int64))
        h = activate(accs[-1], cfg.act_shifts[l], l == cfg.n_layers - 1).astype(np.float64)
    out = np.empty((cfg.population, len(targets), 3), dtype=np.int64)
    for b, (l, o, value) in enumerate(targets):
        for member in range(cfg.population):
            hits = np.flatnonzero(accs[l][member, :, o] == value)
            if not len(hits):
                return None
            out[member, b] = grid[hits[0]]
    return out


# (layers, act_shifts, rank, weights): rows that reach both bounds of their layer,
# hidden values over 0..127 (found by a search over random digits with golden); rank 16
# makes the finalizer's window 16 cycles (the shift amounts then differ between its
# ends)
_W332 = [
    [[0, 2, 1, 0], [-1, -2, 2, 0], [2, -2, -2, 2]],
    [[-2, 2, 1, 0], [2, 2, -2, -2]],
]
BOUND_CASES = [
    ((3, 3, 2), (1, 0), 4, _W332),
    ((3, 3, 2), (1, 0), 16, _W332),
    ((3, 3, 2), (0, 0), 4, _W332),
    ((3, 2), (2,), 1, [[[2, 2, 1, 0], [2, -2, -1, 0]]]),
]


@pytest.mark.parametrize("family", ["ecp5", "ice40"])
@pytest.mark.parametrize("case", range(len(BOUND_CASES)))
def test_activations_at_the_saturation_bounds_equal_golden(case, family, monkeypatch):
    """Every member's first two outputs of each layer (the finalizer's y0 and y1) at the
    exact accumulators where saturation starts: rshr(a, s) = 128 (to 127) in every
    layer, -1 (to 0) in a hidden one, -128 (to -127) in the last. Logits equal golden's
    in both families' forms: comparing a bound a value off (y1's compares on the
    accumulator with the bounds shifted by s, or on y1 itself, or y0's) fails."""
    _use_forms(monkeypatch, family)
    layers, shifts, rank, rows = BOUND_CASES[case]
    weights = [np.array(w, dtype=np.int8) for w in rows]
    last = len(shifts) - 1

    def half(s):
        return (1 << s) >> 1

    targets = []
    for o in (1, 0):
        for l, s in enumerate(shifts):
            low = -(127 << s) - 1 if l == last else -1  # y = -128, y = -1
            targets += [(l, o, (128 << s) - half(s)), (l, o, low - half(s))]
    member_x = None
    for seed in range(10):
        cfg = Config(
            layers=layers, population=4, rank=rank, sigma_shift=2, seed=seed, act_shifts=shifts
        ).validate()
        member_x = _boundary_inputs(cfg, weights, make_noise(cfg, 0), targets)
        if member_x is not None:
            break
    assert member_x is not None, "no inputs reach the bounds with seeds 0..9"
    job = EvalJob(cfg, weights, 0, member_x=member_x)
    dut = PopulationEvaluator(lanes=2, max_width=4, max_layers=2, rank=rank, digits=cfg.digits)
    res = run_amaranth(job, dut, max_cycles=100_000)
    assert res["error"] == 0
    logits, _ = job.expected()
    assert (logits == 127).any() and (logits == -127).any()
    Scoreboard(f"bounds {layers} shifts {shifts}").check(
        "logits[member, sample, class]", logits, res["logits"]
    )


def _saturating_margin_job(rng, layers, rank):
    """A shared-input job whose last layer's logits mostly sit at 127 or -127 (weights
    at +-1, +-2, inputs at +-127, a last-layer shift of 0), with at least two classes at
    each bound in some sample; None when this draw has no such sample."""
    cfg = Config(
        layers=layers,
        population=8,
        rank=rank,
        sigma_shift=1,
        seed=int(rng.integers(1 << 32)),
        act_shifts=(1,) * (len(layers) - 2) + (0,),
        margin=int(rng.integers(1, 255)),
    ).validate()
    weights = [  # (outputs, inputs + bias)
        rng.choice(np.array([-2, -1, 1, 2], dtype=np.int8), (layers[i + 1], layers[i] + 1))
        for i in range(len(layers) - 1)
    ]
    ns = 12
    job = EvalJob(
        cfg,
        weights,
        int(rng.integers(1000)),
        samples=rng.choice([-127, 127], (ns, layers[0])),
        labels=rng.integers(0, layers[-1], ns),
        batch_idx=np.arange(ns),
    )
    logits, _ = job.expected()
    for bound in (127, -127):
        if not ((logits == bound).sum(axis=2) >= 2).any():
            return None
    return job


@pytest.mark.parametrize("family", ["ecp5", "ice40"])
@pytest.mark.parametrize("case", range(3))
def test_margin_scores_with_saturated_and_tied_logits_equal_golden(case, family, monkeypatch):
    """Spec 7.1 scores where the last layer's logits sit at their bounds, two or more
    tied at each bound and y1 far outside -127..127: the finalizer's
    margin state (the largest other logit, compared with y1 by its low byte and its
    bounds) gives golden's scores, its state in either u bank (the last layer's outputs
    go to bank (l + 1) % 2: bank 0 after two layers, bank 1 after three), in both
    families' forms."""
    _use_forms(monkeypatch, family)
    rng = np.random.default_rng(harness.pick_seed(f"evaluator margin bounds {case}"))
    layers, rank = (((4, 6, 9), 4), ((4, 6, 6, 8), 1), ((4, 6, 7), 16))[case]
    for _ in range(50):
        job = _saturating_margin_job(rng, layers, rank)
        if job is not None:
            break
    assert job is not None, "no draw of 50 puts two logits at each bound"
    _, scores = job.expected()
    dut = PopulationEvaluator(lanes=2, max_width=9, max_layers=len(layers) - 1, rank=rank)
    res = run_amaranth(job, dut, max_cycles=200_000)
    assert res["error"] == 0
    Scoreboard(f"margin bounds {job.cfg.layers}").check("scores[member]", scores, res["scores"])


@pytest.mark.parametrize("classes", [3, 4])
def test_a_slow_logits_reader_gets_every_logit_equal_to_golden(classes):
    """Per-member inputs with a reader ready in about one cycle in twenty: the logits FIFO
    fills, the issue waits on its reservations, and no beat is lost or written twice
    (an odd class count makes one-row last-layer ops, whose only beat releases one of
    the two reserved). Releasing a reserved beat a cycle before its write fails it."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator slow logits {classes}"))
    cfg = Config(
        layers=(5, 6, classes),
        population=10,
        rank=4,
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=(2, 3),
    ).validate()
    x = rng.integers(-127, 128, (cfg.population, 3, 5))
    job = EvalJob(cfg, init_state(cfg).weights, int(rng.integers(0, 1000)), member_x=x)
    dut = PopulationEvaluator(lanes=3, max_width=8, max_layers=2, rank=4, group=1)
    pattern = rng.random(400_000) < 0.05
    res = run_amaranth(job, dut, max_cycles=400_000, logits_ready=lambda c: pattern[c])
    check_equals_golden(job, res, f"slow logits reader, {classes} classes")


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "member"])
def test_noise_read_address_copies_give_golden_scores_in_the_same_cycles(monkeypatch, shared):
    """Nine lanes, one per noise bank granule: three slices a bank. With a copy of the
    noise read's source registers per slice (``NOISE_READ_FANOUT`` 1: the finalizer's
    ``n_addrs`` and the pass engine's ``nz_reads`` in three copies) the scores (logits)
    equal golden's, in the cycles of the one-copy form; likewise in the wide builds'
    forms (the copies' op kind decoded a cycle ahead; at most a finalizer window more per
    u-row pass)."""
    from pentegg.rtl.evaluator import evaluator as evaluator_mod
    from pentegg.rtl.evaluator import params as params_mod

    rng = np.random.default_rng(harness.pick_seed(f"noise read copies {shared}"))
    cfg = Config(
        layers=(6, 5, 3), population=22, rank=4, seed=int(rng.integers(1 << 32)), init="random"
    ).validate()
    st = init_state(cfg)
    if shared:
        samples = rng.integers(-127, 128, (4, 6))
        job = EvalJob(
            cfg, st.weights, 7, samples=samples, labels=rng.integers(0, 3, 4), batch_idx=[0, 2, 3]
        )
    else:
        job = EvalJob(cfg, st.weights, 7, member_x=rng.integers(-127, 128, (22, 2, 6)))
    cycles = []
    for fanout, wide in ((8, False), (1, False), (1, True)):
        monkeypatch.setattr(evaluator_mod, "NOISE_READ_FANOUT", fanout)
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1 if wide else params_mod.WIDE_LANES)
        dut = PopulationEvaluator(
            lanes=9, max_width=8, max_layers=2, rank=4, group=3, noise_write_lanes=1
        )
        assert dut.params.wide == wide
        res = run_amaranth(job, dut, max_cycles=200_000)
        assert dut.dbg["noise0"].r_copies == (1 if fanout == 8 else 3)
        check_equals_golden(job, res, f"noise read fanout {fanout}, wide {wide}")
        cycles.append(res["cycles"])
    assert cycles[0] == cycles[1], cycles
    _wide_cycles_ok(cfg, job.batch, dut.params, shared, cycles[1], cycles[2])


def _keyed_config(rng, layers, population, mode="lowrank") -> Config:
    """A rank-4 configuration of ``layers`` with a random seed and random initial weights."""
    return Config(
        layers=layers,
        population=population,
        rank=4,
        mode=mode,
        seed=int(rng.integers(1 << 32)),
        init="random",
    ).validate()


def _runs_equal_golden(runs, dut) -> list[dict]:
    """Run ``(job, inputs)`` pairs one after the other on ``dut``; each equals golden."""
    res = run_amaranth_jobs(runs, dut, max_cycles=400_000)
    for (job, inputs), r in zip(runs, res, strict=True):
        check_equals_golden(job, r, f"step {job.step} {inputs}")
    return res


def _next_step_jobs(cfg, rng, steps, batch, shared):
    """Jobs of consecutive ES steps of one network: each with weights of its own (as
    an update leaves them), inputs of its own, the same configuration."""
    jobs = []
    step0 = int(rng.integers(0, 60000))
    for t in range(steps):
        w = init_state(dataclasses.replace(cfg, seed=int(rng.integers(1 << 32)))).weights
        job = _random_inputs_job(cfg, rng, batch, shared)
        job.weights, job.step = w, step0 + t
        jobs.append(job)
    return jobs


@pytest.mark.parametrize(
    ("mode", "shared", "population", "lanes", "wide"),
    [
        ("lowrank", False, 4, 2, False),  # one round
        ("lowrank", True, 4, 2, False),
        ("lowrank", False, 10, 2, False),  # three rounds, the last of one pair
        ("quantized", True, 4, 2, False),
        ("quantized", False, 6, 2, False),
        ("lowrank", False, 4, 3, False),  # one round of 2 pairs on 3 lanes
        ("lowrank", True, 10, 2, True),  # the wide builds' forms
        ("quantized", False, 4, 3, True),
    ],
)
def test_noise_made_ahead_for_the_next_step_gives_golden_and_skips_the_first_fill(
    mode, shared, population, lanes, wide, monkeypatch
):
    """``pre`` makes round 0's noise of ``pre_step`` during an evaluation; the next
    evaluation, started with ``keep`` at that step, makes no noise for its first round
    and equals golden (its weights and inputs are new, as after an update). A ``keep``
    start at a step the fill did not make ahead, and a start without ``keep``, make
    their noise and equal golden."""
    from pentegg.rtl.evaluator import params as params_mod

    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    key = f"evaluator pre {mode} {shared} {population} {lanes} {wide}"
    rng = np.random.default_rng(harness.pick_seed(key))
    cfg = _keyed_config(rng, (5, 6, 3), population, mode)
    dut = PopulationEvaluator(
        lanes=lanes,
        max_layers=2,
        max_width=8,
        rank=4,
        mode=mode,
        max_batch=8,
        noise_buffers=2,
    )
    assert dut.params.wide == wide
    a, b, c, d = _next_step_jobs(cfg, rng, 4, batch=3, shared=shared)
    d.step = c.step + 5  # not the step made ahead
    e = _next_step_jobs(cfg, rng, 1, batch=3, shared=shared)[0]
    e.step = d.step  # the step d's own round 0 made, but without keep
    runs = [
        (a, {"pre": 1, "pre_step": b.step}),
        (b, {"keep": 1, "pre": 1, "pre_step": c.step}),
        (c, {"keep": 1, "pre": 1, "pre_step": c.step + 1}),
        (d, {"keep": 1}),
        (e, {}),
    ]
    res = _runs_equal_golden(runs, dut)
    cold = [
        run_amaranth(
            job,
            PopulationEvaluator(
                lanes=lanes,
                max_layers=2,
                max_width=8,
                rank=4,
                mode=mode,
                max_batch=8,
                noise_buffers=2,
            ),
        )["cycles"]
        for job in (b, c)
    ]
    # the warm runs save round 0's fill (a low-rank fill of two lanes is about 115
    # cycles for 5-6-3 at rank 4, a quantized one more); d and e make theirs
    saved = [cold[0] - res[1]["cycles"], cold[1] - res[2]["cycles"]]
    fill = noise_fill_cycles(cfg.layers, min(lanes, population // 2))
    assert min(saved) >= fill - 30, (saved, fill)
    assert res[3]["cycles"] > res[2]["cycles"] + fill - 30
    assert res[4]["cycles"] > res[2]["cycles"] + fill - 30


@pytest.mark.parametrize("shared", [False, True], ids=["member", "shared"])
def test_keep_reuses_a_single_rounds_noise_for_the_same_step_with_one_buffer(shared):
    """One noise buffer, one round (as an RL policy's evaluations of one ES step, a
    batch of observations at a time): a start with ``keep`` at the step whose noise the
    buffer holds makes none and equals golden; at the next step it makes it."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator keep one buffer {shared}"))
    cfg = _keyed_config(rng, (4, 7, 2), 6)
    dut = PopulationEvaluator(lanes=3, max_layers=2, max_width=8, rank=4, max_batch=8)
    a, b, c = (_random_inputs_job(cfg, rng, 2, shared) for _ in range(3))
    a.step, b.step, c.step = 40, 40, 41
    runs = [(a, {}), (b, {"keep": 1}), (c, {"keep": 1})]
    res = _runs_equal_golden(runs, dut)
    fill = noise_fill_cycles(cfg.layers, 3)
    assert res[0]["cycles"] - res[1]["cycles"] >= fill - 30
    assert res[2]["cycles"] - res[1]["cycles"] >= fill - 30


@pytest.mark.parametrize("noise_buffers", [1, 2])
def test_keep_after_a_later_round_overwrote_round_0_makes_the_noise_again(noise_buffers):
    """Three rounds (population 10 on 2 lanes): a later round's fill overwrites the
    buffer that held round 0's noise (one buffer: round 1's; two: round 2's), so a
    ``keep`` start at the same step finds no noise made and makes it: golden's results,
    no cycles saved."""
    rng = np.random.default_rng(harness.pick_seed(f"evaluator keep overwritten {noise_buffers}"))
    cfg = _keyed_config(rng, (4, 5, 3), 10)
    dut = PopulationEvaluator(
        lanes=2, max_layers=2, max_width=8, rank=4, max_batch=8, noise_buffers=noise_buffers
    )
    a, b = (_random_inputs_job(cfg, rng, 2, False) for _ in range(2))
    a.step = b.step = 77
    res = _runs_equal_golden([(a, {}), (b, {"keep": 1})], dut)
    assert res[1]["cycles"] >= res[0]["cycles"] - 8, [r["cycles"] for r in res]


@pytest.mark.parametrize("logit_depth", [None, 4])
def test_the_logits_fifo_does_not_hold_back_the_last_layers_passes(monkeypatch, logit_depth):
    """Per-member inputs: a last-layer op reserves its two logit beats when issued and
    writes them four windows later, so a FIFO of 4 beats (two ops) let the finalizer
    issue two ops in five windows, and each last-layer pass of the lanes waited
    for its captures to be taken (``caps``). With the default depth
    (``LOGIT_FIFO_DEPTH``) no last-layer pass waits, and the logits equal golden; at 4
    they do wait (the case that shows this test sees the stall). 4 lanes in one group
    of 4: a 32-input last layer's pass (33 cycles and a flush) outlasts its 4 ops and
    their latency when nothing holds the issue back (a shorter one does not: there the
    finalizer's own pace is the limit, whatever the depth)."""
    from pentegg.rtl.evaluator import finalizer as finalizer_mod

    if logit_depth is not None:
        monkeypatch.setattr(finalizer_mod, "LOGIT_FIFO_DEPTH", logit_depth)
    rng = np.random.default_rng(harness.pick_seed("logits fifo depth"))
    cfg = _keyed_config(rng, (16, 32, 10), 8)
    job = _random_inputs_job(cfg, rng, 2, shared=False)
    dut = PopulationEvaluator(lanes=4, max_width=32, max_layers=2, rank=4, group=4)
    stalls = {"last": 0, "other": 0}

    async def watch(ctx):
        eng = dut.dbg["eng"]
        layer = None
        async for _, _, act, cv, cr, cp in ctx.tick().sample(
            dut.activity, eng.cmd.valid, eng.cmd.ready, eng.cmd.payload
        ):
            if cv and cr:
                layer = int(cp.rec.layer) if not cp.u else None
            if act.caps:
                stalls["last" if layer == cfg.n_layers - 1 else "other"] += 1

    res = run_amaranth(job, dut, max_cycles=200_000, processes=[watch])
    check_equals_golden(job, res, f"logit_depth {logit_depth}")
    if logit_depth is None:
        assert stalls["last"] == 0, f"last-layer passes waited {stalls['last']} cycles"
    else:
        assert stalls["last"] > 0, "a FIFO of 4 beats should hold the last layer back"
