"""cocotb tests of the whole Accelerator: ES steps through its command stream, every step
bit-exact with ``pentegg.golden`` (run by tests/test_cocotb_accelerator.py).

After every step the weight memory (spec 1.4 words), the latent memory and the members'
scores are read back and compared with golden's state after the same step (a mismatch
names the step, the layer, the [row, input] index and both values), and ``theta``.
Tests (each run alone, by harness.run's ``testcase``):

* ``xor``: 2-8-2, population 64, all four patterns per step, ``PENTEGG_TB_STEPS`` steps,
  then the same steps again in one back-to-back ``RUN train`` (final state compared);
* ``digits``: 64-16-10, population 32, batch 16, 5 steps on random int8 samples, with
  ``PENTEGG_TB_SHAPING``;
* ``cartpole``: the host-scored path: 4-16-2, population 16, per-member inputs written
  to the ``member_x`` memory, ``RUN eval``, logits read from the ``logits`` memory, the
  host's scores written to the score memory, ``RUN update``;
* ``random_jobs``: ``PENTEGG_TB_JOBS`` random run-time configurations within the build
  (widths 1..max incl. 1 and odd, population, batch, tau, latent_shift, init, shaping);
* ``benchmark``: one step per batch size of ``PENTEGG_TB_BENCH``, cycle counters to
  ``PENTEGG_TB_BENCH_OUT`` (``pentegg bench accelerator``).
"""

from __future__ import annotations

import json
import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from pentegg import accel_protocol as ap
from pentegg.golden import Config, init_state
from pentegg.golden.model import es_step
from pentegg.rtl.update.apply import latent_shift_max
from pentegg.sim.accelerator_host import AcceleratorJob, golden_steps, load_words
from pentegg.sim.harness import tb_params, tb_value
from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import reset, start_clock, wait_low

_tb, _params = tb_value, tb_params  # the harness's env and parameters


class Host:
    """The command stream of one Accelerator under cocotb."""

    def __init__(self, dut):
        self.dut = dut
        self.ml = _params().get("max_layers", 2)

    async def send(self, words, n_rsp: int = 0) -> list[int]:
        dut, got = self.dut, []
        for w in words:
            await FallingEdge(dut.clk)
            dut.cmd__valid.value = 1
            dut.cmd__payload.value = int(w) & 0xFFFF_FFFF
            while True:
                await RisingEdge(dut.clk)
                if dut.rsp__valid.value:
                    got.append(int(dut.rsp__payload.value))
                if dut.cmd__ready.value:
                    break
        await FallingEdge(dut.clk)
        dut.cmd__valid.value = 0
        waited = 0
        while len(got) < n_rsp:
            await RisingEdge(dut.clk)
            if dut.rsp__valid.value:
                got.append(int(dut.rsp__payload.value))
            waited += 1
            assert waited < 100_000, "no response from the accelerator"
        return got

    async def reg(self, name: str) -> int:
        return (await self.send(ap.reg_read(name, self.ml), 1))[0]

    async def run(self, kind: str, limit: int = 50_000_000) -> None:
        await self.send(ap.run(kind))
        await ClockCycles(self.dut.clk, 4)
        await wait_low(self.dut, self.dut.busy, limit, lambda: f"(RUN {kind})")
        err = await self.reg("error")
        assert err == 0, f"RUN {kind}: error flags {ap.decode_error(err)}"

    async def read(self, mem: str, n: int, signed=False) -> list[int]:
        vals = await self.send(ap.mem_read(mem, 0, n), n)
        return [ap.to_signed(v, 32) for v in vals] if signed else vals


async def setup(dut):
    start_clock(dut)
    dut.cmd__valid.value = 0
    dut.rsp__ready.value = 1
    dut.reset.value = 0  # the RESET/power-on input (the domain's rst resets too)
    await reset(dut)


async def check_state(host: Host, cfg: Config, state, board: Scoreboard, label: str):
    """The device's weights and latent state equal ``state``'s, layer by layer: a
    mismatch names the layer, the [row, input] index and both values (then the packed
    words, which also hold the padding bits)."""
    words = ap.weight_words(state.weights)
    got = await host.read("weights", len(words))
    shapes = [w.shape for w in state.weights]
    try:
        dev = ap.weights_from_words(got, shapes)
    except ValueError:  # a word no digits pack to: the words' check below names it
        dev = None
    for l, w in enumerate(state.weights if dev is not None else []):
        board.check(f"{label}: layer {l} weights [row, input]", w, dev[l])
    board.check(f"{label}: weight words", words, got)
    if cfg.update == "latent":
        lat = await host.read("latent", sum(v.size for v in state.latent), signed=True)
        dev_v = ap.latent_from_words(lat, shapes)
        for l, (v, d) in enumerate(zip(state.latent, dev_v, strict=True)):
            board.check(f"{label}: layer {l} latent [row, input]", v, d)


