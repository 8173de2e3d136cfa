"""The UART PHY of the board link: 8 data bits, no parity, one stop bit (8N1).

Both halves run in one clock domain (``sync``) and take ``divisor``, the clock cycles per
bit (``clock_hz / baud``, see :func:`baud_divisor`), as an elaboration parameter: an
integer >= 4, or a fraction (:class:`fractions.Fraction`) >= 16 when the clock is no
whole multiple of the rate (100 MHz at 3 Mbaud: 100/3 cycles a bit). With a fraction
``D`` the bits of a character take whole cycles, each edge of the transmitter and each
sample point of the receiver at most one cycle from its exact time, counted from the
character's start bit: bit ``k`` (0 the start bit, 9 the stop bit) is sent for
``floor((k + 1) D) - floor(k D)`` cycles and sampled ``floor((2k + 1) D / 2)`` cycles
after the start bit's edge. A cycle is then at most 1/16 of a bit (the FTDI chips'
own sampling step), and the average rate is exact within each character (a character
takes ``floor(10 D)`` cycles). docs/boards.md lists the rates of each board.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

from amaranth import Array, Cat, Const, Module, Signal
from amaranth.lib import cdc, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

__all__ = ["UartRx", "UartTx", "baud_divisor", "bit_cycles", "sample_cycles"]

#: Widths of the error counters of :class:`UartRx` (saturating).
COUNTER_BITS = 16

#: the fewest cycles per bit of a fractional divisor: an edge is then at most 1/16 of a
#: bit from its exact time
MIN_FRACTIONAL = 16


def _check_divisor(divisor) -> int | Fraction:
    if isinstance(divisor, Fraction) and divisor.denominator == 1:
        divisor = int(divisor)
    if isinstance(divisor, Fraction):
        if divisor < MIN_FRACTIONAL:
            raise ValueError(
                f"divisor {divisor}: a fractional number of clock cycles per bit must be "
                f">= {MIN_FRACTIONAL}"
            )
        return divisor
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 4:
        raise ValueError(
            f"divisor {divisor!r}: clock cycles per bit must be an integer >= 4 "
            f"(or a Fraction >= {MIN_FRACTIONAL})"
        )
    return divisor


def bit_cycles(divisor) -> list[int]:
    """The cycles the transmitter holds each bit of a character (start, 8 data, stop):
    ``floor((k + 1) D) - floor(k D)``; all ``D`` for an integer divisor."""
    d = Fraction(_check_divisor(divisor))
    return [int((k + 1) * d) - int(k * d) for k in range(10)]


def sample_cycles(divisor) -> list[int]:
    """The receiver's waits: from the start bit's edge to its middle, then from each
    sample point to the next (8 data bits and the stop bit): ``floor(D / 2)``, then
    ``floor((2k + 1) D / 2) - floor((2k - 1) D / 2)`` for k = 1..9; ``D // 2`` and
    ``D``s for an integer divisor."""
    d = Fraction(_check_divisor(divisor))
    at = [int((2 * k + 1) * d / 2) for k in range(10)]
    return [at[0]] + [b - a for a, b in itertools.pairwise(at)]


def baud_divisor(clock_hz: int, baud: int) -> int | Fraction:
    """Clock cycles per bit for ``baud`` at ``clock_hz``: ``clock_hz / baud``, an integer
    >= 4, or a :class:`~fractions.Fraction` >= 16 (the UART then varies its bits by a
    cycle, module docstring), or ValueError."""
    if clock_hz <= 0 or baud <= 0:
        raise ValueError(f"clock {clock_hz} Hz, baud {baud}: both must be positive")
    divisor = Fraction(clock_hz, baud)
    if divisor < 4:
        raise ValueError(f"{baud} baud at {clock_hz} Hz: fewer than 4 clock cycles per bit")
    if divisor.denominator != 1 and divisor < MIN_FRACTIONAL:
        raise ValueError(
            f"{baud} baud at {clock_hz} Hz: {float(divisor):.2f} clock cycles per bit, not "
            f"a whole number and fewer than {MIN_FRACTIONAL}"
        )
    return _check_divisor(divisor)


class UartRx(wiring.Component):
    """UART receiver, 8N1, LSB first.

    Ports:

    * ``rx`` (in, 1): the serial line, idle high. Asynchronous: it passes through a
      two-flip-flop synchroniser (reset value 1) before anything reads it.
    * ``o`` (out, ``stream.Signature(8)``): received bytes. ``valid`` rises with a byte
      and stays high, with the byte, until the consumer takes it (``ready``). A byte that
      completes while the previous one has not been taken is dropped, and ``overrun``
      counts it; the byte waiting in ``o`` is kept. A consumer therefore has a whole
      character time (``10 D`` cycles, ``D`` the divisor) to take each byte.
    * ``overrun`` (out, 16): bytes dropped because ``o`` was full (saturating).
    * ``framing_errors`` (out, 16): characters whose stop bit was low (saturating); their
      byte is dropped, and the receiver waits for the line to go high again (a break is
      counted once).

    Timing (``D`` the divisor): the line is sampled every clock (``D`` times per bit). A
    falling edge starts a character; ``floor(D / 2)`` cycles later, in the middle of the
    start bit, the line must still be low or the edge is ignored as a glitch. Each data
    bit and the stop bit are then sampled in the middle of the bit, ``D`` cycles apart
    (a fractional ``D``: :func:`sample_cycles`). ``o.valid`` rises 2 (synchroniser) +
    ``floor(19 D / 2)`` + 1 cycles after the start bit's falling edge reaches ``rx``
    (``D // 2 + 9 D`` for an integer ``D``), that is in the middle of the stop bit; the
    receiver is then ready for the next start bit, so it accepts back-to-back characters
    from a transmitter up to about 4% faster than itself (half a bit over ten bits).
    Throughput: one byte per character, ``10 D`` cycles.
    """

    def __init__(self, divisor: int | Fraction):
        self.divisor = _check_divisor(divisor)
        super().__init__(
            {
                "rx": In(1, init=1),
                "o": Out(stream.Signature(8)),
                "overrun": Out(COUNTER_BITS),
                "framing_errors": Out(COUNTER_BITS),
            }
        )

    def elaborate(self, platform):
        m = Module()
        waits = sample_cycles(self.divisor)
        line = Signal(init=1)
        m.submodules.sync = cdc.FFSynchronizer(self.rx, line, init=1, stages=2)

        count = Signal(bits_for(max(waits) - 1))  # cycles to the next sample point, minus one
        bit = Signal(range(8))
        # the wait after data bit `bit` (sample k = bit + 1) to the next sample, minus
        # one: constants for an integer divisor
        after_bit = Array(Const(w - 1, len(count)) for w in waits[2:])
        shift = Signal(8)
        tick = count == 0
        with m.If(~tick):
            m.d.sync += count.eq(count - 1)

        def saturating_increment(counter):
            with m.If(counter != (1 << len(counter)) - 1):
                m.d.sync += counter.eq(counter + 1)

        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):
                    m.d.sync += count.eq(waits[0] - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(tick):
                    with m.If(line):  # a glitch, not a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [count.eq(waits[1] - 1), bit.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(tick):
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), count.eq(after_bit[bit])]
                    m.d.sync += bit.eq(bit + 1)
                    with m.If(bit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(tick):
                    with m.If(line):
                        with m.If(self.o.valid & ~self.o.ready):
                            saturating_increment(self.overrun)
                        with m.Else():
                            m.d.sync += [self.o.payload.eq(shift), self.o.valid.eq(1)]
                        m.next = "IDLE"
                    with m.Else():
                        saturating_increment(self.framing_errors)
                        m.next = "BREAK"
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"
        return m


class UartTx(wiring.Component):
    """UART transmitter, 8N1, LSB first.

    Ports:

    * ``i`` (in, ``stream.Signature(8)``): bytes to send. ``ready`` is high while the
      transmitter is idle and in the last cycle of each stop bit, so a source that keeps
      ``valid`` high sends back-to-back characters: one byte per ``floor(10 D)`` cycles,
      the line's full rate.
    * ``tx`` (out, 1): the serial line, idle high, driven straight from a flip-flop.

    Bit ``k`` of a character lasts ``D`` cycles (a fractional divisor ``D``:
    :func:`bit_cycles`, a character ``floor(10 D)``). Latency: the start bit begins in the
    cycle after the byte is taken.
    """

    def __init__(self, divisor: int | Fraction):
        self.divisor = _check_divisor(divisor)
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        periods = bit_cycles(self.divisor)
        frame = Signal(10, init=(1 << 10) - 1)  # the bits still to send, LSB on the line
        count = Signal(bits_for(max(periods) - 1))
        left = Signal(range(10))  # bit periods after the current one
        # the next bit's period, minus one, when `left` bits follow the current one (bit
        # 10 - left): constants for an integer divisor
        next_period = Array(Const(periods[min(10 - n, 9)] - 1, len(count)) for n in range(10))
        busy = Signal()
        # count == 0 and left == 0, kept in flip-flops so that ``ready`` is one LUT after
        # registers (it feeds the source's read logic: a FIFO's pointers)
        count_zero, left_zero = Signal(init=1), Signal(init=1)
        last = busy & count_zero & left_zero
        m.d.comb += [self.tx.eq(frame[0]), self.i.ready.eq(~busy | last)]
        with m.If(busy):
            with m.If(~count_zero):
                m.d.sync += [count.eq(count - 1), count_zero.eq(count == 1)]
            with m.Elif(~left_zero):
                m.d.sync += [
                    frame.eq(Cat(frame[1:], Const(1, 1))),
                    left.eq(left - 1),
                    left_zero.eq(left == 1),
                    count.eq(next_period[left]),
                    count_zero.eq(0),
                ]
            with m.Else():
                m.d.sync += busy.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                frame.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))),
                left.eq(9),
                left_zero.eq(0),
                count.eq(periods[0] - 1),
                count_zero.eq(0),
                busy.eq(1),
            ]
        return m
