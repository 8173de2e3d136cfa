"""The update (spec 8) against golden: reference values of VoteAccumulator jobs, and the
cocotb tests of VoteAccumulator (run by tests/test_cocotb_update.py through the harness).

A job is one layer of one ES step: ``population, out, fan, seed, step, layer,
sigma_shift`` and the shaped fitness ``g`` (one value per pair). Its reference is golden's
``accumulate_z`` on golden's ``make_noise`` for a configuration with that layer shape.
Test environment (optional): ``PENTEGG_TB_CASES`` number of random jobs (default 10).

"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge

from pentegg.golden import Config
from pentegg.golden.model import make_noise
from pentegg.golden.update import accumulate_z
from pentegg.rtl.update.votes import vote_cycles
from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import reset, start_clock

__all__ = ["golden_z", "random_job"]

JOB_INPUTS = ("population", "out", "fan", "seed", "step", "layer", "sigma_shift")


def job_config(job: dict, rank: int, mode: str, digits: str) -> Config:
    """A golden configuration whose layer ``job["layer"]`` has shape ``(out, fan)``
    (the other layers have width 1). ``fan = 1`` gives a layer of width 0: golden computes
    it (``Config`` is not validated here), though a validated configuration has
    ``fan >= 2``."""
    widths = [1] * (job["layer"] + 2)
    widths[job["layer"]] = job["fan"] - 1
    widths[job["layer"] + 1] = job["out"]
    return Config(
        layers=tuple(widths),
        population=job["population"],
        rank=rank,
        mode=mode,
        digits=digits,
        seed=job["seed"],
        sigma_shift=job["sigma_shift"],
    )


def golden_z(job: dict, rank: int, mode: str, digits: str) -> np.ndarray:
    """Golden ``Z`` (out, fan) of a job."""
    cfg = job_config(job, rank, mode, digits)
    noise = make_noise(cfg, job["step"])
    return accumulate_z(cfg, noise, np.asarray(job["g"], dtype=np.int64), job["layer"])


def random_job(
    rng: random.Random, max_width: int, max_population: int, *, max_layer: int = 3
) -> dict:
    """A random job: shapes at the edges (1, max) or random, ``g`` with the extremes
    ``+-2(N-1)`` and zeros."""
    n = rng.choice([2, max_population, 2 * rng.randint(1, max_population // 2)])
    gmax = 2 * (n - 1)
    return {
        "population": n,
        "out": rng.choice([1, max_width, rng.randint(1, max_width)]),
        "fan": rng.choice([1, 2, max_width + 1, rng.randrange(1, max_width + 2, 2)]),
        "seed": rng.randrange(1 << 32),
        "step": rng.choice([0, 65534, rng.randrange(65535)]),
        "layer": rng.randint(0, max_layer),
        "sigma_shift": rng.randint(0, 8),
        "g": [rng.choice([gmax, -gmax, 0, rng.randint(-gmax, gmax)]) for _ in range(n // 2)],
    }


def _tb(name: str, default):
    v = os.environ.get(f"PENTEGG_TB_{name.upper()}")
    return json.loads(v) if v is not None else default


async def _run_job(dut, job: dict, limit: int, lanes: int) -> tuple[np.ndarray, int]:
    """Drive one job (g memory with a one-cycle read latency), read Z back; fail after
    ``limit`` cycles without ``done``."""
    for k in JOB_INPUTS:
        getattr(dut, k).value = job[k]
    g = job["g"]
    await FallingEdge(dut.clk)
    dut.start.value = 1
    await FallingEdge(dut.clk)
    dut.start.value = 0
    cycles = 1
    while not int(dut.done.value):
        # g memory: the word at the address of the previous cycle
        a = int(dut.g_addr.value)
        await RisingEdge(dut.clk)
        dut.g_data.value = g[a] if a < len(g) else 0
        await FallingEdge(dut.clk)
        cycles += 1
        assert cycles <= limit, f"no done after {limit} cycles: {job}"
    out, fan = job["out"], job["fan"]
    nkb = -(-fan // lanes)
    zb = _z_bits(dut, lanes)
    got = np.zeros((out, fan), dtype=np.int64)
    await FallingEdge(dut.clk)  # busy falls
    for o in range(out):
        for kb in range(nkb):
            dut.z_addr.value = o * nkb + kb
            for _ in range(4):  # read latency 4
                await RisingEdge(dut.clk)
            await FallingEdge(dut.clk)
            word = int(dut.z_data.value)
            for i in range(lanes):
                k = kb * lanes + i
                if k < fan:
                    v = (word >> (i * zb)) & ((1 << zb) - 1)
                    got[o, k] = v - (1 << zb) if v >> (zb - 1) else v
    return got, cycles


def _z_bits(dut, lanes: int) -> int:
    return len(dut.z_data) // lanes


@cocotb.test()
async def random_jobs(dut):
    """Random jobs (at least 10) back to back, each Z compared with golden."""
    p = json.loads(os.environ["PENTEGG_PARAMS"])
    rng = random.Random(cocotb.RANDOM_SEED)
    lanes, rank, mode, digits = p["lanes"], p["rank"], p["mode"], p["digits"]
    start_clock(dut)
    dut.start.value = 0
    dut.z_addr.value = 0
    await reset(dut)
    board = Scoreboard(f"votes {p}", dut._log)
    for n in range(max(10, _tb("cases", 10))):
        job = random_job(rng, p["max_width"], p["max_population"])
        want = vote_cycles(
            pairs=job["population"] // 2,
            out=job["out"],
            fan=job["fan"],
            lanes=lanes,
            rank=rank,
            digits=digits,
        )
        got, cycles = await _run_job(dut, job, 2 * want + 100, lanes)
        exp = golden_z(job, rank, mode, digits)
        what = {k: job[k] for k in JOB_INPUTS}
        board.check(f"job {n} Z {what}", exp, got, "Z entries")
        board.check(f"job {n} cycles", [want], [cycles], "cycle counts")
        assert not int(dut.error.value), f"job {n}: error flag set"
    board.report()
