"""cocotb self-tests of the harness (tests/test_sim_harness.py runs them): the stream
driver and sink through a FIFO loopback, and a deliberate failure."""

from __future__ import annotations

import json
import os
import random

import cocotb

from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import StreamSink, StreamSource, reset, start_clock


@cocotb.test()
async def loopback_with_stalls(dut):
    """Random gaps on the input and back-pressure on the output: every beat arrives once,
    in order."""
    rng = random.Random(cocotb.RANDOM_SEED)
    start_clock(dut)
    src = StreamSource(dut, "i", valid_probability=0.5)
    sink = StreamSink(dut, "o", ready_probability=0.4)
    await reset(dut)
    width = json.loads(os.environ["PENTEGG_PARAMS"])["width"]
    data = [rng.randrange(1 << width) for _ in range(2000)]
    if json.loads(os.environ.get("PENTEGG_TB_BREAK", "false")):
        data_expected = list(data)
        data_expected[1234] ^= 1  # the harness must report this, with its index
    else:
        data_expected = data
    sender = cocotb.start_soon(src.send(data))
    got = await sink.take(len(data), timeout_cycles=50 * len(data))
    await sender
    board = Scoreboard("loopback", dut._log)
    board.check("beats", data_expected, got)
    board.report()
