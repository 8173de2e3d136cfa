"""Isqrt (spec 0.4) under cocotb, against golden's ``isqrt`` (run by
tests/test_cocotb_shaper.py through the harness).

The input range is the one the Shaper gives it: ``0..sum_g2_bound(max_population)``
(``PENTEGG_PARAMS``: ``width``, ``top``). Every input below 2^12, and above it, at every
square of a root from every power of two and from random roots: ``k^2 - 1``, ``k^2``,
``k^2 + 1``, up to the top of the range and the top itself. ``start`` stays high, so
the roots come back to back, one every ``k + 1`` cycles (``k`` the root's bits): each
``done`` must come exactly then, with the root of the input given at its ``start``.
Test environment (optional): ``PENTEGG_TB_RANDOM_ROOTS`` (default 200).
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from pentegg.golden.arith import isqrt
from pentegg.sim.harness import tb_value
from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import reset, start_clock

__all__ = ["inputs"]


def inputs(top: int, rng: random.Random, random_roots: int) -> list[int]:
    """Every n below 2^12 (at most top), and k^2 - 1, k^2, k^2 + 1 for k at every power
    of two (and one below it), random k, and the largest root, up to ``top``; ``top``."""
    r = isqrt(top)
    ks = {r, r - 1}
    for b in range(r.bit_length() + 1):
        ks |= {1 << b, (1 << b) - 1}
    ks |= {rng.randint(1, r) for _ in range(random_roots)} if r >= 1 else set()
    ns = set(range(min(top, 4095) + 1)) | {top}
    for k in ks:
        ns |= {k * k - 1, k * k, k * k + 1}
    return sorted(n for n in ns if 0 <= n <= top)


@cocotb.test()
async def roots_equal_golden_back_to_back(dut):
    p = json.loads(os.environ["PENTEGG_PARAMS"])
    rng = random.Random(cocotb.RANDOM_SEED)
    ns = inputs(p["top"], rng, tb_value("random_roots", 200))
    k = (p["width"] + 1) // 2
    start_clock(dut)
    dut.start.value = 0
    dut.n.value = 0
    await reset(dut)
    await FallingEdge(dut.clk)
    got = []
    for i, n in enumerate(ns):
        dut.n.value = n
        dut.start.value = 1
        await RisingEdge(dut.clk)  # the start cycle
        if i == 0:
            dut.start.value = 0  # the first start alone; the rest with start held high
        cycles = 1  # from the start cycle to done
        await ReadOnly()
        while not int(dut.done.value):
            assert cycles <= k, f"input {n}: no done within {k + 1} cycles of its start"
            await RisingEdge(dut.clk)
            cycles += 1
            await ReadOnly()
        assert cycles == k + 1, f"input {n}: done {cycles} cycles after its start, not {k + 1}"
        got.append(int(dut.root.value))
        await FallingEdge(dut.clk)
    board = Scoreboard(f"isqrt width {p['width']} over 0..{p['top']}", dut._log)
    board.check(
        f"roots of {len(ns)} inputs (index into the sorted inputs)",
        [isqrt(n) for n in ns],
        got,
        "roots",
    )
    board.report()
