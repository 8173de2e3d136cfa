"""Helpers for ``amaranth.lib.stream`` ports: a cocotb driver and sink, digit decoding,
and random traffic through a stream stage in the Amaranth simulator
(:func:`random_traffic`).

A stream member ``x`` of a component appears in the generated Verilog as ``x__valid``,
``x__ready`` and ``x__payload``. Transfers happen on a rising clock edge where both
``valid`` and ``ready`` are high; :class:`StreamSource` and :class:`StreamSink` sample at
the edge (cocotb reads the pre-edge values right after ``RisingEdge``).

Both insert random stalls from their own ``random.Random``, seeded from
``cocotb.RANDOM_SEED`` and the stream's name, so a run is replayed by its seed.
"""

from __future__ import annotations

import random
import zlib

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge, SimTimeoutError, with_timeout

__all__ = [
    "StreamSink",
    "StreamSource",
    "decode_digits",
    "random_traffic",
    "reset",
    "start_clock",
    "wait_low",
]


async def random_traffic(ctx, dut, rng, cycles, bits, *, offer=0.6, take=0.5, check=None):
    """Random words through a stream stage ``dut`` (ports ``i`` and ``o``) in an Amaranth
    testbench: the source offers a new ``bits``-bit word with probability ``offer`` when
    it has none (random payload bits while it offers none), the sink is ready with
    probability ``take``; ``check(ctx, before)`` runs each cycle after the inputs are
    set, ``before`` the stage's ``(i.ready, o.valid, o.payload)`` read before they were.
    Then the stage drains. Returns ``(sent, got)``: the words the stage took and gave."""
    sent, got = [], []
    word, offering = 0, False
    for _ in range(cycles):
        if not offering and rng.random() < offer:
            offering, word = True, rng.getrandbits(bits)
        ready = rng.random() < take
        before = (ctx.get(dut.i.ready), ctx.get(dut.o.valid), ctx.get(dut.o.payload))
        ctx.set(dut.i.valid, offering)
        ctx.set(dut.i.payload, word if offering else rng.getrandbits(bits))
        ctx.set(dut.o.ready, ready)
        if check is not None:
            check(ctx, before)
        if ctx.get(dut.o.valid) and ready:
            got.append(ctx.get(dut.o.payload))
        took = offering and ctx.get(dut.i.ready)
        await ctx.tick()
        if took:
            sent.append(word)
            offering = False
    ctx.set(dut.i.valid, 0)
    ctx.set(dut.o.ready, 1)
    for _ in range(4):
        if ctx.get(dut.o.valid):
            got.append(ctx.get(dut.o.payload))
        await ctx.tick()
    return sent, got


def _rng(name: str, rng: random.Random | None) -> random.Random:
    if rng is not None:
        return rng
    return random.Random((cocotb.RANDOM_SEED << 32) ^ zlib.crc32(name.encode()))


CLOCK_NS = 10
"""The testbenches' clock period (ns)."""


def start_clock(dut):
    """``dut.clk`` at ``CLOCK_NS`` (``wait_low`` counts its cycles in it)."""
    # cocotb's Python clock: its C++ one (impl="gpi") writes the clock with the
    # simulator's inertial writes, which under Icarus reorders it with the tests' writes
    # (a random PRNG test read X; an LRGEN job never finished)
    return cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns").start())


async def wait_low(dut, signal, limit: int, what=lambda: "") -> None:
    """Wait until ``signal`` (one bit, a register's output) is low, then to the next falling
    clock edge. One simulator callback for the whole wait, where polling costs a Python
    callback a clock edge. Raises AssertionError, with ``what()`` appended, if it is
    still high after ``limit`` cycles of the ``CLOCK_NS`` clock."""
    if signal.value:
        try:
            await with_timeout(FallingEdge(signal), limit * CLOCK_NS, "ns")
        except SimTimeoutError:
            raise AssertionError(f"still busy after {limit} cycles {what()}".rstrip()) from None
    await FallingEdge(dut.clk)


async def reset(dut, cycles: int = 2) -> None:
    """Synchronous reset of the ``sync`` domain for ``cycles`` clock edges."""
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0


