"""A collision monitor for the Amaranth simulator (the tests of every block whose
memories carry :data:`~pentegg.rtl.bram.NO_RW_CHECK`)."""

from __future__ import annotations

__all__ = ["CollisionMonitor", "simulate_watched"]


class CollisionMonitor:
    """Watches memories built with :data:`~pentegg.rtl.bram.NO_RW_CHECK` in the Amaranth
    simulator: a read whose word is used (its :class:`~pentegg.rtl.bram.RWWatch` ``used``
    high) of an address written in the same cycle is a *collision*, where the block RAM
    would give an unspecified word (the simulator gives the old one, so the golden
    comparison alone would not see it).

    ``watches()`` returns the ports once the design is elaborated; ``collisions`` lists
    ``(cycle, memory, address)``; ``ports`` and ``used_reads`` count what was watched.
    """

    def __init__(self, watches):
        self.watches = watches
        self.collisions: list[tuple[int, str, int]] = []
        self.ports = 0
        self.used_reads = 0

    def process(self):
        async def proc(ctx):
            ws = self.watches()
            self.ports = len(ws)
            sigs = [s for w in ws for s in (w.read.addr, w.write.addr, w.write.en, w.used)]
            cycle = 0
            async for _, _, *vals in ctx.tick().sample(*sigs):
                for j, w in enumerate(ws):
                    ra, wa, we, used = vals[4 * j : 4 * j + 4]
                    if used:
                        self.used_reads += 1
                        if we and ra == wa:
                            self.collisions.append((cycle, w.name, int(ra)))
                cycle += 1

        return proc

    def check(self) -> None:
        """Raise AssertionError naming the first collision, if any, or saying that the
        monitor saw no used read (no port to watch, or a ``used`` that never rose: it
        would pass whatever the design did)."""
        c = self.collisions
        if c:
            raise AssertionError(
                f"{len(c)} used reads of a word written in the same cycle; "
                f"first: cycle {c[0][0]}, memory {c[0][1]}, address {c[0][2]}"
            )
        if not self.used_reads:
            raise AssertionError(
                f"the collision monitor saw no used read ({self.ports} ports watched)"
            )


def simulate_watched(dut, testbench, watches, *, period: float = 1e-6, processes=()) -> None:
    """Run ``testbench`` against ``dut`` in the Amaranth simulator (one clock domain of
    ``period``) with a :class:`CollisionMonitor` on ``watches`` (and ``processes``, more
    background processes); raises AssertionError naming the first collision once the
    testbench has ended."""
    from amaranth.sim import Simulator

    monitor = CollisionMonitor(watches)
    sim = Simulator(dut)
    sim.add_clock(period)
    sim.add_testbench(testbench)
    sim.add_process(monitor.process())
    for proc in processes:
        sim.add_process(proc)
    sim.run()
    monitor.check()
