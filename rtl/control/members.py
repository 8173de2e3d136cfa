"""The per-member (RL) path through memories: the blocks between the accelerator's
``member_x`` and ``logits`` memories and the PopulationEvaluator's ``inp`` and ``logits``
streams (``shared = 0``).

Both memories hold a byte per word, member ``m``, sample ``b``, element ``k`` at
``(m * batch + b) * n + k`` (``n = n_0`` for ``member_x``, ``n_L`` for ``logits``).

* :class:`MemberSizes` (at a run's start): the strides ``batch * n_0`` and ``batch * n_L``
  and whether ``population * batch * n_0`` bytes fit ``member_x`` and ``population *
  batch * n_L`` fit ``logits`` (shift-add, at most 33 cycles);
* :class:`MemberReader`: ``member_x`` into ``inp`` words in the InputLoader's order;
* :class:`LogitWriter`: the evaluator's ``logits`` beats into ``logits`` writes.

The reader and the writer compute addresses modulo ``2**addr_bits``: exact when the run
fits (a run that does not is refused before it starts: the controller's ``members``
flag).
"""

from __future__ import annotations

from contextlib import contextmanager

from amaranth import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..evaluator.evaluator import out_logits_layout
from ..evaluator.params import EvaluatorParams
from ..evaluator.pass_engine import REPLICA_ATTR, lane_copies
from ..params import check_int

__all__ = ["LogitWriter", "MemberReader", "MemberSizes"]


@contextmanager
def _state(m, name, restart):
    """``m.State(name)`` whose body ends with ``restart()`` (it takes precedence)."""
    with m.State(name):
        yield
        restart()


class MemberSizes(wiring.Component):
    """Strides and the fit check of a per-member run (module docstring).

    Parameters
    ----------
    in_depth, out_depth : int
        Depths of the ``member_x`` and ``logits`` memories (1..2**24).
    width_bits : int
        Width of ``n_in`` and ``n_out`` (1..16).

    Interface attributes
    --------------------
    start : In(1)
        Strobe: compute from the inputs below (stable until ``busy`` falls), taken
        through a register (the computation begins the cycle after; ``busy`` covers it).
    population : In(13), batch : In(16), n_in : In(width_bits), n_out : In(width_bits)
    busy : Out(1)
        Rises the cycle after ``start``, falls when the outputs are valid (at most 33
        cycles after ``start``).
    fits : Out(1)
        ``population * batch * n_in <= in_depth`` and ``population * batch * n_out <=
        out_depth``.
    in_stride : Out(16 + width_bits), out_stride : Out(16 + width_bits)
        ``batch * n_in`` and ``batch * n_out``.
    """

    def __init__(self, *, in_depth: int, out_depth: int, width_bits: int):
        self.in_depth = check_int("in_depth", in_depth, 1, 1 << 24)
        self.out_depth = check_int("out_depth", out_depth, 1, 1 << 24)
        check_int("width_bits", width_bits, 1, 16)
        super().__init__(
            {
                "start": In(1),
                "population": In(13),
                "batch": In(16),
                "n_in": In(width_bits),
                "n_out": In(width_bits),
                "busy": Out(1),
                "fits": Out(1),
                "in_stride": Out(16 + width_bits),
                "out_stride": Out(16 + width_bits),
            }
        )

    def elaborate(self, platform):
        m = Module()
        tb = len(self.in_stride) + 13  # population * batch * n
        mul = Signal(16)  # multiplier bits left: batch, then population
        a_in, a_out = Signal(tb), Signal(tb)  # multiplicands, shifted
        acc_in, acc_out = Signal(tb), Signal(tb)
        second = Signal()  # the products by population
        # mul != 0 as a flag set with mul (the 16-bit compare before mul's own enables had
        # 16 of the 128-lane ULX3S build's 583 endpoints past 10 ns at 3f25487, seed 1),
        # and the accumulators' two actions as flip-flops set a cycle ahead: add (MUL,
        # mul != 0, mul[0]) and clear (MUL, mul == 0: the products are taken, the next
        # begin at 0). Decoded in their cycle, they were one LUT's output driving the
        # accumulators' 74 enables (35 of the 109 endpoints past 10 ns at b56882b, seed
        # 1, 10.50 ns). The accumulators are 0 whenever a multiplication starts.
        mul_nz = Signal()
        add = Signal()  # acc += a in this cycle
        clr = Signal()  # acc = 0 in this cycle
        m.d.sync += [add.eq(0), clr.eq(0)]
        with m.If(add):
            m.d.sync += [acc_in.eq(acc_in + a_in), acc_out.eq(acc_out + a_out)]
        with m.If(clr):
            m.d.sync += [acc_in.eq(0), acc_out.eq(0)]

        def load(value):  # mul and the flags of the next cycle, which works on it (no
            # clear: the accumulators are 0 at a load)
            m.d.sync += [mul.eq(value), mul_nz.eq(value != 0), add.eq(value[0])]

        # the start through a register: the controller's state decode (and the
        # register file's per-member flag) into the enables of the 90 flip-flops below
        # had 42 of the 128-lane ULX3S build's 72 endpoints past 9.3 ns at b2f4cab (seed
        # 3, 9.73 ns); from the register the enables are a LUT of local flip-flops
        go = Signal()
        m.d.sync += go.eq(self.start)
        with m.FSM() as fsm:
            m.d.comb += self.busy.eq(go | ~fsm.ongoing("IDLE"))
            with m.State("IDLE"):
                with m.If(go):
                    load(self.batch)
                    m.d.sync += [a_in.eq(self.n_in), a_out.eq(self.n_out), second.eq(0)]
                    m.next = "MUL"
            with m.State("MUL"):
                with m.If(mul_nz):
                    nxt = mul[1:]
                    m.d.sync += [
                        mul.eq(nxt),
                        mul_nz.eq(nxt != 0),
                        add.eq(nxt[0]),
                        clr.eq(nxt == 0),
                        a_in.eq(a_in << 1),
                        a_out.eq(a_out << 1),
                    ]
                with m.Elif(~second):
                    load(self.population)
                    m.d.sync += [
                        self.in_stride.eq(acc_in),
                        self.out_stride.eq(acc_out),
                        a_in.eq(acc_in),
                        a_out.eq(acc_out),
                        second.eq(1),
                    ]
                with m.Else():
                    m.d.sync += self.fits.eq(
                        (acc_in <= self.in_depth) & (acc_out <= self.out_depth)
                    )
                    m.next = "IDLE"
        return m


