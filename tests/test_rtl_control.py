"""The command decoder and register file (Amaranth simulator)."""

from __future__ import annotations

import pytest
from amaranth import Module
from amaranth.lib import memory
from amaranth.sim import Simulator

from pentegg.rtl.control import ID_VALUE, CommandDecoder, Op, RegisterFile, register_map


class _Bench:
    """A decoder wired to a register file and one 32-bit memory (sel 0), for tests."""

    def __init__(self, busy_cycles: int = 0):
        self.m = m = Module()
        m.submodules.dec = self.dec = dec = CommandDecoder()
        m.submodules.regs = self.regs = regs = RegisterFile(max_layers=2)
        m.submodules.mem = mem = memory.Memory(shape=32, depth=64, init=[])
        wp, rp = mem.write_port(), mem.read_port()
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
            dec.mem_rdata.eq(rp.data),
        ]

    def run(self, words, n_rsp, busy_for=0):
        got, runs = [], []
        self.bad = False

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
                ctx.set(self.dec.busy, cycles < busy_for)
                _, _, v, r, p, run, kind = await ctx.tick().sample(
                    self.dec.rsp.valid,
                    self.dec.rsp.ready,
                    self.dec.rsp.payload,
                    self.dec.run,
                    self.dec.run_kind,
                )
                if v and r:
                    got.append(int(p))
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


@pytest.mark.parametrize("max_layers", [0, 9])
def test_register_map_rejects_max_layers_out_of_range(max_layers):
    with pytest.raises(ValueError, match=r"max_layers=.* 1\.\.8"):
        register_map(max_layers)
