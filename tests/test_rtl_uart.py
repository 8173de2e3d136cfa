# amaranth: UnusedElaboratable=no
"""UartRx and UartTx (rtl/link/uart.py): Amaranth-simulator unit tests, and one cocotb run
per board rate with cocotbext-uart on Icarus (sim/cocotb_uart.py)."""

from __future__ import annotations

import gc
import itertools
import random
import warnings
from fractions import Fraction

import pytest
from amaranth import ClockDomain, Elaboratable, Module
from amaranth.sim import Simulator

from pentegg.boards.common import BoardLink, LoopbackCore
from pentegg.rtl.link.uart import UartRx, UartTx, baud_divisor, bit_cycles, sample_cycles
from pentegg.sim import harness


def _run(dut, bench, period=1e-6):
    sim = Simulator(dut)
    sim.add_clock(period)
    sim.add_testbench(bench)
    sim.run()


async def send_line(ctx, line, byte, divisor, *, stop=1, phase=0):
    """Drive ``line`` with one 8N1 character (``stop`` is the stop bit's level)."""
    for _ in range(phase):
        await ctx.tick()
    bits = [0] + [(byte >> i) & 1 for i in range(8)] + [stop]
    for b in bits:
        ctx.set(line, b)
        await ctx.tick().repeat(divisor)
    ctx.set(line, 1)


@pytest.mark.parametrize("divisor", [4, 5, 16, 25, Fraction(100, 3)])
def test_rx_bytes_and_latency(divisor):
    """Random bytes, random idle gaps: every byte arrives, valid 2 + floor(19 D / 2) + 1
    cycles (2 + D // 2 + 9 D + 1 for an integer D) after the start bit's edge, for one
    cycle with ready high. The line's bits last bit_cycles(D) cycles."""
    rng = random.Random(str(divisor))
    periods = bit_cycles(divisor)
    data = [rng.randrange(256) for _ in range(24)]
    dut = UartRx(divisor)
    got, latency = [], []

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        await ctx.tick().repeat(3)
        for byte in data:
            bits = [0] + [(byte >> i) & 1 for i in range(8)] + [1]
            line = [b for b, n in zip(bits, periods, strict=True) for _ in range(n)]
            line += [1] * (2 * periods[0] + rng.randrange(3))
            for n, level in enumerate(line):
                ctx.set(dut.rx, level)
                if ctx.get(dut.o.valid):
                    got.append(ctx.get(dut.o.payload))
                    latency.append(n)
                await ctx.tick()
        assert ctx.get(dut.framing_errors) == 0
        assert ctx.get(dut.overrun) == 0

    _run(dut, bench)
    assert got == data
    assert set(latency) == {2 + int(19 * Fraction(divisor) / 2) + 1}


def _tx_line(dut, data, cycles) -> list[int]:
    """The line ``dut`` (a UartTx) drives for ``cycles`` cycles, fed ``data`` by a source
    that keeps ``valid`` high."""
    line = []

    async def source(ctx):
        for byte in data:
            ctx.set(dut.i.payload, byte)
            ctx.set(dut.i.valid, 1)
            await ctx.tick().until(dut.i.ready)
        ctx.set(dut.i.valid, 0)

    async def probe(ctx):
        for _ in range(cycles):
            line.append(ctx.get(dut.tx))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(source)
    sim.add_testbench(probe)
    sim.run()
    return line


@pytest.mark.parametrize("divisor", [4, 16])
def test_tx_frames_back_to_back(divisor):
    """A source that keeps valid high: characters back to back, one per 10 * divisor
    cycles, each bit `divisor` cycles long, decoded equal."""
    rng = random.Random(divisor)
    data = [rng.randrange(256) for _ in range(10)]
    line = _tx_line(UartTx(divisor), data, 10 * divisor * (len(data) + 1) + 5)
    start = line.index(0)
    assert start == 1  # the start bit begins the cycle after the byte is taken
    decoded = []
    for k in range(len(data)):
        char = line[start + 10 * divisor * k : start + 10 * divisor * (k + 1)]
        bits = [char[divisor * j : divisor * (j + 1)] for j in range(10)]
        assert all(len(set(b)) == 1 for b in bits), "a bit changed within its period"
        assert bits[0][0] == 0 and bits[9][0] == 1
        decoded.append(sum(bits[1 + i][0] << i for i in range(8)))
    assert decoded == data
    assert set(line[start + 10 * divisor * len(data) :]) == {1}


