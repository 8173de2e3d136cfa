"""PQUANT (spec 4.1): the five-level quantizer, as combinational logic or as a ROM image.

``PQUANT(x, f) = sign(x) * min(2, (2|x| + 2^f) >> (f + 1))``. On ``y = 2|x|`` the levels
are thresholds: level 1 when ``y >= 2^f``, level 2 when ``y >= 3 * 2^f``. Both thresholds
are multiples of ``2^o`` for any ``o <= f``, so with ``f = o + s`` the comparisons can be
made on ``y >> o`` against ``2^s`` and ``3 * 2^s``; with ``y' = y >> o`` that is

* level >= 1  iff some bit ``j >= s`` of ``y'`` is set,
* level >= 2  iff some bit ``j >= s + 2`` is set, or bits ``s + 1`` and ``s`` both are.

This module implements exactly that (no shifter, no comparator) and :func:`pquant_int`,
the same rule on Python integers, which generates ROM images for
:class:`~pentegg.rtl.noise.lrgen.LowRankGenerator`.
"""

from __future__ import annotations

from amaranth import C, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .params import check_int

__all__ = ["MAX_F", "PentaryQuantizer", "pquant_int"]

#: Largest total shift ``f`` the spec allows (spec 4.1: f in 0..30).
MAX_F = 30


def pquant_int(x: int, f: int) -> int:
    """PQUANT of one Python integer by the threshold rule the hardware uses (not golden)."""
    y = 2 * abs(x)
    if y >= 3 << f:
        level = 2
    elif y >= 1 << f:
        level = 1
    else:
        level = 0
    return -level if x < 0 else level


class PentaryQuantizer(wiring.Component):
    """PQUANT, combinational: a signed integer in, a pentary digit out (spec 4.1).

    The total shift is ``f = shift_offset + shift``: a constant when ``shift`` is given at
    elaboration, otherwise ``shift_offset`` plus the run-time input ``shift``.

    Parameters
    ----------
    width : int
        Width of the signed input ``x``, 1..32.
    shift : int or None
        Constant shift part, 0..30 - ``shift_offset``. ``None`` (default) adds the
        run-time input ``shift``.
    shift_offset : int
        Constant part of ``f``, 0..30 (default 0).
    max_shift : int or None
        Only with a run-time shift: the largest value of the ``shift`` input,
        0..30 - ``shift_offset`` (default: that maximum). It sizes the port.

    Interface attributes
    --------------------
    x : In(signed(width))
        The integer to quantize.
    shift : In(range(max_shift + 1))
        Only with a run-time shift. Values above ``max_shift`` give an unspecified digit.
    q : Out(signed(3))
        ``PQUANT(x, f)``: a digit in -2..2, the spec's 3-bit two's-complement code.

    Latency 0 (combinational), one result per cycle.
    """

    def __init__(
        self,
        width: int,
        *,
        shift: int | None = None,
        shift_offset: int = 0,
        max_shift: int | None = None,
    ):
        self.width = check_int("width", width, 1, 32)
        self.shift_offset = check_int("shift_offset", shift_offset, 0, MAX_F)
        room = MAX_F - shift_offset
        if shift is not None:
            self.fixed_shift = check_int("shift", shift, 0, room)
            if max_shift is not None:
                raise ValueError("max_shift applies only to a run-time shift (shift=None)")
            self.max_shift = None
        else:
            self.fixed_shift = None
            self.max_shift = check_int(
                "max_shift", room if max_shift is None else max_shift, 0, room
            )
        members = {"x": In(signed(width)), "q": Out(signed(3))}
        if self.fixed_shift is None:
            members["shift"] = In(range(self.max_shift + 1))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        w = self.width
        neg = self.x[w - 1]
        mag = Signal(w)  # |x| fits in w unsigned bits, including -2^(w-1)
        m.d.comb += mag.eq(Mux(neg, -self.x, self.x))
        # y' = (2|x|) >> shift_offset; bits at or above its width are zero
        n = max(w + 1 - self.shift_offset, 0)
        yp = Signal(max(n, 1))
        if n:
            m.d.comb += yp.eq((mag << 1) >> self.shift_offset)

        def any_from(j):  # some bit j.. of y' is set
            return yp[j:n].any() if j < n else C(0, 1)

        def levels(s):  # (y' >= 2^s, y' >= 3 * 2^s)
            pair = (yp[s] & yp[s + 1]) if s + 1 < n else C(0, 1)
            return any_from(s), pair | any_from(s + 2)

        ge1 = Signal()
        ge2 = Signal()
        if self.fixed_shift is not None:
            one, two = levels(self.fixed_shift)
            m.d.comb += [ge1.eq(one), ge2.eq(two)]
        else:
            with m.Switch(self.shift):
                for s in range(self.max_shift + 1):
                    with m.Case(s):
                        one, two = levels(s)
                        m.d.comb += [ge1.eq(one), ge2.eq(two)]
        level = Signal(2)
        m.d.comb += level.eq(Mux(ge2, 2, ge1))
        m.d.comb += self.q.eq(Mux(neg, -level, level))
        return m