async def train_job(dut, host: Host, job: AcceleratorJob, label: str, *, chain: bool) -> int:
    """Steps one by one (state, scores and theta after each), then optionally all steps
    again in one back-to-back run. Returns the cycles of the steps."""
    cfg = job.cfg
    board = Scoreboard(label)
    ref = golden_steps(job)
    await host.send(load_words(job, host.ml, steps=len(job.batches)))
    await host.run("init")
    await check_state(host, cfg, ref[0][0], board, f"{label} init")
    cycles = 0
    for t, (state, info) in enumerate(ref[1:]):
        await host.send(ap.mem_write("batch", 0, job.batches[t]))
        await host.send(ap.reg_write("steps", 1, host.ml))
        await host.run("train")
        cycles += await host.reg("cycles")
        sc = await host.read("scores", cfg.population, signed=True)
        board.check(f"{label} step {t}: scores", info.scores, sc)
        theta = await host.reg("theta")
        assert theta == info.theta, f"{label} step {t}: theta {theta}, golden {info.theta}"
        await check_state(host, cfg, state, board, f"{label} step {t}")
    if chain:
        n = len(job.batches)
        await host.send(ap.reg_write("step", job.step0, host.ml))
        await host.send(ap.reg_write("steps", n, host.ml))
        await host.send(ap.mem_write("batch", 0, np.concatenate(job.batches)))
        await host.run("init")
        await host.run("train")
        assert await host.reg("step") == job.step0 + n
        await check_state(host, cfg, ref[-1][0], board, f"{label} {n} steps in one run")
    return cycles


def _config(**kw) -> Config:
    p = _params()
    return Config(
        rank=p.get("rank", 4),
        mode=p.get("mode", "lowrank"),
        digits=p.get("digits", "binomial"),
        update=p.get("update", "latent"),
        latent_bits=p.get("latent_bits", 8),
        **kw,
    ).validate()


