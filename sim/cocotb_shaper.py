"""cocotb tests of Shaper (run by tests/test_cocotb_shaper.py through the harness).

A coroutine models the score memory with the design's read latency (``s_data`` is the
score at ``s_addr``, ``mem_latency`` cycles after a cycle with ``s_en``); every g-memory
write is recorded. Each random run (population, shaping, tau, scores) is compared with
``golden.fitness.shape`` and ``golden.update.threshold``. Test environment (optional):
``PENTEGG_TB_CASES`` number of random runs (default 12).
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from pentegg.golden import Config, fitness, update
from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import reset, start_clock

SHAPINGS = ("rank", "sign")


def _tb(name: str, default):
    v = os.environ.get(f"PENTEGG_TB_{name.upper()}")
    return json.loads(v) if v is not None else default


def random_scores(rng: random.Random, n: int, bits: int) -> list[int]:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    style = rng.choice(["wide", "ties", "extreme", "equal"])
    if style == "wide":
        return [rng.randint(lo, hi) for _ in range(n)]
    if style == "ties":
        return [rng.randint(-2, 2) for _ in range(n)]
    if style == "extreme":
        return [rng.choice([lo, hi, 0]) for _ in range(n)]
    return [rng.randint(lo, hi)] * n


class ScoreMemory:
    """The score memory's read port, ``latency`` cycles from address to data."""

    def __init__(self, dut, latency: int, rng: random.Random):
        self.dut, self.latency, self.rng = dut, latency, rng
        self.scores: list[int] = []

    async def run(self):
        dut = self.dut
        pipe = [0] * self.latency
        while True:
            await ReadOnly()  # the read request of this cycle, settled
            addr, en = int(dut.s_addr.value), int(dut.s_en.value)
            await RisingEdge(dut.clk)
            sc = self.scores
            word = sc[addr] if en and addr < len(sc) else self.rng.randint(-128, 127)
            pipe = [word, *pipe[:-1]]
            dut.s_data.value = pipe[-1]


@cocotb.test()
async def random_runs_match_golden(dut):
    """Random populations (2..max, N = 2 and N = max included), both shapings, tau
    0/16/4095/random, tied and extreme scores: every g write, sum_g2 and theta."""
    p = json.loads(os.environ["PENTEGG_PARAMS"])
    nmax, bits, lat = p["max_population"], p["score_bits"], p["mem_latency"]
    rng = random.Random(cocotb.RANDOM_SEED)
    start_clock(dut)
    dut.start.value = 0
    dut.s_data.value = 0
    mem = ScoreMemory(dut, lat, rng)
    cocotb.start_soon(mem.run())
    await reset(dut)
    board = Scoreboard(f"shaper {p}", dut._log)
    cases = _tb("cases", 12)
    sizes = [2, nmax] + [2 * rng.randint(1, nmax // 2) for _ in range(cases - 2)]
    for i, n in enumerate(sizes):
        kind = rng.choice(SHAPINGS)
        tau = rng.choice([0, 16, 4095, rng.randint(0, 4095)])
        scores = random_scores(rng, n, bits)
        mem.scores = scores
        dut.population.value = n
        dut.shaping.value = SHAPINGS.index(kind)
        dut.tau.value = tau
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        writes = []
        for _ in range(4 * n * n + 200):
            await ReadOnly()
            if int(dut.done.value):
                break
            if int(dut.g_en.value):
                writes.append((int(dut.g_addr.value), dut.g_data.value.to_signed()))
            await RisingEdge(dut.clk)
        else:
            raise AssertionError(f"run {i} (N={n}, {kind}): no done")
        g = fitness.shape(np.asarray(scores, dtype=np.int64), kind)
        theta = update.threshold(Config(population=n, shaping=kind, tau=tau), g)
        what = f"run {i} (N={n}, {kind}, tau={tau})"
        assert not int(dut.error.value), f"{what}: error set"
        board.check(f"{what} g addresses", list(range(n // 2)), [a for a, _ in writes], "addr")
        board.check(f"{what} g", g, [d for _, d in writes], "g")
        board.check(f"{what} sum_g2", [int(np.dot(g, g))], [int(dut.sum_g2.value)], "sum_g2")
        board.check(f"{what} theta", [theta], [int(dut.theta.value)], "theta")
        await RisingEdge(dut.clk)
    board.report()
