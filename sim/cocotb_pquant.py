"""cocotb tests of PentaryQuantizer (run by tests/test_rtl_pquant.py through the harness).

The quantizer is combinational: every input (and every shift, when it is a run-time
input) is applied, and all outputs are compared with ``golden.pquant`` at once.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import Timer

from pentegg.golden import pquant
from pentegg.sim.scoreboard import Scoreboard


@cocotb.test()
async def exhaustive(dut):
    """Every input value (and every run-time shift) against golden."""
    p = json.loads(os.environ["PENTEGG_PARAMS"])
    width, offset = p["width"], p.get("shift_offset", 0)
    xs = np.arange(-(1 << (width - 1)), 1 << (width - 1))
    if p.get("shift") is not None:
        shifts = [None]
    else:
        top = p.get("max_shift")
        shifts = range((30 - offset if top is None else top) + 1)
    board = Scoreboard(f"pquant width={width}", dut._log)
    for s in shifts:
        if s is not None:
            dut.shift.value = s
        f = offset + (p["shift"] if s is None else s)
        got = np.empty(xs.size, dtype=np.int64)
        for i, x in enumerate(xs.tolist()):
            dut.x.value = x
            await Timer(1, unit="ns")
            got[i] = dut.q.value.to_signed()
        board.check(f"q for f={f} (index = x + {1 << (width - 1)})", pquant(xs, f), got, "values")
    board.report()
