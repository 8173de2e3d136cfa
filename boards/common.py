"""What the board tops share: the UART link around a core, the reset, the LEDs, the cores.

A board top (:class:`BoardTop`; ``boards/icebreaker.py``, ``boards/ulx3s.py``) is

    pins -> PLL -> core clock (domain ``sync``, no reset of its own) + power-on/lock reset
    uart.rx -> UartRx -> core.rx ... core.tx -> UartTx -> uart.tx
    LEDs: heartbeat, core.busy, core.error (plus UART activity where a board has LEDs)

The *core* is any ``wiring.Component`` with the ports of :data:`CORE_SIGNATURE`:
``rx: In(stream.Signature(8))`` (bytes from the host), ``tx: Out(stream.Signature(8))``
(bytes to the host), ``reset: In(1)`` (the power-on reset, synchronous: the board's
``sync`` domain has no reset, so that each core routes its reset as it needs; the Device
through a flip-flop per block, rtl/reset.py), ``busy: Out(1)``, ``error: Out(1)``. A
board top builds it by
calling a *core factory* ``factory(clock_hz=..., baud=..., **params)``; :data:`CORES`
names the factories ``pentegg build --core`` offers: ``device`` (the protocol engine and
accelerator, ``pentegg.rtl.link.device.Device``), ``compact`` (the same protocol device
as an RV32I core and its firmware, ``pentegg.rtl.compact.soc.CompactDevice``: the
iCEBreaker's) and ``loopback`` (:class:`LoopbackCore`, a byte echo for bring-up and for
the tests). A core with a ``flash`` member (the compact core's boot from the SPI flash)
gets the board's flash pins (:meth:`BoardTop.flash`) and a flash image to program
(``core.flash_image()``, written at ``core.flash_offset``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from amaranth import ClockDomain, Elaboratable, Module, ResetInserter, Signal, Value
from amaranth.lib import io, stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from ..rtl.link.pipe import StreamRegister
from ..rtl.link.uart import UartRx, UartTx, baud_divisor
from ..rtl.reset import reset_leaf

__all__ = [
    "CORES",
    "CORE_SIGNATURE",
    "Board",
    "BoardLink",
    "BoardTop",
    "ClockChoice",
    "CoreUnavailable",
    "LoopbackCore",
    "compact_core",
    "device_core",
]

#: The ports every core has (a core may have more members; these are the ones used).
CORE_SIGNATURE = wiring.Signature(
    {
        "rx": In(stream.Signature(8)),
        "tx": Out(stream.Signature(8)),
        "reset": In(1),
        "busy": Out(1),
        "error": Out(1),
    }
)


class CoreUnavailable(RuntimeError):
    """The requested core is not part of this tree (one-line message)."""


class LoopbackCore(wiring.Component):
    """The stand-in core: every byte received is sent back, through a 16-byte FIFO;
    ``busy`` and ``error`` are 0. Takes and ignores the board's parameters."""

    def __init__(self, *, clock_hz: int = 0, baud: int = 0, **params: Any):
        self.clock_hz, self.baud, self.params = clock_hz, baud, params
        super().__init__(CORE_SIGNATURE)

    def elaborate(self, platform):
        m = Module()
        fifo = SyncFIFO(width=8, depth=16)
        m.submodules.fifo = ResetInserter(self.reset)(fifo)
        wiring.connect(m, wiring.flipped(self.rx), fifo.w_stream)
        wiring.connect(m, fifo.r_stream, wiring.flipped(self.tx))
        m.d.comb += [self.busy.eq(0), self.error.eq(0)]
        return m


def device_core(**kwargs: Any) -> wiring.Component:
    """``Device(frame_bytes=..., clock_hz=..., baud=..., **accelerator parameters)``."""
    try:
        from ..rtl.link.device import Device
    except ImportError as e:
        if "device" not in str(e.name or ""):
            raise
        raise CoreUnavailable(
            "the Device core (rtl/link/device.py) is not in this tree; build with --core loopback"
        ) from None
    return Device(**kwargs)


def compact_core(**kwargs: Any) -> wiring.Component:
    """``CompactDevice(clock_hz=..., baud=..., ram_bytes=..., boot=..., **firmware
    parameters)`` (rtl/compact/soc.py)."""
    from ..rtl.compact.soc import CompactDevice

    return CompactDevice(**kwargs)


#: ``pentegg build --core NAME`` -> core factory
CORES: dict[str, Callable[..., wiring.Component]] = {
    "device": device_core,
    "compact": compact_core,
    "loopback": LoopbackCore,
}


