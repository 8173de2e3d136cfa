"""PassEngine: runs the lanes through passes, one input per cycle, passes back to back.

A *pass* reads ``n`` activations of every lane (one activation-memory word per cycle:
all lanes' bytes at input index ``k``) and multiplies them with two digits per lane: the
broadcast weights of two rows (a layer pass, from the :class:`WeightStreamer`) or the
lane's own noise digits of a u-row pass (noise bank ``q % 2``). Then a *flush* beat moves
the lanes' sums into their capture registers; in a layer pass it coincides with the
weight streamer's bias beat, whose digits go into the pass record. The record goes to the
finalizer when the captures hold the new sums.

Before a pass starts the engine waits for what it depends on, as the sequencer marked
it: the finalizer's completed blocks (a layer block reads the previous layer's outputs of
the same member), an input region loaded by the loader, the finalizer idle (a u-row
pass reads the noise banks the finalizer also reads). A flush waits until the finalizer
has taken the previous pass's captures. Everything the lanes receive is delayed by
``LATENCY`` (four cycles: the memories' three, :data:`MEM_LATENCY`, then the lanes' input
registers) so that control, digits and activations meet. The lanes' input registers take
the activation memory's data and the noise digits of the lane's bank (``nd_bank``, a
copy per group, in step with the memories' data), so that the route from a block RAM to
its lane ends at a register, not at a lane's term logic.

Quantized mode: every pass is a layer pass that also reads the lanes' own E digits
(noise bank ``u_bank`` from address ``u_addr``, one slot per input, the bias column's slot
at the flush beat); the lanes get ``qe`` and the member's sign ``s`` with the beat.
"""

from __future__ import annotations

from math import isqrt

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int
from .lane import DIGIT_CTRL, digit_ctrl
from .params import EvaluatorParams

__all__ = [
    "ACTIVITY_LAYOUT",
    "COPY_LANES",
    "LATENCY",
    "MEM_LATENCY",
    "REPLICA_ATTR",
    "PassEngine",
    "command_layout",
    "lane_copies",
    "lane_ctrl_layout",
]

#: Cycles from an activation/noise read to its data at the memories' outputs
#: (:class:`~pentegg.rtl.evaluator.sliced.SlicedRAM`: the slices' address registers, the
#: block RAM register and its output register).
MEM_LATENCY = 3

#: Cycles from an activation/noise read to its data at the lanes: the memories' three,
#: then the lanes' input registers (the evaluator's ``lane{j}_x``, ``lane{j}_nd``). The
#: noise banks' outputs through the bank choice into a lane's term register had 35 of the
#: 128-lane ULX3S build's 70 endpoints past 9.3 ns at ``df38c97`` (seed 2: 10.46 ns, 8.54
#: of it routing, 6.30 the route from a block RAM to its lane).
LATENCY = MEM_LATENCY + 1


def command_layout(p: EvaluatorParams, rec_layout, noise_bits: int) -> data.StructLayout:
    """A pass command: how to run the pass, and the record it leaves for the finalizer.
    Wide builds' commands carry ``u_mac`` besides: ``u & (n != 0)``, the pass's first
    beat a u-row MAC (the noise reads' enables load it at the take: the compare of ``n``
    between the queue's head and the eight copies of ``nz_en`` had been on the 128-lane
    ECP5 evaluator's critical path at b022460, seed 1: 8.49 ns, 6.78 of it routing)."""
    wide = {"u_mac": 1} if p.wide else {}
    return data.StructLayout(
        {
            "u": 1,  # a u-row pass (else a layer pass)
            "n": p.width_bits,  # inputs
            "in_region": 3,  # activation region read
            "u_bank": 1,  # u-row pass: noise bank q % 2 ...
            "u_addr": noise_bits,  # ... and address of U(q, 0)
            "wait_block": 1,  # wait until blocks_done reaches need
            "need": 16,
            "wait_input": 1,  # wait until the input region is loaded
            "release": 1,  # the input region is free after this pass
            "in_slot": 1,  # the input region's slot (0 or 1)
            "wait_idle": 1,  # wait until the finalizer is idle
            "rec": rec_layout,
            **wide,
        }
    )


