"""EFill: the quantized perturbations of one round of pairs, generated once into the noise
banks (quantized mode, spec 4.2 and 6.1).

For every active lane ``j`` (pair ``first_pair + j``) and layer ``l`` of ES step ``step``,
``E_l = PQUANT(A_l B_l^T, log4(r) + sigma_shift)`` (``out x fan``, ``fan = n_l + 1``
counting the bias column) is produced row-major, one element per cycle, by a
:class:`~pentegg.rtl.noise.lrgen.LowRankGenerator` lane (the block the update's
:class:`~pentegg.rtl.update.votes.VoteAccumulator` regenerates E with: B's rows into its
B RAM, then per row of A the ``r``-digit dot products against B's rows, an adder tree
and PQUANT) fed by one :class:`~pentegg.rtl.noise.keyer.StreamKeyer`. Element
``E_l[i, k]`` is written to the slot ``E(l, t, k)`` of lane ``j`` (``t = i // 2``, digit
``i % 2``): bank ``t % 2``, address ``e_base_l + (t // 2) * fan + k`` with
``e_base_l = sum_{l' < l} ceil(n_{l'+1} / 4) * fan_{l'}``. A lane's layer pass of rows
``2t, 2t + 1`` then reads its two digits ``(E[2t, k], E[2t+1, k])`` in one slot per
input, like a u-row pass reads its noise digits in low-rank mode.

The noise banks are written a digit at a time (write granularity 3 bits); nothing is
kept beyond the round (the next round's fill overwrites it).
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..noise.keyer import StreamKeyer
from ..noise.lrgen import LowRankGenerator

__all__ = ["EFill", "e_fill_cycles"]


def e_fill_cycles(widths, lanes_active: int, rank: int = 4) -> int:
    """Cycles of one fill (no back-pressure exists): per lane and layer the job's
    ``fan + 8 + out * fan`` cycles (ranks 1 and 4, binomial, ``fan >= 13``; one more at
    rank 16; the keys of the next job are mixed meanwhile), plus 36 for the first run key
    and the start (measured on the digits network: tests/test_rtl_evaluator_parts.py).
    Smaller fans wait a few cycles more for the A state."""
    per_lane = sum(
        (widths[l] + 1) + 8 + (rank >= 16) + widths[l + 1] * (widths[l] + 1)
        for l in range(len(widths) - 1)
    )
    return 36 + lanes_active * per_lane


class EFill(wiring.Component):
    """Writes the E slots of ``lanes_active`` lanes.

    Parameters
    ----------
    lanes : int
        Lanes of the evaluator (1..256).
    rank : int
        1, 4, 16 or 64.
    digits : str
        ``"binomial"`` or ``"uniform"``.
    max_layers : int
        1..8.
    max_width : int
        Largest layer width (sizes the generator's B RAM: ``max_width + 1`` rows).
    width_bits : int
        Width of a layer-width input.
    addr_bits : int
        Width of a noise-bank address.

    Interface attributes
    --------------------
    start : In(1)
        Strobe: fill. The other inputs must stay stable until ``busy`` falls.
    seed : In(32), step : In(16), first_pair : In(11), sigma_shift : In(4)
        Keys and ``f = log4(rank) + sigma_shift``.
    lanes_active : In(range(lanes + 1))
        Lanes to fill, 1..lanes.
    n_layers : In(range(max_layers + 1))
    widths : In(ArrayLayout(width_bits, max_layers + 1))
    busy : Out(1)
        From the cycle after ``start`` until the last element is written.
    w_en : Out(1), w_bank : Out(1), w_addr : Out(addr_bits), w_lane : Out(range(lanes)),
    w_digit : Out(1), w_e : Out(3)
        One digit write: code ``w_e`` into digit ``w_digit`` of lane ``w_lane``'s field of
        slot ``w_addr`` of bank ``w_bank``.

    Throughput: one element of E per cycle; per lane and layer a job of ``fan + 8 +
    out * fan`` cycles at ranks 1 and 4 (``+1`` at 16; the keyer mixes the next job's
    keys while the current one runs), plus the first run key: :func:`e_fill_cycles`.
    For the digits network (64-64-10) 4,956 cycles per lane.
    """

    def __init__(
        self,
        *,
        lanes: int,
        rank: int,
        digits: str,
        max_layers: int,
        max_width: int,
        width_bits: int,
        addr_bits: int,
    ):
        self.lanes, self.rank, self.digits = lanes, rank, digits
        self.max_layers, self.max_width = max_layers, max_width
        self.width_bits, self.addr_bits = width_bits, addr_bits
        super().__init__(
            {
                "start": In(1),
                "seed": In(32),
                "step": In(16),
                "first_pair": In(11),
                "sigma_shift": In(4),
                "lanes_active": In(range(lanes + 1)),
                "n_layers": In(range(max_layers + 1)),
                "widths": In(data.ArrayLayout(width_bits, max_layers + 1)),
                "busy": Out(1),
                "w_en": Out(1),
                "w_bank": Out(1),
                "w_addr": Out(addr_bits),
                "w_lane": Out(range(max(lanes, 2))),
                "w_digit": Out(1),
                "w_e": Out(3),
            }
        )

    def elaborate(self, platform):
        m = Module()
        lb = ceil_log2(max(self.lanes, 2))
        m.submodules.keyer = keyer = StreamKeyer()
        m.submodules.gen = gen = LowRankGenerator(
            rank=self.rank,
            max_fan=self.max_width + 1,
            max_out=self.max_width,
            digits=self.digits,
        )
        busy = Signal()
        m.d.comb += self.busy.eq(busy)

        # ---- keyer requests: per lane, per layer: B (the first with the run key), then A
        req_lane = Signal(lb + 1)
        req_i = Signal(4)  # 2 * layer + (0: B, 1: A)
        req_on = Signal()
        first_req = Signal()
        m.d.comb += [
            keyer.seed.eq(self.seed),
            keyer.k.valid.eq(req_on),
            keyer.k.payload.ab.eq(~req_i[0]),
            keyer.k.payload.layer.eq(req_i[1:]),
            keyer.k.payload.pair.eq(self.first_pair + req_lane),
            keyer.k.payload.step.eq(self.step),
            keyer.k.payload.reseed.eq(first_req),
            keyer.cancel.eq(0),
        ]
        with m.If(keyer.k.valid & keyer.k.ready):
            m.d.sync += first_req.eq(0)
            with m.If(req_i == (self.n_layers << 1) - 1):
                m.d.sync += [req_i.eq(0), req_lane.eq(req_lane + 1)]
                with m.If(req_lane + 1 == self.lanes_active):
                    m.d.sync += req_on.eq(0)
            with m.Else():
                m.d.sync += req_i.eq(req_i + 1)
        # the generator takes B's state when idle, A's after B's rows: the keyer's order
        wiring.connect(m, keyer.x0, gen.x0)

        # ---- the job the generator runs, and where its elements go
        lane = Signal(lb + 1)
        layer = Signal(3)
        out = self.widths[layer + 1]
        fan = self.widths[layer] + 1
        m.d.comb += [
            gen.out.eq(out),
            gen.fan.eq(fan),
            gen.sigma_shift.eq(self.sigma_shift),
            gen.mode.eq(0),  # quantized: the stream e
            gen.e.ready.eq(1),  # the write port is the fill's alone
            gen.a.ready.eq(1),
            gen.b.ready.eq(1),
        ]
        i = Signal(self.width_bits + 1)  # row of E
        k = Signal(self.width_bits + 1)  # column
        row_base = Signal(self.addr_bits + 1)  # the slot row of rows 4 (i // 4) ..
        row_last = k + 1 == fan
        last_row = i + 1 == out
        last_layer = layer + 1 == self.n_layers
        take = gen.e.valid & busy
        with m.If(take):
            m.d.sync += k.eq(k + 1)
            with m.If(row_last):
                m.d.sync += [k.eq(0), i.eq(i + 1)]
                with m.If((i[:2] == 3) | last_row):
                    m.d.sync += row_base.eq(row_base + fan)
                with m.If(last_row):
                    m.d.sync += [i.eq(0), layer.eq(layer + 1)]
                    with m.If(last_layer):
                        m.d.sync += [layer.eq(0), lane.eq(lane + 1), row_base.eq(0)]
                        with m.If(lane + 1 == self.lanes_active):
                            m.d.sync += busy.eq(0)
        m.d.comb += [
            self.w_en.eq(take),
            self.w_bank.eq(i[1]),
            self.w_digit.eq(i[0]),
            self.w_addr.eq(row_base + k),
            self.w_lane.eq(lane[:lb]),
            self.w_e.eq(gen.e.payload.e),
        ]

        with m.If(self.start & ~busy):
            m.d.sync += [
                busy.eq(1),
                req_on.eq(1),
                req_lane.eq(0),
                req_i.eq(0),
                first_req.eq(1),
                lane.eq(0),
                layer.eq(0),
                i.eq(0),
                k.eq(0),
                row_base.eq(0),
            ]
        return m