class MemberReader(wiring.Component):
    """``member_x`` into the evaluator's ``inp`` stream (module docstring).

    Word order (the InputLoader's): round, sample ``b``, member sign ``s``, input ``k``;
    lane ``j``'s byte of a word is input ``k`` of sample ``b`` of member ``2 (first_pair
    + j) + s``, read at ``(2 (first_pair + j) + s) * stride + b * n_in + k``, zero for
    pairs past the population. One byte read per cycle: a word takes ``lanes +
    mem_latency + 2`` cycles (more under back-pressure); a byte reaches its lane through
    a register (a copy per ``COPY_LANES`` lanes) and a token walking the lanes.

    Parameters
    ----------
    lanes : int
        The evaluator's lanes (1..256).
    addr_bits : int
        Address width of ``member_x`` (1..24).
    width_bits : int
        Width of ``n_in`` (1..16).
    mem_latency : int
        Cycles from ``r_addr``/``r_en`` to ``r_data`` (1..8).

    Interface attributes
    --------------------
    start : In(1)
        Strobe: stream every word of a run (inputs stable until ``busy`` falls), taken
        through a register (the run begins the cycle after; ``busy`` covers it).
    population : In(13), batch : In(16), n_in : In(width_bits)
    stride : In(addr_bits)
        ``batch * n_in`` (MemberSizes).
    r_addr : Out(addr_bits), r_en : Out(1), r_data : In(8)
    inp : Out(stream.Signature(8 * lanes))
    busy : Out(1)
        From the cycle after ``start`` until the last word is taken.
    """

    def __init__(self, *, lanes: int, addr_bits: int, width_bits: int, mem_latency: int):
        self.lanes = check_int("lanes", lanes, 1, 256)  # the evaluator's range
        self.addr_bits = check_int("addr_bits", addr_bits, 1, 24)
        check_int("width_bits", width_bits, 1, 16)
        self.mem_latency = check_int("mem_latency", mem_latency, 1, 8)
        super().__init__(
            {
                "start": In(1),
                "population": In(13),
                "batch": In(16),
                "n_in": In(width_bits),
                "stride": In(addr_bits),
                "r_addr": Out(addr_bits),
                "r_en": Out(1),
                "r_data": In(8),
                "inp": Out(stream.Signature(8 * lanes)),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        L, ab, lat = self.lanes, self.addr_bits, self.mem_latency
        pairs = self.population[1:]
        two_s = (self.stride << 1)[:ab]
        first_pair = Signal(12)
        rnd_base = Signal(ab)  # first_pair * 2 * stride
        rnd_step = Signal(ab)  # lanes * 2 * stride
        b = Signal(16)
        b_off = Signal(ab)  # b * n_in
        s = Signal()
        k = Signal(len(self.n_in))
        j = Signal(range(max(L, 2)))
        lane_off = Signal(ab)  # j * 2 * stride
        # k + 1 >= n_in, b + 1 >= batch and first_pair + lanes >= pairs as flags set with
        # their counters: the compares and the evaluator's ready through the word's
        # bookkeeping into the counters' enables had 23 of the 128-lane ULX3S build's 31
        # endpoints past 10 ns at 063e153 (seed 1, 10.63 ns)
        last_k = Signal()
        last_b = Signal()
        last_round = Signal()
        word = Signal(8 * L, reset_less=True)  # every byte written before it is offered
        m.d.comb += [
            self.r_addr.eq(rnd_base + Mux(s, self.stride, 0) + b_off + k + lane_off),
            self.inp.payload.eq(word),
        ]

        # lanes issued lat cycles ago: their data is on r_data now. Every lane of a word
        # is issued, and a lane without a member (r_en low) gets 0, so no cycle clears
        # the whole word (its 8 * lanes flip-flops, spread over the lanes, would hang on
        # the start strobe and on inp.ready: the ECP5 build's critical path at 495e45e)
        tag_v = [Signal(name=f"tag_v{i}") for i in range(lat)]
        tag_e = [Signal(name=f"tag_e{i}") for i in range(lat)]
        tag_f = [Signal(name=f"tag_f{i}") for i in range(lat)]  # lane 0 of a word
        issue = Signal()
        m.d.sync += [tag_v[0].eq(issue), tag_e[0].eq(self.r_en), tag_f[0].eq(j == 0)]
        for i in range(1, lat):
            m.d.sync += [
                tag_v[i].eq(tag_v[i - 1]),
                tag_e[i].eq(tag_e[i - 1]),
                tag_f[i].eq(tag_f[i - 1]),
            ]
        # The byte goes through a register, a copy per COPY_LANES lanes, and a token
        # walks the lanes (a word's lanes are issued, so land, on consecutive cycles):
        # lane j's byte register takes the copy when the token is at j. No decode of a
        # lane index and no register reach every lane (the index decode into the word's
        # enables and the read data into every byte: the 128-lane accelerator at
        # e4e6c56 had 691 of the word's endpoints over 9.5 ns after routing, its worst
        # 15.71 ns). A token still walking when a start restarts the reader leaves the
        # word before the new run's first byte lands (STEP alone takes lanes cycles).
        byte = Signal(8)
        m.d.comb += byte.eq(Mux(tag_e[-1], self.r_data, 0))
        rd = lane_copies(m, "rd", byte, L)
        token = Signal(L)
        m.d.sync += token.eq(Cat(tag_v[-1] & tag_f[-1], token[:-1]))
        for lane in range(L):
            with m.If(token[lane]):
                m.d.sync += word.word_select(lane, 8).eq(rd[lane])

        final = Signal()  # the word in OUT is the run's last

        # the start strobe through a register: it comes from the controller, and its
        # restart of every counter had been the 128-lane ULX3S build's critical path
        # (the controller's ev_start into first_pair's enables, 10.41 ns, 8.47 of it
        # routing, at 2aad916, seed 1). In the cycle it is high the old run's state
        # offers no word (the restart takes precedence at the cycle's end).
        start = Signal()
        m.d.sync += start.eq(self.start)
        with m.If(start):
            m.d.comb += self.busy.eq(1)

        def restart():  # a start in any state begins a new run
            with m.If(start):
                m.d.sync += [
                    first_pair.eq(0),
                    rnd_base.eq(0),
                    rnd_step.eq(0),
                    b.eq(0),
                    b_off.eq(0),
                    s.eq(0),
                    k.eq(0),
                    j.eq(0),
                    lane_off.eq(0),
                    last_k.eq(self.n_in <= 1),
                    last_b.eq(self.batch <= 1),
                    last_round.eq(L >= pairs),
                    final.eq(0),
                ]
                m.next = "STEP"

        def advance():  # the next word's counters, or the run's end
            with m.If(~last_k):
                m.d.sync += [k.eq(k + 1), last_k.eq(k + 2 >= self.n_in)]
            with m.Else():
                m.d.sync += [k.eq(0), last_k.eq(self.n_in <= 1), s.eq(~s)]
                with m.If(s):
                    with m.If(~last_b):
                        m.d.sync += [
                            b.eq(b + 1),
                            last_b.eq(b + 2 >= self.batch),
                            b_off.eq(b_off + self.n_in),
                        ]
                    with m.Else():
                        m.d.sync += [b.eq(0), last_b.eq(self.batch <= 1), b_off.eq(0)]
                        with m.If(~last_round):
                            m.d.sync += [
                                first_pair.eq(first_pair + L),
                                last_round.eq(first_pair + 2 * L >= pairs),
                                rnd_base.eq(rnd_base + rnd_step),
                            ]
                        with m.Else():
                            m.d.sync += final.eq(1)

        with m.FSM():
            with _state(m, "IDLE", restart):
                pass
            with _state(m, "STEP", restart):  # rnd_step = lanes * 2 * stride
                m.d.comb += self.busy.eq(1)
                m.d.sync += [rnd_step.eq(rnd_step + two_s), j.eq(j + 1)]
                with m.If(j == L - 1):
                    m.d.sync += j.eq(0)
                    m.next = "ISSUE"
            with _state(m, "ISSUE", restart):  # one read per lane
                m.d.comb += [self.busy.eq(1), issue.eq(1), self.r_en.eq(first_pair + j < pairs)]
                m.d.sync += [lane_off.eq(lane_off + two_s), j.eq(j + 1)]
                with m.If(j == L - 1):
                    m.d.sync += [lane_off.eq(0), j.eq(0)]
                    m.next = "WAIT"
            # WAIT: until the last byte lands in the word (this cycle or earlier): its data
            # is off the memory (no tag left) and in the byte register, the token at the
            # last lane (a lane's byte lands a cycle after its tag's last stage)
            pending = Cat(*tag_v).any()
            with _state(m, "WAIT", restart):
                m.d.comb += self.busy.eq(1)
                with m.If(~pending):
                    m.next = "OUT"
                    advance()
            # OUT: the word is offered; the next word's counters were advanced on the way
            # here (the word's reads are all issued), so the handshake reaches the FSM's
            # state alone, not the counters' enables (the evaluator's ready, from the
            # loader's state and its start strobe, through the word's bookkeeping into
            # first_pair's and rnd_base's enables: 21 of the 128-lane ULX3S build's
            # endpoints past 10 ns at 69d2892, seed 2, 11.29 ns, 9.35 of it routing)
            with _state(m, "OUT", restart):
                m.d.comb += [self.busy.eq(1), self.inp.valid.eq(~start)]
                with m.If(self.inp.ready & ~start):
                    with m.If(final):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "ISSUE"
        return m


class LogitWriter(wiring.Component):
    """The evaluator's ``logits`` beats into ``logits`` memory writes (module docstring).

    A beat (``out_logits_layout``) holds row ``row`` of member sign ``s`` of lane ``i``
    of every group; group ``g``'s logit belongs to member ``2 (first_pair + g * group +
    i) + s`` if ``mask[g]``. Within a round the rows of one ``(i, s)`` come in order
    (sample, row), so the writer keeps one pointer per ``(i, s)``, ``(2 (first_pair + i)
    + s) * stride + beats seen``, and group ``g`` adds ``g * 2 * group * stride``. A new
    round (``first_pair`` changes) reloads the pointers (about ``lanes + 2 group`` cycles). A
    beat takes one cycle per finalizer group and one more, in which its pointer is
    selected (the beat goes through an input register, taken when empty); the writes
    leave from registers, two cycles after the pointer select.

    Parameters
    ----------
    p : EvaluatorParams
        The evaluator's parameters (beat layout, ``group_lanes``, ``finalizers``).
    addr_bits : int
        Address width of ``logits`` (1..24).

    Interface attributes
    --------------------
    start : In(1)
        Strobe: a new evaluation (``stride`` stable until its last beat is written). Taken
        through a register (``busy`` covers that cycle): the strobe comes from the
        controller, and each state's enables are then the writer's own.
    stride : In(addr_bits)
        ``batch * n_L`` (MemberSizes).
    logits : In(stream.Signature(out_logits_layout(p)))
    w_addr : Out(addr_bits), w_data : Out(8), w_en : Out(1)
    busy : Out(1)
        A beat (or a round's pointers) is being processed: high from the cycle after a
        beat is taken until the cycle its last group's write is presented.
    """

    def __init__(self, p: EvaluatorParams, *, addr_bits: int):
        self.p = p
        self.addr_bits = check_int("addr_bits", addr_bits, 1, 24)
        super().__init__(
            {
                "start": In(1),
                "stride": In(addr_bits),
                "logits": In(stream.Signature(out_logits_layout(p))),
                "w_addr": Out(addr_bits),
                "w_data": Out(8),
                "w_en": Out(1),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.p
        G, F, ab = p.group_lanes, p.finalizers, self.addr_bits
        # The beat is taken into a register here first, and the writes leave from
        # registers: the finalizers' FIFO and the logits memory are far apart on a large
        # chip, and the pointer select between them was the 128-lane ULX3S build's
        # critical path (83a700a: 23.97 ns, 21.41 of it routing).
        beat = Signal(out_logits_layout(p), name="beat")
        full = Signal()  # ``beat`` holds a beat not yet taken by the FSM
        m.d.comb += self.logits.ready.eq(~full)
        with m.If(self.logits.valid & ~full):
            m.d.sync += [beat.eq(self.logits.payload), full.eq(1)]
        w_addr = Signal(ab)
        w_en = Signal()
        m.d.sync += [self.w_addr.eq(w_addr), self.w_en.eq(w_en)]
        fsm_busy = Signal()
        start = Signal()  # self.start, a cycle late
        m.d.sync += start.eq(self.start)
        m.d.comb += self.busy.eq(fsm_busy | full | self.w_en | start)

        n_keys = 2 << len(beat.i)  # (i, s), i up to its field's range
        ptr = Array(Signal(ab, name=f"ptr{q}") for q in range(n_keys))
        key = Cat(beat.s, beat.i)
        cur_fp = Signal(len(beat.first_pair))
        # cur_fp + 1, a register beside it: ADVANCE's compare is then an equality of
        # registers (the sum and its compare into acc's enable: 10.02 ns in the 128-lane
        # ULX3S build at 6796aae, seed 2)
        cur_fp1 = Signal(len(beat.first_pair) + 1)
        rnd_base = Signal(ab)  # cur_fp * 2 * stride
        group_step = Signal(ab)  # 2 * group * stride
        acc = Signal(ab)
        q = Signal(range(n_keys))
        # the beat's pointer, selected in TAKE and used (written back + 1) in PUT: the
        # select of one of n_keys pointers, the increment and the write-back in one cycle
        # had 139 of the 128-lane ULX3S build's 948 endpoints past 10 ns (23e1484, seed 2).
        # a0 samples ptr[key] every cycle, without an enable: PUT reads what TAKE's cycle
        # sampled (the beat and its pointer stand still from TAKE to PUT), and no other
        # state reads a0 (the enable, TAKE's round compare, had 5 of the 117 endpoints
        # past 10 ns at 005e676, seed 1)
        a0 = Signal(ab)
        m.d.sync += a0.eq(ptr[key])
        two_s = (self.stride << 1)[:ab]

        # the beat's logits, loaded in TAKE and shifted down a group per write, and the
        # mask of groups 1..: the write data always comes from held[0] (a 16-way select
        # of the held logits, spread with the groups' beats, was the 128-lane ULX3S
        # build's critical path at ef247ef, the group index into w_data, 19.04 ns, 17.57
        # of it routing). The data register takes held[0] every cycle, whatever the
        # state: only the enable and the address carry the decision (the state's decode
        # choosing the beat's or the held logit into it was the 128-lane ULX3S build's
        # critical path at 56cddf5, seed 2, 10.04 ns, 8.38 of it routing)
        held = Signal(data.ArrayLayout(8, F))
        m.d.sync += self.w_data.eq(held[0])
        # held loads the beat in TAKE and shifts in every other state (it is read in PUT
        # and WRITE alone, and TAKE comes before every PUT), chosen by a flag register of
        # its own, set and cleared with the transitions into and out of TAKE: the
        # state's decode shared by held's 8 F choices and the next-state logic was the
        # 128-lane ULX3S build's critical path at 610e735 (seed 3: the state through that
        # decode, placed among held's bits, and back, 9.40 ns, 8.16 of it routing; seed
        # 1: 9.33 ns). Marked a replica: kept as it is, never merged with a register of
        # the same input (a one-hot state's TAKE bit would be one)
        take_f = Signal(attrs={REPLICA_ATTR: 1})
        m.d.sync += held.eq(Mux(take_f, beat.y.as_value(), held.as_value() >> 8))
        mask = Signal(F)
        g = Signal(range(F + 1))
        addr = Signal(ab)

        def restart():  # a start in any state begins a new evaluation
            with m.If(start):
                m.d.sync += [
                    cur_fp.eq(0),
                    cur_fp1.eq(1),
                    rnd_base.eq(0),
                    acc.eq(0),
                    q.eq(0),
                    take_f.eq(0),
                ]
                m.next = "INIT"

        with m.FSM():
            with _state(m, "OFF", restart):
                pass
            with _state(m, "INIT", restart):  # ptr[q] = rnd_base + q * stride
                m.d.comb += fsm_busy.eq(1)
                m.d.sync += [ptr[q].eq(acc), acc.eq(acc + self.stride), q.eq(q + 1)]
                with m.If((q == 2 * G - 1) & (cur_fp == 0)):
                    m.d.sync += group_step.eq(acc + self.stride)
                with m.If(q == n_keys - 1):
                    m.d.sync += take_f.eq(1)
                    m.next = "TAKE"
            with _state(m, "ADVANCE", restart):  # to the beat's round, a pair a cycle
                m.d.comb += fsm_busy.eq(1)
                m.d.sync += [
                    cur_fp.eq(cur_fp1),
                    cur_fp1.eq(cur_fp1 + 1),
                    rnd_base.eq(rnd_base + two_s),
                ]
                with m.If(cur_fp1 == beat.first_pair):
                    m.d.sync += [acc.eq(rnd_base + two_s), q.eq(0)]
                    m.next = "INIT"
            with _state(m, "TAKE", restart):  # a beat: its pointer, read into a0
                # (held takes the beat here: take_f; the beat holds from TAKE to PUT)
                with m.If(full):
                    m.d.sync += take_f.eq(0)
                    with m.If(beat.first_pair != cur_fp):
                        m.next = "ADVANCE"
                    with m.Else():
                        m.next = "PUT"
            with _state(m, "PUT", restart):  # group 0 now, the others in WRITE
                m.d.comb += [fsm_busy.eq(1), w_addr.eq(a0), w_en.eq(beat.mask[0])]
                m.d.sync += [ptr[key].eq(a0 + 1), full.eq(0)]
                m.next = "TAKE"
                if F == 1:
                    m.d.sync += take_f.eq(1)
                else:
                    m.d.sync += [
                        mask.eq(beat.mask >> 1),
                        addr.eq(a0 + group_step),
                        g.eq(1),
                    ]
                    m.next = "WRITE"
            with _state(m, "WRITE", restart):
                m.d.comb += [fsm_busy.eq(1), w_addr.eq(addr), w_en.eq(mask[0])]
                m.d.sync += [
                    addr.eq(addr + group_step),
                    g.eq(g + 1),
                    mask.eq(mask >> 1),
                ]
                with m.If(g == F - 1):
                    m.d.sync += take_f.eq(1)
                    m.next = "TAKE"
        return m
