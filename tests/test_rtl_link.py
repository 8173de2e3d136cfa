# amaranth: UnusedElaboratable=no
"""The host link in the Amaranth simulator: COBS blocks against pentegg.link, and the
Device (LinkEngine + a tiny Accelerator) answering every request of docs/protocol.md,
its errors included, each error followed by proof that nothing changed."""

from __future__ import annotations

import random
import struct

import pytest
from amaranth import ClockDomain, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.sim import Simulator

from pentegg import accel_protocol as ap
from pentegg.link import (
    cobs_decode,
    cobs_encode,
    crc16,
    decode_info,
    parse_response,
    request_frame,
    words,
)
from pentegg.rtl.link.cobs import CobsDecoder, CobsEncoder
from pentegg.rtl.link.device import Device
from pentegg.rtl.link.engine import LinkEngine
from pentegg.rtl.link.protocol import VERSION, Cmd, Status, max_payload
from pentegg.sim.link_host import run_link

ML = 2
TINY = dict(
    lanes=1,
    max_layers=ML,
    max_width=8,
    max_population=8,
    max_batch=4,
    sample_bytes=64,
    label_words=16,
    batch_words=16,
    mem_latency=1,
)
FB = 256


def tiny_device(**kw):
    return Device(frame_bytes=FB, **{**TINY, **kw})


def reg(name):
    return next(r.addr for r in ap.register_map(ML) if r.name == name)


def unpack(payload):
    return list(struct.unpack(f"<{len(payload) // 4}I", payload))


# ---------------------------------------------------------------- COBS blocks


def cobs_cases():
    rng = random.Random(7)
    cases = [
        b"\x00",
        b"\x00\x00",
        b"\x01",
        b"\x00\x01",
        b"\x01\x00",
        bytes(range(1, 255)),  # 254 non-zero bytes: one full block
        bytes(range(1, 256)),  # 255: a full block and one more
        bytes([7] * 253),
        bytes([7] * 254) + b"\x00",
        b"\x00" + bytes([9] * 254),
        bytes([5] * 508),
        bytes([5] * 300) + b"\x00\x00" + bytes([6] * 254),
    ]
    for _ in range(12):
        n = rng.randrange(1, 600)
        zeros = rng.choice([0.0, 0.02, 0.3])
        cases.append(bytes(0 if rng.random() < zeros else rng.randrange(1, 256) for _ in range(n)))
    return cases


def test_cobs_decoder_matches_pentegg_link_on_random_and_corner_frames():
    cases = cobs_cases()
    stream_in = b"\x00".join(cobs_encode(c) for c in cases) + b"\x00"
    # plus an empty frame, and a broken one (a code byte pointing past the delimiter)
    stream_in += b"\x00" + b"\x05\x01\x02\x00"
    dut = CobsDecoder()
    frames = []

    async def bench(ctx):
        cur = bytearray()
        ctx.set(dut.o.ready, 1)
        for b in stream_in:
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload, b)
            while True:
                _, _, rdy, ov, op = await ctx.tick().sample(dut.i.ready, dut.o.valid, dut.o.payload)
                if ov:
                    if op.end:
                        frames.append((bytes(cur), int(op.error)))
                        cur.clear()
                    else:
                        cur.append(int(op.data))
                if rdy:
                    break

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert frames[: len(cases)] == [(c, 0) for c in cases]
    assert len(frames) == len(cases) + 1  # the empty frame gives nothing
    assert frames[-1][1] == 1


class _EncoderBench(wiring.Component):
    """The encoder reading a memory through ``latency - 1`` extra registers, at ``addr``
    or (``prev``) at ``addr_prev + 1``."""

    def __init__(self, data: bytes, latency: int, prev: bool = False):
        self.data = data
        self.prev = prev
        self.enc = CobsEncoder(12, latency=latency)
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.enc = enc = self.enc
        m.submodules.mem = mem = memory.Memory(
            shape=8, depth=max(1, len(self.data)), init=self.data
        )
        rp = mem.read_port()
        m.d.comb += rp.addr.eq((enc.addr_prev + 1)[:12] if self.prev else enc.addr)
        d = rp.data
        for i in range(self.enc.latency - 1):
            r = Signal(8, name=f"d{i}")
            m.d.sync += r.eq(d)
            d = r
        m.d.comb += enc.data.eq(d)
        return m


