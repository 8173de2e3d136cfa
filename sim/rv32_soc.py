"""A test system for RV32Core: the core, a ROM and a RAM on its bus (simulation only).

:class:`RV32SoC` maps a ROM at byte address 0 and a RAM at :data:`RAM_BASE`; the bus
decodes byte address bit 28 only (other addresses mirror them). Stores to the ROM are
ignored. The slave's timing is a parameter:

* ``latency=1`` (default): a block RAM, ``ready`` the cycle after the request;
* ``latency=0``: combinational, ``ready`` in the request's first cycle;
* ``waits=N`` (with latency 1): before each answer, 0..N extra cycles drawn from a
  16-bit LFSR seeded with ``seed``.

``dbg_addr``/``dbg_data`` read a RAM word combinationally (cocotb reads results with
them after the core halts). Used by tests/test_rtl_cpu.py (Amaranth simulator) and, as
Verilog, by sim/cocotb_cpu.py.
"""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..rtl.cpu.rv32 import RV32Core

__all__ = ["RAM_BASE", "RV32SoC"]

RAM_BASE = 0x1000_0000
_SEL_BIT = 26  # word-address bit of byte address bit 28


class RV32SoC(wiring.Component):
    """RV32Core + ROM (``rom`` words) + RAM (``ram_words`` words, ``ram_init`` words).

    Interface attributes
    --------------------
    halted, fault : Out(1)
        The core's.
    cycles : Out(32)
        Clock cycles since reset (stops counting when halted).
    dbg_addr : In(ram address bits), dbg_data : Out(32)
        Combinational read of RAM word ``dbg_addr``.
    """

    def __init__(
        self,
        rom: list[int],
        ram_words: int,
        *,
        ram_init: list[int] | None = None,
        latency: int = 1,
        waits: int = 0,
        seed: int = 1,
        **core_params,
    ):
        if latency not in (0, 1):
            raise ValueError(f"latency={latency} is not 0 or 1")
        if waits and latency == 0:
            raise ValueError("waits need latency=1")
        self.rom_init = list(rom) or [0]
        self.ram_words = ram_words
        self.ram_init = list(ram_init or [])
        self.latency = latency
        self.waits = waits
        self.seed = seed & 0xFFFF or 1
        self.core = RV32Core(**core_params)
        self.rom = memory.Memory(shape=32, depth=len(self.rom_init), init=self.rom_init)
        self.ram = memory.Memory(shape=32, depth=ram_words, init=self.ram_init)
        self.ram_bits = max(1, ceil_log2(ram_words))
        super().__init__(
            {
                "halted": Out(1),
                "fault": Out(1),
                "cycles": Out(32),
                "dbg_addr": In(self.ram_bits),
                "dbg_data": Out(32),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        m.submodules.rom = rom = self.rom
        m.submodules.ram = ram = self.ram
        bus = core.bus
        comb = self.latency == 0
        rom_r = rom.read_port(domain="comb" if comb else "sync")
        ram_r = ram.read_port(domain="comb" if comb else "sync")
        ram_w = ram.write_port(granularity=8)
        dbg = ram.read_port(domain="comb")
        rom_bits = max(1, ceil_log2(len(self.rom_init)))
        m.d.comb += [
            self.halted.eq(core.halted),
            self.fault.eq(core.fault),
            dbg.addr.eq(self.dbg_addr),
            self.dbg_data.eq(dbg.data),
            rom_r.addr.eq(bus.addr[:rom_bits]),
            ram_r.addr.eq(bus.addr[: self.ram_bits]),
            ram_w.addr.eq(bus.addr[: self.ram_bits]),
            ram_w.data.eq(bus.wdata),
        ]
        with m.If(~core.halted):
            m.d.sync += self.cycles.eq(self.cycles + 1)

        is_ram = bus.addr[_SEL_BIT]
        if comb:
            m.d.comb += [
                bus.ready.eq(bus.valid),
                bus.rdata.eq(Mux(is_ram, ram_r.data, rom_r.data)),
                ram_w.en.eq(
                    Mux(bus.valid & bus.write & is_ram, bus.wmask, 0),
                ),
            ]
            return m

        # one-cycle synchronous read: the request is registered, ``ready`` follows
        pending = Signal()  # a request is being answered
        wait = Signal(3)  # extra cycles left before the answer
        sel_ram = Signal()
        lfsr = Signal(16, init=self.seed)
        m.d.sync += lfsr.eq(Mux(lfsr[0], (lfsr >> 1) ^ 0xB400, lfsr >> 1))
        ready = pending & (wait == 0)
        m.d.comb += [
            bus.ready.eq(ready),
            bus.rdata.eq(Mux(sel_ram, ram_r.data, rom_r.data)),
            rom_r.en.eq(bus.valid & ~pending),
            ram_r.en.eq(bus.valid & ~pending),
            ram_w.en.eq(Mux(ready & bus.write & sel_ram, bus.wmask, 0)),
        ]
        with m.If(bus.valid & ~pending):
            m.d.sync += [pending.eq(1), sel_ram.eq(is_ram)]
            if self.waits:
                # 0..waits extra cycles, about half of the requests without any
                draw = lfsr[:3]
                m.d.sync += wait.eq(Mux(lfsr[3] | (draw > self.waits), 0, draw))
        with m.If(pending & (wait != 0)):
            m.d.sync += wait.eq(wait - 1)
        with m.If(ready):
            m.d.sync += pending.eq(0)
        return m
