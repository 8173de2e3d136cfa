"""PopulationEvaluator: every member's perturbed forward pass of one ES step (spec 5, 6),
scored (spec 7.1) or as logits, on ``lanes`` antithetic pair-lanes.

docs/rtl.md has the block diagram, the schedule and the memory map; in one paragraph:
round after round of ``lanes`` pairs, the noise of the round is generated once
(:class:`NoiseFill`) into two noise banks; for every sample the lanes (:class:`PairLane`,
two multiplier-free MACs each) run *passes* over the layer inputs in their activation
memory (:class:`PassEngine`, fed by the :class:`Sequencer`), with the weights of two rows
broadcast to all lanes (:class:`WeightStreamer`, reading the weight memory in the spec
1.4 format) or, in a u-row pass, each lane's own noise digits; the
:class:`Finalizer` turns each pass's sums into activations (added perturbation
``sign * rshr((x.B).A^T, k)``, shift, saturation), u vectors, logits and score terms; the
:class:`ScoreAccumulator` sums the scores into the score memory; the
:class:`InputLoader` fills the input regions.

Quantized mode (``mode="quantized"``, spec 6.1): the round's ``E = PQUANT(A B^T, f)`` of
every lane is written into the noise banks once per round (:class:`EFill`), the lanes
accumulate ``x . (W + s E)`` (broadcast ``W``, their own ``E``) and there are no u-row
passes; docs/rtl.md, "Quantized mode".

The weight, sample, label, batch-index and score memories are outside (the accelerator
owns them: block RAM or SPRAM); the evaluator reads them through ports with
``mem_latency`` cycles of read latency.
"""

from __future__ import annotations

from amaranth import Array, C, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .e_fill import EFill
from .finalizer import Finalizer, logits_layout, record_layout
from .lane import PairLane
from .loader import InputLoader
from .noise_fill import NoiseFill
from .params import EvaluatorParams, rank_shift
from .pass_engine import ACTIVITY_LAYOUT, REPLICA_ATTR, PassEngine
from .scores import ScoreAccumulator
from .sequencer import ERROR_FLAGS, Sequencer
from .skid import SkidBuffer
from .sliced import SlicedRAM, slice_granules_for, slice_spans
from .weights import WeightStreamer, pass_layout

#: noise bank slices whose read address registers one copy of the read's source
#: registers feeds (low-rank mode; PopulationEvaluator)
NOISE_READ_FANOUT = 8

__all__ = ["PopulationEvaluator"]


def out_logits_layout(p: EvaluatorParams) -> data.StructLayout:
    """A beat of the ``logits`` output: row ``row`` of member sign ``s``, sample index
    ``sample`` (mod 4) of the round starting at ``first_pair``: group ``g``'s logit
    ``y[g]`` belongs to member ``2 * (first_pair + g * group + i) + s`` if ``mask[g]``."""
    inner = logits_layout(p)
    return data.StructLayout(
        {
            "first_pair": 11,
            "i": inner["i"].shape,
            "s": 1,
            "row": p.width_bits,
            "y": data.ArrayLayout(8, p.finalizers),
            "mask": p.finalizers,
        }
    )