#: What the lanes do in a cycle (one bit set): a MAC beat, a flush, or why they wait.
ACTIVITY_LAYOUT = data.StructLayout(
    {
        "mac": 1,  # a MAC beat
        "flush": 1,  # a flush beat
        "dep": 1,  # a pass waits for a finalized block, a loaded input or an idle finalizer
        "caps": 1,  # a flush waits for the finalizer to take the previous captures
        "weights": 1,  # a beat waits for the weight streamer
        "none": 1,  # no pass command (the sequencer: noise fill, configuration, drain)
    }
)


def lane_ctrl_layout() -> data.StructLayout:
    """What every lane receives each cycle (besides its activation and noise digits):
    the beat (``en``, ``flush``, ``src``, quantized mode's ``qe`` and ``s``) and the
    decoded broadcast weights ``w`` (the noise bank of its own digits is chosen a cycle
    earlier, at its input register: ``PassEngine.nd_bank``)."""
    return data.StructLayout(
        {
            "en": 1,
            "flush": 1,
            "src": 1,
            "qe": 1,
            "s": 1,
            "w": data.ArrayLayout(DIGIT_CTRL, 2),
        }
    )


#: The attribute that marks a replicated register: Yosys's ``opt_merge`` would merge
#: registers with the same input back into one (``rtl/synth.py`` keeps the registers
#: driving wires that carry it: :func:`pentegg.rtl.synth.synth_flows`).
REPLICA_ATTR = "pentegg_replica"

#: Lanes served by one copy of a replicated register outside the evaluator's finalizer
#: groups (the vote accumulator's and the updater's lanes, the member reader's bytes).
COPY_LANES = 8


