"""ULX3S-85F (LFE5U-85F-6BG381): the Device's 128 lanes at 100 MHz, the host link at 3 Mbaud.

* Clock: the 25 MHz oscillator (G2) through ``EHXPLLL`` (feedback from CLKOP) to the
  core clock, 100 MHz by default (CLKI_DIV 1, CLKFB_DIV 4, CLKOP_DIV 6, CLKOP_CPHASE 2,
  from ``ecppll -i 25 -o 100``; VCO 600 MHz): the 128-lane Device met it at all three
  placement seeds of 44e9bb5 (105.16, 100.60, 102.11 MHz; docs/boards.md); 75 MHz was
  the default until then (first met at de0e2ae), 60 MHz before.
  ``--param clock_mhz=N`` picks any of :data:`CLOCKS` (30, 40, 45, 60, 75, 90, 100 MHz).
* UART: the FT231X (M1 rx, L4 tx; shared with the JTAG programmer) at the fastest rate
  the FT231X makes exactly: 3 Mbaud at 30, 45 (15 clocks per bit), 60 (20), 75 (25) and
  90 MHz (30) and, with bits of 33 and 34 clocks (rtl/link/uart.py), 100 MHz (100/3);
  2 Mbaud at 40 (20 clocks per bit). 25 MHz itself has no divisor for 2 or 3 Mbaud
  (12.5, 8.33 clocks per bit), hence the PLL.
* LEDs ``led#0-7``: 0 heartbeat, 1 busy, 2 error, 3 rx activity, 4 tx activity, 7 reset.

docs/boards.md explains the choices.
"""

from __future__ import annotations

from typing import Any

from amaranth import Instance, Module, Signal
from amaranth_boards.ulx3s import ULX3S_85F_Platform

from .common import Board, BoardTop, ClockChoice, pin_buffer

__all__ = ["BOARD", "CLOCKS", "DEFAULT_PARAMS", "ULX3STop"]

#: Core parameters of a ULX3S-85F build (``--param NAME=VALUE`` overrides them): the
#: ``Device``'s frame buffer and the accelerator's sizes, for the digits default (network
#: 64-64-10, population 256, batch 256, 1,437 x 64 training bytes). 128 lanes (the 128
#: pairs of population 256 in one round) at 100 MHz: a digits step of about 0.95 M
#: cycles (docs/resources.md), 9.5 ms, where 64 lanes take 1,721,858 cycles (86d58ea),
#: 23.0 ms at 75 MHz (docs/boards.md); 33 update lanes and a sample memory of the
#: digits set's size make them fit the block RAM (161 of 208 DP16KD at 005e676; 180 at
#: b56882b, where Z is read through the block RAMs' output registers, 89.05 MHz).
DEFAULT_PARAMS: dict[str, Any] = {
    "frame_bytes": 8192,
    "lanes": 128,
    "max_layers": 2,
    "max_width": 64,
    "rank": 4,
    "max_batch": 256,
    "max_population": 256,
    # 1,437 x 64 = 91,968 bytes of digits training samples, in 45 blocks of 2 KiB
    "sample_bytes": 92160,
    "label_words": 2048,
    "batch_words": 2048,
    # a weight row's half (33 of its 65 entries) per update cycle: the update 81,316
    # cycles a digits step; 65 (a whole row, the 64-lane build's) leaves too few DP16KD
    # beside 128 lanes
    "update_lanes": 33,
    # the noise banks written three 6-bit lane slots at a time: two whole 9-bit byte
    # enables of a DP16KD (22 blocks per bank at 128 lanes instead of 32)
    "noise_write_lanes": 3,
    # rank shaping with 4 pivot pairs per sweep: 8,488 cycles instead of 33,061
    "pivots": 4,
    # three cycles of memory read latency: the sample memory's 45-block read multiplexer
    # between the DP16KD output registers and a register of its own (its copies into the
    # loader's groups had 86 of the 948 endpoints past 10 ns at 23e1484, seed 2); two
    # cycles more a step (one in the evaluation, one in shaping: `pentegg bench
    # accelerator`'s run() at lanes 8, 16-16-4, population 32, mem_latency 2 against 3)
    "mem_latency": 3,
}