class _Loop(Elaboratable):
    def __init__(self, divisor):
        self.tx = UartTx(divisor)
        self.rx = UartRx(divisor)

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx = self.tx
        m.submodules.rx = self.rx
        m.d.comb += self.rx.rx.eq(self.tx.tx)
        return m


def test_tx_to_rx_loopback():
    """TX line into RX: 64 random bytes back to back arrive in order."""
    rng = random.Random(7)
    data = [rng.randrange(256) for _ in range(64)]
    top = _Loop(4)
    got = []

    async def source(ctx):
        for byte in data:
            ctx.set(top.tx.i.payload, byte)
            ctx.set(top.tx.i.valid, 1)
            await ctx.tick().until(top.tx.i.ready)
        ctx.set(top.tx.i.valid, 0)

    async def sink(ctx):
        ctx.set(top.rx.o.ready, 1)
        while len(got) < len(data):
            if ctx.get(top.rx.o.valid):
                got.append(ctx.get(top.rx.o.payload))
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run_until(1e-6 * 10 * 4 * 70)
    assert got == data


def test_rx_framing_error_glitch_and_overrun():
    d = 8
    dut = UartRx(d)
    seen = []

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        await ctx.tick().repeat(4)
        # a glitch shorter than half a bit is not a start bit (no byte, not even after
        # a character's time)
        ctx.set(dut.rx, 0)
        await ctx.tick().repeat(2)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(12 * d)
        assert not ctx.get(dut.o.valid)
        # stop bit low: counted, no byte; a long break is counted once
        await send_line(ctx, dut.rx, 0x00, d, stop=0)
        ctx.set(dut.rx, 0)
        await ctx.tick().repeat(5 * d)
        ctx.set(dut.rx, 1)
        await ctx.tick().repeat(2 * d)
        assert ctx.get(dut.framing_errors) == 1
        assert not ctx.get(dut.o.valid)
        # a good byte waits in o; the next two, not taken, are dropped and counted
        for byte in (0x5A, 0xC3, 0x11):
            await send_line(ctx, dut.rx, byte, d)
            await ctx.tick().repeat(d)
        assert ctx.get(dut.o.valid) and ctx.get(dut.o.payload) == 0x5A
        assert ctx.get(dut.overrun) == 2
        ctx.set(dut.o.ready, 1)
        await ctx.tick()
        assert not ctx.get(dut.o.valid)
        await send_line(ctx, dut.rx, 0xA5, d)
        await ctx.tick().repeat(d)
        seen.append(ctx.get(dut.o.payload))
        assert ctx.get(dut.framing_errors) == 1

    _run(dut, bench)
    assert seen == [0xA5]


def test_rx_error_counters_saturate_at_their_maximum():
    """``framing_errors`` and ``overrun`` stop at 0xFFFF (from 0xFFFE: three framing
    errors, three dropped bytes), they do not wrap to 0."""
    d = 8
    dut = UartRx(d)

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        await ctx.tick().repeat(4)
        ctx.set(dut.framing_errors, 0xFFFE)
        ctx.set(dut.overrun, 0xFFFE)
        for _ in range(3):
            await send_line(ctx, dut.rx, 0x00, d, stop=0)
            await ctx.tick().repeat(2 * d)
        for byte in (1, 2, 3, 4):  # the first waits in o, the next three are dropped
            await send_line(ctx, dut.rx, byte, d)
            await ctx.tick().repeat(d)
        assert (ctx.get(dut.framing_errors), ctx.get(dut.overrun)) == (0xFFFF, 0xFFFF)
        assert ctx.get(dut.o.payload) == 1

    _run(dut, bench)