def lane_copies(m, name: str, value, lanes: int, *, reset_less: bool = True) -> list:
    """``value`` registered (a cycle late) in copies ``{name}_c{k}``, one per
    :data:`COPY_LANES` lanes, marked :data:`REPLICA_ATTR`; returns each of the ``lanes``
    lanes' copy, so that no one register drives every lane."""
    regs = [
        Signal(value.shape(), name=f"{name}_c{k}", reset_less=reset_less, attrs={REPLICA_ATTR: 1})
        for k in range(-(-lanes // COPY_LANES))
    ]
    m.d.sync += [r.eq(value) for r in regs]
    return [regs[i // COPY_LANES] for i in range(lanes)]


def _ctrl_register(m, src, name: str, flush_init: int = 0, *, replica: bool = False):
    """A stage of the lanes' control: ``src`` registered, as a signal of
    :func:`lane_ctrl_layout`. Only ``en`` and ``flush`` take the reset (``flush`` to
    ``flush_init``): the rest matters only with ``en`` high, so its flip-flops take no
    reset, and no reset logic lies before them (the copies' digit bits behind such a
    LUT had 41 of the 128-lane ECP5 evaluator's 329 endpoints past 8 ns at c0a017a,
    seed 3, up to 10.16 ns)."""
    attrs = {REPLICA_ATTR: 1} if replica else {}
    bits = Signal(lane_ctrl_layout(), name=name, reset_less=True, attrs=attrs)
    en = Signal(name=f"{name}_en", attrs=attrs)
    flush = Signal(name=f"{name}_flush", init=flush_init, attrs=attrs)
    m.d.sync += [bits.eq(src), en.eq(src.en), flush.eq(src.flush)]
    out = Signal(lane_ctrl_layout(), name=f"{name}_q")
    m.d.comb += [out.eq(bits), out.en.eq(en), out.flush.eq(flush)]
    return out


class PassEngine(wiring.Component):
    """Runs pass commands (module docstring).

    Parameters
    ----------
    p : EvaluatorParams
    rec_layout : Layout
        The finalizer's pass record.
    noise_bits : int
        Width of a noise-bank address.
    copies : int
        Copies of the lane controls, 1..lanes (the evaluator: one per finalizer group).
    per_lane : bool
        After the copies, a register of each lane's own, loaded from its group's copy
        (lane ``j``: copy ``j // group_lanes``); ``ctrl`` has an entry per lane.

    Interface attributes
    --------------------
    cmd : In(stream.Signature(command_layout(...)))
        Passes, in order.
    cmd_pop : Out(1)
        Wide builds (``p.wide``) only: the command queue's read enable, a flip-flop of
        the take (``cmd.valid & cmd.ready``), a cycle after it; the head may show the
        taken command for that cycle, which the engine ignores. Narrow builds pop with
        ``cmd.ready``.
    wbeat : In(stream.Signature(...))
        The weight streamer's digit pairs (layer passes only).
    act_addr : Out(range(act_depth)), act_en : Out(1)
        Activation memory reads.
    nz_addr : Out(noise_bits), nz_bank : Out(1), nz_en : Out(1)
        Noise bank reads: ``nz_en`` marks a u-row pass's MAC beat (from a register),
        which reads bank ``nz_bank`` at ``nz_addr``; quantized mode's layer passes read
        their E digits at ``nz_addr`` on every beat (``nz_en`` stays low).
    nz_reads : Out(ArrayLayout(StructLayout({"addr", "bank", "en"}), nz_copies))
        The same three from ``nz_copies`` copies of their registers, each feeding a few
        of the noise banks' slices.
    nd_bank : Out(ArrayLayout(1, copies))
        The noise bank of the lanes' own digits, per copy (lane ``j``: copy ``j //
        group_lanes``), aligned with the memories' data (``MEM_LATENCY`` cycles after the
        reads), for the lanes' input registers; from registers of their own.
    ctrl : Out(ArrayLayout(lane_ctrl_layout(), copies or lanes))
        To the lanes, aligned with their input registers (``LATENCY`` cycles after the reads):
        ``copies`` identical copies from registers of their own, so that no register
        drives every lane (a group of lanes takes one copy), or with ``per_lane`` each
        lane's own register, loaded from a copy. In reset the copies hold ``flush`` high,
        the lanes' own registers from a cycle later (the lanes' accumulators take no
        reset: a flush clears them, and what a lane did in that cycle).
    rec : Out(stream.Signature(rec_layout))
        Pass records, one per pass, when the captures hold its sums.
    consumed : In(1)
        The finalizer took the oldest captures.
    blocks_done : In(16), fin_idle : In(1)
        The finalizer's completed blocks (it counts up; it may be cleared only while no
        command is queued) and its idle flag (it falls only when the finalizer takes a
        record). Both reach the start of a pass through registers, a cycle behind.
    loaded : In(2)
        Input region slots loaded by the loader (narrow builds; wide ones keep their own
        copy from ``loaded_set`` and ``loaded_clear``).
    loaded_set : In(2), loaded_clear : In(1)
        Wide builds only: the loader's strobes that set its slot flags (a slot's last
        write has landed) and clear them (its start).
    release : Out(2)
        Strobes: the input region slot is free (its last pass has read it).
    busy : Out(1)
        A pass is running or a record waits.

    Throughput: ``n + 1`` cycles per pass when nothing waits (wide builds: ``n + 2`` for
    a u-row pass, which starts a cycle after its take); a pass waiting for a
    block count or the finalizer's idle flag starts the cycle after the first cycle it
    holds (a cycle later than a combinational check).
    """

    def __init__(
        self,
        p: EvaluatorParams,
        rec_layout,
        noise_bits: int,
        copies: int = 1,
        per_lane=False,
        nz_copies: int = 1,
    ):
        check_int("copies", copies, 1, p.lanes)
        self.nz_copies = check_int("nz_copies", nz_copies, 1, 64)
        self.p = p
        self.copies, self.per_lane = copies, bool(per_lane)
        self.rec_layout = rec_layout
        self.noise_bits = noise_bits
        self.cmd_layout = command_layout(p, rec_layout, noise_bits)
        wl = data.StructLayout({"d": data.ArrayLayout(3, 2), "bias": 1})
        ports = {"cmd_pop": Out(1), "loaded_set": In(2), "loaded_clear": In(1)} if p.wide else {}
        super().__init__(
            {
                **ports,
                "cmd": In(stream.Signature(self.cmd_layout)),
                "wbeat": In(stream.Signature(wl)),
                "act_addr": Out(range(p.act_depth)),
                "act_en": Out(1),
                "nz_addr": Out(noise_bits),
                "nz_bank": Out(1),
                "nz_en": Out(1),
                "nz_reads": Out(
                    data.ArrayLayout(
                        data.StructLayout({"addr": noise_bits, "bank": 1, "en": 1}), nz_copies
                    )
                ),
                "nd_bank": Out(data.ArrayLayout(1, copies)),
                "ctrl": Out(data.ArrayLayout(lane_ctrl_layout(), p.lanes if per_lane else copies)),
                "rec": Out(stream.Signature(rec_layout)),
                "consumed": In(1),
                "blocks_done": In(16),
                "fin_idle": In(1),
                "loaded": In(2),
                "release": Out(2),
                "busy": Out(1),
                "activity": Out(ACTIVITY_LAYOUT),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.p
        cur = Signal(self.cmd_layout)
        running = Signal()
        k = Signal(p.width_bits + 1)
        caps_busy = Signal()  # the captures hold sums the finalizer has not taken
        with m.If(self.consumed):
            m.d.sync += caps_busy.eq(0)

        # records wait here until the captures hold their sums (and the finalizer takes them)
        recq = fifo.SyncFIFO(width=self.rec_layout.size, depth=2)
        m.submodules.records = recq
        wiring.connect(m, recq.r_stream, wiring.flipped(self.rec))

        # ---- start a pass
        c = self.cmd.payload
        # The block count's compare and the finalizer's idle flag are registered, a
        # cycle behind (the finalizer's op valid flags through its idle flag, and the
        # count through the compare, into the take and every register it loads were
        # 7 LUT levels: the 128-lane ULX3S build's 10.64 ns into k at 7bac758, seed 2).
        # A registered compare counts only for the command it was made with: the one
        # at the head in the cycle before (c_same; a take happens no sooner than the
        # cycle after the next command reaches the head, and the pass just taken runs
        # for that cycle anyway). A block count a cycle old is no larger than now (it
        # only counts up; it is cleared at an evaluation's start, before its first
        # command reaches the head). The finalizer is idle now if it was a cycle ago
        # and no record was waiting for it then: only a record makes it busy.
        c_same = Signal()
        block_ok = Signal()
        idle_ok = Signal()
        # Wide builds (``p.wide``) pop the queue a cycle after the take (``cmd_pop``, a
        # flip-flop): the take, a decision of the head's dependences, had been the
        # enable of the queue's output register (the 128-lane ECP5 evaluator at
        # 1986031, seed 1: 48 of its 66 endpoints past 8 ns were that register and the
        # queue's level). The head then still shows the taken command for a cycle, while
        # the pass runs (a take sets ``running``), so nothing reads it but c_same, which
        # that cycle (``stale``) leaves low. (c_same matters only if the engine is idle
        # the cycle after, which needs a pass of n = 0: the interface allows one, the
        # evaluator's sequencer never emits one, so no test reaches this term.)
        fresh = self.cmd.valid & ~self.cmd.ready
        if p.wide:
            stale = Signal()
            m.d.sync += stale.eq(self.cmd.valid & self.cmd.ready)
            m.d.comb += self.cmd_pop.eq(stale)
            fresh &= ~stale
        m.d.sync += [
            c_same.eq(fresh),
            block_ok.eq((self.blocks_done - c.need)[15] == 0),
            idle_ok.eq(self.fin_idle & ~recq.r_rdy),
        ]
        loaded = self.loaded
        if p.wide:
            # Wide builds keep their own copy of the loader's slot flags, updated as the
            # loader updates its own (set by its last write's ``loaded_set``, cleared by
            # this engine's release and by the loader's start), so that the take reads
            # flip-flops beside it: the loader's ``loaded`` through the take into a
            # noise read enable copy was the 128-lane ECP5 evaluator's critical path at
            # 60dc4c5 (seed 3: 8.1 ns, 6.4 of it routing, its only endpoint past 8 ns).
            # No reset, as the loader's: equal to it from power-on, in every cycle.
            loaded = Signal(2, name="loaded_c", reset_less=True, attrs={REPLICA_ATTR: 1})
            with m.If(self.loaded_clear):
                m.d.sync += loaded.eq(0)
            with m.Else():
                m.d.sync += loaded.eq((loaded & ~self.release) | self.loaded_set)
        dep_ok = (
            (~c.wait_block | (c_same & block_ok))
            & (~c.wait_input | loaded.bit_select(c.in_slot, 1))
            & (~c.wait_idle | (idle_ok & ~caps_busy & ~recq.r_rdy))
        )
        take = self.cmd.valid & dep_ok & ~running
        u_first = c.u_mac if p.wide else c.u & (c.n != 0)
        if p.wide:
            # Wide builds start a u-row pass (one with MAC beats: u_mac) a cycle after its
            # take: `pre`, a flip-flop of the take of such a pass, sets `running` and
            # the noise read enables, so that the take, a decision of the queue head's
            # dependences, reaches only registers beside the engine, not the eight read
            # enable copies beside their noise slices across the chip (the take into
            # them was on the 128-lane ECP5 evaluator's critical path at 60dc4c5, seed 3,
            # b022460, seed 1, bf20b5e, seed 1, and 228cec9 with the placer's timing
            # weight 30, seed 3: 9.11 ns, 7.64 of it routing, 4.67 the route from the
            # take to a copy 34 columns away). The pass's registers load the queue's
            # head while the engine is not running: in the bubble the head still shows
            # the taken command (the queue pops a cycle after a take), so they load the
            # same values, and `pre` keeps that command from being taken again. Up to a
            # finalizer window (T cycles) per u-row pass (ceil(rank / 2) per sample and
            # member sign, each of n0 beats): the pass, a cycle late, sends its record
            # a cycle late, which may then wait for the finalizer's next window (the
            # digits network, 16 lanes, batch 4: 128 cycles more in 201,002 with
            # per-member inputs, in 130,635 with shared inputs; docs/rtl.md).
            pre = Signal(name="u_pre")
            take &= ~pre
            m.d.sync += pre.eq(take & u_first)
        m.d.comb += self.cmd.ready.eq(take)
        nz_ptr = Signal(self.noise_bits)  # u_addr + k, counted alongside k
        # at_flush (k == n: the pass's flush beat is next) is a flag set with k, not a
        # compare before the beat's handshake (the engine's k and cur into the weight
        # streamer's FIFO levels had 4 of the 128-lane ULX3S build's 84 endpoints past
        # 10 ns at 22de219, seed 1)
        at_flush = Signal()
        # at_last (k == n - 1: the next MAC beat is the pass's last) likewise, so that
        # neither at_flush's next value nor u_mac's compares k + 1 with n after the beat's
        # handshake (`k + 1 != cur.n` into u_mac was the critical path of the 128-lane
        # ULX3S build at 19a8e90, seed 2: 9.83 ns). Its next value after a MAC beat is
        # ``left == 2``, ``left = n - k`` counted down beside k: a compare with a
        # constant, not ``k + 2 == n``'s sum and compare of two registers (k's beat into
        # at_last was the 128-lane ECP5 evaluator's critical path at 98e1bb6, seed 1:
        # 9.10 ns, 4 levels)
        at_last = Signal()
        left = Signal.like(c.n)
        # The pass's registers load the queue's head in every cycle the engine is not
        # running (their values matter only while it runs, and the cycle it starts is
        # such a cycle): take, a decision of the head's dependencies, enables running
        # and the read enables alone, not the pass's hundred-odd registers (take into
        # them was the 128-lane ECP5 evaluator's critical path at 98e1bb6, seed 3:
        # engine.loaded through the take into at_last, 10.55 ns, 8.84 of it routing)
        if p.wide:
            with m.If(take):
                m.d.sync += running.eq(~u_first)
            with m.If(pre):
                m.d.sync += running.eq(1)
        else:
            with m.If(take):
                m.d.sync += running.eq(1)
        with m.If(~running):
            m.d.sync += [
                cur.eq(c),
                k.eq(0),
                at_flush.eq(c.n == 0),
                at_last.eq(c.n == 1),
                left.eq(c.n),
                nz_ptr.eq(c.u_addr),
            ]

        # ---- beats
        beat_w = ~cur.u  # a layer pass consumes weight beats (the last one is the bias)
        w_ok = ~beat_w | self.wbeat.valid
        # a flush needs free captures and room for the record (one in the FIFO at most:
        # the finalizer takes a record's captures before the next flush anyway)
        flush_ok = ~caps_busy & recq.w_rdy
        mac = running & ~at_flush & w_ok
        flush = running & at_flush & w_ok & flush_ok
        if p.wide:
            # Wide builds take the weight beat's handshake from copies of the pass state
            # (``cur.u``, ``running``, ``at_flush``) that nothing else reads, so that they
            # sit beside the skid buffer their ``ready`` steers, not among the hundreds of
            # loads of the originals: ``cur.u`` through ``at_flush``, the skid buffer's
            # ``o.valid`` and ready into ``skid_v`` was the 128-lane ECP5 evaluator's
            # critical path at 0a02018 (seed 3: 8.99 ns, 7.09 of it routing, its four
            # LUTs spread over 42 columns). Each copy takes its original's reset and
            # loads, so it equals it in every cycle.
            keep = {REPLICA_ATTR: 1}
            hs_u = Signal(name="hs_u", attrs=keep)
            hs_run = Signal(name="hs_run", attrs=keep)
            hs_flush = Signal(name="hs_flush", attrs=keep)
            with m.If(take):
                m.d.sync += hs_run.eq(~u_first)
            with m.If(pre):
                m.d.sync += hs_run.eq(1)
            with m.If(flush):
                m.d.sync += hs_run.eq(0)
            with m.If(~running):
                m.d.sync += [hs_u.eq(c.u), hs_flush.eq(c.n == 0)]
            with m.If(mac):
                m.d.sync += hs_flush.eq(at_last)
            m.d.comb += self.wbeat.ready.eq(
                ~hs_u & hs_run & self.wbeat.valid & (~hs_flush | flush_ok)
            )
        else:
            m.d.comb += self.wbeat.ready.eq(beat_w & (mac | flush))
        with m.If(mac):
            m.d.sync += [
                k.eq(k + 1),
                at_flush.eq(at_last),
                at_last.eq(left == 2),
                left.eq(left - 1),
                nz_ptr.eq(nz_ptr + 1),
            ]
        with m.If(flush):
            m.d.sync += [running.eq(0), caps_busy.eq(1)]
        # ``nz_en`` (a u-row pass's MAC beat: ``mac & cur.u``) from a register loaded with
        # its next value, so that the noise banks' read-address multiplexer it selects is
        # not at the end of the beat handshake (k, the weight stream's valid): that was the
        # 64-lane ECP5 synthesis's critical path at 123064f (13.78 ns, 10 levels). A u-row
        # pass never waits for weights, so its next beat is a MAC unless the pass starts
        # with n = 0 or the next input index is n: after a cycle with u_mac set, the
        # next has it unless that beat was the pass's last (at_last), and a cycle
        # without it (not a u-row pass, its flush, or idle) is followed by one without
        # it unless a pass is taken; so u_mac's next value is u_mac & ~at_last, not the
        # beat's handshake (mac) again.
        u_mac = Signal()
        # (wide builds: set by `pre`, a cycle after the take; 0 before it, as a pass's
        # last MAC beat clears it)
        u_next = Mux(pre, 1, u_mac & ~at_last) if p.wide else Mux(take, u_first, u_mac & ~at_last)
        m.d.sync += u_mac.eq(u_next)
        # nz_reads: the same read from copies of those registers, each copy feeding a
        # few of the noise banks' slices (beside the finalizer's n_addrs). A copy's
        # pointer counts with its own u_mac copy, not with mac: the same values in a
        # u-row pass (its MAC beats are its u_mac cycles), others in a layer pass, where
        # the copies are not read (their enable is 0) and which the next take reloads
        # (mac's fan-out into the copies was in the 128-lane ECP5 evaluator's critical
        # group at 98e1bb6, seed 1: k's enable, 18 endpoints past 8 ns, up to 8.79)
        if self.nz_copies == 1:
            m.d.comb += [
                self.nz_reads[0].addr.eq(nz_ptr),
                self.nz_reads[0].bank.eq(cur.u_bank),
                self.nz_reads[0].en.eq(u_mac),
            ]
        for j in range(self.nz_copies if self.nz_copies > 1 else 0):
            keep = {REPLICA_ATTR: 1}
            ptr_j = Signal(self.noise_bits, name=f"nz_ptr_c{j}", attrs=keep)
            bank_j = Signal(name=f"nz_bank_c{j}", attrs=keep)
            en_j = Signal(name=f"nz_en_c{j}", attrs=keep)
            with m.If(~running):
                m.d.sync += [ptr_j.eq(c.u_addr), bank_j.eq(c.u_bank)]
            with m.Elif(en_j):
                m.d.sync += ptr_j.eq(ptr_j + 1)
            if p.wide:
                m.d.sync += en_j.eq(Mux(pre, 1, en_j & ~at_last))
            else:
                m.d.sync += en_j.eq(Mux(take, u_first, en_j & ~at_last))
            m.d.comb += [
                self.nz_reads[j].addr.eq(ptr_j),
                self.nz_reads[j].bank.eq(bank_j),
                self.nz_reads[j].en.eq(en_j),
            ]
        busy = running | recq.r_rdy | caps_busy
        dep_wait = ~running & self.cmd.valid & ~dep_ok
        if p.wide:  # the bubble before a u-row pass's first beat counts as a wait
            busy, dep_wait = busy | pre, dep_wait | pre
        m.d.comb += [
            self.act_addr.eq(
                Cat(k[: p.region_bits], cur.in_region) if p.region_bits else cur.in_region
            ),
            self.act_en.eq(mac),
            self.nz_addr.eq(nz_ptr),
            self.nz_bank.eq(cur.u_bank),
            self.nz_en.eq(u_mac),
            self.busy.eq(busy),
        ]
        m.d.comb += self.release.eq(Mux(flush & cur.release, 1 << cur.in_slot, 0))
        act = self.activity
        m.d.comb += [
            act.mac.eq(mac),
            act.flush.eq(flush),
            act.caps.eq(running & at_flush & w_ok & ~flush_ok),
            act.weights.eq(running & ~w_ok),
            act.dep.eq(dep_wait),
            act.none.eq(~running & ~self.cmd.valid),
        ]

        # ---- lane control, delayed to meet the read data
        now = Signal(lane_ctrl_layout())
        m.d.comb += [
            now.en.eq(mac),
            now.flush.eq(flush),
            now.src.eq(cur.u),
        ]
        if p.mode == "quantized":
            m.d.comb += [now.qe.eq(~cur.u), now.s.eq(cur.rec.s)]
        for i in range(2):
            code = self.wbeat.payload.d[i]
            ctrl = digit_ctrl(code)
            m.d.comb += [
                now.w[i].is2.eq(ctrl["is2"] & beat_w),
                now.w[i].neg.eq(ctrl["neg"] & beat_w),
                now.w[i].nz.eq(ctrl["nz"] & beat_w),
            ]
        # shared stages, then a stage once per copy, then (per_lane) once per lane:
        # LATENCY stages in all. With more than 4 copies the last shared stage is itself
        # a few replicas, each feeding its share of the copies (one register's 16 copies
        # across the die had 28 of the 128-lane ECP5 evaluator's endpoints past 8 ns at
        # b48cbeb, 9.2 ns, register to register)
        pipe = [now]
        shared = LATENCY - 1 - self.per_lane
        for j in range(shared - 1):
            pipe.append(_ctrl_register(m, pipe[-1], f"ctrl{j}"))
        mids = isqrt(self.copies) if self.copies > 4 else 1
        last = []
        for rep in range(mids):
            name = f"ctrl{shared - 1}" + (f"_m{rep}" if mids > 1 else "")
            last.append(_ctrl_register(m, pipe[-1], name, replica=mids > 1))
        # the lanes' input registers' bank choice, MEM_LATENCY cycles after the reads (a
        # stage ahead of the controls): shared stages, then a copy per group
        bank_pipe = [cur.u_bank]
        for j in range(MEM_LATENCY - 1):
            bank_pipe.append(Signal(name=f"nd_bank{j}", reset_less=True))
            m.d.sync += bank_pipe[-1].eq(bank_pipe[-2])
        for g in range(self.copies):
            bank = Signal(
                name=f"nd_bank_copy{g}",
                reset_less=True,
                attrs={REPLICA_ATTR: 1} if self.copies > 1 else {},
            )
            m.d.sync += bank.eq(bank_pipe[-1])
            m.d.comb += self.nd_bank[g].eq(bank)
        outs = [
            _ctrl_register(
                m, last[g * mids // self.copies], f"ctrl_copy{g}", 1, replica=self.copies > 1
            )
            for g in range(self.copies)
        ]
        if self.per_lane:
            # a net of a copy reached its 8 lanes' term logic, about 160 loads (the
            # 128-lane evaluator's critical path at 41cf5da: a copy's src into lane
            # 108's term register, 14.58 ns, 13.34 of it routing; 130 of the lanes'
            # term registers past 10 ns)
            # No leaf takes the reset: the copy's flush is high from the cycle after a
            # reset's first, the leaf's a cycle later (the lane may see its old control
            # for that one cycle: a flush then clears whatever it did). The leaf's flush
            # with the reset was a LUT after the copy, shared by the group's 8 leaves
            # and placed apart from them: 66 of the 128-lane ECP5 evaluator's 329
            # endpoints past 8 ns at c0a017a (seed 3, up to 9.83 ns)
            for j in range(self.p.lanes):
                copy = outs[min(j // self.p.group_lanes, self.copies - 1)]
                leaf = Signal(
                    lane_ctrl_layout(),
                    name=f"ctrl_lane{j}",
                    reset_less=True,
                    attrs={REPLICA_ATTR: 1},
                )
                leaf_flush = Signal(
                    name=f"ctrl_flush{j}", init=1, reset_less=True, attrs={REPLICA_ATTR: 1}
                )
                m.d.sync += [leaf.eq(copy), leaf_flush.eq(copy.flush)]
                m.d.comb += [self.ctrl[j].eq(leaf), self.ctrl[j].flush.eq(leaf_flush)]
        else:
            m.d.comb += [self.ctrl[g].eq(out) for g, out in enumerate(outs)]

        # ---- the record: its captures are written LATENCY cycles after the flush beat;
        # it is pushed one cycle later
        rec = Signal(self.rec_layout)
        m.d.comb += rec.eq(cur.rec)
        if p.wide:
            # Wide builds: the bias digits from the weight beat whatever the pass (a
            # u-row pass's record, KIND_STORE, has no use for them: the finalizer takes
            # a STORE op's bias digit from the noise), and the delay line without a
            # reset (``recv`` says which word is a record): the choice by ``cur.u``
            # with the reset had become the synchronous clear of recd0's bias digits,
            # 4 of the 128-lane ECP5 evaluator's 61 endpoints past 8 ns at 0a02018
            # (seed 3, 8.64 ns, and two more at 9.18 and 9.38 ns into their LSR)
            m.d.comb += [rec.wb[i].eq(self.wbeat.payload.d[i]) for i in range(2)]
        else:
            with m.If(beat_w):
                m.d.comb += [rec.wb[i].eq(self.wbeat.payload.d[i]) for i in range(2)]
        dly = [
            Signal(self.rec_layout, name=f"recd{j}", reset_less=p.wide) for j in range(LATENCY + 1)
        ]
        dv = [Signal(name=f"recv{j}") for j in range(LATENCY + 1)]
        m.d.sync += [dly[0].eq(rec), dv[0].eq(flush)]
        for j in range(1, LATENCY + 1):
            m.d.sync += [dly[j].eq(dly[j - 1]), dv[j].eq(dv[j - 1])]
        m.d.comb += [recq.w_data.eq(dly[-1].as_value()), recq.w_en.eq(dv[-1])]
        return m
