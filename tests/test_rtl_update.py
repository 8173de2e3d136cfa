# amaranth: UnusedElaboratable=no
"""The update (spec 8) in the Amaranth simulator, against golden.

* VoteAccumulator: ``Z`` of random small layers (out 1..12, fan 1..13 incl. 1 and odd,
  ranks 1/4/16, both digit distributions, both modes, populations 2..16, ``g`` with the
  extremes ``+-2(N-1)`` and zeros, lanes 1..4 incl. fan not a multiple of lanes) equals
  golden's ``accumulate_z`` on golden's ``make_noise``; its cycle count equals
  ``vote_cycles``.
* WeightUpdater: the W words and V equal golden's ``moves`` + ``apply_latent`` /
  ``apply_pentary`` + ``pack``, with saturation at ``+-Vmax`` and ``+-2``, ``theta = 0``,
  ``|Z| = theta`` (strict) and ``Z = 0``; words around the matrix are untouched.
* Both chained on one layer of a golden ES step.
* Parameter and run-time range errors.
"""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.golden import Config
from pentegg.golden.digit import pack
from pentegg.golden.update import apply_latent, apply_pentary, moves, threshold
from pentegg.rtl.update.apply import WeightUpdater, latent_shift_max
from pentegg.rtl.update.votes import VoteAccumulator, vote_cycles
from pentegg.sim import harness
from pentegg.sim.cocotb_update import JOB_INPUTS, golden_z, job_config, random_job
from pentegg.sim.cocotb_weight_update import golden_update, random_update_case
from pentegg.sim.collisions import CollisionMonitor
from pentegg.sim.scoreboard import Scoreboard

MAX_WIDTH, MAX_POP = 12, 16
Z_BITS = 22  # the WeightUpdater tests' Z entries


def _sim(dut, *benches, processes=()):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for p in processes:
        sim.add_process(p)
    for b in benches:
        sim.add_testbench(b)
    sim.run()