def _pll(clki_div: int, clkfb_div: int, clkop_div: int, cphase: int) -> dict[str, int]:
    return {"CLKI_DIV": clki_div, "CLKFB_DIV": clkfb_div, "CLKOP_DIV": clkop_div, "CPHASE": cphase}


#: ``--param clock_mhz=N``: the core clocks (EHXPLLL settings from ``ecppll -i 25 -o N``,
#: all exact; VCO = N x CLKOP_DIV) and the FT231X rate exact at each (docs/boards.md).
CLOCKS: dict[int, ClockChoice] = {
    30: ClockChoice(30_000_000, 3_000_000, _pll(5, 6, 20, 9)),  # VCO 600 MHz, 10 per bit
    40: ClockChoice(40_000_000, 2_000_000, _pll(5, 8, 15, 7)),  # VCO 600 MHz, 20 per bit
    45: ClockChoice(45_000_000, 3_000_000, _pll(5, 9, 13, 6)),  # VCO 585 MHz, 15 per bit
    60: ClockChoice(60_000_000, 3_000_000, _pll(5, 12, 10, 4)),  # VCO 600 MHz, 20 per bit
    75: ClockChoice(75_000_000, 3_000_000, _pll(1, 3, 8, 4)),  # VCO 600 MHz, 25 per bit
    90: ClockChoice(90_000_000, 3_000_000, _pll(5, 18, 7, 3)),  # VCO 630 MHz, 30 per bit
    100: ClockChoice(100_000_000, 3_000_000, _pll(1, 4, 6, 2)),  # VCO 600 MHz, 100/3 per bit
}
DEFAULT_CLOCK_MHZ = 100


class ULX3STop(BoardTop):
    # the power-on reset reaches the UARTs through flip-flops of their own: its net
    # across the die into the transmitter was the 128-lane build's critical path
    link_reset_leaves = True

    def clock(self, m: Module, platform, clk: Signal) -> Signal:
        clk25 = pin_buffer(m, "i", platform.request("clk25", 0, dir="-"), "clk25")
        pll = self.clock_choice.pll
        locked = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI="25",
            a_FREQUENCY_PIN_CLKOP=f"{self.clock_hz / 1e6:g}",
            a_ICP_CURRENT="12",
            a_LPF_RESISTOR="8",
            a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED",
            p_INTFB_WAKE="DISABLED",
            p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED",
            p_OUTDIVIDER_MUXA="DIVA",
            p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC",
            p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=pll["CLKI_DIV"],
            p_CLKOP_ENABLE="ENABLED",
            p_CLKOP_DIV=pll["CLKOP_DIV"],
            p_CLKOP_CPHASE=pll["CPHASE"],
            p_CLKOP_FPHASE=0,
            p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=pll["CLKFB_DIV"],
            i_RST=0,
            i_STDBY=0,
            i_CLKI=clk25.i,
            i_CLKFB=clk,
            i_PHASESEL0=0,
            i_PHASESEL1=0,
            i_PHASEDIR=1,
            i_PHASESTEP=1,
            i_PHASELOADREG=1,
            i_PLLWAKESYNC=0,
            i_ENCLKOP=0,
            o_CLKOP=clk,
            o_LOCK=locked,
        )
        return locked

    def leds(self, m: Module, platform, status: dict[str, Signal]) -> None:
        order = {0: "heartbeat", 1: "busy", 2: "error", 3: "rx", 4: "tx", 7: "reset"}
        for index, name in order.items():
            led = pin_buffer(m, "o", platform.request("led", index, dir="-"), f"led{index}")
            m.d.comb += led.o.eq(status[name])


BOARD = Board(
    name="ulx3s-85f",
    platform=ULX3S_85F_Platform,
    top=ULX3STop,
    clocks=CLOCKS,
    default_clock_mhz=DEFAULT_CLOCK_MHZ,
    defaults=DEFAULT_PARAMS,
    bitstream="top.bit",
    family="ecp5",
    program_flash=("-b", "ulx3s", "-f"),
    program_sram=("-b", "ulx3s", "-m"),
    default_target="sram",
)
