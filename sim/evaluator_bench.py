"""Drive a PopulationEvaluator with a golden configuration and collect what it computes.

The same job description serves the Amaranth-simulator tests (:func:`run_amaranth`) and
the cocotb testbenches (sim/cocotb_evaluator.py): :class:`EvalJob` holds a
:class:`~pentegg.golden.Config`, the weights, the ES step and the data, and knows the
memory images the evaluator reads (weights in the spec 1.4 format, samples, labels,
batch indices), the per-member input words, the expected results (``population_forward``
and spec 7.1 scores of ``pentegg.golden``) and how to turn the evaluator's outputs (the
score memory, logits beats) into arrays shaped like golden's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pentegg import accel_protocol
from pentegg.golden import Config, make_noise, population_forward
from pentegg.golden.fitness import classification_scores

__all__ = ["EvalJob", "random_job", "run_amaranth", "run_amaranth_jobs"]


@dataclass
class EvalJob:
    cfg: Config
    weights: list
    step: int
    #: shared: samples (n_samples, n0) and labels; the batch picks sample indices
    samples: np.ndarray | None = None
    labels: np.ndarray | None = None
    batch_idx: np.ndarray | None = None
    #: per-member inputs (population, batch, n0)
    member_x: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    @property
    def shared(self) -> bool:
        return self.member_x is None

    @property
    def batch(self) -> int:
        return len(self.batch_idx) if self.shared else self.member_x.shape[1]

    # ------------------------------------------------------------------ memory images
    def weight_words(self) -> list[int]:
        return accel_protocol.weight_words(self.weights)

    def sample_bytes(self) -> list[int]:
        return [int(v) & 0xFF for v in np.asarray(self.samples).reshape(-1)]

    def input_words(self, lanes: int) -> list[int]:
        """Per-member input words in the loader's order: (round, sample, sign, k); lane
        ``j``'s byte of a word is the input of member ``2 (first_pair + j) + sign``
        (zero for lanes past the population)."""
        cfg = self.cfg
        x = np.asarray(self.member_x)
        rounds = -(-cfg.pairs // lanes)
        words = []
        for rnd in range(rounds):
            for b in range(self.batch):
                for s in (0, 1):
                    for k in range(cfg.layers[0]):
                        word = 0
                        for j in range(lanes):
                            pair = rnd * lanes + j
                            if pair < cfg.pairs:
                                word |= (int(x[2 * pair + s, b, k]) & 0xFF) << (8 * j)
                        words.append(word)
        return words

    # -------------------------------------------------------------------- expectation
    def expected(self):
        cfg = self.cfg
        noise = make_noise(cfg, self.step)
        if self.shared:
            x = np.asarray(self.samples)[np.asarray(self.batch_idx)]
            y = np.asarray(self.labels)[np.asarray(self.batch_idx)]
            logits = population_forward(cfg, self.weights, noise, x)
            return logits, classification_scores(logits, y, cfg.margin)
        return population_forward(cfg, self.weights, noise, self.member_x), None

    # ---------------------------------------------------------------------- results
    def logits_from_beats(self, beats, lanes: int, group: int) -> np.ndarray:
        """Logits (population, batch, classes) from the ``logits`` beats, in the order
        they left (the sample of a beat is counted per round and member sign)."""
        cfg = self.cfg
        out = np.full((cfg.population, self.batch, cfg.layers[-1]), -999, dtype=np.int64)
        classes = cfg.layers[-1]
        seen: dict = {}
        for beat in beats:
            key = (beat["first_pair"], beat["i"], beat["s"])
            # rows come in order 0..classes-1 per (sample, member): count them
            n = seen.get(key, 0)
            seen[key] = n + 1
            b = n // classes
            if b >= self.batch:
                raise AssertionError(
                    f"more logit beats than batch x classes ({self.batch} x {classes}) for "
                    f"pairs from {beat['first_pair']}, lane {beat['i']}, sign {beat['s']}: "
                    "a pass ran twice?"
                )
            for g, y in enumerate(beat["y"]):
                if not beat["mask"][g]:
                    continue
                pair = beat["first_pair"] + g * group + beat["i"]
                out[2 * pair + beat["s"], b, beat["row"]] = y
        return out


def random_job(
    rng: np.random.Generator,
    *,
    max_layers: int,
    max_width: int,
    rank: int,
    digits: str,
    lanes: int,
    max_batch: int = 3,
    max_pop: int | None = None,
    shared: bool | None = None,
    max_samples: int = 64,
    mode: str = "lowrank",
) -> EvalJob:
    """A random job within a build's elaboration maxima: 1..max_layers layers of widths
    1..max_width (1 and the maximum favoured), a population that is usually not a
    multiple of 2 * lanes, random shifts, margin, seed, step, weights including +-2,
    a batch of 1..max_batch (1 and the maximum favoured), inputs including saturating
    ones (a sample of +-127 in every batch), shared or per-member inputs; ``mode`` is the
    build's perturbation mode (spec 6)."""
    nl = int(rng.integers(1, max_layers + 1))
    choices = [1, max_width, *rng.integers(1, max_width + 1, 4)]
    layers = tuple(int(rng.choice(choices)) for _ in range(nl + 1))
    max_pop = max_pop or 4 * lanes + 6
    pop = int(2 * rng.integers(1, max_pop // 2 + 1))
    cfg = Config(
        layers=layers,
        population=pop,
        rank=rank,
        mode=mode,
        digits=digits,
        sigma_shift=int(rng.integers(0, 9)),
        seed=int(rng.integers(1 << 32)),
        init="random",
        act_shifts=tuple(int(v) for v in rng.integers(0, 8, nl)),
        margin=int(rng.integers(1, 255)),
    ).validate()
    from pentegg.golden import init_state

    st = init_state(cfg)
    step = int(rng.integers(0, 65535))
    batch = int(rng.choice([1, max_batch, *rng.integers(1, max_batch + 1, 2)]))
    if shared is None:
        shared = bool(rng.integers(2))
    n0 = layers[0]
    if shared:
        ns = int(rng.integers(batch, max(batch, max_samples // n0) + 1))
        samples = rng.integers(-127, 128, (ns, n0))
        sat = int(rng.integers(ns))
        samples[sat] = rng.choice([-127, 127], n0)  # saturating inputs, in the batch
        batch_idx = rng.integers(0, ns, batch)
        batch_idx[rng.integers(batch)] = sat
        return EvalJob(
            cfg,
            st.weights,
            step,
            samples=samples,
            labels=rng.integers(0, layers[-1], ns),
            batch_idx=batch_idx,
        )
    x = rng.integers(-127, 128, (pop, batch, n0))
    x[rng.integers(pop), rng.integers(batch)] = rng.choice([-127, 127], n0)  # saturating
    return EvalJob(cfg, st.weights, step, member_x=x)


def evaluator_watches(dut):
    """The :class:`~pentegg.sim.collisions.CollisionMonitor` watches of a
    PopulationEvaluator (after elaboration)."""
    return lambda: [*dut.rw_watch, *dut.dbg["fin"].rw_watch]


def run_amaranth(
    job: EvalJob,
    dut,
    *,
    max_cycles: int = 2_000_000,
    collisions=None,
    logits_ready=None,
    prelude=None,
    inp_gap: int = 0,
    processes=(),
):
    """Run ``job`` on ``dut`` (a PopulationEvaluator) in the Amaranth simulator.

    Returns ``{"cycles", "scores" (population,), "logits" (population, batch, classes),
    "error"}``; memories are Python models with ``mem_latency`` cycles of read latency.
    ``collisions``: a :class:`~pentegg.sim.collisions.CollisionMonitor` to run alongside.
    ``logits_ready``: ``cycle -> bool``, the reader's ``logits.ready`` in each cycle
    (default: always ready); a beat counts in a cycle with valid and ready.
    ``prelude``: an async ``ctx -> None`` run before the job is set up and started (on
    the same design: what it leaves behind meets the job).
    ``inp_gap``: per-member inputs: cycles without a word offered after each one taken
    (a slow source, so that passes wait for their input slots).
    ``processes``: async ``ctx -> None`` processes (observers) run alongside.
    """
    return run_amaranth_jobs(
        [(job, {})],
        dut,
        max_cycles=max_cycles,
        collisions=collisions,
        logits_ready=logits_ready,
        prelude=prelude,
        inp_gap=inp_gap,
        processes=processes,
    )[0]


def run_amaranth_jobs(
    jobs,
    dut,
    *,
    max_cycles: int = 2_000_000,
    collisions=None,
    logits_ready=None,
    prelude=None,
    inp_gap: int = 0,
    processes=(),
) -> list[dict]:
    """Run ``jobs`` one after the other on one ``dut``, as :func:`run_amaranth` runs one:
    each a ``(job, inputs)`` pair, ``inputs`` the values of the evaluator's other inputs
    for that run (``keep``, ``pre``, ``pre_step``; 0 when not given). Each job's memories
    (weights, samples, labels, batch indices) are its own from its start; the score
    memory is one. Returns one result per job."""
    from amaranth.sim import Simulator

    p = dut.params
    lat = p.mem_latency
    scores: dict[int, int] = {}
    results: list[dict] = []
    cur: dict = {"words": [], "sbytes": [], "bidx": [], "labels": [], "inp": [], "beats": []}

    def memory(en, addr, data, key):
        async def proc(ctx):
            pipe = [None] * lat
            async for _, _, e, a in ctx.tick().sample(en, addr):
                pipe = [int(a) if e else None, *pipe[:-1]]
                if pipe[-1] is not None:
                    image = cur[key]
                    ctx.set(data, int(image[pipe[-1]]) if pipe[-1] < len(image) else 0)

        return proc

    async def score_mem(ctx):
        pipe = [None] * lat
        async for _, _, re, ra, we, wa, wd in ctx.tick().sample(
            dut.sc_ren, dut.sc_raddr, dut.sc_wen, dut.sc_waddr, dut.sc_wdata
        ):
            if we:
                v = int(wd)
                if v >= 1 << (p.score_bits - 1):
                    v -= 1 << p.score_bits
                scores[int(wa)] = v
            pipe = [int(ra) if re else None, *pipe[:-1]]
            if pipe[-1] is not None:
                ctx.set(dut.sc_rdata, scores.get(pipe[-1], 0) & ((1 << p.score_bits) - 1))

    async def feeder(ctx):
        while True:
            if not cur["inp"]:
                ctx.set(dut.inp.valid, 0)
                await ctx.tick()
                continue
            ctx.set(dut.inp.valid, 1)
            ctx.set(dut.inp.payload, cur["inp"].pop(0))
            await ctx.tick().until(dut.inp.ready)
            if inp_gap:
                ctx.set(dut.inp.valid, 0)
                await ctx.tick().repeat(inp_gap)

    async def bench(ctx):
        if prelude is not None:
            await prelude(ctx)
        for job, inputs in jobs:
            cfg = job.cfg
            cur.update(
                words=job.weight_words(),
                sbytes=job.sample_bytes() if job.shared else [],
                bidx=[int(v) for v in job.batch_idx] if job.shared else [],
                labels=[int(v) for v in job.labels] if job.shared else [],
                inp=[] if job.shared else list(job.input_words(p.lanes)),
                beats=[],
            )
            ctx.set(dut.n_layers, cfg.n_layers)
            for i, wdt in enumerate(cfg.layers):
                ctx.set(dut.widths[i], wdt)
            for i, s in enumerate(cfg.shifts()):
                ctx.set(dut.act_shifts[i], s)
            ctx.set(dut.sigma_shift, cfg.sigma_shift)
            ctx.set(dut.margin, cfg.margin)
            ctx.set(dut.population, cfg.population)
            ctx.set(dut.batch, job.batch)
            ctx.set(dut.seed, cfg.seed)
            ctx.set(dut.step, job.step)
            ctx.set(dut.shared, int(job.shared))
            for name in ("keep", "pre", "pre_step"):
                ctx.set(getattr(dut, name), int(inputs.get(name, 0)))
            ctx.set(dut.logits.ready, 1)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            cycles = 0
            beats = cur["beats"]
            while True:
                ready = 1 if logits_ready is None else int(bool(logits_ready(cycles)))
                ctx.set(dut.logits.ready, ready)
                _, _, busy, lv, lp = await ctx.tick().sample(
                    dut.busy, dut.logits.valid, dut.logits.payload
                )
                cycles += 1
                if lv and ready:
                    beats.append(
                        {
                            "first_pair": int(lp.first_pair),
                            "i": int(lp.i),
                            "s": int(lp.s),
                            "row": int(lp.row),
                            "y": [
                                int(lp.y[g]) - (256 if int(lp.y[g]) >= 128 else 0)
                                for g in range(p.finalizers)
                            ],
                            "mask": [(int(lp.mask) >> g) & 1 for g in range(p.finalizers)],
                        }
                    )
                if not busy:
                    break
                if cycles > max_cycles:
                    raise TimeoutError(f"evaluator still busy after {max_cycles} cycles")
            res = {"cycles": cycles, "error": ctx.get(dut.error)}
            res["scores"] = np.array([scores.get(mm, 0) for mm in range(cfg.population)])
            if not job.shared:
                res["logits"] = job.logits_from_beats(beats, p.lanes, p.group_lanes)
            res["beats"] = beats
            results.append(res)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    if collisions is not None:
        sim.add_process(collisions.process())
    for proc in processes:
        sim.add_process(proc)
    sim.add_process(memory(dut.w_en, dut.w_addr, dut.w_data, "words"))
    sim.add_process(memory(dut.b_en, dut.b_addr, dut.b_data, "bidx"))
    sim.add_process(memory(dut.s_en, dut.s_addr, dut.s_data, "sbytes"))
    sim.add_process(memory(dut.l_en, dut.l_addr, dut.l_data, "labels"))
    sim.add_process(score_mem)
    sim.add_testbench(feeder, background=True)
    sim.add_testbench(bench)
    sim.run()
    return results
