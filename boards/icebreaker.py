"""iCEBreaker (iCE40UP5K-SG48): the core at 48 MHz, the host link at 3 Mbaud.

* Clock: the 12 MHz oscillator (pin 35) through ``SB_PLL40_PAD`` to 48 MHz (DIVR 0,
  DIVF 63, DIVQ 4, FILTER_RANGE 1, from ``icepll -i 12 -o 48``; VCO 768 MHz), or 42 MHz
  (``--param clock_mhz=42``: DIVF 55; VCO 672 MHz), the compact core's clock before
  ``447ffe2``.
* UART: FT2232H channel B (pins 6 rx, 9 tx) at 3 Mbaud, 16 clocks per bit (exact; 14 at
  42 MHz).
* LEDs: green (``led#1``) heartbeat, blinking fast while the core is busy; red
  (``led#0``) error. The break-off PMOD's five LEDs, when attached, show each signal
  alone: heartbeat, busy, error, rx and tx activity.

docs/boards.md explains the choices.
"""

from __future__ import annotations

from typing import Any

from amaranth import Instance, Module, Signal
from amaranth_boards.icebreaker import ICEBreakerPlatform

from .common import Board, BoardTop, ClockChoice, pin_buffer

__all__ = [
    "BOARD",
    "CLOCKS",
    "COMPACT_CLOCK_MHZ",
    "COMPACT_PARAMS",
    "DEFAULT_PARAMS",
    "ICEBreakerTop",
]

#: Core parameters of an iCEBreaker build (``--param NAME=VALUE`` overrides them): the
#: ``Device``'s frame buffer and the accelerator's sizes, the smallest that still run a
#: small task, with the training set in the UP5K's four SPRAMs (96 KiB of samples: the
#: digits set's 1,437 x 64 bytes; 2,048 labels). Even these do not fit the UP5K's logic
#: today (:data:`DEVICE_UNFIT`).
DEFAULT_PARAMS: dict[str, Any] = {
    "frame_bytes": 512,
    "lanes": 1,
    "max_layers": 2,
    "max_width": 64,
    "rank": 4,
    "noise_depth": 256,
    "max_batch": 256,
    "max_population": 64,
    "sample_bytes": 98304,
    "label_words": 2048,
    "batch_words": 256,
}


#: Core parameters of the compact core (``--core compact``, the default here): the RV32I
#: core and its firmware in the UP5K's SPRAM, booted from the SPI flash at 1 MiB; the
#: digits-sized maxima (64-wide layers, population 256); a sample memory for one batch of
#: 256 digits samples (the host sends each step's batch: pentegg.device.Trainer).
COMPACT_PARAMS: dict[str, Any] = {
    # the datapath (rtl/compact/engine.py): the forward pass of a pair in hardware
    "engine": 1,
    "boot": "flash",
    "ram_bytes": 128 * 1024,
    "flash_offset": 0x10_0000,
    "rx_depth": 512,
    "frame_bytes": 2048,
    "max_layers": 2,
    "max_width": 64,
    "rank": 4,
    "max_population": 256,
    "max_batch": 256,
    "sample_bytes": 16384,
    "label_words": 256,
    "batch_words": 256,
    "member_bytes": 4096,
    "logit_bytes": 1024,
}


#: ``--param clock_mhz=N``: the core clock (SB_PLL40_PAD settings: ``icepll -i 12 -o 48``,
#: VCO 768 MHz; 42 MHz the same with DIVF 55, VCO 672 MHz) and the FT2232H rate exact at
#: it, 16 (14) clocks per bit.
CLOCKS: dict[int, ClockChoice] = {
    48: ClockChoice(48_000_000, 3_000_000, {"DIVR": 0, "DIVF": 63, "DIVQ": 4, "FILTER_RANGE": 1}),
    42: ClockChoice(42_000_000, 3_000_000, {"DIVR": 0, "DIVF": 55, "DIVQ": 4, "FILTER_RANGE": 1}),
}