async def run_votes(ctx, dut, job) -> tuple[np.ndarray, int]:
    """One job on ``dut`` (the ``g`` memory is the process of :func:`g_memory`): Z read
    back through the read port, and the cycles from the ``start`` cycle to the ``done``
    cycle."""
    for k in JOB_INPUTS:
        ctx.set(getattr(dut, k), job[k])
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)
    cycles = 1
    while not ctx.get(dut.done):
        await ctx.tick()
        cycles += 1
    await ctx.tick()  # busy falls: the read port is ours
    out, fan, lanes = job["out"], job["fan"], dut.lanes
    nkb = -(-fan // lanes)
    got = np.zeros((out, fan), dtype=np.int64)
    for o in range(out):
        for kb in range(nkb):
            ctx.set(dut.z_addr, o * nkb + kb)
            await ctx.tick().repeat(4)  # read latency 4
            word = ctx.get(dut.z_data)
            for i in range(lanes):
                if kb * lanes + i < fan:
                    got[o, kb * lanes + i] = word[i]
    return got, cycles


def g_memory(dut, holder):
    """A g memory with one cycle of read latency; ``holder["g"]`` is the current job's."""

    async def process(ctx):
        async for _, _, a in ctx.tick().sample(dut.g_addr):
            g = holder["g"]
            ctx.set(dut.g_data, int(g[a]) if a < len(g) else 0)

    return process


VOTE_SETS = [
    # (lanes, rank, mode, digits, jobs)
    (1, 4, "lowrank", "binomial", 6),
    (2, 1, "lowrank", "uniform", 6),
    (3, 4, "quantized", "binomial", 6),
    (4, 16, "lowrank", "binomial", 4),
    (2, 16, "quantized", "uniform", 4),
    (4, 1, "quantized", "binomial", 6),
    (1, 1, "lowrank", "binomial", 6),
    (4, 4, "lowrank", "uniform", 6),
    # max_width + 1 lanes: a whole row of the widest layer per Z word (above 64 lanes
    # when max_width is 64 or more)
    (MAX_WIDTH + 1, 4, "lowrank", "binomial", 4),
]


@pytest.mark.parametrize(
    "lanes, rank, mode, digits, jobs",
    VOTE_SETS,
    ids=[f"lanes{s[0]}-rank{s[1]}-{s[2]}-{s[3]}" for s in VOTE_SETS],
)
def test_votes_equal_golden(lanes, rank, mode, digits, jobs):
    rng = random.Random(harness.pick_seed(f"votes lanes {lanes} rank {rank} {mode} {digits}"))
    dut = VoteAccumulator(
        lanes=lanes,
        rank=rank,
        mode=mode,
        digits=digits,
        max_width=MAX_WIDTH,
        max_population=MAX_POP,
    )
    assert [dut.z_bits] == job_config(
        {"layer": 0, "out": MAX_WIDTH, "fan": MAX_WIDTH + 1, "population": MAX_POP, "seed": 0,
         "sigma_shift": 1},
        rank, mode, digits,
    ).widths()["z"]  # fmt: skip
    # rank 16 takes 16 cycles per (o, kb): smaller layers keep the test fast
    width = MAX_WIDTH if rank < 16 else 6
    job_list = [random_job(rng, width, MAX_POP) for _ in range(jobs)]
    # the edges: fan 1 (a layer of width 0) and the widest layer with the largest population
    job_list[0] = {**job_list[0], "fan": 1}
    if rank < 16:
        gmax = 2 * (MAX_POP - 1)
        job_list[1] = {
            **job_list[1],
            "out": MAX_WIDTH,
            "fan": MAX_WIDTH + 1,
            "population": MAX_POP,
            "g": [gmax, -gmax, 0, gmax, gmax, gmax, -gmax, 0][: MAX_POP // 2],
        }
    board = Scoreboard(f"votes lanes={lanes} rank={rank} {mode} {digits}")
    holder = {"g": []}

    async def bench(ctx):
        for n, job in enumerate(job_list):
            holder["g"] = job["g"]
            got, cycles = await run_votes(ctx, dut, job)
            what = {k: job[k] for k in JOB_INPUTS}
            board.check(f"job {n} Z {what}", golden_z(job, rank, mode, digits), got, "Z")
            want = vote_cycles(
                pairs=job["population"] // 2,
                out=job["out"],
                fan=job["fan"],
                lanes=lanes,
                rank=rank,
                digits=digits,
            )
            board.check(f"job {n} cycles {what}", [want], [cycles], "cycles")
            assert not ctx.get(dut.error)

    watch = CollisionMonitor(lambda: dut.rw_watch)
    _sim(dut, bench, processes=[g_memory(dut, holder), watch.process()])
    assert board.checked["cycles"] == jobs
    watch.check()


@pytest.mark.parametrize("rank, digits", [(16, "binomial"), (16, "uniform"), (64, "binomial")])
def test_vote_cycle_formula_long_fill(rank, digits):
    """Cycle formula where the B fill outlasts the keyer (rank / digits per word > 1)
    and at fans around the 15-cycle boundary; Z checked too."""
    dut = VoteAccumulator(lanes=4, rank=rank, digits=digits, max_width=20, max_population=4)
    jobs = [
        {"population": 4, "out": 1, "fan": f, "seed": 7, "step": 9, "layer": 1,
         "sigma_shift": 1, "g": [6, -3]}
        for f in (3, 8, 15, 16, 21)
    ]  # fmt: skip
    holder = {"g": []}
    board = Scoreboard(f"votes cycles rank {rank} {digits}")

    async def bench(ctx):
        for job in jobs:
            holder["g"] = job["g"]
            got, cycles = await run_votes(ctx, dut, job)
            board.check(f"Z fan {job['fan']}", golden_z(job, rank, "lowrank", digits), got)
            want = vote_cycles(pairs=2, out=1, fan=job["fan"], lanes=4, rank=rank, digits=digits)
            board.check(f"cycles fan {job['fan']}", [want], [cycles])

    _sim(dut, bench, processes=[g_memory(dut, holder)])


def test_vote_cycle_formula_keyer_boundary():
    """Rank 4 binomial at fans 14..17 (the B fill against the A request's 15 cycles): the
    simulation's cycles, which are these numbers (a slower RTL with its formula edited to
    match would otherwise pass)."""
    want = {14: 121, 15: 121, 16: 122, 17: 139}
    assert {f: vote_cycles(pairs=2, out=2, fan=f, lanes=4, rank=4) for f in want} == want
    dut = VoteAccumulator(lanes=4, rank=4, max_width=20, max_population=4)
    holder = {"g": [1, 1]}
    board = Scoreboard("votes cycles rank 4")

    async def bench(ctx):
        for f in (14, 15, 16, 17):
            job = {"population": 4, "out": 2, "fan": f, "seed": 1, "step": 2, "layer": 0,
                   "sigma_shift": 1, "g": [1, 1]}  # fmt: skip
            _, cycles = await run_votes(ctx, dut, job)
            want = vote_cycles(pairs=2, out=2, fan=f, lanes=4, rank=4)
            board.check(f"cycles fan {f}", [want], [cycles])

    _sim(dut, bench, processes=[g_memory(dut, holder)])


# ---------------------------------------------------------------- WeightUpdater


class Memories:
    """Z, weight and latent memories around a WeightUpdater: one cycle of read latency for
    the weights, two for the latent memory, four for Z (the vote accumulator's)."""

    def __init__(self, dut, z, w, v, w_base, v_base, fill=0x7FFF):
        self.dut = dut
        lanes = dut.lanes
        out, fan = z.shape
        nkb = -(-fan // lanes)
        self.z = [[0] * lanes for _ in range(dut.z_depth)]
        for o in range(out):
            for k in range(fan):
                self.z[o * nkb + k // lanes][k % lanes] = int(z[o, k])
        self.w = [fill] * (w_base + len(pack(w)) + 8)
        self.w[w_base : w_base + len(pack(w))] = [int(x) for x in pack(w)]
        self.v = [0] * (v_base + z.size + 8)
        if v is not None:
            self.v[v_base : v_base + z.size] = [int(x) for x in v.reshape(-1)]
        self.v_read = 0  # the latent word read at the last edge, out at the next
        self.z_read = [0, 0, 0]  # the Z addresses of the last three edges, oldest first

    def signals(self):
        d = self.dut
        sigs = [d.z_addr, d.w_waddr, d.w_wdata, d.w_wen]
        if d.update == "latent":
            return [*sigs, d.v_raddr, d.v_waddr, d.v_wdata, d.v_wen]
        return [*sigs, d.w_raddr]

    def cycle(self, ctx, vals):
        """The memories at a clock edge: ``vals`` are :meth:`signals` before it."""
        d = self.dut
        za, wwa, wwd, wwe, *rest = vals
        if wwe:
            self.w[wwa] = wwd
        if d.update == "latent":
            vr, vwa, vwd, vwe = rest
            if vwe:
                self.v[vwa] = vwd
            ctx.set(d.v_rdata, self.v_read)
            self.v_read = self.v[vr] if vr < len(self.v) else 0
        else:
            (wr,) = rest
            ctx.set(d.w_rdata, self.w[wr] if wr < len(self.w) else 0)
        zp = self.z_read[0]
        ctx.set(d.z_data, self.z[zp] if zp < len(self.z) else [0] * d.lanes)
        self.z_read = [*self.z_read[1:], za]

    async def process(self, ctx):
        async for vals in ctx.tick().sample(*self.signals()):
            self.cycle(ctx, vals[2:])


async def run_update(ctx, dut, out, fan, theta, q, w_base, v_base) -> int:
    ctx.set(dut.out, out)
    ctx.set(dut.fan, fan)
    ctx.set(dut.theta, theta)
    ctx.set(dut.w_base, w_base)
    if dut.update == "latent":
        ctx.set(dut.v_base, v_base)
        ctx.set(dut.latent_shift, q)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)
    cycles = 1
    while not ctx.get(dut.done):
        await ctx.tick()
        cycles += 1
    await ctx.tick()
    return cycles


@pytest.mark.parametrize(
    "update, latent_bits, lanes",
    [
        ("latent", 8, 1),
        ("latent", 3, 3),
        ("latent", 5, 4),
        ("pentary", 8, 2),
        ("pentary", 8, 1),
        # more lanes than one copy of the Z word's load flag serves (COPY_LANES)
        ("latent", 5, 10),
        ("pentary", 8, 9),
    ],
)
def test_updater_equals_golden(update, latent_bits, lanes):
    rng = random.Random(harness.pick_seed(f"updater {update} {latent_bits} {lanes}"))
    dut = WeightUpdater(
        update=update,
        latent_bits=latent_bits,
        lanes=lanes,
        max_width=MAX_WIDTH,
        z_bits=Z_BITS,
    )
    board = Scoreboard(f"updater {update} latent_bits={latent_bits} lanes={lanes}")
    cases = [random_update_case(rng, MAX_WIDTH, Z_BITS, latent_bits) for _ in range(6)]
    state = {}

    async def bench(ctx):
        for n, case in enumerate(cases):
            out, fan, theta, q, z, v, w = case
            ev, ew = golden_update(update, latent_bits, case)
            w_base, v_base = rng.randint(1, 9), rng.randint(0, 9)
            mem = Memories(dut, z, w, v if update == "latent" else None, w_base, v_base)
            state["mem"] = mem
            cycles = await run_update(ctx, dut, out, fan, theta, q, w_base, v_base)
            tag = f"case {n} (out {out}, fan {fan}, theta {theta}, q {q})"
            nw = len(pack(ew))
            board.check(f"{tag} W words", pack(ew), mem.w[w_base : w_base + nw], "W words")
            board.check(
                f"{tag} words around", [0x7FFF] * 2, [mem.w[w_base - 1], mem.w[w_base + nw]]
            )
            if ev is not None:
                board.check(f"{tag} V", ev.reshape(-1), mem.v[v_base : v_base + out * fan], "V")
            board.check(f"{tag} cycles", [out * fan + 8], [cycles], "cycles")
            assert not ctx.get(dut.error)

    async def memories(ctx):
        # the current case's memories (swapped between cases while the updater is idle)
        sigs = Memories(dut, np.zeros((1, 1), dtype=int), np.zeros(1), None, 0, 0).signals()
        async for vals in ctx.tick().sample(*sigs):
            if "mem" in state:
                state["mem"].cycle(ctx, vals[2:])

    _sim(dut, bench, processes=[memories])
    assert board.checked["cycles"] == len(cases)


# ---------------------------------------------------------------- both, one ES step


@pytest.mark.parametrize("update, mode", [("latent", "lowrank"), ("pentary", "quantized")])
def test_votes_then_update_one_layer_of_an_es_step(update, mode):
    """Z of layer 1 of a (5, 7, 3) network with g from rank shaping, then the update with
    golden's theta: W and V equal golden's step (the moves of es_step)."""
    rng = random.Random(harness.pick_seed(f"votes+update {update} {mode}"))
    from pentegg.golden.fitness import shape
    from pentegg.golden.model import init_state, make_noise
    from pentegg.golden.update import accumulate_z

    cfg = Config(
        layers=(5, 7, 3), population=12, mode=mode, update=update, seed=rng.randrange(1 << 32)
    )
    state0 = init_state(cfg)
    step, l = rng.randrange(65535), 1
    g = shape(np.array([rng.randint(-40, 40) for _ in range(cfg.population)]), cfg.shaping)
    noise = make_noise(cfg, step)
    z_ref = accumulate_z(cfg, noise, g, l)
    theta = threshold(cfg, g)
    mv = moves(z_ref, theta)
    if update == "latent":
        # a latent state that has moved before: random V
        vmax = cfg.latent_max()
        v0 = np.array([rng.randint(-vmax, vmax) for _ in range(z_ref.size)]).reshape(z_ref.shape)
        ev, ew = apply_latent(cfg, v0, mv)
    else:
        v0, ev = None, None
        ew = apply_pentary(state0.weights[l], mv)
    out, fan = cfg.shape(l)
    lanes = 2
    votes = VoteAccumulator(lanes=lanes, rank=cfg.rank, mode=mode, max_width=8, max_population=12)
    upd = WeightUpdater(update=update, lanes=lanes, max_width=8, z_bits=votes.z_bits)
    holder = {"g": g}
    job = {"population": 12, "out": out, "fan": fan, "seed": cfg.seed, "step": step,
           "layer": l, "sigma_shift": cfg.sigma_shift, "g": g}  # fmt: skip
    got = {}

    async def bench(ctx):
        got["z"], _ = await run_votes(ctx, votes, job)

    _sim(votes, bench, processes=[g_memory(votes, holder)])
    Scoreboard("votes+update").check("Z", z_ref, got["z"])
    mem = Memories(upd, got["z"], state0.weights[l], v0, 4, 0)

    async def bench2(ctx):
        await run_update(ctx, upd, out, fan, theta, cfg.latent_shift, 4, 0)

    _sim(upd, bench2, processes=[mem.process])
    board = Scoreboard("votes+update")
    board.check("W words", pack(ew), mem.w[4 : 4 + len(pack(ew))])
    if ev is not None:
        board.check("V", ev.reshape(-1), mem.v[: z_ref.size])


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lanes": 0}, "lanes=0 is not an integer in 1..65"),
        ({"lanes": 66}, "lanes=66 is not an integer in 1..65"),
        ({"lanes": 102, "max_width": 100}, "lanes=102 is not an integer in 1..101"),
        ({"lanes": 65, "max_width": 8}, "lanes=65 is not an integer in 1..64"),
        ({"rank": 3}, "rank=3 is not one of 1, 4, 16, 64"),
        ({"mode": "float"}, "mode='float' is not one of lowrank, quantized"),
        ({"digits": "gauss"}, "digits='gauss'"),
        ({"max_width": 0}, "max_width=0 is not an integer in 1..4096"),
        ({"max_population": 7}, "max_population=7 is not an even integer in 2..4096"),
        ({"max_population": 4098}, "max_population=4098"),
    ],
)
def test_votes_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        VoteAccumulator(**kwargs)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"update": "float"}, "update='float' is not one of latent, pentary"),
        ({"latent_bits": 2}, "latent_bits=2 is not an integer in 3..8"),
        ({"latent_bits": 9}, "latent_bits=9"),
        ({"lanes": 0}, "lanes=0"),
        ({"lanes": 66}, "lanes=66 is not an integer in 1..65"),
        ({"z_bits": 49}, "z_bits=49 is not an integer in 2..48"),
        ({"addr_bits": 0}, "addr_bits=0"),
    ],
)
def test_updater_parameter_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        WeightUpdater(**kwargs)


