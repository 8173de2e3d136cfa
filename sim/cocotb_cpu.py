"""cocotb test of RV32Core running a firmware in sim/rv32_soc.py's RV32SoC (run by
tests/test_rtl_cpu.py through the harness, usually under Verilator).

Test environment (set by the pytest side):
``PENTEGG_TB_MAX_CYCLES`` the cycles the firmware may take before it must have halted;
``PENTEGG_TB_READ`` ``{name: [byte address, words]}``: RAM words read after the halt;
``PENTEGG_TB_EXPECT`` ``{name: [words]}``: what they must be (optional);
``PENTEGG_TB_OUT`` a JSON file the words read and the cycle count are written to.
"""

from __future__ import annotations

import json

import cocotb
from cocotb.triggers import ClockCycles, Timer

from pentegg.sim.harness import tb_value
from pentegg.sim.rv32_soc import RAM_BASE
from pentegg.sim.stream import reset, start_clock

#: clock cycles between two looks at ``halted``
POLL = 512


@cocotb.test()
async def firmware_halts_without_fault_and_leaves_its_results(dut):
    start_clock(dut)
    dut.dbg_addr.value = 0
    await reset(dut)
    limit = int(tb_value("max_cycles", 1_000_000))
    waited = 0
    while not int(dut.halted.value) and waited < limit:
        await ClockCycles(dut.clk, POLL)
        waited += POLL
    cycles = int(dut.cycles.value)
    assert int(dut.halted.value), f"the core did not halt within {limit} cycles"
    assert not int(dut.fault.value), f"the core halted on an illegal instruction ({cycles})"

    read = {}
    for name, (addr, count) in tb_value("read", {}).items():
        words = []
        for i in range(count):
            dut.dbg_addr.value = (addr - RAM_BASE) // 4 + i
            await Timer(1, unit="ns")
            words.append(int(dut.dbg_data.value))
        read[name] = words
    out = tb_value("out")
    if out:
        with open(out, "w") as f:
            json.dump({"cycles": cycles, "read": read}, f)
    for name, want in tb_value("expect", {}).items():
        got = read[name]
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g == w, f"{name}[{i}]: core {g:#010x}, expected {w:#010x}"
    dut._log.info(f"halted after {cycles} cycles")
