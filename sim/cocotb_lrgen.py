"""cocotb tests of LowRankGenerator (run by tests/test_rtl_lrgen.py through the harness).

Each job's A, B, E and dot products are compared with ``golden.lrgen`` / ``golden.lrmul``,
with random back-pressure on every output stream. Test environment (optional):
``PENTEGG_TB_CASES`` number of random (step, pair, layer, shape, sigma) cases,
``PENTEGG_TB_READY`` probability that a sink is ready in a cycle,
``PENTEGG_TB_SLACK`` cycles a job may take beyond the limit for its shape (for blocks
that generate their noise first, CompactLowRankGenerator).
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, RisingEdge

from pentegg.rtl.noise.lrgen import dot_width
from pentegg.sim.scoreboard import Scoreboard, lrgen_expected
from pentegg.sim.stream import StreamSink, decode_digits, reset, start_clock

QUANTIZED, LOWRANK = 0, 1
INPUTS = ("seed", "step", "pair", "layer", "out", "fan", "sigma_shift")


def _tb(name: str, default):
    v = os.environ.get(f"PENTEGG_TB_{name.upper()}")
    return json.loads(v) if v is not None else default


def _params():
    return json.loads(os.environ["PENTEGG_PARAMS"])


def random_case(rng: random.Random, p) -> dict[str, int]:
    return {
        "seed": rng.randrange(1 << 32),
        "step": rng.randrange(1 << 16),
        "pair": rng.randrange(1 << 11),
        "layer": rng.randrange(8),
        "out": rng.randrange(1, p["max_out"] + 1),
        "fan": rng.randrange(1, p["max_fan"] + 1),
        "sigma_shift": rng.randrange(9),
    }


def edge_cases(p) -> list[dict[str, int]]:
    """Smallest and largest shapes, and shapes around multiples of the word."""
    base = {"seed": 0, "step": 3, "pair": 5, "layer": 1, "sigma_shift": 1}
    shapes = {(1, 1), (p["max_out"], p["max_fan"]), (1, p["max_fan"]), (p["max_out"], 1)}
    for n in (2, 3, 7, 9):
        if n <= min(p["max_out"], p["max_fan"]):
            shapes.add((n, min(n + 1, p["max_fan"])))
    return [{**base, "out": o, "fan": f} for o, f in sorted(shapes)]


class Job:
    """Drives one job and collects all three output streams."""

    def __init__(self, dut, p, ready):
        self.dut = dut
        self.p = p
        self.sinks = {n: StreamSink(dut, n, ready_probability=ready) for n in ("e", "a", "b")}

    def arm(self, case, mode) -> None:
        """Drive the job's inputs and start the sinks (empty) before ``start``."""
        for k, v in case.items():
            getattr(self.dut, k).value = v
        self.dut.mode.value = mode
        for s in self.sinks.values():
            s.beats.clear()
            s.start()

    async def run(self, case, mode) -> dict[str, list[int]]:
        dut = self.dut
        self.arm(case, mode)
        await FallingEdge(dut.clk)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        limit = 200 + 200 * case["fan"] * (case["out"] + 1)
        if self.p.get("keyer") == "serial":  # two stream starts of up to 1666 cycles
            limit += 2 * 1700
        limit += _tb("slack", 0)
        cycles = 0
        await RisingEdge(dut.clk)
        while dut.busy.value:
            await RisingEdge(dut.clk)
            cycles += 1
            assert cycles < limit, f"job did not finish in {limit} cycles: {case}"
        for _ in range(4):  # nothing may follow the end of a job
            await RisingEdge(dut.clk)
        for s in self.sinks.values():
            s.stop()
        return {n: list(s.beats) for n, s in self.sinks.items()}


async def setup(dut):
    start_clock(dut)
    for name in (*INPUTS, "start", "mode", "e__ready", "a__ready", "b__ready"):
        getattr(dut, name).value = 0
    await reset(dut)


async def check_cases(dut, cases, label):
    p = _params()
    r = p["rank"]
    dw = dot_width(r)
    board = Scoreboard(f"lrgen rank={r} {label}", dut._log)
    job = Job(dut, p, _tb("ready", 0.7))
    await setup(dut)
    for n, case in enumerate(cases):
        a, b, e, dot = lrgen_expected(case, p["rank"], p["digits"])
        tag = f"case {n} {case}"
        got = await job.run(case, QUANTIZED)
        assert not got["a"] and not got["b"], f"{tag}: a/b beats in quantized mode"
        payload = np.array(got["e"], dtype=object)
        e_got = np.array([decode_digits(int(v), 1)[0] for v in payload], dtype=np.int64)
        dot_raw = np.array([int(v) >> 3 for v in payload], dtype=np.int64)
        dot_got = np.where(dot_raw >= 1 << (dw - 1), dot_raw - (1 << dw), dot_raw)
        board.check(f"E[i, k] ({tag})", e, e_got, "E elements")
        board.check(f"(A.B^T)[i, k] ({tag})", dot, dot_got, "dot products")
        got = await job.run(case, LOWRANK)
        assert not got["e"], f"{tag}: e beats in low-rank mode"
        a_got = [decode_digits(v, r) for v in got["a"]]
        b_got = [decode_digits(v, r) for v in got["b"]]
        board.check(f"rows of A ({tag})", a, np.array(a_got).reshape(-1, r), "A digits")
        board.check(f"rows of B ({tag})", b, np.array(b_got).reshape(-1, r), "B digits")
    board.report()


@cocotb.test()
async def random_jobs(dut):
    """Random keys, shapes and sigma_shift, both modes, random back-pressure."""
    p = _params()
    rng = random.Random(cocotb.RANDOM_SEED)
    cases = [random_case(rng, p) for _ in range(_tb("cases", 8))]
    await check_cases(dut, cases, "random")


@cocotb.test()
async def edge_shapes(dut):
    """1 x 1, the largest shape, single rows and columns, odd sizes."""
    p = _params()
    await check_cases(dut, edge_cases(p), "edges")


@cocotb.test()
async def start_while_busy_is_ignored(dut):
    """A second start during a job neither restarts nor corrupts it."""
    p = _params()
    case = {
        "seed": 1,
        "step": 2,
        "pair": 3,
        "layer": 4,
        "out": min(3, p["max_out"]),
        "fan": min(5, p["max_fan"]),
        "sigma_shift": 0,
    }
    _, _, e, _ = lrgen_expected(case, p["rank"], p["digits"])
    await setup(dut)
    job = Job(dut, p, 1.0)
    job.arm(case, QUANTIZED)
    dut.start.value = 1
    await RisingEdge(dut.clk)
    for _ in range(40):  # keep start high well into the job
        await RisingEdge(dut.clk)
    dut.start.value = 0
    while dut.busy.value:
        await RisingEdge(dut.clk)
    for s in job.sinks.values():
        s.stop()
    got = [decode_digits(v, 1)[0] for v in job.sinks["e"].beats]
    Scoreboard("lrgen start while busy").check("E", e.reshape(-1), got)
