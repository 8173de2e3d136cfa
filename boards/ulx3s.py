"""ULX3S-85F (LFE5U-85F-6BG381): the core at 75 MHz, the host link at 3 Mbaud.

* Clock: the 25 MHz oscillator (G2) through ``EHXPLLL`` to 75 MHz (CLKI_DIV 1,
  CLKFB_DIV 3, CLKOP_DIV 8, CLKOP_CPHASE 4, feedback from CLKOP, from
  ``ecppll -i 25 -o 75``; VCO 600 MHz).
* UART: the FT231X (M1 rx, L4 tx; shared with the JTAG programmer) at 3 Mbaud, 25 clocks
  per bit (exact). 3 Mbaud is the FT231X's maximum; 25 MHz has no exact divisor for it,
  hence the PLL.
* LEDs ``led#0-7``: 0 heartbeat, 1 busy, 2 error, 3 rx activity, 4 tx activity, 7 reset.

docs/boards.md explains the choices.
"""

from __future__ import annotations

from typing import Any

from amaranth import Instance, Module, Signal
from amaranth_boards.ulx3s import ULX3S_85F_Platform

from .common import Board, BoardTop

__all__ = ["BOARD", "DEFAULT_PARAMS", "ULX3STop"]

#: Core parameters of a ULX3S-85F build (``--param NAME=VALUE`` overrides them): the
#: ``Device``'s frame buffer and the accelerator's sizes.
DEFAULT_PARAMS: dict[str, Any] = {
    "frame_bytes": 2048,
    "lanes": 16,
    "max_layers": 2,
    "max_width": 64,
    "rank": 4,
    "max_batch": 1024,
    "max_population": 256,
    "sample_bytes": 4096,
    "label_words": 1024,
    "batch_words": 1024,
}


class ULX3STop(BoardTop):
    clock_hz = 75_000_000
    baud = 3_000_000

    def clock(self, m: Module, platform, clk: Signal) -> Signal:
        clk25 = platform.request("clk25", 0)
        locked = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI="25",
            a_FREQUENCY_PIN_CLKOP="75",
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
            p_CLKI_DIV=1,
            p_CLKOP_ENABLE="ENABLED",
            p_CLKOP_DIV=8,
            p_CLKOP_CPHASE=4,
            p_CLKOP_FPHASE=0,
            p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=3,
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
            m.d.comb += platform.request("led", index).o.eq(status[name])


BOARD = Board(
    name="ulx3s-85f",
    platform=ULX3S_85F_Platform,
    top=ULX3STop,
    clock_hz=ULX3STop.clock_hz,
    baud=ULX3STop.baud,
    defaults=DEFAULT_PARAMS,
    bitstream="top.bit",
    family="ecp5",
    program_flash=("-b", "ulx3s", "-f"),
    program_sram=("-b", "ulx3s", "-m"),
    default_target="sram",
)
