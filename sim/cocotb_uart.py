"""cocotb tests of the UART PHY inside the boards' link (run by tests/test_rtl_uart.py).

The design is :class:`pentegg.boards.common.BoardLink` around the stand-in
:class:`~pentegg.boards.common.LoopbackCore`: cocotbext-uart's ``UartSource`` drives the
line ``rx`` (UartRx), the core echoes each byte, and ``UartSink`` decodes ``tx`` (UartTx).

``PENTEGG_PARAMS``: ``divisor`` (clocks per bit), ``period_ps`` (clock period), ``baud``.
cocotbext-uart times bits as ``int(1e9 / baud)`` ns, so bauds are ones where that is exact
or nearly (333 ns at 3 Mbaud, 0.1% fast: the receiver must cope with it anyway).
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, Timer
from cocotbext.uart import UartSink, UartSource


def _params():
    return json.loads(os.environ["PENTEGG_PARAMS"])


async def setup(dut):
    p = _params()
    cocotb.start_soon(Clock(dut.clk, p["period_ps"], unit="ps").start())
    dut.rx.value = 1
    dut.reset.value = 0  # the board's power-on reset input (synchronous)
    dut.rst.value = 1
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 4)
    baud = p["baud"]
    return UartSource(dut.rx, baud=baud, bits=8, stop_bits=1), UartSink(
        dut.tx, baud=baud, bits=8, stop_bits=1
    )


async def echo(sink, count: int, baud: int) -> bytes:
    got = bytearray()
    for _ in range(count * 2):
        if len(got) >= count:
            break
        await sink.wait(timeout=int(1e9 / baud * 12 * (count + 2)), timeout_unit="ns")
        got += sink.read_nowait()
    return bytes(got)


@cocotb.test()
async def loopback_random_bytes(dut):
    """Random bytes back to back at the board's rate come back unchanged; no errors."""
    p = _params()
    rng = random.Random(cocotb.RANDOM_SEED)
    source, sink = await setup(dut)
    data = bytes(rng.randrange(256) for _ in range(96))
    await source.write(data)
    got = await echo(sink, len(data), p["baud"])
    assert got == data, f"sent {data.hex()}, got {got.hex()}"
    assert int(dut.framing_errors.value) == 0
    assert int(dut.overrun.value) == 0
    assert int(dut.error.value) == 0


@cocotb.test()
async def framing_error(dut):
    """A character whose stop bit is low: counted, not echoed, error set; the link then
    carries bytes again; a one-cycle pulse on ``reset`` (the board's power-on reset,
    the domain having no reset on a board) clears the count and the error."""
    p = _params()
    bit_ns = int(1e9 / p["baud"])
    source, sink = await setup(dut)
    for b in [0] + [(0xA7 >> i) & 1 for i in range(8)] + [0]:  # stop bit low
        dut.rx.value = b
        await Timer(bit_ns, "ns")
    dut.rx.value = 1
    await Timer(3 * bit_ns, "ns")
    assert int(dut.framing_errors.value) == 1
    assert int(dut.error.value) == 1
    await Timer(12 * bit_ns, "ns")
    assert sink.empty(), "a character with a bad stop bit was echoed"
    await source.write(b"\x00\xff\x55")
    assert await echo(sink, 3, p["baud"]) == b"\x00\xff\x55"
    assert int(dut.framing_errors.value) == 1
    await FallingEdge(dut.clk)
    dut.reset.value = 1
    await FallingEdge(dut.clk)
    dut.reset.value = 0
    await ClockCycles(dut.clk, 2)
    assert int(dut.framing_errors.value) == 0, "reset keeps the framing error count"
    assert int(dut.error.value) == 0, "reset keeps the link's error flag"
