"""EvaluatorSystem: a PopulationEvaluator with its external memories, for simulation.

The evaluator reads weight, sample, label and batch-index memories and keeps scores in a
score memory that the accelerator owns. For cocotb (Icarus, Verilator) and the cycle
benchmark this wrapper holds them as plain memories behind one load port, so that a
testbench loads a job in a few thousand cycles and then only waits: the simulator then
runs at full speed (no Python in every cycle). It also counts the cycles of a run.

Not a hardware block of the accelerator (that is issue 10's Accelerator top): a fixture.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from pentegg.rtl.evaluator.evaluator import PopulationEvaluator, out_logits_layout
from pentegg.rtl.evaluator.pass_engine import ACTIVITY_LAYOUT

__all__ = ["LOAD_TARGETS", "EvaluatorSystem"]

#: ``ld_sel`` values.
LOAD_TARGETS = {"weights": 0, "samples": 1, "labels": 2, "batch": 3}
RUN_INPUTS = (
    "n_layers",
    "widths",
    "act_shifts",
    "sigma_shift",
    "margin",
    "population",
    "batch",
    "seed",
    "step",
    "shared",
    "keep",
    "pre",
    "pre_step",
)


class EvaluatorSystem(wiring.Component):
    """PopulationEvaluator + weight / sample / label / batch-index / score memories.

    Parameters
    ----------
    weight_words, sample_bytes, label_words, batch_words, score_words : int
        Memory depths.
    **evaluator
        The PopulationEvaluator's elaboration parameters.

    Interface attributes
    --------------------
    The evaluator's run-time inputs, ``start``, ``busy``, ``error``, ``inp``, ``logits``;
    ``ld_sel``, ``ld_addr``, ``ld_data``, ``ld_en``: write ``ld_data`` into memory
    ``ld_sel`` (:data:`LOAD_TARGETS`) at ``ld_addr``; ``rb_addr`` / ``rb_data``: the score
    memory, read one cycle after the address; ``cycles``: cycles from the last ``start``
    until ``busy`` fell; ``counters``: the cycles of that run per field of
    ``ACTIVITY_LAYOUT`` (what the lanes did).
    """

    def __init__(
        self,
        *,
        weight_words: int = 2048,
        sample_bytes: int = 4096,
        label_words: int = 256,
        batch_words: int = 256,
        score_words: int = 4096,
        **evaluator,
    ):
        self.evaluator = PopulationEvaluator(**evaluator)
        self.evaluator._MustUse__silence = True
        self.depths = {
            "weights": weight_words,
            "samples": sample_bytes,
            "labels": label_words,
            "batch": batch_words,
            "scores": score_words,
        }
        ev = self.evaluator
        p = ev.params
        sig = {name: In(ev.signature.members[name].shape) for name in RUN_INPUTS}
        super().__init__(
            {
                **sig,
                "start": In(1),
                "busy": Out(1),
                "error": Out(ev.signature.members["error"].shape),
                "ld_sel": In(2),
                "ld_addr": In(16),
                "ld_data": In(16),
                "ld_en": In(1),
                "rb_addr": In(12),
                "rb_data": Out(p.score_bits),
                "cycles": Out(32),
                "counters": Out(data.ArrayLayout(32, len(ACTIVITY_LAYOUT.members))),
                "inp": In(stream.Signature(8 * p.lanes)),
                "logits": Out(stream.Signature(out_logits_layout(p))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.ev = ev = self.evaluator
        lat = ev.params.mem_latency
        for name in RUN_INPUTS:
            m.d.comb += getattr(ev, name).eq(getattr(self, name))
        m.d.comb += [
            ev.start.eq(self.start),
            self.busy.eq(ev.busy),
            self.error.eq(ev.error),
        ]
        wiring.connect(m, wiring.flipped(self.inp), ev.inp)
        wiring.connect(m, ev.logits, wiring.flipped(self.logits))

        def delayed(m, value, n, name):
            """``value`` delayed by ``n`` cycles (n >= 0)."""
            for j in range(n):
                reg = Signal.like(value, name=f"{name}_d{j}")
                m.d.sync += reg.eq(value)
                value = reg
            return value

        def read_only(name, width, en, addr, data, sel):
            mem = memory.Memory(shape=width, depth=self.depths[name], init=[])
            m.submodules[f"mem_{name}"] = mem
            wp = mem.write_port()
            m.d.comb += [
                wp.addr.eq(self.ld_addr),
                wp.data.eq(self.ld_data),
                wp.en.eq(self.ld_en & (self.ld_sel == sel)),
            ]
            rp = mem.read_port()  # one cycle; the rest of the latency after it
            m.d.comb += [rp.addr.eq(addr), rp.en.eq(en)]
            m.d.comb += data.eq(delayed(m, rp.data, lat - 1, name))

        read_only("weights", 16, ev.w_en, ev.w_addr, ev.w_data, 0)
        read_only("samples", 8, ev.s_en, ev.s_addr, ev.s_data, 1)
        read_only("labels", 16, ev.l_en, ev.l_addr, ev.l_data, 2)
        read_only("batch", 16, ev.b_en, ev.b_addr, ev.b_data, 3)

        sb = ev.params.score_bits
        scores = memory.Memory(shape=sb, depth=self.depths["scores"], init=[])
        m.submodules.mem_scores = scores
        sw = scores.write_port()
        m.d.comb += [sw.addr.eq(ev.sc_waddr), sw.data.eq(ev.sc_wdata), sw.en.eq(ev.sc_wen)]
        sr = scores.read_port()
        m.d.comb += [sr.addr.eq(ev.sc_raddr), sr.en.eq(ev.sc_ren)]
        m.d.comb += ev.sc_rdata.eq(delayed(m, sr.data, lat - 1, "sc"))
        rb = scores.read_port()
        m.d.comb += [rb.addr.eq(self.rb_addr), rb.en.eq(1), self.rb_data.eq(rb.data)]

        counting = Signal()
        with m.If(self.start):
            m.d.sync += [self.cycles.eq(0), counting.eq(1)]
            m.d.sync += [c.eq(0) for c in self.counters]
        with m.Elif(counting):
            m.d.sync += self.cycles.eq(self.cycles + 1)
            for j, name in enumerate(ACTIVITY_LAYOUT.members):
                with m.If(getattr(ev.activity, name)):
                    m.d.sync += self.counters[j].eq(self.counters[j] + 1)
            with m.If(~ev.busy):
                m.d.sync += counting.eq(0)
        return m
