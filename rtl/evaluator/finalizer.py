"""Finalizer: from the lanes' pass sums to activations, u vectors, logits and scores.

A pass of a lane leaves two sums in its capture registers: rows ``o = 2t`` and ``2t + 1``
of a layer (``v_i = sum_{k<n} x[k] W[o+i, k]``), or two u values of a u-row pass. The
finalizer turns them into what the spec defines (sim/evaluator_model.py states the same
decomposition in Python, pinned to golden)::

    p_i  = sum_c A_l[o+i, c] * u_l[c]                     (u_l: this member's u vector)
    a_i  = v_i + 127 * W[o+i, n] + sign * rshr(p_i, k)    (k = log4(r) + sigma_shift)
    h_i  = sat(rshr(a_i, s_l), 0, 127)   (hidden)   y_i = sat(rshr(a_i, s_l), -127, 127)
    u_{l+1}[c] += h_0 * B_{l+1}[o, c] + h_1 * B_{l+1}[o+1, c]

The rows of ``B_{l+1}`` include its bias row ``n_{l+1}``: it enters as an output of value
127, in the last pass of a layer with an odd number of outputs (row ``2t + 1``) or in a
BIAS op after a layer with an even number. A u-row pass stores
``u_0[c] = v + 127 * B_0[n_0, c]``. In the last layer the logits either leave on
``logits`` (per-member inputs) or update the member's margin state (its label's logit and
the largest other logit) and, with the last row, emit its spec 7.1 score term on ``terms``.

Quantized mode (spec 6.1): the lanes' sums already hold ``x . (W + s E)`` without the
bias weight (the lane adds ``127 s E[o, n]``), so ``p = 0`` and ``a_i = v_i + 127 *
W[o+i, n]``; the same windows run (the u vectors are computed from whatever the noise
banks hold and never used), so timing and widths are those of low-rank mode with
``sum_bits`` from spec 9.2's quantized bound.

One Finalizer serves all lanes in ``finalizers`` groups of ``group`` lanes: a shared
control issues one *op* (one lane's pass) every ``T = max(rank, 4)`` cycles to every
group at once (lane ``i`` of each group); each group has its own datapath and two u banks
(block RAM; bank ``l % 2`` holds the u vectors of layer ``l``'s inputs, ``u_0`` in bank 0,
and the margin states in bank ``L % 2``). An op goes through four windows of ``T`` cycles:

* **P**: ``r`` noise slots ``F(l, t, c)`` (or the slot ``Ub(q)``) and ``r`` u entries are
  read, one per cycle, data three cycles later (the noise slot's read issued a cycle
  ahead, through the banks' address registers, the group's lanes' digits registered in
  the group before its lane select; a u entry's address leaves through a register of the
  group; both data registered in the group); ``p_0``, ``p_1`` accumulate (the
  last products land in the next window); the lane's two sums are taken from its
  captures in the first cycle.
* **P2**: ``vc_i = v_i + 127 * (bias digit) + rounding`` is prepared; ``p`` is taken in
  its fourth cycle.
* **S**: one adder and one barrel shifter, four uses: ``rshr(p_0, k)``, ``rshr(p_1, k)``,
  ``vc_i +- t_i`` shifted by ``s_l``; the last shift and the saturation spill two cycles
  into the next window.
* **U**: ``h_0``, ``h_1`` go to the activation memory or out; ``u_{l+1}`` is read,
  updated and written back, ``r`` entries, writes three cycles behind the reads (spilling
  into the next window), or the margin state is updated (read in the first cycle, the
  new state registered in the third, written in the fourth; its score term is pushed
  two cycles later, from registers).

A record for *both* members (shared inputs, low-rank layer 0: the lanes' sums ``x . W^T``
are the same for members ``2j`` and ``2j+1``) gives ``2 G`` ops: member ``2j``'s (sign
0) and then member ``2j+1``'s (sign 1, its own hidden region) from the same captures,
which are consumed by the last of them; its BIAS ops likewise come twice.

An op enters P only if the u bank it reads is written by no op ahead of it (a few bubbles
at layer transitions), and, if it emits logits or a score term, only if the output FIFO
has room reserved for it: the pipeline never stalls.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..bram import NO_RW_CHECK, RWWatch
from ..params import check_int
from .params import BIAS, EvaluatorParams
from .pass_engine import LATENCY, REPLICA_ATTR
from .skid import SkidBuffer

__all__ = [
    "KIND_ACT",
    "KIND_STORE",
    "Finalizer",
    "aw_cycles",
    "logits_layout",
    "record_layout",
    "terms_layout",
]

KIND_STORE, KIND_ACT, KIND_BIAS = 0, 1, 2


def aw_cycles(period: int) -> tuple[int, int]:
    """The cycles of the window (``wc``, of ``period`` cycles) in which the finalizer's
    writes of hidden outputs (``aw_en``, from registers: a cycle after the U window's
    cycles 2 and 3 that make them) reach the activation memory: 3 and the one after (0
    at a period of 4). In every other cycle its write port is free for the InputLoader,
    which keeps its own copy of the window counter."""
    return (3, 4 % period)


def lean_for(platform) -> bool:
    """The finalizer's form on ``platform`` (:class:`Finalizer`'s ``lean``): True on the
    iCE40, False elsewhere."""
    return getattr(platform, "family", None) == "ice40"


#: Depth of the logits FIFO. A last-layer op of per-member inputs reserves two beats
#: when it is issued (a window ahead of P) and writes them in its U window, 16 and 17
#: cycles later: at one op a window, the beats of the ops in P, P2, S and U and the
#: next one's, 10, would be reserved or in the FIFO at the issue's decision. A depth of
#: 4 (two ops) let the finalizer issue two last-layer ops in five windows (measured in
#: the simulator, 8 lanes in a group, a 64-input last layer), and each last-layer pass
#: of the lanes waited for its captures to be taken (``caps`` in ``pentegg bench
#: evaluator``: 2.4 % of the 8-lane digits evaluation with per-member inputs at
#: 140a708, docs/resources.md; 269 cycles of 12,682 at batch 2). A depth of 8 issues a
#: group's 8 ops of a pass in about 9 windows (10 would give one a window): no digits
#: pass waits any more, the pass (66 cycles) outlasts them.
LOGIT_FIFO_DEPTH = 8

NO_OTHER = -128  # margin state: no other logit seen yet (logits lie in [-127, 127])


def record_layout(p: EvaluatorParams, addr_bits: int) -> data.StructLayout:
    """A pass record, from the pass engine to the finalizer (one per pass of the lanes)."""
    return data.StructLayout(
        {
            "kind": 2,  # KIND_STORE (u-row pass) or KIND_ACT (layer pass)
            "s": 1,  # member sign: 0 for member 2j, 1 for 2j+1
            "both": 1,  # the sums serve both members (shared inputs, low-rank layer 0)
            "us": 1,  # the member whose u vectors are read (0 for both in shared mode L0)
            "layer": 3,
            "t": p.width_bits,  # row pair: rows 2t and 2t+1
            "two": 1,  # row 2t+1 is an output row
            "q": 5,  # u-row pass index
            "wb": data.ArrayLayout(3, 2),  # bias column digits W[o, n], W[o+1, n]
            "naddr": addr_bits,  # noise address: F(l, t, 0), or Ub(q)
            "sample": 2,  # sample index mod 4 (labels)
            "first_sample": 1,  # first sample of the round: a score starts
            "block_end": 1,  # the last pass of a block
            "bias_after": 1,  # BIAS ops follow: the bias row of B_{l+1} is pair t + 1
            "bias_row1": 1,  # row 2t+1 is the bias row of B_{l+1}
            "last_row": 1,  # the pass holds the network's last output row
            "last_layer": 1,
        }
    )


def logits_layout(p: EvaluatorParams) -> data.StructLayout:
    """Logits of row ``row`` of member sign ``s`` of lane ``i`` of every group: group
    ``g``'s logit is that of lane ``g * group + i``."""
    return data.StructLayout(
        {
            "i": max(1, ceil_log2(p.group_lanes)),
            "s": 1,
            "row": p.width_bits,
            "y": data.ArrayLayout(signed(8), p.finalizers),
        }
    )


def terms_layout(p: EvaluatorParams) -> data.StructLayout:
    """Score terms (spec 7.1, one sample) of member sign ``s`` of lane ``i`` of every
    group; ``first``: the first sample of the round (the score starts from it)."""
    return data.StructLayout(
        {
            "i": max(1, ceil_log2(p.group_lanes)),
            "s": 1,
            "first": 1,
            "term": data.ArrayLayout(signed(10), p.finalizers),
        }
    )


def window_next(count: Value, T: int) -> Value:
    """``(count + 1) % T`` for a window counter of ``range(T)``: the increment alone,
    truncated, when ``T`` is the counter's full range (a power of two: the default
    rank 4's period), so that the wrap is no compare into the flip-flops' set/reset
    (a group's ``wcn`` had 5 of the 128-lane ECP5 evaluator's 66 endpoints past 8 ns
    at 9fe00a1, seed 3, up to 9.37 ns, into its set/reset); ``Mux(count == T - 1, 0,
    count + 1)`` otherwise."""
    if 1 << len(count) == T:
        return (count + 1)[: len(count)]
    return Mux(count == T - 1, 0, count + 1)


def _digit_times(code, value):
    """``d * value`` for a digit code, as ``(term, carry)`` with ``d * value = term +
    carry``: ``|d|`` selects ``value`` or ``value << 1``, a negative digit inverts it
    (ones' complement; the carry adds the one), a zero digit gives ``(0, 0)``. No
    negation adder: the carry enters the sum the term goes into."""
    v = value.as_signed()
    mag = Mux(code[1] & ~code[0], v << 1, v)
    nz = code[0] | code[1]
    return Mux(nz, Mux(code[2], ~mag, mag), 0).as_signed(), nz & code[2]


def _greater(m: Module, a: Value, b: Value, name: str) -> Value:
    """``a > b`` for signed ``a`` and ``b`` as the sign of ``b - a``, a signal of its own
    (``name``, one bit wider than the wider operand, so the difference is exact): one
    carry chain with nothing after it, where Yosys maps an 8-bit signed compare to a
    chain and LUT levels after it on the ECP5."""
    diff = Signal(signed(max(len(a), len(b)) + 1), name=name)
    m.d.comb += diff.eq(b - a)
    return diff[-1]


def _ubank(op):
    """The u bank an op writes in U (and reads there): bank 0 for a STORE (``u_0``), else
    the bank of its layer's outputs, ``(l + 1) % 2``."""
    return Mux(op.kind == KIND_STORE, 0, ~op.rec.layer[0])


def _times_bias(code):
    """``127 * d`` of a digit code: a table of five constants."""

    def c(v):
        return Const(v, signed(10))

    return Mux(
        code == 0b001,
        c(127),
        Mux(code == 0b010, c(254), Mux(code == 0b111, c(-127), Mux(code == 0b110, c(-254), c(0)))),
    )