def _rx_take_at(d: int, pulse_at: int):
    """0x5A waits in o (ready low); 0xC3 follows, with ready high in cycle ``pulse_at``
    alone (counted from 0xC3's start bit) and from 3 cycles after it on. Returns the
    bytes taken, ``overrun``, and the first cycle 0xC3 is seen in o."""
    dut = UartRx(d)
    got, seen = [], []

    async def bench(ctx):
        ctx.set(dut.o.ready, 0)
        await ctx.tick().repeat(4)
        await send_line(ctx, dut.rx, 0x5A, d)
        await ctx.tick().repeat(d)
        line = [0] * d + [(0xC3 >> i) & 1 for i in range(8) for _ in range(d)] + [1] * 5 * d
        for cyc, level in enumerate(line):
            ctx.set(dut.rx, level)
            ctx.set(dut.o.ready, cyc == pulse_at or cyc > pulse_at + 2)
            _, _, v, p, r = await ctx.tick().sample(dut.o.valid, dut.o.payload, dut.o.ready)
            if v and p == 0xC3 and not seen:
                seen.append(cyc)
            if v and r:
                got.append(int(p))
        got.append(ctx.get(dut.overrun))

    _run(dut, bench)
    return got[:-1], got[-1], seen[0] if seen else None


def test_rx_byte_taken_in_the_cycle_the_next_one_completes_is_not_an_overrun():
    """A byte is dropped only while the one before it is still untaken: taken in the very
    cycle the next completes (the cycle before the next is seen in o, measured with
    the first taken at once), both arrive; taken a cycle later, the next is dropped and
    counted."""
    d = 8
    _, _, completes = _rx_take_at(d, 0)
    assert completes is not None
    assert _rx_take_at(d, completes - 1)[:2] == ([0x5A, 0xC3], 0)
    assert _rx_take_at(d, completes)[:2] == ([0x5A], 1)


@pytest.mark.parametrize("bad", [3, 0, -16, 4.0, True, None])
def test_divisor_validated(bad):
    for cls in (UartRx, UartTx):
        with pytest.raises(ValueError, match="integer >= 4"):
            cls(bad)


def test_baud_divisor():
    assert baud_divisor(48_000_000, 3_000_000) == 16
    assert type(baud_divisor(75_000_000, 3_000_000)) is int
    assert baud_divisor(75_000_000, 3_000_000) == 25
    assert baud_divisor(40_000_000, 2_000_000) == 20
    assert baud_divisor(25_000_000, 1_000_000) == 25
    assert baud_divisor(100_000_000, 3_000_000) == Fraction(100, 3)
    with pytest.raises(ValueError, match=r"8\.33 clock cycles per bit, not a whole number"):
        baud_divisor(25_000_000, 3_000_000)
    with pytest.raises(ValueError, match="fewer than 4"):
        baud_divisor(12_000_000, 6_000_000)
    with pytest.raises(ValueError, match=r"must be >= 16"):
        UartTx(Fraction(31, 2))


