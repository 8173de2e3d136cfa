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

With ``generators = G > 1`` the fill runs ``G`` generator lanes in lockstep on lanes
``G a .. G a + G - 1`` (one keyer serves them all: per layer the ``G`` B states, then the
``G`` A states; their E streams are joined, so every cycle yields element ``E[i, k]`` of
``G`` lanes, all bound for the same slot address and digit). One write of the noise bank
then sets ``G`` lanes' digits: a round's fill takes about ``1 / G`` of the time
(:func:`e_fill_cycles`). Lanes of the last group past ``lanes_active`` run a job too
(their writes are masked: ``w_valid``).

The noise banks are written a digit at a time (write granularity 3 bits); nothing is
kept beyond the round (the next round's fill overwrites it).
"""

from __future__ import annotations

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..noise.keyer import StreamKeyer
from ..noise.lrgen import LowRankGenerator
from ..params import check_int
from .params import MAX_E_GENERATORS

__all__ = ["EFill", "e_fill_cycles"]


def e_fill_cycles(widths, lanes_active: int, rank: int = 4, generators: int = 1) -> int:
    """Cycles of one fill (no back-pressure exists): per group of ``generators`` lanes and
    per layer a job of ``fan + 8 + out * fan`` cycles (ranks 1 and 4, binomial, ``fan >=
    13``; one more at rank 16; the keys of the next job are mixed meanwhile), plus 36 for
    the first run key and the start. Exact for one generator on two lanes of the digits
    network (tests/test_rtl_evaluator_parts.py; 8 cycles more on four lanes). With
    ``G > 1`` generators each job waits for the keyer's ``G - 1`` other answers: about
    ``15 (G - 1)`` cycles more per job (measured on 64-64-10: 15, 30, 43 for G = 2, 3,
    4; more when ``fan`` is below the keyer's ``14 G``). Smaller fans wait a few cycles
    more for the A state."""
    per_group = sum(
        (widths[l] + 1) + 8 + (rank >= 16) + widths[l + 1] * (widths[l] + 1) + 15 * (generators - 1)
        for l in range(len(widths) - 1)
    )
    return 36 + -(-lanes_active // generators) * per_group


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
    generators : int
        Generator lanes run in lockstep, 1..min(4, lanes) (default 1): each adds a B RAM,
        an LRMUL and a PQUANT ROM.

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
    w_digit : Out(1), w_e : Out(ArrayLayout(3, generators)), w_valid : Out(generators)
        One write: for each ``g`` with ``w_valid[g]``, code ``w_e[g]`` into digit
        ``w_digit`` of lane ``w_lane + g``'s field of slot ``w_addr`` of bank ``w_bank``
        (``w_lane`` is a multiple of ``generators``).

    Throughput: one element of E per cycle for each of the ``generators`` lanes; per
    group of lanes and layer a job of ``fan + 8 + out * fan`` cycles at ranks 1 and 4
    (``+1`` at 16; the keyer mixes the next job's keys while the current one runs; about
    ``15 (G - 1)`` more with ``G`` generators), plus the first run key:
    :func:`e_fill_cycles`. For the digits network (64-64-10) 4,956 cycles per lane with
    one generator, 4,986 per two lanes with two.
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
        generators: int = 1,
    ):
        self.lanes, self.rank, self.digits = lanes, rank, digits
        self.max_layers, self.max_width = max_layers, max_width
        self.width_bits, self.addr_bits = width_bits, addr_bits
        self.generators = check_int("e_generators", generators, 1, min(MAX_E_GENERATORS, lanes))
        g = self.generators
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
                "w_e": Out(data.ArrayLayout(3, g)),
                "w_valid": Out(g),
            }
        )

    def elaborate(self, platform):
        m = Module()
        G = self.generators
        lb = ceil_log2(max(self.lanes, 2))
        gb = ceil_log2(max(G, 2))
        m.submodules.keyer = keyer = StreamKeyer()
        gens = []
        for g in range(G):
            gen = LowRankGenerator(
                rank=self.rank,
                max_fan=self.max_width + 1,
                max_out=self.max_width,
                digits=self.digits,
            )
            m.submodules[f"gen{g}" if G > 1 else "gen"] = gen
            gens.append(gen)
        busy = Signal()
        m.d.comb += self.busy.eq(busy)

        # ---- keyer requests: per group of G lanes, per layer: the G B states (the very
        # first with the run key), then the G A states
        req_lane = Signal(lb + 1)  # the group's first lane
        req_g = Signal(gb)  # generator
        req_a = Signal()  # 0: B, 1: A
        req_layer = Signal(3)
        req_on = Signal()
        first_req = Signal()
        m.d.comb += [
            keyer.seed.eq(self.seed),
            keyer.k.valid.eq(req_on),
            keyer.k.payload.ab.eq(~req_a),
            keyer.k.payload.layer.eq(req_layer),
            # lanes past lanes_active get keys too (any pair): their writes are masked
            keyer.k.payload.pair.eq(self.first_pair + req_lane + req_g),
            keyer.k.payload.step.eq(self.step),
            keyer.k.payload.reseed.eq(first_req),
            keyer.cancel.eq(0),
        ]
        with m.If(keyer.k.valid & keyer.k.ready):
            m.d.sync += [first_req.eq(0), req_g.eq(req_g + 1)]
            with m.If(req_g == G - 1):
                m.d.sync += [req_g.eq(0), req_a.eq(~req_a)]
                with m.If(req_a):
                    m.d.sync += req_layer.eq(req_layer + 1)
                    with m.If(req_layer + 1 == self.n_layers):
                        m.d.sync += [req_layer.eq(0), req_lane.eq(req_lane + G)]
                        with m.If(req_lane + G >= self.lanes_active):
                            m.d.sync += req_on.eq(0)
        # the keyer's answers in request order: generator dst takes the next one (each
        # generator takes its B state when idle and its A state after B's rows)
        dst = Signal(gb)
        with m.If(keyer.x0.valid & keyer.x0.ready):
            m.d.sync += dst.eq(Mux(dst == G - 1, 0, dst + 1))
        m.d.comb += keyer.x0.ready.eq(Array(gen.x0.ready for gen in gens)[dst])
        for g, gen in enumerate(gens):
            m.d.comb += [
                gen.x0.payload.eq(keyer.x0.payload),
                gen.x0.valid.eq(keyer.x0.valid & (dst == g)),
            ]

        # ---- the job the generators run in lockstep, and where their elements go
        lane = Signal(lb + 1)  # the group's first lane
        layer = Signal(3)
        out = self.widths[layer + 1]
        fan = self.widths[layer] + 1
        all_valid = Signal()
        m.d.comb += all_valid.eq(Cat(gen.e.valid for gen in gens).all())
        for gen in gens:
            m.d.comb += [
                gen.out.eq(out),
                gen.fan.eq(fan),
                gen.sigma_shift.eq(self.sigma_shift),
                gen.mode.eq(0),  # quantized: the stream e
                gen.e.ready.eq(all_valid),  # the generators' E streams joined
                gen.a.ready.eq(1),
                gen.b.ready.eq(1),
            ]
        i = Signal(self.width_bits + 1)  # row of E
        k = Signal(self.width_bits + 1)  # column
        row_base = Signal(self.addr_bits + 1)  # the slot row of rows 4 (i // 4) ..
        row_last = k + 1 == fan
        last_row = i + 1 == out
        last_layer = layer + 1 == self.n_layers
        take = all_valid & busy
        with m.If(take):
            m.d.sync += k.eq(k + 1)
            with m.If(row_last):
                m.d.sync += [k.eq(0), i.eq(i + 1)]
                with m.If((i[:2] == 3) | last_row):
                    m.d.sync += row_base.eq(row_base + fan)
                with m.If(last_row):
                    m.d.sync += [i.eq(0), layer.eq(layer + 1)]
                    with m.If(last_layer):
                        m.d.sync += [layer.eq(0), lane.eq(lane + G), row_base.eq(0)]
                        with m.If(lane + G >= self.lanes_active):
                            m.d.sync += busy.eq(0)
        m.d.comb += [
            self.w_en.eq(take),
            self.w_bank.eq(i[1]),
            self.w_digit.eq(i[0]),
            self.w_addr.eq(row_base + k),
            self.w_lane.eq(lane[:lb]),
        ]
        for g, gen in enumerate(gens):
            m.d.comb += [
                self.w_e[g].eq(gen.e.payload.e),
                self.w_valid[g].eq(lane + g < self.lanes_active),
            ]

        with m.If(self.start & ~busy):
            m.d.sync += [
                busy.eq(1),
                req_on.eq(1),
                req_lane.eq(0),
                req_g.eq(0),
                req_a.eq(0),
                req_layer.eq(0),
                first_req.eq(1),
                dst.eq(0),
                lane.eq(0),
                layer.eq(0),
                i.eq(0),
                k.eq(0),
                row_base.eq(0),
            ]
        return m
