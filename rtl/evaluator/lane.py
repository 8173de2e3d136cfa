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
No register of the lane takes the reset: the pass engine holds ``flush`` high through a
reset (its per-lane control registers a cycle after its own), which clears the
accumulators (so the reset net does not reach them, and their synchronous clear is the
flush alone).

A beat's term (the selected, possibly inverted activation and its carry) goes through a
register of the lane before the accumulator's adder: the digit's decode, the selects and
the adder were one path from the group's control copies (the 128-lane accelerator at
``e4e6c56``: 79 accumulator endpoints arrived after 13.3 ns, the worst at 15.56 ns).
The flush is not delayed: it captures the accumulator plus the term still in that
register, so the captures are written at the flush edge as before (delaying them a
cycle cost the 16-lane evaluation 3.6 % more cycles, the finalizer taking each pass's
captures a cycle later).

Quantized mode (spec 6.1, ``quantized=True``): in a layer pass (``qe`` high) the MAC digit
is ``W[o + i, k] + s * E[o + i, k]`` in -4..4, with ``W`` broadcast and ``E`` the lane's
own digit (``nd``, its pair's perturbation) and ``s`` the member's sign. It is not formed:
``x * (W + s E) = x * W + x * (s E)``, two select-and-negate terms (``s`` flips the
negation of the E term) into one three-operand add, so no ``3x`` term and no multiplier.
The flush beat of such a pass adds the bias column's E term ``127 * s * E[o + i, n]``
(``nd`` then holds the bias digit; ``x`` is replaced by the constant 127) on its way into
the capture register; the finalizer adds ``127 * W[o + i, n]`` as in low-rank mode.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["DIGIT_CTRL", "PairLane", "clear_terms_for", "digit_ctrl"]

#: A digit decoded for a MAC: ``|d| == 2``, ``d < 0``, ``d != 0``.
DIGIT_CTRL = data.StructLayout({"is2": 1, "neg": 1, "nz": 1})


def digit_ctrl(code):
    """The :data:`DIGIT_CTRL` fields of a 3-bit digit code (spec 1.2: ``010`` is +2,
    ``110`` is -2, ``001`` and ``111`` are +-1, ``000`` is 0): two LUT inputs each."""
    return {"is2": code[1] & ~code[0], "neg": code[2], "nz": code[0] | code[1]}


def clear_terms_for(platform) -> bool:
    """The low-rank MAC's form on ``platform``: True on the iCE40 (the term register
    cleared outside beats, :class:`PairLane`'s ``clear_terms``), False elsewhere."""
    return getattr(platform, "family", None) == "ice40"


class PairLane(wiring.Component):
    """Two MACs sharing one activation operand.

    Parameters
    ----------
    acc_bits : int
        Accumulator width, 2..40: at least ``bits_for(127 * 2 * n_max)`` for passes of up
        to ``n_max`` inputs (the evaluator derives it from ``max_width``); quantized:
        ``bits_for(127 * 4 * n_max + 254)``.
    quantized : bool
        Build the quantized-mode MAC (ports ``qe`` and ``s``; two terms per beat).
    clear_terms : bool or None
        The low-rank MAC's form (the same sums in the same cycles). False: the term
        register holds every beat's term, and a flag register, ``on`` (a beat with a
        non-zero digit), is the accumulator's enable and chooses the capture between
        the sum with the term and the accumulator: the adder's carry chain drives the
        accumulator's flip-flops directly (the ECP5's timing). True: the term register is
        cleared outside such beats (its flip-flops' synchronous reset), so that the
        accumulator adds it in every cycle and the capture takes the sum without a
        choice: no multiplexer of the accumulator's width (the iCE40's size: 56 LUT4 for
        a lane at ``acc_bits`` 15 instead of 88, Yosys alone). None (the default): True
        when elaborated for an iCE40 (:func:`clear_terms_for`).

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
        End of a pass: ``cap_i <= acc_i``, ``acc_i <= 0`` (``en`` is ignored); with
        ``qe``: ``cap_i <= acc_i + 127 * s * nd_i``. High through a reset (the driver's
        duty: the accumulators take no reset).
    qe : In(1), s : In(1)
        Quantized builds only. ``qe``: a layer pass of quantized mode, beats add
        ``x * (w_i + s * nd_i)`` (``src`` must be 0); ``s``: 1 negates the ``nd`` term.
    cap : Out(ArrayLayout(signed(acc_bits), 2))
        The two sums of the last flushed pass, from the cycle after the flush until the
        next flush.

    Latency: a beat's term is registered at the clock edge it is presented at and added
    to the accumulator at the next; ``cap`` changes at the flush edge (the term of the
    beat before the flush included), and a beat right after the flush starts the next
    sum. Throughput: one beat per cycle, one flush per pass (both modes).
    """

    def __init__(self, acc_bits: int, quantized: bool = False, clear_terms: bool | None = None):
        if not isinstance(acc_bits, int) or not 2 <= acc_bits <= 40:
            raise ValueError(f"acc_bits={acc_bits!r} is not an integer in 2..40")
        self.acc_bits = acc_bits
        self.quantized = bool(quantized)
        if clear_terms not in (None, True, False):
            raise ValueError(f"clear_terms={clear_terms!r} is not None, True or False")
        self.clear_terms = clear_terms
        ports = {
            "x": In(signed(8)),
            "w": In(data.ArrayLayout(DIGIT_CTRL, 2)),
            "nd": In(data.ArrayLayout(signed(3), 2)),
            "src": In(1),
            "en": In(1),
            "flush": In(1),
            "cap": Out(data.ArrayLayout(signed(acc_bits), 2)),
        }
        if self.quantized:
            ports.update({"qe": In(1), "s": In(1)})
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        x = self.x
        if self.quantized:
            self._quantized(m)
            return m
        clear = clear_terms_for(platform) if self.clear_terms is None else self.clear_terms
        for i in range(2):
            own = digit_ctrl(self.nd[i].as_unsigned())
            is2 = Mux(self.src, own["is2"], self.w[i].is2)
            neg = Mux(self.src, own["neg"], self.w[i].neg)
            nz = Mux(self.src, own["nz"], self.w[i].nz)
            mag = Mux(is2, x << 1, x)  # 9 bits, signed
            # the beat's term, registered: ones' complement and the carry-in (+neg); a
            # zero digit, an idle cycle and the flush leave the accumulator alone
            on = Signal(name=f"on{i}", reset_less=True)  # (the enable form's)
            term = Signal(signed(10), name=f"term{i}", reset_less=True)
            cin = Signal(name=f"cin{i}", reset_less=True)
            if clear:  # (clear_terms) zero outside a beat with a non-zero digit
                with m.If(self.en & nz & ~self.flush):
                    m.d.sync += [term.eq(Mux(neg, ~mag, mag)), cin.eq(neg)]
                with m.Else():
                    m.d.sync += [term.eq(0), cin.eq(0)]
            else:
                m.d.sync += [
                    on.eq(self.en & nz & ~self.flush),
                    term.eq(Mux(neg, ~mag, mag)),
                    cin.eq(neg),
                ]
            acc = self._acc(i)
            cap = self._cap(m, i)
            total = acc + term + cin
            if clear:  # the term is zero outside beats: the sum, every cycle
                with m.If(self.flush):
                    m.d.sync += [acc.eq(0), cap.eq(total)]
                with m.Else():
                    m.d.sync += acc.eq(total)
                continue
            # ``on`` is the accumulator's enable and the flush its synchronous clear (the
            # flip-flops' CE and LSR), so the adder's carry chain drives its flip-flops
            # directly; the choice by ``on`` is the capture's alone. (One choice shared
            # by both had put a LUT between the chain and the accumulator: 30 of the
            # 128-lane ULX3S build's 65 endpoints past 9.3 ns at dd3e446, seed 2.)
            with m.If(self.flush):
                m.d.sync += [acc.eq(0), cap.eq(Mux(on, total, acc))]
            with m.Elif(on):
                m.d.sync += acc.eq(total)
        return m

    def _acc(self, i):
        """The accumulator of MAC ``i``: no reset; a flush clears it, and ``flush`` is
        high through a reset (a reset mid-pass must not leave a partial sum)."""
        return Signal(signed(self.acc_bits), name=f"acc{i}", reset_less=True)

    def _cap(self, m, i):
        """The capture register of MAC ``i``: data, read only after a flush has written it,
        so it takes no reset (the accelerator's reset net reaches only control state)."""
        cap = Signal(signed(self.acc_bits), name=f"cap{i}", reset_less=True)
        m.d.comb += self.cap[i].eq(cap)
        return cap

    def _quantized(self, m):
        x = self.x
        xe = Mux(self.flush, 127, x)  # the bias column's input, for the E term at flush
        for i in range(2):
            own = digit_ctrl(self.nd[i].as_unsigned())
            # the W term (broadcast weight, or the lane's own digit in a u-row pass)
            is2 = Mux(self.src, own["is2"], self.w[i].is2)
            neg = Mux(self.src, own["neg"], self.w[i].neg)
            nz = Mux(self.src, own["nz"], self.w[i].nz) & ~self.flush
            mag = Mux(is2, x << 1, x)
            tw = Mux(nz, Mux(neg, ~mag, mag), 0)
            cw = nz & neg
            # the E term: s * E[o + i, k] times x (times 127 at the flush)
            e_on = self.qe & own["nz"]
            e_neg = own["neg"] ^ self.s
            emag = Mux(own["is2"], xe << 1, xe)
            te = Mux(e_on, Mux(e_neg, ~emag, emag), 0)
            ce = e_on & e_neg
            # a beat's terms and carries, registered (zero outside beats); the flush adds
            # them and the bias column's E term (from this cycle's inputs) to the capture
            on = self.en & ~self.flush
            tw_r = Signal(signed(10), name=f"tw{i}", reset_less=True)
            te_r = Signal(signed(10), name=f"te{i}", reset_less=True)
            cw_r = Signal(name=f"cw{i}", reset_less=True)
            ce_r = Signal(name=f"ce{i}", reset_less=True)
            m.d.sync += [
                tw_r.eq(Mux(on, tw, 0)),
                te_r.eq(Mux(on, te, 0)),
                cw_r.eq(on & cw),
                ce_r.eq(on & ce),
            ]
            acc = self._acc(i)
            cap = self._cap(m, i)
            total = acc + tw_r + te_r + cw_r + ce_r
            with m.If(self.flush):
                m.d.sync += [acc.eq(0), cap.eq(total + te + ce)]
            with m.Else():
                m.d.sync += acc.eq(total)