@pytest.mark.parametrize("latency, prev", [(1, False), (2, False), (3, False), (3, True)])
@pytest.mark.parametrize("case", range(len(cobs_cases())))
def test_cobs_encoder_gives_pentegg_link_bytes(case, latency, prev):
    """At every read latency, with ``o.ready`` low at random, the bytes are
    ``cobs_encode``'s and a delimiter; also when the source is read at ``addr_prev + 1``
    (``addr_prev`` is ``addr - 1`` at every read)."""
    data = cobs_cases()[case]
    top = _EncoderBench(data, latency, prev)
    enc = top.enc
    out = bytearray()
    rng = random.Random(case * 10 + latency)

    async def bench(ctx):
        ctx.set(enc.length, len(data))
        ctx.set(enc.start, 1)
        await ctx.tick()
        ctx.set(enc.start, 0)
        for _ in range(20 * len(data) + 200):
            ready = rng.random() < 0.6
            ctx.set(enc.o.ready, ready)
            _, _, v, p = await ctx.tick().sample(enc.o.valid, enc.o.payload)
            if v and ready:
                out.append(int(p))
                if p == 0:
                    break

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert bytes(out) == cobs_encode(data) + b"\x00"
    assert cobs_decode(bytes(out[:-1])) == data


# ---------------------------------------------------------------- parameters


def test_frame_bytes_out_of_range_is_a_one_line_error():
    for bad in (128, 300, 131072, "256"):
        with pytest.raises(
            ValueError, match=r"^frame_bytes=.* is not a power of two in 256..65536$"
        ):
            LinkEngine(frame_bytes=bad, memories={}, max_layers=2, info=[1])


# ---------------------------------------------------------------- the device


def test_info_decodes_to_the_builds_parameters():
    dut = tiny_device()

    async def script(host):
        rsp = await host.request(Cmd.INFO, 3)
        assert (rsp.seq, rsp.cmd, rsp.status) == (3, Cmd.INFO, Status.OK)
        info = decode_info(rsp.payload)
        assert info["magic"] == 0x50454747 and info["protocol"] == VERSION and info["spec"] == "1.0"
        assert (info["lanes"], info["max_layers"], info["max_width"]) == (1, ML, 8)
        assert (info["mode"], info["digits"], info["update"]) == ("lowrank", "binomial", "latent")
        assert (info["max_population"], info["max_batch"]) == (8, 4)
        assert (info["sample_bytes"], info["label_words"], info["batch_words"]) == (64, 16, 16)
        assert (info["frame_bytes"], info["clock_hz"], info["baud"]) == (FB, 0, 0)

    run_link(dut, script)


def pairs(**regs):
    return words(v for name, value in regs.items() for v in (reg(name), value))


def raw(frame: bytes) -> bytes:
    """The bytes a host sends for an already built (decoded) frame."""
    return b"\x00" + cobs_encode(frame) + b"\x00"


def with_crc(body: bytes) -> bytes:
    return body + crc16(body).to_bytes(2, "big")


SNAP_REGS = ["step", "steps", "population", "seed", "width1"]


async def snapshot(host):
    """Registers and memory contents that no rejected request may change."""
    regs = await host.request(Cmd.READ_REGS, 200, words(reg(n) for n in SNAP_REGS))
    mem = await host.request(Cmd.READ_MEM, 201, words([0 << 24 | 0, 4]))
    assert regs.status == mem.status == Status.OK
    return regs.payload, mem.payload


async def load(host):
    """Known, non-reset register values and weights."""
    r = await host.request(Cmd.WRITE_REGS, 210, pairs(population=6, seed=0xDEADBEEF, width1=5))
    w = await host.request(Cmd.WRITE_MEM, 211, words([0 << 24 | 0, *range(100, 108)]))
    v = await host.request(Cmd.WRITE_MEM, 212, words([1 << 24 | 0, 5, 6, 7, 8]))
    assert r.status == w.status == v.status == Status.OK


