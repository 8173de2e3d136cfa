"""A stand-in for the link device of the native simulation's tests: a byte echo.

:class:`EchoDevice` has the link device's ports (``rx`` bytes in, ``tx`` bytes out, both
``stream.Signature(8)``) and returns every byte it receives, 0x00 delimiters included,
through a FIFO. After each 0x00 it sends it holds its output for ``latency`` cycles, so
that a frame's "response" ends ``latency`` cycles after the next one arrived: the native
harness must keep clocking while a response is outstanding.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

__all__ = ["EchoDevice"]


class EchoDevice(wiring.Component):
    """``tx`` returns the bytes of ``rx`` in order, through a ``depth``-byte FIFO."""

    def __init__(self, depth: int = 16, latency: int = 0):
        if depth < 1 or latency < 0:
            raise ValueError(f"depth={depth} must be >= 1 and latency={latency} >= 0")
        self.depth, self.latency = depth, latency
        super().__init__({"rx": In(stream.Signature(8)), "tx": Out(stream.Signature(8))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SyncFIFO(width=8, depth=self.depth)
        wiring.connect(m, wiring.flipped(self.rx), fifo.w_stream)
        wait = Signal(range(self.latency + 1))
        m.d.comb += [
            self.tx.payload.eq(fifo.r_data),
            self.tx.valid.eq(fifo.r_rdy & (wait == 0)),
            fifo.r_en.eq(self.tx.ready & (wait == 0)),
        ]
        if self.latency:
            with m.If(wait != 0):
                m.d.sync += wait.eq(wait - 1)
            with m.Elif(self.tx.valid & self.tx.ready & (self.tx.payload == 0)):
                m.d.sync += wait.eq(self.latency)
        return m


def measure(round_trips: int = 5000, bulk_bytes: int = 2_000_000, stall: int = 1 << 22) -> dict:
    """Speed of the simulated-device path with :class:`EchoDevice` (builds two echoes on
    first use): the mean round trip of an 18-byte request through :class:`SimTransport`,
    bulk echo throughput, and the harness's clock rate (from the time an echo with a
    ``stall``-cycle latency takes to answer)."""
    import time

    from ..link import request_bytes
    from ..transport import SimTransport
    from .native_build import native_device

    def exactly(t, n):
        got = bytearray()
        while len(got) < n:
            got += t.read(10.0)
        return bytes(got)

    out = {}
    with SimTransport.for_device(EchoDevice, {"depth": 16, "latency": 0}) as t:
        req = request_bytes(0x03, 1, bytes(range(1, 9)))
        for _ in range(100):  # warm up
            t.write(req)
            exactly(t, len(req))
        t0 = time.perf_counter()
        for _ in range(round_trips):
            t.write(req)
            exactly(t, len(req))
        out["round_trip_us"] = (time.perf_counter() - t0) / round_trips * 1e6
        out["request_bytes"] = len(req)
        data = bytes(i % 255 + 1 for i in range(bulk_bytes)) + b"\x00"
        t0 = time.perf_counter()
        t.write(data)
        assert exactly(t, len(data)) == data
        out["bulk_mb_s"] = len(data) / (time.perf_counter() - t0) / 1e6
    with SimTransport(native_device(EchoDevice, {"depth": 16, "latency": stall})) as t:
        frame = b"\x00\x01\x00"  # the first 0x00 out starts the stall; the frame ends after it
        t0 = time.perf_counter()
        t.write(frame)
        exactly(t, len(frame))
        out["cycles_per_s"] = stall / (time.perf_counter() - t0)
    return out


if __name__ == "__main__":
    r = measure()
    print(
        f"round trip ({r['request_bytes']} bytes each way): {r['round_trip_us']:.1f} us; "
        f"bulk echo: {r['bulk_mb_s']:.1f} MB/s; "
        f"harness clock: {r['cycles_per_s'] / 1e6:.1f} M cycles/s"
    )
