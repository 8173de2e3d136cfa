"""PairLane: the two multiplier-free MACs of one pair-lane (spec 5.2).

A lane evaluates one member at a time: in a *pass* over the ``n`` inputs of a layer
(the bias column excluded: the finalizer adds its term) its two MACs accumulate two rows
of the layer, ``v_i = sum_k x[k] * d_i[k]``, with ``x`` the member's activation (int8)
and ``d_i`` a digit: the broadcast weight ``W[o + i, k]`` (a layer pass) or the lane's own
noise digit ``B_0[k, 2q + i]`` (a u-row pass). A digit times an int8 is a multiplexer and
a negation, never a multiplier: ``|d|`` selects ``x`` or ``x << 1``, its sign inverts
the bits and enters the adder as the carry-in (ones' complement plus one), and a zero
digit leaves the accumulator alone (its flip-flops' enable).

After the last input of a pass comes a *flush* beat: the accumulator moves into the
capture register (where a finalizer reads it during the next pass) and restarts at zero.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["DIGIT_CTRL", "PairLane", "digit_ctrl"]

#: A digit decoded for a MAC: ``|d| == 2``, ``d < 0``, ``d != 0``.
DIGIT_CTRL = data.StructLayout({"is2": 1, "neg": 1, "nz": 1})


def digit_ctrl(code):
    """The :data:`DIGIT_CTRL` fields of a 3-bit digit code (spec 1.2: ``010`` is +2,
    ``110`` is -2, ``001`` and ``111`` are +-1, ``000`` is 0): two LUT inputs each."""
    return {"is2": code[1] & ~code[0], "neg": code[2], "nz": code[0] | code[1]}


class PairLane(wiring.Component):
    """Two MACs sharing one activation operand.

    Parameters
    ----------
    acc_bits : int
        Accumulator width, 2..40: at least ``bits_for(127 * 2 * n_max)`` for passes of up
        to ``n_max`` inputs (the evaluator derives it from ``max_width``).

    Interface attributes
    --------------------
    x : In(signed(8))
        The member's activation at this beat's input index.
    w : In(ArrayLayout(DIGIT_CTRL, 2))
        Broadcast digits, decoded (weights of the two rows of a layer pass).
    nd : In(ArrayLayout(signed(3), 2))
        The lane's own digit codes (noise of a u-row pass).
    src : In(1)
        0: the MACs use ``w``; 1: ``nd``.
    en : In(1)
        A MAC beat: ``acc_i += x * d_i``.
    flush : In(1)
        End of a pass: ``cap_i <= acc_i``, ``acc_i <= 0`` (``en`` is ignored).
    cap : Out(ArrayLayout(signed(acc_bits), 2))
        The two sums of the last flushed pass, from the cycle after the flush until the
        next flush.

    Latency: a beat is accumulated at the clock edge it is presented at; ``cap`` changes
    at the flush edge. Throughput: one beat per cycle, one flush per pass.
    """

    def __init__(self, acc_bits: int):
        if not isinstance(acc_bits, int) or not 2 <= acc_bits <= 40:
            raise ValueError(f"acc_bits={acc_bits!r} is not an integer in 2..40")
        self.acc_bits = acc_bits
        super().__init__(
            {
                "x": In(signed(8)),
                "w": In(data.ArrayLayout(DIGIT_CTRL, 2)),
                "nd": In(data.ArrayLayout(signed(3), 2)),
                "src": In(1),
                "en": In(1),
                "flush": In(1),
                "cap": Out(data.ArrayLayout(signed(acc_bits), 2)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        x = self.x
        for i in range(2):
            own = digit_ctrl(self.nd[i].as_unsigned())
            is2 = Mux(self.src, own["is2"], self.w[i].is2)
            neg = Mux(self.src, own["neg"], self.w[i].neg)
            nz = Mux(self.src, own["nz"], self.w[i].nz)
            mag = Mux(is2, x << 1, x)  # 9 bits, signed
            term = Mux(neg, ~mag, mag)  # ones' complement; +neg as the carry-in below
            acc = Signal(signed(self.acc_bits), name=f"acc{i}")
            with m.If(self.flush):
                m.d.sync += [acc.eq(0), self.cap[i].eq(acc)]
            with m.Elif(self.en & nz):
                m.d.sync += acc.eq(acc + term + neg)
        return m