class BoardLink(wiring.Component):
    """UART PHY around a core: ``rx`` (line in) -> :class:`UartRx` -> a
    :class:`StreamRegister` -> ``core.rx``; ``core.tx`` -> a register -> :class:`UartTx`
    -> ``tx`` (line out). ``busy`` and ``error`` are the core's; ``reset`` (synchronous,
    the board's power-on reset) resets the UARTs, the register stages, the link error
    and the core; ``rx_strobe``/``tx_strobe`` are high for one cycle per byte
    received/sent, the cycle after the byte moves (flip-flops: they drive the LEDs'
    stretch counters across the die, and the transmitter's ``busy`` through the strobe
    into a counter by the LED pins took 9.38 ns of a 10 ns period, 7.96 of it routing,
    in the 128-lane ULX3S build at 67bdee2, seed 2, and dragged ``busy`` away from the
    transmitter's frame, 10.12 ns); ``overrun`` and ``framing_errors`` are the
    receiver's counters. ``error`` is also set, until reset, by the first framing error
    or overrun, so a LED shows a link problem.

    With ``reset_leaves`` the UARTs, the register stages and the link error take
    ``reset`` through flip-flops of their own, one cycle later (rtl/reset.py; hold it at
    least a cycle): on a large device the power-on reset's flip-flop sits by the core's
    leaves, and its net straight into the transmitter's counter by the pins was the
    critical path of the 128-lane ULX3S build (10.07 ns of a 10 ns period at a61b92a,
    seed 1; 9.87 at 912efff, seed 2). The small iCEBreaker build keeps the direct reset:
    with the leaves its compact build lost its thin margin at 48 MHz."""

    def __init__(self, divisor: int, core: wiring.Component, *, reset_leaves: bool = False):
        self.divisor = divisor
        self.core = core
        self.reset_leaves = reset_leaves
        super().__init__(
            {
                "rx": In(1, init=1),
                "tx": Out(1, init=1),
                "reset": In(1),
                "busy": Out(1),
                "error": Out(1),
                "rx_strobe": Out(1),
                "tx_strobe": Out(1),
                "overrun": Out(16),
                "framing_errors": Out(16),
            }
        )

    def elaborate(self, platform):
        m = Module()

        def rst(name: str) -> Value:
            return reset_leaf(m, self.reset, name) if self.reset_leaves else self.reset

        urx, utx = UartRx(self.divisor), UartTx(self.divisor)
        m.submodules.uart_rx = ResetInserter(rst("uart_rx"))(urx)
        m.submodules.uart_tx = ResetInserter(rst("uart_tx"))(utx)
        m.submodules.core = core = self.core
        # the bytes cross a register stage each way (rtl/link/pipe.py): the UARTs sit by
        # their pins, the core's byte logic across the die, and no ready or valid runs
        # between them without a flip-flop
        rx_reg, tx_reg = StreamRegister(8), StreamRegister(8)
        m.submodules.rx_reg = ResetInserter(rst("rx_reg"))(rx_reg)
        m.submodules.tx_reg = ResetInserter(rst("tx_reg"))(tx_reg)
        rst_error = rst("link_error")
        wiring.connect(m, urx.o, rx_reg.i)
        wiring.connect(m, rx_reg.o, core.rx)
        wiring.connect(m, core.tx, tx_reg.i)
        wiring.connect(m, tx_reg.o, utx.i)
        link_error = Signal()
        with m.If(rst_error):
            m.d.sync += link_error.eq(0)
        with m.Elif((urx.overrun != 0) | (urx.framing_errors != 0)):
            m.d.sync += link_error.eq(1)
        m.d.comb += [
            urx.rx.eq(self.rx),
            self.tx.eq(utx.tx),
            core.reset.eq(self.reset),
            self.busy.eq(core.busy),
            self.error.eq(core.error | link_error),
            self.overrun.eq(urx.overrun),
            self.framing_errors.eq(urx.framing_errors),
        ]
        m.d.sync += [
            self.rx_strobe.eq(urx.o.valid & urx.o.ready),
            self.tx_strobe.eq(utx.i.valid & utx.i.ready),
        ]
        return m


@dataclass(frozen=True)
class ClockChoice:
    """One core clock a board's PLL makes, and the UART rate the host's FTDI chip makes
    exactly at it (docs/boards.md)."""

    hz: int
    baud: int
    #: the PLL's settings (the board top's names)
    pll: dict[str, int] = field(default_factory=dict)

    @property
    def mhz(self) -> float:
        return self.hz / 1e6


