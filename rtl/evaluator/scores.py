"""ScoreAccumulator: members' scores (spec 7.1), summed over the batch in the score memory.

The finalizer emits, per member and sample, the hinge term ``min(y[label] -
max_{c != label} y[c], M)``, for lane ``i`` of every group at once. For each valid group
the accumulator reads the member's score from the score memory, adds the term and writes
it back (the first sample of a round writes the term alone), one member per cycle,
pipelined over the memory's read latency.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .finalizer import terms_layout
from .params import EvaluatorParams
from .pass_engine import REPLICA_ATTR

__all__ = ["ScoreAccumulator"]


class ScoreAccumulator(wiring.Component):
    """Interface attributes
    --------------------
    terms : In(stream.Signature(terms_layout(p)))
    first_pair : In(11), lanes_active : In(range(lanes + 1))
        The round: group ``g``'s term belongs to member
        ``2 * (first_pair + g * group + i) + s`` if that lane is active.
    r_addr : Out(12), r_en : Out(1), r_data : In(score_bits)
    w_addr : Out(12), w_data : Out(score_bits), w_en : Out(1)
        The score memory (``mem_latency`` cycles of read latency), one word per member:
        a term's read leaves a register a cycle after its beat, its write ``mem_latency``
        cycles after that.
    busy : Out(1)
    """

    def __init__(self, p: EvaluatorParams):
        self.p = p
        sb = p.score_bits
        super().__init__(
            {
                "terms": In(stream.Signature(terms_layout(p))),
                "first_pair": In(11),
                "lanes_active": In(range(p.lanes + 1)),
                "r_addr": Out(12),
                "r_en": Out(1),
                "r_data": In(sb),
                "w_addr": Out(12),
                "w_data": Out(sb),
                "w_en": Out(1),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.p
        F, G, lat, sb = p.finalizers, p.group_lanes, p.mem_latency, p.score_bits
        beat = self.terms.payload
        g = Signal(range(F + 1))
        if p.wide and G >= 2 and G & (G - 1) == 0:
            # wide builds, groups of a power of two: the lane index is g's and i's bits
            # side by side, not an adder after the term FIFO's read (the FIFO's
            # storage through the lane's sum and compare into a_v was the 128-lane
            # ECP5 evaluator's critical path at 4fb8872, seed 3: 8.56 ns)
            lane = Cat(beat.i, g)
        else:
            lane = beat.i + g * G
        member = ((self.first_pair + lane) << 1) | beat.s
        valid = lane < self.lanes_active
        # whether g is the last group: a flag set with g, not g's compare, so that the
        # ready the terms FIFO's read and level take comes from a flip-flop (g's compare
        # into the FIFO's level enable had 3 of the 128-lane ECP5 evaluator's 33
        # endpoints past 8 ns at 3d72357, seed 3, 8.27 ns)
        last_g = Signal(init=F == 1)
        m.d.comb += self.terms.ready.eq(last_g)
        with m.If(self.terms.valid):
            m.d.sync += [g.eq(Mux(last_g, 0, g + 1)), last_g.eq(1 if F == 1 else g == F - 2)]
        issue = self.terms.valid & valid
        # the member's address, its term and flags registered before the read: the term
        # FIFO's distributed RAM through the address adders into the score memory's read
        # address was the 128-lane ULX3S build's critical path at a30159b (10.41 ns, 8.11
        # of it routing); the read leaves a flip-flop, a cycle later
        a_v = Signal()
        a_addr = Signal(12)
        a_t = Signal(sb)
        a_f = Signal()
        # the beat's terms for groups 1..F-1 in a shift register loaded in its first
        # cycle (g = 0), so that a_t takes the term FIFO's read data only at group 0 and
        # a register's low bits after: the FIFO's distributed RAM through the F-way
        # choice by g had 10 of the 128-lane ULX3S build's endpoints past 8 ns at
        # 950052f (seed 1, 9.57 ns). The FIFO holds the beat (valid) until its last
        # group, and g and the register advance together.
        if F == 1:
            term = beat.term[0]
        else:
            tw = len(beat.term[0])  # a term's own width (signed, below sb)
            rest = Signal(tw * (F - 1), reset_less=True)
            if p.wide:
                # Wide builds: whether g is 0 from flags set with g (g's next value is 0
                # exactly when last_g), a copy per four terms, not g's compare before
                # the choice into every term's bits: from g through that compare and
                # the term FIFO's read into rest was the 128-lane ECP5 evaluator's
                # critical path at 9d0cf9a (seed 1, placer timing weight 30, 8.35 ns)
                g0 = [
                    Signal(name=f"g0_c{c}", init=1, attrs={REPLICA_ATTR: 1})
                    for c in range((F + 3) // 4)
                ]
                with m.If(self.terms.valid):
                    m.d.sync += [c.eq(last_g) for c in g0]
                    for k in range(1, F):
                        bits = rest[(k - 1) * tw : k * tw]
                        nxt = rest[k * tw : (k + 1) * tw] if k < F - 1 else 0
                        m.d.sync += bits.eq(Mux(g0[k // 4], beat.term[k], nxt))
                term = Mux(g0[0], beat.term[0], rest[:tw].as_signed())
            else:
                with m.If(self.terms.valid):
                    with m.If(g == 0):
                        m.d.sync += rest.eq(Cat(beat.term[k] for k in range(1, F)))
                    with m.Else():
                        m.d.sync += rest.eq(rest >> tw)
                term = Mux(g == 0, beat.term[0], rest[:tw].as_signed())
        m.d.sync += [
            a_v.eq(issue),
            a_addr.eq(member),
            a_t.eq(term),
            a_f.eq(beat.first),
        ]
        m.d.comb += [
            self.r_addr.eq(a_addr),
            self.r_en.eq(a_v & ~a_f),
        ]
        # the read's data arrives lat cycles later: carry the write with it
        pipe = [
            {
                "v": Signal(name=f"v{j}"),
                "a": Signal(12, name=f"a{j}"),
                "t": Signal(sb, name=f"t{j}"),
                "f": Signal(name=f"f{j}"),
            }
            for j in range(lat)
        ]
        m.d.sync += [
            pipe[0]["v"].eq(a_v),
            pipe[0]["a"].eq(a_addr),
            pipe[0]["t"].eq(a_t),
            pipe[0]["f"].eq(a_f),
        ]
        for j in range(1, lat):
            m.d.sync += [pipe[j][k].eq(pipe[j - 1][k]) for k in pipe[j]]
        out = pipe[-1]
        m.d.comb += [
            self.w_en.eq(out["v"]),
            self.w_addr.eq(out["a"]),
            self.w_data.eq(
                Mux(out["f"], out["t"].as_signed(), self.r_data.as_signed() + out["t"].as_signed())
            ),
            self.busy.eq(self.terms.valid | a_v | _any([q["v"] for q in pipe])),
        ]
        return m


def _any(sigs):
    v = sigs[0]
    for s in sigs[1:]:
        v = v | s
    return v