def test_latent_shift_max_is_golden_range():
    from pentegg.golden.config import ConfigError

    for bits in range(3, 9):
        q = latent_shift_max(bits)
        Config(latent_bits=bits, latent_shift=q).validate()
        with pytest.raises(ConfigError):
            Config(latent_bits=bits, latent_shift=q + 1).validate()


def test_votes_runtime_errors_then_a_good_run():
    """Each out-of-range run-time input: done with error, nothing computed; then a valid
    job clears the error and is right."""
    dut = VoteAccumulator(lanes=2, rank=4, mode="quantized", max_width=4, max_population=6)
    good = {"population": 4, "out": 2, "fan": 3, "seed": 5, "step": 6, "layer": 2,
            "sigma_shift": 8, "g": [10, -7]}  # fmt: skip
    bad = [
        {"population": 3},
        {"population": 0},
        {"population": 8},
        {"out": 0},
        {"out": 5},
        {"fan": 0},
        {"fan": 6},
        {"step": 65535},
        {"sigma_shift": 9},
    ]
    holder = {"g": good["g"]}

    async def bench(ctx):
        for b in bad:
            for k in JOB_INPUTS:
                ctx.set(getattr(dut, k), {**good, **b}[k])
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            n = 0
            while not ctx.get(dut.done):
                await ctx.tick()
                n += 1
            assert n <= 2, b
            assert ctx.get(dut.error), f"no error for {b}"
            await ctx.tick()
            assert not ctx.get(dut.busy)
        got, _ = await run_votes(ctx, dut, good)
        assert not ctx.get(dut.error)
        Scoreboard("votes after errors").check("Z", golden_z(good, 4, "quantized", "binomial"), got)

    _sim(dut, bench, processes=[g_memory(dut, holder)])


