"""cocotb self-tests of the harness (tests/test_sim_harness.py runs them): the stream
driver and sink through a FIFO loopback, a deliberate failure, and ``wait_low`` with the
inner signals a build shows."""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge
from cocotb.utils import get_sim_time

from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import CLOCK_NS, StreamSink, StreamSource, reset, start_clock, wait_low


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


@cocotb.test()
async def wait_low_and_inner_signals(dut):
    """``wait_low`` on the FIFO's output ``valid``: it gives up, naming the wait, after
    its limit while nothing drains the FIFO, and ends on the first falling clock edge
    after ``valid`` falls once the FIFO drains. The FIFO's inner ``level`` is visible to
    the test exactly when ``PENTEGG_TB_INNER`` says it should be (only run with it)."""
    inner = os.environ.get("PENTEGG_TB_INNER")
    if inner is None:
        return
    start_clock(dut)
    dut.i__valid.value = 0
    dut.o__ready.value = 0
    await reset(dut)
    for v in (1, 2, 3):
        await FallingEdge(dut.clk)
        dut.i__valid.value, dut.i__payload.value = 1, v
    await FallingEdge(dut.clk)
    dut.i__valid.value = 0
    t0 = get_sim_time("ns")
    try:
        await wait_low(dut, dut.o__valid, 50, lambda: "(the self-test's FIFO)")
    except AssertionError as e:
        assert str(e) == "still busy after 50 cycles (the self-test's FIFO)", str(e)
    else:
        raise AssertionError("wait_low returned while o.valid was high")
    assert get_sim_time("ns") - t0 == 50 * CLOCK_NS
    dut.o__ready.value = 1  # three beats leave at the next three rising edges
    await wait_low(dut, dut.o__valid, 10)
    assert get_sim_time("ns") - t0 == 50 * CLOCK_NS + 3 * CLOCK_NS, get_sim_time("ns") - t0
    assert not dut.o__valid.value and dut.clk.value == 0
    await wait_low(dut, dut.o__valid, 10)  # already low: to the next falling edge
    assert get_sim_time("ns") - t0 == 50 * CLOCK_NS + 4 * CLOCK_NS
    await RisingEdge(dut.clk)
    try:
        level = int(dut.fifo.level.value)
    except AttributeError:
        level = None
    assert (level is not None) == json.loads(inner), f"inner signal visible: {level is not None}"