@dataclass(frozen=True)
class Board:
    """One supported board: what ``pentegg build --board NAME`` needs."""

    name: str
    #: the amaranth-boards platform class (a fresh instance per build)
    platform: Callable[[], Any]
    #: the top: ``top(core_factory, params, clock) -> Elaboratable``
    top: Callable[..., Elaboratable]
    #: the core clocks ``--param clock_mhz=N`` chooses from (MHz -> clock), and the default
    clocks: dict[int, ClockChoice]
    default_clock_mhz: int
    #: default parameters of the device core (``--param NAME=VALUE`` overrides)
    defaults: dict[str, Any] = field(default_factory=dict)
    #: the core ``pentegg build`` builds when ``--core`` names none
    default_core: str = "device"
    #: default parameters of the other cores, by core (the loopback core takes none)
    core_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: file name of the bitstream among the build products
    bitstream: str = "top.bin"
    family: str = "ice40"
    #: openFPGALoader arguments before the bitstream: flash, SRAM
    program_flash: tuple[str, ...] = ()
    program_sram: tuple[str, ...] = ()
    #: where --program writes when neither --flash nor --sram is given
    default_target: str = "flash"
    #: core name -> one line saying why that core cannot be built for this board (the
    #: build stops before synthesis, unless forced)
    unfit: dict[str, str] = field(default_factory=dict)
    #: the default clock (MHz) of the other cores, by core; those not named get
    #: ``default_clock_mhz``
    core_clock_mhz: dict[str, int] = field(default_factory=dict)

    def params_for(self, core: str) -> dict[str, Any]:
        """The default parameters of a build of ``core``."""
        if core == "device":
            return dict(self.defaults)
        return dict(self.core_defaults.get(core, {}))

    def default_clock(self, core: str = "") -> int:
        """The core clock (MHz) of a build of ``core`` when ``--param clock_mhz`` does
        not choose one."""
        return self.core_clock_mhz.get(core, self.default_clock_mhz)

    def clock(self, mhz: int | None = None, core: str = "") -> ClockChoice:
        """The clock of ``--param clock_mhz=mhz`` (default: :meth:`default_clock` of
        ``core``); ValueError (one line) for a clock the board has no PLL settings for."""
        mhz = self.default_clock(core) if mhz is None else mhz
        if isinstance(mhz, bool) or not isinstance(mhz, int) or mhz not in self.clocks:
            known = ", ".join(str(c) for c in sorted(self.clocks))
            raise ValueError(
                f"clock_mhz={mhz!r}: the {self.name} top has PLL settings for {known} MHz "
                f"(docs/boards.md)"
            )
        return self.clocks[mhz]

    @property
    def clock_hz(self) -> int:
        """The default core clock (the device core's)."""
        return self.clock().hz

    @property
    def baud(self) -> int:
        """The UART rate at the default core clock."""
        return self.clock().baud


