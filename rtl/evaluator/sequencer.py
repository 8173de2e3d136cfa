"""Sequencer: the schedule of one population evaluation, as pass commands.

For each round of pairs (``first_pair = round * lanes``), after the noise fill, for each
sample of the batch, the blocks of ``sim/evaluator_model.schedule``: the u-row passes of
member ``2j`` (and of ``2j+1`` with per-member inputs), then for every layer ``l`` the
layer block of ``2j`` and of ``2j+1``, each a pass per pair of output rows. A layer block
waits for the block two before it (the same member's previous layer) to be finished by
the finalizer. With shared inputs in low-rank mode, layer 0 is one block for both
members (``x . W^T`` is the same for both: the finalizer makes each member's outputs
from the same sums), and member ``2j``'s layer 1 waits for the block just before it.

Before the first round a configuration phase derives, per layer, where its matrix starts
in the weight memory (spec 1.4: row-major, five digits a word, each matrix on a word
boundary) and ``fan`` divided by 5 (by subtraction: no divider), and where its noise
slots start. It also checks the run-time parameters against the elaboration maxima.

Quantized mode has no u-row passes: a sample is the layer blocks alone, each pass
reading the lanes' E slots ``E(l, t, k)`` (bank ``t % 2``, address ``e_base_l + (t // 2)
fan_l + k``, ``e_base_l = sum_{l' < l} ceil(n_{l'+1} / 4) fan_{l'}``, computed in the
configuration phase with one addition every fourth row).
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .finalizer import KIND_ACT, KIND_STORE
from .params import MARGIN_MAX, MAX_POPULATION, MAX_STEP, SIGMA_SHIFT_MAX, EvaluatorParams
from .pass_engine import REPLICA_ATTR


def _pair_step_tables() -> tuple[list[int], list[int], list[int]]:
    """The digit offset's step by a row pair as truth tables of ``r1`` (``fan % 5``):
    for each offset ``o`` in 0..4, bit ``r1`` of ``step[o]``'s ``k``-th table (8-bit
    masks, bits 5..7 unused) is bit ``k`` of the next offset ``(o + r2) % 5``, and
    bit ``r1`` of ``over1[o]`` / ``over2[o]`` whether that offset plus ``r1`` / ``r2``
    reaches 5 (``r2 = 2 r1 % 5``)."""
    over1, over2 = [0] * 5, [0] * 5
    step = [[0, 0, 0] for _ in range(5)]
    for o in range(5):
        for r1 in range(5):
            r2 = 2 * r1 % 5
            nxt = (o + r2) % 5
            for k in range(3):
                step[o][k] |= ((nxt >> k) & 1) << r1
            over1[o] |= int(nxt + r1 >= 5) << r1
            over2[o] |= int(nxt + r2 >= 5) << r1
    return step, over1, over2


__all__ = ["ERROR_FLAGS", "Sequencer"]

#: The phases, in the order of their bits in the one-hot phase; each is a flip-flop
#: ``ph_<name>``, but ``emit``'s, which is ``in_emit``
PHASES = (
    "idle",
    "cfg_div",
    "cfg_rows",
    "cfg_next",
    "round",
    "fill",
    "emit",
    "end",
    "next",
    "check",
)

#: Error flags (bit: meaning), set instead of running (docs/rtl.md).
ERROR_FLAGS = {
    0: "layers: n_layers outside 1..max_layers",
    1: "widths: a width outside 1..max_width",
    2: "population: odd or outside 2..4096",
    3: "batch: outside 1..max_batch",
    4: "sigma_shift: above 8, or an activation shift above 15",
    5: "margin: outside 1..254",
    6: "step: above 65534",
    7: "noise: the network's noise does not fit noise_depth",
    8: "label: a label at or above the number of classes",
}


def above_const(value, bound: int):
    """``value > bound`` (``value`` unsigned, ``bound`` a non-negative constant) as AND
    and OR of ``value``'s bits, one per bit from bit 0 up (a bit where ``bound`` has 1
    ANDs, where it has 0 ORs): a compare of a few LUTs that synthesis keeps apart from
    any adder of the same operand. A bound past ``value``'s range gives 0."""
    bits = [value[k] for k in range(len(value))]
    if bound >> len(bits):
        return Const(0)
    gt = Const(0)
    for k, b in enumerate(bits):  # gt: value[:k+1] > bound[:k+1], built from bit 0 up
        gt = (b & gt) if (bound >> k) & 1 else (b | gt)
    return gt


