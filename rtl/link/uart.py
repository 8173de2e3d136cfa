"""The UART PHY of the board link: 8 data bits, no parity, one stop bit (8N1).

Both halves run in one clock domain (``sync``) and take ``divisor``, the number of clock
cycles per bit (``clock_hz / baud``, see :func:`baud_divisor`), as an elaboration
parameter; it must be an integer >= 4. docs/boards.md lists the rates of each board.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import cdc, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for

__all__ = ["UartRx", "UartTx", "baud_divisor"]

#: Widths of the error counters of :class:`UartRx` (saturating).
COUNTER_BITS = 16


def _check_divisor(divisor) -> int:
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 4:
        raise ValueError(f"divisor {divisor!r}: clock cycles per bit must be an integer >= 4")
    return divisor


def baud_divisor(clock_hz: int, baud: int, tolerance: float = 0.01) -> int:
    """Clock cycles per bit for ``baud`` at ``clock_hz``: the nearest integer, which must be
    >= 4 and within ``tolerance`` (relative) of the exact ratio, or ValueError."""
    if clock_hz <= 0 or baud <= 0:
        raise ValueError(f"clock {clock_hz} Hz, baud {baud}: both must be positive")
    divisor = round(clock_hz / baud)
    if divisor < 4:
        raise ValueError(f"{baud} baud at {clock_hz} Hz: fewer than 4 clock cycles per bit")
    error = clock_hz / divisor / baud - 1
    if abs(error) > tolerance:
        raise ValueError(
            f"{baud} baud at {clock_hz} Hz: divisor {divisor} is {error:+.2%} off "
            f"(more than {tolerance:.1%})"
        )
    return divisor


class UartRx(wiring.Component):
    """UART receiver, 8N1, LSB first.

    Ports:

    * ``rx`` (in, 1): the serial line, idle high. Asynchronous: it passes through a
      two-flip-flop synchroniser (reset value 1) before anything reads it.
    * ``o`` (out, ``stream.Signature(8)``): received bytes. ``valid`` rises with a byte
      and stays high, with the byte, until the consumer takes it (``ready``). A byte that
      completes while the previous one has not been taken is dropped, and ``overrun``
      counts it; the byte waiting in ``o`` is kept. A consumer therefore has a whole
      character time (``10 * divisor`` cycles) to take each byte.
    * ``overrun`` (out, 16): bytes dropped because ``o`` was full (saturating).
    * ``framing_errors`` (out, 16): characters whose stop bit was low (saturating); their
      byte is dropped, and the receiver waits for the line to go high again (a break is
      counted once).

    Timing: the line is sampled every clock (``divisor`` times per bit). A falling edge
    starts a character; ``divisor // 2`` cycles later, in the middle of the start bit, the
    line must still be low or the edge is ignored as a glitch. Each data bit and the stop
    bit are then sampled ``divisor`` cycles apart, in the middle of the bit. ``o.valid``
    rises 2 (synchroniser) + ``divisor // 2`` + ``9 * divisor`` + 1 cycles after the
    start bit's falling edge reaches ``rx``, that is in the middle of the stop bit; the
    receiver is then ready for the next start bit, so it accepts back-to-back characters
    from a transmitter up to about 4% faster than itself (half a bit over ten bits).
    Throughput: one byte per character, ``10 * divisor`` cycles.
    """

    def __init__(self, divisor: int):
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
        d = self.divisor
        line = Signal(init=1)
        m.submodules.sync = cdc.FFSynchronizer(self.rx, line, init=1, stages=2)

        count = Signal(bits_for(d - 1))  # cycles to the next sample point, minus one
        bit = Signal(range(8))
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
                    m.d.sync += count.eq(d // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(tick):
                    with m.If(line):  # a glitch, not a start bit
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += [count.eq(d - 1), bit.eq(0)]
                        m.next = "DATA"
            with m.State("DATA"):
                with m.If(tick):
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), count.eq(d - 1)]
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
      ``valid`` high sends back-to-back characters: one byte per ``10 * divisor`` cycles,
      the line's full rate.
    * ``tx`` (out, 1): the serial line, idle high, driven straight from a flip-flop.

    Latency: the start bit begins in the cycle after the byte is taken.
    """

    def __init__(self, divisor: int):
        self.divisor = _check_divisor(divisor)
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        frame = Signal(10, init=(1 << 10) - 1)  # the bits still to send, LSB on the line
        count = Signal(bits_for(d - 1))
        left = Signal(range(10))  # bit periods after the current one
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
                    count.eq(d - 1),
                    count_zero.eq(0),
                ]
            with m.Else():
                m.d.sync += busy.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                frame.eq(Cat(Const(0, 1), self.i.payload, Const(1, 1))),
                left.eq(9),
                left_zero.eq(0),
                count.eq(d - 1),
                count_zero.eq(0),
                busy.eq(1),
            ]
        return m