class Finalizer(wiring.Component):
    """The finalizer of all lanes (module docstring).

    Parameters
    ----------
    p : EvaluatorParams
    addr_bits : int
        Width of a noise-bank address.
    fifo_depth : int
        Depth of the terms FIFO, 4..64 (a SyncFIFOBuffered: its output is a register).
    logit_depth : int
        Depth of the logits FIFO, 4..64 (None: :data:`LOGIT_FIFO_DEPTH`).
    lean : bool or None
        The form (the same results in the same cycles). False: each group has its own
        copies of the window counter, the stage ops, the run-time values and the stage
        control, y1's bounds are compared before the shift (tables of the bounds shifted
        by the amount), h1's product is a choice among products and the margin state's
        compares are made for both banks: the ECP5's timing at 128 lanes. True: one
        control for all groups, y1's own compares (as y0's), one product, two compares
        (the iCE40's size: the 16-lane UP5K evaluator 7,003 LUT4 instead of 7,410,
        docs/resources.md). None (the default): True when elaborated for an iCE40
        (:func:`lean_for`).

    Interface attributes
    --------------------
    rec : In(stream.Signature(record_layout(p, addr_bits)))
        Pass records in pass order; a record may come as soon as its pass is flushed.
    caps : In(ArrayLayout(ArrayLayout(signed(acc_bits), 2), lanes))
        The lanes' captures: valid from the flush of the oldest record's pass through the
        ``LATENCY + 1`` cycles after ``consumed`` (:data:`~.pass_engine.LATENCY`: a flush
        beat changes them ``LATENCY + 1`` cycles after it).
    consumed : Out(1)
        A strobe: the captures of the oldest unfinished record will all have been taken
        within ``LATENCY + 1`` cycles: for a layer pass's record the last take comes
        ``min(LATENCY, T - 2) + 1`` cycles after it when its go was certain that early,
        otherwise (and for a u-row pass's record always) the cycle after it.
    n_addrs : Out(ArrayLayout(addr_bits, n_copies)), n_en : Out(1)
        The noise banks' read address and its enable: ``n_copies`` equal copies of the
        address, each from registers of its own (one copy: the pointer's), each feeding
        a few of the banks' slices.
    n_data : In(ArrayLayout(ArrayLayout(ArrayLayout(3, 2), lanes), 2))
        The noise banks' read data (both banks, same address), two cycles after the
        address (the block RAMs' read and output registers; the finalizer registers the
        lane it picks).
    aw_addr : Out(ArrayLayout(act_addr_bits, act_write_copies)), aw_en : Out(lanes)
        Writes of hidden activations (one row of lane ``i`` of every group), from
        registers: a cycle after the U window's cycles that produce them. The address
        in ``act_write_copies`` equal copies, each a register of its own (the copy of
        lane ``j``: ``j * act_write_copies // lanes``).
    aw_bytes : Out(ArrayLayout(8, finalizers))
        Each group's hidden-output byte in the cycle before its write: the loader's data
        registers take it then (the write's data, :class:`~.loader.InputLoader`).
    aw_any : Out(act_write_copies)
        ``aw_en`` is not zero (registered alongside it; equal copies, as ``aw_addr``).
    shifts : In(ArrayLayout(4, max_layers)), pert_shift : In(4), margin : In(8)
    labels : In(ArrayLayout(width_bits, 4))
        Run-time values: activation shifts, ``k``, the margin ``M``, the labels of the
        samples in flight (by sample index mod 4).
    logits : Out(stream.Signature(logits_layout(p)))
    terms : Out(stream.Signature(terms_layout(p)))
    emit_logits : In(1)
        1: last-layer outputs leave on ``logits`` (per-member inputs); 0: they update
        margin states and emit score terms.
    blocks_done : Out(16)
        Blocks of this evaluation whose every op has finished (wraps).
    clear : In(1)
        Strobe at the start of an evaluation (the finalizer is idle): ``blocks_done = 0``.
    idle : Out(1)
        No record waiting, no op in flight.
    holding : Out(1)
        A logit or term beat reserved or in its FIFO, not yet read (the FIFOs' outputs
        are registers: a beat written into an empty FIFO is valid two cycles later, and
        ``holding`` covers the cycle between).

    Throughput: one op (one lane, both rows) per ``T`` cycles; a pass of ``G`` lanes
    takes ``G * T`` cycles (``2 G T`` for a record for both members) plus BIAS ops and
    bubbles at layer transitions.
    """

    def __init__(
        self,
        p: EvaluatorParams,
        addr_bits: int,
        fifo_depth: int = 8,
        logit_depth: int | None = None,
        lean: bool | None = None,
        n_copies: int = 1,
    ):
        if lean not in (None, True, False):
            raise ValueError(f"lean={lean!r} is not None, True or False")
        self.lean_form = lean
        self.n_copies = check_int("n_copies", n_copies, 1, 64)
        self.p = p
        self.addr_bits = addr_bits
        self.fifo_depth = check_int("fifo_depth", fifo_depth, 4, 64)
        if logit_depth is None:
            logit_depth = LOGIT_FIFO_DEPTH
        self.logit_depth = check_int("logit_depth", logit_depth, 4, 64)
        self.T = p.period
        self.G = p.group_lanes
        self.F = p.finalizers
        self.u_width = max(p.u_bits, 16)
        # u bank: u vectors (i, s, c), then margin states (i, s)
        self.u_entries = 2 * self.G * p.rank + 2 * self.G
        self.u_depth = 1 << ceil_log2(self.u_entries)
        self.rec_layout = record_layout(p, addr_bits)
        # an op in a stage of the window pipeline: the record and its lane and kind
        self.op_layout = data.StructLayout(
            {"valid": 1, "i": max(1, ceil_log2(self.G)), "kind": 2, "rec": self.rec_layout}
        )
        L = p.lanes
        super().__init__(
            {
                "rec": In(stream.Signature(self.rec_layout)),
                "caps": In(data.ArrayLayout(data.ArrayLayout(signed(p.acc_bits), 2), L)),
                "consumed": Out(1),
                "n_addrs": Out(data.ArrayLayout(addr_bits, n_copies)),
                "n_en": Out(1),
                "n_data": In(data.ArrayLayout(data.ArrayLayout(data.ArrayLayout(3, 2), L), 2)),
                "aw_addr": Out(data.ArrayLayout(p.act_addr_bits, p.act_write_copies)),
                "aw_bytes": Out(data.ArrayLayout(8, self.F)),
                "aw_en": Out(L),
                "aw_any": Out(p.act_write_copies),
                "shifts": In(data.ArrayLayout(4, p.max_layers)),
                "pert_shift": In(4),
                "margin": In(8),
                "labels": In(data.ArrayLayout(p.width_bits, 4)),
                "emit_logits": In(1),
                "logits": Out(stream.Signature(logits_layout(p))),
                "terms": Out(stream.Signature(terms_layout(p))),
                "blocks_done": Out(16),
                "clear": In(1),
                "idle": Out(1),
                "holding": Out(1),
            }
        )

    # ----------------------------------------------------------------------- control
    def elaborate(self, platform):
        m = Module()
        self.dbg = {}
        self.rw_watch = []  # the u banks (NO_RW_CHECK)
        self.ecp5 = str(getattr(platform, "family", "")).lower() == "ecp5"
        self.lean = lean_for(platform) if self.lean_form is None else self.lean_form
        p, T, G, F, r = self.p, self.T, self.G, self.F, self.p.rank
        op_layout = self.op_layout
        wc = Signal(range(T))  # cycle within the window
        last_wc = wc == T - 1
        m.d.sync += wc.eq(window_next(wc, T))
        stage = {name: Signal(op_layout, name=f"op_{name}") for name in ("P", "P2", "S", "U")}
        opP, opP2, opS, opU = stage["P"], stage["P2"], stage["S"], stage["U"]

        # ---- the issuer: records -> ops
        # each record with its bias row pair's noise address (naddr + r) beside it, added
        # as it enters the record stage, not after: the head's read (then a FIFO's), the
        # add and the bias choice into the noise address copies' new_naddr_c (loaded
        # every cycle, taken at the window's end) recur among the 128-lane ECP5
        # evaluator's endpoints past 8 ns (seed 3: 13 at 98e1bb6, 8.56 ns; 6 at 9fe00a1;
        # 1 at 87e4c97)
        # The records wait in a two-word register stage (SkidBuffer), not a SyncFIFO of
        # depth 2: the same room (ready while fewer than two wait, a flip-flop) and
        # latency (a record written is the head the next cycle), so the same cycles, but
        # the head is a register, not the FIFO memory's read at its read pointer: from
        # that pointer through the read and the conditions into `early` was the
        # 128-lane ECP5 evaluator's critical path at 6135e01 (seed 1, 8.95 ns, 7 levels;
        # go, l_take and t_take 3 more of its 8 endpoints past 8 ns)
        rs = self.rec_layout.size
        m.submodules.records = q = SkidBuffer(rs + self.addr_bits)
        m.d.comb += [
            q.i.payload.eq(Cat(self.rec.payload, self.rec.payload.naddr + r)),
            q.i.valid.eq(self.rec.valid),
            self.rec.ready.eq(q.i.ready),
        ]
        head = Signal(self.rec_layout)
        head_bias_naddr = Signal(self.addr_bits)
        m.d.comb += [head.eq(q.o.payload[:rs]), head_bias_naddr.eq(q.o.payload[rs:])]
        iss_i = Signal(range(G + 1))
        iss_bias = Signal()  # issuing the BIAS ops of the head record
        iss_s = Signal()  # a record for both members: issuing member 2j+1's ops
        new = Signal(op_layout)
        m.d.comb += [
            new.valid.eq(q.o.valid),
            new.i.eq(iss_i),
            new.kind.eq(Mux(iss_bias, KIND_BIAS, head.kind)),
            new.rec.eq(head),
        ]
        with m.If(iss_bias):
            # the bias row pair follows the layer's last pair
            m.d.comb += new.rec.naddr.eq(head_bias_naddr)
        with m.If(iss_s):  # member 2j+1's ops of a record for both
            m.d.comb += new.rec.s.eq(1)

        def reads_u(op):  # the bank it reads in P, or None
            return op.kind == KIND_ACT

        def pbank(op):
            return op.rec.layer[0]

        def writes_u(op):
            return op.valid

        hazard = Const(0)
        for op in (opP, opP2, opS, opU):
            hazard = hazard | (writes_u(op) & (_ubank(op) == pbank(new)))
        hazard = reads_u(new) & hazard

        # outputs reserved ahead: logits (2 beats per last-layer op) and terms (1)
        emit_logits = self.emit_logits
        if p.wide:
            # wide builds: a copy of its own beside the issuer (a run's setting, stable
            # from start, long before the first record: its copy a cycle late is the
            # same), not a register of the run's inputs across the chip (the loader's
            # copy of ``shared`` through makes_logits into go was the 128-lane ECP5
            # evaluator's critical path at 4fb8872, seed 1: 9.41 ns, 7.76 of it routing;
            # go, l_take, t_take and early 4 of its 15 endpoints past 8 ns)
            emit_logits = Signal(name="iss_emit_logits", attrs={REPLICA_ATTR: 1})
            m.d.sync += emit_logits.eq(self.emit_logits)
        makes_logits = emit_logits & head.last_layer & (new.kind == KIND_ACT)
        makes_term = ~emit_logits & head.last_layer & head.last_row & (new.kind == KIND_ACT)
        # the logits leave from a register (SyncFIFOBuffered): their reader (the
        # accelerator's LogitWriter) selects a pointer by the beat's lane, and from the
        # FIFO's distributed RAM that was the 128-lane ULX3S build's critical path at
        # 928b7e3 (18.32 ns, 15.47 of it routing)
        lq = fifo.SyncFIFOBuffered(width=logits_layout(p).size, depth=self.logit_depth)
        # the terms leave from a register too: their reader (the score unit) takes a
        # beat when its last group's term is issued (a flip-flop of its own), and with
        # the FIFO's valid from its level that take ran back into the level, out to the
        # score unit and back: 4 of the 128-lane ECP5 evaluator's 5 endpoints past 8 ns
        # at 72951b7 (seed 1, 8.32 ns, 7.09 of it routing); its valid now is a
        # flip-flop, and the take reaches only the FIFO's read side
        tq = fifo.SyncFIFOBuffered(width=terms_layout(p).size, depth=self.fifo_depth)
        m.submodules.logit_fifo, m.submodules.term_fifo = lq, tq
        self.fifos = {"logits": lq, "terms": tq}  # for observers (tests)
        wiring.connect(m, lq.r_stream, wiring.flipped(self.logits))
        wiring.connect(m, tq.r_stream, wiring.flipped(self.terms))
        # beats reserved or in the FIFO, logits and terms each in one count (the
        # reservations and the FIFO's level, which a write leaves as it is): the room is
        # one compare of a flip-flop, not the FIFO's level (an adder of its own) through
        # a second adder (the logits FIFO's level through its valid into the issue's
        # early and l_take was the 128-lane ECP5 evaluator's critical path at 646a25d,
        # seed 3, 8.12 ns)
        l_used = Signal(range(self.logit_depth + 1))
        l_room = l_used <= self.logit_depth - 2
        t_used = Signal(range(self.fifo_depth + 1))
        t_room = t_used < self.fifo_depth
        # An op is issued in a window's last cycle, decided a cycle ahead (T >= 4) and
        # registered: the stage ops, the issue state and the head record hold from cycle
        # T - 2 to T - 1 (the head changes only when a record is taken, in the last
        # cycle), and the FIFOs' room only grows in between (a reservation becomes a
        # write, a reader takes a beat). A record that arrives into an empty FIFO in the
        # last cycle waits a window. The decision, taken live in the last cycle, was the
        # 128-lane ECP5 evaluator's critical path at 542bd0f (the window count through the
        # record FIFO's head into the issue state and the reservations: 15.64 ns, 13.68
        # of it routing).
        go = Signal()
        go_if = new.valid & ~hazard & (~makes_logits | l_room) & (~makes_term | t_room)
        m.d.sync += go.eq((wc == T - 2) & go_if)

        # a record's ops: lanes 0..G-1 (of member 2j, then of 2j+1 for a record for both),
        # then likewise its BIAS ops if any
        last_op = iss_i == G - 1
        last_member = iss_s | ~head.both
        # the take is decided with the go (a cycle ahead, from the same conditions, which
        # hold from T - 2 to T - 1) and registered: it is the record stage's main
        # register's enable, and live (go through the issue state and the head) it put
        # the whole issue into that register's load (5aff328, seed 1: 84 endpoints past
        # 8 ns, 58 of them the stage's)
        rec_done = Signal()
        m.d.sync += rec_done.eq(
            (wc == T - 2) & go_if & last_op & last_member & (iss_bias | ~head.bias_after)
        )
        m.d.comb += q.o.ready.eq(rec_done)
        with m.If(go):
            with m.If(last_op):
                m.d.sync += iss_i.eq(0)
                with m.If(~last_member):
                    m.d.sync += iss_s.eq(1)
                with m.Else():
                    m.d.sync += iss_s.eq(0)
                    with m.If(~iss_bias & head.bias_after):
                        m.d.sync += iss_bias.eq(1)
                    with m.Else():
                        m.d.sync += iss_bias.eq(0)
            with m.Else():
                m.d.sync += iss_i.eq(iss_i + 1)
        # The last op of a record that reads captures takes them at its P window's start
        # (wc 0, the cycle after its go at wc T - 1). A flush beat changes the captures
        # LATENCY + 1 cycles after it (pass_engine), so ``consumed`` may come up to LATENCY
        # cycles before the go: the beat it lets through, a cycle later, lands after the
        # take. It comes that early if the go is certain then: decided at wc T - 2 - ahead
        # (>= 0: the window's stage ops, issue state and head are those of the go) from
        # the go's own conditions, which hold until wc T - 2 (the stage ops, the issue
        # state and the head change only at the window's end, and the FIFOs' room only
        # grows); otherwise it comes with the go. At T = 4 a flush waiting for the
        # captures goes 2 cycles earlier than with the go (each cycle of that wait is
        # about 3.6 % of a 128-lane digits step: f83f779 added one to LATENCY).
        # Only for a layer pass's record (ACT ops): a u-row pass's record (STORE ops,
        # pass q) is followed by pass q + 1 (the other bank) and then q + 2, which reads
        # bank q % 2, where the last STORE op reads its slot Ub(q) as it enters P, and
        # the lanes' reads win the bank's port; the flush of q + 1 at the go keeps q +
        # 2's reads after that read (released earlier, q + 2's beats overlapped it:
        # lanes 2, rank 16, per-member inputs).
        last_caps = last_op & last_member & ~iss_bias
        ahead = min(LATENCY, T - 2)  # cycles before the go (1..LATENCY: T >= 4)
        early = Signal()  # the go is certain: consumed now (wc T - 1 - ahead)
        early_done = Signal()  # and not again with the go
        early_ok = last_caps & (new.kind == KIND_ACT)
        m.d.sync += early.eq((wc == T - 2 - ahead) & go_if & early_ok)
        with m.If(early):
            m.d.sync += early_done.eq(1)
        with m.If(last_wc):
            m.d.sync += early_done.eq(0)
        m.d.comb += self.consumed.eq(early | (go & last_caps & ~early_done))

        with m.If(last_wc):
            m.d.sync += [
                opU.eq(opS),
                opS.eq(opP2),
                opP2.eq(opP),
                opP.eq(Mux(go, new, 0)),
            ]
        # end-of-op bookkeeping: a block ends with the last op of its last record. The
        # op leaving U is decoded as it leaves, into a flag (its decode after a register
        # of the op, into blocks_done's enable, had 32 of the three 128-lane ULX3S
        # builds' endpoints past 8 ns at 19a8e90, 8.48 ns)
        blk_end_valid = Signal()
        ends_block = Signal()
        with m.If(last_wc):
            m.d.sync += [
                blk_end_valid.eq(opU.valid),
                ends_block.eq(
                    opU.valid
                    & opU.rec.block_end
                    & (opU.i == G - 1)
                    & (opU.rec.s | ~opU.rec.both)
                    & ((opU.kind == KIND_BIAS) | ~opU.rec.bias_after)
                ),
            ]
        # the count steps at wc 2 (after the spilled writes), from a flag set at wc 1
        # (ends_block holds from wc 0): the count's compare into blocks_done's enable
        # had 10 of the 128-lane ECP5 evaluator's 55 endpoints past 8 ns at 7578f61
        # (seed 1) and 16 of 497 at e7fe268 (seed 3)
        bump = Signal()
        m.d.sync += bump.eq((wc == 1) & ends_block)
        # the count takes no reset: ``clear`` starts every evaluation before its first
        # read, and is then the flip-flops' set/reset alone (a flip-flop of the
        # sequencer's), not a LUT of it and the reset (shared with the loader's slot
        # flags: 16 of the 128-lane ECP5 evaluator's 24 endpoints past 8 ns at 59c3e3a,
        # seed 1, 8.40 ns)
        blocks_done = Signal(16, reset_less=True)
        m.d.comb += self.blocks_done.eq(blocks_done)
        with m.If(self.clear):  # a new evaluation counts its blocks from 0
            m.d.sync += blocks_done.eq(0)
        with m.Elif(bump):
            m.d.sync += blocks_done.eq(blocks_done + 1)
        t_pend0 = Signal()  # a term's registers are loading this cycle
        t_pend1 = [Signal(name="t_pend1")] if p.wide else []  # ... its second (wide builds)
        t_pend = Signal()  # a term to be written this cycle
        in_flight = Cat(
            opP.valid, opP2.valid, opS.valid, opU.valid, blk_end_valid, t_pend0, *t_pend1, t_pend
        ).any()
        m.d.comb += self.idle.eq(~q.o.valid & ~in_flight)

        # reservations: taken with the go, from flags registered with it (the head's
        # decode into makes_term, then the reservation count's adder: 3 of the 128-lane
        # ECP5 evaluator's 167 endpoints past 8 ns at 2c1ce90, seed 3, 9.31 ns)
        l_take = Signal()
        t_take = Signal()
        m.d.sync += [
            l_take.eq((wc == T - 2) & go_if & makes_logits),
            t_take.eq((wc == T - 2) & go_if & makes_term),
        ]
        l_put = Signal(2)
        # (l_put[0], a write, moves a beat from the reservations into the FIFO; l_put[1],
        # a one-row op's only beat, gives back its second reservation)
        l_read = self.logits.valid & self.logits.ready
        m.d.sync += l_used.eq(l_used + Mux(l_take, 2, 0) - l_put[1] - l_read)
        m.d.sync += t_used.eq(t_used + t_take - (self.terms.valid & self.terms.ready))
        m.d.comb += self.holding.eq((t_used != 0) | (l_used != 0))

        # ---- P: reads
        p_reads = opP.valid & (wc < r)
        # opP.kind == KIND_STORE (an empty op's kind, 0, included), a register loaded
        # with opP: no decode of the op before the noise address's multiplexer, which
        # fans out to every noise slice's address register (n_ptr through it had 12 of
        # the 128-lane ULX3S build's endpoints past 9.3 ns at f3eb1f7, seed 1, 9.78 ns)
        is_store_P = Signal(init=KIND_STORE == 0)
        with m.If(last_wc):
            m.d.sync += is_store_P.eq(Mux(go, new.kind == KIND_STORE, KIND_STORE == 0))
        # the noise address, naddr + c (ACT, BIAS) or naddr (STORE), from a counter loaded
        # with the op entering P. The read leaves a cycle ahead of the op's cycle (the
        # counter's next value, the op P holds next cycle and the next count), so that
        # each group can register its lanes' digits as the banks give them before its
        # lane select (from the block RAMs through the select into the group's digit
        # register was the critical path of the 128-lane ULX3S build at de0e2ae, 12.47
        # ns, and 133 of the 948 endpoints past 10 ns at 23e1484, seed 2)
        # The address leaves through a register per noise-bank slice (44 at 128 lanes), so
        # its logic is kept to a multiplexer of flip-flops: the window's last cycle as a
        # flag, the entering op's address registered at T - 2 (it holds to T - 1, as
        # go's decision has it; without go the read is not used), n_ptr + 1 beside n_ptr.
        # The record FIFO's read, the bias row's add and the window compare before the
        # fan-out had 65 of the 128-lane ULX3S build's 583 endpoints past 10 ns at
        # 3f25487 (seed 1, 11.98 ns)
        n_ptr = Signal(self.addr_bits)
        n_ptr1 = Signal(self.addr_bits)  # n_ptr + 1
        last_wc_f = Signal()  # == last_wc
        new_naddr = Signal(self.addr_bits)  # new.rec.naddr a cycle ago
        m.d.sync += [last_wc_f.eq(wc == T - 2), new_naddr.eq(new.rec.naddr)]
        n_ptr_next = Mux(last_wc_f, new_naddr, Mux(is_store_P, n_ptr, n_ptr1))
        m.d.sync += [n_ptr.eq(n_ptr_next), n_ptr1.eq(n_ptr_next + 1)]
        # n_addrs: the same address from copies of those registers, each copy feeding
        # a few of the noise banks' slices (the one multiplexer into every slice's
        # address register, 44 a bank at 128 lanes, had 205 of the 128-lane ECP5
        # evaluator's 535 endpoints past 8 ns at bd4c05d, seed 3)
        if self.n_copies == 1:
            m.d.comb += self.n_addrs[0].eq(n_ptr_next)
        # Each copy's n_ptr + 1 is formed from its own registers, not from the copy's
        # next address (which leaves for its slices' address registers): naddr + 1
        # registered beside naddr, n_ptr + 1 held through a STORE op, n_ptr + 1 + 1
        # otherwise (n_ptr1 = n_ptr + 1 from the reset on). From the next address
        # through the adder, a copy's last-count flag into its n_ptr1 was the 128-lane
        # ECP5 evaluator's critical path at 228cec9 (seed 1, 8.51 ns; 8 of its 44
        # endpoints past 8 ns) and at 7da465b (seed 1, 8.11 ns; 4 of 5)
        for c in range(self.n_copies if self.n_copies > 1 else 0):
            keep = {REPLICA_ATTR: 1}
            cp = [
                Signal(self.addr_bits, name=f"n_ptr_c{c}", attrs=keep),
                Signal(self.addr_bits, init=1, name=f"n_ptr1_c{c}", attrs=keep),
                Signal(name=f"last_wc_f_c{c}", attrs=keep),
                Signal(self.addr_bits, name=f"new_naddr_c{c}", attrs=keep),
                Signal(init=KIND_STORE == 0, name=f"is_store_P_c{c}", attrs=keep),
                Signal(self.addr_bits, name=f"new_naddr1_c{c}", attrs=keep),
            ]
            ptr_c, ptr1_c, last_c, naddr_c, store_c, naddr1_c = cp
            nxt_c = Mux(last_c, naddr_c, Mux(store_c, ptr_c, ptr1_c))
            m.d.sync += [
                ptr_c.eq(nxt_c),
                ptr1_c.eq(Mux(last_c, naddr1_c, Mux(store_c, ptr1_c, ptr1_c + 1))),
                last_c.eq(wc == T - 2),
                naddr_c.eq(new.rec.naddr),
                naddr1_c.eq(new.rec.naddr + 1),
            ]
            new_store = new.kind == KIND_STORE
            if p.wide:
                # wide builds: the entering op's kind decoded a cycle ahead, at T - 2 (it
                # holds to T - 1, as new_naddr's does): the record FIFO's head through
                # the decode into every copy had is_store_P_c among the 128-lane ECP5
                # evaluator's endpoints past 8 ns at 1986031, seed 1
                new_store_c = Signal(name=f"new_store_c{c}", attrs=keep)
                m.d.sync += new_store_c.eq(new_store)
                new_store = new_store_c
            with m.If(last_wc):
                m.d.sync += store_c.eq(Mux(go, new_store, KIND_STORE == 0))
            m.d.comb += self.n_addrs[c].eq(nxt_c)
        wc_next = window_next(wc, T)
        valid_next = Mux(last_wc, go & new.valid, opP.valid)
        store_next = Mux(last_wc, new.kind == KIND_STORE, is_store_P)
        m.d.comb += [
            self.n_en.eq(valid_next & (wc_next < r) & (~store_next | (wc_next == 0))),
        ]
        # reads arrive three cycles later (the noise banks' address registers, their
        # block RAMs, the group's registers): two shared stages here, the third a copy in
        # each group (the shared third stage into a group's p accumulator was the
        # 128-lane ECP5 accelerator's critical path at e4e6c56, 16.63 ns, 13.70 of it
        # routing)
        arr = [Signal(name=f"arr{j}") for j in range(2)]  # an ACT/BIAS read in flight
        arr_first = [Signal(name=f"arrf{j}") for j in range(2)]
        arr_store = [Signal(name=f"arrs{j}") for j in range(2)]
        m.d.sync += [
            arr[0].eq(p_reads & ~is_store_P),
            arr_first[0].eq(p_reads & (wc == 0)),
            arr_store[0].eq(p_reads & is_store_P & (wc == 0)),
            arr[1].eq(arr[0]),
            arr_first[1].eq(arr_first[0]),
            arr_store[1].eq(arr_store[0]),
        ]
        # the control of the P2, S and U stages: the shared copy serves the outputs
        # (activation address, logits, terms) and, with one group, the group
        ctl = self._stage_control(m, opP2, opS, opU, wc, "", self)
        u_act, u_last, u_state, row = ctl.u_act, ctl.u_last, ctl.u_state, ctl.row
        # the address from flip-flops alone: the row's low bit (wc == 3) a flag set at
        # wc 2 (T >= 4), the op's row pair and region loaded with opU (from opS). The
        # count's compare and the region's decode before the copies had 3 of the
        # 128-lane ECP5 evaluator's 55 endpoints past 8 ns at 7578f61 (seed 1) and 27 of
        # 497 at e7fe268 (seed 3)
        aw_row0 = Signal(name="aw_row0")
        aw_t = Signal.like(opU.rec.t, name="aw_t")
        aw_region = Signal(3, name="aw_region")
        m.d.sync += aw_row0.eq(wc == 2)
        with m.If(last_wc):
            m.d.sync += [
                aw_t.eq(opS.rec.t),
                aw_region.eq(p.hidden_region(opS.rec.layer, opS.rec.s)[:3]),
            ]
        aw_row = Cat(aw_row0, aw_t)
        aw_addr = Cat(aw_row[: p.region_bits], aw_region) if p.region_bits else aw_region
        # a register per copy (evaluator.py: each copy's choice between this address and
        # the loader's feeds the activation memory's slices of its lanes)
        aw_any = []
        for c in range(p.act_write_copies):
            copy = {REPLICA_ATTR: 1} if p.act_write_copies > 1 else {}
            a = Signal(p.act_addr_bits, name=f"aw_addr{c}", attrs=copy)
            aw_any.append(Signal(name=f"aw_any{c}", attrs=copy))
            m.d.sync += a.eq(aw_addr)
            m.d.comb += [self.aw_addr[c].eq(a), self.aw_any[c].eq(aw_any[c])]

        # ---- the datapaths
        w = max(p.p_bits, p.sum_bits) + 2
        uw = self.u_width
        logit_beat = Signal(logits_layout(p))
        term_beat = Signal(terms_layout(p))
        aw_en = Signal(p.lanes)
        # wide builds: the groups' run-time copies from middle copies, one per
        # RT_MID_GROUPS groups (_run_time_copies), so that no route runs from the
        # inputs' one register to every group
        self._rt_mids = []
        if p.wide and F > self.RT_MID_GROUPS and not self.lean:
            self._rt_mids = [
                self._run_time_copies(m, f"_mid{k}") for k in range(-(-F // self.RT_MID_GROUPS))
            ]
        for g in range(F):
            self._group(
                m,
                g,
                opP,
                opP2,
                opS,
                opU,
                iss_i,
                wc,
                arr,
                arr_first,
                arr_store,
                ctl,
                w,
                uw,
                logit_beat,
                term_beat,
                aw_en,
            )
        # aw_any a cycle after the shared control's decision, as the groups' enables (the
        # groups' ops are copies of the shared stages, in lockstep; group 0 has the most
        # lanes, so it writes whenever any group does): the OR of the groups' enables
        # across the chip into aw_any reached it after 11.14 ns in the 128-lane ULX3S
        # build at cd6a36f (seed 1)
        aw_sh = Signal()
        m.d.sync += [
            aw_sh.eq(ctl.aw_n & (ctl.i_n < min(self.G, p.lanes))),
            self.aw_en.eq(aw_en),
        ]
        m.d.sync += [a.eq(aw_sh) for a in aw_any]
        self.dbg.update(opP=opP, opS=opS, opU=opU, wc=wc)

        # logits: rows 2t (wc 2) and 2t+1 (wc 3) of last-layer ops. The write strobe and
        # the release of a reserved beat are flip-flops, decided a cycle ahead (wc 1 and
        # 2: the U op holds through wc T - 1, T >= 4, and wc never stalls) from a copy of
        # the output mode (it holds during an evaluation); decoded in the cycle from the
        # loader's mode flag, the strobe into the FIFO's storage enables had 64 of the
        # 128-lane ECP5 evaluator's 167 endpoints past 8 ns at 2c1ce90 (seed 3), and its
        # critical path (9.60 ns, 8.19 of it routing)
        emit_u = Signal(name="emit_u", reset_less=True)
        lg = Signal(name="logit_we")
        lg_last = Signal(name="logit_put_last")  # a one-row op's only beat (wc 3)
        lg_u = u_act & u_last & emit_u
        m.d.sync += [
            emit_u.eq(self.emit_logits),
            lg.eq(lg_u & ((wc == 1) | ((wc == 2) & opU.rec.two))),
            lg_last.eq(lg_u & (wc == 2) & ~opU.rec.two),
        ]
        m.d.comb += [
            logit_beat.i.eq(opU.i),
            logit_beat.s.eq(opU.rec.s),
            logit_beat.row.eq(row),
            lq.w_data.eq(logit_beat.as_value()),
            lq.w_en.eq(lg),
            l_put.eq(Cat(lg, lg_last)),
        ]
        # terms: written two cycles after the op's wc 3, from the groups' term registers
        # (each group's margin logic had run into the one FIFO's storage: 147 of its
        # write-data endpoints past 10 ns in the 128-lane evaluator at 045385e); its
        # reservation counts in t_used until the score unit takes the beat
        # (wide builds: three cycles, the groups' terms through a second register)
        tg = u_state & opU.rec.last_row & (wc == 3)
        t_op0 = Signal(op_layout, reset_less=True)
        t_op = Signal(op_layout, reset_less=True)
        m.d.sync += [t_pend0.eq(tg), t_op0.eq(opU)]
        if p.wide:
            t_op1 = Signal(op_layout, reset_less=True)
            m.d.sync += [
                t_pend1[0].eq(t_pend0),
                t_op1.eq(t_op0),
                t_pend.eq(t_pend1[0]),
                t_op.eq(t_op1),
            ]
        else:
            m.d.sync += [t_pend.eq(t_pend0), t_op.eq(t_op0)]
        m.d.comb += [
            term_beat.i.eq(t_op.i),
            term_beat.s.eq(t_op.rec.s),
            term_beat.first.eq(t_op.rec.first_sample),
            tq.w_data.eq(term_beat.as_value()),
            tq.w_en.eq(t_pend),
        ]
        return m

    # ------------------------------------------------------------ stage control
    def _u_addr(self, i, s, c):
        """The u bank address of entry ``c`` of lane ``i``'s member ``s``."""
        r = self.p.rank
        ua_bits = ceil_log2(self.u_depth)
        return Cat(c[: ceil_log2(r)] if r > 1 else Const(0, 0), s, i)[:ua_bits]

    def _state_base(self) -> int:
        """The u bank address of the margin states' first (lane 0, member 0)."""
        return (2 * self.G * self.p.rank) % (1 << ceil_log2(self.u_depth))

    def _state_addr(self, i, s):
        """The u bank address of lane ``i``'s member ``s``'s margin state."""
        return (self._state_base() + Cat(s, i))[: ceil_log2(self.u_depth)]

    def _op_copies(self, m, opP, opP2, opS, wc, sfx):
        """A group's own copies of the ops in P2, S and U, each taken from the shared
        stage before it when the window ends (``wc``: the group's counter), with the
        fields the group's datapath and :meth:`_stage_control` read (the others stay 0).
        The shared stages reached every group's datapath: the 64-lane ECP5 synthesis at
        1d5a36a (seed 3) had its critical path from the shared op in U into group 4's u
        bank write data."""
        fields = {
            "P2": (("valid",), ("wb", "layer", "last_layer")),  # valid, last_layer: u_flags
            "S": (("valid", "i"), ("s", "layer", "last_layer", "two", "sample")),
            "U": (
                ("valid", "i"),
                ("last_layer", "bias_row1", "two", "t", "sample", "s", "layer", "q"),
            ),
        }
        out = []
        for name, src in (("P2", opP), ("S", opP2), ("U", opS)):
            top, rec = fields[name]
            # the payload needs no reset (read only while valid); valid has one
            raw = Signal(
                self.op_layout, name=f"op_{name}{sfx}", reset_less=True, attrs={REPLICA_ATTR: 1}
            )
            op = Signal(self.op_layout, name=f"op_{name}_view{sfx}")
            m.d.comb += op.eq(raw)
            with m.If(wc == self.T - 1):
                m.d.sync += raw.kind.eq(src.kind)
                m.d.sync += [getattr(raw, f).eq(getattr(src, f)) for f in top if f != "valid"]
                m.d.sync += [getattr(raw.rec, f).eq(getattr(src.rec, f)) for f in rec]
            if "valid" in top:
                v = Signal(name=f"op_{name}_valid{sfx}", attrs={REPLICA_ATTR: 1})
                with m.If(wc == self.T - 1):
                    m.d.sync += v.eq(src.valid)
                m.d.comb += op.valid.eq(v)
            out.append(op)
        return out

    #: groups whose run-time copies one middle copy feeds (wide builds)
    RT_MID_GROUPS = 4

    def _run_time_copies(self, m, sfx, source=None):
        """A group's own registers of the run-time values its datapath reads (shifts,
        ``k``, the margin, the labels, the output mode): they hold still during an
        evaluation (the labels change samples ahead of their use), so a copy a cycle
        behind gives the same results, and it sits beside the group: the shared inputs
        reached every group (the 128-lane ECP5 evaluator's critical path at bafcab0,
        an activation shift into group 3's rounding constant, 16.87 ns, 14.16 of it
        routing). ``source``: copies of the inputs to copy from (the wide builds'
        middle copies, each feeding :data:`RT_MID_GROUPS` groups: the inputs' one
        register through the output mode's inverter into the groups' copies of
        ``emit_logits`` had 8 of the 128-lane ECP5 evaluator's 62 endpoints past 8 ns
        at bf20b5e, seed 3, 8.8 ns, a route across the chip); the inputs themselves
        without it."""
        rt = SimpleNamespace()
        for name in ("shifts", "pert_shift", "margin", "labels", "emit_logits"):
            src = getattr(self if source is None else source, name)
            cp = Signal.like(src, name=f"{name}{sfx}", reset_less=True, attrs={REPLICA_ATTR: 1})
            m.d.sync += cp.eq(src)
            setattr(rt, name, cp)
        return rt

    def _stage_control(self, m, opP2, opS, opU, wc, sfx, rt):
        """The control the P2, S and U stages derive from their ops and the window count
        ``wc``: u bank reads and writes of U, the margin state's write, a STORE's writes,
        the hidden outputs' write strobe and row, the shift amounts and rounding
        constants. Built once from the shared stages and, with more than one group, once
        per group from its own copies (:meth:`_op_copies`)."""
        T, r = self.T, self.p.rank
        ua_bits = ceil_log2(self.u_depth)
        u_addr, state_addr = self._u_addr, self._state_addr
        c = SimpleNamespace()
        last_wc = wc == T - 1

        # ---- U: reads and writes
        u_kind = opU.kind
        c.u_act = opU.valid & (u_kind == KIND_ACT)
        c.u_last = opU.rec.last_layer

        def u_flags(op):  # its u reads: (read-modify-write, margin state, bank)
            act = op.valid & (op.kind == KIND_ACT)
            rmw = op.valid & ((act & ~op.rec.last_layer) | (op.kind == KIND_BIAS))
            return rmw, act & op.rec.last_layer & ~rt.emit_logits, _ubank(op)

        # the flags of the ops in S and U as registers loaded with them at the window's
        # end (the run-time output mode holds while an op is valid), so the next
        # cycle's read below is a choice by the count between two sets of flip-flops,
        # not a decode of both ops (that decode into the read enables useu had 4 of the
        # 128-lane ULX3S build's endpoints past 9.3 ns at 3c75e0d, seed 1, 9.74 ns)
        fS = [Signal(name=f"{n}S{sfx}") for n in ("rmw", "state", "bank")]
        fU = [Signal(name=f"{n}U{sfx}") for n in ("rmw", "state", "bank")]
        with m.If(last_wc):
            m.d.sync += [f.eq(v) for f, v in zip(fS, u_flags(opP2), strict=True)]
            m.d.sync += [f.eq(v) for f, v in zip(fU, fS, strict=True)]
        u_rmw, u_state, bankU = fU
        c.u_state = u_state
        ur_en_U = (u_rmw & (wc < r)) | (u_state & (wc == 0))
        ur_addr_U = Mux(u_state, state_addr(opU.i, opU.rec.s), u_addr(opU.i, opU.rec.s, wc))
        c.bankU = bankU
        # the same read, decided a cycle ahead (from the op the U stage holds next cycle
        # and the next count) into registers per bank: its address and enable reach the
        # u banks from flip-flops (the decode of the op and the count into the banks'
        # address ports had 59 of the 128-lane ULX3S build's 948 endpoints past 10 ns,
        # 23e1484, seed 2)
        nxt = SimpleNamespace(
            **{f: Mux(last_wc, getattr(opS, f), getattr(opU, f)) for f in ("valid", "kind", "i")},
            **{
                f: Mux(last_wc, getattr(opS.rec, f), getattr(opU.rec, f))
                for f in ("s", "layer", "last_layer", "two")
            },
        )
        wc_n = window_next(wc, T)
        # (a group loads each bank's address and enable registers with this read or
        # P's, see _group.) The read is made of registers and one choice: ``lw``, a
        # flag of the window's last count, chooses between the S op's read at count 0
        # (``ura_S``, ``use_S``: registers of the S op and its flags, which hold from
        # the window's start, so that their value a cycle behind is the same at its
        # end, T >= 4) and the U op's at ``wcn`` (the next count, a counter of its own:
        # the margin state's read is at count 0 alone, and an op reads either it or
        # its rows). Decoded from the count, the ops' choice, the state's address adder
        # and the banks' choice in the cycle, it had 46 of the two 128-lane ULX3S
        # builds' endpoints past 8 ns at 912efff (8.79 ns)
        lw = Signal(name=f"lw{sfx}")
        wcn = Signal.like(wc, name=f"wcn{sfx}", init=1)
        m.d.sync += [lw.eq(wc == T - 2), wcn.eq(window_next(wcn, T))]
        rmw_S, state_S, bank_S = fS
        ura_S = Signal(ua_bits, name=f"ura_S{sfx}", reset_less=True)
        use_S = [Signal(name=f"use_S{b}{sfx}") for b in range(2)]
        m.d.sync += ura_S.eq(
            Mux(state_S, state_addr(opS.i, opS.rec.s), u_addr(opS.i, opS.rec.s, Const(0, len(wc))))
        )
        m.d.sync += [u.eq((rmw_S | state_S) & (bank_S == b)) for b, u in enumerate(use_S)]
        c.ur_addr_n = Mux(lw, ura_S, u_addr(opU.i, opU.rec.s, wcn))
        c.use_u_n = [Mux(lw, use_S[b], u_rmw & (wcn < r) & (bankU == b)) for b in range(2)]
        # u updates: the sum two cycles after the reads (delay line), written a cycle
        # later from the datapath's register; the margin state: read at wc 0, data at
        # wc 2, the new state registered then and written at wc 3; STORE writes at wc 2, 3
        c.wr = wr = [Signal(name=f"wr{j}{sfx}") for j in range(2)]
        # the address and bank of a write without a reset (wr says when they count):
        # with one, the reset and the address's own zero condition made a LUT before
        # the flip-flops' set/reset (a group's wra0, 8.20 ns, in the 128-lane ECP5
        # evaluator at 3d72357, seed 3)
        c.wr_addr = wr_addr = [
            Signal(ua_bits, name=f"wra{j}{sfx}", reset_less=True) for j in range(2)
        ]
        c.wr_bank = wr_bank = [Signal(name=f"wrb{j}{sfx}", reset_less=True) for j in range(2)]
        # the first row pair's update of an ACT op (a cycle behind the op, as wr[0]):
        # its old value is 0, given by the U read's data register as it loads (below)
        c.wr_first = wr_first = Signal(name=f"wrf{sfx}")
        m.d.sync += [
            wr[0].eq(ur_en_U & ~u_state),
            wr_addr[0].eq(ur_addr_U),
            wr_bank[0].eq(bankU),
            wr_first.eq((opU.rec.t == 0) & (u_kind == KIND_ACT)),
            wr[1].eq(wr[0]),
            wr_addr[1].eq(wr_addr[0]),
            wr_bank[1].eq(wr_bank[0]),
        ]
        # the margin state's and a STORE's writes come from registers, set a cycle
        # ahead (the op in U is the same from wc 0 to T - 1), so that no decode of the
        # window count lies between the u bank's write data and the adder before it
        c.state_w = Signal(name=f"state_w{sfx}")
        # (its initial value the address's constant part, as lo_at's: the bits every
        # state address shares are then constants, not a flip-flop the groups share)
        c.state_waddr = Signal(
            ua_bits,
            name=f"state_wa{sfx}",
            reset_less=True,
            init=self._state_base(),
        )
        c.store_w = Signal(name=f"store_w{sfx}")
        c.store_hi = Signal(name=f"store_hi{sfx}", reset_less=True)  # h1 (wc 3), else h0
        c.store_addr = Signal(ua_bits, name=f"store_wa{sfx}", reset_less=True)
        store_col = Cat(wc == 2, opU.rec.q)  # next cycle's column: c = 2q + (wc == 3)
        m.d.sync += [
            c.state_w.eq(u_state & (wc == 2)),
            c.state_waddr.eq(state_addr(opU.i, opU.rec.s)),
            c.store_w.eq(
                opU.valid & (u_kind == KIND_STORE) & ((wc == 1) | (wc == 2)) & (store_col < r)
            ),
            c.store_hi.eq(wc == 2),
            c.store_addr.eq(u_addr(opU.i, opU.rec.s, store_col)),
        ]

        # act memory writes of hidden outputs: h0 at wc 2, h1 at wc 3 of U, registered
        # (they reach the memory a cycle later: aw_cycles); a group decides its enables a
        # cycle ahead (``aw_n``, from the op U holds next cycle) into registers of its
        # own, so that the finalizer's enable register takes them without a decode (from
        # the group's op and count it had 40 of the 128-lane ULX3S build's 948 endpoints
        # past 10 ns, 23e1484, seed 2)
        act_n = nxt.valid & (nxt.kind == KIND_ACT)
        c.aw_n = (act_n & ~nxt.last_layer) & ((wc_n == 2) | ((wc_n == 3) & nxt.two))
        c.i_n = nxt.i
        c.row = Cat(wc == 3, opU.rec.t)

        # shift amounts and rounding constants
        kk = rt.pert_shift
        rk = Mux(kk == 0, 0, (Const(1, 16) << kk) >> 1)
        # the S stage's shift amount in each cycle of the window (a group's own, with
        # more than one), registered: computed a cycle ahead, so that each group's barrel
        # shifter starts at a flip-flop instead of the shared decode of wc and the ops
        # (the 128-lane ULX3S build's critical path at 804b083 ran from wc through it
        # across several groups). Count 1 and 2 shift by k; count 3 by the S op's s_l;
        # the others (0 and 4..T-1) by the U op's s_l; a STORE by 0. Each op's s_l (0
        # for a STORE) is a register that moves with it: the P2 op's from its fields a
        # cycle after it arrives, into the S op's and the U op's at the window's end, so
        # that only the count chooses between registers here (the choice of ops by the
        # window's end, the layer's shift and the STORE test a cycle ahead had 11 of the
        # 128-lane ULX3S build's 135 endpoints past 9.3 ns at dace236, seed 2, 10.02 ns)
        sl_of = [Signal(4, name=f"sl_{st}{sfx}", reset_less=True) for st in ("P2", "S", "U")]
        m.d.sync += sl_of[0].eq(Mux(opP2.kind == KIND_STORE, 0, rt.shifts[opP2.rec.layer]))
        with m.If(last_wc):
            m.d.sync += [sl_of[1].eq(sl_of[0]), sl_of[2].eq(sl_of[1])]
        amt = Signal(4, name=f"shift_amt{sfx}")  # act_shifts and pert_shift are 4 bits
        amt_n = Mux((wc == 0) | (wc == 1), kk, Mux((wc == 2) | last_wc, sl_of[1], sl_of[2]))
        # the bounds of y1 = add >> amt before the shift (see the S stage): y1 > 127 is
        # add >= 128 << amt, y1 < -127 is add < -(127 << amt) (floor shifts); with amt
        # registers of their own, at most 24 bits (amt <= 15). Each is a table of 16
        # constants indexed by amt_n (every bit a function of amt_n's four bits, one LUT):
        # lo_at as the negation of a shift had a carry chain after the shifter, 9.74 ns
        # (109 endpoints past 8 ns) in the 128-lane ULX3S build at 44e9bb5, seed 3
        # (The lean form compares y1 itself: no tables.)
        c.hi_at = c.lo_at = None
        if self.lean:
            m.d.sync += amt.eq(amt_n)
        else:
            # initial values from the tables (amt 0), so that the bits every entry shares
            # are constants: lo_at's two sign bits, each a flip-flop from 0 to 1 with init
            # 0, were one flip-flop after Yosys merged the groups' copies, its net across
            # the chip into every group's compare (the 128-lane ECP5 evaluator's critical
            # path at 59c3e3a, seed 1: lo_at_g0[22] into y1_lo_g14, 8.46 ns, 6.85 of it
            # routing)
            hi_tab = Array(Const(128 << a, signed(24)) for a in range(16))
            lo_tab = Array(Const(-(127 << a), signed(24)) for a in range(16))
            hi_at = Signal(signed(24), name=f"hi_at{sfx}", init=hi_tab[0].value)  # 128 << amt
            lo_at = Signal(signed(24), name=f"lo_at{sfx}", init=lo_tab[0].value)  # -(127 << amt)
            m.d.sync += [
                amt.eq(amt_n),
                hi_at.eq(hi_tab[amt_n]),
                lo_at.eq(lo_tab[amt_n]),
            ]
            c.hi_at, c.lo_at = hi_at, lo_at
        c.rk, c.sl_P2, c.amt = rk, sl_of[0], amt
        return c

    # --------------------------------------------------------------------- datapath
    def _group(
        self,
        m,
        g,
        opP,
        opP2,
        opS,
        opU,
        iss_i,
        wc,
        arr,
        arr_first,
        arr_store,
        ctl,
        w,
        uw,
        logit_beat,
        term_beat,
        aw_en,
    ):
        p, G, r, T = self.p, self.G, self.p.rank, self.T
        lanes = [g * G + i for i in range(G) if g * G + i < p.lanes]
        sfx = f"_g{g}"

        # every register of a group is data that moves with its op through P, P2, S and
        # U, written before it is read (the accumulator pacc restarts at an op's first
        # product): none needs a reset, so none takes the reset net (a RESET mid-run
        # leaves them stale and the next run overwrites them), which keeps that net's
        # fan-out to the control state (docs/boards.md)
        def sig(shape, name, **kw):
            return Signal(shape, name=name + sfx, reset_less=True, **kw)

        # the group's own copy of the window counter, in lockstep with the shared one (the
        # same reset, the same count): the shared counter reached every group's
        # datapath (the 64-lane ECP5 synthesis's critical path at 0b480c3: wc through
        # the U stage's operand selection into a u bank's write data, 15.5 ns, 12.47 of
        # it routing); its copy is a few flip-flops beside the logic it steers
        # (The iCE40's lean form has no copies: every group reads the shared counter,
        # stages, run-time values and control, and its registers below that copy shared
        # ones are merged by Yosys.)
        if not self.lean:
            wc = Signal.like(wc, name="wc" + sfx)
            m.d.sync += wc.eq(window_next(wc, T))
        rt = self
        if self.F > 1 and not self.lean:  # the group's own ops, run-time values, control
            opP2, opS, opU = self._op_copies(m, opP, opP2, opS, wc, sfx)
            mids = self._rt_mids
            source = mids[g * len(mids) // self.F] if mids else None
            rt = self._run_time_copies(m, sfx, source)
            ctl = self._stage_control(m, opP2, opS, opU, wc, sfx, rt)
        bankU = ctl.bankU
        wr, wr_addr, wr_bank, wr_first = ctl.wr, ctl.wr_addr, ctl.wr_bank, ctl.wr_first
        state_w, state_waddr = ctl.state_w, ctl.state_waddr
        store_w, store_addr, store_hi = ctl.store_w, ctl.store_addr, ctl.store_hi
        rk, amt, hi_at, lo_at = ctl.rk, ctl.amt, ctl.hi_at, ctl.lo_at

        def lane_mux(vals, idx, shape, name):
            out = sig(shape, name)
            with m.Switch(idx):
                for j, v in enumerate(vals):
                    with m.Case(j):
                        m.d.comb += out.eq(v)
            return out

        # copies of shared signals, one per group: without the replica attribute Yosys's
        # opt_merge makes them one register driving every group (the lane index below
        # was the 64-lane ECP5 synthesis's and ULX3S build's critical path at ed7576d
        # and d56cfec: group 0's copy into group 2's lane multiplexer and p accumulator)
        def copy(shape, name):
            return sig(shape, name, attrs={} if self.lean else {REPLICA_ATTR: 1})

        # P's u reads leave through the group's own registers, a cycle after the shared
        # op and window count that make them (column c at wc c + 1; the last spills into
        # the next window, where the bank is still P's: the op ahead in U reads and writes
        # the other one, the issuer's hazard check): the shared op in P and window count
        # reached every group's u bank address (the 128-lane ECP5 evaluator's critical
        # path at 804e759, 16.64 ns, 14.54 of it routing). The data is registered in the
        # group, three cycles after the shared op, in step with the noise digits: used as
        # the bank gave it, the block RAM's output through the digit product into the p
        # accumulator was the 128-lane ECP5 accelerator's critical path at a7010ef
        # (15.18 ns, 7.57 of it logic).
        ra_P_n = self._u_addr(opP.i, opP.rec.us, wc)
        re_P_n = opP.valid & (wc < r) & (opP.kind == KIND_ACT)
        rb_P = copy(1, "rbP")
        m.d.sync += rb_P.eq(opP.rec.layer[0])

        # u banks: one read port each, addressed by P (bank pb) or U (bank ub); U's read
        # register takes its bank's data (the bank mux before it). On the ECP5 they are
        # distributed RAM (LUTs, an asynchronous read into the port's flip-flops beside
        # them): a DP16KD's 5.6 ns from the clock to its unregistered output, then the
        # bank mux and the route into urdU/urdP, had 53 of the 128-lane ULX3S build's
        # 413 endpoints past 10 ns at cd6a36f (seed 1, 11.22 ns); a bank is u_entries
        # words of 16 to 18 bits (80 at rank 4, eight lanes a group), a DP16KD 1,024.
        # Each bank's read address and enable are registers of their own, loaded with
        # the choice between U's next read and P's (U's wins): the choice after the
        # registers, before the RAM's address, had 98 of the three 128-lane ULX3S builds'
        # endpoints past 8 ns at 19a8e90 (into the port's data, 8.58 ns)
        u_attrs = {**NO_RW_CHECK, "ram_style": "distributed"} if self.ecp5 else NO_RW_CHECK
        rports = []
        wports = []
        for b in range(2):
            mem = memory.Memory(shape=uw, depth=self.u_entries, init=[], attrs=u_attrs)
            m.submodules[f"ubank{b}{sfx}"] = mem
            rp = mem.read_port()
            wp = mem.write_port()
            use_u_n = ctl.use_u_n[b]
            r_addr = copy(ceil_log2(self.u_depth), f"ura{b}")
            r_en = sig(1, f"ure{b}")
            m.d.sync += [
                r_addr.eq(Mux(use_u_n, ctl.ur_addr_n, ra_P_n)),
                r_en.eq(use_u_n | (re_P_n & (opP.rec.layer[0] == b))),
            ]
            m.d.comb += [rp.addr.eq(r_addr), rp.en.eq(r_en)]
            rports.append(rp)
            self.rw_watch.append(RWWatch(f"ubank{b}{sfx}", rp, wp, rp.en))
            wports.append(wp)
        self.dbg.setdefault("uw", []).append((g, b, wp))

        # P's and U's data: registered from the bank each read (a cycle ago, U's two)
        pb_d = copy(1, "pbd")
        ub_d = copy(1, "ubd")
        m.d.sync += [pb_d.eq(rb_P), ub_d.eq(bankU)]
        u_P = sig(signed(uw), "urdP")
        # U's is 0 for a first row pair's update (wr_first now: the update's cycle is
        # the next), so the update's adder has no zeroing multiplexer before it (the
        # adder's operands into updd had 15 of the 128-lane ULX3S build's endpoints past
        # 9.3 ns at f3eb1f7, seed 1, 9.92 ns). The margin state reads it at wc 2 of a
        # last-layer op, where a first row pair (t = 0) ignores it (first_t, below)
        u_U = sig(signed(uw), "urdU")
        m.d.sync += u_P.eq(Mux(pb_d, rports[1].data, rports[0].data))
        m.d.sync += u_U.eq(Mux(wr_first, 0, Mux(ub_d, rports[1].data, rports[0].data)))

        # the noise digits of this group's lane of the op in P (their read issued a cycle
        # ahead of the op's cycle, the banks' data in their output registers two cycles
        # after that, then the lane's digits three cycles after the op's cycle): picked
        # from those registers by the group's copy of the lane index and registered in
        # the group, so that the route from the group to its p accumulators starts at a
        # register (from the evaluator's shared data registers through the group's
        # multiplexer it was the 128-lane ECP5 evaluator's critical path at c58b015:
        # 16.53 ns, 13.49 of it routing). The group's own register of the block RAMs'
        # unregistered outputs, before, had up to 10.3 ns at b56882b.
        i_d = [copy(len(opP.i), f"id{j}") for j in range(2)]
        m.d.sync += [i_d[0].eq(opP.i), i_d[1].eq(i_d[0])]
        nd = []
        for b in range(2):
            # the group's lanes' digits as the bank gives them (the read a cycle ahead)
            # (the banks' output registers: the block RAMs' on the ECP5)
            raw = data.View(
                data.ArrayLayout(data.ArrayLayout(3, 2), len(lanes)),
                Cat(self.n_data[b][j].as_value() for j in lanes),
            )
            pick = lane_mux(
                [raw[k] for k in range(len(lanes))], i_d[1], data.ArrayLayout(3, 2), f"ndsel{b}"
            )
            nd.append(sig(data.ArrayLayout(3, 2), f"nd{b}"))
            m.d.sync += nd[b].eq(pick)
        q_d = [copy(1, f"qd{j}") for j in range(3)]
        m.d.sync += [q_d[0].eq(opP.rec.q[0]), q_d[1].eq(q_d[0]), q_d[2].eq(q_d[1])]
        # the third stage of the reads' flags, the group's own
        arr, arr_first, arr_store = (
            [*flags[:2], copy(1, f"{name}2")]
            for flags, name in ((arr, "arr"), (arr_first, "arrf"), (arr_store, "arrs"))
        )
        m.d.sync += [
            arr[2].eq(arr[1]),
            arr_first[2].eq(arr_first[1]),
            arr_store[2].eq(arr_store[1]),
        ]

        # ---- P: accumulate p_i = sum_c A_i,c * u_c; keep the B digits and v
        # p's accumulator in two halves with the carry between them a cycle late: the
        # sum is Cat(lo, hi + c) (c: the low half's last carry out, not yet in hi), so
        # that each product goes into two carry chains of half the width side by side
        # (pacc's whole chain after the digit product had 129 of the 128-lane ECP5
        # evaluator's endpoints past 8 ns at b48cbeb, seed 2, 8.56 ns). An op's first
        # product drops the previous op's carry with its sum. Taken into psS whole.
        pw = p.p_bits + 1
        lw = pw // 2  # the low half's width
        pacc_lo = [sig(lw, f"pacc_lo{i}") for i in range(2)]
        pacc_hi = [sig(pw - lw, f"pacc_hi{i}") for i in range(2)]
        pacc_c = [sig(1, f"pacc_c{i}") for i in range(2)]
        pacc = [Cat(pacc_lo[i], (pacc_hi[i] + pacc_c[i])[: pw - lw]).as_signed() for i in range(2)]
        # quantized mode: the perturbation is inside the lanes' sums, p stays 0 (and
        # rshr(0, k) = 0); the u vectors below are then computed but never read
        for i in range(2 if p.mode != "quantized" else 0):
            prod, cin = _digit_times(nd[0][i], u_P)
            prod_w = sig(signed(pw), f"prodw{i}")  # the product at p's width
            m.d.comb += prod_w.eq(prod)
            first = arr_first[2]
            lo = Mux(first, 0, pacc_lo[i]) + prod_w[:lw] + cin
            hi = Mux(first, 0, pacc_hi[i]) + prod_w[lw:] + (pacc_c[i] & ~first)
            with m.If(arr[2]):
                m.d.sync += [
                    pacc_lo[i].eq(lo[:lw]),
                    pacc_c[i].eq(lo[lw]),
                    pacc_hi[i].eq(hi[: pw - lw]),
                ]
        bsrP = [sig(3 * r, f"bsrP{i}") for i in range(2)]
        with m.If(arr[2]):
            for i in range(2):
                m.d.sync += bsrP[i].eq(Cat(bsrP[i][3:], nd[1][i]))
        # Ub(q): bank q % 2 holds B_0[n0, 2q], B_0[n0, 2q+1]; read at wc 0, it lands at
        # wc 3, for P2's wc 0
        bbP2 = [sig(3, f"bbP2_{i}") for i in range(2)]
        with m.If(arr_store[2]):
            for i in range(2):
                m.d.sync += bbP2[i].eq(Mux(q_d[2], nd[1][i], nd[0][i]))
        # the sums of the op's lane, taken in P's first cycle by the group's own copy of
        # the lane index: loaded with the issuer's index in the cycle the op enters P
        # (equal to opP.i whenever the op is valid), and vP loaded whatever the op (for an
        # invalid or BIAS op the value is never used), so no shared register of the op
        # reaches the group's capture multiplexer (the shared opP.i into group 10's was
        # the 128-lane ULX3S build's critical path at 5a62ff9, 19.38 ns, 17.91 of it
        # routing)
        ip = copy(len(opP.i), "ip")
        with m.If(wc == T - 1):
            m.d.sync += ip.eq(iss_i)
        vP = [sig(signed(p.acc_bits), f"vP{i}") for i in range(2)]
        caps = [self.caps[j] for j in lanes]
        vsel = lane_mux([c.as_value() for c in caps], ip, 2 * p.acc_bits, "vsel")
        with m.If(wc == 0):
            m.d.sync += [
                vP[0].eq(vsel[: p.acc_bits].as_signed()),
                vP[1].eq(vsel[p.acc_bits :].as_signed()),
            ]
        # to P2 at the window's end (p is still accumulating: taken at P2 wc 3)
        vP2 = [sig(signed(p.acc_bits), f"vP2_{i}") for i in range(2)]
        with m.If(wc == T - 1):
            m.d.sync += [vP2[i].eq(vP[i]) for i in range(2)]

        # ---- P2: p and the B digits (wc 3, when the last product has landed; the next
        # op's first lands in the same cycle), vc
        psS = [sig(signed(pw), f"psS{i}") for i in range(2)]
        bsrS = [sig(3 * r, f"bsrS{i}") for i in range(2)]
        bsrU = [sig(3 * r, f"bsrU{i}") for i in range(2)]
        with m.If(wc == 3):
            # every register of this cycle's copies is read before it is written: the op
            # in S has used psS (wc 0, 1), the op in U has read bsrU (its own digits, wc
            # 1), the op in S gets them into bsrU now, the op in P2 moves p into psS and
            # its digits into bsrS
            m.d.sync += [psS[i].eq(pacc[i]) for i in range(2)]
            m.d.sync += [bsrS[i].eq(bsrP[i]) for i in range(2)]
            m.d.sync += [bsrU[i].eq(bsrS[i]) for i in range(2)]
        # vc = v + 127 * d + the rounding constant, in steps: the constant term at wc 0
        # (below), its sum with the rounding constant at wc 1 (the op's digits; the
        # rounding constant a table indexed by the op's shift register sl_P2, 0 for a
        # STORE, valid from wc 1), then
        # the add at wc 2 (one adder after a register; the three-operand add after the
        # decode had 205 vc endpoints past 10 ns in the 128-lane evaluator at 41cf5da, the
        # decode into the constant terms 29 of the 128-lane ULX3S build's 948 at 23e1484,
        # seed 2; the rounding constant's own register, loaded at wc 0 from the layer's
        # shift through its decode, took it as a synchronous reset: up to 8.98 ns into
        # its LSR in the 128-lane ULX3S build at 44e9bb5). The B digit of a STORE (bbP2)
        # holds from wc 0 to wc 3, the op's fields and vP2 the whole window (T >= 4).
        # The constant term 127 * d is a register of its own, loaded at wc 0, so that
        # the add at wc 1 starts at flip-flops (the op's kind through the digit's choice
        # and the table into the adder had 44 of the three 128-lane ULX3S builds'
        # endpoints past 8 ns into brs at 19a8e90, 8.85 ns).
        vc = [sig(signed(w), f"vc{i}") for i in range(2)]
        bias_rs = [sig(signed(max(w, 18)), f"brs{i}") for i in range(2)]
        bias_d = [sig(signed(10), f"bd{i}") for i in range(2)]  # 127 * d, |.| <= 254
        store2 = opP2.kind == KIND_STORE
        rs_tab = Array(Const((1 << a) >> 1, 16) for a in range(16))  # rshr's rounding
        with m.If(wc == 0):
            for i in range(2):
                m.d.sync += bias_d[i].eq(_times_bias(Mux(store2, bbP2[i], opP2.rec.wb[i])))
        with m.If(wc == 1):
            m.d.sync += [bias_rs[i].eq(bias_d[i] + rs_tab[ctl.sl_P2]) for i in range(2)]
        with m.If(wc == 2):
            m.d.sync += [vc[i].eq(vP2[i] + bias_rs[i]) for i in range(2)]
        vcS = [sig(signed(w), f"vcS{i}") for i in range(2)]
        with m.If(wc == T - 1):
            m.d.sync += [vcS[i].eq(vc[i]) for i in range(2)]

        # ---- S: one adder (wc 0..3), one barrel shifter (wc 1..3 and the next window's
        # wc 0), one saturator (wc 0, 1 of the next window, the op then in U):
        #   wc 0: add = p0 + rk      wc 1: t0 = add >> k, add = p1 + rk
        #   wc 2: t1 = add >> k, add = vc0 +- t0
        #   wc 3: y0 = add >> s_l, add = vc1 +- t1
        #   wc 0': y1 = add >> s_l, h0 = sat(y0)       wc 1': h1 = sat(y1)
        # (STORE ops: add = vc, no shift, no saturation: u_0 entries.) The subtraction is
        # the ones' complement plus a carry-in.
        storeS = opS.kind == KIND_STORE
        storeU = opU.kind == KIND_STORE
        lastU = opU.rec.last_layer
        add = sig(signed(w), "add")
        y = [sig(signed(w), f"y{i}") for i in range(2)]
        # the operands and their controls as flip-flops, set a cycle ahead from the next
        # count and the op S holds next (opP2's at the window's end): no decode of the
        # op's kind and sign before the operand multiplexers (into add, 14 of the
        # 128-lane ULX3S build's endpoints past 9.3 ns at f3eb1f7, seed 1, 9.56 ns)
        #   neg_b: wc 2, 3 of a member 2j+1 op, not a STORE (vc - t; the op in S
        #   stays from wc 1 to 3, so its own fields give it)
        # The second operand is itself a register loaded a cycle ahead: rk for wc 0, 1;
        # for wc 2, 3 the shifter's output of the cycle before, t0 and t1 (so they need
        # no registers of their own), complemented for vc - t; 0 for a STORE. (Its choice
        # among t0, t1 and rk by the count, after their registers, into add: 64 of the
        # three 128-lane ULX3S builds' endpoints past 8 ns at 19a8e90, 8.56 ns.)
        wc_n = window_next(wc, T)
        store_n = Mux(wc == T - 1, opP2.kind == KIND_STORE, storeS)
        neg_n = wc_n[1] & opS.rec.s & ~storeS
        neg_b = sig(1, "neg_b_f")
        m.d.sync += neg_b.eq(neg_n)
        # The first operand likewise, loaded a cycle ahead: p0 for wc 0 (psS[0], or at
        # T = 4 the p it takes in that cycle), p1 for wc 1, vc0 and vc1 for wc 2 and 3,
        # held after wc 3 (so the window's last add is again vc1 +- t1). A STORE's adds
        # at wc 0 and 1 are never read (its second operand is 0, not t0 or t1; its y
        # bypasses the saturation), so they add its p too, where they had added 0.
        # (The choice among psS and vcS by the count and a STORE flag, after their
        # registers, into add: 8 of the 128-lane ULX3S build's endpoints past 8 ns at
        # 635abd7, seed 1, 8.25 ns.)
        op_a = sig(signed(w), "op_a")
        with m.If(wc == T - 1):
            m.d.sync += op_a.eq(pacc[0] if T == 4 else psS[0])
        with m.If(wc == 0):
            m.d.sync += op_a.eq(psS[1])
        with m.If(wc == 1):
            m.d.sync += op_a.eq(vcS[0])
        with m.If(wc == 2):
            m.d.sync += op_a.eq(vcS[1])
        op_b = sig(signed(w), "op_b")
        with m.If(opS.valid):
            m.d.sync += add.eq(op_a + op_b + neg_b)
        shifted = sig(signed(w), "shifted")
        m.d.comb += shifted.eq(add >> amt)
        # (loaded for wc 0, 2 and 3 and held after wc 3: with T > 4 the add in the
        # window's last cycle, whose count ends in 0b11, is again vc1 +- t1 for y1)
        with m.If((wc == T - 1) | (wc == 1) | (wc == 2)):
            m.d.sync += op_b.eq(Mux(store_n, 0, Mux(wc_n[1], shifted ^ neg_n.replicate(w), rk)))
        with m.If(opS.valid & (wc == 3)):
            m.d.sync += y[0].eq(shifted)
        # y1 is read in wc 1 alone (h1 and hU1, below): it takes the shifter's output in
        # every cycle, with no enable (the op's valid flag and wc == 0 into its enable
        # reached its 37 flip-flops after 11.53 ns, the 128-lane ULX3S build's critical
        # path at cd6a36f, seed 1; y1 had 42 of its 413 endpoints past 10 ns)
        m.d.sync += y[1].eq(shifted)
        h = [sig(signed(uw), f"h{i}") for i in range(2)]
        lo = Mux(lastU, -127, 0)
        # y1's bounds, compared as y1 takes the shifter's output (at wc 0 for its read at
        # wc 1: the op in U, and so lo, is the same in both): y1 through the compares
        # into h1 was the 128-lane ULX3S build's critical path at e059f3a (seed 1,
        # 10.05 ns, 7.05 of it routing). They compare add, not y1, with the bounds
        # shifted left by amt (registers, see _stage_control), y1 < 0 being add < 0:
        # the shifter into the compares was the critical path at 67bdee2 (seed 1,
        # add through the shifter into y1_hi, 9.54 ns, 7 levels)
        y1_hi = sig(1, "y1_hi")  # y1 > 127
        y1_lo = sig(1, "y1_lo")  # y1 < lo
        if self.lean:  # (the iCE40's) y1's own compares, as y0's: no bound tables
            m.d.comb += [y1_hi.eq(y[1] > 127), y1_lo.eq(y[1] < lo)]
        else:
            m.d.sync += [
                y1_hi.eq(add >= hi_at),
                y1_lo.eq(Mux(lastU, add < lo_at, add < 0)),
            ]

        def saturate(v, hi, low):  # hi: v > 127, low: v < lo; STORE ops: v itself
            return Mux(storeU, v, Mux(hi, 127, Mux(low, lo, v)))

        # each value saturated by its own compares, no choice by the window count before
        # them (the choice of y0 or y1 by wc, then the compares, into h0 was the 128-lane
        # evaluator's critical path at 045385e and 5d8c66b: 14.19 and 13.42 ns, 6 levels)
        sat = [saturate(y[0], y[0] > 127, y[0] < lo), saturate(y[1], y1_hi, y1_lo)]
        # h0 and h1 load in wc 0 and 1 whatever the op (an invalid op's values are never
        # read: every write and output is gated by the op's validity, and the next op
        # loads them before its first read), enabled by flip-flops set a cycle ahead: no
        # decode of the op and the count before their enables (32 of h0's endpoints past
        # 10 ns at cd6a36f, seed 1)
        at = [sig(1, f"at{i}", init=1 - i) for i in range(2)]  # wc == 0, wc == 1
        m.d.sync += [at[0].eq(wc == T - 1), at[1].eq(wc == 0)]
        with m.If(at[0]):
            m.d.sync += h[0].eq(sat[0])
        with m.If(at[1]):
            m.d.sync += h[1].eq(sat[1])

        # ---- U: outputs, u_{l+1} update, margin state
        # h as the U stage's u update uses it (BIAS and the bias row forced), loaded at
        # wc 1, for the op's writes from wc 2 on (the last write of the op
        # before it, at wc 1 when r = T, still reads the old value): h0 is registered
        # at wc 0, h1's saturated value is taken as h[1] takes it. The writes read
        # these registers alone, with no choice by the window count before the digit
        # products (the wc-2 bypass was the 128-lane ECP5 evaluator's critical path at
        # 1d03ed0: the group's wc through it, the products and the update's adder into
        # a u bank's write data)
        hU = [sig(signed(9), f"hU{i}") for i in range(2)]
        bias_op = opU.kind == KIND_BIAS
        hU_n = [sig(signed(9), f"hUn{i}") for i in range(2)]  # what hU loads at wc 1
        m.d.comb += [
            hU_n[0].eq(Mux(bias_op, BIAS, h[0])),
            hU_n[1].eq(Mux(bias_op, 0, Mux(opU.rec.bias_row1, BIAS, sat[1]))),
        ]
        with m.If(wc == 1):
            m.d.sync += [hU[i].eq(hU_n[i]) for i in range(2)]
        # the B digits' column of the write happening now: loaded at wc 1 with the U
        # op's digits (bsrU holds them until wc 2), shifted one column per write
        bsrW = [sig(3 * r, f"bsrW{i}") for i in range(2)]
        with m.If(wc == 1):
            m.d.sync += [bsrW[i].eq(bsrU[i]) for i in range(2)]
        with m.Elif(wr[1]):
            m.d.sync += [bsrW[i].eq(bsrW[i] >> 3) for i in range(2)]
        # the digit products of the write happening now, d * hU (bsrW's low column), as
        # registers loaded with bsrW and hU from their next values: at every cycle
        # tw, cw = _digit_times(bsrW[:3], hU) (all of them 0 at start). The products, then the
        # three-operand adder into updd had 14 of the 128-lane ULX3S build's 65
        # endpoints past 9.3 ns at dd3e446 (seed 2, 10.10 ns); the adder now starts at
        # flip-flops alone
        tw = [sig(signed(10), f"tw{i}") for i in range(2)]
        cw = [sig(1, f"cw{i}") for i in range(2)]
        # h1's product at wc 1 is a choice among products, not the product of a choice:
        # d * y1 (its low 9 bits, beside the compares) and d times each constant h1 can
        # take (127, lo, BIAS, 0), chosen by the op's flags and y1's bounds, so the
        # compares meet the product at one multiplexer (y1 through the saturation, the
        # bias choices and the product into tw1 was the 128-lane ULX3S build's critical
        # path at f83f779, seed 2: 10.25 ns, 7 levels)
        code1 = bsrU[1][:3]

        def times(v):
            return _digit_times(code1, v)[0]

        y1 = y[1]
        if self.lean:  # (the iCE40's) the product of the choice: one product
            t_ld1 = times(hU_n[1])
        else:
            # the product of y1 itself meets the rest at the last multiplexer (it had
            # been the third of four: y1 through the product and three choices into tw1,
            # 39 of the 128-lane ULX3S build's endpoints past 8 ns at 950052f, seed 1,
            # 9.71 ns)
            lo9 = Mux(lastU, Const(-127, signed(9)), Const(0, signed(9)))
            use_y1 = ~bias_op & ~opU.rec.bias_row1 & (storeU | (~y1_hi & ~y1_lo))
            t_const1 = Mux(
                bias_op,
                times(Const(0, signed(9))),
                Mux(
                    opU.rec.bias_row1,
                    times(Const(BIAS, signed(9))),
                    Mux(y1_hi, times(Const(127, signed(9))), times(lo9)),
                ),
            )
            t_ld1 = Mux(use_y1, times(y1[:9].as_signed()), t_const1)
        t_ld0, c_ld0 = _digit_times(bsrU[0][:3], hU_n[0])
        # (a product's carry is the digit's alone: any value gives d * hU_n[1]'s)
        loads = [(t_ld0, c_ld0), (t_ld1, _digit_times(code1, y1[:9])[1])]
        for i, (t_ld, c_ld) in enumerate(loads):
            t_sh, c_sh = _digit_times(Cat(bsrW[i], Const(0, 3))[3:6], hU[i])
            with m.If(wc == 1):
                m.d.sync += [tw[i].eq(t_ld), cw[i].eq(c_ld)]
            with m.Elif(wr[1]):
                m.d.sync += [tw[i].eq(t_sh), cw[i].eq(c_sh)]

        old = u_U  # 0 for a first row pair (wr_first, above)
        upd = sig(signed(uw + 2), "upd")
        m.d.comb += upd.eq(old + tw[0] + tw[1] + cw[0] + cw[1])
        # the update leaves through a register, written a cycle later (three after its
        # read: column c at wc c + 3, the last spilling to wc 2 of the next window): the
        # digit products and the adder into the bank's write data were the 128-lane
        # ULX3S build's critical path at 475d2ed (60 MHz, seed 1: 17.40 ns, 14.36 of it
        # routing). No write collides: a STORE (wc 2, 3) never follows an update in a
        # group (a sample's u-row ops follow its last layer's), a margin state is written
        # at wc 3; the next reader of the column reads it later (U: at wc c of the next
        # window; P: at wc c of a later window)
        wr_d = sig(1, "wrd")
        wr_da = sig(len(wr_addr[1]), "wrda")
        wr_db = sig(1, "wrdb")
        upd_d = sig(signed(uw), "updd")
        m.d.sync += [wr_d.eq(wr[1]), wr_da.eq(wr_addr[1]), wr_db.eq(wr_bank[1]), upd_d.eq(upd)]

        # margin state: low byte the label's logit, high byte the largest other logit.
        # wc 1: which rows are the label's (the op and the labels are stable in U);
        # wc 2: the state read arrives, the new state is registered; wc 3: it is written
        # and the score term (from the registered state) is pushed
        # the op's label, registered at the window's end from the S op, the U op of the
        # next window (the label of a sample is written before its passes run and
        # overwritten only samples later: read a cycle earlier it is the same), compared
        # with rows 2t and 2t + 1 in two registered steps: t against the label's pair at
        # wc 0 (hit_t), the row's bit and the op's flags at wc 1. The label lookup by
        # sample and the row's add before the compares had 2 of the 128-lane ULX3S
        # build's endpoints past 10 ns for 100 MHz at 2b110bc, seed 1; the label through
        # the whole compare into is_lab and is_oth was its critical path at 44e9bb5, seed
        # 2 (9.94 ns, 6 levels, 4.5 ns of it one route), and among the slowest at seeds 1
        # and 3
        label = sig(p.width_bits, "label")
        with m.If(wc == T - 1):
            m.d.sync += label.eq(rt.labels[opS.rec.sample])
        hit_t = sig(1, "hit_t")  # t == label >> 1
        lab_odd = sig(1, "lab_odd")  # label & 1
        with m.If(wc == 0):
            m.d.sync += [hit_t.eq(opU.rec.t == label[1:]), lab_odd.eq(label[0])]
        is_lab = [sig(1, f"islab{i}") for i in range(2)]
        is_oth = [sig(1, f"isoth{i}") for i in range(2)]
        first_t = sig(1, "first_t")
        with m.If(wc == 1):
            for i in range(2):
                valid = Const(1) if i == 0 else opU.rec.two
                hit = hit_t & (lab_odd == i)
                m.d.sync += [is_lab[i].eq(valid & hit), is_oth[i].eq(valid & ~hit)]
            m.d.sync += first_t.eq(opU.rec.t == 0)
        st = u_U
        ylab = Mux(first_t, 0, st[:8].as_signed())
        ymax = Mux(first_t, NO_OTHER, st[8:16].as_signed())
        hv = [h[i][:8].as_signed() for i in range(2)]
        nl = Mux(is_lab[1], hv[1], Mux(is_lab[0], hv[0], ylab))
        # nm = max(ymax, the others among h0, h1), the first wins ties: three compares
        # side by side, not two in a row, against the stored maximum itself: the first
        # row pair (first_t, ymax NO_OTHER, below every logit) only forces them true, so
        # first_t's choice of ymax is not before them (first_t through it, a compare and
        # the choices into s_max was the 128-lane ECP5 evaluator's critical path at
        # 56d9c53, 14.43 ns)
        # the compares themselves a cycle earlier, into registers (wc 1: the state's read
        # data at the banks' outputs, h0 in its register, y1 in its register before h1
        # is): the stored maximum through the compares, the choices and the select into
        # s_max had 14 of the 128-lane ULX3S build's 84 endpoints past 10 ns at 22de219
        # (seed 1, 10.82 ns). h1 is taken as y1 against the bounds, not after its
        # saturation (the saturation then a compare in one cycle was the 128-lane ULX3S
        # build's critical path at 005e676, seed 1: 11.31 ns): the state matters for the
        # last layer's ACT ops alone, whose h1 = clamp(y1, -127, 127): h1 is taken over
        # a value s when y1 > s (where s is 127 and y1 above it, h1 is 127 too: the new
        # maximum is the same whichever is taken; a stored maximum of NO_OTHER is past
        # the first row pair, which forces the takes, only with one class, and then
        # there is no second pair).
        # y1 > s for an 8-bit s (-128..127) by y1's low byte and its bounds (y1_hi:
        # y1 > 127, above every s; y1_lo: y1 < -127 for the last layer, not above any
        # s), not a compare of y1's whole width; and the stored maximum's compares made
        # for each bank's read data, the bank chosen after them: y1's wide compare after
        # the bank multiplexer into gt1 was the 128-lane ECP5 evaluator's critical path
        # at b48cbeb (seed 2, 9.26 ns, 5.68 of it routing). Each 8-bit compare is the
        # sign of a difference (_greater: a carry chain alone; Yosys maps ``a > b`` of
        # that width to a chain with LUT levels after it, and y1 through two chains and
        # four LUT levels into gt1 was the 128-lane ULX3S build's critical path at
        # 912efff, seed 1: 9.87 ns)
        y1_8 = y[1][:8].as_signed()

        def y1_above(s, name):
            return y1_hi | (~y1_lo & _greater(m, y1_8, s, name + sfx))

        if self.lean:  # (the iCE40's) the compares after the bank's choice: two, not four
            gt = [sig(1, f"gt{j}") for j in range(3)]  # h0 > max, h1 > max, h1 > h0
            smax = Mux(ub_d, rports[1].data, rports[0].data)[8:16].as_signed()
            m.d.sync += [
                gt[0].eq(_greater(m, hv[0], smax, f"h0_gt{sfx}")),
                gt[1].eq(y1_above(smax, "h1_gt")),
                gt[2].eq(y1_above(hv[0], "h1_gt_h0")),
            ]
        else:
            gt_b = []
            for b in range(2):
                smax_b = rports[b].data[8:16].as_signed()  # u_U's next from bank b
                gt_b.append(
                    [_greater(m, hv[0], smax_b, f"h0_gt{b}{sfx}"), y1_above(smax_b, f"h1_gt{b}")]
                )
            gt = [sig(1, f"gt{j}") for j in range(3)]  # h0 > max, h1 > max, h1 > h0
            m.d.sync += [
                gt[0].eq(Mux(ub_d, gt_b[1][0], gt_b[0][0])),
                gt[1].eq(Mux(ub_d, gt_b[1][1], gt_b[0][1])),
                gt[2].eq(y1_above(hv[0], "h1_gt_h0")),
            ]
        take0 = is_oth[0] & (first_t | gt[0])
        take1 = is_oth[1] & Mux(take0, gt[2], first_t | gt[1])
        nm = Mux(take1, hv[1], Mux(take0, hv[0], ymax))
        s_lab = sig(signed(8), "s_lab")
        s_max = sig(signed(8), "s_max")
        with m.If(wc == 2):
            m.d.sync += [s_lab.eq(nl), s_max.eq(nm)]
        new_state = Cat(s_lab, s_max)
        # the term in two registered steps (the state's difference and whether there is
        # another logit at wc 3, the term at wc 0 of the next window, written at wc 1):
        # the subtraction, the compare with the margin and the choice in one cycle had 63
        # of the 128-lane ULX3S build's 948 endpoints past 10 ns (23e1484, seed 2)
        diff = sig(signed(10), "diff")
        no_other = sig(1, "no_other")
        m.d.sync += [diff.eq(s_lab - s_max), no_other.eq(s_max == NO_OTHER)]
        term = Mux(no_other, rt.margin, Mux(diff > rt.margin, rt.margin, diff))
        term_r = sig(term_beat.term[g].shape(), "term_r")
        m.d.sync += term_r.eq(term)
        if p.wide:
            # wide builds: a second register, the one beside the shared FIFO, so that
            # the group's compare and choice end at a register of its own (into the
            # one beside the FIFO: 8 of the 128-lane ECP5 evaluator's 30 endpoints
            # past 8 ns at 7a63f84, seed 1, its critical path, 8.42 ns, 6.48 of it
            # routing). The terms are written a cycle later (Finalizer: t_pend)
            term_r2 = sig(term_beat.term[g].shape(), "term_r2")
            m.d.sync += term_r2.eq(term_r)
            term_r = term_r2
        m.d.comb += term_beat.term[g].eq(term_r)

        for b in range(2):
            wp = wports[b]
            with m.If(store_w):
                m.d.comb += [
                    wp.addr.eq(store_addr),
                    wp.data.eq(Mux(store_hi, h[1], h[0])),
                    wp.en.eq(b == 0),
                ]
            with m.Elif(state_w):
                m.d.comb += [
                    wp.addr.eq(state_waddr),
                    wp.data.eq(new_state),
                    wp.en.eq(bankU == b),
                ]
            with m.Elif(wr_d):
                m.d.comb += [
                    wp.addr.eq(wr_da),
                    wp.data.eq(upd_d),
                    wp.en.eq(wr_db == b),
                ]

        # hidden activations: this group's lane i of the op in U, h0 in wc 2 and h1 in
        # wc 3, from a register loaded with h0 and h1 a cycle after they are (in wc 1
        # and 2), so no choice by the window count lies between a register and the
        # loader's data registers of the group's lanes (the choice after h0 and h1:
        # 129 of those data registers past 10 ns in the 128-lane evaluator at 41cf5da),
        # nor the saturation's compares (loaded with the saturated values as h0 and h1
        # were, in wc 0 and 1, hv8 had 31 of the 128-lane ULX3S build's 948 endpoints
        # past 10 ns at 23e1484, seed 2)
        hv8 = sig(8, "hv8")
        with m.If(wc[0] ^ wc[1]):  # wc 1: h0, wc 2: h1 (and likewise past wc 3)
            m.d.sync += hv8.eq(Mux(wc[1], h[1], h[0])[:8])
        m.d.comb += self.aw_bytes[g].eq(hv8)
        # the group's enable (reset: no write after a RESET) and its lane's select (data).
        # The select is the decode of the U op's lane, which changes only at the window's
        # end (to the S op's): loaded then from the S op, held otherwise, it equals the
        # decode of the next cycle's U op (ctl.i_n) with no choice by the count before
        # the decode (the group's wc through that choice into aw_sel was the critical path
        # of the 128-lane ULX3S build at 44e9bb5, seed 1, 9.51 ns)
        aw = Signal(name=f"aw{sfx}")
        aw_sel = sig(len(lanes), "aw_sel")
        m.d.sync += aw.eq(ctl.aw_n)
        with m.If(wc == T - 1):
            m.d.sync += aw_sel.eq(Cat(opS.i == j for j in range(len(lanes))))
        for j, lane in enumerate(lanes):
            m.d.comb += aw_en[lane].eq(aw & aw_sel[j])
        m.d.comb += logit_beat.y[g].eq(hv8.as_signed())
