"""InputLoader: the network inputs of each sample, into the lanes' input regions.

Two input regions (slots 0 and 1) per lane hold layer-0 inputs, one activation-memory
word per input index (a byte per lane). The loader fills a slot when the pass engine has
released it and marks it loaded:

* **per-member inputs** (``shared = 0``): words from the ``inp`` stream, in the order
  (round, sample, member sign, input index); word ``k`` of sign ``s`` holds, in lane
  ``j``'s byte, input ``k`` of member ``2 (first_pair + j) + s``. Sign ``s`` goes to slot
  ``s``.
* **shared inputs** (``shared = 1``): every member sees sample ``idx = batch[b]`` of the
  sample memory (``n_0`` bytes at ``idx * n_0``), replicated into every lane's byte; its
  label goes to ``labels[g % 4]``, its input to slot ``g % 2``, ``g`` counting the
  samples since ``start`` across rounds.

It writes through the activation memory's write port in the cycles the finalizer cannot
(those outside :func:`~.finalizer.aw_cycles` of the finalizer's window, known from a copy
of its window counter): a static rule, so that no signal of the finalizer reaches the
loader's state. Its writes leave through registers (``aw_*``: a cycle after the loader
decides them), and a slot counts as loaded a cycle after its last write. A unit (a
sample, and for per-member inputs a sign) ends in a cycle of its own after its last
write: the next unit waits for its slot from the cycle after that.
"""

from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .finalizer import aw_cycles, window_next
from .params import EvaluatorParams
from .pass_engine import REPLICA_ATTR

__all__ = ["InputLoader"]