def test_write_regs_then_read_regs_round_trip():
    async def script(host):
        rsp = await host.request(
            Cmd.WRITE_REGS, 1, pairs(population=6, seed=0x12345678, width2=7, margin=0x1FF)
        )
        assert (rsp.seq, rsp.cmd, rsp.status, rsp.payload) == (1, Cmd.WRITE_REGS, Status.OK, b"")
        names = ["id", "population", "seed", "width2", "margin", "tau"]
        rsp = await host.request(Cmd.READ_REGS, 2, words(reg(n) for n in names))
        assert rsp.status == Status.OK
        # margin keeps its 8 low bits, tau its reset value
        assert rsp.words() == [0x50454747, 6, 0x12345678, 7, 0xFF, 16]

    run_link(tiny_device(), script)


def test_write_mem_then_read_mem_round_trip_on_weights():
    values = [(i * 0x1357 + 11) & 0xFFFF for i in range(27)]  # 3..29: the 30 packed words of TINY

    async def script(host):
        rsp = await host.request(Cmd.WRITE_MEM, 5, words([0 << 24 | 3, *values]))
        assert rsp.status == Status.OK and rsp.payload == b""
        rsp = await host.request(Cmd.READ_MEM, 6, words([0 << 24 | 3, len(values)]))
        assert rsp.status == Status.OK
        assert rsp.words() == values
        rsp = await host.request(Cmd.READ_MEM, 7, words([0 << 24 | 10, 2]))
        assert rsp.words() == values[7:9]

    run_link(tiny_device(), script)


async def wait_idle(host, seq=100, limit=2000):
    for i in range(limit):
        rsp = await host.request(Cmd.STATUS, (seq + i) & 0xFF)
        assert rsp.status == Status.OK and len(rsp.payload) == 12
        status, error, step = rsp.words()
        if not status & 1:
            return status, error, step
    raise AssertionError("still busy")


def test_run_init_then_status_until_not_busy():
    async def script(host):
        rsp = await host.request(Cmd.WRITE_REGS, 1, pairs(init=1, seed=99, width0=8, width1=8))
        assert rsp.status == Status.OK
        rsp = await host.request(Cmd.RUN, 2, words([3]))
        assert rsp.status == Status.OK and rsp.payload == b""
        rsp = await host.request(Cmd.STATUS, 3)
        assert rsp.words()[0] & 1, "STATUS right after RUN reports busy"
        status, error, step = await wait_idle(host)
        assert status == 0 and error == 0 and step == 0
        rsp = await host.request(Cmd.READ_MEM, 4, words([0 << 24, 4]))
        assert rsp.status == Status.OK and any(rsp.words()), "random init wrote weights"

    run_link(tiny_device(), script)


def test_empty_frames_get_no_response():
    async def script(host):
        assert await host.send(b"\x00\x00\x00\x00", frames=0, settle=300) == []
        rsp = await host.request(Cmd.INFO, 9)
        assert rsp.status == Status.OK

    run_link(tiny_device(), script)