@cocotb.test()
async def xor(dut):
    await setup(dut)
    host = Host(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    cfg = _config(layers=(2, 8, 2), population=64, seed=int(rng.integers(1 << 32)))
    x = np.array([[-127, -127], [-127, 127], [127, -127], [127, 127]])
    y = np.array([0, 1, 1, 0])
    steps = _tb("steps", 20)
    job = AcceleratorJob(cfg, x, y, [np.arange(4)] * steps)
    cycles = await train_job(dut, host, job, f"xor {cfg.update}", chain=True)
    dut._log.info(f"xor: {steps} steps in {cycles} cycles")


@cocotb.test()
async def digits(dut):
    await setup(dut)
    host = Host(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    cfg = _config(
        layers=(64, 16, 10),
        population=32,
        shaping=_tb("shaping", "rank"),
        seed=int(rng.integers(1 << 32)),
    )
    x = rng.integers(-127, 128, size=(40, 64))
    y = rng.integers(0, 10, size=40)
    batches = [rng.integers(0, 40, size=16) for _ in range(5)]
    job = AcceleratorJob(cfg, x, y, batches, step0=int(rng.integers(0, 60000)))
    cycles = await train_job(
        dut, host, job, f"digits-shaped {cfg.update} {cfg.shaping}", chain=False
    )
    dut._log.info(f"digits-shaped: 5 steps in {cycles} cycles")


@cocotb.test()
async def cartpole(dut):
    """Host-scored: per-member observations in, logits out, the host's scores back, all
    through the command stream's memories."""
    await setup(dut)
    host = Host(dut)
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    cfg = _config(
        layers=(4, 16, 2),
        population=16,
        seed=int(rng.integers(1 << 32)),
        latent_shift=1,
        sigma_shift=0,
        init="random",
    )
    board = Scoreboard("cartpole host-scored")
    state = init_state(cfg)
    await host.send(ap.config_words(cfg, host.ml, step=0, steps=1, batch=1, shared=False))
    await host.run("init")
    for t in range(3):
        obs = rng.integers(-127, 128, size=(cfg.population, 1, 4))
        await host.send(ap.mem_write("member_x", 0, ap.member_words(obs)))
        await host.run("eval")
        n_y = cfg.population * 1 * cfg.layers[-1]
        words = await host.send(ap.mem_read("logits", 0, n_y), n_y)
        logits = ap.logits_from_words(words, cfg.population, 1, cfg.layers[-1])
        # the host's "return": how often the member pushes the way the observation leans
        lean = np.sign(obs[:, 0, 2])
        scores = ((logits[:, 0, 1] > logits[:, 0, 0]) == (lean > 0)).astype(int) * 100 + t
        want_logits = []

        def evaluate(fwd, obs=obs, want=want_logits, scores=scores):
            want.append(fwd(obs))
            return scores

        state, info = es_step(state, evaluate)
        board.check(f"step {t}: logits", want_logits[0].ravel(), logits.ravel())
        await host.send(ap.mem_write("scores", 0, scores))
        await host.run("update")
        theta = await host.reg("theta")
        assert theta == info.theta, f"step {t}: theta {theta}, golden {info.theta}"
        assert await host.reg("step") == t + 1
        await check_state(host, cfg, state, board, f"step {t}")


@cocotb.test()
async def random_jobs(dut):
    await setup(dut)
    host = Host(dut)
    p = _params()
    rng = random.Random(cocotb.RANDOM_SEED)
    nrng = np.random.default_rng(cocotb.RANDOM_SEED)
    lb = p.get("latent_bits", 8)
    for i in range(_tb("jobs", 3)):
        nl = rng.randint(1, p["max_layers"])
        layers = tuple(
            rng.choice([1, rng.randint(1, p["max_width"]), p["max_width"]]) for _ in range(nl + 1)
        )
        layers = (*layers[:-1], max(2, layers[-1]) if rng.random() < 0.7 else layers[-1])
        layers = tuple(min(w, p["max_width"]) for w in layers)
        pop = 2 * rng.randint(1, p["max_population"] // 2)
        update = p.get("update", "latent")
        cfg = _config(
            layers=layers,
            population=pop,
            seed=rng.randrange(1 << 32),
            shaping=rng.choice(["rank", "sign"]),
            tau=rng.choice([0, 8, 16, 40, 4095] if update == "latent" else [0, 28, 96]),
            latent_shift=rng.randint(0, latent_shift_max(lb)),
            sigma_shift=rng.randint(0, 3),
            init=rng.choice(["zero", "random"]),
            margin=rng.randint(1, 254),
        )
        batch = rng.randint(1, p["max_batch"])
        samples = rng.randint(1, 12)
        x = nrng.integers(-127, 128, size=(samples, layers[0]))
        x[nrng.random(x.shape) < 0.2] = 127
        y = nrng.integers(0, layers[-1], size=samples)
        batches = [nrng.integers(0, samples, size=batch) for _ in range(2)]
        job = AcceleratorJob(cfg, x, y, batches, step0=rng.randrange(65533))
        label = (
            f"random job {i}: {cfg.mode}, layers {layers} pop {pop} batch {batch} "
            f"{cfg.shaping} tau {cfg.tau} q {cfg.latent_shift} init {cfg.init}"
        )
        dut._log.info(label)
        await train_job(dut, host, job, label, chain=False)


@cocotb.test()
async def benchmark(dut):
    """One ES step per batch size of ``PENTEGG_TB_BENCH`` (layers, population, batches,
    seed) from a random initial state, checked against golden (scores, theta, the new
    weights); the cycle counters of each step go to ``PENTEGG_TB_BENCH_OUT`` (JSON)."""
    await setup(dut)
    host = Host(dut)
    spec = _tb("bench", {})
    rng = np.random.default_rng(spec.get("seed", 0))
    cfg = _config(
        layers=tuple(spec["layers"]),
        population=spec["population"],
        seed=int(rng.integers(1 << 32)),
        init="random",
    )
    samples = max(spec["batches"])
    x = rng.integers(-127, 128, size=(samples, cfg.layers[0]))
    y = rng.integers(0, cfg.layers[-1], size=samples)
    out = []
    for batch in spec["batches"]:
        idx = rng.permutation(samples)[:batch]
        job = AcceleratorJob(cfg, x, y, [idx], step0=int(rng.integers(0, 65000)))
        ref = golden_steps(job)
        board = Scoreboard(f"bench batch {batch}")
        await host.send(load_words(job, host.ml, steps=1))
        await host.run("init")
        await host.run("train", limit=1_000_000_000)
        rec = {"batch": batch}
        for name in ("cycles", "eval_cycles", "shape_cycles", "update_cycles"):
            rec[name] = await host.reg(name)
        sc = await host.read("scores", cfg.population, signed=True)
        board.check(f"batch {batch}: scores", ref[1][1].scores, sc)
        assert await host.reg("theta") == ref[1][1].theta
        await check_state(host, cfg, ref[1][0], board, f"batch {batch}")
        rec["bit_exact"] = True
        out.append(rec)
        dut._log.info(f"bench: {rec}")
    with open(_tb("bench_out", None), "w") as f:
        json.dump(out, f)