class PopulationEvaluator(wiring.Component):
    """Evaluates every member of a population (module docstring).

    Parameters
    ----------
    lanes, max_layers, max_width, rank, mode, digits, group, noise_depth, max_batch,
    mem_latency, noise_buffers, e_generators, noise_write_lanes, noise_generators
        Elaboration parameters: :class:`~pentegg.rtl.evaluator.params.EvaluatorParams`
        (ranges there; a bad value raises ``ValueError`` naming it).

    Interface attributes
    --------------------
    start : In(1)
        Strobe: evaluate the population of ES step ``step`` on ``batch`` samples. Every
        run-time input must stay stable until ``busy`` falls.
    n_layers : In(4), widths : In(ArrayLayout(width_bits + 1, max_layers + 1))
        The network: ``n_layers`` weight layers, ``widths[0..n_layers]`` = ``n_0..n_L``.
    act_shifts : In(ArrayLayout(5, max_layers)), sigma_shift : In(4), margin : In(8)
    population : In(13), batch : In(16), seed : In(32), step : In(16)
    shared : In(1)
        1: every member sees the samples ``batch_index[0..batch-1]`` of the sample memory
        and is scored; 0: per-member inputs on ``inp``, logits on ``logits``.
    keep : In(1)
        Taken with ``start`` (it need not stay stable): ``n_layers``, ``widths``,
        ``population``, ``seed`` and ``sigma_shift`` are those of the evaluation before
        (no reset since), so the noise the fill made last for round 0 of ``step`` (that
        evaluation's own, or the one ``pre`` made ahead) is still right: the first
        round uses it and makes none.
        0: every evaluation makes all its noise (the noise of spec 2 is a function of
        those inputs, ``step`` and the pair: nothing else decides whether it is reused).
    pre : In(1), pre_step : In(16)
        With ``noise_buffers=2``, during an evaluation: once the last round's noise is
        made, the fill makes round 0's of ES step ``pre_step`` into the free buffer,
        while the evaluation runs, for the next evaluation (started with ``keep`` and
        ``step = pre_step``). ``busy`` stays high until that fill has ended.
    busy : Out(1)
    error : Out(9)
        Flags of ``ERROR_FLAGS`` (sequencer.py); set two cycles after ``start`` instead
        of running (``busy`` is high from the cycle after ``start`` and falls a cycle
        after them), or (``label``) during the run.
    w_addr, w_en, w_data
        Weight memory (16-bit words, spec 1.4).
    b_addr, b_en, b_data / s_addr, s_en, s_data / l_addr, l_en, l_data
        Batch-index memory, sample memory (bytes), label memory.
    b_base : In(16)
        The batch's first word in the batch-index memory: sample ``b`` of the batch is
        ``batch[b_base + b]`` (0 unless driven; stable while the evaluator runs).
    sc_raddr, sc_ren, sc_rdata, sc_waddr, sc_wdata, sc_wen
        Score memory (one word per member; written by every evaluation in shared mode).
    inp : In(stream.Signature(8 * lanes))
        Per-member inputs (InputLoader).
    logits : Out(stream.Signature(out_logits_layout))
    activity : Out(ACTIVITY_LAYOUT)
        What the lanes do this cycle (a MAC beat, a flush, or why they wait), for
        performance counters.
    """

    def __init__(
        self,
        *,
        lanes: int = 4,
        max_layers: int = 2,
        max_width: int = 64,
        rank: int = 4,
        mode: str = "lowrank",
        digits: str = "binomial",
        group: int | None = None,
        noise_depth: int | None = None,
        max_batch: int = 1024,
        mem_latency: int = 2,
        noise_buffers: int = 1,
        e_generators: int = 1,
        noise_write_lanes: int = 1,
        noise_generators: int = 1,
    ):
        self.params = p = EvaluatorParams(
            lanes=lanes,
            max_layers=max_layers,
            max_width=max_width,
            rank=rank,
            mode=mode,
            digits=digits,
            group=group,
            noise_depth=noise_depth,
            max_batch=max_batch,
            mem_latency=mem_latency,
            noise_buffers=noise_buffers,
            e_generators=e_generators,
            noise_write_lanes=noise_write_lanes,
            noise_generators=noise_generators,
        ).check()
        self.noise_bits = ceil_log2(p.noise_bank_depth)
        # worst case of the weight memory: every layer max_width x (max_width + 1)
        words = max_layers * -(-max_width * (max_width + 1) // 5)
        #: the weight words of the largest network (every layer packed from a word
        #: boundary, spec 1.4); the memory's address has ``waddr_bits``
        self.weight_depth = words
        self.waddr_bits = max(1, ceil_log2(words))
        ml, wb = max_layers, p.width_bits
        super().__init__(
            {
                "start": In(1),
                "n_layers": In(4),
                "widths": In(data.ArrayLayout(wb + 1, ml + 1)),
                "act_shifts": In(data.ArrayLayout(5, ml)),
                "sigma_shift": In(4),
                "margin": In(8),
                "population": In(13),
                "batch": In(16),
                "seed": In(32),
                "step": In(16),
                "shared": In(1),
                "keep": In(1),
                "pre": In(1),
                "pre_step": In(16),
                "busy": Out(1),
                "error": Out(len(ERROR_FLAGS)),
                "w_addr": Out(self.waddr_bits),
                "w_en": Out(1),
                "w_data": In(16),
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
                "sc_raddr": Out(12),
                "sc_ren": Out(1),
                "sc_rdata": In(p.score_bits),
                "sc_waddr": Out(12),
                "sc_wdata": Out(p.score_bits),
                "sc_wen": Out(1),
                "inp": In(stream.Signature(8 * lanes)),
                "logits": Out(stream.Signature(out_logits_layout(p))),
                "activity": Out(ACTIVITY_LAYOUT),
            }
        )

    def elaborate(self, platform):
        m = Module()
        p = self.params
        L = p.lanes
        nbits = self.noise_bits

        rec_layout = record_layout(p, nbits)
        quant = p.mode == "quantized"
        # the noise banks' slices (below), and the copies of their read address (low
        # rank: from copies of the finalizer's and the pass engine's registers, one per
        # NOISE_READ_FANOUT slices)
        G = p.noise_group
        NG = p.noise_gens
        groups = p.noise_bank_lanes // G
        depth = p.noise_buffers << nbits
        granule = 3 if quant else 6 * G
        per_slice = slice_granules_for(platform, depth, granule)
        n_slices = len(slice_spans(6 * p.noise_bank_lanes, granule, per_slice))
        r_copies = 1 if quant else -(-n_slices // NOISE_READ_FANOUT)
        m.submodules.fin = fin = Finalizer(p, nbits, n_copies=r_copies)
        # the lane controls: a copy per finalizer group, then (more than one group) a
        # register of each lane's own
        per_lane = p.finalizers > 1
        m.submodules.engine = eng = PassEngine(
            p, rec_layout, nbits, copies=p.finalizers, per_lane=per_lane, nz_copies=r_copies
        )
        m.submodules.weights = ws = WeightStreamer(
            addr_bits=self.waddr_bits, n_bits=p.width_bits, mem_latency=p.mem_latency
        )
        m.submodules.seq = seq = Sequencer(
            p, eng.cmd_layout, pass_layout(self.waddr_bits, p.width_bits), nbits, self.waddr_bits
        )
        if quant:
            m.submodules.fill = fill = EFill(
                lanes=L,
                rank=p.rank,
                digits=p.digits,
                max_layers=p.max_layers,
                max_width=p.max_width,
                width_bits=p.width_bits + 1,
                addr_bits=nbits,
                generators=p.e_generators,
            )
        else:
            m.submodules.fill = fill = NoiseFill(
                lanes=L,
                rank=p.rank,
                digits=p.digits,
                max_layers=p.max_layers,
                width_bits=p.width_bits + 1,
                addr_bits=nbits,
                generators=NG,
            )
        m.submodules.loader = ld = InputLoader(p)
        m.submodules.scores = sc = ScoreAccumulator(p)
        lanes = []
        self.dbg = {"fin": fin, "eng": eng, "lanes": lanes, "seq": seq, "fill": fill, "ld": ld}
        for j in range(L):
            lane = PairLane(p.acc_bits, quantized=quant)
            m.submodules[f"lane{j}"] = lane
            lanes.append(lane)

        # ---- run-time inputs
        for name in (
            "start",
            "n_layers",
            "widths",
            "population",
            "batch",
            "shared",
            "sigma_shift",
            "act_shifts",
            "margin",
            "step",
            "keep",
            "pre",
            "pre_step",
        ):
            m.d.comb += getattr(seq, name).eq(getattr(self, name))
        m.d.comb += [self.busy.eq(seq.busy), self.error.eq(seq.error)]

        # ---- memories: activations (a byte per lane), noise (two digits per lane, x2),
        # each in slices with their own read-address registers (SlicedRAM: data three
        # cycles after the address, the third register the block RAMs' output register
        # on the ECP5; the lanes' input registers, below, are a fourth)
        # (no_rw_check: a MAC beat never reads a word written in its cycle, nor does a
        # u-row beat or the finalizer read a noise word being written: the passes wait for
        # the blocks and inputs they read, the fill for the round's reads. The tests'
        # collision monitor checks the ``used`` conditions of ``rw_watch``, a cycle late
        # like the reads.)
        act = SlicedRAM(
            width=8 * L,
            depth=p.act_depth,
            granule=8,
            per_slice=slice_granules_for(platform, p.act_depth, 8),
            # the writes too, a cycle late: the choice between the finalizer's and the
            # loader's address and enables reached every block RAM from one LUT, like
            # the noise banks' read address (a pass's first read reaches the block RAMs
            # two cycles or more after its block or input region is marked written: it
            # is taken a cycle after the mark at the earliest, its address registered)
            writes="registered",
            name="act",
            w_copies=p.act_write_copies,
        )
        m.submodules.act = act
        act_used = Signal()
        m.d.sync += act_used.eq(eng.act_en)
        # (a DP16KD form is not simulated: nothing to watch)
        self.rw_watch = [] if act.uses_dp16kd(platform) else act.watches(act_used)
        m.d.comb += act.r_addr.eq(eng.act_addr)
        x_reg = act.r_data  # data three cycles after the address
        # the finalizer writes in its window's aw_cycles, the loader in the others (both
        # from registers); the choice per copy of the finalizer's address and write flag
        # (act_write_copies: one choice into every slice's address copy took a 7.64 ns
        # route, the 128-lane ULX3S build's critical path at 0fd11e5, seed 2), the
        # loader's one address register into each choice and, in wide builds, its write
        # flag's copy for that choice (InputLoader.aw_en_c)
        K = p.act_write_copies
        w_sel = [fin.aw_any[c] for c in range(K)]
        m.d.comb += act.w_data.eq(ld.aw_data)  # the finalizer's data too (InputLoader)
        for c in range(K):
            w_addr = Mux(w_sel[c], fin.aw_addr[c], ld.aw_addr)
            m.d.comb += (act.w_addr[c] if K > 1 else act.w_addr).eq(w_addr)
        for j in range(L):
            c = j * K // L
            ld_en = ld.aw_en_c[c] if p.wide else ld.aw_en
            m.d.comb += act.w_en[j].eq(Mux(w_sel[c], fin.aw_en[j], ld_en))
        slot = data.ArrayLayout(data.ArrayLayout(3, 2), L)
        # low-rank: lanes w .. w + G - 1 share a write enable (``noise_write_lanes``); the
        # bank's word is padded to whole groups, the lanes read their own 6 bits of it
        fill_addr = fill.w_addr[:nbits]
        if p.noise_buffers == 2:
            fill_addr = Cat(fill_addr, seq.fill_buf)
        # (with several generators their lockstep writes carry whole groups: no staging)
        staged = G > 1 and NG == 1 and not quant
        if staged:
            # the fill's write, registered before the staging memory: its address is the
            # staging memory's read address, its lane the write enables' decode (the fill's
            # state through its write multiplexer into the staging memory's read and
            # write enables was the 128-lane ULX3S build's critical path at 60 MHz in
            # both builds at f499881 and e0c074c: 16.5 ns, 14.1 of it routing)
            f_en = Signal(name="fill_we")
            f_addr = Signal.like(fill_addr, name="fill_wa", reset_less=True)
            f_data = [Signal(6, name=f"fill_wd{b}", reset_less=True) for b in range(2)]
            # the group and the position in it of the lane being written (ROMs, no divide)
            w_grp = Signal(range(max(groups, 2)), reset_less=True)
            w_pos = Signal(range(G), reset_less=True)
            m.d.sync += [
                f_en.eq(fill.w_en),
                f_addr.eq(fill_addr),
                *(f_data[b].eq(fill.w_data[0][b].as_value()) for b in range(2)),
                w_grp.eq(Array(C(j // G, w_grp.shape()) for j in range(L))[fill.w_lane]),
                w_pos.eq(Array(C(j % G, w_pos.shape()) for j in range(L))[fill.w_lane]),
            ]
        n_data = []
        w_late = []  # a bank write in flight (the writes' registers)
        for b in range(2):
            bank = SlicedRAM(
                width=6 * G * groups,
                unit=1 if quant else max(NG // G, 1),
                depth=depth,
                granule=granule,
                per_slice=per_slice,
                # the fill's writes reach the bank a cycle late, from registers (the
                # fill's state through the lane decode into the write enables of the
                # bank's block RAMs, spread over the lanes, was the 128-lane ECP5
                # evaluator's critical path at 77dbac2: 17.58 ns, 15.62 of it routing);
                # the sequencer counts the fill busy until its last write has landed.
                # Low-rank: one slot (or one group's word) into one lane's (group's)
                # field, through a tree of registers since the 128-lane accelerator at
                # e0e1384 (seed 2): the word of a staged write, the staging memory's
                # read at the write address, spread from one place to the write data of
                # every slice (noise0.w_addr -> noise_stage1 -> noise1_wd17, 17.48 ns,
                # 15.77 of it routing), as the fill's write enable did in the 128-lane
                # evaluator (its critical path at e0e1384: 14.83 ns, 13.59 routing)
                writes="registered" if quant else "broadcast",
                name=f"noise{b}",
                r_copies=r_copies,
            )
            m.submodules[f"noise{b}"] = bank
            # the lanes' reads win: a u-row pass's beats (low-rank), every beat (quantized:
            # the finalizer does not use the noise there)
            if quant:
                rd_addrs = [eng.nz_addr[:nbits]]
                used = eng.activity.mac | eng.activity.flush
            else:
                lanes_use = eng.nz_en & (eng.nz_bank == b)
                used = lanes_use | fin.n_en
                rd_addrs = []
                for c in range(r_copies):
                    rd = eng.nz_reads[c]
                    use_c = rd.en & (rd.bank == b)
                    rd_addrs.append(Mux(use_c, rd.addr, fin.n_addrs[c])[:nbits])
            used_d = Signal(name=f"noise_used{b}")
            m.d.sync += used_d.eq(used)
            if not bank.uses_dp16kd(platform):
                self.rw_watch += bank.watches(used_d)
            # "a write in flight" (a slice's write enable) from a register of its own,
            # loaded with the condition of the enables: the OR of the 128-lane build's
            # enables into the sequencer was the start of the 128-lane ECP5 evaluator's
            # critical path at d89c850 (15.40 ns, 13.06 of it routing)
            # (a flag per cycle of the write registers' latency)
            entering = bank.w_en.any() if quant else (f_en if staged else fill.w_en)
            for c in range(bank.write_latency):
                late = Signal(name=f"noise_late{b}_{c}")
                m.d.sync += late.eq(entering)
                w_late.append(late)
                entering = late
            self.dbg[f"noise_late{b}"] = late
            self.dbg[f"noise_we{b}"] = bank.landing
            self.dbg[f"noise{b}"] = bank
            wr_addr = f_addr if staged else fill_addr
            if p.noise_buffers == 2:
                rd_addrs = [Cat(a, seq.nbuf) for a in rd_addrs]
            if r_copies > 1:
                m.d.comb += [bank.r_addr[c].eq(a) for c, a in enumerate(rd_addrs)]
            else:
                m.d.comb += bank.r_addr.eq(rd_addrs[0])
            m.d.comb += bank.w_addr.eq(wr_addr)
            if quant:  # one digit of each of lanes w_lane .. w_lane + E - 1: E[i, k]
                E = fill.generators
                wr = fill.w_en & (fill.w_bank == b)
                m.d.comb += [
                    bank.w_data.eq(Cat(*(fill.w_e[j % E] for j in range(L) for _ in range(2)))),
                    bank.w_en.eq(
                        Cat(
                            wr
                            & (fill.w_lane == j - j % E)
                            & fill.w_valid[j % E]
                            & (fill.w_digit == d)
                            for j in range(L)
                            for d in range(2)
                        )
                    ),
                ]
            elif NG > 1:  # the slots of lanes w_lane .. w_lane + NG - 1: a unit
                m.d.comb += [
                    bank.w_unit.eq(Cat(fill.w_data[g][b].as_value() for g in range(NG))),
                    bank.w_index.eq(fill.w_group),
                    bank.w_valid.eq(fill.w_en),
                ]
            elif G == 1:
                m.d.comb += [
                    bank.w_unit.eq(fill.w_data[0][b].as_value()),
                    bank.w_index.eq(fill.w_lane),
                    bank.w_valid.eq(fill.w_en),
                ]
            else:
                # Every lane fills the same slots in the same order, lane after lane. The
                # slots of a group's earlier lanes wait in a staging memory (read
                # asynchronously at the address being written), and every write carries
                # them with the new slot: the group's word is right after each write.
                # Fields of the group's later lanes hold stale slots until those lanes
                # write (slots of absent lanes are never used).
                stage = memory.Memory(shape=6 * (G - 1), depth=p.noise_bank_depth, init=[])
                m.submodules[f"noise_stage{b}"] = stage
                s_rp = stage.read_port(domain="comb")
                s_wp = stage.write_port(granularity=6)
                new = f_data[b]
                m.d.comb += [
                    s_rp.addr.eq(f_addr[:nbits]),
                    s_wp.addr.eq(f_addr[:nbits]),
                    s_wp.data.eq(Cat(*([new] * (G - 1)))),
                    s_wp.en.eq(Cat(f_en & (w_pos == q) for q in range(G - 1))),
                ]
                fields = [Mux(w_pos == q, new, s_rp.data[6 * q : 6 * q + 6]) for q in range(G - 1)]
                word = Cat(*fields, new)
                m.d.comb += [
                    bank.w_unit.eq(word),
                    bank.w_index.eq(w_grp),
                    bank.w_valid.eq(f_en),
                ]
            # the lanes' and the finalizer's noise data: the bank's output registers
            n_data.append(data.View(slot, bank.r_data[: 6 * L]))
            m.d.comb += fin.n_data[b].eq(bank.r_data[: 6 * L])

        # ---- lanes
        # each finalizer group's lanes take their own copy of the engine's controls (the
        # 128-lane ULX3S build at 0b480c3 missed timing on one flush net reaching every
        # lane's accumulators: 23.18 ns, 21.76 of it routing)
        # and their own input registers: the activation memory's byte and the noise
        # digits of the bank the lane's copy names (pass_engine.LATENCY), so that the
        # route from a block RAM ends at a register of the lane, not at its term logic
        for j, lane in enumerate(lanes):
            ctrl = eng.ctrl[j if per_lane else j // p.group_lanes]
            nd_bank = eng.nd_bank[min(j // p.group_lanes, len(eng.nd_bank) - 1)]
            x_in = Signal(signed(8), name=f"lane{j}_x", reset_less=True)
            nd_in = Signal(6, name=f"lane{j}_nd", reset_less=True)
            m.d.sync += [
                x_in.eq(x_reg[8 * j : 8 * j + 8]),
                nd_in.eq(Mux(nd_bank, n_data[1][j].as_value(), n_data[0][j].as_value())),
            ]
            m.d.comb += [
                lane.x.eq(x_in),
                lane.nd.eq(nd_in),
                lane.w.eq(ctrl.w),
                lane.src.eq(ctrl.src),
                lane.en.eq(ctrl.en),
                lane.flush.eq(ctrl.flush),
                fin.caps[j].eq(lane.cap),
            ]
            if quant:
                m.d.comb += [lane.qe.eq(ctrl.qe), lane.s.eq(ctrl.s)]

        # ---- weights
        wiring.connect(m, seq.wcmd, ws.cmd)
        m.d.comb += seq.wcmd_room_next.eq(ws.cmd_ready_next)
        # through a skid buffer: the engine's beat decision and the streamer's word
        # FIFOs and cursors were one combinational loop (skid.py)
        m.submodules.wskid = wskid = SkidBuffer(ws.o.payload.shape())
        wiring.connect(m, ws.o, wskid.i)
        wiring.connect(m, wskid.o, eng.wbeat)
        m.d.comb += [
            self.w_addr.eq(ws.mem_addr),
            self.w_en.eq(ws.mem_en),
            ws.mem_data.eq(self.w_data),
        ]

        # ---- sequencer, engine, finalizer
        # passes queued ahead of the lanes, so that the weight streamer (told of a layer
        # pass when the sequencer emits it) fetches its words before the pass starts
        # The sequencer's ready is a flip-flop: room for this cycle's push, from the level
        # of the cycle before, as the weight streamer's command queues give theirs. A
        # push is registered (``cmd_stage``) and written into the queue a cycle later,
        # so that the queue's storage takes its data from flip-flops, not from the
        # sequencer's combinational payload (its adders and multiplexers into the
        # storage had 16 of the 128-lane ECP5 evaluator's endpoints past 8 ns at
        # b48cbeb, 9.02 ns, and 19 of the three 128-lane ULX3S builds' at 19a8e90). So
        # the room is a level of at most depth - 3 a cycle before (a push since and one
        # in the stage); depth 6, the room of the depth-5 queue without the stage.
        m.submodules.cmdq = cmdq = fifo.SyncFIFOBuffered(width=eng.cmd_layout.size, depth=6)
        # The room in two copies: the push's, beside the queue, and the sequencer's, the
        # operand of its emit decision (``ok``) and through it of the enables of its
        # cursors (the decision's enables, u_addr's among them, had 9 of the 128-lane
        # ULX3S build's endpoints past 8 ns at 635abd7, seed 1, 8.46 ns)
        cmd_room = Signal(init=1)
        seq_room = Signal(init=1, attrs={REPLICA_ATTR: 1})
        cmd_stage = Signal(eng.cmd_layout, reset_less=True)
        cmd_staged = Signal()
        push = seq.cmd.valid & cmd_room
        room = cmdq.level <= cmdq.depth - 3
        # The stage loads the payload in every cycle, without an enable: the queue
        # writes it only in the cycle after a push (``cmd_staged``). With the push as
        # its enable, the sequencer's phase and the readies reached its ~100
        # flip-flops' enables across the die (the 128-lane ECP5 evaluator's critical
        # path at 9fe00a1, seed 3: 9.58 ns, 8.34 of it routing)
        m.d.sync += [cmd_room.eq(room), seq_room.eq(room), cmd_staged.eq(push)]
        m.d.sync += cmd_stage.eq(seq.cmd.payload)
        m.d.comb += [
            cmdq.w_data.eq(cmd_stage),
            cmdq.w_en.eq(cmd_staged),
            seq.cmd.ready.eq(seq_room),
            seq.cmd_room_next.eq(room),
        ]
        m.d.comb += [
            eng.cmd.valid.eq(cmdq.r_rdy),
            eng.cmd.payload.eq(cmdq.r_data),
            cmdq.r_en.eq(eng.cmd_pop if p.wide else eng.cmd.ready),
        ]
        wiring.connect(m, eng.rec, fin.rec)
        # everything after the sequencer has drained: registered, so that the finalizer's
        # stages and the units' state reach the sequencer's phase (and the noise fill's
        # start behind it) from a flip-flop (the 128-lane ECP5 evaluator's critical path
        # at baf0473 ran from the op in S through the finalizer's idle and the sequencer
        # into the noise fill's counters, 15.23 ns, 12.96 of it routing). The sequencer
        # waits on it only in a phase entered after its last push; a cycle that pushes
        # is not drained, nor one with a command in the stage or anywhere in the queue
        # (its level, not its output's valid, which comes two cycles after the write),
        # nor one with a beat in the finalizer's output FIFOs (`holding`, likewise):
        # the registered value, the condition a cycle ago, never calls a command done
        # before the engine has taken it, nor a score before the score unit has it. No
        # cycle of the emit phase is drained (`emitting`, the sequencer's emit
        # flip-flop `in_emit`, not its command's valid: that is the WeightStreamer's
        # ready, and from the phase through it into `drained` was the 128-lane ECP5
        # evaluator's critical path at 06a19d8, seed 1, 8.91 ns, 7.2 of it routing, 5
        # levels)
        drained = Signal()
        self.dbg.update(drained=drained, sc=sc)
        m.d.sync += drained.eq(
            ~seq.emitting
            & ~cmd_staged
            & ~eng.busy
            & (cmdq.r_level == 0)
            & fin.idle
            & ~sc.busy
            & ~fin.holding
        )
        # the fill busy as the sequencer sees it: a register of the fill's busy flag, the
        # bank writes in flight and a start in this cycle, so that the sequencer waits a
        # cycle longer at a fill's end and sees it busy from the cycle after its start
        # (the fill busy flag through the OR into the sequencer's emit state was the
        # 128-lane ECP5 evaluator's critical path at 44e9bb5: 9.83 ns, 8.11 of it routing)
        fill_busy = Signal()
        # the sequencer's start reaches the fill a cycle later, from a flip-flop: the
        # start is `drained` through the sequencer's phase, and on into the fill's
        # counters it was the 128-lane ECP5 evaluator's critical path at 3d72357 (seed 3,
        # 8.36 ns, 4.78 of it the net out of `drained`). Pending, it counts as busy
        fill_go = Signal()
        m.d.sync += fill_go.eq(seq.fill_start)
        m.d.sync += fill_busy.eq(
            fill.busy | Cat(*w_late).any() | (f_en if staged else 0) | seq.fill_start | fill_go
        )
        m.d.comb += [
            fin.clear.eq(seq.load_start),
            self.activity.eq(eng.activity),
            eng.consumed.eq(fin.consumed),
            eng.blocks_done.eq(fin.blocks_done),
            eng.fin_idle.eq(fin.idle),
            eng.loaded.eq(ld.loaded),
            ld.release.eq(eng.release),
            *(
                [eng.loaded_set.eq(ld.loaded_set), eng.loaded_clear.eq(seq.load_start)]
                if p.wide
                else []
            ),
            seq.drained.eq(drained),
            seq.fill_busy.eq(fill_busy),
            seq.bad_label.eq(ld.bad_label),
        ]
        for l in range(p.max_layers):
            m.d.comb += fin.shifts[l].eq(self.act_shifts[l])
        m.d.comb += [
            fin.pert_shift.eq(rank_shift(p.rank) + self.sigma_shift),
            fin.margin.eq(self.margin),
            fin.labels.eq(ld.labels),
            fin.emit_logits.eq(~self.shared),
        ]

        # ---- noise fill
        m.d.comb += [
            fill.start.eq(fill_go),
            fill.seed.eq(self.seed),
            # (the choice by a flag of the sequencer's beside the keyer, not a register
            # of the step by the sequencer: that copy's route to the keyer's key was
            # 10.1 ns in the 128-lane evaluator at 164a886, seed 3)
            fill.step.eq(Mux(seq.fill_pre, self.pre_step, self.step)),
            fill.first_pair.eq(seq.fill_pair),
            fill.lanes_active.eq(seq.fill_active),
            fill.n_layers.eq(self.n_layers),
        ]
        if quant:
            m.d.comb += fill.sigma_shift.eq(self.sigma_shift)
        for i in range(p.max_layers + 1):
            m.d.comb += fill.widths[i].eq(self.widths[i])

        # ---- loader
        m.d.comb += [
            ld.start.eq(seq.load_start),
            ld.shared.eq(self.shared),
            ld.n0.eq(self.widths[0]),
            ld.batch.eq(self.batch),
            ld.rounds.eq(seq.rounds),
            ld.label_max.eq(self.widths[self.n_layers]),
            self.b_addr.eq(ld.b_addr),
            self.b_en.eq(ld.b_en),
            ld.b_data.eq(self.b_data),
            ld.b_base.eq(self.b_base),
            self.s_addr.eq(ld.s_addr),
            self.s_en.eq(ld.s_en),
            ld.s_data.eq(self.s_data),
            self.l_addr.eq(ld.l_addr),
            self.l_en.eq(ld.l_en),
            ld.l_data.eq(self.l_data),
        ]
        wiring.connect(m, wiring.flipped(self.inp), ld.inp)
        m.d.comb += ld.fin_bytes.eq(fin.aw_bytes)

        # ---- scores and logits
        wiring.connect(m, fin.terms, sc.terms)
        m.d.comb += [
            sc.first_pair.eq(seq.first_pair),
            sc.lanes_active.eq(seq.lanes_active),
            self.sc_raddr.eq(sc.r_addr),
            self.sc_ren.eq(sc.r_en),
            sc.r_data.eq(self.sc_rdata),
            self.sc_waddr.eq(sc.w_addr),
            self.sc_wdata.eq(sc.w_data),
            self.sc_wen.eq(sc.w_en),
        ]
        lb = fin.logits.payload
        ob = self.logits.payload
        m.d.comb += [
            self.logits.valid.eq(fin.logits.valid),
            fin.logits.ready.eq(self.logits.ready),
            ob.first_pair.eq(seq.first_pair),
            ob.i.eq(lb.i),
            ob.s.eq(lb.s),
            ob.row.eq(lb.row),
        ]
        for g in range(p.finalizers):
            m.d.comb += [
                ob.y[g].eq(lb.y[g]),
                ob.mask[g].eq((lb.i + g * p.group_lanes) < seq.lanes_active),
            ]
        return m
