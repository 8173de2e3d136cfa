# amaranth: UnusedElaboratable=no
"""The command decoder and register file (Amaranth simulator)."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module, Mux, Signal
from amaranth.lib import memory
from amaranth.sim import Simulator

from pentegg.golden.config import Config
from pentegg.golden.digit import pack
from pentegg.golden.model import init_state
from pentegg.rtl.control import ID_VALUE, CommandDecoder, Op, RegisterFile, register_map
from pentegg.rtl.control.controller import RUN_KINDS, Controller
from pentegg.rtl.control.init import InitWriter
from pentegg.sim.scoreboard import Scoreboard


class _Bench:
    """A decoder wired to a register file, a 32-bit memory (sel 0) and a byte memory (sel
    1; ``packed``: the decoder's, e.g. ``{9: (1, 8, "w")}``), for tests."""

    def __init__(self, busy_cycles: int = 0, packed=None):
        self.m = m = Module()
        m.submodules.dec = self.dec = dec = CommandDecoder(packed=packed)
        m.submodules.regs = self.regs = regs = RegisterFile(max_layers=2)
        m.submodules.mem = mem = memory.Memory(shape=32, depth=64, init=[])
        m.submodules.mem8 = mem8 = memory.Memory(shape=8, depth=64, init=[])
        wp, rp = mem.write_port(), mem.read_port()
        wp8, rp8 = mem8.write_port(), mem8.read_port()
        m.d.comb += [
            regs.w_addr.eq(dec.reg_waddr),
            regs.w_data.eq(dec.reg_wdata),
            regs.w_en.eq(dec.reg_wen),
            regs.r_addr.eq(dec.reg_raddr),
            dec.reg_rdata.eq(regs.r_data),
            wp.addr.eq(dec.mem_addr),
            wp.data.eq(dec.mem_wdata),
            wp.en.eq(dec.mem_wen & (dec.mem_sel == 0)),
            rp.addr.eq(dec.mem_addr),
            rp.en.eq(dec.mem_ren),
            wp8.addr.eq(dec.mem_addr),
            wp8.data.eq(dec.mem_wdata),
            wp8.en.eq(dec.mem_wen & (dec.mem_sel == 1)),
            rp8.addr.eq(dec.mem_addr),
            rp8.en.eq(dec.mem_ren),
        ]
        sel = Signal(4)  # the read's select, sampled with it
        m.d.sync += sel.eq(dec.mem_sel)
        m.d.comb += dec.mem_rdata.eq(Mux(sel == 1, rp8.data, rp.data))

    def run(self, words, n_rsp, busy_for=0, busy_at=None):
        """Send ``words``, collect ``n_rsp`` response words and the runs (cycle, kind);
        ``busy`` is high for the first ``busy_for`` cycles (or where ``busy_at(cycle)``).
        ``self.writes``: the cycles of the register and memory write strobes,
        ``self.busy``: the busy cycles, ``self.bad``: ``bad_command`` at the end."""
        busy_at = busy_at or (lambda c: c < busy_for)
        self.busy = set()
        got, runs = [], []
        self.bad = False
        self.writes = []

        async def send(ctx):
            for w in words:
                ctx.set(self.dec.cmd.valid, 1)
                ctx.set(self.dec.cmd.payload, w)
                await ctx.tick().until(self.dec.cmd.ready)
            ctx.set(self.dec.cmd.valid, 0)

        async def recv(ctx):
            cycles = 0
            while len(got) < n_rsp or cycles < 60:
                ctx.set(self.dec.rsp.ready, cycles % 3 != 1)  # some back-pressure
                ctx.set(self.dec.busy, busy_at(cycles))
                if busy_at(cycles):
                    self.busy.add(cycles)
                _, _, v, r, p, run, kind, reg_wen, mem_wen = await ctx.tick().sample(
                    self.dec.rsp.valid,
                    self.dec.rsp.ready,
                    self.dec.rsp.payload,
                    self.dec.run,
                    self.dec.run_kind,
                    self.dec.reg_wen,
                    self.dec.mem_wen,
                )
                if v and r:
                    got.append(int(p))
                self.writes += [(cycles, "reg")] * bool(reg_wen) + [(cycles, "mem")] * bool(mem_wen)
                if run:
                    runs.append((cycles, int(kind)))
                self.bad = bool(ctx.get(self.dec.bad_command))
                cycles += 1
                assert cycles < 2000, "the decoder stalled"

        sim = Simulator(self.m)
        sim.add_clock(1e-6)
        sim.add_testbench(send, background=True)
        sim.add_testbench(recv)
        sim.run()
        return got, runs


_REGS = register_map(2)


def _wreg(name, value):
    addr = next(r.addr for r in _REGS if r.name == name)
    return [(Op.WREG.value << 28) | addr, value]


def _rreg(name):
    return [(Op.RREG.value << 28) | next(r.addr for r in _REGS if r.name == name)]


def test_register_writes_read_back_truncated_to_their_width_and_id_is_constant():
    words = [*_wreg("tau", 0xFFFF_F123), *_wreg("seed", 0xDEADBEEF), *_wreg("width2", 70)]
    words += _rreg("tau") + _rreg("seed") + _rreg("width2") + _rreg("id") + _rreg("margin")
    got, _ = _Bench().run(words, 5)
    assert got == [0x123, 0xDEADBEEF, 70, ID_VALUE, 32]


def test_unmapped_register_addresses_read_zero_in_a_mapped_row_and_an_empty_one():
    """Reads of 0x2F (row 2 holds act_shift and shared), 0x40 and 0xFF (rows with no
    register), each after a read of a non-zero register (0x2F after ``shared``, 1, of
    its own row): 0, not the last value read."""
    words = [*_wreg("seed", 0xDEADBEEF)]
    for before, addr in (("shared", 0x2F), ("seed", 0x40), ("seed", 0xFF)):
        words += [*_rreg(before), (Op.RREG.value << 28) | addr]
    got, _ = _Bench().run(words, 6)
    assert got == [1, 0, 0xDEADBEEF, 0, 0xDEADBEEF, 0]


def test_memory_block_write_then_read_back():
    data = [(i * 0x01010101) ^ 0x5A for i in range(7)]
    words = [(Op.WMEM.value << 28) | 5, len(data), *data]
    words += [(Op.RMEM.value << 28) | 5, len(data)]
    got, _ = _Bench().run(words, len(data))
    assert got == data


def test_run_waits_while_busy_and_carries_its_kind():
    _, runs = _Bench().run([(Op.RUN.value << 28) | 3], 0, busy_for=20)
    assert len(runs) == 1 and runs[0][1] == 3 and runs[0][0] >= 20


def test_unknown_op_sets_bad_command_and_the_next_word_is_a_header():
    b = _Bench()
    got, _ = b.run([0xF000_0000, *_rreg("id")], 1)
    assert got == [ID_VALUE] and b.bad


def test_a_run_clears_bad_command():
    b = _Bench()
    _, runs = b.run([0xF000_0000, (Op.RUN.value << 28) | 1], 0)
    assert [k for _, k in runs] == [1] and not b.bad


def test_register_and_memory_writes_wait_while_busy():
    """WREG and WMEM's data wait for ``busy`` to fall (RREG does not: a host polls during
    a run); the values written are read back after. Each alone: a write waiting would
    otherwise hold the next one back."""
    reg = [*_wreg("seed", 0x1234), *_rreg("seed")]
    mem = [(Op.WMEM.value << 28) | 3, 2, 7, 8, (Op.RMEM.value << 28) | 3, 2]
    for words, want, strobes in ((reg, [0x1234], ["reg"]), (mem, [7, 8], ["mem", "mem"])):
        b = _Bench()
        got, _ = b.run(words, len(want), busy_for=30)
        assert got == want and [w for _, w in b.writes] == strobes, (got, b.writes)
        assert min(c for c, _ in b.writes) >= 30, f"a write while busy: {b.writes}"


def test_a_memory_block_of_zero_words_is_a_header_and_its_count():
    """WMEM and RMEM with count 0 move no word and answer none: the next word is a
    header."""
    words = [(Op.WMEM.value << 28) | 5, 0, *_rreg("id"), (Op.RMEM.value << 28) | 5, 0]
    b = _Bench()
    got, _ = b.run([*words, *_rreg("margin")], 2)
    assert got == [ID_VALUE, 32] and b.writes == []


#: The benches' packed selects: 9 (written) and 12 (read) bytes of the byte memory, 11
#: 16-bit halves of the 32-bit memory (both ways).
PACKED = {9: (1, 8, "w"), 11: (0, 16, "rw"), 12: (1, 8, "r")}


def _wmem(sel, addr, data):
    return [(Op.WMEM.value << 28) | sel << 24 | addr, len(data), *data]


def _rmem(sel, addr, n):
    return [(Op.RMEM.value << 28) | sel << 24 | addr, n]


def test_a_packed_select_writes_its_byte_memory_four_bytes_a_word_low_byte_first():
    """WMEM of packed select 9 at word 2: the byte memory's (select 1) bytes 8..19, each
    word's bits 7:0 first, a byte a cycle; the 32-bit memory (select 0) and the byte
    memory's other bytes untouched; a plain WMEM after it writes its own select."""
    data = [0x4433_2211, 0x8877_6655, 0xCCBB_AA99]
    words = _wmem(1, 0, [0xEE] * 24) + _wmem(0, 8, [7]) + _wmem(9, 2, data) + _wmem(0, 9, [5])
    words += _rmem(1, 0, 24) + _rmem(0, 8, 2)
    b = _Bench(packed=PACKED)
    got, _ = b.run(words, 26)
    bytes_ = [0xEE] * 8 + [(w >> 8 * j) & 0xFF for w in data for j in range(4)] + [0xEE] * 4
    assert got == [*bytes_, 7, 5], [hex(v) for v in got]
    mem = [c for c, w in b.writes if w == "mem"]
    packed = mem[24 + 1 : 24 + 1 + 12]
    assert packed == list(range(packed[0], packed[0] + 12)), f"not a byte a cycle: {packed}"


def test_a_packed_words_bytes_wait_while_busy_and_none_is_written_twice():
    """``busy`` high on every third cycle, through the packed words' bytes: each byte is
    written once, in order, never in a busy cycle."""
    data = [0x0403_0201, 0x0807_0605]
    b = _Bench(packed=PACKED)
    got, _ = b.run(_wmem(9, 0, data) + _rmem(1, 0, 8), 8, busy_at=lambda c: c % 3 == 2)
    assert got == list(range(1, 9))
    mem = [c for c, w in b.writes if w == "mem"]
    assert len(mem) == 8 and not set(mem) & b.busy, (mem, sorted(b.busy)[:10])


def test_packed_reads_gather_their_elements_first_in_the_low_bits():
    """RMEM of packed select 11 (16-bit elements of the 32-bit memory) at word 1 and of 12
    (bytes of the byte memory) at word 2: each response word holds the elements from
    ``(32 / bits) addr`` on, the first in the low bits (only each element's low bits);
    a plain RMEM after them reads its own select from its own address."""
    mem32 = [(0xA5A5_0000 | i * 0x0101) for i in range(8)]
    mem8 = [(i * 37 + 5) & 0xFF for i in range(16)]
    words = _wmem(0, 0, mem32) + _wmem(1, 0, mem8)
    words += _rmem(11, 1, 3) + _rmem(12, 2, 2) + _rmem(0, 5, 1)
    got, _ = _Bench(packed=PACKED).run(words, 6)
    halves = [v & 0xFFFF for v in mem32]
    want16 = [halves[2 * i] | halves[2 * i + 1] << 16 for i in range(1, 4)]
    want8 = [sum(mem8[4 * i + j] << 8 * j for j in range(4)) for i in range(2, 4)]
    assert got == [*want16, *want8, mem32[5]], [hex(v) for v in got]


def test_a_packed_write_of_16_bit_elements_reads_back_through_the_same_select():
    """WMEM of packed select 11 (16-bit elements) then RMEM of it: the words come back (a
    target wider than 16 bits keeps only each element's low 16 bits defined)."""
    data = [0x1234_5678, 0x9ABC_DEF0, 0x0F1E_2D3C]
    got, _ = _Bench(packed=PACKED).run(_wmem(11, 2, data) + _rmem(11, 2, 3), 3)
    assert got == data, [hex(v) for v in got]


def test_a_packed_select_in_its_other_direction_reaches_no_memory():
    """WMEM of read-only packed select 12 is decoded as of select 12 (no memory): the byte
    memory and the 32-bit memory keep what they held."""
    words = _wmem(1, 0, [7] * 8) + _wmem(0, 0, [9] * 2) + _wmem(12, 0, [0xFFFF_FFFF] * 2)
    got, _ = _Bench(packed=PACKED).run(words + _rmem(1, 0, 8) + _rmem(0, 0, 2), 10)
    assert got == [7] * 8 + [9] * 2


def test_packed_selects_are_checked():
    with pytest.raises(ValueError, match=r"^packed select=16 is not an integer in 0\.\.15$"):
        CommandDecoder(packed={16: (1, 8, "w")})
    with pytest.raises(ValueError, match="both packed and a target"):
        CommandDecoder(packed={9: (1, 8, "w"), 1: (2, 8, "r")})
    with pytest.raises(ValueError, match=r"^packed\[9\] element bits=4 is not one of 8, 16$"):
        CommandDecoder(packed={9: (1, 4, "w")})
    with pytest.raises(ValueError, match=r"^packed\[9\] access='x' is not one of r, w, rw$"):
        CommandDecoder(packed={9: (1, 8, "x")})


@pytest.mark.parametrize("max_layers", [0, 9])
def test_register_map_rejects_max_layers_out_of_range(max_layers):
    with pytest.raises(ValueError, match=r"max_layers=.* 1\.\.8"):
        register_map(max_layers)


def _controller_run(
    kind, *, steps=1, step=0, n_layers=2, errors=None, block_cycles=5, members_ok=1, params_ok=1
):
    """Drive a Controller with model blocks that stay busy ``block_cycles`` cycles (the
    per-member fit check too, answering ``members_ok`` when it ends) and the register
    check's ``params_ok``; returns the phases it started, in order, and its final
    outputs."""
    errors = errors or {}
    ctl = Controller()
    log = []

    def block(name, start, busy, err=None):
        async def proc(ctx):
            left = 0
            async for _, _, st, layer, base in ctx.tick().sample(start, ctl.layer, ctl.batch_base):
                if st:
                    log.append((name, layer, base))
                    left = block_cycles
                    if err is not None:
                        ctx.set(err, errors.get(name, 0))
                elif left:
                    left -= 1
                ctx.set(busy, left > 0)

        return proc

    out = {}

    async def bench(ctx):
        ctx.set(ctl.steps, steps)
        ctx.set(ctl.step, step)
        ctx.set(ctl.stride, 7)
        ctx.set(ctl.n_layers, n_layers)
        ctx.set(ctl.run_kind, kind)
        ctx.set(ctl.params_ok, params_ok)
        ctx.set(ctl.run, 1)
        await ctx.tick()
        ctx.set(ctl.run, 0)
        cur = step
        for _ in range(5000):
            await ctx.tick()
            if ctx.get(ctl.step_wr):
                cur += 1
            ctx.set(ctl.step, cur)
            if not ctx.get(ctl.busy):
                break
        out.update(
            step=cur,
            error=ctx.get(ctl.error),
            cycles=ctx.get(ctl.cycles),
            split=[ctx.get(getattr(ctl, f"{p}_cycles")) for p in ("eval", "shape", "update")],
        )

    sim = Simulator(ctl)
    sim.add_clock(1e-6)
    sim.add_process(block("eval", ctl.ev_start, ctl.ev_busy, ctl.ev_error))
    sim.add_process(block("shape", ctl.sh_start, ctl.sh_busy, ctl.sh_error))
    sim.add_process(block("vote", ctl.vote_start, ctl.vote_busy))
    sim.add_process(block("apply", ctl.apply_start, ctl.apply_busy, ctl.up_error))
    sim.add_process(block("init", ctl.init_start, ctl.init_busy))
    sim.add_process(block("members", ctl.members_start, ctl.members_busy))

    async def members_answer(ctx):  # the check's answer appears only when it ends
        async for (busy,) in ctx.changed(ctl.members_busy):
            ctx.set(ctl.members_ok, 1 if busy else members_ok)

    sim.add_process(members_answer)
    # phase_is: one-hot every cycle, the idle bit whenever the controller is not busy
    # (and in its own states between phases), a block's bit from its start strobe
    # through its busy (it owns the memory ports then)
    bad_phase = []  # (cycle, phase_is, what)
    owners = [
        (1, ctl.ev_start, ctl.ev_busy),
        (2, ctl.sh_start, ctl.sh_busy),
        (3, ctl.vote_start, ctl.vote_busy),
        (4, ctl.apply_start, ctl.apply_busy),
        (5, ctl.init_start, ctl.init_busy),
    ]

    async def phase_one_hot(ctx):
        cycle = 0
        sigs = [ctl.phase_is, ctl.busy] + [x for _, st, bz in owners for x in (st, bz)]
        async for _, _, ph_is, busy, *blocks in ctx.tick().sample(*sigs):
            if ph_is == 0 or ph_is & (ph_is - 1):
                bad_phase.append((cycle, ph_is, "not one-hot"))
            if not busy and ph_is != 1:
                bad_phase.append((cycle, ph_is, "not idle while not busy"))
            for (code, _, _), st, bz in zip(owners, blocks[0::2], blocks[1::2], strict=True):
                if (st or bz) and ph_is != 1 << code:
                    bad_phase.append((cycle, ph_is, f"phase {code}'s block running"))
            cycle += 1

    sim.add_process(phase_one_hot)
    sim.add_testbench(bench)
    sim.run()
    assert not bad_phase, f"phase_is wrong first at (cycle, phase_is, why) {bad_phase[0]}"
    checks = [e for e in log if e[0] == "members"]
    log = [e for e in log if e[0] != "members"]
    out["members_checks"] = len(checks)
    return log, out


def test_controller_train_runs_the_steps_of_spec_10_2_in_order():
    log, out = _controller_run(RUN_KINDS["train"], steps=2, step=5, n_layers=2)
    one = [("shape", 0), ("vote", 0), ("apply", 0), ("vote", 1), ("apply", 1)]
    assert [(n, l) for n, l, _ in log] == [("eval", 0), *one, ("eval", 0), *one]
    assert [b for n, _, b in log if n == "eval"] == [0, 7]  # batch indices of step i
    assert out["step"] == 7 and out["error"] == 0
    assert sum(out["split"]) <= out["cycles"] and min(out["split"]) > 0


def test_controller_update_only_shapes_and_updates_once_and_eval_only_evaluates():
    log, out = _controller_run(RUN_KINDS["update"], step=3, n_layers=1)
    assert [n for n, _, _ in log] == ["shape", "vote", "apply"] and out["step"] == 4
    log, out = _controller_run(RUN_KINDS["eval"], step=3)
    assert [n for n, _, _ in log] == ["eval"] and out["step"] == 3


def test_controller_stops_on_a_block_error_and_flags_it():
    log, out = _controller_run(RUN_KINDS["train"], steps=3, errors={"shape": 1})
    assert [n for n, _, _ in log] == ["eval", "shape"]
    assert out["error"] == 1 << 9 and out["step"] == 0
    log, out = _controller_run(RUN_KINDS["train"], errors={"eval": 0b100})
    assert [n for n, _, _ in log] == ["eval"] and out["error"] == 0b100


def test_controller_refuses_train_and_eval_whose_members_do_not_fit_with_flag_15():
    for kind in ("train", "eval"):
        log, out = _controller_run(RUN_KINDS[kind], members_ok=0)
        assert log == [] and out["error"] == 1 << 15 and out["step"] == 0
        assert out["members_checks"] == 1
    log, out = _controller_run(RUN_KINDS["update"], n_layers=1, members_ok=0)
    assert [n for n, _, _ in log] == ["shape", "vote", "apply"] and out["error"] == 0
    log, out = _controller_run(RUN_KINDS["eval"])
    assert [n for n, _, _ in log] == ["eval"] and out["error"] == 0


def test_controller_refuses_steps_past_65534_and_unknown_kinds():
    log, out = _controller_run(RUN_KINDS["train"], steps=2, step=65534)
    assert log == [] and out["error"] == 1 << 11
    log, out = _controller_run(RUN_KINDS["train"], steps=0, step=3)
    assert log == [] and out["error"] == 1 << 11
    log, out = _controller_run(RUN_KINDS["update"], step=65535, n_layers=1)
    assert log == [] and out["error"] == 1 << 11
    log, out = _controller_run(RUN_KINDS["train"], steps=1, step=65534, n_layers=1)
    assert out["error"] == 0 and out["step"] == 65535
    log, out = _controller_run(9)
    assert log == [] and out["error"] == 1 << 12
    # an UPDATE at step 65534 is the last that may run (it makes step 65535)
    log, out = _controller_run(RUN_KINDS["update"], step=65534, n_layers=1)
    assert [n for n, _, _ in log] == ["shape", "vote", "apply"]
    assert out["error"] == 0 and out["step"] == 65535


def test_controller_refuses_every_run_but_init_while_a_register_is_out_of_range():
    """``params_ok`` low (the register check, error flag 13) refuses EVAL, TRAIN and
    UPDATE before any phase; INIT does not depend on those registers and runs."""
    log, out = _controller_run(RUN_KINDS["init"], params_ok=0)
    assert [n for n, _, _ in log] == ["init"] and out["error"] == 0
    for kind in ("eval", "train", "update"):
        log, out = _controller_run(RUN_KINDS[kind], n_layers=1, params_ok=0)
        assert log == [] and out["error"] == 1 << 13, (kind, log, out)


def test_controller_cycle_split_counts_every_phase_cycle():
    """``eval_cycles``, ``shape_cycles``, ``update_cycles`` (votes and apply together):
    each grows by exactly the cycles its model blocks are made to take longer."""
    runs = {
        bc: _controller_run(RUN_KINDS["train"], n_layers=2, block_cycles=bc)[1]["split"]
        for bc in (5, 50)
    }
    # a longer block adds 45 cycles to each block run: eval 1, shape 1, vote 2 + apply 2
    grew = [b - a for a, b in zip(runs[5], runs[50], strict=True)]
    assert grew == [45, 45, 4 * 45], runs


def _init_run(cfg, update="latent"):
    wb = max(cfg.layers).bit_length() + 1
    dut = InitWriter(
        max_layers=3,
        width_bits=wb,
        waddr_bits=12,
        vaddr_bits=14,
        update=update,
        latent_bits=cfg.latent_bits,
        digits=cfg.digits,
    )
    words, lat = {}, {}

    async def bench(ctx):
        ctx.set(dut.init, cfg.init == "random")
        ctx.set(dut.seed, cfg.seed)
        ctx.set(dut.n_layers, cfg.n_layers)
        for i, w in enumerate(cfg.layers):
            ctx.set(dut.widths[i], w)
        ctx.set(dut.latent_shift, cfg.latent_shift)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        after = 0  # cycles since busy fell
        for _ in range(100_000):
            _, _, busy, we, wa, wd, ve, va, vd = await ctx.tick().sample(
                dut.busy, dut.w_en, dut.w_addr, dut.w_data, dut.v_en, dut.v_addr, dut.v_data
            )
            # the accelerator routes the memories' write ports to the writer by phase,
            # which ends when busy falls: every write must come while busy is high
            assert busy or not (we or ve), "a write in a cycle where busy is low"
            if we:
                assert wa not in words, f"weight word {wa} written twice"
                words[wa] = wd
            if ve:
                lat[va] = vd
            after = 0 if busy else after + 1
            if after == 3:
                break

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return words, lat


@pytest.mark.parametrize(
    "layers, init, digits, latent_bits, q",
    [
        ((2, 8, 2), "random", "binomial", 8, 3),
        ((5, 3, 1, 4), "random", "uniform", 6, 2),
        ((4, 16, 2), "zero", "binomial", 8, 1),
        ((1, 1), "random", "binomial", 3, 0),
        ((7, 6), "random", "uniform", 8, 6),
    ],
)
def test_init_writer_writes_golden_initial_weights_and_latent(layers, init, digits, latent_bits, q):
    cfg = Config(
        layers=layers,
        init=init,
        digits=digits,
        latent_bits=latent_bits,
        latent_shift=q,
        seed=0xC0FFEE + len(layers),
    ).validate()
    state = init_state(cfg)
    want_w = np.concatenate([pack(w) for w in state.weights])
    want_v = np.concatenate([v.ravel() for v in state.latent])
    words, lat = _init_run(cfg)
    board = Scoreboard(f"init {layers} {init} {digits}")
    board.check("weight words", want_w, np.array([words.get(i, -1) for i in range(len(want_w))]))
    board.check("latent", want_v, np.array([lat.get(i, -999) for i in range(len(want_v))]))
    assert len(words) == len(want_w) and len(lat) == len(want_v)


def test_init_writer_pentary_update_writes_no_latent():
    cfg = Config(layers=(3, 4), init="random", update="pentary").validate()
    words, lat = _init_run(cfg, update="pentary")
    assert lat == {}
    want = np.concatenate([pack(w) for w in init_state(cfg).weights])
    Scoreboard("init pentary").check(
        "weight words", want, np.array([words[i] for i in range(len(want))])
    )


def test_docs_register_table_is_the_register_map():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "rtl.md").read_text()
    rows = [line.split("|")[1:5] for line in text.splitlines() if line.startswith("| `0x")]
    doc = [(int(a.strip(" `"), 16), n.strip(" `"), int(b), acc.strip()) for a, n, b, acc in rows]
    assert doc == [(r.addr, r.name, r.width, r.access) for r in register_map(8)]
