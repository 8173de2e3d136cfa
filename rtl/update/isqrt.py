"""Isqrt: ``floor(sqrt(n))`` (spec 0.4), bit-serial restoring, one result bit per cycle.

The classic digit-by-digit method: with the input read two bits at a time from the top,
each cycle forms ``rem' = 4*rem + (next two bits)`` and the trial ``4*root + 1``; if
``rem' >= trial`` the result bit is 1 and ``rem = rem' - trial``, else 0 and ``rem =
rem'``. After ``k = ceil(width / 2)`` cycles ``root`` is ``floor(sqrt(n))`` and ``rem``
is ``n - root**2``. One subtractor of ``k + 2`` bits, no multiplier.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["Isqrt"]


class Isqrt(wiring.Component):
    """Integer square root of an unsigned ``width``-bit value.

    Parameters
    ----------
    width : int
        Width of ``n``, 1..64. The result has ``k = (width + 1) // 2`` bits.

    Interface attributes
    --------------------
    start : In(1)
        Strobe: sample ``n`` and begin (ignored while ``busy``).
    n : In(width)
        Radicand, unsigned; read in the ``start`` cycle only.
    root : Out(k)
        ``floor(sqrt(n))``, valid from the cycle ``done`` is high until the next ``start``.
    busy : Out(1)
        High for the ``k`` working cycles after ``start``.
    done : Out(1)
        Strobe, one cycle, ``k + 1`` cycles after the ``start`` cycle (latency ``k + 1``;
        one root every ``k + 1`` cycles when ``start`` is held high).
    """

    def __init__(self, width: int):
        self.width = check_int("width", width, 1, 64)
        self.root_bits = (self.width + 1) // 2
        super().__init__(
            {
                "start": In(1),
                "n": In(self.width),
                "root": Out(self.root_bits),
                "busy": Out(1),
                "done": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        k = self.root_bits
        nsh = Signal(2 * k)  # the radicand, shifted left two bits per cycle
        rem = Signal(k + 2)
        root = Signal(k)
        count = Signal(range(k + 1))
        busy = Signal()
        done = Signal()
        m.d.comb += [self.root.eq(root), self.busy.eq(busy), self.done.eq(done)]

        cur = Cat(nsh[-2:], rem)  # 4*rem + next two bits (fits k + 2 bits, see below)
        trial = Cat(1, 0, root)  # 4*root + 1
        diff = Signal(k + 3)
        m.d.comb += diff.eq(cur[: k + 2] - trial)
        # rem <= 2*root at every step, so 4*rem + 3 < 2^(k+2): the top bits of `cur`
        # beyond k + 2 are always zero. diff's top bit is the borrow: set if cur < trial.
        fits = ~diff[k + 2]

        m.d.sync += done.eq(0)
        with m.If(busy):
            m.d.sync += [
                nsh.eq(nsh << 2),
                rem.eq(Mux(fits, diff[: k + 2], cur[: k + 2])),
                root.eq(Cat(fits, root[:-1])),
                count.eq(count - 1),
            ]
            with m.If(count == 1):
                m.d.sync += [busy.eq(0), done.eq(1)]
        with m.Elif(self.start):
            m.d.sync += [
                nsh.eq(self.n),
                rem.eq(0),
                root.eq(0),
                count.eq(k),
                busy.eq(1),
            ]
        return m
