"""Accelerator: the whole Pentary-EGGROLL trainer behind one command/response stream.

Blocks (docs/rtl.md has the diagram, the schedule and the maps):

* :class:`~pentegg.rtl.control.command.CommandDecoder` and
  :class:`~pentegg.rtl.control.registers.RegisterFile`: the host's word-level commands;
* :class:`~pentegg.rtl.control.controller.Controller`: spec 10.2's schedule;
* :class:`~pentegg.rtl.evaluator.evaluator.PopulationEvaluator`: every member's forward
  pass and score (spec 5, 6, 7.1);
* :class:`~pentegg.rtl.update.shaper.Shaper`: ``g`` and ``theta`` (spec 7.2, 8.2);
* :class:`~pentegg.rtl.update.votes.VoteAccumulator` and
  :class:`~pentegg.rtl.update.apply.WeightUpdater`: ``Z`` per layer and the update (8);
* :class:`~pentegg.rtl.control.init.InitWriter`: the initial state (10.1);
* :class:`~pentegg.rtl.control.members.MemberSizes`,
  :class:`~pentegg.rtl.control.members.MemberReader` and
  :class:`~pentegg.rtl.control.members.LogitWriter`: the per-member path;
* memories: weights (spec 1.4 words), latent ``V``, samples (bytes), labels, batch
  indices, scores, ``g``, per-member inputs (bytes), logits (bytes). Each has one read
  and one write port, shared by phase (the controller's ``phase``; the host's accesses
  when idle).

Reset: ``reset`` (the Device's RESET and the board's power-on reset) reaches each block
through a flip-flop of its own, a cycle later (rtl/reset.py; docs/rtl.md, "RESET's
reach"); the top's own registers are reset-less (each is written before it is read). The
domain's reset, where there is one (simulation), also resets the blocks.

Host memory selects (``WMEM``/``RMEM`` ``sel``): :data:`MEMORIES`; the packed selects of
:data:`PACKED_MEMORIES` carry several elements of a memory a word (the command decoder
makes an element access of each): the byte memories written four bytes a word, the
weights, the latent state and the logits read two words or four values a word.

Per-member inputs (RL, ``shared = 0``): the host writes member ``m``'s input ``k`` of
sample ``b`` at ``(m * batch + b) * n_0 + k`` of ``member_x``, runs ``EVAL`` and reads
logit ``o`` at ``(m * batch + b) * n_L + o`` of ``logits``; then it writes the members'
returns into the score memory and runs ``UPDATE``. A per-member run that does not fit
these memories sets the controller's ``members`` flag instead of running.
"""

from __future__ import annotations

from typing import NamedTuple

from amaranth import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .bram import NO_RW_CHECK, UP5K_SPRAMS, RegisteredRAM, RWWatch, SinglePortRAM
from .control.command import CommandDecoder
from .control.controller import Controller
from .control.init import InitWriter
from .control.members import LogitWriter, MemberReader, MemberSizes
from .control.registers import RegisterFile
from .evaluator.evaluator import PopulationEvaluator
from .evaluator.pass_engine import COPY_LANES
from .link.pipe import StreamRegister
from .params import check_int
from .reset import add_with_reset_leaves
from .update.apply import WeightUpdater
from .update.shaper import Shaper
from .update.votes import VoteAccumulator, lanes_max

__all__ = ["MEMORIES", "PACKED_MEMORIES", "Accelerator"]


class _WritePort(NamedTuple):
    """A write port's signals, under the names of an Amaranth memory write port."""

    addr: Signal
    data: Signal
    en: Signal


class _ReadPort(NamedTuple):
    """A read port's address, under the name of an Amaranth memory read port's."""

    addr: Signal


#: Host memory selects.
MEMORIES = {
    "weights": 0,
    "latent": 1,
    "samples": 2,
    "labels": 3,
    "batch": 4,
    "scores": 5,
    "g": 6,
    "member_x": 7,
    "logits": 8,
    # several elements a word (docs/protocol.md, "Packed words"): write-only, four bytes
    # a word; read-only, two weight words or four latent values or logits a word
    "samples_packed": 9,
    "member_x_packed": 10,
    "weights_packed": 11,
    "latent_packed": 12,
    "logits_packed": 13,
}

#: The packed selects: name -> (the memory they reach, element bits, host access). A
#: build has one where its memory holds a whole word of elements.
PACKED_MEMORIES = {
    "samples_packed": ("samples", 8, "w"),
    "member_x_packed": ("member_x", 8, "w"),
    "weights_packed": ("weights", 16, "r"),
    "latent_packed": ("latent", 8, "r"),
    "logits_packed": ("logits", 8, "r"),
}


