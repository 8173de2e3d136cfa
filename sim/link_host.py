"""A host on the byte streams of a simulated device (rtl/link/): sends bytes into ``rx``,
collects ``tx``, cuts frames with ``pentegg.link.FrameReader`` and parses responses.

Use it from an Amaranth simulator testbench::

    async def script(host):
        rsp = await host.request(Cmd.INFO, seq=1)
        ...

    run_link(Device(...), script)

Any component with ``rx: In(stream.Signature(8))`` and ``tx: Out(stream.Signature(8))``
(``Device``, ``LinkEngine`` with its Accelerator side driven elsewhere) works.
"""

from __future__ import annotations

from amaranth.sim import Simulator

from pentegg.link import FrameReader, Response, cobs_decode, parse_response, request_bytes

__all__ = ["LinkHost", "run_link"]


class LinkHost:
    """One simulated host: one byte per cycle into ``rx``; ``tx.ready`` always high, or
    with ``stall`` (a ``random.Random``) low in about half of the cycles, at random."""

    def __init__(self, ctx, dut, *, timeout: int = 200_000, stall=None):
        self.ctx, self.dut, self.timeout, self.stall = ctx, dut, timeout, stall
        self.reader = FrameReader()
        self.frames: list[bytes] = []  # received, COBS-encoded, not yet taken
        self.cycles = 0
        ctx.set(dut.tx.ready, 1)

    async def _tick(self, byte: int | None) -> bool:
        """One clock cycle offering ``byte`` (None: nothing) on ``rx``; True if taken."""
        ctx, dut = self.ctx, self.dut
        ctx.set(dut.rx.valid, byte is not None)
        if byte is not None:
            ctx.set(dut.rx.payload, byte)
        tr = 1 if self.stall is None else self.stall.random() < 0.5
        ctx.set(dut.tx.ready, tr)
        _, _, rdy, tv, tp = await ctx.tick().sample(dut.rx.ready, dut.tx.valid, dut.tx.payload)
        self.cycles += 1
        if tv and tr:
            self.frames += self.reader.feed(bytes([int(tp)]))
        return byte is not None and bool(rdy)

    async def send(self, data: bytes, *, frames: int = 1, settle: int = 0) -> list[bytes]:
        """Send ``data`` into ``rx``, then wait until ``frames`` frames have come out of
        ``tx`` (and ``settle`` more cycles); returns them COBS-decoded (a frame that is not
        valid COBS is returned as ``None``). With ``frames=0`` it waits ``settle`` cycles."""
        start = self.cycles
        for b in data:
            while not await self._tick(b):
                assert self.cycles - start < self.timeout, "rx not ready"
        self.ctx.set(self.dut.rx.valid, 0)
        while len(self.frames) < frames:
            await self._tick(None)
            assert self.cycles - start < self.timeout, "no response"
        for _ in range(settle):
            await self._tick(None)
        got, self.frames = self.frames, []
        out = []
        for f in got:
            try:
                out.append(cobs_decode(f))
            except ValueError:
                out.append(None)
        return out

    async def request(self, cmd: int, seq: int, payload: bytes = b"") -> Response:
        """One request and its response (exactly one frame expected)."""
        return await self.exchange(request_bytes(cmd, seq, payload))

    async def exchange(self, data: bytes) -> Response:
        """Raw request bytes in, the one response parsed."""
        (frame,) = await self.send(data, frames=1)
        return parse_response(frame)


def run_link(
    dut, script, *, timeout: int = 200_000, vcd: str | None = None, stall=None, top=None
) -> None:
    """Simulate ``dut`` running ``await script(host)`` with a :class:`LinkHost`; ``top``
    (which holds ``dut`` and may define the ``sync`` domain) is simulated if given."""

    async def bench(ctx):
        await script(LinkHost(ctx, dut, timeout=timeout, stall=stall))

    sim = Simulator(dut if top is None else top)
    sim.add_clock(1e-6, domain="sync")
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