def _errors(frame_bytes):
    """(name, request bytes, status, (seq, cmd) echoed)."""
    good = request_frame(Cmd.WRITE_REGS, 20, pairs(population=4))
    flipped = bytearray(good)
    flipped[6] ^= 0x10
    long = words([reg("population"), 4] * (frame_bytes // 8 + 2))
    hdr = struct.pack("<BBBH", VERSION, 24, Cmd.WRITE_REGS, 8) + words([reg("population"), 4])
    short = with_crc(struct.pack("<BBBH", VERSION, 28, Cmd.WRITE_REGS, 256))
    other = request_frame(Cmd.WRITE_REGS, 25, pairs(population=4), version=VERSION + 1)
    return [
        ("crc", raw(bytes(flipped)), Status.CRC, (20, Cmd.WRITE_REGS)),
        ("3-byte frame", raw(b"\x01\x15\x02"), Status.FRAME, (0x15, 2)),
        ("1-byte frame", raw(b"\x01"), Status.FRAME, (0, 0)),
        ("bad cobs", b"\x00\x09\x01\x16\x02\x00", Status.FRAME, (0x16, 2)),
        ("oversize", raw(request_frame(Cmd.WRITE_REGS, 23, long)), Status.OVERSIZE, (23, 2)),
        ("len mismatch", raw(with_crc(hdr[:3] + b"\x0c\x00" + hdr[5:])), Status.LENGTH, (24, 2)),
        # the shortest frame, its length field's high byte three beats before the end:
        # the check must see the whole field (its low byte alone, 0, would pass)
        ("len 256, no payload", raw(short),
         Status.LENGTH, (28, 2)),
        ("version", raw(other),
         Status.VERSION, (25, 2)),
        ("command 0x09", raw(request_frame(0x09, 26)), Status.COMMAND, (26, 9)),
        ("command 0x00", raw(request_frame(0x00, 27)), Status.COMMAND, (27, 0)),
    ]  # fmt: skip


LENGTH_CASES = [
    (Cmd.WRITE_REGS, b""),
    (Cmd.WRITE_REGS, words([reg("population")])),
    (Cmd.WRITE_REGS, words([reg("population"), 4]) + b"\x01"),
    (Cmd.READ_REGS, b""),
    (Cmd.WRITE_MEM, b""),
    (Cmd.READ_MEM, words([0])),
    (Cmd.READ_MEM, words([0, 1, 2])),
    (Cmd.RUN, b""),
    (Cmd.RUN, words([3, 3])),
    (Cmd.INFO, words([0])),
    (Cmd.STATUS, words([0])),
    (Cmd.RESET, words([0])),
]

PARAM_CASES = [
    ("write read-only status", Cmd.WRITE_REGS, pairs(population=4) + words([reg("status"), 0])),
    ("write unmapped 0x40", Cmd.WRITE_REGS, words([0x40, 1])),
    ("write 0x105", Cmd.WRITE_REGS, words([0x105, 1])),
    ("read unmapped 0x40", Cmd.READ_REGS, words([reg("id"), 0x40])),
    ("write mem sel 14", Cmd.WRITE_MEM, words([14 << 24, 1])),
    ("write mem weights_packed (read-only)", Cmd.WRITE_MEM, words([11 << 24, 1])),
    ("read mem samples_packed (write-only)", Cmd.READ_MEM, words([9 << 24, 1])),
    ("write mem g", Cmd.WRITE_MEM, words([6 << 24, 1])),
    ("write mem count 0", Cmd.WRITE_MEM, words([0 << 24])),
    ("write mem past depth", Cmd.WRITE_MEM, words([3 << 24 | 15, 1, 2])),
    ("read mem sel 14", Cmd.READ_MEM, words([14 << 24, 1])),
    ("read mem member_x_packed (write-only)", Cmd.READ_MEM, words([10 << 24, 1])),
    ("write mem logits", Cmd.WRITE_MEM, words([8 << 24, 1])),
    ("read mem count 0", Cmd.READ_MEM, words([0 << 24, 0])),
    ("read mem count too big", Cmd.READ_MEM, words([0 << 24, max_payload(FB) // 4 + 1])),
    ("read mem past depth", Cmd.READ_MEM, words([5 << 24 | 4, 5])),
    # the weights end at the largest network's packed words (2 x ceil(8 x 9 / 5) = 30),
    # not at the memory's power of two (32), as on the compact device
    ("read mem weights past the packed depth", Cmd.READ_MEM, words([0 << 24 | 29, 2])),
    ("read mem huge addr+count", Cmd.READ_MEM, words([0 << 24 | 0xFFFFFF, 0xFFFFFFFF])),
    ("run kind 4", Cmd.RUN, words([4])),
    ("run kind 0x100", Cmd.RUN, words([0x100])),
]


ERRORS = {
    "frame": _errors(FB),
    "length": [
        (f"{c.name} {len(p)} bytes", raw(request_frame(c, 30 + i, p)), Status.LENGTH, (30 + i, c))
        for i, (c, p) in enumerate(LENGTH_CASES)
    ],
    "param": [
        (name, raw(request_frame(c, 60 + i, p)), Status.PARAM, (60 + i, c))
        for i, (name, c, p) in enumerate(PARAM_CASES)
    ],
}


@pytest.mark.parametrize("group", ERRORS)
def test_each_error_status_changes_nothing_and_the_next_request_works(group):
    """CRC, FRAME, OVERSIZE, LENGTH, VERSION, COMMAND, PARAM: the response echoes seq and
    cmd, has no payload, and a read-back (itself a valid request) shows nothing changed."""

    async def script(host):
        await load(host)
        before = await snapshot(host)
        for name, data, status, (seq, cmd) in ERRORS[group]:
            rsp = await host.exchange(data)
            assert (rsp.status, rsp.seq, rsp.cmd, rsp.payload) == (status, seq, cmd, b""), name
            assert await snapshot(host) == before, f"{name} changed the device"

    run_link(tiny_device(), script)


def test_latent_memory_is_param_in_a_pentary_build():
    async def script(host):
        rsp = await host.request(Cmd.WRITE_MEM, 1, words([1 << 24, 5]))
        assert rsp.status == Status.PARAM
        rsp = await host.request(Cmd.READ_MEM, 2, words([1 << 24, 1]))
        assert rsp.status == Status.PARAM
        rsp = await host.request(Cmd.READ_MEM, 3, words([0 << 24, 1]))
        assert rsp.status == Status.OK

    run_link(tiny_device(update="pentary"), script)


LONG_RUN = dict(n_layers=2, width0=8, width1=8, width2=8, population=8, batch=4, steps=50)


def test_busy_during_a_run_refuses_writes_reads_of_memory_and_runs():
    async def script(host):
        await load(host)
        rsp = await host.request(Cmd.WRITE_REGS, 1, pairs(**LONG_RUN))
        assert rsp.status == Status.OK
        regs_before = await host.request(Cmd.READ_REGS, 2, words(reg(n) for n in SNAP_REGS))
        assert (await host.request(Cmd.RUN, 3, words([0]))).status == Status.OK
        refused = [
            (Cmd.WRITE_REGS, pairs(population=2)),
            (Cmd.WRITE_MEM, words([0 << 24, 1, 2])),
            (Cmd.READ_MEM, words([0 << 24, 2])),
            (Cmd.RUN, words([3])),
        ]
        for i, (c, p) in enumerate(refused):
            rsp = await host.request(c, 10 + i, p)
            assert rsp.status == Status.BUSY and rsp.payload == b"", c.name
        # served while busy
        assert (await host.request(Cmd.INFO, 20)).status == Status.OK
        regs = await host.request(Cmd.READ_REGS, 21, words(reg(n) for n in SNAP_REGS))
        assert regs.status == Status.OK and regs.payload == regs_before.payload
        status, _, _ = (await host.request(Cmd.STATUS, 22)).words()
        assert status & 1
        # RESET ends the run; registers back to reset values, memories kept
        assert (await host.request(Cmd.RESET, 23)).status == Status.OK
        status, error, step = (await host.request(Cmd.STATUS, 24)).words()
        assert (status, error, step) == (0, 0, 0)
        rsp = await host.request(Cmd.READ_REGS, 25, words(reg(n) for n in SNAP_REGS))
        assert rsp.words() == [0, 1, 2, 0, 1]
        rsp = await host.request(Cmd.READ_MEM, 26, words([1 << 24, 4]))
        assert rsp.words() == [5, 6, 7, 8], "memories keep their contents"

    run_link(tiny_device(), script)


def test_a_repeated_run_seq_is_answered_ok_without_running_again():
    async def script(host):
        rsp = await host.request(Cmd.WRITE_REGS, 1, pairs(population=2, steps=1))
        assert rsp.status == Status.OK

        async def run_update(seq):
            rsp = await host.request(Cmd.RUN, seq, words([2]))  # UPDATE: step + 1
            assert rsp.status == Status.OK
            return (await wait_idle(host, seq=100))[2]

        assert await run_update(40) == 1
        assert await run_update(40) == 1, "the retry did not run"
        assert await run_update(41) == 2
        assert await run_update(41) == 2
        assert (await host.request(Cmd.WRITE_REGS, 50, pairs(seed=5))).status == Status.OK
        assert await run_update(41) == 3, "a WRITE_REGS ends the duplicate rule"
        rsp = await host.request(Cmd.WRITE_MEM, 52, words([0 << 24 | 0, 1]))
        assert rsp.status == Status.OK
        assert await run_update(41) == 4, "so does a WRITE_MEM"
        assert (await host.request(Cmd.RESET, 51)).status == Status.OK
        assert await run_update(41) == 1, "so does RESET (step back to 0, then + 1)"

    run_link(tiny_device(), script)


def test_largest_payloads_round_trip_in_one_frame_buffer():
    """max_payload in both directions: the response is written over the request (the
    latent memory holds 2 x 8 x 9 = 144 words: words 80..140 are written)."""
    most = max_payload(FB) // 4  # 62 words
    values = [(i * 7919) % 200 - 100 for i in range(most - 1)]
    names = [r.name for r in ap.register_map(ML)]

    async def script(host):
        rsp = await host.request(Cmd.WRITE_MEM, 1, words([1 << 24 | 80, *values]))
        assert rsp.status == Status.OK
        rsp = await host.request(Cmd.READ_MEM, 2, words([1 << 24 | 79, most]))
        assert rsp.status == Status.OK and len(rsp.payload) == 4 * most
        got = [ap.to_signed(v, 32) for v in rsp.words()]
        assert got[1:] == values
        addrs = [reg(names[i % len(names)]) for i in range(most)]
        rsp = await host.request(Cmd.READ_REGS, 3, words(addrs))
        assert rsp.status == Status.OK and len(rsp.words()) == most
        assert rsp.words()[0] == 0x50454747 and rsp.words()[len(names)] == 0x50454747

    run_link(tiny_device(), script)


def test_responses_are_whole_when_the_host_stalls_tx_at_random():
    """``tx.ready`` low in about half of the cycles (a UART is slower than the encoder):
    every byte still comes out once and in order, so INFO and the largest READ_MEM parse."""
    most = max_payload(FB) // 4
    values = [(i * 40503 + 7) % 200 - 100 for i in range(most - 1)]

    async def script(host):
        rsp = await host.request(Cmd.INFO, 1)
        assert rsp.status == Status.OK
        assert decode_info(rsp.payload)["lanes"] == 1
        rsp = await host.request(Cmd.WRITE_MEM, 2, words([1 << 24 | 80, *values]))
        assert rsp.status == Status.OK
        rsp = await host.request(Cmd.READ_MEM, 3, words([1 << 24 | 80, most - 1]))
        assert rsp.status == Status.OK
        assert [ap.to_signed(v, 32) for v in rsp.words()] == values

    run_link(tiny_device(), script, stall=random.Random(11))


def test_error_output_follows_the_status_registers_error_bit():
    dut = tiny_device()

    async def script(host):
        ctx = host.ctx
        assert not ctx.get(dut.error)
        rsp = await host.request(Cmd.WRITE_REGS, 1, pairs(steps=0))
        assert (await host.request(Cmd.RUN, 2, words([0]))).status == Status.OK
        status, error, _ = await wait_idle(host)
        assert status == 2 and error == 1 << 11, "a train run of 0 steps is refused"
        assert ctx.get(dut.error) and not ctx.get(dut.busy)
        rsp = await host.request(Cmd.RESET, 3)
        assert rsp.status == Status.OK and not ctx.get(dut.error)

    run_link(dut, script)


def test_the_reset_input_alone_resets_engine_and_accelerator_and_keeps_memories():
    """On a board the clock domain has no reset: the power-on reset is the Device's
    ``reset`` input, which reaches the engine and each Accelerator block through
    flip-flops of their own (rtl/reset.py). Here the domain has no reset either: a
    refused run's error flag, a written register and the engine's duplicate-RUN memory
    are cleared by a one-cycle pulse on ``reset``; the weights are kept."""
    dut = tiny_device()
    top = Module()
    top.domains.sync = ClockDomain("sync", reset_less=True)
    top.submodules.dut = dut

    async def script(host):
        ctx = host.ctx
        await load(host)
        rsp = await host.request(Cmd.WRITE_REGS, 1, pairs(steps=0))
        assert (await host.request(Cmd.RUN, 2, words([0]))).status == Status.OK
        status, error, _ = await wait_idle(host)
        assert status == 2 and error == 1 << 11, "a train run of 0 steps is refused"
        assert ctx.get(dut.error)
        ctx.set(dut.reset, 1)
        await ctx.tick()
        ctx.set(dut.reset, 0)
        for _ in range(3):
            await ctx.tick()
        assert not ctx.get(dut.error), "reset clears the error output"
        rsp = await host.request(Cmd.READ_REGS, 3, words(reg(n) for n in ("population", "error")))
        assert rsp.status == Status.OK and rsp.words() == [2, 0], "registers at reset values"
        mem = await host.request(Cmd.READ_MEM, 4, words([0 << 24 | 0, 4]))
        assert mem.status == Status.OK and unpack(mem.payload) == [100, 101, 102, 103]
        # the engine forgot RUN's seq 2: the same seq runs (one step of the reset
        # registers' network) instead of being answered as a duplicate
        assert (await host.request(Cmd.RUN, 2, words([0]))).status == Status.OK
        status, error, step = await wait_idle(host, seq=110)
        assert (status, error, step) == (0, 0, 1), "RUN seq 2 ran again after the reset"

    run_link(dut, script, top=top)


def test_random_garbage_gets_one_response_per_frame_and_never_hangs():
    rng = random.Random(11)
    junk = bytes(0 if rng.random() < 0.05 else rng.randrange(1, 256) for _ in range(400))
    junk += bytes(rng.randrange(1, 256) for _ in range(FB + 20)) + b"\x00"  # oversize
    n_frames = len([f for f in junk.split(b"\x00") if f])

    async def script(host):
        await load(host)
        before = await snapshot(host)
        got = await host.send(junk, frames=n_frames, settle=200)
        assert len(got) == n_frames
        for frame in got:
            rsp = parse_response(frame)
            assert rsp.status in (Status.FRAME, Status.CRC, Status.OVERSIZE) and not rsp.payload
        assert await snapshot(host) == before

    run_link(tiny_device(), script)


@pytest.mark.parametrize("copies", [1, 3])
def test_stream_register_passes_every_word_once_in_order_under_any_ready_pattern(copies):
    """A source offering words at random (random bits on the payload while it offers
    none) and a sink taking them at random through the StreamRegister: the sink gets
    exactly the source's words, in order, none lost or repeated; a word offered with
    the register empty is on the output a cycle later, and the source's ready is low
    while the register holds a word, whatever the sink's ready (no combinational path
    back). With 3 copies of the valid flag, each enabling a slice of the 16 bits."""
    from pentegg.rtl.link.pipe import StreamRegister
    from pentegg.sim import harness
    from pentegg.sim.stream import random_traffic

    rng = random.Random(harness.pick_seed("stream register"))
    dut = StreamRegister(16, copies)
    sent, got = [], []

    async def bench(ctx):
        def ready_is_empty(ctx, before):
            assert ctx.get(dut.i.ready) == (not ctx.get(dut.o.valid))

        s, g = await random_traffic(ctx, dut, rng, 600, 16, check=ready_is_empty)
        sent.extend(s)
        got.extend(g)
        # latency: an empty register takes a word and shows it the next cycle
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, 0x1234)
        assert not ctx.get(dut.o.valid) and ctx.get(dut.i.ready)
        await ctx.tick()
        ctx.set(dut.i.valid, 0)
        assert ctx.get(dut.o.valid) and ctx.get(dut.o.payload) == 0x1234

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(sent) > 100
    assert got == sent
