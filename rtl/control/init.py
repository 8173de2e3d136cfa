"""InitWriter: the initial training state of spec 10.1, written into the weight and latent
memories.

``init = 0`` (zero): every weight 0. ``init = 1`` (random): ``W_l`` is the row-major
digits of the stream (step 65535, pair 0, layer ``l``, A) under the run's digit
distribution, from one :class:`~pentegg.rtl.noise.keyer.StreamKeyer` and one
:class:`~pentegg.rtl.noise.prng.PentaryStreamCore` (one digit per beat). With the latent
update, ``V = sat(W << q, -Vmax, Vmax)`` (``q = latent_shift``), so ``PQUANT(V, q) = W``.

Memory layouts (the accelerator's, docs/rtl.md):

* weights: spec 1.4, each matrix packed row-major five digits to a 16-bit word (digit
  ``i`` in bits ``[3i+2:3i]``), starting on a word boundary, layers one after another;
* latent: one ``V`` per word, in the order of the weights (layers one after another,
  row-major), no padding.

Throughput: one weight per cycle (zero), one per cycle after each layer's stream start
(random: the keyer's 29 cycles for the first layer, 15 for the others). Latency: a
digit is registered where it is taken (with its position and whether it ends a word),
packed and turned into its latent value in the next cycle, and the writes leave from
registers after that, two cycles after their digit (the stream core's word through the
digit decode, the packing and the latent shift and saturation into the memories' write
data was the ECP5 accelerator's critical path at 6de42bf and d56cfec; through the
decode and the packing into the writes' registers, 6 of the 128-lane ULX3S build's 80
endpoints past 10 ns at 5e791fe); ``busy`` stays high until the last write has left.
Widths: a layer of ``out x fan`` weights is walked by a row and a column counter (no
multiplier).
"""

from __future__ import annotations

from amaranth import Array, Const, Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..noise.keyer import StreamKeyer
from ..noise.prng import DIGIT_DISTS, PentaryStreamCore
from ..params import check_choice, check_int

__all__ = ["InitWriter"]

INIT_STEP = 0xFFFF