class Sequencer(wiring.Component):
    """Pass commands of one evaluation (module docstring).

    Interface attributes
    --------------------
    start : In(1)
        Strobe: evaluate with the run-time inputs below (stable until ``busy`` falls).
    n_layers, widths, population, batch, shared, sigma_shift, act_shifts, margin, step
        Run-time parameters (spec 9.1).
    busy : Out(1), error : Out(9)
        ``busy`` rises the cycle after ``start``. The checks of the run-time parameters
        are registered and the check phase takes two cycles: two cycles after ``start``
        ``error`` holds their result, and when a parameter is out of range ``busy``
        falls a cycle later (and nothing runs).
    cmd : Out(stream.Signature(command_layout))
        Pass commands for the PassEngine.
    emitting : Out(1)
        The phase is the emit (PH_EMIT's flip-flop of the one-hot phase):
        ``cmd.valid`` may rise only then. The evaluator's ``drained`` reads it, not
        ``cmd.valid`` (which comes from the WeightStreamer's ready).
    wcmd : Out(stream.Signature(weight pass layout))
        Two-row passes for the WeightStreamer, in the order of the layer passes.
    cmd_room_next : In(1), wcmd_room_next : In(1)
        ``cmd.ready`` and ``wcmd.ready`` of the next cycle: the readies must be flip-flops
        with these inputs (as the evaluator's command queue and the WeightStreamer give
        them); the emit decision is a flip-flop of its own, set from them.
    fill_start : Out(1), fill_busy : In(1), fill_pair : Out(12), fill_active : Out(...)
        The noise fill of each round: its first pair and active lanes; ``fill_buf``
        (Out(1)) the noise buffer it writes, ``fill_pre`` (Out(1), a register loaded
        with each fill's start): it makes the noise of step ``pre_step``, not ``step``.
    first_pair : Out(11), lanes_active : Out(...), nbuf : Out(1)
        The round being evaluated: its first pair and active lanes (the scores' and
        logits' member index), and the noise buffer it reads.
    keep : In(1), pre : In(1), pre_step : In(16)
        Noise made ahead (:class:`~pentegg.rtl.evaluator.evaluator.PopulationEvaluator`):
        ``keep`` with ``start`` lets the first round use the noise the fill last made
        for round 0 of ``step`` (no fill); ``pre`` makes round 0 of ``pre_step`` into
        the free buffer after the last round's fill (two noise buffers).
    load_start : Out(1), rounds : Out(12)
        The loader's start (a registered strobe: the cycle the first round begins, after
        the configuration phase; it also clears the finalizer's block count).
    drained : In(1)
        Pass engine, finalizer and score unit are idle.
    noise_needed : Out(...)
        Slots per bank the network needs.
    """

    def __init__(
        self, p: EvaluatorParams, cmd_layout, wpass_layout, noise_bits: int, waddr_bits: int
    ):
        self.p = p
        self.cmd_layout = cmd_layout
        self.wpass_layout = wpass_layout
        self.noise_bits = noise_bits
        self.waddr_bits = waddr_bits
        # internal signals for tests (filled by elaborate): the emit decision ``ok``,
        # the one-hot phase ``ph`` (bit PH_EMIT is ``in_emit``)
        self.dbg = {}
        ml = p.max_layers
        super().__init__(
            {
                "start": In(1),
                "n_layers": In(4),
                "widths": In(data.ArrayLayout(p.width_bits + 1, ml + 1)),
                "population": In(13),
                "batch": In(16),
                "shared": In(1),
                "sigma_shift": In(4),
                "act_shifts": In(data.ArrayLayout(5, ml)),
                "margin": In(8),
                "step": In(16),
                "busy": Out(1),
                "error": Out(len(ERROR_FLAGS)),
                "cmd": Out(stream.Signature(cmd_layout)),
                "emitting": Out(1),
                "wcmd": Out(stream.Signature(wpass_layout)),
                "cmd_room_next": In(1),
                "wcmd_room_next": In(1),
                "fill_start": Out(1),
                "fill_busy": In(1),
                "fill_pair": Out(12),
                "fill_active": Out(range(p.lanes + 1)),
                "fill_buf": Out(1),
                "fill_pre": Out(1),
                "keep": In(1),
                "pre": In(1),
                "pre_step": In(16),
                "nbuf": Out(1),
                "first_pair": Out(11),
                "lanes_active": Out(range(p.lanes + 1)),
                "load_start": Out(1),
                "rounds": Out(12),
                "drained": In(1),
                "noise_needed": Out(noise_bits + 2),
                "bad_label": In(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.p
        ml = p.max_layers
        L = p.lanes
        r = p.rank
        wb = p.width_bits
        u_passes = p.u_passes
        u_cols = -(-u_passes // 2)
        nb = self.noise_bits

        busy = Signal()
        m.d.comb += self.busy.eq(busy)
        nl = self.n_layers
        widths = self.widths
        pairs = self.population >> 1

        # ---- checks (combinational on the inputs, taken at start)
        # The bounds are compared bit by bit (above_const), not as `>`: Yosys maps a
        # compare with a constant that shares its operand with an adder into that
        # adder's carry chain (widths[1] > max_width with the fill's widths[1] + 1 and
        # the sequencer's row-pair count: from the register file's width1 through two
        # chains into err_r was the ULX3S build's only endpoint past 10 ns at 2498e05,
        # seed 1: 10.18 ns, 7.55 of it routing)
        err = Signal(len(ERROR_FLAGS))
        w_bad = Const(0)
        for i in range(ml + 1):
            wi = widths[i]
            used = 1 if i == 0 else (i <= nl)
            w_bad = w_bad | (used & ((wi == 0) | above_const(wi, p.max_width)))
        sh_bad = above_const(self.sigma_shift, SIGMA_SHIFT_MAX)
        for i in range(ml):
            sh_bad = sh_bad | ((i < nl) & above_const(self.act_shifts[i], 15))
        pop = self.population
        m.d.comb += [
            err[0].eq((nl == 0) | above_const(nl, ml)),
            err[1].eq(w_bad),
            err[2].eq(pop[0] | ~pop[1:].any() | above_const(pop, MAX_POPULATION)),
            err[3].eq((self.batch == 0) | above_const(self.batch, p.max_batch)),
            err[4].eq(sh_bad),
            err[5].eq((self.margin == 0) | above_const(self.margin, MARGIN_MAX)),
            err[6].eq(above_const(self.step, MAX_STEP)),
        ]
        # registered: the checks span every width and shift, so they are taken a cycle
        # after `start` (the inputs are stable from `start` until `busy` falls) and no
        # comparison of them lies before the configuration registers' enables
        err_r = Signal.like(err)
        m.d.sync += err_r.eq(err)
        # and their OR, a flip-flop of err_r's (PH_CHECK's choice takes one flag, not the
        # nine registers' OR before the phase), read in PH_CHECK's second cycle
        # (``chk_wait``): as a flip-flop of the checks themselves it was the 128-lane
        # ECP5 evaluator's critical path at b81f202, seed 1 (8.22 ns, from the widths)
        err_any = Signal()
        m.d.sync += err_any.eq(err_r.any())
        chk_wait = Signal()

        # ---- per-layer constants
        wbase = Array(Signal(self.waddr_bits, name=f"wbase{l}") for l in range(ml))
        q1 = Array(Signal(wb, name=f"q1_{l}") for l in range(ml))  # fan // 5
        r1 = Array(Signal(3, name=f"r1_{l}") for l in range(ml))  # fan % 5
        fstart = Array(Signal(nb + 2, name=f"fstart{l}") for l in range(ml))
        # n_0 from a register of the sequencer's own, loaded in every cycle (a run's
        # setting, stable from start: from the next cycle on the register holds the
        # start cycle's value), a replica that Yosys keeps: the input `widths[0]` (the
        # test wrapper's register of it, across the chip) through the U rows' address
        # adder into `u_addr` was the 128-lane ECP5 evaluator's critical path at
        # 3ff5822, seeds 1 and 3 (8.69 and 8.52 ns)
        n0 = Signal.like(widths[0], name="n0_q", attrs={REPLICA_ATTR: 1})
        m.d.sync += n0.eq(widths[0])
        ub_base = Signal(nb + 2)
        m.d.comb += ub_base.eq(n0 * u_cols)

        # ---- state
        # The phase, one-hot: a flip-flop per phase, ``ph[PH_X]`` (PH_EMIT's is
        # ``in_emit``, below). A transition clears its own phase's flip-flop and sets
        # the next one's (``goto``), so that each flip-flop's enable is the OR of the
        # ways into and out of its own phase, each a flip-flop of the phase it comes
        # from and that way's flags. As a 4-bit code every transition loaded all four
        # bits: their enable was the OR of every transition's condition under the
        # code's decode, the 128-lane ECP5 evaluator's critical path at f265b7c, seed
        # 2 (8.52 ns, 6.89 of it routing, 5 levels; the phase 4 of its 8 endpoints
        # past 8 ns).
        (
            PH_IDLE,
            PH_CFG_DIV,
            PH_CFG_ROWS,
            PH_CFG_NEXT,
            PH_ROUND,
            PH_FILL,
            PH_EMIT,
            PH_END,
            PH_NEXT,
            PH_CHECK,
        ) = range(len(PHASES))
        ph = [
            Signal(name="in_emit" if i == PH_EMIT else f"ph_{n}", init=i == PH_IDLE)
            for i, n in enumerate(PHASES)
        ]

        def goto(mm, frm, to):
            """Leave phase ``frm`` for phase ``to`` (in a branch taken in ``frm`` only)."""
            mm.d.sync += [ph[frm].eq(0), ph[to].eq(1)]

        cl = Signal(4)  # layer in the configuration phase
        c_rem = Signal(wb + 2)
        c_q = Signal(wb)
        c_word = Signal(self.waddr_bits)
        c_off = Signal(3)
        c_rows = Signal(wb + 1)
        c_fa = Signal(nb + 2)
        c_r4 = Signal(2)  # quantized: rows mod 4 (a new E slot row every 4 rows)
        QUANT = p.mode == "quantized"
        # the layer's step of c_fa, a register (quantized: loaded in PH_CFG_DIV, cl is
        # stable from there through PH_CFG_ROWS; low-rank: see c_fan1): the widths'
        # selection by cl, the compare with nl and the adds before c_fa's adder had 7 of
        # the 128-lane ULX3S build's 84 endpoints past 10 ns at 22de219 (seed 1)
        c_fa_inc = Signal(nb + 2, reset_less=True)
        # whether the noise slots overflow the bank: registered with c_fa's last step (the
        # compare in PH_CFG_NEXT was before the phase's and the round's enables)
        c_fa_over = Signal()

        rnd = Signal(12)
        first_pair = Signal(12)
        b = Signal(16)
        gs = Signal(2)  # samples since start, mod 4 (as the loader counts them)
        # the block id within the evaluation, less 1 (mod 2**16): a counter a cycle behind
        # the emit, stepped by a flag the block's end sets (``blk_inc``), so that its 16
        # flip-flops take their enable from that flag's one flip-flop, not from the emit
        # decision through the block-end logic (16 of the 128-lane ECP5 evaluator's 66
        # endpoints past 8 ns at 9fe00a1, seed 3, into blk's enable); the id is
        # ``blk_m1 + blk_inc + 1``
        # (blk_inc takes no reset: PH_IDLE, which a reset returns to, loads blk_m1 in
        # every cycle, over blk_inc's step; with one, the reset and the emit's terms
        # made a LUT before its set/reset, 8.37 ns in the 128-lane ECP5 evaluator at
        # 59c3e3a, seed 1)
        blk_m1 = Signal(16)
        blk_inc = Signal(reset_less=True)
        m.d.sync += blk_inc.eq(0)
        with m.If(blk_inc):
            m.d.sync += blk_m1.eq(blk_m1 + 1)
        # the block being emitted: kind (0 U, 1 L), member sign, layer, pass index
        bk_l = Signal(3)
        bk_s = Signal()
        bk_u = Signal()
        # bk_u's next value (the assignments below set it, the register follows): the
        # emit decision (``_emit``'s ``ok``) is registered from it
        bk_u_next = Signal()
        m.d.comb += bk_u_next.eq(bk_u)
        m.d.sync += bk_u.eq(bk_u_next)
        # The emit decision (``_emit``): a flip-flop, from the next cycle's readies and
        # block kind, equal to the push's condition ``cmd.valid & cmd.ready`` in every
        # cycle of PH_EMIT. It enables every emit register (the cursors, the block and
        # layer registers, the phase); as a LUT of the two readies and bk_u it was a
        # wide net before another level of logic into them (67 of the 128-lane ECP5
        # evaluator's 535 endpoints past 8 ns at bd4c05d, seed 3, up to 9.64 ns, into
        # blk's enable). It is loaded in every phase, not only in PH_EMIT: loaded there
        # alone (54e5111), it held the last emit cycle's value through PH_NEXT, and a
        # round that began with room after one that ended without pushed its first
        # command twice (or, the other way round, none)
        ok = Signal(init=1)
        m.d.sync += ok.eq(self.cmd_room_next & (bk_u_next | self.wcmd_room_next))
        # ``in_emit``: the phase is PH_EMIT, its flip-flop of the one-hot phase. The
        # emit's registers take it, not a decode of a phase code: through a LUT of a
        # 4-bit code (and ABC's logic beside it) the phase crossed the sequencer into
        # ``naddr``, the 128-lane ECP5 evaluator's critical path at de10e19, seeds 1
        # and 3 (8.59 and 8.1 ns, 6.6 and 6.12 of it routing)
        in_emit = ph[PH_EMIT]
        self.dbg.update(ok=ok, ph=Cat(*ph), PH_EMIT=PH_EMIT, in_emit=in_emit)
        m.d.comb += self.emitting.eq(in_emit)
        ps = Signal(wb + 1)  # pass index: q (U) or t (L)
        pos_word = Signal(self.waddr_bits)
        pos_off = Signal(3)
        # whether pos_off + r1 and pos_off + r2 reach 5 (row 2t + 1's start and the next
        # pair's carry into the word): flags set with pos_off, 0 with pos_off = 0 (r1 and
        # r2 are < 5, and every block of layer passes starts with pos_off = 0, after its
        # layer's r1 and r2 are loaded), so that each word's adder takes its carry from
        # a flip-flop: the 3-bit add and compare before it
        # had pos_word and the command's word1 among the 128-lane ULX3S builds'
        # endpoints past 8 ns at 912efff (11 at seed 2, 8.42 ns). Their next values
        # come from the layer's tables (lay["ov1"], lay["ov2"], below).
        pos_over = [Signal(name="pos_over1"), Signal(name="pos_over2")]

        def off_zero():
            return [pos_off.eq(0), *(o.eq(0) for o in pos_over)]

        naddr = Signal(nb + 2)
        u_addr = Signal(nb + 2)

        # noise buffers: the round being evaluated reads `nbuf`; the fill writes `fill_buf`
        # for the round of `fill_pair` (with two buffers, the next round's during this one)
        nbuf = Signal()
        fill_buf = Signal()
        fill_pair = Signal(12)
        m.d.comb += [self.nbuf.eq(nbuf), self.fill_buf.eq(fill_buf), self.fill_pair.eq(fill_pair)]
        # lanes with a pair in the round starting at `pair`: registered with the pair
        # (fill_active with fill_pair, lanes_active with first_pair)
        fill_active = Signal(range(L + 1))
        lanes_active = Signal(range(L + 1))
        m.d.comb += [self.fill_active.eq(fill_active), self.lanes_active.eq(lanes_active)]

        def active_of(pair):
            left = pairs - pair
            return Mux(left > L, L, left)

        # the next round's lanes, a register of first_pair's (a round is many cycles:
        # final long before PH_NEXT takes it), so no add, subtract and compare lies
        # before lanes_active; in two stages, the pairs left after the next round's
        # first, then the compare (first_pair's add, subtract and compare into it in one
        # were the 128-lane ULX3S build's critical path at 5192fd8, seed 2: 10.80 ns)
        left_next = Signal(signed(18), reset_less=True)
        next_active = Signal(range(L + 1))
        m.d.sync += [
            left_next.eq(pairs - (first_pair + L)),
            next_active.eq(Mux(left_next > L, L, left_next)),
        ]

        # the constants of layer bk_l, registered when bk_l is set (enter_layer): no
        # layer-indexed lookup lies between the emit state and a command
        lay = {
            "n": Signal(wb + 1, name="lay_n"),  # inputs n_l
            "out": Signal(wb + 1, name="lay_out"),  # outputs n_{l+1}
            "t_last": Signal(wb + 1, name="lay_t_last"),  # the last row pair
            "last": Signal(name="lay_last"),  # the network's last layer
            "q1": Signal(wb, name="lay_q1"),  # fan = 5 q1 + r1 (words, digits: one row)
            "r1": Signal(3, name="lay_r1"),
            "q2": Signal(wb + 1, name="lay_q2"),  # 2 fan = 5 q2 + r2 (a row pair; r2 in "step")
            # a row pair's step from each digit offset o (0..4): the next offset
            # (o + r2) % 5 and whether it plus r1 / r2 reaches 5 (_pair_step_tables),
            # so that pos_off and its two carry flags take a choice by pos_off among
            # registers, not two 3-bit adds and a compare (pos_off through them into
            # pos_over1 was the 128-lane ULX3S build's critical path at 950052f, seed
            # 1: 10.27 ns, 97.4 MHz)
            "step": Signal(15, name="lay_step"),
            "ov1": Signal(5, name="lay_ov1"),
            "ov2": Signal(5, name="lay_ov2"),
        }
        step_tab, ov1_tab, ov2_tab = _pair_step_tables()

        # whether pass ps is its block's last (ps == t_last, or u_passes - 1 in a U block):
        # a flag set with ps and the block, not a compare after them. The compare and the
        # block kind's select were the first levels of the emit's enables (the sample count
        # b's 16 enables were 16 of the 128-lane ULX3S build's 117 endpoints past 10 ns at
        # 005e676, seed 1, 10.54 ns). A layer's first pass is its last when out <= 2
        lp = Signal()
        u_single = Const(p.u_passes == 1)
        # each layer's last row pair and whether its first pass is its last (out <= 2),
        # registered from the widths (they hold through a run), so that entering a layer
        # selects registers by the layer, not the width's adder and compare after its
        # selection (into lay_t_last: 2 of the 128-lane ECP5 evaluator's 33 endpoints
        # past 8 ns at 3d72357, seed 3; 14 of 329 at c0a017a). They take the widths
        # through a register of their own (w_hold, so two cycles behind the inputs:
        # read from PH_EMIT on, six or more after `start`): from the inputs themselves,
        # ABC reused their adders' sums in the checks, and a width's input through
        # t_last_of's adders into err_r was the 128-lane ECP5 evaluator's critical path
        # at d93ac8c (seed 3, 7.89 ns) and at 7da465b (seed 3, 8.19 ns)
        t_last_of = Array(Signal(wb + 1, name=f"t_last_of{l}") for l in range(p.max_layers))
        one_pass_of = Array(Signal(name=f"one_pass_of{l}") for l in range(p.max_layers))
        for l in range(p.max_layers):
            w_hold = Signal.like(widths[l + 1], name=f"w_hold{l}", reset_less=True)
            m.d.sync += [
                w_hold.eq(widths[l + 1]),
                t_last_of[l].eq(((w_hold + 1) >> 1) - 1),
                one_pass_of[l].eq(w_hold <= 2),
            ]

        def consts_of(l):
            """Layer l's constants (the values of ``lay``) and its first pass's lp."""
            wrap = r1[l] >= 3  # 2 r1 >= 5
            return one_pass_of[l], {
                "n": widths[l],
                "out": widths[l + 1],
                "t_last": t_last_of[l],
                "last": l + 1 == nl,
                "q1": q1[l],
                "r1": r1[l],
                "q2": (q1[l] << 1) + wrap,
                "step": Cat(
                    Const(step_tab[o][k], 8).bit_select(r1[l], 1)
                    for o in range(5)
                    for k in range(3)
                ),
                "ov1": Cat(Const(ov1_tab[o], 8).bit_select(r1[l], 1) for o in range(5)),
                "ov2": Cat(Const(ov2_tab[o], 8).bit_select(r1[l], 1) for o in range(5)),
            }

        # Wide builds (``p.wide``): the constants of layer 0 and of layer
        # bk_l + 1, registers loaded in every cycle (the widths and the configuration's
        # tables hold through the emit), so that entering a layer copies one of two
        # registers into ``lay``: no layer-indexed lookup, adder or table lies between
        # the emit's state and ``lay``. The next layer's copy is a cycle behind bk_l: a
        # block ends two cycles or more after bk_l changed to a layer it leaves for
        # bk_l + 1 (member 2j's block, then member 2j+1's; a shared layer 0 follows a U
        # block, and bk_l is 0 from the sample's start), so the copy is current when it
        # is read. Narrow builds take the constants from the lookup itself: the two
        # copies' registers and their enables cost the one-lane ULX3S device build its
        # 100 MHz (98.4, 98.7, 98.0 and 97.3 MHz at seeds 1-4 with them at cb3d248,
        # 105.84 and 109.83 at seeds 1 and 2 without, f0e8327)
        ent = {}
        # Wide builds load ``lay`` only when a block that leaves its layer ends (and
        # outside the emit), from the registers of the layer after bk_l (layer 0 after
        # the last): its enable is a LUT of four flip-flops (``ok``, ``lp``, ``leave``
        # and ``emit_d``, a copy of ``in_emit`` a cycle behind), not the emit decision
        # through the block's kind, layer and the phase (the phase through bk_s into
        # lay_n was the 128-lane ECP5 evaluator's critical path at b022460, seed 3:
        # 9.14 ns, 7.43 of it routing; the ``lay_*`` registers 22 of its 81 endpoints
        # past 8 ns). ``leave`` (the block's last pass leaves its layer: member 2j+1's
        # block, or the shared layer-0 block of both) and ``leave_last`` (and the layer
        # is the last: the sample ends) are set with the block. A U block and layer 0's
        # first block find ``lay`` holding layer 0 already: a sample begins there.
        leave = Signal()
        leave_last = Signal()
        emit_d = Signal()
        if p.wide:
            m.d.sync += emit_d.eq(in_emit)
            for name, l in (("0", 0), ("nx", Mux(lay["last"], 0, bk_l + 1))):
                one, vals = consts_of(l)
                regs = {k: Signal.like(lay[k], name=f"lay{name}_{k}", reset_less=True) for k in lay}
                lp_reg = Signal(name=f"lay{name}_lp", reset_less=True)
                m.d.sync += [regs[k].eq(vals[k]) for k in lay]
                m.d.sync += lp_reg.eq(one)
                ent[name] = (lp_reg, regs)
        else:
            for name, l in (("0", 0), ("nx", bk_l + 1)):
                ent[name] = consts_of(l)

        def enter_layer(mm, which):
            """Enter layer 0 (``which`` "0") or layer bk_l + 1 ("nx"): its constants,
            and lp for the first pass of a block of it (a U block sets lp after this)."""
            lp_val, vals = ent[which]
            mm.d.sync += lp.eq(lp_val)
            mm.d.sync += bk_l.eq(0 if which == "0" else bk_l + 1)
            if not p.wide:  # wide builds: below (``leave``)
                mm.d.sync += [lay[k].eq(vals[k]) for k in lay]

        def begin_emit(mm, frm):
            goto(mm, frm, PH_EMIT)
            if not p.wide:
                mm.d.sync += b.eq(0)
                first_block(mm)
            # wide builds load the first block's registers and b outside PH_EMIT (below)

        def first_block(mm):  # a sample's first block: u-row passes, or layer 0
            mm.d.sync += [bk_s.eq(0), ps.eq(0)]
            if p.wide:
                mm.d.sync += [leave.eq(0), leave_last.eq(0)]
            enter_layer(mm, "0")
            if QUANT:
                mm.d.comb += bk_u_next.eq(0)
                mm.d.sync += [
                    pos_word.eq(wbase[0]),
                    *off_zero(),
                    naddr.eq(fstart[0]),
                    u_addr.eq(fstart[0]),
                ]
            else:
                mm.d.comb += bk_u_next.eq(1)
                mm.d.sync += [u_addr.eq(0), naddr.eq(ub_base), lp.eq(u_single)]

        # ---- noise made ahead. The tag names the buffer holding round 0's noise of
        # ES step c_step (as the fill made it, for the run-time inputs of its time):
        # set when a round-0 fill starts, cleared when another fill starts into that
        # buffer and at a start without `keep`. A start with `keep` whose step is the
        # tag's skips round 0's fill (`hit`: a register, final long before PH_ROUND,
        # as the configuration phase takes cycles after PH_CHECK, and nothing else
        # changes the tag before round 0's fill)
        c_valid = Signal()
        c_step = Signal(16, reset_less=True)
        c_buf = Signal(reset_less=True)
        hit = Signal()
        first = Signal()  # round 0's noise not yet made or found
        active0 = Signal(range(L + 1), reset_less=True)  # round 0's lanes
        keep = Signal()  # `keep`, taken with `start`
        m.d.sync += hit.eq(keep & c_valid & (c_step == self.step))
        fill_pre = Signal()
        m.d.comb += self.fill_pre.eq(fill_pre)

        def start_fill(mm, pair, active, buf, round0, pre):
            """Start the fill of the round at ``pair`` (``active`` lanes) into ``buf``;
            ``round0`` (a signal): it is round 0; ``pre`` (bool or a signal, round 0
            only): of step ``pre_step``, not ``step``."""
            mm.d.comb += self.fill_start.eq(1)
            mm.d.sync += [
                fill_pair.eq(pair),
                fill_active.eq(active),
                fill_buf.eq(buf),
                fill_pre.eq(pre),
            ]
            with mm.If(round0):
                mm.d.sync += [c_valid.eq(1), c_buf.eq(buf)]
                if pre is False:
                    mm.d.sync += c_step.eq(self.step)
                else:
                    mm.d.sync += c_step.eq(self.pre_step)
            with mm.Elif(c_buf == buf):
                mm.d.sync += c_valid.eq(0)

        # prefill (two buffers): the fill of the round after this one into the buffer
        # this round does not read, while it runs, or after the last round (with `pre`)
        # round 0's of step `pre_step`, the next evaluation's. Requested when a round's
        # emit begins (pf_pending) and started three cycles later (pf_wait) from
        # registers of first_pair's values (which the round's start may just have
        # changed): no adder or compare of first_pair lies before the fill's registers
        # (first_pair's add and compare through the prefill's choice into fill_pair and
        # fill_active were the 128-lane evaluator's critical path at 164a886, seed 3:
        # 10.51 ns). PH_NEXT and PH_END wait for a pending prefill to start.
        if p.noise_buffers == 2:
            pf_pending = Signal()
            pf_wait = Signal(2)
            pf_more = Signal()  # a round follows this one
            pf_pair = Signal(12, reset_less=True)
            pf_active = Signal(range(L + 1), reset_less=True)
            m.d.sync += [
                pf_more.eq(left_next > 0),
                pf_pair.eq(Mux(left_next > 0, first_pair + L, 0)),
                pf_active.eq(Mux(left_next > 0, next_active, active0)),
            ]
            with m.If(pf_wait != 0):
                m.d.sync += pf_wait.eq(pf_wait - 1)
            with m.If(pf_pending & (pf_wait == 0) & ~self.fill_busy):
                m.d.sync += pf_pending.eq(0)
                with m.If(pf_more | self.pre):
                    start_fill(m, pf_pair, pf_active, ~nbuf, ~pf_more, ~pf_more)
        else:
            pf_pending = Const(0)

        def prefill(mm):
            if p.noise_buffers == 2:
                mm.d.sync += [pf_pending.eq(1), pf_wait.eq(3)]

        # The waiting phases (PH_ROUND, PH_FILL, PH_NEXT, PH_END) leave on ``go``, a
        # flip-flop set from their condition a cycle before (the fill idle and, in every
        # one but PH_FILL, everything after the sequencer drained and no prefill pending), not
        # on the condition itself: the phase's next value takes one flag where it took
        # the three registers' logic (drained, the fill's busy and the prefill's
        # pending through the phase's choice into the phase were the 128-lane ECP5
        # evaluator's critical path at bb32401, seed 1: 8.52 ns, 4 of its 5 endpoints
        # past 8 ns the phase). ``go`` is a one-cycle pulse (it is 0 after a cycle it
        # was 1): the cycle after it the phase may be another waiting phase, whose
        # condition it must not claim. A condition met in a waiting phase stays met
        # there (only the sequencer pushes commands and starts fills, and it does
        # neither while waiting), so acting a cycle later is acting on a true
        # condition; each waiting phase takes one cycle more.
        go = Signal()
        m.d.sync += go.eq(
            ~go
            & ~self.fill_busy
            & (
                ph[PH_FILL]
                | ((ph[PH_ROUND] | ph[PH_NEXT] | ph[PH_END]) & self.drained & ~pf_pending)
            )
        )

        # rounds = ceil(pairs / lanes), counted during the configuration phase
        # (c_left_nz: c_left != 0, a flag set with c_left from the value it loads, so
        # that the count's enable is a flip-flop, not the 13 bits' OR: into rounds'
        # enable, 11 of the 128-lane ECP5 evaluator's 14 endpoints past 8 ns at
        # 17f8417, seed 3, 8.19 ns)
        rounds = Signal(12)
        c_left = Signal(13)
        c_left_nz = Signal()
        with m.If(c_left_nz):
            m.d.sync += [
                c_left.eq(Mux(c_left > L, c_left - L, 0)),
                c_left_nz.eq(c_left > L),
                rounds.eq(rounds + 1),
            ]
        m.d.comb += [self.rounds.eq(rounds), self.first_pair.eq(first_pair)]

        # whether cl is the last layer and whether the rounds are counted: flags a cycle
        # behind their operands (cl changes as PH_CFG_DIV begins, c_left from PH_CHECK on:
        # PH_CFG_NEXT comes two cycles or more after PH_CHECK, and a stale c_left_zero
        # only makes it wait a cycle more), not compares before the phase and
        # load_start (cl's compare into load_start was the 128-lane ULX3S build's
        # critical path at 2aad916, seed 2: 11.59 ns, 8.61 of it routing)
        cl_last = Signal()
        c_left_zero = Signal()
        m.d.sync += [cl_last.eq(cl + 1 == nl), c_left_zero.eq(~c_left_nz)]
        # the next layer's fan + 1, which PH_CFG_NEXT loads into c_rem: a register of the
        # same age (the widths hold through a run): cl's adder, the widths' selection
        # and the + 1 before c_rem had 10 of the 128-lane ULX3S build's endpoints past
        # 8 ns at 912efff (seed 1, 8.41 ns)
        c_fan1 = Signal(wb + 2, reset_less=True)
        m.d.sync += c_fan1.eq(widths[cl + 1] + 1)
        # whether c_rem >= 5 (PH_CFG_DIV's subtraction) and c_rows != 0 (PH_CFG_ROWS's
        # row count): flags set with c_rem and c_rows from the values they load, not
        # compares between the registers and their enables (c_rem's compare into the
        # enables of c_rem and c_q: 16 of the 128-lane ULX3S build's endpoints past 8 ns
        # at 635abd7, seed 1, 8.99 ns)
        c_ge5 = Signal()
        c_more = Signal()
        c_fan1_ge5 = Signal()
        if not QUANT:
            # the u rows: ceil(rows / 2) groups of r.bit_length() - 1, rows + 1 being
            # out + 1 + (a hidden layer's bias row): from c_fan1 and cl_last, a cycle
            # behind cl, so two behind it. PH_CFG_ROWS reads it in its last cycle, two
            # or more after cl changes (PH_CFG_DIV takes one or more, then every width
            # >= 1 takes a row cycle). From cl's adder, its compare with nl and the
            # widths' selection in PH_CFG_DIV, c_fa_inc had 7 of the 128-lane ECP5
            # evaluator's 167 endpoints past 8 ns at 2c1ce90 (seed 3)
            m.d.sync += c_fa_inc.eq(((c_fan1 + ~cl_last) >> 1) << (r.bit_length() - 1))
        m.d.sync += c_fan1_ge5.eq(widths[cl + 1] >= 4)
        m.d.sync += self.load_start.eq(0)  # a strobe (set below)
        # the loader's flag is this run's from the cycle after load_start (the loader
        # clears it then): before, it is the last run's, and a run after one with a bad
        # label reported flag 8 too (its labels in range or not)
        labels_now = Signal()
        with m.If(self.load_start):
            m.d.sync += labels_now.eq(1)
        with m.If(self.bad_label & labels_now):
            m.d.sync += self.error[8].eq(1)

        # Wide builds: the emit's first block loads in every cycle outside PH_EMIT (the
        # configuration's values it takes are final before PH_EMIT begins), not in the
        # cycle that begins the emit: its enable is the emit's flip-flop, not that and
        # the fill's and the drain's flags (entering layer 0 in
        # PH_FILL's and PH_NEXT's branches put phase through four LUTs into lay_out's
        # enable, the 128-lane ECP5 evaluator's critical path at d1d3a78, seed 1:
        # 8.27 ns; bk_l, lay_n and lay_out were 6 of its 10 endpoints past 8 ns)
        if p.wide:
            with m.If(~in_emit):
                first_block(m)

        def leave_emit(mm):
            """The batch's last sample ends the emit: PH_END after the run's last round,
            PH_NEXT before it (in a branch taken in PH_EMIT only, where both are 0)."""
            rnd_last = emit_v["rnd_last"]  # (set by _emit)
            mm.d.sync += [in_emit.eq(0), ph[PH_END].eq(rnd_last), ph[PH_NEXT].eq(~rnd_last)]

        # `shared` from a register of the sequencer's own, loaded in every cycle (a
        # run's setting, stable from start; the emit is cycles after it), a replica that
        # Yosys keeps apart from the loader's: the loader's copy through the command
        # stage's `rec.us` and `both` into `u_addr` was the 128-lane ECP5 evaluator's
        # critical path at 8b1f311, seed 3 (8.04 ns, 6.16 of it routing)
        shared_q = Signal(attrs={REPLICA_ATTR: 1})
        m.d.sync += shared_q.eq(self.shared)
        emit_v = locals()  # (for _emit, below)
        with m.If(ph[PH_IDLE]):
            # the block count restarts in every idle cycle, not in PH_CHECK's
            # branch without an error (the checks' err_r through that choice into
            # blk_m1's 16 enables: 15 of the 128-lane ECP5 evaluator's 23
            # endpoints past 8 ns at 87e4c97, seed 3, up to 8.84 ns)
            m.d.sync += blk_m1.eq(-1)
            with m.If(self.start):
                goto(m, PH_IDLE, PH_CHECK)
                m.d.sync += [
                    busy.eq(1),
                    chk_wait.eq(1),
                    keep.eq(self.keep),
                    labels_now.eq(0),
                ]
                with m.If(~self.keep):
                    m.d.sync += c_valid.eq(0)
        with m.If(ph[PH_CHECK]):  # the checks of the start cycle's inputs, registered
            m.d.sync += [self.error.eq(err_r), chk_wait.eq(0)]
            with m.If(~chk_wait):  # err_any is err_r's OR from the second cycle
                with m.If(err_any):
                    m.d.sync += busy.eq(0)
                    goto(m, PH_CHECK, PH_IDLE)
                with m.Else():
                    goto(m, PH_CHECK, PH_CFG_DIV)
            # the configuration's and the first round's registers load whether or not
            # a check failed (after a failure nothing reads them, and the next start
            # loads them again): their enables are the phase's flip-flop alone, not
            # that and the OR of the checks' flags (c_rem and c_q, loaded here and in
            # two other phases, had 9 and 7 of the 128-lane ECP5 evaluator's 167
            # endpoints past 8 ns at 2c1ce90, seed 3)
            m.d.sync += [
                cl.eq(0),
                c_rem.eq(widths[0] + 1),
                c_ge5.eq(widths[0] >= 4),
                c_q.eq(0),
                c_word.eq(0),
                c_fa.eq(0 if QUANT else ub_base + u_cols),
                c_left.eq(pairs),
                c_left_nz.eq(pairs != 0),
                rounds.eq(0),
                # the first round's state, used from PH_ROUND on, set here rather
                # than in PH_CFG_NEXT (behind its compares of cl and c_left:
                # into rnd's, first_pair's and lanes_active's enables, 25 of the
                # 128-lane ULX3S build's endpoints past 9.3 ns at 3c75e0d, seed
                # 1, 10.15 ns, its critical path)
                rnd.eq(0),
                first_pair.eq(0),
                lanes_active.eq(active_of(0)),
                active0.eq(active_of(0)),
                first.eq(1),
                gs.eq(0),
                nbuf.eq(0),
            ]
        with m.If(ph[PH_CFG_DIV]):  # fan // 5 and fan % 5 by subtraction
            if QUANT:  # a row of E slots: the layer's fan
                m.d.sync += c_fa_inc.eq(widths[cl] + 1)
            with m.If(c_ge5):
                m.d.sync += [c_rem.eq(c_rem - 5), c_ge5.eq(c_rem >= 10), c_q.eq(c_q + 1)]
            with m.Else():
                m.d.sync += [
                    q1[cl].eq(c_q),
                    r1[cl].eq(c_rem),
                    wbase[cl].eq(c_word),
                    fstart[cl].eq(c_fa),
                    c_off.eq(0),
                    c_r4.eq(0),
                    c_rows.eq(widths[cl + 1]),
                    c_more.eq(widths[cl + 1] != 0),
                ]
                goto(m, PH_CFG_DIV, PH_CFG_ROWS)
        with m.If(ph[PH_CFG_ROWS]):  # the matrix: out rows of fan digits
            # c_q and c_rem hold the layer's fan // 5 and fan % 5 here (as q1[cl],
            # r1[cl]), in registers of their own: no choice by cl before the adders
            # (through it into c_word: 2 of the 128-lane ULX3S build's endpoints
            # past 9.3 ns at f3eb1f7, seed 1)
            with m.If(c_more):
                rem = c_rem[:3]
                over = (c_off + rem) >= 5
                m.d.sync += [
                    c_rows.eq(c_rows - 1),
                    c_more.eq(c_rows != 1),
                    c_word.eq(c_word + c_q + over),
                    c_off.eq(Mux(over, c_off + rem - 5, c_off + rem)),
                ]
                if QUANT:
                    m.d.sync += c_r4.eq(c_r4 + 1)
                    with m.If(c_r4 == 0):
                        m.d.sync += c_fa.eq(c_fa + c_fa_inc)
            with m.Else():
                m.d.sync += c_word.eq(c_word + (c_off != 0))
                goto(m, PH_CFG_ROWS, PH_CFG_NEXT)
                fa = c_fa if QUANT else c_fa + c_fa_inc  # c_fa in PH_CFG_NEXT
                m.d.sync += c_fa_over.eq(fa > p.noise_bank_depth)
                if not QUANT:
                    m.d.sync += c_fa.eq(fa)
        with m.If(ph[PH_CFG_NEXT]):
            with m.If(cl_last):
                m.d.sync += self.noise_needed.eq(c_fa)
                with m.If(c_fa_over):
                    m.d.sync += self.error[7].eq(1)
                    goto(m, PH_CFG_NEXT, PH_END)
                with m.Elif(c_left_zero):  # the rounds are counted
                    m.d.sync += self.load_start.eq(1)
                    goto(m, PH_CFG_NEXT, PH_ROUND)
            with m.Else():
                m.d.sync += [
                    cl.eq(cl + 1),
                    c_rem.eq(c_fan1),
                    c_ge5.eq(c_fan1_ge5),
                    c_q.eq(0),
                ]
                goto(m, PH_CFG_NEXT, PH_CFG_DIV)
        with m.If(ph[PH_ROUND]):  # the previous round drained: fill the noise
            with m.If(go):
                m.d.sync += first.eq(0)
                with m.If(first & hit):  # round 0's noise is in buffer c_buf
                    m.d.sync += nbuf.eq(c_buf)
                    begin_emit(m, PH_ROUND)
                    prefill(m)
                with m.Else():
                    goto(m, PH_ROUND, PH_FILL)
                    start_fill(m, first_pair, lanes_active, nbuf, first, False)
        with m.If(ph[PH_FILL]):
            with m.If(go):
                begin_emit(m, PH_FILL)
                prefill(m)
        with m.If(ph[PH_NEXT]):
            with m.If(go):
                m.d.sync += [
                    rnd.eq(rnd + 1),
                    first_pair.eq(first_pair + L),
                    lanes_active.eq(next_active),
                ]
                if p.noise_buffers == 2:
                    # the next round's noise is in the other buffer already
                    m.d.sync += nbuf.eq(~nbuf)
                    begin_emit(m, PH_NEXT)
                    prefill(m)  # into the buffer just finished
                else:
                    goto(m, PH_NEXT, PH_ROUND)
        with m.If(ph[PH_END]):  # (a fill still running is the next evaluation's)
            with m.If(go):
                m.d.sync += busy.eq(0)
                goto(m, PH_END, PH_IDLE)
        # PH_EMIT (after the other phases' blocks: the wide forms' statements below take
        # precedence)
        with m.If(in_emit):
            self._emit(m, p, emit_v)
        # the pass and weight commands' payloads, outside the emit's condition: only
        # their valids are the emit's (in the switch's PH_EMIT case, every payload bit
        # was 0 outside the emit, and Yosys made that the synchronous reset of the
        # command stage's and the weight streamer's registers: ``phase != PH_EMIT``
        # from one LUT into 103 flip-flops' LSR, the 128-lane ECP5 evaluator's critical
        # path at 67321b1, seed 3: 11.07 ns, 9.88 of it routing)
        m.d.comb += emit_v["payload"]
        if p.wide:
            # ``lay`` and the sample count (``leave`` above): outside the emit (a
            # cycle behind the phase: the emit's first block leaves no layer, and its
            # last ends a sample, which loads layer 0 itself), layer 0; at the end of a
            # block that leaves its layer, the next layer (or layer 0) and, if the
            # sample ends, the count's step
            with m.If(~emit_d):
                m.d.sync += [lay[k].eq(ent["0"][1][k]) for k in lay]
            with m.Elif(ok & lp & leave):
                m.d.sync += [lay[k].eq(ent["nx"][1][k]) for k in lay]
            # (b is 0 whenever the emit begins: a reset clears it, and the emit ends
            # only with the batch's last sample, which clears it; no phase decode
            # clears it again, so its enable is a LUT of three flip-flops: with
            # ``~emit_d`` too, b had 7 of the 128-lane ECP5 evaluator's 19 endpoints
            # past 8 ns at 4fb8872, seed 3, 8.45 ns)
            with m.If(ok & lp & leave_last):
                m.d.sync += [b.eq(Mux(emit_v["b_last"], 0, b + 1)), gs.eq(gs + 1)]
            # the emit ends with the batch's last sample: the phase's next value from
            # the same flip-flops and the round's flag, not from the block's kind,
            # member and layer under the emit decision (the sample's end as _emit
            # finds it; the phase had 4 of the 128-lane ECP5 evaluator's 5 endpoints
            # past 8 ns at bb32401, seed 1). ``leave_last`` is 0 outside the emit
            # (first_block clears it in every cycle there), so no phase decode.
            with m.If(ok & lp & leave_last & emit_v["b_last"]):
                emit_v["leave_emit"](m)
        return m

    def _emit(self, m, p, v):
        """One pass command per cycle (and a weight pass for layer passes)."""
        r = p.rank
        u_passes = p.u_passes
        b, bk_l, bk_s, bk_u, ps = v["b"], v["bk_l"], v["bk_s"], v["bk_u"], v["ps"]
        blk_m1, blk_inc = v["blk_m1"], v["blk_inc"]
        bk_u_next = v["bk_u_next"]
        pos_word, pos_off, naddr, u_addr = v["pos_word"], v["pos_off"], v["naddr"], v["u_addr"]
        wbase, fstart = v["wbase"], v["fstart"]
        ub_base, n0 = v["ub_base"], v["n0"]
        rnd, rounds, leave_emit = v["rnd"], v["rounds"], v["leave_emit"]
        # whether the sample is the batch's last and the round the run's last: flags in
        # registers, not compares in the logic that ends a sample (rnd's compare with
        # rounds through it into the phase was the 128-lane ULX3S build's critical path
        # at aba3e6a, seed 2: 10.27 ns, 7.62 of it routing, 6 levels). b changes at a
        # sample's end or when the emit begins, rnd when it begins (PH_NEXT), and a
        # sample is two blocks or more (both members' layer 0, or a U block before a
        # shared layer 0), so the next read of a flag is two cycles or more after its
        # operands changed: its value a cycle behind is the same
        b_last = Signal()
        rnd_last = Signal()
        m.d.sync += [b_last.eq(b + 1 == self.batch), rnd_last.eq(rnd + 1 == rounds)]
        v["b_last"] = b_last
        v["rnd_last"] = rnd_last
        wide = p.wide
        leave, leave_last = v["leave"], v["leave_last"]
        first_block, enter_layer, lay = v["first_block"], v["enter_layer"], v["lay"]
        shared = v["shared_q"]
        quant = p.mode == "quantized"

        cmd = Signal(self.cmd_layout)
        rec = cmd.rec
        out = lay["out"]
        last_layer = lay["last"]
        lp = v["lp"]  # the flag of enter_layer's comment
        last_pass = lp
        gs = v["gs"]
        in_slot = Mux(shared, gs[0], bk_s)

        # shared inputs, low-rank mode: both members' layer 0 has the same x . W^T, so one
        # block of layer-0 passes serves both (the finalizer makes each member's outputs
        # from the same sums); member 2j's layer 1 then needs the block just before it
        share_l0 = Const(0) if quant else shared
        both = share_l0 & ~bk_u & (bk_l == 0)
        need_x = share_l0 & (bk_l == 1) & ~bk_s
        in_region = Mux((bk_l == 0) | bk_u, in_slot, p.hidden_region(bk_l - 1, bk_s))
        two = (Cat(Const(1, 1), ps) < out) & ~bk_u
        # row 2t + 1's start: row 2t's plus fan = 5 q1 + r1
        over1, over2 = v["pos_over"]
        off_zero = v["off_zero"]
        word1 = pos_word + lay["q1"] + over1
        off1 = Mux(over1, pos_off + lay["r1"] - 5, pos_off + lay["r1"])
        payload = v["payload"] = []  # (elaborate adds them outside the emit's condition)
        payload += [
            cmd.u.eq(bk_u),
            cmd.n.eq(Mux(bk_u, n0, lay["n"])),
            cmd.in_region.eq(in_region),
            cmd.u_bank.eq(ps[0]),
            cmd.u_addr.eq(u_addr),
            cmd.wait_block.eq(~bk_u & (bk_l != 0) & (ps == 0)),
            # the block id - 1 + whether layer 1 of 2j waits on the shared layer-0 block:
            # blk_m1 plus two one-bit terms, summed as one two-bit operand
            cmd.need.eq(blk_m1 + Cat(need_x ^ blk_inc, need_x & blk_inc)),
            cmd.wait_input.eq(
                (~bk_u & (bk_l == 0) if quant else bk_u) & (ps == 0) & ((bk_s == 0) | ~shared)
            ),
            cmd.in_slot.eq(in_slot),
            cmd.wait_idle.eq(bk_u & (ps == 0) & ((bk_s == 0) | (u_passes % 2 == 1))),
            rec.kind.eq(Mux(bk_u, KIND_STORE, KIND_ACT)),
            rec.s.eq(bk_s),
            rec.both.eq(both),
            rec.us.eq(Mux(shared & (bk_l == 0), 0, bk_s)),
            rec.layer.eq(bk_l),
            rec.t.eq(ps),
            rec.two.eq(two),
            rec.q.eq(ps),
            rec.naddr.eq(naddr),
            rec.sample.eq(gs),
            rec.first_sample.eq(b == 0),
            rec.block_end.eq(last_pass),
            # quantized mode has no u vectors: no bias row of B_{l+1} to account for
            rec.bias_after.eq(0 if quant else ~bk_u & last_pass & ~last_layer & ~out[0]),
            rec.bias_row1.eq(0 if quant else ~bk_u & last_pass & ~last_layer & out[0]),
            rec.last_row.eq(~bk_u & last_pass & last_layer),
            rec.last_layer.eq(~bk_u & last_layer),
        ]
        # per-member mode: the release belongs to each member's own slot (L0 of s);
        # shared mode: to member 2j+1's L0 (both members read the sample's slot), or to
        # the layer-0 block for both
        payload.append(cmd.release.eq(~bk_u & (bk_l == 0) & last_pass & (~shared | bk_s | both)))
        if wide:
            # the engine's u_mac (command_layout): a u-row pass has n0 inputs, never 0
            # in a run (the checks refuse a width of 0), so it is bk_u itself (with the
            # compare, n0 from the run's inputs across the chip into the command stage
            # was the 128-lane ECP5 evaluator's critical path at bf20b5e, seed 3: 9.4 ns)
            payload.append(cmd.u_mac.eq(bk_u))
        wcmd = self.wcmd.payload
        payload += [
            wcmd.word0.eq(pos_word),
            wcmd.off0.eq(pos_off),
            wcmd.word1.eq(word1),
            wcmd.off1.eq(off1),
            wcmd.n.eq(lay["n"]),
            wcmd.two.eq(two),
        ]
        ok = v["ok"]  # the emit decision (elaborate)
        payload.append(self.cmd.payload.eq(cmd))
        m.d.comb += [
            self.cmd.valid.eq(bk_u | self.wcmd.ready),
            self.wcmd.valid.eq(~bk_u & self.cmd.ready),
        ]

        # next row pair: + 2 fan = + (q2, r2), alongside row 2t + 1 (not after it); the
        # offset (pos_off + r2) % 5 from the layer's step table
        word2 = pos_word + lay["q2"] + over2

        with m.If(ok):
            with m.If(~last_pass):
                m.d.sync += [
                    ps.eq(ps + 1),
                    lp.eq(ps + 1 == Mux(bk_u, u_passes - 1, lay["t_last"])),
                ]
                with m.If(bk_u):
                    # U(q+1): bank (q+1) % 2, address ((q+1) // 2) * n0
                    with m.If(ps[0]):
                        m.d.sync += u_addr.eq(u_addr + n0)
                    m.d.sync += naddr.eq(naddr + ps[0])
                with m.Else():
                    m.d.sync += [
                        pos_word.eq(word2),
                        pos_off.eq(lay["step"].word_select(pos_off, 3)),
                        naddr.eq(naddr + r),
                        over1.eq(lay["ov1"].bit_select(pos_off, 1)),
                        over2.eq(lay["ov2"].bit_select(pos_off, 1)),
                    ]
                    if quant:  # E(l, t + 1, 0): the other bank, a slot row further per 2
                        with m.If(ps[0]):
                            m.d.sync += u_addr.eq(u_addr + lay["n"] + 1)
            with m.Else():
                # the next block
                m.d.sync += [ps.eq(0), blk_inc.eq(1)]
                with m.If(bk_u):
                    with m.If(~bk_s & ~shared):  # U of member 2j+1
                        m.d.sync += [bk_s.eq(1), u_addr.eq(0), naddr.eq(ub_base)]
                        m.d.sync += lp.eq(v["u_single"])
                    with m.Else():  # layer 0 of member 2j
                        enter_layer(m, "0")
                        m.d.comb += bk_u_next.eq(0)
                        if wide:  # both members' block of a shared layer 0 leaves it
                            m.d.sync += [
                                leave.eq(share_l0),
                                leave_last.eq(share_l0 & last_layer),
                            ]
                        m.d.sync += [
                            bk_s.eq(0),
                            pos_word.eq(wbase[0]),
                            *off_zero(),
                            naddr.eq(fstart[0]),
                        ]
                with m.Elif(~bk_s & ~both):  # the same layer, member 2j+1
                    if wide:
                        m.d.sync += [leave.eq(1), leave_last.eq(last_layer)]
                    m.d.sync += [
                        lp.eq(lay["t_last"] == 0),
                        bk_s.eq(1),
                        pos_word.eq(wbase[bk_l]),
                        *off_zero(),
                        naddr.eq(fstart[bk_l]),
                        u_addr.eq(fstart[bk_l]),
                    ]
                with m.Elif(~last_layer):  # the next layer, member 2j
                    enter_layer(m, "nx")
                    if wide:
                        m.d.sync += [leave.eq(0), leave_last.eq(0)]
                    m.d.sync += [
                        bk_s.eq(0),
                        pos_word.eq(wbase[bk_l + 1]),
                        *off_zero(),
                        naddr.eq(fstart[bk_l + 1]),
                        u_addr.eq(fstart[bk_l + 1]),
                    ]
                with m.Else():  # the sample is done
                    first_block(m)
                    if not wide:  # wide builds: elaborate (``leave_last``)
                        m.d.sync += [b.eq(b + 1), gs.eq(gs + 1)]
                        with m.If(b_last):
                            m.d.sync += b.eq(0)
                            # the round's outputs still leave the finalizer: the next
                            # round's pairs are counted once they have (PH_NEXT)
                            leave_emit(m)