class Accelerator(wiring.Component):
    """The accelerator top (module docstring).

    Parameters
    ----------
    lanes, max_layers, max_width, rank, mode, digits, group, noise_depth, max_batch,
    mem_latency, noise_buffers, e_generators, noise_write_lanes, noise_generators
        The PopulationEvaluator's (rtl/evaluator/params.py).
    max_population : int
        Even, 2..4096: sizes the score, g and Z memories and their widths.
    update : str
        ``"latent"`` (default) or ``"pentary"``.
    latent_bits : int
        3..8.
    update_lanes : int
        Z entries per cycle of the VoteAccumulator, 1..max(64, max_width + 1) (default:
        ``min(lanes, 64)``); ``max_width + 1`` takes a whole weight row per cycle.
    pivots : int
        Pairs per sweep of the Shaper's rank shaping, 1..16.
    sample_bytes, label_words, batch_words : int
        Depths of the sample, label and batch-index memories (16..2**20;
        ``sample_bytes`` a multiple of 4: whole words of ``samples_packed``).
    member_bytes, logit_bytes : int
        Depths of the per-member input and logit memories (16..2**20, ``member_bytes`` a
        multiple of 4; default 4096 and 1024): a per-member run holds ``population *
        batch * n_0`` and ``population * batch * n_L`` bytes.

    Interface attributes
    --------------------
    cmd : In(stream.Signature(32)), rsp : Out(stream.Signature(32))
        Commands and responses (rtl/control/command.py).
    reset : In(1)
        Resets the blocks' control state (the memories keep their contents) one cycle
        later, through a flip-flop per block (module docstring).
    busy : Out(1)
    error : Out(1)
        The ``status`` register's error bit (the last run's error flags, or a bad
        command), e.g. for an LED.
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
        max_population: int = 256,
        update: str = "latent",
        latent_bits: int = 8,
        update_lanes: int | None = None,
        pivots: int = 1,
        sample_bytes: int = 4096,
        label_words: int = 1024,
        batch_words: int = 1024,
        member_bytes: int = 4096,
        logit_bytes: int = 1024,
    ):
        # the parameters that are the top's own first, so that a bad one leaves no
        # evaluator behind (Amaranth warns of an elaboratable never used)
        if max_population % 2:
            raise ValueError(f"max_population={max_population!r} is not an even integer in 2..4096")
        self.max_population = check_int("max_population", max_population, 2, 4096)
        self.depths = {
            "samples": check_int("sample_bytes", sample_bytes, 16, 1 << 20),
            "labels": check_int("label_words", label_words, 16, 1 << 20),
            "batch": check_int("batch_words", batch_words, 16, 1 << 20),
            "member_x": check_int("member_bytes", member_bytes, 16, 1 << 20),
            "logits": check_int("logit_bytes", logit_bytes, 16, 1 << 20),
        }
        for name, param in (("samples", "sample_bytes"), ("member_x", "member_bytes")):
            if self.depths[name] % 4:  # a packed word's four bytes all in the memory
                raise ValueError(
                    f"{param}={self.depths[name]} is not a multiple of 4 in 16..{1 << 20}"
                )
        self.evaluator = PopulationEvaluator(
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
        )
        p = self.params = self.evaluator.params
        update_lanes = min(lanes, 64) if update_lanes is None else update_lanes
        self.update_lanes = check_int("update_lanes", update_lanes, 1, lanes_max(max_width))
        self.shaper = Shaper(
            max_population=max_population,
            score_bits=max(8, p.score_bits),
            mem_latency=mem_latency,
            pivots=pivots,
        )
        self.votes = VoteAccumulator(
            lanes=update_lanes,
            rank=rank,
            mode=mode,
            digits=digits,
            max_width=max_width,
            max_population=max_population,
        )
        # weight memory: the evaluator's worst case; latent: one word per weight, exactly
        # (a power of two would be up to twice the block RAM: 32 instead of 17 iCE40
        # blocks at max_width 64, max_layers 2)
        self.weight_words = 1 << self.evaluator.waddr_bits
        # the host's reach into it (WRITE_MEM/READ_MEM): the words of the largest network,
        # every layer packed from a word boundary (spec 1.4), as the compact device has it,
        # not the power of two above
        self.weight_depth = self.evaluator.weight_depth
        self.latent_words = max(2, max_layers * max_width * (max_width + 1))
        addr_bits = max(self.evaluator.waddr_bits, ceil_log2(self.latent_words))
        self.updater = WeightUpdater(
            update=update,
            latent_bits=latent_bits,
            lanes=update_lanes,
            max_width=max_width,
            z_bits=self.votes.z_bits,
            addr_bits=addr_bits,
        )
        self.init = InitWriter(
            max_layers=max_layers,
            width_bits=p.width_bits + 1,
            waddr_bits=addr_bits,
            vaddr_bits=addr_bits,
            update=update,
            latent_bits=latent_bits,
            digits=digits,
        )
        for block in (self.evaluator, self.shaper, self.votes, self.updater, self.init):
            block._MustUse__silence = True  # built here, elaborated by elaborate()
        self.update, self.latent_bits, self.addr_bits = update, latent_bits, addr_bits
        self.max_layers, self.max_width, self.lanes = max_layers, max_width, lanes
        super().__init__(
            {
                "cmd": In(stream.Signature(32)),
                "rsp": Out(stream.Signature(32)),
                "reset": In(1),
                "busy": Out(1),
                "error": Out(1),
            }
        )

    @property
    def host_memories(self) -> dict[str, tuple[int, int, str]]:
        """The memories the host reaches with ``WMEM``/``RMEM``: name -> (select, depth in
        words, access: ``"rw"``, ``"r"`` or ``"w"``). The link engine checks requests
        against it."""
        mems = {"weights": (MEMORIES["weights"], self.weight_depth, "rw")}
        if self.update == "latent":
            mems["latent"] = (MEMORIES["latent"], self.latent_words, "rw")
        for name in ("samples", "labels", "batch"):
            mems[name] = (MEMORIES[name], self.depths[name], "rw")
        mems["scores"] = (MEMORIES["scores"], self.max_population, "rw")
        mems["g"] = (MEMORIES["g"], max(2, self.max_population // 2), "r")
        mems["member_x"] = (MEMORIES["member_x"], self.depths["member_x"], "rw")
        mems["logits"] = (MEMORIES["logits"], self.depths["logits"], "r")
        for name, (target, bits, access) in PACKED_MEMORIES.items():
            # a word's elements all in the memory (a 1-wide, 1-layer build's weights are
            # one word: no weights_packed)
            if target in mems and mems[target][1] >= 32 // bits:
                mems[name] = (MEMORIES[name], mems[target][1] // (32 // bits), access)
        return mems

    def elaborate(self, platform):
        m = Module()
        self.rw_watch = []  # the memories' ports (NO_RW_CHECK), for the tests
        p = self.params
        lat = p.mem_latency
        dec = CommandDecoder(
            packed={MEMORIES[k]: (MEMORIES[t], b, a) for k, (t, b, a) in PACKED_MEMORIES.items()}
        )
        regs = RegisterFile(self.max_layers)
        ctl = Controller(eval_error_bits=len(self.evaluator.error))
        ev, sh, vo, up, ini = self.evaluator, self.shaper, self.votes, self.updater, self.init
        x_bits = ceil_log2(self.depths["member_x"])
        y_bits = ceil_log2(self.depths["logits"])
        sz = MemberSizes(
            in_depth=self.depths["member_x"],
            out_depth=self.depths["logits"],
            width_bits=p.width_bits + 1,
        )
        rd = MemberReader(
            lanes=p.lanes, addr_bits=x_bits, width_bits=p.width_bits + 1, mem_latency=lat
        )
        wr = LogitWriter(p, addr_bits=y_bits)
        # the reader's words reach the evaluator's input loader through a register stage
        # (valid, payload and ready from flip-flops), emptied by the evaluation's start:
        # the reader's state through the loader's handshake into its phase crosses the
        # die (the 128-lane ULX3S build's critical path at dace236, seed 2, 10.63 ns,
        # 8.52 of it routing). The stage passes a word every other cycle; the reader
        # offers one every lanes + 2 cycles or more (one read per lane). The start's
        # clear is defensive: a run's words are all taken before its evaluation ends,
        # so no word is left for the next run (the accelerator's reset clears it too).
        # Its valid flag in a copy per COPY_LANES lanes, each the load enable of their
        # bytes: from one enable (the register empty and the reader's valid) into all
        # 1,024 payload bits, the 128-lane ULX3S build at 179b581 (seed 1) had 121
        # endpoints after 10 ns (11.48 ns, 10.48 of it routing).
        inp_clear = Signal()
        inp_reg = ResetInserter(inp_clear)(
            StreamRegister(8 * p.lanes, copies=-(-p.lanes // COPY_LANES))
        )
        add_with_reset_leaves(
            m,
            self.reset,
            dec=dec,
            regs=regs,
            ctl=ctl,
            ev=ev,
            shaper=sh,
            votes=vo,
            updater=up,
            init=ini,
            sizes=sz,
            reader=rd,
            writer=wr,
            inp_reg=inp_reg,
        )

        # the batch stride from a register (the registers hold still during a run, and
        # the controller adds it at a step's end): the compare and choice before the
        # controller's batch_base adder had 6 of the 128-lane ULX3S build's 414
        # endpoints past 9.3 ns at 179b581 (seed 1, 9.81 ns)
        stride = Signal(16, reset_less=True)
        m.d.sync += stride.eq(Mux(regs.batch_stride == 0, regs.batch, regs.batch_stride))
        wiring.connect(m, wiring.flipped(self.cmd), dec.cmd)
        wiring.connect(m, dec.rsp, wiring.flipped(self.rsp))
        wiring.connect(m, rd.inp, inp_reg.i)
        wiring.connect(m, inp_reg.o, ev.inp)
        m.d.comb += inp_clear.eq(ctl.ev_start)
        wiring.connect(m, ev.logits, wr.logits)
        # phase == k as the controller's one-hot flip-flops (ph[k]): each memory port's
        # multiplexer starts from one register per choice, not from a decode of phase
        ph = ctl.phase_is
        idle = ~ctl.busy
        m.d.comb += [self.busy.eq(ctl.busy), self.error.eq(ctl.error.any() | dec.bad_command)]

        # ---- registers, decoder, controller
        m.d.comb += [
            dec.busy.eq(ctl.busy),
            regs.w_addr.eq(dec.reg_waddr),
            regs.w_data.eq(dec.reg_wdata),
            regs.w_en.eq(dec.reg_wen),
            regs.r_addr.eq(dec.reg_raddr),
            dec.reg_rdata.eq(regs.r_data),
            regs.step_wr.eq(ctl.step_wr),
            regs.step_next.eq(ctl.step_next),
            ctl.run.eq(dec.run),
            ctl.run_kind.eq(dec.run_kind),
            ctl.steps.eq(regs.steps),
            ctl.step.eq(regs.step),
            ctl.stride.eq(stride),
            ctl.n_layers.eq(regs.n_layers),
            regs.status.eq(Cat(ctl.busy, self.error)),
            regs.error.eq(ctl.error | (dec.bad_command << 14)),
            regs.cycles.eq(ctl.cycles),
            regs.eval_cycles.eq(ctl.eval_cycles),
            regs.shape_cycles.eq(ctl.shape_cycles),
            regs.update_cycles.eq(ctl.update_cycles),
            regs.theta.eq(sh.theta),
        ]
        widths = [getattr(regs, f"width{i}") for i in range(self.max_layers + 1)]
        ok = (regs.n_layers >= 1) & (regs.n_layers <= self.max_layers)
        for i, w in enumerate(widths):
            in_range = (w >= 1) & (w <= self.max_width)
            # width i is n_i of a used layer boundary when i <= n_layers
            ok &= in_range if i == 0 else (regs.n_layers < i) | in_range
        ok &= regs.population <= self.max_population
        if self.update == "latent":
            ok &= regs.latent_shift <= self.updater.q_max
        # registered: the compares' tree (7 LUT levels from the widths and the population)
        # reached the controller's registers through its check state (2 of the 128-lane
        # ULX3S build's 109 endpoints past 10 ns at b56882b, seed 1). A register write
        # lands two cycles after its command word and RUN, a later word, reaches the
        # check state a cycle after its strobe: the check sees every write before it.
        params_ok = Signal(name="params_ok")
        m.d.sync += params_ok.eq(ok)
        m.d.comb += ctl.params_ok.eq(params_ok)

        # ---- evaluator
        m.d.comb += [
            ev.start.eq(ctl.ev_start),
            ctl.ev_busy.eq(ev.busy | wr.busy),  # the last beat's writes end the phase
            ctl.ev_error.eq(ev.error),
            ev.n_layers.eq(regs.n_layers),
            ev.sigma_shift.eq(regs.sigma_shift),
            ev.margin.eq(regs.margin),
            ev.population.eq(regs.population),
            ev.batch.eq(regs.batch),
            ev.seed.eq(regs.seed),
            ev.step.eq(regs.step),
            ev.shared.eq(regs.shared),
            ev.b_base.eq(ctl.batch_base),
        ]
        # noise made ahead (docs/rtl.md, "Noise made ahead"): an evaluation may use the
        # noise an evaluation before it made (keep) unless the host has written a
        # register the noise depends on since that one started; a TRAIN run's
        # evaluations make the next step's first round ahead (pre; two noise buffers)
        noise_same = Signal()
        # (RESET clears it as it clears the evaluator's tag: the registers return to
        # their reset values without a write)
        m.d.sync += noise_same.eq((noise_same | ctl.ev_start) & ~regs.noise_w & ~self.reset)
        m.d.comb += ev.keep.eq(noise_same)
        if self.evaluator.params.noise_buffers == 2:
            m.d.comb += [ev.pre.eq(ctl.training), ev.pre_step.eq(regs.step + 1)]
        for i, w in enumerate(widths):
            m.d.comb += ev.widths[i].eq(w)
        for l in range(self.max_layers):
            m.d.comb += ev.act_shifts[l].eq(getattr(regs, f"act_shift{l}"))

        # ---- per-member path (shared = 0): the fit check at the run's start, then the
        # reader and the writer alongside the evaluator
        per_member = ~regs.shared
        m.d.comb += [
            sz.start.eq(ctl.members_start & per_member),
            sz.population.eq(regs.population),
            sz.batch.eq(regs.batch),
            sz.n_in.eq(ev.widths[0]),
            sz.n_out.eq(ev.widths[regs.n_layers]),
            ctl.members_busy.eq(sz.busy),
            ctl.members_ok.eq(regs.shared | sz.fits),
            rd.start.eq(ctl.ev_start & per_member),
            rd.population.eq(regs.population),
            rd.batch.eq(regs.batch),
            rd.n_in.eq(ev.widths[0]),
            rd.stride.eq(sz.in_stride),
            wr.start.eq(ctl.ev_start & per_member),
            wr.stride.eq(sz.out_stride),
        ]

        # ---- shaper, votes, updater, init
        layer = ctl.layer
        w_arr = ev.widths  # the same values as the registers, as an indexable view
        # the layer's widths from registers, loaded in the controller's VOTE_SETUP cycle
        # (the layer is new, its strobe a cycle ahead): the register file's widths
        # through the layer's selection, the +1 and the vote accumulator's range check
        # into the updater's state were the 128-lane ECP5 accelerator's critical path at
        # ae202d0 (16.56 ns)
        wb = self.params.width_bits
        out = Signal(wb + 1, name="layer_out")
        fan = Signal(wb + 2, name="layer_fan")
        m.d.sync += [out.eq(w_arr[layer + 1]), fan.eq(w_arr[layer] + 1)]
        m.d.comb += [
            sh.start.eq(ctl.sh_start),
            sh.population.eq(regs.population),
            sh.shaping.eq(regs.shaping),
            sh.tau.eq(regs.tau),
            ctl.sh_busy.eq(sh.busy),
            ctl.sh_error.eq(sh.error),
            vo.start.eq(ctl.vote_start),
            vo.population.eq(regs.population),
            vo.out.eq(out),
            vo.fan.eq(fan),
            vo.seed.eq(regs.seed),
            vo.step.eq(regs.step),
            vo.layer.eq(layer),
            vo.sigma_shift.eq(regs.sigma_shift),
            ctl.vote_busy.eq(vo.busy),
            up.start.eq(ctl.apply_start),
            up.out.eq(out),
            up.fan.eq(fan),
            up.theta.eq(sh.theta),
            vo.z_addr.eq(up.z_addr),
            up.z_data.eq(vo.z_data),
            ctl.apply_busy.eq(up.busy),
            ctl.up_error.eq(vo.error | up.error),
            ini.start.eq(ctl.init_start),
            ini.init.eq(regs.init),
            ini.seed.eq(regs.seed),
            ini.n_layers.eq(regs.n_layers),
            ini.latent_shift.eq(regs.latent_shift),
            ctl.init_busy.eq(ini.busy),
        ]
        for i, w in enumerate(widths):
            m.d.comb += ini.widths[i].eq(w)

        # the layer's first weight word and latent word: where the last layer's writes
        # ended (layers are updated in order), captured at the updater's start
        w_next = Signal(self.addr_bits, reset_less=True)
        v_next = Signal(self.addr_bits, reset_less=True)
        w_base = Signal(self.addr_bits, reset_less=True)
        v_base = Signal(self.addr_bits, reset_less=True)
        with m.If(ctl.sh_start):
            m.d.sync += [w_next.eq(0), v_next.eq(0)]
        with m.If(up.w_wen):
            m.d.sync += w_next.eq(up.w_waddr + 1)
        if self.update == "latent":
            with m.If(up.v_wen):
                m.d.sync += v_next.eq(up.v_waddr + 1)
        with m.If(ctl.apply_start):
            m.d.sync += [w_base.eq(w_next), v_base.eq(v_next)]
        m.d.comb += up.w_base.eq(Mux(ctl.apply_start, w_next, w_base))
        if self.update == "latent":
            m.d.comb += [
                up.v_base.eq(Mux(ctl.apply_start, v_next, v_base)),
                up.latent_shift.eq(regs.latent_shift),
            ]

        # ---- memories
        def delayed(value, n, name):
            for j in range(n):
                reg = Signal.like(value, name=f"{name}_d{j}", reset_less=True)
                m.d.sync += reg.eq(value)
                value = reg
            return value

        host_sel = dec.mem_sel
        host_addr = dec.mem_addr
        rd_data = {}
        rd_latency = {}  # read latency of the memories rd_data holds, where not one

        # The read/write memories carry no_rw_check (no read-first emulation: rtl/bram.py
        # NO_RW_CHECK): a block's read is used in its phase, the host's in the cycle of
        # its mem_ren, and neither meets a write of its address in that cycle (the tests
        # watch every used read: ``rw_watch``).
        def mem(name, shape, depth, used, addr_reg=False, direct=0):
            """A memory's read and write ports; ``used``: a block's read requested in
            the cycle is consumed. ``addr_reg``: the requests' address (the block's or
            the host's) reaches the block RAM through a register, so the read is at the
            port a cycle after its request, and the watch with it; ``direct``: reads at
            the port in their own cycle (past the register)."""
            mm = memory.Memory(shape=shape, depth=depth, init=[], attrs=NO_RW_CHECK)
            m.submodules[f"mem_{name}"] = mm
            rp, wp = mm.read_port(), mm.write_port()
            host_reads = dec.mem_ren & (host_sel == MEMORIES[name])
            used = used | host_reads
            if addr_reg:
                used = delayed(used, 1, f"{name}_used")
            self.rw_watch.append(RWWatch(name, rp, wp, used | direct))
            return rp, wp

        def registered_mem(name, width, depth, used, raddr, *, addr_reg=False, signed=True):
            """A memory read through its block RAMs' output registers (RegisteredRAM,
            read latency 2, 3 with ``addr_reg``: ``raddr`` through a register first),
            its watch (``used``: a block's read at ``raddr`` is consumed; the host's
            too) and its host read data. Returns the RAM and its write port."""
            ram = RegisteredRAM(width, depth)
            m.submodules[f"mem_{name}"] = ram
            used = used | (dec.mem_ren & (host_sel == MEMORIES[name]))
            if addr_reg:
                used = delayed(used, 1, f"{name}_used")
                raddr = delayed(raddr, 1, f"{name}_raddr")
            wport = _WritePort(ram.w_addr, ram.w_data, ram.w_en)
            self.rw_watch.append(RWWatch(name, _ReadPort(ram.r_addr), wport, used))
            m.d.comb += [ram.r_en.eq(1), ram.r_addr.eq(raddr)]
            rd_data[name] = ram.r_data.as_signed() if signed else ram.r_data
            rd_latency[name] = 2 + addr_reg
            return ram, wport

        # With mem_latency >= 2 the read addresses the blocks make combinationally (the
        # weight streamer's arbitration of its two cursors, 6 LUT levels; the member
        # reader's) reach the block RAM through a register beside it, and their data
        # through one register fewer: the same latency. The weights' (7) and member_x's
        # (5) address inputs were among the 128-lane ULX3S build's 413 endpoints past 10
        # ns at cd6a36f (seed 1, 10.83 and 10.88 ns).
        addr_reg = lat >= 2

        # The host's writes reach the memories one cycle late, from flip-flops: the large
        # memories (the samples: 45-64 DP16KD across the ECP5) are far from the decoder
        # and the controller, whose state (``idle``) gated their write enable through
        # LUTs (the ECP5 accelerator's critical path at 35b3fbc). A write is accepted
        # while idle and lands in the next cycle (the weights': two, write_port's reg);
        # a run starts several cycles after the last write's command (the decoder takes
        # RUN as a later command word), and a read of the memory comes later still.
        hw_addr = Signal.like(host_addr, name="host_w_addr", reset_less=True)
        hw_data = Signal.like(dec.mem_wdata, name="host_w_data", reset_less=True)
        m.d.sync += [hw_addr.eq(host_addr), hw_data.eq(dec.mem_wdata)]

        def write_port(wp, name, users, *, reg=False):
            """``wp`` driven by the block of each ``(phase, addr, data, en)`` in ``users``
            during its phase, otherwise by the host's writes to memory ``name``.
            ``reg``: through a register after the choice (every write lands a cycle
            later)."""
            hw_en = Signal(name=f"host_w_en_{name}", reset_less=True)
            m.d.sync += hw_en.eq(idle & dec.mem_wen & (host_sel == MEMORIES[name]))
            host = (hw_addr, hw_data, hw_en)
            sel = host
            for code, *port in reversed(users):
                sel = [Mux(ph[code], u, h) for u, h in zip(port, sel, strict=True)]
            if reg:  # reset-less as the top's other registers
                parts = zip(sel, ("addr", "data", "en"), strict=True)
                sel = [delayed(v, 1, f"{name}_w_{k}") for v, k in parts]
            m.d.comb += [wp.addr.eq(sel[0]), wp.data.eq(sel[1]), wp.en.eq(sel[2])]

        # weights: read by the evaluator (eval), the updater (pentary, apply), the host
        # (the updater's reads, pentary, from its own register and of latency one, pass
        # the register's multiplexer in its phase: the address register takes the
        # evaluator's and the host's)
        pentary = self.update == "pentary"
        if not pentary and lat >= 3:
            # latent mode at a latency of 3 or more: through the block RAMs' output
            # registers (RegisteredRAM), the address a register before them, so that the
            # words leave flip-flops; the block RAMs' unregistered outputs (5.83 ns of
            # clock-to-output) into the weight streamer's word FIFOs were the critical
            # path of the 128-lane ULX3S build at dbcf3c3 (seed 2: 10.44 ns, 14
            # endpoints past 9.3 ns)
            wram, wp = registered_mem(
                "weights",
                16,
                self.weight_words,
                ph[1] & ev.w_en,
                Mux(ph[1], ev.w_addr, host_addr),
                addr_reg=True,
                signed=False,
            )
            m.d.comb += ev.w_data.eq(delayed(wram.r_data, lat - 3, "w"))
        else:
            rp, wp = mem(
                "weights",
                16,
                self.weight_words,
                ph[1] & ev.w_en,
                addr_reg,
                direct=ph[4] & up.r_en if pentary else 0,
            )
            ra = Mux(ph[1], ev.w_addr, host_addr)
            if addr_reg:
                ra = delayed(ra, 1, "weights_raddr")
            # latent mode: the updater never reads W, so the address is the register
            # alone (the phase through the apply's choice into the block RAMs' address
            # was the critical path of the 128-lane ULX3S build for 100 MHz at 2b110bc,
            # seed 1: 10.59 ns, 9.15 of it routing)
            m.d.comb += [
                rp.en.eq(1),
                rp.addr.eq(Mux(ph[4], up.w_raddr, ra) if pentary else ra),
                ev.w_data.eq(delayed(rp.data, lat - 1 - addr_reg, "w")),
            ]
            if pentary:
                m.d.comb += up.w_rdata.eq(rp.data)
            rd_data["weights"] = rp.data
            if addr_reg:
                rd_latency["weights"] = 2
        # the writes through a register beside the block RAMs: the updater's word being
        # assembled (its digit position's decode, the phase's choice) into their write
        # data was the critical path of one of the three 128-lane ULX3S builds at
        # bd77a19 (seed 2: 10.09 ns)
        write_port(
            wp,
            "weights",
            [(4, up.w_waddr, up.w_wdata, up.w_wen), (5, ini.w_addr, ini.w_data, ini.w_en)],
            reg=True,
        )

        # latent V: read through the block RAMs' output registers (RegisteredRAM, read
        # latency 2; the updater addresses it a stage earlier), so that the rows'
        # multiplexer (8,320 words at the ULX3S defaults: five rows of 9-bit DP16KD) starts
        # from flip-flops, not from the block RAMs' unregistered outputs. From those through
        # the multiplexer into the updater's and the host's read registers, the 128-lane
        # ULX3S build at 3f25487 had 16 of its 583 endpoints past 10 ns (seed 1, 12.83 ns)
        if self.update == "latent":
            vram, vw = registered_mem(
                "latent",
                len(self.updater.v_rdata),
                self.latent_words,
                ph[4] & up.r_en,
                Mux(ph[4], up.v_raddr, host_addr),
            )
            m.d.comb += up.v_rdata.eq(vram.r_data)
            write_port(
                vw,
                "latent",
                [(4, up.v_waddr, up.v_wdata, up.v_wen), (5, ini.v_addr, ini.v_data, ini.v_en)],
            )

        # samples, labels, batch indices: read by the evaluator, written by the host
        # (only while idle, so never in a cycle the evaluator reads): single-port RAMs,
        # the UP5K's SPRAM when large, the ECP5's block RAMs with their output register
        # when mem_latency >= 2 (rtl/bram.py: the 45-block sample memory's read
        # multiplexer then starts from flip-flops), that multiplexer split by a
        # register when mem_latency >= 3 (from the output registers through the 45 to 1
        # multiplexer into the register after it: the critical path of the 128-lane
        # ULX3S build at dace236, seed 1, 9.79 ns)
        sprams = 0
        for name, width, addr, dout in (
            ("samples", 8, ev.s_addr, ev.s_data),
            ("labels", 16, ev.l_addr, ev.l_data),
            ("batch", 16, ev.b_addr, ev.b_data),  # b_addr: the loader adds batch_base
        ):
            ram = SinglePortRAM(width, self.depths[name], latency=min(lat, 3))
            m.submodules[f"mem_{name}"] = ram
            sprams += ram.sprams(platform)
            m.d.comb += [
                ram.r_addr.eq(Mux(ph[1], addr, host_addr)),
                dout.eq(delayed(ram.r_data, lat - ram.latency, name)),
            ]
            write_port(_WritePort(ram.w_addr, ram.w_data, ram.w_en), name, [])
            rd_data[name] = ram.r_data
            rd_latency[name] = ram.latency
        if sprams > UP5K_SPRAMS:
            raise ValueError(
                f"Accelerator: sample_bytes={self.depths['samples']}, label_words="
                f"{self.depths['labels']} and batch_words={self.depths['batch']} need "
                f"{sprams} SPRAMs on the iCE40; the UP5K has {UP5K_SPRAMS} (16 K words of "
                f"16 bits each; a byte memory packs two per word)"
            )

        # scores: the evaluator accumulates (eval), the shaper reads (shape), the host
        # reads and writes (host-scored runs)
        # (at a latency of 2 or more through the block RAMs' output registers,
        # RegisteredRAM: the unregistered outputs into the host's read register had 6
        # of the 128-lane ULX3S build's 58 endpoints past 9.3 ns at aba3e6a, seed 2)
        sb = p.score_bits
        sc_used = (ph[1] & ev.sc_ren) | (ph[2] & sh.s_en)
        sc_raddr = Mux(ph[1], ev.sc_raddr, Mux(ph[2], sh.s_addr, host_addr))
        if lat >= 2:
            sram, wp = registered_mem("scores", sb, self.max_population, sc_used, sc_raddr)
            sc_data = delayed(sram.r_data, lat - 2, "sc")
        else:
            rp, wp = mem("scores", sb, self.max_population, sc_used)
            m.d.comb += [rp.en.eq(1), rp.addr.eq(sc_raddr)]
            sc_data = rp.data
            rd_data["scores"] = rp.data.as_signed()
        m.d.comb += [ev.sc_rdata.eq(sc_data), sh.s_data.eq(sc_data.as_signed())]
        write_port(wp, "scores", [(1, ev.sc_waddr, ev.sc_wdata, ev.sc_wen)])

        # g: the shaper writes, the accumulator reads (the host reads when idle), through
        # the block RAMs' output registers (RegisteredRAM, read latency 2: the vote
        # accumulator holds its address 30 cycles before it samples the data). From
        # the unregistered outputs into the accumulator's and the host's registers, 12
        # of the 128-lane ULX3S build's 80 endpoints past 10 ns at 5e791fe (seed 1,
        # 10.64 ns).
        gram, _ = registered_mem(
            "g",
            len(sh.g_data),
            max(2, self.max_population // 2),
            ph[3],
            Mux(ph[3], vo.g_addr, host_addr),
        )
        m.d.comb += [
            vo.g_data.eq(gram.r_data),
            gram.w_addr.eq(sh.g_addr),
            gram.w_data.eq(sh.g_data),
            gram.w_en.eq(sh.g_en),
        ]

        # per-member inputs: the reader (eval) and the host; logits: the writer, read by
        # the host (sign-extended)
        ra = Mux(ph[1], rd.r_addr, host_addr)
        if lat >= 3:
            # the address register, then the block RAMs' two (RegisteredRAM): the reader's
            # data register is the block RAMs' output register (from their unregistered
            # outputs into it, 2 of the 128-lane ULX3S build's 109 endpoints past 10 ns at
            # b56882b, seed 1, 10.26 ns)
            xram, xw = registered_mem(
                "member_x",
                8,
                self.depths["member_x"],
                ph[1] & rd.r_en,
                ra,
                addr_reg=True,
                signed=False,
            )
            m.d.comb += rd.r_data.eq(delayed(xram.r_data, lat - 3, "x"))
            write_port(xw, "member_x", [])
        else:
            rp, wp = mem("member_x", 8, self.depths["member_x"], ph[1] & rd.r_en, addr_reg)
            m.d.comb += [
                rp.en.eq(1),
                rp.addr.eq(delayed(ra, 1, "member_x_raddr") if addr_reg else ra),
                rd.r_data.eq(delayed(rp.data, lat - 1 - addr_reg, "x")),
            ]
            write_port(wp, "member_x", [])
            rd_data["member_x"] = rp.data
            if addr_reg:
                rd_latency["member_x"] = 2
        # The logits are read through the block RAMs' output registers (RegisteredRAM,
        # read latency 2): their outputs into the host's read register had 5 of the
        # 128-lane ULX3S build's 109 endpoints past 10 ns at b56882b (seed 1, 10.6 ns).
        lram, _ = registered_mem("logits", 8, self.depths["logits"], 0, host_addr)
        m.d.comb += [
            lram.w_addr.eq(wr.w_addr),
            lram.w_data.eq(wr.w_data),
            lram.w_en.eq(wr.w_en),
        ]

        # host reads: each memory's read data registered, then the selected one (the
        # decoder samples it three cycles after mem_ren, the address held meanwhile: the
        # memories' read latency is up to three, member_x's at mem_latency >= 3). A memory
        # of read latency one (its block RAM's output unregistered) takes two registers,
        # one beside the memory and one beside the select: the latent memory's output into
        # its one register had 8 of the 128-lane ULX3S build's 413 endpoints past 10 ns at
        # cd6a36f (seed 1, 11.21 ns).
        sel_d = Signal.like(host_sel, reset_less=True)
        m.d.sync += sel_d.eq(host_sel)
        with m.Switch(sel_d):
            for name, value in rd_data.items():
                reg = delayed(value, 3 - rd_latency.get(name, 1), f"host_{name}")
                with m.Case(MEMORIES[name]):
                    m.d.comb += dec.mem_rdata.eq(reg)  # sign-extended if signed
        return m
