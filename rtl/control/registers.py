"""The accelerator's register file: every run-time parameter of spec 9.1, status, counters.

Registers are 32 bits wide on the command interface (:mod:`.command`); each holds as many
low bits as its field needs (writes keep those bits, reads return them zero-extended).
The map depends on ``max_layers`` only (one width register per layer boundary, one
activation shift per layer). docs/rtl.md prints the map.

Run-time values are stored as written; their ranges (spec 9.1) are checked when a run
starts (:class:`~pentegg.rtl.control.controller.Controller`), which sets an error flag and
does not run instead of running with an out-of-range value.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..params import check_int

__all__ = ["ID_VALUE", "NOISE_REGISTERS", "Register", "RegisterFile", "register_map"]

#: Read-only value of register ``id``: "PEGG".
ID_VALUE = 0x5045_4747


@dataclass(frozen=True)
class Register:
    name: str
    addr: int
    width: int
    access: str  # "rw": written by the host, "ro": driven by the accelerator
    reset: int = 0
    doc: str = ""


#: The registers (besides the widths) that the noise of spec 2 depends on: a write to
#: one of them means the evaluator's noise must be made again (``noise_w``).
NOISE_REGISTERS = ("population", "n_layers", "sigma_shift", "seed")


def register_map(max_layers: int) -> list[Register]:
    """The registers of an accelerator with ``max_layers`` weight layers (1..8)."""
    check_int("max_layers", max_layers, 1, 8)
    regs = [
        Register("id", 0x00, 32, "ro", ID_VALUE, "0x50454747 ('PEGG')"),
        Register("status", 0x01, 4, "ro", 0, "bit 0 busy, bit 1 error (sticky until a run)"),
        Register("error", 0x02, 16, "ro", 0, "error flags of the last run (docs/rtl.md)"),
        Register("step", 0x03, 16, "rw", 0, "next ES step t, 0..65534; +1 per step run"),
        Register("steps", 0x04, 16, "rw", 1, "ES steps per RUN train, 1..65535"),
        Register("population", 0x05, 13, "rw", 2, "even, 2..max_population"),
        Register("batch", 0x06, 16, "rw", 1, "samples per step, 1..max_batch"),
        Register("n_layers", 0x07, 4, "rw", 1, "weight layers, 1..max_layers"),
        Register("sigma_shift", 0x08, 4, "rw", 1, "0..8"),
        Register("shaping", 0x09, 1, "rw", 0, "0 rank, 1 sign"),
        Register("tau", 0x0A, 12, "rw", 16, "0..4095 (Q4)"),
        Register("latent_shift", 0x0B, 4, "rw", 3, "0..q_max (spec 9.1)"),
        Register("margin", 0x0C, 8, "rw", 32, "1..254"),
        Register("seed", 0x0D, 32, "rw", 0, "0..2^32-1"),
        Register("init", 0x0E, 1, "rw", 0, "0 zero, 1 random (RUN init)"),
        Register("batch_stride", 0x0F, 16, "rw", 0, "batch-index words per step (0: batch)"),
    ]
    regs += [
        Register(f"width{i}", 0x10 + i, 13, "rw", 1, f"n_{i}, 1..max_width")
        for i in range(max_layers + 1)
    ]
    regs += [
        Register(f"act_shift{l}", 0x20 + l, 4, "rw", 0, f"layer {l}'s shift, 0..15")
        for l in range(max_layers)
    ]
    regs += [Register("shared", 0x28, 1, "rw", 1, "1 shared inputs (scores), 0 per-member")]
    regs += [
        Register("cycles", 0x30, 32, "ro", 0, "cycles of the last run"),
        Register("eval_cycles", 0x31, 32, "ro", 0, "of which evaluating"),
        Register("shape_cycles", 0x32, 32, "ro", 0, "of which shaping (7.2, 8.2)"),
        Register("update_cycles", 0x33, 32, "ro", 0, "of which Z and the update (8)"),
        Register("theta", 0x34, 32, "ro", 0, "theta of the last step (8.2)"),
    ]
    return regs


class RegisterFile(wiring.Component):
    """Registers of :func:`register_map`, behind one write port and one read port.

    Interface attributes
    --------------------
    w_addr : In(8), w_data : In(32), w_en : In(1)
        A host write; writes to read-only or unmapped addresses are ignored. The register
        takes the value a cycle after ``w_en`` (latency 2 to its output): the address
        decode is registered into one write strobe per register, beside the value, so
        that no path runs from the command decoder's state across the die into a
        register's enables (the seed register sits by the noise fill's keyer: its 32
        enables were 32 of the 128-lane ULX3S build's 117 endpoints past 10 ns at
        005e676, seed 1, 10.80 ns). A command decoder's next command comes a cycle or
        more after a write, so a read or a run after a write sees the value.
    r_addr : In(8), r_data : Out(32)
        A host read, latency 2: two cycles after a cycle with ``r_addr = a`` (held for
        the next cycle too), ``r_data`` holds the value register ``a`` had in that
        cycle (unmapped addresses read 0).
    <name> : Out(width) for each ``rw`` register; In(width) for each ``ro`` one (``id``
        excepted, a constant).
    step_wr : In(1), step_next : In(16)
        The controller's write of ``step`` (it counts the steps run).
    noise_w : Out(1)
        A host write to a register the evaluator's noise depends on (``population``,
        ``n_layers``, ``sigma_shift``, ``seed``, a width), the cycle before it lands.
    """

    def __init__(self, max_layers: int):
        self.regs = register_map(max_layers)
        sig = {
            "w_addr": In(8),
            "w_data": In(32),
            "w_en": In(1),
            "r_addr": In(8),
            "r_data": Out(32),
            "step_wr": In(1),
            "step_next": In(16),
            "noise_w": Out(1),
        }
        for r in self.regs:
            if r.name == "id":
                continue
            sig[r.name] = (Out if r.access == "rw" else In)(r.width)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        w_data = Signal(32, reset_less=True)  # the write's value, a cycle late
        m.d.sync += w_data.eq(self.w_data)
        noise_w = []
        for r in self.regs:
            if r.access != "rw":
                continue
            reg = Signal(r.width, init=r.reset, name=f"reg_{r.name}")
            hit = Signal(name=f"wr_{r.name}")  # this register's write strobe
            m.d.sync += hit.eq(self.w_en & (self.w_addr == r.addr))
            m.d.comb += getattr(self, r.name).eq(reg)
            with m.If(hit):
                m.d.sync += reg.eq(w_data[: r.width])
            if r.name in NOISE_REGISTERS or r.name.startswith("width"):
                noise_w.append(hit)
            if r.name == "step":
                with m.If(self.step_wr):
                    m.d.sync += reg.eq(self.step_next)
        m.d.comb += self.noise_w.eq(Cat(*noise_w).any())
        # the read in two registered stages: the registers of each address row (the
        # address's high nibble) by its low nibble, then the row. The whole selection in
        # one cycle, from the command decoder's head into the response register, was the
        # 128-lane ULX3S build's critical path at 6796aae (seed 1, 10.21 ns, 8.03 of it
        # routing, 7 levels): the registers sit by their blocks, across the die.
        rows = {}
        for r in self.regs:
            rows.setdefault(r.addr >> 4, []).append(r)
        row_data = {}
        for hi, regs in rows.items():
            q = Signal(32, name=f"r_row{hi}")
            row_data[hi] = q
            with m.Switch(self.r_addr[:4]):
                for r in regs:
                    with m.Case(r.addr & 0xF):
                        value = r.reset if r.name == "id" else getattr(self, r.name)
                        m.d.sync += q.eq(value)
                with m.Default():
                    m.d.sync += q.eq(0)
        r_data = Signal(32)
        m.d.comb += self.r_data.eq(r_data)
        with m.Switch(self.r_addr[4:]):
            for hi, q in row_data.items():
                with m.Case(hi):
                    m.d.sync += r_data.eq(q)
            with m.Default():
                m.d.sync += r_data.eq(0)
        return m
