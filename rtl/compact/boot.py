"""FlashBoot: copy the compact device's firmware image from the SPI flash into its RAM.

The iCE40UP5K's SPRAM, where the firmware runs, cannot be initialised by the bitstream,
so the board's SPI flash holds the image (``pentegg build --program`` writes it at
``offset``, above the bitstream) and this block copies it after every reset, while the
core is held in reset::

    CS low, 0xAB (release from deep power-down), CS high, wait
    CS low, 0x03 (read) and the 24-bit ``offset``, then
      4 bytes: the image's length in bytes, little-endian (the ``flash_image`` header)
      the image, a 32-bit little-endian word at a time -> RAM words 0, 1, ...
    CS high: ``done``

A length of 0, above ``max_bytes`` or not a multiple of 4 (an erased flash reads
0xFFFFFFFF) sets ``error`` instead, and the core stays in reset.

SPI mode 0 at a quarter of the clock (12 MHz at the iCEBreaker's 48 MHz; the flash's
READ command runs to 50 MHz): COPI changes while SCK is low, CIPO is sampled at the end
of SCK's high half. A bit takes 4 cycles, a word 128: the iCEBreaker's firmware image
(about 14 KiB) loads in about 0.5 M cycles, 10 ms.
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["SPI_SIGNATURE", "FlashBoot"]

#: The flash's SPI pins, seen from the device: ``cs`` is the pin's level (low: selected).
SPI_SIGNATURE = wiring.Signature({"sck": Out(1), "copi": Out(1), "cs": Out(1), "cipo": In(1)})

#: Cycles with CS high after the release from power-down (tRES1, 3 us, at up to 80 MHz).
WAKE_CYCLES = 256


class FlashBoot(wiring.Component):
    """Copies the firmware image from the SPI flash into the RAM (module docstring).

    Parameters
    ----------
    offset : int
        The image's byte address in the flash (0 .. 2**24 - 4).
    max_bytes : int
        The RAM's size in bytes: a longer image is an error.

    Interface attributes
    --------------------
    spi : Out(SPI_SIGNATURE)
        The flash's pins.
    w_en : Out(1), w_addr : Out(30), w_data : Out(32)
        One RAM word written per ``w_en`` cycle (word address from 0).
    done : Out(1)
        The image is in the RAM (stays high until reset).
    error : Out(1)
        The flash held no image (stays high until reset).
    """

    def __init__(self, *, offset: int, max_bytes: int):
        self.offset = check_int("offset", offset, 0, (1 << 24) - 4)
        self.max_bytes = check_int("max_bytes", max_bytes, 4, 1 << 24)
        super().__init__(
            {
                "spi": Out(SPI_SIGNATURE),
                "w_en": Out(1),
                "w_addr": Out(30),
                "w_data": Out(32),
                "done": Out(1),
                "error": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        spi = self.spi
        cs = Signal(init=1)
        sck = Signal()
        copi = Signal()
        m.d.comb += [spi.cs.eq(cs), spi.sck.eq(sck), spi.copi.eq(copi)]

        # the bit engine: shift out `tx` MSB first and shift CIPO into `rx`, `nbits` bits
        tx = Signal(32)
        rx = Signal(32)
        nbits = Signal(range(33))
        phase = Signal(2)  # 0, 1: SCK low; 2, 3: SCK high (CIPO sampled at 3)
        # nbits != 0, a flip-flop (the compare before the state's and CS's enables was
        # among the iCEBreaker build's late paths at 48 MHz: the CS pin's register)
        shifting = Signal()
        with m.If(shifting):
            m.d.sync += phase.eq(phase + 1)
            with m.If(phase == 0):
                m.d.sync += copi.eq(tx[31])
            with m.If(phase == 1):
                m.d.sync += sck.eq(1)
            with m.If(phase == 3):
                m.d.sync += [
                    sck.eq(0),
                    rx.eq(Cat(spi.cipo, rx[:31])),
                    tx.eq(Cat(0, tx[:31])),
                    nbits.eq(nbits - 1),
                    shifting.eq(nbits != 1),
                ]

        def shift(bits: int, value: int = 0):
            m.d.sync += [
                tx.eq(value << (32 - bits)),
                nbits.eq(bits),
                phase.eq(0),
                shifting.eq(1),
            ]

        wbits = (self.max_bytes // 4).bit_length()
        words = Signal(wbits)  # words left
        last = Signal()  # the word being received is the last one
        bad = Signal()
        addr = Signal(30)
        wait = Signal(range(WAKE_CYCLES + 1))

        def le(word):  # the four bytes received, first byte lowest
            return Cat(word[24:32], word[16:24], word[8:16], word[0:8])

        with m.FSM():
            with m.State("START"):
                m.d.sync += cs.eq(0)
                shift(8, 0xAB)
                m.next = "WAKE"
            with m.State("WAKE"):
                with m.If(~shifting):
                    m.d.sync += [cs.eq(1), wait.eq(WAKE_CYCLES)]
                    m.next = "WAIT"
            with m.State("WAIT"):
                m.d.sync += wait.eq(wait - 1)
                with m.If(wait == 0):
                    m.d.sync += cs.eq(0)
                    shift(32, 0x03 << 24 | self.offset)
                    m.next = "COMMAND"
            with m.State("COMMAND"):
                with m.If(~shifting):
                    shift(32)
                    m.next = "LENGTH"
            with m.State("LENGTH"):  # the length's checks, registered
                with m.If(~shifting):
                    n = le(rx)
                    m.d.sync += [
                        bad.eq((n == 0) | (n > self.max_bytes) | (n[:2] != 0)),
                        words.eq(n[2:]),
                        last.eq(n[2:] == 1),
                    ]
                    m.next = "CHECK"
            with m.State("CHECK"):
                with m.If(bad):
                    m.d.sync += cs.eq(1)
                    m.next = "ERROR"
                with m.Else():
                    shift(32)
                    m.next = "DATA"
            with m.State("DATA"):
                with m.If(~shifting):
                    m.d.comb += [self.w_en.eq(1), self.w_data.eq(le(rx))]
                    m.d.sync += [addr.eq(addr + 1), words.eq(words - 1), last.eq(words == 2)]
                    with m.If(last):
                        m.d.sync += cs.eq(1)
                        m.next = "DONE"
                    with m.Else():
                        shift(32)
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
            with m.State("ERROR"):
                m.d.comb += self.error.eq(1)
        m.d.comb += self.w_addr.eq(addr)
        return m