def test_updater_runtime_errors():
    dut = WeightUpdater(update="latent", latent_bits=4, lanes=1, max_width=4, z_bits=8)
    q_max = latent_shift_max(4)

    async def bench(ctx):
        for out, fan, q, bad in [(0, 2, 0, 1), (5, 2, 0, 1), (2, 0, 0, 1), (2, 6, 0, 1),
                                 (2, 2, q_max + 1, 1), (2, 2, q_max, 0)]:  # fmt: skip
            ctx.set(dut.out, out)
            ctx.set(dut.fan, fan)
            ctx.set(dut.latent_shift, q)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            wrote = 0
            while not ctx.get(dut.done):
                wrote += ctx.get(dut.w_wen) + ctx.get(dut.v_wen)
                await ctx.tick()
            assert ctx.get(dut.error) == bad, (out, fan, q)
            if bad:
                assert wrote == 0
            await ctx.tick()

    _sim(dut, bench)


@pytest.mark.parametrize("latent_bits", [3, 4, 8])
def test_updater_latent_every_v_move_and_shift(latent_bits):
    """Every V of latent_bits (-Vmax - 1, which only a host's write puts there, too) with
    every move, at every latent_shift: V and W equal golden's apply_latent (the PQUANT
    thresholds of each shift, saturation at +-Vmax)."""
    vmax = (1 << (latent_bits - 1)) - 1
    vs = np.tile(np.arange(-vmax - 1, vmax + 1), 3)
    mv = np.repeat([-1, 0, 1], 2 * vmax + 2)
    fan = 2 * vmax + 2
    out = 3
    theta = 5
    z = (mv * (theta + 1)).reshape(out, fan)
    v = vs.reshape(out, fan)
    dut = WeightUpdater(update="latent", latent_bits=latent_bits, lanes=2, max_width=fan, z_bits=8)
    board = Scoreboard(f"updater latent_bits={latent_bits} exhaustive")

    async def bench(ctx):
        for q in range(latent_shift_max(latent_bits) + 1):
            cfg = Config(layers=(fan - 1, out), latent_bits=latent_bits, latent_shift=q)
            ev, ew = apply_latent(cfg, v, moves(z, theta))
            state["mem"] = mem = Memories(dut, z, np.zeros_like(v), v, 2, 1)
            await run_update(ctx, dut, out, fan, theta, q, 2, 1)
            board.check(f"q={q} V", ev.reshape(-1), mem.v[1 : 1 + v.size], "V")
            board.check(f"q={q} W words", pack(ew), mem.w[2 : 2 + len(pack(ew))], "W words")

    state = {}

    async def memories(ctx):
        sigs = Memories(dut, np.zeros((1, 1), dtype=int), np.zeros(1), None, 0, 0).signals()
        async for vals in ctx.tick().sample(*sigs):
            if "mem" in state:
                state["mem"].cycle(ctx, vals[2:])

    _sim(dut, bench, processes=[memories])
    assert board.checked["V"] == v.size * (latent_shift_max(latent_bits) + 1)