class InitWriter(wiring.Component):
    """Writes the initial weights (and latent integers) of a network (module docstring).

    Parameters
    ----------
    max_layers : int
        1..8.
    width_bits : int
        Width of a layer-width input (``n_l`` up to ``2**width_bits - 1``).
    waddr_bits, vaddr_bits : int
        Address widths of the weight and latent memories.
    update : str
        ``"latent"`` (write V too) or ``"pentary"`` (weights only).
    latent_bits : int
        3..8.
    digits : str
        ``"binomial"`` or ``"uniform"``.

    Interface attributes
    --------------------
    start : In(1)
        Strobe; the other inputs stay stable until ``busy`` falls.
    init : In(1)
        0 zero, 1 random.
    seed : In(32), n_layers : In(4), widths : In(ArrayLayout(width_bits, max_layers + 1)),
    latent_shift : In(4)
    busy : Out(1)
    w_addr : Out(waddr_bits), w_data : Out(16), w_en : Out(1)
    v_addr : Out(vaddr_bits), v_data : Out(signed(latent_bits)), v_en : Out(1)
    """

    def __init__(
        self,
        *,
        max_layers: int,
        width_bits: int,
        waddr_bits: int,
        vaddr_bits: int,
        update: str = "latent",
        latent_bits: int = 8,
        digits: str = "binomial",
    ):
        self.max_layers = check_int("max_layers", max_layers, 1, 8)
        self.width_bits = check_int("width_bits", width_bits, 1, 16)
        self.update = check_choice("update", update, ("latent", "pentary"))
        self.latent_bits = check_int("latent_bits", latent_bits, 3, 8)
        self.digits = check_choice("digits", digits, DIGIT_DISTS)
        super().__init__(
            {
                "start": In(1),
                "init": In(1),
                "seed": In(32),
                "n_layers": In(4),
                "widths": In(data.ArrayLayout(width_bits, max_layers + 1)),
                "latent_shift": In(4),
                "busy": Out(1),
                "w_addr": Out(waddr_bits),
                "w_data": Out(16),
                "w_en": Out(1),
                "v_addr": Out(vaddr_bits),
                "v_data": Out(signed(latent_bits)),
                "v_en": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        # the write ports' values before their output registers
        w_addr, v_addr = Signal.like(self.w_addr), Signal.like(self.v_addr)
        w_data, w_en = Signal.like(self.w_data), Signal()
        v_data, v_en = Signal.like(self.v_data), Signal()
        m.d.sync += [
            self.w_addr.eq(w_addr),
            self.w_data.eq(w_data),
            self.w_en.eq(w_en),
            self.v_addr.eq(v_addr),
            self.v_data.eq(v_data),
            self.v_en.eq(v_en),
        ]
        m.submodules.keyer = keyer = StreamKeyer()
        m.submodules.core = core = PentaryStreamCore(digits=self.digits, digits_per_beat=1)
        wb = self.width_bits
        layer = Signal(3)
        o = Signal(wb)  # row
        k = Signal(wb + 1)  # column, 0..fan-1
        pos = Signal(range(5))  # digit position in the word being packed
        word = Signal(15)  # the digits of the word so far (code i at bits 3i)
        first_key = Signal()
        # the layer's last column and row, registered in LAYER (the layer is stable from
        # then on): the widths' selection by the layer and the adders before the compares
        # were in the write logic's enables (18 of the 128-lane ULX3S build's 413
        # endpoints past 10 ns at cd6a36f, seed 1, were the initializer's)
        k_max = Signal.like(k, reset_less=True)  # fan - 1 = the layer's input width
        o_max = Signal(wb + 1, reset_less=True)  # out - 1
        # k == k_max, o == o_max and pos == 4 as flags set with k, o and pos: the compares
        # before the write address's increment and enables had 17 of the 128-lane ULX3S
        # build's 583 endpoints past 10 ns at 3f25487 (seed 1, 11.23 ns, 7 levels)
        last_k = Signal()
        last_o = Signal()
        pos4 = Signal()

        m.d.comb += [
            keyer.seed.eq(self.seed),
            keyer.cancel.eq(0),
            keyer.k.payload.ab.eq(0),  # A
            keyer.k.payload.layer.eq(layer),
            keyer.k.payload.pair.eq(0),
            keyer.k.payload.step.eq(INIT_STEP),
            keyer.k.payload.reseed.eq(first_key),
            core.x0.valid.eq(keyer.x0.valid),
            core.x0.payload.eq(keyer.x0.payload),
            keyer.x0.ready.eq(1),
        ]

        # the digit of this cycle (valid when `take`), registered with its position and
        # whether it ends a word: the packing and the latent value are made from those
        digit = Signal(signed(3))
        take = Signal()
        d1_digit = Signal(signed(3), reset_less=True)
        d1_pos = Signal.like(pos, reset_less=True)
        d1_take = Signal()
        d1_ends = Signal()  # the digit ends a word (the fifth, or a layer's last)
        m.d.sync += [
            d1_digit.eq(digit),
            d1_pos.eq(pos),
            d1_take.eq(take),
            d1_ends.eq(pos4 | (last_k & last_o)),
        ]
        code = d1_digit.as_unsigned()
        m.d.comb += w_data.eq(word | (code << (3 * d1_pos)))

        # V = sat(digit << q): the four nonzero values, sat(+-1 << q) and sat(+-2 << q),
        # are registers computed from a copy of latent_shift (stable from start on; the
        # first digit comes two cycles after start at the earliest: the copy is taken
        # at the start edge, the values a cycle later), and the digit selects one (the
        # shift and the saturation after the stream core's decode were the ECP5
        # synthesis's critical path at 1f1103a, 13 levels; from the register file's
        # latent_shift through them, 16 of the 128-lane accelerator's endpoints arrived
        # after 13.3 ns at e4e6c56)
        vmax = (1 << (self.latent_bits - 1)) - 1
        q = Signal.like(self.latent_shift, name="q_copy", reset_less=True)
        m.d.sync += q.eq(self.latent_shift)

        # each value a table of q (a few input bits per output bit), not a shifter and
        # two compares: those had 42 of the 128-lane ULX3S build's 948 endpoints past 10
        # ns (23e1484, seed 2, 12.30 ns at worst)
        def sat_shift(d):
            vals = [max(-vmax, min(vmax, d << qq)) for qq in range(1 << len(q))]
            return Array(Const(v, signed(self.latent_bits)) for v in vals)[q]

        v_of = {d: Signal(signed(self.latent_bits), name=f"v_of{d + 2}") for d in (-2, -1, 1, 2)}
        m.d.sync += [v.eq(sat_shift(d)) for d, v in v_of.items()]
        with m.Switch(d1_digit):
            for d, v in v_of.items():
                with m.Case(d):
                    m.d.comb += v_data.eq(v)
            with m.Default():
                m.d.comb += v_data.eq(0)
        m.d.comb += [
            v_en.eq(d1_take if self.update == "latent" else 0),
            w_en.eq(d1_take & d1_ends),
        ]
        with m.If(d1_take):
            m.d.sync += v_addr.eq(v_addr + 1)
            with m.If(d1_ends):
                m.d.sync += [word.eq(0), w_addr.eq(w_addr + 1)]
            with m.Else():
                m.d.sync += word.eq(w_data[:15])
        with m.If(take):
            with m.If(pos4 | (last_k & last_o)):
                m.d.sync += [pos.eq(0), pos4.eq(0)]
            with m.Else():
                m.d.sync += [pos.eq(pos + 1), pos4.eq(pos == 3)]
            with m.If(last_k):
                m.d.sync += [
                    k.eq(0),
                    last_k.eq(k_max == 0),
                    o.eq(o + 1),
                    last_o.eq(o + 1 == o_max),
                ]
            with m.Else():
                m.d.sync += [k.eq(k + 1), last_k.eq(k + 1 == k_max)]

        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [
                        layer.eq(0),
                        first_key.eq(1),
                        w_addr.eq(0),
                        v_addr.eq(0),
                    ]
                    m.next = "LAYER"
            with m.State("LAYER"):
                m.d.sync += [
                    o.eq(0),
                    k.eq(0),
                    pos.eq(0),
                    pos4.eq(0),
                    k_max.eq(self.widths[layer]),
                    o_max.eq(self.widths[layer + 1] - 1),
                    last_k.eq(self.widths[layer] == 0),
                    last_o.eq(self.widths[layer + 1] == 1),
                ]
                with m.If(layer == self.n_layers):
                    m.next = "IDLE"
                with m.Elif(self.init):
                    m.next = "KEY"
                with m.Else():
                    m.next = "ZERO"
            with m.State("KEY"):
                m.d.comb += keyer.k.valid.eq(1)
                with m.If(keyer.k.ready):
                    m.d.sync += first_key.eq(0)
                    m.next = "WAIT"
            with m.State("WAIT"):  # the core loads x0 in the cycle the keyer answers
                with m.If(keyer.x0.valid):
                    m.next = "RANDOM"
            with m.State("RANDOM"):
                m.d.comb += [
                    core.o.ready.eq(1),
                    digit.eq(core.o.payload[0]),
                    take.eq(core.o.valid),
                ]
                with m.If(core.o.valid & last_k & last_o):
                    m.d.sync += layer.eq(layer + 1)
                    m.next = "LAYER"
            with m.State("ZERO"):
                m.d.comb += [digit.eq(0), take.eq(1)]
                with m.If(last_k & last_o):
                    m.d.sync += layer.eq(layer + 1)
                    m.next = "LAYER"
        # busy until the last write has left the output registers (the InitWriter test
        # checks that no write comes while busy is low)
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE") | d1_take | self.w_en | self.v_en)
        return m