#: the compact core's clock: at 447ffe2 its builds meet 48 MHz at seeds 1-3 (48.57, 48.29,
#: 48.57 MHz; 47.76 and 45.63 at seeds 4 and 5), at d7683b5 at seeds 1 and 2 (48.64, 49.59;
#: seeds 3-5 do not route), and ``pentegg build`` places again with
#: the next seed when one misses; 42 MHz (``--param clock_mhz=42``) is met at every seed
#: tried (docs/boards.md, "iCEBreaker")
COMPACT_CLOCK_MHZ = 48


class ICEBreakerTop(BoardTop):
    def clock(self, m: Module, platform, clk: Signal) -> Signal:
        clk12 = platform.request("clk12", dir="-")
        pll = self.clock_choice.pll
        locked = Signal()
        m.submodules.pll = Instance(
            "SB_PLL40_PAD",
            p_FEEDBACK_PATH="SIMPLE",
            p_DIVR=pll["DIVR"],
            p_DIVF=pll["DIVF"],
            p_DIVQ=pll["DIVQ"],
            p_FILTER_RANGE=pll["FILTER_RANGE"],
            i_PACKAGEPIN=clk12.io,
            i_RESETB=1,
            i_BYPASS=0,
            o_PLLOUTGLOBAL=clk,
            o_LOCK=locked,
        )
        return locked

    def flash(self, m: Module, platform, spi) -> None:
        f = platform.request("spi_flash_1x", 0, dir="-")
        outs = ("clk", "copi", "cs", "wp", "hold")
        pins = {n: pin_buffer(m, "o", getattr(f, n), f"flash_{n}") for n in outs}
        cipo = pin_buffer(m, "i", f.cipo, "flash_cipo")
        m.d.comb += [
            pins["clk"].o.eq(spi.sck),
            pins["copi"].o.eq(spi.copi),
            pins["cs"].o.eq(~spi.cs),  # the port inverts: cs.o = 1 selects the flash
            spi.cipo.eq(cipo.i),
            pins["wp"].o.eq(0),  # write-protect and hold released
            pins["hold"].o.eq(0),
        ]

    def leds(self, m: Module, platform, status: dict[str, Signal]) -> None:
        fast = Signal(23)  # about 6 Hz at 48 MHz
        m.d.sync += fast.eq(fast + 1)

        def led(index):  # the port inverts where the LED is active-low
            return pin_buffer(m, "o", platform.request("led", index, dir="-"), f"led{index}").o

        m.d.comb += [
            led(1).eq(status["heartbeat"] ^ (status["busy"] & fast[-1])),  # green
            led(0).eq(status["error"]),  # red
        ]
        for index, name in enumerate(("heartbeat", "busy", "error", "rx", "tx"), start=2):
            m.d.comb += led(index).eq(status[name])


def _platform():
    p = ICEBreakerPlatform()
    p.add_resources(p.break_off_pmod)
    return p


#: why ``--core device`` is refused (without ``--force``): measured with ``pentegg build
#: --board icebreaker --core device --force`` at commit 86d58ea (docs/boards.md)
DEVICE_UNFIT = (
    "the device core does not fit the iCE40UP5K: with this board's smallest parameters "
    "(1 lane) it needs 15,084 logic cells of the UP5K's 5,280 and 66 block RAMs of 30 "
    "(measured at commit 86d58ea, docs/boards.md); build --core loopback, use --board "
    "ulx3s-85f, or add --force to run the build anyway"
)

BOARD = Board(
    name="icebreaker",
    platform=_platform,
    top=ICEBreakerTop,
    clocks=CLOCKS,
    default_clock_mhz=48,
    defaults=DEFAULT_PARAMS,
    default_core="compact",
    core_defaults={"compact": COMPACT_PARAMS},
    core_clock_mhz={"compact": COMPACT_CLOCK_MHZ},
    bitstream="top.bin",
    family="ice40",
    program_flash=("-b", "ice40_generic"),
    program_sram=("-b", "ice40_generic", "-m"),
    default_target="flash",
    unfit={"device": DEVICE_UNFIT},
)