@pytest.mark.parametrize("divisor", [Fraction(100, 3), Fraction(67, 4), Fraction(301, 9), 25])
def test_fractional_bits_keep_every_edge_within_a_cycle(divisor):
    """A character's bits last whole cycles; the transmitter's edges and the receiver's
    sample points lie within one cycle before their exact times (k D and (k + 1/2) D),
    a character is floor(10 D) cycles; an integer divisor gives D cycles for every bit."""
    bits, waits = bit_cycles(divisor), sample_cycles(divisor)
    edges = list(itertools.accumulate(bits))
    samples = list(itertools.accumulate(waits))
    for k in range(10):
        assert 0 <= (k + 1) * divisor - edges[k] < 1
        assert 0 <= (2 * k + 1) * Fraction(divisor) / 2 - samples[k] < 1
    assert edges[-1] == int(10 * divisor)
    if isinstance(divisor, int):
        assert bits == [divisor] * 10 and waits == [divisor // 2] + [divisor] * 9


def test_fractional_tx_to_rx_and_an_exact_line():
    """100 MHz at 3 Mbaud (D = 100/3): the transmitter's edges at the cycles of
    bit_cycles, decoded; the receiver takes characters from a line with exact bit times
    (3 ns clock, 100 ns bits), and from one 3 % fast and 3 % slow."""
    d = Fraction(100, 3)
    rng = random.Random(3)
    data = [rng.randrange(256) for _ in range(12)]
    line = _tx_line(UartTx(d), data, int(10 * d) * (len(data) + 1))
    start, at = line.index(0), [0, *itertools.accumulate(bit_cycles(d))]
    for n, byte in enumerate(data):
        char = line[start + n * at[-1] :]
        levels = [0] + [(byte >> i) & 1 for i in range(8)] + [1]
        for k, level in enumerate(levels):
            assert set(char[at[k] : at[k + 1]]) == {level}, (n, k)

    # the receiver: a line driven with exact times (ctx.delay), three rates
    for scale in (1, Fraction(97, 100), Fraction(103, 100)):
        rx, got = UartRx(d), []
        bit_ns = 100 * scale

        async def sender(ctx, rx=rx, bit_ns=bit_ns):
            ctx.set(rx.rx, 1)
            await ctx.delay(50e-9)
            for byte in data:
                for level in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
                    ctx.set(rx.rx, level)
                    await ctx.delay(float(bit_ns) * 1e-9)

        async def sink(ctx, rx=rx, got=got):
            ctx.set(rx.o.ready, 1)
            while True:
                await ctx.tick()
                if ctx.get(rx.o.valid):
                    got.append(ctx.get(rx.o.payload))

        sim = Simulator(rx)
        sim.add_clock(3e-9)
        sim.add_testbench(sender)
        sim.add_testbench(sink, background=True)
        sim.run_until(len(data) * 10 * 110e-9)
        assert got == data, scale


# (clock period in ps, even for cocotb's Clock; baud; divisor):
# 48 MHz / 3 Mbaud, 25 MHz / 1 Mbaud, 75 MHz / 3 Mbaud, 40 MHz / 2 Mbaud (the ULX3S).
# cocotbext-uart times bits as int(1e9 / baud) ns: 333 ns at 3 Mbaud, 0.1% fast.
COCOTB_RATES = [
    (20834, 3_000_000, 16),
    (40000, 1_000_000, 25),
    (13334, 3_000_000, 25),
    (25000, 2_000_000, 20),
    (10000, 3_000_000, Fraction(100, 3)),  # 100 MHz, 3 Mbaud: bits of 33 and 34 cycles
]


@pytest.mark.parametrize("period_ps, baud, divisor", COCOTB_RATES)
def test_cocotb_uart_loopback(period_ps, baud, divisor):
    """cocotbext-uart's UartSource into UartRx, through the boards' stand-in core (a byte
    echo) into UartTx, into UartSink; and a framing error (sim/cocotb_uart.py)."""
    harness.run(
        "uart-link",
        {"divisor": str(divisor), "period_ps": period_ps, "baud": baud},
        "cocotb_uart",
        factory=lambda: BoardLink(divisor, LoopbackCore()),
    )


def test_board_link_strobes_once_per_byte():
    """BoardLink around the loopback core: four characters in, four out, and the LED
    strobes ``rx_strobe``/``tx_strobe`` each high for one cycle per byte. The characters
    come with stop bits of 3/4 of a bit, faster than the transmitter sends, so bytes wait for it."""
    divisor = 16
    link = BoardLink(divisor, LoopbackCore())
    data = [0x00, 0xA5, 0xFF, 0x3C]
    pulses = {"rx": [], "tx": []}
    line_out = []

    async def bench(ctx):
        ctx.set(link.rx, 1)
        await ctx.tick().repeat(4)
        for byte in data:
            bits = [0] + [(byte >> i) & 1 for i in range(8)]
            for b in bits:
                ctx.set(link.rx, b)
                await ctx.tick().repeat(divisor)
            ctx.set(link.rx, 1)
            await ctx.tick().repeat(divisor * 3 // 4)
        await ctx.tick().repeat(divisor * 10 * 6)

    async def watch(ctx):
        cycle = 0
        async for _clk, _rst, rx, tx, line in ctx.tick().sample(
            link.rx_strobe, link.tx_strobe, link.tx
        ):
            for name, value in (("rx", rx), ("tx", tx)):
                if value:
                    pulses[name].append(cycle)
            line_out.append(line)
            cycle += 1

    sim = Simulator(link)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_process(watch)
    sim.run()
    for name in ("rx", "tx"):
        cycles = pulses[name]
        assert len(cycles) == len(data), (name, cycles)
        assert all(b - a > 1 for a, b in itertools.pairwise(cycles)), (name, cycles)
    # the loopback's bytes leave on the line: decode them at mid-bit
    received, i = [], 0
    while i < len(line_out) and len(received) < len(data):
        if line_out[i] == 0:
            bits = [line_out[i + divisor // 2 + divisor * (b + 1)] for b in range(8)]
            received.append(sum(bit << b for b, bit in enumerate(bits)))
            i += divisor * 10 - divisor // 2
        else:
            i += 1
    assert received == data
    assert pulses["tx"][0] > pulses["rx"][0]


@pytest.mark.parametrize("leaves", [False, True], ids=["direct", "leaves"])
def test_board_link_reset_clears_its_uarts_and_error(leaves):
    """On a board the clock domain has no reset: ``reset`` (the power-on reset) clears
    the receiver's counts and the link error. Directly (the iCEBreaker) at the edge that
    samples it; with ``reset_leaves`` (the ULX3S, whose reset net into the transmitter
    was its critical path) through flip-flops of their own, one edge later. A framing
    error, then a one-cycle pulse on ``reset``; the link echoes a byte after."""
    divisor = 8
    link = BoardLink(divisor, LoopbackCore(), reset_leaves=leaves)
    top = Module()
    top.domains.sync = ClockDomain("sync", reset_less=True)
    top.submodules.link = link
    line_out = []

    async def bench(ctx):
        ctx.set(link.rx, 1)
        await ctx.tick().repeat(4)
        await send_line(ctx, link.rx, 0x5A, divisor, stop=0)
        await ctx.tick().repeat(divisor * 3)
        assert ctx.get(link.framing_errors) == 1 and ctx.get(link.error)
        ctx.set(link.reset, 1)
        await ctx.tick()  # the edge that samples reset
        ctx.set(link.reset, 0)
        cleared = not leaves
        assert (ctx.get(link.framing_errors) == 0) == cleared, "the receiver's reset edge"
        assert (not ctx.get(link.error)) == cleared, "the link error's reset edge"
        await ctx.tick()
        assert ctx.get(link.framing_errors) == 0 and not ctx.get(link.error)
        line_out.clear()
        await send_line(ctx, link.rx, 0xC3, divisor)
        await ctx.tick().repeat(divisor * 12)
        start = line_out.index(0)
        bits = [line_out[start + divisor // 2 + divisor * (b + 1)] for b in range(8)]
        assert sum(bit << b for b, bit in enumerate(bits)) == 0xC3

    async def watch(ctx):
        async for _clk, _rst, line in ctx.tick().sample(link.tx):
            line_out.append(line)

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_process(watch)
    sim.run_until(1e-6 * 2000)


def test_only_the_ulx3s_link_takes_its_reset_through_leaves():
    """The ULX3S top's link resets its UARTs through flip-flops (its reset net was the
    128-lane build's critical path); the iCEBreaker's keeps the direct reset (48 MHz
    margin)."""
    from pentegg.boards import icebreaker, ulx3s

    tops = {
        board: board.BOARD.top(LoopbackCore, clock=next(iter(board.CLOCKS.values())))
        for board in (icebreaker, ulx3s)
    }
    leaves = {board: top.link.reset_leaves for board, top in tops.items()}
    with warnings.catch_warnings():  # the tops are not elaborated here
        warnings.simplefilter("ignore")
        del tops
        gc.collect()
    assert leaves[ulx3s] and not leaves[icebreaker]
