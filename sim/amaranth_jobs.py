"""Jobs of the keyed LowRankGenerator blocks in the Amaranth simulator (fast checks of
timing; the bit-exact checks run under cocotb, sim/cocotb_lrgen.py)."""

from __future__ import annotations

from amaranth.sim import Simulator

__all__ = ["quantized_job_timing"]


def quantized_job_timing(dut, case: dict) -> tuple[int, int]:
    """One quantized job of ``dut`` (``KeyedLowRankGenerator`` or
    ``CompactLowRankGenerator``) with ``e.ready`` always high: ``(busy, span)``, the
    cycles ``busy`` stays high after the start cycle and the cycles from the first to the
    last element of E. ``case`` holds ``seed, step, pair, layer, out, fan, sigma_shift``."""
    seen = {}

    async def bench(ctx):
        for k, v in case.items():
            ctx.set(getattr(dut, k), v)
        ctx.set(dut.e.ready, 1)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        n, first, last = 0, None, None
        while ctx.get(dut.busy):
            if ctx.get(dut.e.valid):
                first = n if first is None else first
                last = n
            await ctx.tick()
            n += 1
        seen.update(busy=n, span=last - first + 1)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return seen["busy"], seen["span"]
