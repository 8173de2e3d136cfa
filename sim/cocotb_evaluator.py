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

import json
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from pentegg.golden import Config, init_state
from pentegg.rtl.evaluator.evaluator import out_logits_layout
from pentegg.rtl.evaluator.params import EvaluatorParams
from pentegg.rtl.evaluator.pass_engine import ACTIVITY_LAYOUT
from pentegg.sim.evaluator_bench import EvalJob, random_job
from pentegg.sim.evaluator_system import LOAD_TARGETS
from pentegg.sim.harness import tb_params, tb_value
from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import reset, start_clock

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
    """Where a run stands, for a failure message."""
    ev = dut.ev
    probes = {
        "sequencer phase": ("seq", "phase"),
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
    out = []
    for name, (sub, sig) in probes.items():
        try:
            out.append(f"{name} {getattr(getattr(ev, sub), sig).value}")
        except AttributeError:
            out.append(f"{name} ?")
    return ", ".join(out)


async def run_job(dut, job: EvalJob, rng: random.Random):
    """Load, run and collect one job; returns (cycles, scores, logits or None)."""
    p = _params()
    lanes = p["lanes"]
    await load(dut, "weights", job.weight_words())
    if job.shared:
        await load(dut, "samples", job.sample_bytes())
        await load(dut, "labels", job.labels)
        await load(dut, "batch", job.batch_idx)
    set_run_inputs(dut, job)
    await FallingEdge(dut.clk)
    dut.start.value = 1
    await FallingEdge(dut.clk)
    dut.start.value = 0
    beats = []
    limit = _tb("max_cycles", 5_000_000)
    waited = 0
    if job.shared:
        while True:
            await ClockCycles(dut.clk, 64)
            waited += 64
            if not dut.busy.value:
                break
            assert waited < limit, f"still busy after {waited} cycles: {state(dut)}"
    else:
        words = job.input_words(lanes)
        wi = 0
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


def check(dut, job: EvalJob, label: str, err, scores, beats, board: Scoreboard):
    assert err == 0, f"{label}: error flags {err:#x}"
    logits, exp_scores = job.expected()
    if job.shared:
        board.check(f"scores[member] ({label})", exp_scores, scores, "scores")
    else:
        board.check(
            f"logits[member, sample, class] ({label})", logits, decode_beats(job, beats), "logits"
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
        job = random_job(
            rng,
            max_layers=p["max_layers"],
            max_width=p["max_width"],
            rank=p["rank"],
            digits=p["digits"],
            lanes=p["lanes"],
            max_batch=_tb("max_batch", 4),
            mode=p.get("mode", "lowrank"),
        )
        label = (
            f"job {n}: {job.cfg.mode}, layers {job.cfg.layers}, population "
            f"{job.cfg.population}, batch {job.batch}, "
            f"{'shared' if job.shared else 'per-member'}, seed {job.cfg.seed}, step {job.step}"
        )
        cycles, err, scores, beats = await run_job(dut, job, prng)
        dut._log.info(f"{label}: {cycles} cycles")
        check(dut, job, label, err, scores, beats, board)
    board.report()


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
    check(dut, job, f"digits batch {batch}", err, scores, beats, board)
    board.report()


@cocotb.test()
async def benchmark(dut):
    """One evaluation described by ``PENTEGG_TB_BENCH`` (layers, population, batch,
    inputs, seed), checked against golden; cycles and activity counters go to the JSON
    file ``PENTEGG_TB_BENCH_OUT``."""
    spec = _tb("bench", None)
    if spec is None:
        return
    rng = np.random.default_rng(spec.get("seed", 0))
    cfg = Config(
        layers=tuple(spec["layers"]),
        population=spec["population"],
        rank=_params()["rank"],
        mode=_params().get("mode", "lowrank"),
        digits=_params()["digits"],
        seed=int(rng.integers(1 << 32)),
        init="random",
    ).validate()
    st = init_state(cfg)
    batch = spec["batch"]
    n0 = cfg.layers[0]
    step = int(rng.integers(0, 65535))
    if spec["inputs"] == "shared":
        job = EvalJob(
            cfg,
            st.weights,
            step,
            samples=rng.integers(0, 128, (batch, n0)),
            labels=rng.integers(0, cfg.layers[-1], batch),
            batch_idx=np.arange(batch),
        )
    else:
        job = EvalJob(
            cfg, st.weights, step, member_x=rng.integers(-127, 128, (cfg.population, batch, n0))
        )
    os.environ["PENTEGG_TB_READY"] = "1.0"
    await setup(dut)
    cycles, err, scores, beats = await run_job(dut, job, random.Random(0))
    raw = int(dut.counters.value)
    counters = {
        name: (raw >> (32 * j)) & 0xFFFFFFFF for j, name in enumerate(ACTIVITY_LAYOUT.members)
    }
    board = Scoreboard("evaluator benchmark", dut._log)
    check(dut, job, "benchmark", err, scores, beats, board)
    out = {"cycles": cycles, "counters": counters, "bit_exact": True}
    with open(_tb("bench_out", "bench.json"), "w") as f:
        json.dump(out, f)
