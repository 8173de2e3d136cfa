"""Controller: the schedule of spec 10.2, one ES step after another.

A run (``run`` strobe, ``run_kind``) sequences the blocks through start/busy handshakes
(a block's ``busy`` rises the cycle after its ``start`` and falls when it is done; the
controller reads it through a register, so a phase ends the cycle after; a block's
error flag holds until its next start):

=========  ================================================================  ===========
kind       phases                                                            ``step``
=========  ================================================================  ===========
0 TRAIN    ``steps`` times: EVAL, SHAPE, then VOTE and APPLY for each layer  +1 a step
1 EVAL     EVAL (scores in shared mode, logits in per-member mode)           unchanged
2 UPDATE   SHAPE, then VOTE and APPLY per layer (host-written scores: RL)     +1
3 INIT     INIT (spec 10.1: zero or random weights, and V)                   unchanged
=========  ================================================================  ===========

The EVAL of step ``i`` of a TRAIN run reads its batch indices at ``batch_base = i *
stride`` of the batch-index memory (the host loads the indices of all ``steps`` steps
before the run). A block's error ends the run with its flag set; so does a run whose last
step would pass 65534.

Error flags (``error``; bits 0-8 are the evaluator's, ``ERROR_FLAGS`` of
rtl/evaluator/sequencer.py):

* 9 ``shaper``: the shaper refused its run-time values (population, tau);
* 10 ``update``: the vote or apply block refused its values (latent_shift);
* 11 ``steps``: ``step + steps - 1`` above 65534, or ``steps`` 0;
* 12 ``kind``: an unknown run kind;
* 13 ``params``: ``params_ok`` low at the start (a register outside what the build
  holds: a width above ``max_width``, ``n_layers`` above ``max_layers``, a population
  above ``max_population``, ``latent_shift`` above ``q_max``);
* 15 ``members``: a TRAIN or EVAL run with ``members_ok`` low (per-member inputs or
  logits that do not fit their memories: ``population * batch * n_0`` above
  ``member_bytes`` or ``population * batch * n_L`` above ``logit_bytes``).

(Bit 14 is the command decoder's ``bad command``.) At a run's start the controller
strobes ``members_start`` and waits while ``members_busy`` (the accelerator's
MemberSizes) before its checks; their verdict is registered, and the run's first phase
starts (or its error ends it) a cycle later.

Counters (``cycles``, ``eval_cycles``, ``shape_cycles``, ``update_cycles``) count the
cycles of the last run, by phase.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..evaluator.params import MAX_STEP

__all__ = ["CONTROL_ERRORS", "RUN_KINDS", "Controller"]

RUN_KINDS = {"train": 0, "eval": 1, "update": 2, "init": 3}
CONTROL_ERRORS = {
    9: "shaper",
    10: "update",
    11: "steps",
    12: "kind",
    13: "params",
    15: "members",
}

#: What the CHECK state decides (a register; the CHECKED state acts on it): the first
#: phase of the run, or the error bit that ends it.
VERDICTS = {
    "EVAL": 0,
    "SHAPE": 1,
    "INIT": 2,
    "fail11": 3,
    "fail12": 4,
    "fail13": 5,
    "fail15": 6,
}


class Controller(wiring.Component):
    """Sequences runs (module docstring).

    Parameters
    ----------
    eval_error_bits : int
        Width of the evaluator's error flags (bits 0.. of ``error``).

    Interface attributes
    --------------------
    run : In(1), run_kind : In(4)
    steps : In(16), step : In(16), stride : In(16), n_layers : In(4)
    params_ok : In(1)
        The registers are within the build (checked at the start of every run but INIT).
    members_start : Out(1), members_busy : In(1), members_ok : In(1)
        The per-member fit check: strobed with ``run``; the checks wait while
        ``members_busy``; ``members_ok`` low refuses TRAIN and EVAL (flag 15).
    busy : Out(1), error : Out(16)
    step_wr : Out(1), step_next : Out(16)
        ``step`` + 1 after each step of TRAIN or UPDATE.
    batch_base : Out(16), layer : Out(3)
    ev_start, sh_start, vote_start, apply_start, init_start : Out(1)
    ev_busy, sh_busy, vote_busy, apply_busy, init_busy : In(1)
    ev_error : In(eval_error_bits), sh_error, up_error : In(1)
    phase_is : Out(6)
        The phase, one-hot: bit 0 idle, 1 eval, 2 shape, 3 vote, 4 apply, 5 init; which
        block owns the shared memory ports. Flip-flops set with every transition (the
        same value as the state's phase every cycle): a memory port's multiplexer takes
        one flip-flop per choice, not a decode.
    cycles, eval_cycles, shape_cycles, update_cycles : Out(32)
    training : Out(1)
        The run (or the last one) is a TRAIN run (a register set with the run): its
        steps come one after another, so its evaluations make the next step's noise
        ahead.
    """

    def __init__(self, eval_error_bits: int = 9):
        self.eval_error_bits = eval_error_bits
        super().__init__(
            {
                "run": In(1),
                "run_kind": In(4),
                "steps": In(16),
                "step": In(16),
                "stride": In(16),
                "n_layers": In(4),
                "params_ok": In(1, init=1),
                "members_start": Out(1),
                "members_busy": In(1),
                "members_ok": In(1, init=1),
                "busy": Out(1),
                "error": Out(16),
                "step_wr": Out(1),
                "step_next": Out(16),
                "batch_base": Out(16),
                "layer": Out(3),
                "ev_start": Out(1),
                "ev_busy": In(1),
                "ev_error": In(eval_error_bits),
                "sh_start": Out(1),
                "sh_busy": In(1),
                "sh_error": In(1),
                "vote_start": Out(1),
                "vote_busy": In(1),
                "apply_start": Out(1),
                "apply_busy": In(1),
                "up_error": In(1),
                "init_start": Out(1),
                "init_busy": In(1),
                "phase_is": Out(6, init=1),
                "cycles": Out(32),
                "eval_cycles": Out(32),
                "shape_cycles": Out(32),
                "update_cycles": Out(32),
                "training": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        kind = Signal(4)
        left = Signal(16)  # steps left in this run, the current one included
        # left == 1 as a flag set with left (the 16-bit compare into the next-state
        # logic: among the controller state's inputs at 9.77 ns in the 128-lane ULX3S
        # build at 063e153, seed 1)
        left_one = Signal()
        m.d.comb += self.step_next.eq(self.step + 1)
        # CHECK's step range checks from registers: ``step`` and ``steps`` (the register
        # file's) are steady from the run strobe on, and the sum, its compare and the
        # error flags in one cycle were the ULX3S build's critical path at aae9720 (13.5
        # ns, seed 1 at 60 MHz)
        steps_bad = Signal()  # train: no step, or the last one past MAX_STEP
        step_bad = Signal()  # update: the step past MAX_STEP
        m.d.sync += [
            steps_bad.eq((self.steps == 0) | (self.step + self.steps - 1 > MAX_STEP)),
            step_bad.eq(self.step > MAX_STEP),
        ]

        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            ph = self.phase_is
            with m.If(ph[1]):
                m.d.sync += self.eval_cycles.eq(self.eval_cycles + 1)
            with m.If(ph[2]):
                m.d.sync += self.shape_cycles.eq(self.shape_cycles + 1)
            with m.If(ph[3] | ph[4]):
                m.d.sync += self.update_cycles.eq(self.update_cycles + 1)

        # the phase is a register set with every transition (goto), not decoded from the
        # state: it drives every memory port's multiplexers
        phase_is = Signal(6, init=1)
        m.d.comb += self.phase_is.eq(phase_is)
        codes = {"EVAL": 1, "SHAPE": 2, "VOTE": 3, "APPLY": 4, "INIT": 5}

        # the blocks' start strobes are flip-flops set with the transition into their
        # phase (high in the phase's first state, as a decode of the state would be): each
        # fans out to a whole block's registers, so no logic sits before that fan-out
        strobe = {name: Signal(name=f"{name.lower()}_strobe") for name in codes}
        m.d.sync += [s.eq(0) for s in strobe.values()]
        m.d.comb += [
            self.ev_start.eq(strobe["EVAL"]),
            self.sh_start.eq(strobe["SHAPE"]),
            self.vote_start.eq(strobe["VOTE"]),
            self.apply_start.eq(strobe["APPLY"]),
            self.init_start.eq(strobe["INIT"]),
        ]

        # busy as a flip-flop set with every transition (every one into or out of IDLE is
        # a goto): the host's write enables and the decoder's ready take it (the decode
        # of the state before them: 5 of the 128-lane ULX3S build's 109 endpoints past 10
        # ns at b56882b, seed 1)
        busy_r = Signal()
        m.d.comb += self.busy.eq(busy_r)

        def goto(name):
            m.next = name
            m.d.sync += busy_r.eq(name != "IDLE")
            code = codes.get(name.removesuffix("_SETUP"), 0)
            m.d.sync += phase_is.eq(1 << code)
            if name in strobe:
                m.d.sync += strobe[name].eq(1)

        def phase(name, busy, nxt):
            """States NAME (its block's start strobe), NAME_1 (one cycle), NAME_W (until
            idle). The block's busy is read through a register (a busy that rises the
            cycle after the strobe is high in it by NAME_W): the evaluator's and the
            logit writer's state through their busy flags into the error bits and the
            state was 10.37 ns in the 128-lane ULX3S build at f4a1947 (seed 3, 8.41 ns
            of it routing; the blocks sit across the die). A phase ends a cycle after
            its block's busy falls; the blocks hold their error flags until their next
            start."""
            busy_r = Signal(name=f"{name.lower()}_busy")
            m.d.sync += busy_r.eq(busy)
            with m.State(name):
                m.next = name + "_1"
            with m.State(name + "_1"):
                m.next = name + "_W"
            with m.State(name + "_W"):
                with m.If(~busy_r):
                    nxt()

        def fail(bit, value=1):
            m.d.sync += self.error.bit_select(bit, 1).eq(value)
            goto("IDLE")

        def to_idle():
            goto("IDLE")

        def after_eval():
            with m.If(self.ev_error.any()):
                m.d.sync += self.error[: self.eval_error_bits].eq(self.ev_error)
                goto("IDLE")
            with m.Elif(kind == RUN_KINDS["eval"]):
                goto("IDLE")
            with m.Else():
                goto("SHAPE")

        def after_shape():
            with m.If(self.sh_error):
                fail(9)
            with m.Else():
                m.d.sync += self.layer.eq(0)
                goto("VOTE_SETUP")

        def after_vote():
            with m.If(self.up_error):
                fail(10)
            with m.Else():
                goto("APPLY")

        def after_apply():
            with m.If(self.up_error):
                fail(10)
            with m.Elif(self.layer + 1 < self.n_layers):
                m.d.sync += self.layer.eq(self.layer + 1)
                goto("VOTE_SETUP")
            with m.Else():
                goto("NEXT")

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.members_start.eq(self.run)
                with m.If(self.run):
                    m.d.sync += [
                        kind.eq(self.run_kind),
                        self.training.eq(self.run_kind == RUN_KINDS["train"]),
                        left.eq(self.steps),
                        left_one.eq(self.steps == 1),
                        self.error.eq(0),
                        self.batch_base.eq(0),
                        self.layer.eq(0),
                        self.cycles.eq(0),
                        self.eval_cycles.eq(0),
                        self.shape_cycles.eq(0),
                        self.update_cycles.eq(0),
                    ]
                    goto("CHECK")
            # CHECK's verdict goes into a register, which CHECKED acts on: the checks'
            # priority chain into the error bits' and the state's enables was 10.16 and
            # 10.58 ns in the 128-lane ULX3S build at 7bac758 (seed 2)
            verdict = Signal(range(len(VERDICTS)))
            with m.State("CHECK"):
                evaluates = (kind == RUN_KINDS["train"]) | (kind == RUN_KINDS["eval"])
                with m.If(~self.members_busy):  # (else the fit check is still running)
                    m.next = "CHECKED"
                    with m.If(~self.params_ok & (kind != RUN_KINDS["init"])):
                        m.d.sync += verdict.eq(VERDICTS["fail13"])
                    with m.Elif(~self.members_ok & evaluates):
                        m.d.sync += verdict.eq(VERDICTS["fail15"])
                    with m.Else():
                        with m.Switch(kind):
                            with m.Case(RUN_KINDS["train"]):
                                m.d.sync += verdict.eq(
                                    Mux(steps_bad, VERDICTS["fail11"], VERDICTS["EVAL"])
                                )
                            with m.Case(RUN_KINDS["eval"]):
                                m.d.sync += verdict.eq(VERDICTS["EVAL"])
                            with m.Case(RUN_KINDS["update"]):
                                # (NEXT ends any run but TRAIN: no `left`)
                                m.d.sync += verdict.eq(
                                    Mux(step_bad, VERDICTS["fail11"], VERDICTS["SHAPE"])
                                )
                            with m.Case(RUN_KINDS["init"]):
                                m.d.sync += verdict.eq(VERDICTS["INIT"])
                            with m.Default():
                                m.d.sync += verdict.eq(VERDICTS["fail12"])
            with m.State("CHECKED"):
                with m.Switch(verdict):
                    for name, code in VERDICTS.items():
                        with m.Case(code):
                            if name.startswith("fail"):
                                fail(int(name[4:]))
                            else:
                                goto(name)
            phase("EVAL", self.ev_busy, after_eval)
            phase("SHAPE", self.sh_busy, after_shape)
            # a cycle with the new layer before its VOTE strobe: the accelerator registers
            # the layer's widths for the vote accumulator and the updater
            with m.State("VOTE_SETUP"):
                goto("VOTE")
            phase("VOTE", self.vote_busy, after_vote)
            phase("APPLY", self.apply_busy, after_apply)
            phase("INIT", self.init_busy, to_idle)
            with m.State("NEXT"):
                m.d.comb += self.step_wr.eq(1)
                m.d.sync += [
                    left.eq(left - 1),
                    left_one.eq(left == 2),
                    self.batch_base.eq(self.batch_base + self.stride),
                    self.layer.eq(0),
                ]
                with m.If(left_one | (kind != RUN_KINDS["train"])):
                    goto("IDLE")
                with m.Else():
                    goto("EVAL")
        return m