class InputLoader(wiring.Component):
    """Fills input regions (module docstring).

    Interface attributes
    --------------------
    start : In(1)
        Strobe: a new evaluation (``rounds * batch`` samples); clears the slots' state.
    shared : In(1), n0 : In(width_bits), batch : In(16), rounds : In(12)
        Stable from ``start`` until the evaluation ends (the loader's state and each
        finalizer group take copies of ``shared`` a cycle late).
    inp : In(stream.Signature(8 * lanes))
        Per-member input words.
    b_addr : Out(16), b_en : Out(1), b_data : In(16)
        The batch-index memory (``batch[b_base + b]``), ``mem_latency`` cycles. The three
        read ports' addresses and enables come from registers.
    b_base : In(16)
        The batch's first word in the batch-index memory (stable while the loader runs;
        taken a cycle late).
    s_addr : Out(32), s_en : Out(1), s_data : In(8)
        The sample memory (bytes).
    l_addr : Out(16), l_en : Out(1), l_data : In(16)
        The label memory (``label[idx]``).
    labels : Out(ArrayLayout(width_bits, 4))
    label_max : In(width_bits)
        Labels must be below it (the number of classes); a larger one sets ``bad_label``.
    bad_label : Out(1)
    aw_addr : Out(range(act_depth)), aw_data : Out(8 * lanes), aw_en : Out(1)
        Writes of the activation memory, from registers, never in a cycle whose window
        count (the finalizer's ``wc``, counted here from the same reset) is in
        ``aw_cycles``. ``aw_data`` is the data of the finalizer's writes too: in the
        cycle before one of ``aw_cycles`` each lane's byte takes its group's
        ``fin_bytes``, so the memory's write data needs no multiplexer.
    aw_en_c : Out(act_write_copies)
        Wide builds: ``aw_en`` in equal copies, one per copy of the activation memory's
        write address (the copy of lane ``j``: ``j * act_write_copies // lanes``).
    fin_bytes : In(ArrayLayout(8, finalizers))
        The finalizer groups' hidden-output bytes (``Finalizer.aw_bytes``).
    loaded : Out(2)
    release : In(2)
        Strobes from the pass engine: a slot is free again.
    """

    def __init__(self, p: EvaluatorParams):
        self.p = p
        L = p.lanes
        super().__init__(
            {
                "start": In(1),
                "shared": In(1),
                "n0": In(p.width_bits),
                "batch": In(16),
                "rounds": In(12),
                "inp": In(stream.Signature(8 * L)),
                "b_addr": Out(16),
                "b_en": Out(1),
                "b_data": In(16),
                "b_base": In(16),
                "s_addr": Out(32),
                "s_en": Out(1),
                "s_data": In(8),
                "l_addr": Out(16),
                "l_en": Out(1),
                "l_data": In(16),
                "labels": Out(data.ArrayLayout(p.width_bits, 4)),
                "label_max": In(p.width_bits),
                "bad_label": Out(1),
                "aw_addr": Out(range(p.act_depth)),
                "aw_data": Out(8 * L),
                "fin_bytes": In(data.ArrayLayout(8, p.finalizers)),
                "aw_en": Out(1),
                "loaded": Out(2),
                "release": In(2),
                **({"loaded_set": Out(2), "aw_en_c": Out(p.act_write_copies)} if p.wide else {}),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.p
        lat = p.mem_latency
        # the slots' flags take no reset: ``start`` clears them before a run reads them,
        # and is then their flip-flops' set/reset alone, not a LUT of it and the reset
        # (shared with the finalizer's block count: 2 of the 128-lane ECP5 evaluator's
        # 24 endpoints past 8 ns at 59c3e3a, seed 1, 8.40 ns)
        loaded = Signal(2, reset_less=True)
        done_slot = Signal(2)  # a slot's last write is decided this cycle
        done_d = Signal(2)  # ... and lands in the memory this cycle
        m.d.comb += self.loaded.eq(loaded)
        if p.wide:
            m.d.comb += self.loaded_set.eq(done_d)
        m.d.sync += [done_d.eq(done_slot), loaded.eq((loaded & ~self.release) | done_d)]

        active = Signal()
        b = Signal(16)  # sample within the round
        rnd = Signal(12)
        sgn = Signal()  # per-member: the sign being loaded
        gs = Signal(2)  # samples loaded since start, mod 4: labels and slots (shared)
        # `shared` from a register beside the loader: a run's setting, stable from start
        # (the cycle start is seen, the loader does nothing else), so its copy a cycle
        # late is the same in every cycle the loader's state reads it. The register
        # file's flip-flop far across the chip had reached the loader's state through
        # the handshake's decision, 2.49 ns of routing before it (the 128-lane ULX3S
        # build at b2f4cab, seed 2: 10.33 ns into `active`, 10.05 into `b`)
        shared = Signal()
        m.d.sync += shared.eq(self.shared)
        slot = Mux(shared, gs[0], sgn)
        k = Signal(p.width_bits + 1)
        # 0: wait slot, 1: index, 2: base address, 3: bytes / words, 4: a byte arrives,
        # 5: the index arrives, 6: the label arrives, 7: the unit's end
        phase = Signal(3)
        # phase 3 of a per-member unit (phase == 3 and not shared) as a flip-flop of its
        # own, set and cleared with the phase: the input's ready from it and write_ok
        # (two flip-flops, one LUT) rather than the phase's decode. The ready reaches the
        # input register's valid copies spread over the chip; from the phase, through
        # the decode and write_ok, it was the 128-lane ULX3S build's critical path at
        # 635abd7 (seed 1, 9.40 ns, 7.93 of it routing, 4 levels)
        words = Signal()
        # wide builds: phase 4 as a flip-flop of its own likewise (set with the phase,
        # cleared with its write and by start), for the write decision below
        at4 = Signal()
        idx = Signal(16)
        # base = idx * n0 <= 65535 * max_width: that width, not the 32 of the address
        # port (the 32-bit adder's carry chain into base was 8.06 ns in the 128-lane
        # ECP5 evaluator at d1d3a78, seed 1); mul_a's bits above it never reach base
        base_bits = (0xFFFF * p.max_width).bit_length()
        base = Signal(base_bits)
        mul_n = Signal(p.width_bits)  # multiplier bits left (shift-add idx * n0)
        mul_a = Signal(base_bits)

        # a label's range check a cycle after it arrives, from a register of the label
        # memory's data and a flag: the compare between the memory's output and
        # bad_label (8.41 ns in the 128-lane ECP5 evaluator at 87e4c97, seed 3) is
        # not in the arrival's cycle. Only the error flag waits; the label does not
        # The bound is a register too (the class count holds through a run, and a label
        # is checked many cycles after start): its source is the widths' selection by
        # the layer count in the register file, far across the chip (through it into
        # bad_label: 8.18 ns in the 128-lane ECP5 evaluator at d1d3a78, seed 1)
        lab_r = Signal(16, reset_less=True)
        lab_max = Signal.like(self.label_max, reset_less=True)
        lab_chk = Signal()
        m.d.sync += [lab_r.eq(self.l_data), lab_max.eq(self.label_max), lab_chk.eq(0)]
        bad_now = lab_chk & (lab_r >= lab_max)
        if p.wide:
            # wide builds: the compare into a register of its own, the flag a cycle later
            # (the compare's route into bad_label had 8.9 ns in the 128-lane ECP5
            # evaluator at 1986031, seed 1); the flag is read at the run's end
            bad_d = Signal()
            m.d.sync += bad_d.eq(bad_now & ~self.start)
            bad_now = bad_d
        with m.If(bad_now):
            m.d.sync += self.bad_label.eq(1)

        with m.If(self.start):
            m.d.sync += [
                active.eq(1),
                b.eq(0),
                rnd.eq(0),
                sgn.eq(0),
                gs.eq(0),
                phase.eq(0),
                words.eq(0),
                loaded.eq(0),
                self.bad_label.eq(0),
            ]
            if p.wide:
                m.d.sync += at4.eq(0)

        def region(s):
            return Cat(Const(0, p.region_bits), s, Const(0, 2)) if p.region_bits else s

        # the finalizer's window counter, counted here (the same reset, the same period):
        # a write decided now lands next cycle, in a cycle the finalizer does not write
        T = p.period
        fin_wc = aw_cycles(T)
        wcl = Signal(range(T))
        # (its wrap at T = 4 a truncation, not a compare into the flip-flops' set/reset:
        # 2 of the 128-lane ECP5 evaluator's endpoints past 8 ns at 9fe00a1, seed 3)
        wc_next = window_next(wcl, T)
        m.d.sync += wcl.eq(wc_next)
        # whether the next cycle's count is none of the finalizer's: from a register set a
        # cycle ahead (from the count after next, as the groups' fin_next below; its
        # first value after a reset is that of count 1), so the count's increment and
        # compares are not before the phase's and the counters' enables (with the
        # member input's valid, into rnd's enables: 7 of the 128-lane ULX3S build's 58
        # endpoints past 9.3 ns at aba3e6a, seed 2)
        write_ok = Signal(init=int(1 % T not in fin_wc))
        # the write, decided in this cycle's logic, leaves through registers; the data
        # register takes its source every cycle, whatever the decision (the byte of a
        # shared sample, held while it waits, or the input word of the handshake), so the
        # decision reaches only the enable and the address, not the 8 * lanes data bits
        # spread over the chip (the 128-lane ECP5 evaluator's critical path at 9e02320,
        # the loader's phase into aw_data, 18.72 ns, 16.59 of it routing)
        # shared: the sample byte that arrived, a copy per finalizer group (one register
        # had driven the data logic of every lane, 128 loads a bit at 128 lanes)
        got = [
            Signal(8, name=f"got{g}", reset_less=True, attrs={REPLICA_ATTR: 1})
            for g in range(p.finalizers)
        ]
        have = Signal()
        # one register of the write's address and enable, beside the loader (the
        # evaluator's choice per copy of the activation memory's address takes it): in
        # copies (act_write_copies) their shared decision logic, from the input's valid,
        # drove all of them across the chip (the 128-lane ULX3S build at 558f2e8, seed 1:
        # 10.41 ns, 9.18 of it routing)
        w_en, w_addr = Signal(), Signal.like(self.aw_addr)
        if p.wide:
            # Wide builds: the address register takes the slot's next address in every
            # cycle (it is read only with ``aw_en``), so that the write decision is not
            # also its synchronous clear: the decision, folded by Yosys into the
            # flip-flops' LSR with the reset, had 8 of the 128-lane ECP5 evaluator's 61
            # endpoints past 8 ns at 0a02018 (seed 3, 8.82 ns). The phases' w_addr
            # (the same address) is then unread: narrow builds keep it, unchanged.
            aw_addr = Signal.like(self.aw_addr, name="aw_addr_r", reset_less=True)
            m.d.sync += [self.aw_en.eq(w_en), aw_addr.eq(region(slot) | k)]
            m.d.comb += self.aw_addr.eq(aw_addr)
            # the write flag also in a copy per choice of the activation memory's address
            # (``aw_en_c``, replicas with aw_en's reset): aw_en alone reached the write
            # enables of every lane's slice, a route across the chip (the 128-lane ECP5
            # evaluator at 73efdd3, seed 1: its critical path, 8.54 ns, 7.64 ns one net)
            aw_en_c = [
                Signal(name=f"aw_en_c{c}", attrs={REPLICA_ATTR: 1})
                for c in range(p.act_write_copies)
            ]
            m.d.sync += [r.eq(w_en) for r in aw_en_c]
            m.d.comb += self.aw_en_c.eq(Cat(aw_en_c))
        else:
            m.d.sync += [self.aw_en.eq(w_en), self.aw_addr.eq(w_addr)]

        # The register is the write data of the finalizer's writes too: before one of
        # the finalizer's cycles (fin_wc) it takes the group's hidden-output byte. A
        # group's byte or the shared sample's is chosen once per group, so a lane's bit
        # is a choice of two (that byte or its own input), one LUT4 on the iCE40 (the
        # finalizer's and the loader's data were chosen per lane at the memory: 8 LUT4
        # per lane more).
        # Whether the next cycle is one of them comes from a register of each group
        # (set a cycle ahead, from the count after next; its first value after a reset
        # is that of count 1), so no decode of the count reaches the data registers
        # spread over the chip (the 128-lane ECP5 evaluator's critical path at 085077d,
        # the count into aw_data, 15.39 ns, 14.16 of it routing).
        # The count after next is one of the finalizer's (fin_next2), and that or a
        # shared run (common_next2): registers set from a lookup of the count (it steps
        # every cycle from the reset, so its value three cycles on is a function of it),
        # not its two increments and compares before the groups' registers (into
        # aw_use_common: 1 of the 128-lane ECP5 evaluator's 33 endpoints past 8 ns at
        # 3d72357, seed 3, 8.20 ns). Their first values after a reset are those of count
        # 2; common_next2 takes `shared` a cycle earlier than it did, the same value
        # while the loader writes.
        def is_fin(ahead):
            return Array(Const(int((w + ahead) % T in fin_wc)) for w in range(T))[wcl]

        fin_next2 = Signal(init=int(2 % T in fin_wc))
        common_next2 = Signal(init=int(2 % T in fin_wc))
        m.d.sync += [
            fin_next2.eq(is_fin(3)),
            common_next2.eq(is_fin(3) | self.shared),
            write_ok.eq(~fin_next2),
        ]
        # the data register has no reset (it is written every cycle, before any enable
        # uses it): 8 * lanes flip-flops fewer on the evaluator's reset leaf, which at
        # 128 lanes reached 3,220 of them all over the chip, 1,024 of them these
        aw_data = Signal(8 * p.lanes, reset_less=True)
        m.d.comb += self.aw_data.eq(aw_data)
        common = [Signal(8, name=f"aw_common{g}") for g in range(p.finalizers)]
        for g in range(p.finalizers):
            fin_next = Signal(
                name=f"aw_fin_next{g}", init=int(1 % T in fin_wc), attrs={REPLICA_ATTR: 1}
            )
            # and whether the group's lanes take the common byte at all: the shared
            # sample or the finalizer's byte (`shared` is a run's setting, constant while
            # the loader writes, so its copy a cycle late is the same; the one register
            # had reached all 8 * lanes data bits' logic: 1,189 loads at 128 lanes)
            use_common = Signal(
                name=f"aw_use_common{g}",
                init=int(1 % T in fin_wc),
                attrs={REPLICA_ATTR: 1},
            )
            m.d.sync += [fin_next.eq(fin_next2), use_common.eq(common_next2)]
            m.d.comb += common[g].eq(Mux(fin_next, self.fin_bytes[g], got[g]))
            for j in range(g * p.group_lanes, min(p.lanes, (g + 1) * p.group_lanes)):
                m.d.sync += aw_data[8 * j : 8 * j + 8].eq(
                    Mux(use_common, common[g], self.inp.payload[8 * j : 8 * j + 8])
                )
        # A read request leaves through registers (address and enable: the memories sit
        # beside the accelerator's phase multiplexers, far from the loader on a large
        # chip; the 128-lane ULX3S build at 7abcf85 had its critical path from the
        # loader's state into the batch memory's address, 21.67 ns, 18.71 of it
        # routing), and its data comes lat cycles after that: lat + 1 after the request.
        req = Signal()
        s_addr, l_addr = Signal(32), Signal(16)
        # the batch's base added here, before the address register (a copy of the input
        # beside the loader): added after it, between the register and the batch
        # memory's address, it had 11 of the 128-lane ULX3S build's 83 endpoints past
        # 9.3 ns at 179b581 (seed 2, 9.74 ns)
        # The address register takes b + b_base every cycle, whatever the phase (the
        # read's enable alone says when it is used): b changes in phase 7 and the read
        # is in phase 1, two cycles later at least. Chosen by the phase, it had 14 of
        # the 128-lane ECP5 evaluator's 55 endpoints past 8 ns at 7578f61 (seed 1) and
        # 16 of 497 at e7fe268 (seed 3)
        b_base = Signal(16, reset_less=True)
        m.d.sync += b_base.eq(self.b_base)
        b_en, s_en, l_en = Signal(), Signal(), Signal()
        # the label read's enable from a register without a reset (a read after a reset
        # reads, nothing takes its data: ``pend`` has one): with it, the reset joined
        # the decision's terms in a LUT before the flip-flop's set/reset (8.45 ns in
        # the 128-lane ECP5 evaluator at 59c3e3a, seed 1)
        l_en_r = Signal(reset_less=True)
        m.d.comb += self.l_en.eq(l_en_r)
        # Wide builds: the sample address register takes base + k every cycle (the
        # read's enable, a cycle after phase 3's request, alone says when it is used,
        # and it then holds the request cycle's base + k either way), so the phase's
        # decode is not before its flip-flops: 23 of the 128-lane ECP5 evaluator's 24
        # endpoints past 8 ns at 9d0cf9a (seed 1, placer timing weight 30, 8.33 ns).
        # Narrow builds keep the address chosen by the phase (0 between reads).
        m.d.sync += [
            self.b_addr.eq(b + b_base),
            self.b_en.eq(b_en),
            self.s_addr.eq(base + k if p.wide else s_addr),
            self.s_en.eq(s_en),
            self.l_addr.eq(l_addr),
            l_en_r.eq(l_en),
        ]
        pend = [Signal(name=f"pend{j}") for j in range(lat + 1)]
        m.d.sync += pend[0].eq(req)
        for j in range(1, lat + 1):
            m.d.sync += pend[j].eq(pend[j - 1])
        arrived = pend[-1]
        # the sample byte through a register of its own before the groups' copies: the
        # sample memory's output choice (its block RAMs' group) across the chip into the
        # copies had 17 of the 128-lane ULX3S build's 44 endpoints past 9.3 ns at 56cddf5
        # (seed 2) and 9.95 ns, the critical path, at seed 3. The byte reaches the
        # copies a cycle later, and phase 4 waits for that (s_ready)
        s_data = Signal(8, reset_less=True)
        m.d.sync += s_data.eq(self.s_data)
        s_ready = Signal()  # the requested byte is in the groups' copies next cycle
        m.d.sync += s_ready.eq(arrived)
        # got takes the sample memory's data at every arrival, from a copy of the flag
        # per group (a flip-flop beside the group's got, no logic before its enable): only
        # phase 4 reads it, and its byte is then the one arrival in flight (phase 3
        # requests it with nothing pending). The phase's decode into the enables of the
        # copies spread over the chip had 18 of the 128-lane ULX3S build's 583 endpoints
        # past 10 ns at 3f25487 (seed 1)
        for g, c in enumerate(got):
            take = Signal(name=f"s_arrived{g}", attrs={REPLICA_ATTR: 1})
            m.d.sync += take.eq(pend[-1])
            with m.If(take):
                m.d.sync += c.eq(s_data)

        # whether this is the batch's last sample, the run's last round, the unit's last
        # byte or word: flags in registers, not compares in the logic that ends a unit
        # (the byte count's compare through it into the phase was the 128-lane ULX3S
        # build's critical path at cc3ca8c, 11.68 ns, 8 levels; b and rnd had 17 of its
        # 413 endpoints past 10 ns at cd6a36f, seed 1). b and rnd change at a unit's end
        # and are next read at the end of the next unit, two cycles or more later (phase
        # 0 lies between), so their flags a cycle behind are the same; k's flag is set
        # with k.
        b_last = Signal()
        rnd_last = Signal()
        m.d.sync += [b_last.eq(b + 1 == self.batch), rnd_last.eq(rnd + 1 == self.rounds)]
        k_last = Signal()

        # words is 1 exactly in phase 3 of a per-member unit while active (set only
        # from phase 0, cleared with the phase's every way out of 3 and by start)
        # Wide builds take a word every other cycle at most: a word taken (``took``, a
        # flip-flop) steps the unit's state in the next cycle, in which the input is not
        # ready, so that the input's valid reaches only the write's enable and ``took``
        # (one LUT4 each), not the phase, k and the unit's flags. Decided in the cycle of
        # the handshake, the input's valid (the test wrapper's register) had the
        # 128-lane ECP5 evaluator's critical path at fb6b2d7 (seed 1, 110.16 MHz: into
        # the loader's `phase`, 9.08 ns, 7.02 of it routing). The accelerator's member
        # input register offers a word every other cycle anyway (StreamRegister).
        ready = words & write_ok & ~self.start
        if p.wide:
            took = Signal()
            ready = ready & ~took
            m.d.sync += took.eq(self.inp.valid & ready)
        m.d.comb += self.inp.ready.eq(ready)
        with m.If(active & ~self.start):
            with m.Switch(phase):
                with m.Case(0):  # wait for the slot
                    with m.If(~loaded.bit_select(slot, 1)):
                        m.d.sync += [
                            k.eq(0),
                            k_last.eq(self.n0 == 1),
                            phase.eq(Mux(shared, 1, 3)),
                            words.eq(~shared),
                        ]
                with m.Case(1):  # shared: batch index, then the label and base address
                    m.d.comb += [b_en.eq(1), req.eq(1)]
                    m.d.sync += phase.eq(5)
                with m.Case(5):
                    with m.If(arrived):
                        m.d.sync += [
                            idx.eq(self.b_data),
                            mul_n.eq(self.n0),
                            mul_a.eq(self.b_data),
                            base.eq(0),
                            phase.eq(2),
                        ]
                with m.Case(2):  # label read, and base = idx * n0 by shift-add
                    with m.If(mul_n == 0):
                        m.d.comb += [l_addr.eq(idx), l_en.eq(1), req.eq(1)]
                        m.d.sync += phase.eq(6)
                    with m.Else():
                        with m.If(mul_n[0]):
                            m.d.sync += base.eq(base + mul_a)
                        m.d.sync += [mul_n.eq(mul_n >> 1), mul_a.eq(mul_a << 1)]
                with m.Case(6):
                    with m.If(arrived):
                        lab = self.l_data[: p.width_bits]
                        m.d.sync += [self.labels[gs].eq(lab), phase.eq(3), lab_chk.eq(1)]
                with m.Case(3):  # bytes (shared) or words (per-member), one write each
                    with m.If(shared):
                        # one byte in flight at a time: read, then write it lat + 3
                        # cycles later (a byte every lat + 4 cycles at best)
                        with m.If(~Cat(*pend).any()):
                            m.d.comb += [
                                s_addr.eq(base + k),
                                s_en.eq(1),
                                req.eq(1),
                            ]
                            m.d.sync += phase.eq(4)
                            if p.wide:
                                m.d.sync += at4.eq(1)
                    if not p.wide:  # (wide builds: after the case)
                        with m.Else():
                            with m.If(self.inp.valid & write_ok):
                                m.d.comb += [w_en.eq(1), w_addr.eq(region(slot) | k)]
                                m.d.sync += [k.eq(k + 1), k_last.eq(k + 2 == self.n0)]
                                with m.If(k_last):
                                    m.d.comb += done_slot.eq(Mux(slot, 2, 1))
                                    m.d.sync += [phase.eq(7), words.eq(0)]
                with m.Case(4):  # shared: the byte arrives; write it replicated
                    with m.If(s_ready):
                        m.d.sync += have.eq(1)
                    if not p.wide:  # (wide builds: after the case)
                        with m.If(have & write_ok):
                            m.d.comb += [w_en.eq(1), w_addr.eq(region(slot) | k)]
                            m.d.sync += [
                                have.eq(0),
                                k.eq(k + 1),
                                k_last.eq(k + 2 == self.n0),
                                phase.eq(3),
                            ]
                            with m.If(k_last):
                                m.d.comb += done_slot.eq(Mux(slot, 2, 1))
                                m.d.sync += phase.eq(7)
                # after a (sample, sign): the next one, or the end. A phase of its own,
                # from registers only, a cycle after the unit's last write: decided in
                # that write's cycle, the handshake's decision (the input's valid or
                # `have`, and write_ok) had reached b's, rnd's, gs's, sgn's and active's
                # enables, 5 LUTs and 9.97 ns (the 128-lane ULX3S build at b2f4cab, seed
                # 3's critical path). One cycle per unit: n0 or more cycles each.
                with m.Case(7):
                    m.d.sync += phase.eq(0)
                    with m.If(~shared & ~sgn):
                        m.d.sync += sgn.eq(1)
                    with m.Else():
                        m.d.sync += [sgn.eq(0), gs.eq(gs + 1)]
                        with m.If(b_last):
                            m.d.sync += b.eq(0)
                            with m.If(rnd_last):
                                m.d.sync += active.eq(0)
                            with m.Else():
                                m.d.sync += rnd.eq(rnd + 1)
                        with m.Else():
                            m.d.sync += b.eq(b + 1)
        if p.wide:
            # Wide builds decide a unit's write (phase 3 of a per-member unit: an input
            # word; phase 4: the shared byte) outside the phase's case, from the phase
            # flags (`words`, `at4`), and give the phase its next value after the case's:
            # a write, then 7 after the unit's last or else 3. Inside the case, behind the
            # phase's decode, the handshake and k_last reached the phase in 5 LUTs (the
            # 128-lane ECP5 evaluator's critical path at 228cec9 with the placer's timing
            # weight 30, seed 1: 8.67 ns, 6.94 of it routing; at seed 3 with the default
            # weight, the same phase from `shared`: 9.04 ns)
            # the write's enable in the handshake's cycle (a word) or in the byte's
            # (a shared sample); the unit's state steps in the cycle after a word
            # (took) and in the byte's cycle
            byte_fire = write_ok & ~self.start & at4 & have
            m.d.comb += w_en.eq((self.inp.valid & ready) | byte_fire)
            step = (took & ~self.start) | byte_fire
            with m.If(step):
                m.d.sync += [
                    have.eq(0),
                    at4.eq(0),
                    words.eq(words & ~k_last),
                    k.eq(k + 1),
                    k_last.eq(k + 2 == self.n0),
                    phase.eq(Mux(k_last, 7, 3)),
                ]
                with m.If(k_last):
                    m.d.comb += done_slot.eq(Mux(slot, 2, 1))
        return m