class BoardTop(Elaboratable, metaclass=abc.ABCMeta):
    """A board's top: clock and reset (:meth:`clock`, per board), :class:`BoardLink` on
    the board's UART, LEDs (:meth:`leds`, per board).

    ``core`` is a core factory (see the module docstring), called as
    ``core(clock_hz=self.clock_hz, baud=self.baud, **params)``; ``clock`` is the core
    clock (one of the board's :class:`ClockChoice`; its PLL settings go to :meth:`clock`).
    """

    #: cycles the sync domain is held in reset after the PLL locks
    por_cycles: int = 1 << 10
    #: the link's UARTs and registers take the power-on reset through flip-flops of
    #: their own (:class:`BoardLink`)
    link_reset_leaves: bool = False

    def __init__(
        self,
        core: Callable[..., wiring.Component],
        params: dict[str, Any] | None = None,
        clock: ClockChoice | None = None,
    ):
        if clock is None:
            raise ValueError(f"{type(self).__name__} needs a clock (its board's ClockChoice)")
        self.clock_choice = clock
        self.clock_hz, self.baud = clock.hz, clock.baud
        self.divisor = baud_divisor(self.clock_hz, self.baud)
        self.params = dict(params or {})
        self.core = core(clock_hz=self.clock_hz, baud=self.baud, **self.params)
        self.link = BoardLink(self.divisor, self.core, reset_leaves=self.link_reset_leaves)

    @abc.abstractmethod
    def clock(self, m: Module, platform, clk: Signal) -> Signal:
        """Drive ``clk`` at :attr:`clock_hz` from the board's oscillator (a PLL set up
        from ``self.clock_choice.pll``); return the PLL's lock signal."""

    @abc.abstractmethod
    def leds(self, m: Module, platform, status: dict[str, Signal]) -> None:
        """Drive the board's LEDs from ``status`` (heartbeat, busy, error, rx, tx)."""

    def flash(self, m: Module, platform, spi) -> None:
        """Connect a core's SPI flash pins (``sck``, ``copi``, ``cs`` low-active as a
        level, ``cipo``; rtl/compact/soc.py SPI_SIGNATURE) to the board's flash."""
        raise ValueError(f"the {type(self).__name__} has no SPI flash for the core to boot from")

    def elaborate(self, platform):
        m = Module()
        # sync: the core clock, a domain without a reset signal. The power-on reset
        # ``por_rst`` is high from configuration until the PLL has locked and por_cycles
        # more cycles have passed (again whenever the lock is lost); it is a flip-flop,
        # and the link and the core take it as a synchronous input, so that the core can
        # carry it to its blocks through registers (the Device: a flip-flop per block,
        # rtl/reset.py) instead of one net to every control register. The counter starts
        # at 0 from the bitstream.
        m.domains.sync = cd_sync = ClockDomain("sync", reset_less=True)
        locked = self.clock(m, platform, cd_sync.clk)
        # no clock constraint here: nextpnr derives the PLL output's from the oscillator's
        # ``locked`` is asynchronous to the core clock: two flip-flops before it is used
        lock_sync = [Signal(name=f"lock_sync{i}") for i in range(2)]
        m.d.sync += [lock_sync[0].eq(locked), lock_sync[1].eq(lock_sync[0])]
        por = Signal(range(self.por_cycles + 1))
        por_done = por == self.por_cycles
        with m.If(~lock_sync[1]):
            m.d.sync += por.eq(0)
        with m.Elif(~por_done):
            m.d.sync += por.eq(por + 1)
        por_rst = Signal(init=1)
        m.d.sync += por_rst.eq(~por_done)

        m.submodules.link = link = self.link
        m.d.comb += link.reset.eq(por_rst)
        if "flash" in self.core.signature.members:
            self.flash(m, platform, self.core.flash)
        uart = platform.request("uart", 0, dir="-")
        rx = pin_buffer(m, "i", uart.rx, "uart_rx")
        tx = pin_buffer(m, "o", uart.tx, "uart_tx")
        m.d.comb += [link.rx.eq(rx.i), tx.o.eq(link.tx)]
        for name in ("rts", "dtr"):  # the ULX3S's FT231X drives these: inputs, unused
            if hasattr(uart, name):
                pin_buffer(m, "i", getattr(uart, name), f"uart_{name}")

        # heartbeat: bit 25 of a counter, toggling every 2**25 cycles (0.70 s at 48 MHz,
        # 0.34 s at 100 MHz)
        beat = Signal(26)
        m.d.sync += beat.eq(beat + 1)
        status = {
            "heartbeat": beat[-1],
            "busy": link.busy,
            "error": link.error,
            "rx": _stretch(m, link.rx_strobe),
            "tx": _stretch(m, link.tx_strobe),
            "reset": por_rst,
        }
        self.leds(m, platform, status)
        return m


def pin_buffer(m: Module, direction: str, port, name: str) -> io.Buffer:
    """``port`` (of a resource requested with ``dir="-"``) through an ``io.Buffer`` of
    ``direction`` (``"i"`` or ``"o"``), a submodule of ``m`` named ``name``: its ``i``
    or ``o`` is the pin's value, the port's inversion (active-low pins) applied."""
    m.submodules[name] = buf = io.Buffer(direction, port)
    return buf


def _stretch(m: Module, strobe: Signal, bits: int = 20) -> Signal:
    """High for 2**bits cycles (about 22 ms at 48 MHz) after each ``strobe`` (from the
    cycle after it).

    A down-counter of ``bits + 1`` bits loaded with ``2**bits - 1``: it runs while its
    top bit is low and stops when it wraps to all ones, so the output and the count's
    enable are one flip-flop, not a ``bits``-wide zero test (the 128-lane ULX3S build
    at cd6a36f had 16 endpoints of the test's counter past 10 ns)."""
    count = Signal(bits + 1, init=(1 << (bits + 1)) - 1)
    with m.If(strobe):
        m.d.sync += count.eq((1 << bits) - 1)
    with m.Elif(~count[-1]):
        m.d.sync += count.eq(count - 1)
    return ~count[-1]