def decode_digits(value: int, count: int) -> list[int]:
    """``count`` digits (3-bit two's complement, digit ``j`` in bits ``[3j+2:3j]``)."""
    out = []
    for _ in range(count):
        code = value & 0b111
        out.append(code - 8 if code & 0b100 else code)
        value >>= 3
    return out


class _StreamPort:
    """The ``valid``/``ready``/``payload`` signals of stream ``name`` and its own RNG."""

    def __init__(self, dut, name: str, rng: random.Random | None):
        self.name = name
        self.clk = dut.clk
        self.valid = getattr(dut, f"{name}__valid")
        self.ready = getattr(dut, f"{name}__ready")
        self.payload = getattr(dut, f"{name}__payload")
        self.rng = _rng(name, rng)

    def _chance(self, probability: float) -> bool:
        """True with ``probability`` (always for 1.0, without drawing a number)."""
        return probability >= 1.0 or self.rng.random() < probability


class StreamSink(_StreamPort):
    """Accepts the beats of a design's output stream ``name`` with random back-pressure.

    ``ready_probability`` is the chance that ``ready`` is high in a cycle (1.0: always).
    Payloads are appended to :attr:`beats` as integers, in order of transfer.
    """

    def __init__(self, dut, name: str, *, ready_probability: float = 1.0, rng=None):
        super().__init__(dut, name, rng)
        self.ready_probability = ready_probability
        self.beats: list[int] = []
        self.cycles = 0
        self._task = None
        self.ready.value = 0

    def start(self) -> StreamSink:
        self._task = cocotb.start_soon(self._run())
        return self

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self.ready.value = 0

    async def _run(self) -> None:
        p = self.ready_probability
        while True:
            ready = int(self._chance(p))
            self.ready.value = ready
            await RisingEdge(self.clk)
            self.cycles += 1
            if ready and self._valid():
                self.beats.append(int(self.payload.value))

    def _valid(self) -> bool:
        v = self.valid.value
        if not v.is_resolvable:
            raise ValueError(f"stream {self.name}: valid is {v} (neither 0 nor 1)")
        return bool(v)

    async def take(self, count: int, *, timeout_cycles: int | None = None) -> list[int]:
        """Accept ``count`` beats (with the sink's back-pressure) and return them; ``ready``
        is low again afterwards. Runs in the caller, one ``await`` per clock cycle."""
        p = self.ready_probability
        got: list[int] = []
        cycles = 0
        while len(got) < count:
            ready = int(self._chance(p))
            self.ready.value = ready
            await RisingEdge(self.clk)
            cycles += 1
            if ready and self._valid():
                got.append(int(self.payload.value))
            if timeout_cycles is not None and cycles > timeout_cycles:
                self.ready.value = 0
                raise TimeoutError(
                    f"stream {self.name}: {len(got)} of {count} beats in {cycles} cycles"
                )
        self.ready.value = 0
        self.beats.extend(got)
        self.cycles += cycles
        return got

    def digits(self, per_beat: int) -> list[int]:
        """All beats as one list of digits, ``per_beat`` digits per beat."""
        out: list[int] = []
        for b in self.beats:
            out.extend(decode_digits(b, per_beat))
        return out


class StreamSource(_StreamPort):
    """Drives a design's input stream ``name``, idling randomly between beats.

    ``valid_probability`` is the chance that a beat is offered in a given cycle; once
    offered, ``valid`` and ``payload`` are held until ``ready`` is seen at an edge.
    """

    def __init__(self, dut, name: str, *, valid_probability: float = 1.0, rng=None):
        super().__init__(dut, name, rng)
        self.valid_probability = valid_probability
        self.sent = 0
        self.valid.value = 0

    async def send(self, payloads) -> None:
        p = self.valid_probability
        for item in payloads:
            while not self._chance(p):
                self.valid.value = 0
                await RisingEdge(self.clk)
            self.valid.value = 1
            self.payload.value = int(item)
            while True:
                await RisingEdge(self.clk)
                if self.ready.value:
                    break
            self.sent += 1
        self.valid.value = 0
