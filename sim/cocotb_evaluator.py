"""cocotb tests of the PopulationEvaluator (run by tests/test_cocotb_evaluator.py through
the harness, on the EvaluatorSystem wrapper: the evaluator with its memories).

Every job is a random run-time configuration within the build's elaboration maxima
(sim/evaluator_bench.random_job): the logits (per-member inputs) or the spec 7.1 scores
(shared inputs) of every member must equal ``pentegg.golden``'s. Test environment:
``PENTEGG_TB_JOBS`` random jobs per run, ``PENTEGG_TB_MAX_BATCH``,
``PENTEGG_TB_DIGITS_NETWORK`` also run the digits network (64-64-10) with this batch and
population 256 (shared inputs), ``PENTEGG_TB_READY`` logits sink readiness.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge

from pentegg.golden import Config, init_state
from pentegg.rtl.evaluator.evaluator import out_logits_layout
from pentegg.rtl.evaluator.params import MAX_STEP, EvaluatorParams
from pentegg.rtl.evaluator.pass_engine import ACTIVITY_LAYOUT
from pentegg.rtl.evaluator.sequencer import PHASES
from pentegg.sim.evaluator_bench import EvalJob, random_job
from pentegg.sim.evaluator_system import LOAD_TARGETS
from pentegg.sim.harness import tb_params, tb_value
from pentegg.sim.scoreboard import Mismatch, Scoreboard
from pentegg.sim.stream import reset, start_clock, wait_low

_tb, _params = tb_value, tb_params  # the harness's env and parameters


async def load(dut, target: str, values) -> None:
    sel = LOAD_TARGETS[target]
    for addr, v in enumerate(values):
        await FallingEdge(dut.clk)
        dut.ld_sel.value = sel
        dut.ld_addr.value = addr
        dut.ld_data.value = int(v) & 0xFFFF
        dut.ld_en.value = 1
    await FallingEdge(dut.clk)
    dut.ld_en.value = 0


def set_run_inputs(dut, job: EvalJob) -> None:
    cfg = job.cfg
    dut.n_layers.value = cfg.n_layers
    widths = 0
    width_bits = _eparams().width_bits + 1  # the widths port's element width
    act = 0
    for i, w in enumerate(cfg.layers):
        widths |= w << (width_bits * i)
    for i, s in enumerate(cfg.shifts()):
        act |= s << (5 * i)
    dut.widths.value = widths
    dut.act_shifts.value = act
    dut.sigma_shift.value = cfg.sigma_shift
    dut.margin.value = cfg.margin
    dut.population.value = cfg.population
    dut.batch.value = job.batch
    dut.seed.value = cfg.seed
    dut.step.value = job.step
    dut.shared.value = int(job.shared)


def state(dut) -> str:
    """Where a run stands, for a failure message (from inner signals: a Verilator build
    shows them with ``PENTEGG_SIM_INTERNALS=1``)."""
    try:
        ev = dut.ev
    except AttributeError:
        return "inner signals hidden (Verilator: rerun with PENTEGG_SIM_INTERNALS=1)"
    out = []
    try:  # the sequencer's phase: its one-hot flip-flops, the one set
        seq = ev.seq
        on = [n for n in PHASES if int(getattr(seq, "in_emit" if n == "emit" else f"ph_{n}").value)]
        out.append(f"sequencer phase {'+'.join(on) or 'none'}")
    except (AttributeError, ValueError):
        out.append("sequencer phase ?")
    probes = {
        "pass engine busy": ("engine", "busy"),
        "finalizer idle": ("fin", "idle"),
        "noise fill busy": ("fill", "busy"),
        "loaded": ("loader", "loaded"),
        "blocks done": ("fin", "blocks_done"),
        "op_P": ("fin", "op_P"),
        "op_P2": ("fin", "op_P2"),
        "op_S": ("fin", "op_S"),
        "op_U": ("fin", "op_U"),
        "block ends": ("fin", "ends_block"),
    }
    for name, (sub, sig) in probes.items():
        try:
            out.append(f"{name} {getattr(getattr(ev, sub), sig).value}")
        except AttributeError:
            out.append(f"{name} ?")
    return ", ".join(out)


async def run_job(dut, job: EvalJob, rng: random.Random, inputs: dict | None = None):
    """Load, run and collect one job; returns (cycles, scores, logits or None).
    ``inputs``: the evaluator's ``keep``, ``pre``, ``pre_step`` for the run (0 unless
    given)."""
    p = _params()
    lanes = p["lanes"]
    await load(dut, "weights", job.weight_words())
    if job.shared:
        await load(dut, "samples", job.sample_bytes())
        await load(dut, "labels", job.labels)
        await load(dut, "batch", job.batch_idx)
    set_run_inputs(dut, job)
    for name in ("keep", "pre", "pre_step"):
        getattr(dut, name).value = int((inputs or {}).get(name, 0))
    await FallingEdge(dut.clk)
    dut.start.value = 1
    await FallingEdge(dut.clk)
    dut.start.value = 0
    beats = []
    limit = _tb("max_cycles", 5_000_000)
    if job.shared:
        await wait_low(dut, dut.busy, limit, lambda: f": {state(dut)}")
    else:
        words = job.input_words(lanes)
        wi = waited = 0
        ready_p = _tb("ready", 0.8)
        while True:
            await FallingEdge(dut.clk)
            dut.inp__valid.value = int(wi < len(words))
            if wi < len(words):
                dut.inp__payload.value = words[wi]
            ready = int(rng.random() < ready_p)
            dut.logits__ready.value = ready
            await RisingEdge(dut.clk)
            if wi < len(words) and dut.inp__ready.value:
                wi += 1
            if ready and dut.logits__valid.value:
                beats.append(int(dut.logits__payload.value))
            if not dut.busy.value and not dut.logits__valid.value:
                break
            waited += 1
            assert waited < limit, f"still busy after {waited} cycles ({wi} input words)"
        dut.inp__valid.value = 0
    err = int(dut.error.value)
    cycles = int(dut.cycles.value)
    scores = []
    if job.shared:
        for m in range(job.cfg.population):
            await FallingEdge(dut.clk)
            dut.rb_addr.value = m
            await RisingEdge(dut.clk)
            await FallingEdge(dut.clk)
            scores.append(dut.rb_data.value.to_signed())
    return cycles, err, np.array(scores), beats


def _eparams() -> EvaluatorParams:
    p = _params()
    keys = ("lanes", "max_layers", "max_width", "rank", "mode", "digits", "group")
    return EvaluatorParams(**{k: p[k] for k in keys if k in p}).check()


def _field(layout, v: int, name: str) -> int:
    return (v >> layout[name].offset) & ((1 << layout[name].width) - 1)


def decode_beats(job: EvalJob, raw: list[int]) -> np.ndarray:
    """Logits (population, batch, classes) from raw ``logits`` payloads."""
    ep = _eparams()
    layout = out_logits_layout(ep)
    y_off = layout["y"].offset
    beats = []
    for v in raw:
        ys = []
        for g in range(ep.finalizers):
            b = (v >> (y_off + 8 * g)) & 0xFF
            ys.append(b - 256 if b >= 128 else b)
        mask = _field(layout, v, "mask")
        beats.append(
            {
                "first_pair": _field(layout, v, "first_pair"),
                "i": _field(layout, v, "i"),
                "s": _field(layout, v, "s"),
                "row": _field(layout, v, "row"),
                "y": ys,
                "mask": [(mask >> g) & 1 for g in range(ep.finalizers)],
            }
        )
    return job.logits_from_beats(beats, ep.lanes, ep.group_lanes)


async def setup(dut):
    start_clock(dut)
    for name in ("start", "ld_en", "inp__valid", "logits__ready"):
        getattr(dut, name).value = 0
    await reset(dut)


async def check(
    dut, job: EvalJob, label: str, err, scores, beats, board: Scoreboard, reference=None
):
    """Compare one job's results with golden's for ``reference`` (the job itself unless
    given: the testbench's self-test gives another). A shared-input score sums a
    member's terms over the batch, so a score that differs is located
    (:func:`locate_score_mismatch`) before the check fails."""
    assert err == 0, f"{label}: error flags {err:#x}"
    logits, exp_scores = (reference or job).expected()
    if job.shared:  # summed over the batch (spec 7.1): the member and both sums
        try:
            board.check(f"scores[member] ({label})", exp_scores, scores, "scores")
        except Mismatch as e:
            where = await locate_score_mismatch(dut, job, reference)
            raise AssertionError(f"{e}; located: {where}") from None
    else:
        last = job.cfg.n_layers - 1
        board.check(
            f"logits: layer {last} outputs [member, sample, output index] ({label})",
            logits,
            decode_beats(job, beats),
            "logits",
        )


async def locate_score_mismatch(dut, job: EvalJob, reference=None) -> str:
    """Where a shared-input score differs from golden's (for ``reference``, the job
    unless given): the job runs again one sample at a time (shared inputs, batch 1: each
    score is then that sample's term) until a member's term differs; that sample is then
    every member's own input (per-member inputs), whose last-layer logits give the output
    index. Returns the member, sample, layer, output index and both values found."""
    ref = reference or job
    last = job.cfg.n_layers - 1
    for b, idx in enumerate(np.asarray(job.batch_idx)):
        one = dataclasses.replace(job, batch_idx=job.batch_idx[b : b + 1])
        one_ref = dataclasses.replace(ref, batch_idx=ref.batch_idx[b : b + 1])
        _, err, got, _ = await run_job(dut, one, random.Random(0))
        exp = one_ref.expected()[1]
        bad = np.flatnonzero(got != exp)
        if err or not bad.size:
            continue
        m = int(bad[0])
        where = (
            f"member {m}, sample {b} (sample index {int(idx)}): its score term expected "
            f"{int(exp[m])}, got {int(got[m])}"
        )
        x = np.asarray(job.samples)[int(idx)]
        member_x = np.broadcast_to(x, (job.cfg.population, 1, x.size)).copy()
        pm = dataclasses.replace(one, member_x=member_x)
        _, err, _, beats = await run_job(dut, pm, random.Random(0))
        got_l = decode_beats(pm, beats)
        exp_l = dataclasses.replace(one_ref, member_x=member_x).expected()[0]
        diff = np.argwhere(got_l != exp_l)
        if err:
            return f"{where}; the per-member run of that sample set error flags {err:#x}"
        if not diff.size:
            return (
                f"{where}; with that sample as every member's own input their logits "
                "equal golden's: the shared layer-0 product or the score unit differs"
            )
        mine = diff[diff[:, 0] == m]
        mm, _, o = (mine if mine.size else diff)[0]
        return (
            f"{where}; with that sample as every member's own input, layer {last} "
            f"[member {mm}, output index {o}]: expected {int(exp_l[mm, 0, o])}, "
            f"got {int(got_l[mm, 0, o])}"
        )
    return "every sample's term alone equals golden's: the sum over the batch differs"


@cocotb.test()
async def score_mismatch_is_located(dut):
    """The testbench's own check (only with ``PENTEGG_TB_LOCATE`` set): a job checked
    against golden for another margin, then for another last-layer weight (each the
    first that changes a score), fails with the member and sample located: for the
    margin with the logits found equal, for the weight with the output index and both
    logits."""
    if not _tb("locate", 0):
        return
    p = _params()
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    board = Scoreboard("evaluator locate", dut._log)

    def changed(job, variants):
        """The first variant of the job under which golden's scores differ, or None."""
        scores = job.expected()[1]
        return next((v for v in variants if not np.array_equal(v.expected()[1], scores)), None)

    def margins(job):  # scores sum min(margin, M): a smaller M lowers some, a larger may not
        for d in (d * s for d in range(1, 512) for s in (-1, 1)):
            yield dataclasses.replace(
                job, cfg=dataclasses.replace(job.cfg, margin=job.cfg.margin + d)
            )

    def last_weights(job):
        for o, k in np.ndindex(job.weights[-1].shape):
            w = [np.array(x) for x in job.weights]
            w[-1][o, k] = 2 if w[-1][o, k] != 2 else -2
            yield dataclasses.replace(job, weights=w)

    for _ in range(1000):  # shared inputs, two classes or more (one has constant scores)
        job = build_random_job(rng, p)
        if not job.shared or job.cfg.layers[-1] < 2:
            continue
        cases = (
            (changed(job, margins(job)), "logits equal"),
            (changed(job, last_weights(job)), f"layer {job.cfg.n_layers - 1} ["),
        )
        if all(ref is not None for ref, _ in cases):
            break
    else:
        raise AssertionError(f"no job of 1000 drawn for {p} has scores a change can move")
    await setup(dut)
    _, err, scores, beats = await run_job(dut, job, random.Random(0))
    await check(dut, job, "the job itself", err, scores, beats, board)
    for ref, want in cases:
        try:
            await check(dut, job, "locate", err, scores, beats, board, reference=ref)
        except AssertionError as e:
            text = str(e)
            assert "located: member" in text and want in text, text
            dut._log.info(f"located: {text.split('located: ')[1]}")
        else:
            raise AssertionError("a job checked against other scores passed")
    board.report()


def build_random_job(rng, p: dict) -> EvalJob:
    """A random job within the build's elaboration maxima ``p`` (``PENTEGG_TB_MAX_BATCH``
    samples at most)."""
    return random_job(
        rng,
        max_layers=p["max_layers"],
        max_width=p["max_width"],
        rank=p["rank"],
        digits=p["digits"],
        lanes=p["lanes"],
        max_batch=_tb("max_batch", 4),
        mode=p.get("mode", "lowrank"),
    )


@cocotb.test()
async def random_jobs(dut):
    """Random run-time configurations, shared and per-member inputs."""
    p = _params()
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    prng = random.Random(cocotb.RANDOM_SEED)
    board = Scoreboard(f"evaluator {p}", dut._log)
    await setup(dut)
    for n in range(_tb("jobs", 4)):
        job = build_random_job(rng, p)
        label = (
            f"job {n}: {job.cfg.mode}, layers {job.cfg.layers}, population "
            f"{job.cfg.population}, batch {job.batch}, "
            f"{'shared' if job.shared else 'per-member'}, seed {job.cfg.seed}, step {job.step}"
        )
        cycles, err, scores, beats = await run_job(dut, job, prng)
        dut._log.info(f"{label}: {cycles} cycles")
        await check(dut, job, label, err, scores, beats, board)
    board.report()


def next_step_job(job: EvalJob, rng) -> EvalJob:
    """The job of the next ES step of ``job``'s network: the same configuration and
    batch size, new weights (as an update leaves them) and new inputs."""
    w = init_state(dataclasses.replace(job.cfg, seed=int(rng.integers(1 << 32)))).weights
    if job.shared:
        ns = len(job.samples)
        return dataclasses.replace(
            job,
            weights=w,
            step=job.step + 1,
            samples=rng.integers(-127, 128, job.samples.shape),
            batch_idx=rng.integers(0, ns, job.batch),
        )
    x = rng.integers(-127, 128, job.member_x.shape)
    return dataclasses.replace(job, weights=w, step=job.step + 1, member_x=x)


@cocotb.test()
async def runs_of_steps(dut):
    """Runs of ``PENTEGG_TB_STEPS`` consecutive ES steps of random networks (only with
    ``PENTEGG_TB_STEPS`` set; two noise buffers): every evaluation but the last makes
    the next one's first-round noise ahead (``pre``), every one but the first starts
    with ``keep``; each run also ends with a ``keep`` start at a step not made ahead.
    Every evaluation equals golden, and each starts the noise fills its rounds need,
    less round 0's when it was made ahead, plus the next step's when ``pre`` (counted
    at the sequencer's ``fill_start``). The cycles an evaluation made ahead saves are
    checked in the Amaranth tests, on networks whose first pass waits for the fill: in
    small ones here it waits for the shared sample's bytes (one every ``lat + 4``
    cycles or more) anyway. It reads the sequencer's inner ``fill_start``: Icarus, or a
    Verilator build with ``internals``."""
    steps = _tb("steps", 0)
    if not steps:
        return
    p = _params()
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    prng = random.Random(cocotb.RANDOM_SEED)
    board = Scoreboard(f"evaluator runs of steps {p}", dut._log)
    await setup(dut)
    fills: list[int] = []
    cocotb.start_soon(count_fills(dut, fills))
    for n in range(_tb("jobs", 2)):
        job = build_random_job(rng, p)
        # the run's last evaluation is at step + steps + 3, at most MAX_STEP
        job = dataclasses.replace(job, step=min(job.step, MAX_STEP - steps - 3))
        run = [job]
        for _ in range(steps - 1):
            run.append(next_step_job(run[-1], rng))
        far = next_step_job(run[-1], rng)
        run.append(dataclasses.replace(far, step=far.step + 3))
        rounds = -(-job.cfg.pairs // p["lanes"])  # the sequencer's: ceil(pairs / lanes)
        for t, step_job in enumerate(run):
            inputs = {"keep": int(t > 0)}
            if t < steps - 1:
                inputs.update(pre=1, pre_step=run[t + 1].step)
            label = (
                f"run {n}, evaluation {t}: {step_job.cfg.mode}, layers {step_job.cfg.layers}, "
                f"population {step_job.cfg.population}, batch {step_job.batch}, "
                f"{'shared' if step_job.shared else 'per-member'}, step {step_job.step}, "
                f"{inputs}"
            )
            fills.clear()
            c, err, scores, beats = await run_job(dut, step_job, prng, inputs)
            dut._log.info(f"{label}: {c} cycles, {len(fills)} fills")
            await check(dut, step_job, label, err, scores, beats, board)
            made_ahead = 0 < t < steps  # the last (a step not made ahead) makes its own
            want = rounds - made_ahead + int(t < steps - 1)
            assert len(fills) == want, f"{label}: {len(fills)} noise fills, expected {want}"
        # the last evaluation made ahead, again from cold (keep 0): it makes its noise
        fills.clear()
        c, err, scores, beats = await run_job(dut, run[steps - 1], prng, {})
        label = f"run {n}, evaluation {steps - 1} cold"
        await check(dut, run[steps - 1], label, err, scores, beats, board)
        assert len(fills) == rounds, f"{label}: {len(fills)} noise fills, expected {rounds}"
    board.report()


async def count_fills(dut, fills: list) -> None:
    """Append the cycle of every noise fill the sequencer starts (``fill_start``)."""
    n = 0
    while True:
        await RisingEdge(dut.clk)
        n += 1
        if dut.ev.seq.fill_start.value:
            fills.append(n)


@cocotb.test()
async def digits_network(dut):
    """The digits default network: 64-64-10, population 256, rank 4, shared inputs."""
    batch = _tb("digits_network", 0)
    if not batch:
        return
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    cfg = Config(
        seed=int(rng.integers(1 << 32)), init="random", mode=_params().get("mode", "lowrank")
    ).validate()
    st = init_state(cfg)
    samples = rng.integers(0, 128, (batch, 64))
    job = EvalJob(
        cfg,
        st.weights,
        int(rng.integers(0, 65535)),
        samples=samples,
        labels=rng.integers(0, 10, batch),
        batch_idx=np.arange(batch),
    )
    board = Scoreboard("evaluator digits network", dut._log)
    await setup(dut)
    cycles, err, scores, beats = await run_job(dut, job, random.Random(0))
    dut._log.info(f"digits network, batch {batch}: {cycles} cycles")
    await check(dut, job, f"digits batch {batch}", err, scores, beats, board)
    board.report()


@cocotb.test()
async def benchmark(dut):
    """One evaluation described by ``PENTEGG_TB_BENCH`` (layers, population, batch,
    inputs, seed, ahead), checked against golden; cycles and activity counters go to the
    JSON file ``PENTEGG_TB_BENCH_OUT``. With ``ahead`` the evaluation measured is the
    second of two at consecutive ES steps (new weights and inputs, as after an update):
    the first makes the second's first-round noise ahead (``pre``), the second starts
    with ``keep``; both are checked, and the first's cycles are reported too."""
    spec = _tb("bench", None)
    if spec is None:
        return
    rng = np.random.default_rng(spec.get("seed", 0))
    ahead = bool(spec.get("ahead", False))
    cfg = Config(
        layers=tuple(spec["layers"]),
        population=spec["population"],
        rank=_params()["rank"],
        mode=_params().get("mode", "lowrank"),
        digits=_params()["digits"],
        seed=int(rng.integers(1 << 32)),
        init="random",
    ).validate()
    batch = spec["batch"]
    n0 = cfg.layers[0]
    step = int(rng.integers(0, 65535))

    def make_job(weights, step):
        if spec["inputs"] == "shared":
            return EvalJob(
                cfg,
                weights,
                step,
                samples=rng.integers(0, 128, (batch, n0)),
                labels=rng.integers(0, cfg.layers[-1], batch),
                batch_idx=np.arange(batch),
            )
        x = rng.integers(-127, 128, (cfg.population, batch, n0))
        return EvalJob(cfg, weights, step, member_x=x)

    if not ahead:
        runs = [(make_job(init_state(cfg).weights, step), {})]
    else:  # the measured evaluation at step max(step, 1), the one before at the step before
        step = max(step, 1)
        runs = [(make_job(init_state(cfg).weights, step - 1), {"pre": 1, "pre_step": step})]
        other = dataclasses.replace(cfg, seed=int(rng.integers(1 << 32)))
        runs.append((make_job(init_state(other).weights, step), {"keep": 1}))
    os.environ["PENTEGG_TB_READY"] = "1.0"
    await setup(dut)
    board = Scoreboard("evaluator benchmark", dut._log)
    first = None
    for n, (job, inputs) in enumerate(runs):
        cycles, err, scores, beats = await run_job(dut, job, random.Random(0), inputs)
        await check(dut, job, f"benchmark, evaluation {n}", err, scores, beats, board)
        first = cycles if first is None else first
    raw = int(dut.counters.value)
    counters = {
        name: (raw >> (32 * j)) & 0xFFFFFFFF for j, name in enumerate(ACTIVITY_LAYOUT.members)
    }
    out = {"cycles": cycles, "first_cycles": first, "counters": counters, "bit_exact": True}
    with open(_tb("bench_out", "bench.json"), "w") as f:
        json.dump(out, f)
