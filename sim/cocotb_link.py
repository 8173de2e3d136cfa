"""cocotb tests of the Device (rtl/link/device.py: the LinkEngine and the Accelerator) on
its byte streams, run by tests/test_cocotb_link.py.

The testbench is a host on ``rx`` and ``tx``: requests are made and responses cut, checked
and decoded by ``pentegg.link`` (``request_bytes``, ``request_frame``, ``FrameReader``,
``parse_response``), never by code of its own. ``rx`` is offered bytes with random idle
cycles and ``tx`` is read with random back-pressure, both from ``cocotb.RANDOM_SEED`` (so
``COCOTB_RANDOM_SEED`` / ``PENTEGG_SEED`` replays a run), as is all test data.

* ``info``: INFO answers the protocol version, the spec version and the parameters the
  Device was elaborated with (``PENTEGG_PARAMS``);
* ``registers_round_trip``: random values into every host-writable register, read back
  as the register map's widths keep them;
* ``weights_round_trip``: random 16-bit words into the weight memory in random chunks,
  read back in other random chunks (and random values in range for the latent memory);
* ``largest_frames``: ``max_payload`` in both directions, with runs of non-zero bytes
  long enough for 254-byte COBS blocks where the frame buffer holds them;
* ``errors``: every status a request's bytes can cause while the accelerator is idle
  (CRC, FRAME, OVERSIZE, VERSION, LENGTH, COMMAND, PARAM; truncated, cut and corrupted
  frames among them), each answered with the request's ``seq`` and ``cmd`` and no
  payload, and each followed by a read-back (itself valid requests, which must be
  answered) showing that the registers and weights did not change;
* ``busy``: during a ``RUN eval``, the requests that wait for the accelerator are
  ``BUSY``, the others served; nothing changed afterwards;
* ``refused_run_then_reset``: a RUN the controller refuses sets the error flag and the
  ``error`` output; RESET clears them, resets every register and keeps the weights;
* ``training_step``: the host's own driver (``pentegg.device.Device`` and ``Trainer``) on a
  transport bridged into the simulation configures a tiny xor job, uploads its weights
  and samples, RUNs one step and reads the state back; it must equal ``pentegg.golden``'s
  ``es_step`` of the same step (scores, theta, weights, latent); a mismatch names the
  first differing index and both values;
* ``training_step_through_line_errors``: the same with one bit flipped in three random
  requests and in the response to RUN: the driver's retries (RUN's with the same
  ``seq``, which the device answers without running twice) give the same step.
"""

from __future__ import annotations

import inspect
import os
import random

import cocotb
from cocotb.task import bridge, resume
from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time

from pentegg import accel_protocol as ap
from pentegg.device import Device as HostDevice
from pentegg.device import Trainer
from pentegg.golden import SPEC_VERSION, Config, es_step, init_state
from pentegg.golden.digit import WORD_BITS
from pentegg.link import (
    FrameReader,
    Response,
    cobs_decode,
    cobs_encode,
    crc16,
    decode_info,
    parse_response,
    request_bytes,
    request_frame,
    words,
)
from pentegg.rtl.accelerator import PACKED_MEMORIES, Accelerator
from pentegg.rtl.control.registers import register_map
from pentegg.rtl.link.protocol import (
    INFO_CHOICES,
    INFO_FIELDS,
    REQUEST_HEADER,
    VERSION,
    Cmd,
    Status,
    max_payload,
)
from pentegg.sim.harness import tb_params, tb_value
from pentegg.sim.scoreboard import compare
from pentegg.sim.stream import reset, start_clock
from pentegg.tasks import XorTask
from pentegg.transport import Transport

# The golden model's NumPy reference: for a job this small, compiling the Numba engine
# (pinned equal to it by tests/test_engine.py) in the simulator's process takes seconds.
os.environ.setdefault("PENTEGG_ENGINE", "numpy")

#: Cycles a response may take to start and finish (a frame of a few hundred bytes takes
#: about a thousand; RUN waits at most 16 cycles for busy).
RESPONSE_CYCLES = 200_000

ACCEL_PARAMS = set(inspect.signature(Accelerator.__init__).parameters) - {"self"}


_tb, _params = tb_value, tb_params  # the harness's env and parameters


class LinkPort:
    """The host end of the Device's ``rx`` and ``tx`` byte streams, one clock cycle at a
    time: ``rx`` is offered a byte in a cycle with probability ``valid_p`` and ``tx.ready``
    is high with probability ``ready_p`` (from ``rng``). ``tx`` is read in every cycle this
    port clocks, writing included, as a UART host's receive buffer would."""

    def __init__(self, dut, rng: random.Random, *, valid_p: float, ready_p: float):
        self.dut, self.rng = dut, rng
        self.valid_p, self.ready_p = valid_p, ready_p
        self.reader = FrameReader()
        self.raw = bytearray()  # received bytes not yet handed out by receive()
        self.frames: list[bytes] = []  # received, COBS-encoded, not yet taken
        dut.rx__valid.value = dut.tx__ready.value = 0
        self._valid = self._ready = False
        self._byte = None

    async def _cycle(self, byte: int | None) -> bool:
        """One cycle offering ``byte`` on ``rx`` (None: nothing); True if it was taken.
        (Signals are written only when they change: each write costs simulator time.)"""
        dut = self.dut
        valid = byte is not None
        if valid != self._valid:
            dut.rx__valid.value = self._valid = valid
        if valid and byte != self._byte:
            dut.rx__payload.value = self._byte = byte
        ready = self.ready_p >= 1.0 or self.rng.random() < self.ready_p
        if ready != self._ready:
            dut.tx__ready.value = self._ready = ready
        await RisingEdge(dut.clk)
        if ready and dut.tx__valid.value:
            b = int(dut.tx__payload.value)
            self.raw.append(b)
            self.frames += self.reader.feed(bytes([b]))
        return byte is not None and bool(dut.rx__ready.value)

    async def write(self, data: bytes) -> None:
        for b in data:
            while self.rng.random() >= self.valid_p:
                await self._cycle(None)
            for _ in range(RESPONSE_CYCLES):
                if await self._cycle(b):
                    break
            else:
                raise AssertionError(f"rx not ready for {RESPONSE_CYCLES} cycles (a hang)")
        self.dut.rx__valid.value = self._valid = False

    async def receive(self) -> bytes:
        """Clock until a non-empty frame has ended (at once if one has); the raw bytes
        received since the last call."""
        for _ in range(RESPONSE_CYCLES):
            if self.frames:
                self.dut.tx__ready.value = self._ready = False
                raw, self.raw = bytes(self.raw), bytearray()
                return raw
            await self._cycle(None)
        raise AssertionError(f"no response in {RESPONSE_CYCLES} cycles (the device hangs)")

    async def exchange(self, data: bytes) -> Response:
        """Raw request bytes in, the one response out, parsed by ``pentegg.link``."""
        await self.write(data)
        await self.receive()
        frame = self.frames.pop(0)
        assert not self.frames, "more than one response"
        return parse_response(cobs_decode(frame))

    async def request(self, cmd: int, seq: int, payload: bytes = b"") -> Response:
        return await self.exchange(request_bytes(cmd, seq, payload))

    async def ok(self, cmd: int, seq: int, payload: bytes = b"") -> Response:
        rsp = await self.request(cmd, seq, payload)
        assert (rsp.status, rsp.seq, rsp.cmd) == (Status.OK, seq & 0xFF, cmd), (
            f"{Cmd(cmd).name} seq {seq}: {rsp.status.name}, seq {rsp.seq}, cmd {rsp.cmd}"
        )
        return rsp


def _garble(data: bytes, rng: random.Random) -> bytes:
    """``data`` with one bit of one non-delimiter byte flipped, the byte kept non-zero
    (a line error that leaves the framing alone)."""
    out = bytearray(data)
    at = rng.choice([i for i, b in enumerate(out) if b])
    bits = [1 << k for k in range(8) if out[at] ^ (1 << k)]
    out[at] ^= rng.choice(bits)
    return bytes(out)


class BridgedTransport(Transport):
    """A ``pentegg.transport.Transport`` on a :class:`LinkPort`, for the host's driver
    running in a ``cocotb.task.bridge`` thread: ``write`` clocks the bytes in, ``read``
    clocks until a response frame has come out (the simulation stands still in between).

    Line errors, if asked for: ``garble_writes`` are the indices (0, 1, ...) of the writes
    to corrupt; ``garble_run_response`` corrupts the response to the first ``RUN``, so that
    the driver sends it again with the same ``seq`` (the first RUN that reaches the device
    whole, so that each error costs one retry). ``garbled`` counts the errors made.
    """

    def __init__(self, port: LinkPort, *, garble_writes=(), garble_run_response=False):
        self.port = port
        self.garble_writes = set(garble_writes)
        self.garble_run_response = garble_run_response
        self.writes = self.garbled = 0
        self._garble_read = False

    def write(self, data: bytes) -> None:
        data = bytes(data)
        if self.writes in self.garble_writes:
            data = _garble(data, self.port.rng)
            self.garbled += 1
        elif self.garble_run_response and any(
            f and cobs_decode(f)[2] == Cmd.RUN for f in data.split(b"\x00")
        ):  # a RUN that reaches the device whole: its response is garbled
            self.garble_run_response, self._garble_read = False, True
        self.writes += 1
        resume(self.port.write)(data)

    def read(self, timeout: float) -> bytes:
        data = resume(self.port.receive)()
        self.port.frames.clear()  # the driver cuts the frames itself
        if self._garble_read:
            data, self._garble_read = _garble(data, self.port.rng), False
            self.garbled += 1
        return data

    def close(self) -> None:
        pass


async def setup(dut, *, valid_p: float | None = None, ready_p: float | None = None):
    """Clock, reset, and a :class:`LinkPort` with random pacing (or the given one)."""
    start_clock(dut)
    rng = random.Random(cocotb.RANDOM_SEED)
    port = LinkPort(
        dut,
        rng,
        valid_p=rng.choice([1.0, 0.8, 0.5]) if valid_p is None else valid_p,
        ready_p=rng.choice([1.0, 0.7, 0.4]) if ready_p is None else ready_p,
    )
    dut.reset.value = 0  # the power-on input (the domain's rst resets too)
    await reset(dut)
    dut._log.info(f"rx valid probability {port.valid_p}, tx ready probability {port.ready_p}")
    return port, rng


def _accel(p: dict) -> Accelerator:
    acc = Accelerator(**{k: v for k, v in p.items() if k in ACCEL_PARAMS})
    acc._MustUse__silence = True  # built for its memory map, never elaborated
    return acc


def _regs(p: dict):
    return {r.name: r for r in register_map(p["max_layers"])}


def _seq(rng: random.Random) -> int:
    return rng.randrange(256)


@cocotb.test()
async def info(dut):
    """INFO: magic, protocol and spec versions, and every build parameter as elaborated."""
    port, rng = await setup(dut)
    p = _params()
    seq = _seq(rng)
    rsp = await port.ok(Cmd.INFO, seq)
    assert len(rsp.payload) == 4 * len(INFO_FIELDS)
    got = decode_info(rsp.payload)
    assert got["magic"] == 0x5045_4747, f"magic {got['magic']:#x}"
    assert got["protocol"] == VERSION, f"protocol {got['protocol']}, expected {VERSION}"
    assert got["spec"] == SPEC_VERSION, f"spec {got['spec']}, expected {SPEC_VERSION}"
    for name in INFO_FIELDS:
        if name in ("magic", "protocol", "spec"):
            continue
        assert name in p, f"INFO field {name} is no build parameter"
        want = p[name]
        if name in INFO_CHOICES:
            assert want in INFO_CHOICES[name]
        assert got[name] == want, f"INFO {name} = {got[name]}, the build has {want}"


@cocotb.test()
async def registers_round_trip(dut):
    """WRITE_REGS of random values to every writable register in random order and
    chunks, then READ_REGS in another order: each keeps its width's low bits; the
    read-only ``id`` reads "PEGG"."""
    port, rng = await setup(dut)
    p = _params()
    regs = [r for r in register_map(p["max_layers"]) if r.access == "rw"]
    rng.shuffle(regs)
    values = {r.name: rng.randrange(1 << 32) for r in regs}
    per = max_payload(p["frame_bytes"]) // 8
    i = 0
    while i < len(regs):
        chunk = regs[i : i + rng.randint(1, per)]
        i += len(chunk)
        pairs = words(v for r in chunk for v in (r.addr, values[r.name]))
        await port.ok(Cmd.WRITE_REGS, _seq(rng), pairs)
    rng.shuffle(regs)
    names = [r.name for r in regs] + ["id"]
    rsp = await port.ok(Cmd.READ_REGS, _seq(rng), words(_regs(p)[n].addr for n in names))
    want = [values[r.name] & ((1 << r.width) - 1) for r in regs] + [0x5045_4747]
    compare("registers read back (in order " + ", ".join(names) + ")", want, rsp.words())


def _pieces(rng: random.Random, total: int, most: int) -> list[tuple[int, int]]:
    """Random ``(start, count)`` pieces of ``range(total)``, each at most ``most`` long."""
    out, at = [], 0
    while at < total:
        n = rng.randint(1, min(most, total - at))
        out.append((at, n))
        at += n
    return out


async def write_mem(port: LinkPort, rng, mem: str, values: list[int], most: int) -> None:
    sel = ap.MEMORIES[mem]
    for at, n in _pieces(rng, len(values), most - 1):
        await port.ok(Cmd.WRITE_MEM, _seq(rng), words([sel << 24 | at, *values[at : at + n]]))


async def read_mem(port: LinkPort, rng, mem: str, count: int, most: int) -> list[int]:
    sel, got = ap.MEMORIES[mem], []
    for at, n in _pieces(rng, count, most):
        got += (await port.ok(Cmd.READ_MEM, _seq(rng), words([sel << 24 | at, n]))).words()
    return got


@cocotb.test()
async def weights_round_trip(dut):
    """Random 16-bit words (spec 1.4's word) over the whole weight memory in random
    WRITE_MEM chunks, read back in other random READ_MEM chunks; in a latent build the
    same for random latent values in range (read back sign-extended)."""
    port, rng = await setup(dut)
    p = _params()
    mems = _accel(p).host_memories
    most = max_payload(p["frame_bytes"]) // 4
    depth = mems["weights"][1]
    values = [rng.randrange(1 << WORD_BITS) for _ in range(depth)]
    await write_mem(port, rng, "weights", values, most)
    compare("weights read back", values, await read_mem(port, rng, "weights", depth, most))
    if "latent" in mems:
        depth = mems["latent"][1]
        vmax = (1 << (p["latent_bits"] - 1)) - 1
        lat = [rng.randint(-vmax, vmax) for _ in range(depth)]
        await write_mem(port, rng, "latent", lat, most)
        got = [ap.to_signed(v, 32) for v in await read_mem(port, rng, "latent", depth, most)]
        compare("latent read back", lat, got)


@cocotb.test()
async def packed_words_round_trip(dut):
    """Random bytes over the whole sample and per-member input memories, written four a
    word through ``samples_packed`` and ``member_x_packed`` in random WRITE_MEM chunks,
    read back a byte a word through ``samples`` and ``member_x``; random weight words and
    latent values (in range, negative ones too) written a word each, read back through
    ``weights_packed`` and ``latent_packed`` in random READ_MEM chunks: two or four
    elements a word, the first in the low bits (docs/protocol.md, "Packed words")."""
    port, rng = await setup(dut)
    p = _params()
    most = max_payload(p["frame_bytes"]) // 4
    mems = _accel(p).host_memories
    for packed, (target, bits, access) in PACKED_MEMORIES.items():
        if packed not in mems or target == "logits":  # latent_packed in a pentary build;
            continue  # the logits are the accelerator's (tests/test_rtl_accelerator.py)
        depth, per = mems[target][1], 32 // bits
        if access == "w":
            data = [rng.randrange(256) for _ in range(depth)]
            await write_mem(port, rng, packed, ap.pack_bytes(data), most)
            got = await read_mem(port, rng, target, depth, most)
            compare(f"{target} after {packed}", data, got)
            continue
        if target == "weights":
            data = [rng.randrange(1 << WORD_BITS) for _ in range(depth)]
        else:
            vmax = (1 << (p["latent_bits"] - 1)) - 1
            data = [rng.randint(-vmax, vmax) for _ in range(depth)]
        await write_mem(port, rng, target, data, most)
        n = mems[packed][1]
        mask = (1 << bits) - 1
        want = [sum((data[per * i + j] & mask) << bits * j for j in range(per)) for i in range(n)]
        compare(f"{packed} after {target}", want, await read_mem(port, rng, packed, n, most))


@cocotb.test()
async def largest_frames(dut):
    """The largest payloads in both directions (``max_payload``: the response written over
    the request in one frame buffer), of bytes that are all non-zero where the protocol
    allows, so that COBS blocks of 254 bytes cross the link when the frame holds them:
    READ_REGS of ``id`` as often as a response holds; WRITE_MEM of -1 (latent; 0xffff in
    the weights of a pentary build) as often as a request holds, read back whole."""
    port, rng = await setup(dut)
    p = _params()
    most = max_payload(p["frame_bytes"]) // 4
    rsp = await port.ok(Cmd.READ_REGS, _seq(rng), words([_regs(p)["id"].addr] * most))
    compare("READ_REGS of id, a whole frame", [0x5045_4747] * most, rsp.words())
    mems = _accel(p).host_memories
    mem, value = ("latent", -1) if "latent" in mems else ("weights", (1 << WORD_BITS) - 1)
    n = min(most - 1, mems[mem][1])
    sel = ap.MEMORIES[mem]
    await port.ok(Cmd.WRITE_MEM, _seq(rng), words([sel << 24, *[value] * n]))
    n_read = min(most, mems[mem][1])
    rsp = await port.ok(Cmd.READ_MEM, _seq(rng), words([sel << 24, n_read]))
    got = [ap.to_signed(v, 32) if mem == "latent" else v for v in rsp.words()]
    compare(f"{mem} after a whole-frame write", [value] * n, got[:n])
    dut._log.info(f"{mem}: {n} words written, {n_read} read in one frame each")


def _raw(frame: bytes) -> bytes:
    """The bytes a host sends for an already built (decoded) frame."""
    return b"\x00" + cobs_encode(frame) + b"\x00"


def _with_len(frame: bytes, length: int) -> bytes:
    """``frame`` with its ``len`` field set to ``length`` and a CRC that fits again."""
    body = bytearray(frame[:-2])
    body[3:5] = length.to_bytes(2, "little")
    return bytes(body) + crc16(bytes(body)).to_bytes(2, "big")


def _cut_cobs(frame: bytes) -> bytes:
    """The bytes of ``frame`` with the end of its last COBS block lost on the line: the
    fewest cut that ``pentegg.link.cobs_decode`` rejects."""
    enc = cobs_encode(frame)
    for cut in range(1, len(enc)):
        try:
            cobs_decode(enc[:-cut])
        except ValueError:
            return b"\x00" + enc[:-cut] + b"\x00"
    raise AssertionError("no cut of the frame is a COBS error")


def _cut_status(data: bytes) -> Status:
    """The status of a frame that lost bytes on the line (``data`` as sent): ``CRC``,
    unless its last two bytes happen to be the CRC of the rest. A cut is no error the
    CRC is sure to catch: when the frame ends in ``00`` and its CRC in ``00`` (1 in 256 of
    the frames that end in a zero byte, as a word's high byte often is) the frame without
    its last byte is ``M || crc16(M)``, a valid frame whose ``len`` is one byte too long."""
    frame = cobs_decode(data.strip(b"\x00"))
    return Status.LENGTH if crc16(frame[:-2]) == int.from_bytes(frame[-2:], "big") else Status.CRC


def _flip(frame: bytes, at: int, mask: int) -> bytes:
    f = bytearray(frame)
    f[at] ^= mask
    return bytes(f)


def error_cases(p: dict, rng: random.Random, depth: int, new_weights: list[int]):
    """``(name, request bytes, status, (seq, cmd) echoed)`` for every status a request's
    bytes can cause, BUSY excepted (it needs a run). Requests that would write do so
    over the weights (``new_weights``) or the registers, so a leak shows in a read-back."""
    fb = p["frame_bytes"]
    most = max_payload(fb) // 4
    regs = _regs(p)
    sel = ap.MEMORIES["weights"]
    W, R, WR = Cmd.WRITE_MEM, Cmd.READ_MEM, Cmd.WRITE_REGS
    pop = regs["population"].addr
    n = 4 * len(new_weights) + 4  # the payload bytes of wm()

    def wm(seq: int, vals=new_weights, version: int = VERSION) -> bytes:
        """A WRITE_MEM of ``vals`` over the weights from address 0 (decoded frame)."""
        return request_frame(W, seq, words([sel << 24, *vals]), version=version)

    at, bit = REQUEST_HEADER + rng.randrange(n), 1 << rng.randrange(8)
    # (name, status (or a function of the bytes), the cmd the response echoes, the
    # request's bytes for seq s)
    table = [
        ("CRC: a payload bit flipped", Status.CRC, W, lambda s: _raw(_flip(wm(s), at, bit))),
        ("CRC: a bit of the CRC flipped", Status.CRC, W, lambda s: _raw(_flip(wm(s), -1, bit))),
        ("CRC: truncated, last byte lost", _cut_status, W, lambda s: _raw(wm(s)[:-1])),
        ("CRC: a payload byte lost", _cut_status, W, lambda s: _raw(wm(s)[:-3] + wm(s)[-2:])),
        ("FRAME: truncated to 2 bytes", Status.FRAME, 0, lambda s: _raw(wm(s)[:2])),
        ("FRAME: truncated to 6 bytes", Status.FRAME, W, lambda s: _raw(wm(s)[:6])),
        ("FRAME: a COBS block cut by the delimiter", Status.FRAME, W, lambda s: _cut_cobs(wm(s))),
        (
            "OVERSIZE: longer than the buffer",
            Status.OVERSIZE,
            W,
            lambda s: _raw(wm(s, [1] * (fb // 4))),
        ),
        (
            f"VERSION {VERSION + 1}",
            Status.VERSION,
            W,
            lambda s: _raw(wm(s, version=VERSION + 1)),
        ),
        (
            f"VERSION {VERSION - 1}",
            Status.VERSION,
            W,
            lambda s: _raw(wm(s, version=VERSION - 1)),
        ),
        (
            "VERSION 0",
            Status.VERSION,
            Cmd.INFO,
            lambda s: _raw(request_frame(Cmd.INFO, s, version=0)),
        ),
        ("LENGTH: len a word more", Status.LENGTH, W, lambda s: _raw(_with_len(wm(s), n + 4))),
        ("LENGTH: len a byte less", Status.LENGTH, W, lambda s: _raw(_with_len(wm(s), n - 1))),
    ]
    # the buffer's edge: a frame of exactly frame_bytes is received whole (its len is not
    # whole words), one byte more is OVERSIZE
    edge = words([sel << 24, *new_weights])
    edge += b"\x01" * (fb - 7 - len(edge))
    table += [
        ("LENGTH: a frame of frame_bytes", Status.LENGTH, W, lambda s: request_bytes(W, s, edge)),
        (
            "OVERSIZE: frame_bytes + 1",
            Status.OVERSIZE,
            W,
            lambda s: request_bytes(W, s, edge + b"\x01"),
        ),
    ]
    for c in (0x00, 0x09, 0xFF):
        table.append((f"COMMAND {c:#04x}", Status.COMMAND, c, lambda s, c=c: request_bytes(c, s)))
    length = [
        (Cmd.INFO, words([0])),
        (Cmd.STATUS, words([0])),
        (Cmd.RESET, words([0])),
        (WR, b""),
        (WR, words([pop, 4, pop])),  # half a pair
        (WR, words([pop, 4]) + b"\x01"),  # not whole words
        (Cmd.READ_REGS, b""),
        (W, b""),
        (W, words([sel << 24]) + b"\x01\x02\x03"),
        (R, words([sel << 24])),
        (R, words([sel << 24, 1, 1])),
        (Cmd.RUN, b""),
        (Cmd.RUN, words([1, 1])),
    ]
    for c, pay in length:
        name = f"LENGTH: {c.name} with {len(pay)} payload bytes"
        table.append((name, Status.LENGTH, c, lambda s, c=c, pay=pay: request_bytes(c, s, pay)))
    g, logits = ap.MEMORIES["g"], ap.MEMORIES["logits"]
    sp, sp_depth = ap.MEMORIES["samples_packed"], p["sample_bytes"] // 4
    param = [
        ("write read-only status after a valid pair", WR, [pop, 6, regs["status"].addr, 0]),
        ("write unmapped register 0x40", WR, [0x40, 1]),
        ("write register 0x105", WR, [0x105, 1]),
        ("read unmapped register 0x3f", Cmd.READ_REGS, [regs["id"].addr, 0x3F]),
        ("write weights past the end", W, [sel << 24 | (depth - 1), 1, 2]),
        ("write weights from the end", W, [sel << 24 | depth, 1]),
        ("write weights count 0", W, [sel << 24]),
        ("write memory select 11", W, [11 << 24, 1]),
        ("read write-only samples_packed", R, [sp << 24, 1]),
        ("read write-only member_x_packed", R, [ap.MEMORIES["member_x_packed"] << 24, 1]),
        ("write samples_packed past the end", W, [sp << 24 | (sp_depth - 1), 1, 2]),
        ("write read-only weights_packed", W, [ap.MEMORIES["weights_packed"] << 24, 1]),
        (
            "read weights_packed past the end",
            R,
            [ap.MEMORIES["weights_packed"] << 24 | (depth // 2), 1],
        ),
        ("write memory select 15", W, [15 << 24, 1]),
        ("write read-only memory g", W, [g << 24, 1]),
        ("write read-only memory logits", W, [logits << 24, 1]),
        ("read weights past the end", R, [sel << 24 | (depth - 2), 3]),
        ("read weights count 0", R, [sel << 24, 0]),
        ("read more words than a frame holds", R, [sel << 24, most + 1]),
        ("read address + count wrapping 32 bits", R, [sel << 24 | 0xFFFFFF, 0xFFFFFFFF]),
        ("read memory select 14", R, [14 << 24, 1]),
        ("RUN kind 4", Cmd.RUN, [4]),
        ("RUN kind 0x100", Cmd.RUN, [0x100]),
    ]
    if "latent" not in _accel(p).host_memories:  # a pentary build
        latent = ap.MEMORIES["latent"]
        param += [
            ("write latent in a pentary build", W, [latent << 24, 1]),
            ("read latent in a pentary build", R, [latent << 24, 1]),
        ]
    for name, c, vals in param:
        make = lambda s, c=c, vals=vals: request_bytes(c, s, words(vals))  # noqa: E731
        table.append((f"PARAM: {name}", Status.PARAM, c, make))
    seqs = rng.sample(range(256), len(table))
    cases = []
    for (name, st, c, make), s in zip(table, seqs, strict=True):
        data = make(s)
        cases.append((name, data, st(data) if callable(st) else st, (s, c)))
    return cases


async def snapshot(port: LinkPort, rng, p: dict, depth: int) -> tuple[list[int], list[int]]:
    """The writable registers and the whole weight memory, read with valid requests
    (each must be answered ``OK``), as few as the frame allows, at full speed (a check,
    not the subject: the round trips are paced at random)."""
    most = max_payload(p["frame_bytes"]) // 4
    rw = [r.addr for r in register_map(p["max_layers"]) if r.access == "rw"]
    regs, weights, sel = [], [], ap.MEMORIES["weights"]
    pacing = port.valid_p, port.ready_p
    port.valid_p = port.ready_p = 1.0
    try:
        for at in range(0, len(rw), most):
            regs += (await port.ok(Cmd.READ_REGS, _seq(rng), words(rw[at : at + most]))).words()
        for at in range(0, depth, most):
            n = min(most, depth - at)
            rsp = await port.ok(Cmd.READ_MEM, _seq(rng), words([sel << 24 | at, n]))
            weights += rsp.words()
    finally:
        port.valid_p, port.ready_p = pacing
    return regs, weights


async def load_random(port: LinkPort, rng, p: dict, depth: int) -> list[int]:
    """Random weights over the whole memory, random values in the writable registers;
    the weights."""
    most = max_payload(p["frame_bytes"]) // 4
    weights = [rng.randrange(1 << WORD_BITS) for _ in range(depth)]
    await write_mem(port, rng, "weights", weights, most)
    rw = [r for r in register_map(p["max_layers"]) if r.access == "rw"]
    for at, n in _pieces(rng, len(rw), most // 2):
        pairs = words(v for r in rw[at : at + n] for v in (r.addr, rng.randrange(1 << 32)))
        await port.ok(Cmd.WRITE_REGS, _seq(rng), pairs)
    return weights


def _check_refused(rsp: Response, name: str, status: Status, echo) -> None:
    got = (rsp.status.name, rsp.seq, rsp.cmd, rsp.payload.hex())
    want = (status.name, echo[0], int(echo[1]), "")
    assert got == want, f"{name}: got status, seq, cmd, payload {got}, expected {want}"


@cocotb.test()
async def errors(dut):
    """Every status a request's bytes can cause except BUSY (see ``busy``): the response
    echoes seq and cmd with no payload, and a read-back of the registers and weights (valid
    requests, answered) shows nothing changed."""
    port, rng = await setup(dut)
    p = _params()
    depth = _accel(p).host_memories["weights"][1]
    weights = await load_random(port, rng, p, depth)
    before = await snapshot(port, rng, p, depth)
    new = [w ^ rng.randrange(1, 1 << WORD_BITS) for w in weights[: min(depth, 8)]]
    seen = set()
    for name, data, status, echo in error_cases(p, rng, depth, new):
        dut._log.info(f"{name}: {len(data)} bytes, expect {status.name}")
        _check_refused(await port.exchange(data), name, status, echo)
        after = await snapshot(port, rng, p, depth)
        compare(f"after {name}: registers", before[0], after[0])
        compare(f"after {name}: weights", before[1], after[1])
        seen.add(status)
    missing = set(Status) - seen - {Status.OK, Status.BUSY}
    assert not missing, f"no case for {sorted(s.name for s in missing)}"


@cocotb.test()
async def busy(dut):
    """While a RUN eval runs: WRITE_REGS, WRITE_MEM, READ_MEM and RUN are BUSY (no
    payload, seq and cmd echoed); INFO, READ_REGS and STATUS are served (STATUS shows the
    run); afterwards the registers and weights are as before."""
    port, rng = await setup(dut, valid_p=1.0, ready_p=1.0)  # the run must outlast them
    p = _params()
    depth = _accel(p).host_memories["weights"][1]
    await load_random(port, rng, p, depth)
    # the longest evaluation the build holds, on per-member inputs
    width = p["max_width"]
    pop = p["max_population"]
    batch = max(
        1,
        min(p["max_batch"], p["member_bytes"] // (pop * width), p["logit_bytes"] // (pop * width)),
    )
    cfg = Config(
        layers=(width,) * (p["max_layers"] + 1),
        population=pop,
        rank=p["rank"],
        mode=p["mode"],
        digits=p["digits"],
        update=p["update"],
        latent_bits=p["latent_bits"],
    )
    regs = ap.config_regs(cfg, step=rng.randrange(60000), batch=batch, shared=False)
    r = _regs(p)
    await port.ok(
        Cmd.WRITE_REGS, _seq(rng), words(v for n, x in regs.items() for v in (r[n].addr, x))
    )
    x = [rng.randrange(256) for _ in range(pop * batch * width)]
    await write_mem(port, rng, "member_x", x, max_payload(p["frame_bytes"]) // 4)
    before = await snapshot(port, rng, p, depth)
    run_seq = _seq(rng)
    await port.ok(Cmd.RUN, run_seq, words([ap.RUN_KINDS["eval"]]))
    t0 = get_sim_time("ns")
    sel = ap.MEMORIES["weights"]
    refused = [
        (Cmd.WRITE_REGS, words([r["population"].addr, 2])),
        (Cmd.WRITE_MEM, words([sel << 24, *[w ^ 1 for w in before[1][:4]]])),
        (Cmd.READ_MEM, words([sel << 24, 4])),
        (Cmd.RUN, words([ap.RUN_KINDS["train"]])),
    ]
    for c, pay in refused:
        seq = (run_seq + 1 + rng.randrange(255)) & 0xFF  # not the run's: no duplicate
        _check_refused(
            await port.request(c, seq, pay), f"{c.name} while busy", Status.BUSY, (seq, c)
        )
    assert (await port.ok(Cmd.INFO, _seq(rng))).words()[0] == 0x5045_4747
    rsp = await port.ok(Cmd.READ_REGS, _seq(rng), words([r["population"].addr]))
    assert rsp.words() == [pop]
    status, error, _ = (await port.ok(Cmd.STATUS, _seq(rng))).words()
    assert status & 1, (
        "the run ended before the refused requests were all answered: the BUSY answers "
        "above prove nothing (make the evaluation longer)"
    )
    dut._log.info(f"refused and served requests took {get_sim_time('ns') - t0} ns of the run")
    for _ in range(10_000):
        status, error, _ = (await port.ok(Cmd.STATUS, _seq(rng))).words()
        if not status & 1:
            break
    else:
        raise AssertionError("RUN eval still busy after 10000 STATUS requests")
    assert error == 0, f"RUN eval ended with error flags {ap.decode_error(error)}"
    after = await snapshot(port, rng, p, depth)
    compare("after the BUSY answers: registers", before[0], after[0])
    compare("after the BUSY answers: weights", before[1], after[1])


@cocotb.test()
async def refused_run_then_reset(dut):
    """A RUN the controller refuses (a valid job but ``steps`` 0) is answered OK; STATUS then
    shows it ended with error flag 11 and the ``error`` output is high; RESET clears
    both, returns every register to its reset value (the register map's) and keeps the
    weights."""
    port, rng = await setup(dut)
    p = _params()
    depth = _accel(p).host_memories["weights"][1]
    weights = [rng.randrange(1 << WORD_BITS) for _ in range(depth)]
    await write_mem(port, rng, "weights", weights, max_payload(p["frame_bytes"]) // 4)
    cfg = Config(
        layers=(p["max_width"],) * (p["max_layers"] + 1),
        population=p["max_population"],
        rank=p["rank"],
        seed=rng.randrange(1 << 32),
        init="random",
    )
    regs = ap.config_regs(cfg, step=rng.randrange(1, 60000), steps=0, batch=p["max_batch"])
    r = _regs(p)
    await port.ok(
        Cmd.WRITE_REGS, _seq(rng), words(v for n, x in regs.items() for v in (r[n].addr, x))
    )
    await port.ok(Cmd.RUN, _seq(rng), words([ap.RUN_KINDS["train"]]))
    status, error, _ = (await port.ok(Cmd.STATUS, _seq(rng))).words()
    assert (status, ap.decode_error(error)) == (0b10, ["steps"]), (
        f"after a RUN of 0 steps: status {status:#x}, error {ap.decode_error(error)}"
    )
    assert dut.error.value == 1 and dut.busy.value == 0
    await port.ok(Cmd.RESET, _seq(rng))
    assert (await port.ok(Cmd.STATUS, _seq(rng))).words() == [0, 0, 0]
    assert dut.error.value == 0
    regs, got = await snapshot(port, rng, p, depth)
    rw = [x for x in register_map(p["max_layers"]) if x.access == "rw"]
    compare(
        "registers after RESET (" + ", ".join(x.name for x in rw) + ")", [x.reset for x in rw], regs
    )
    compare("weights after RESET", weights, got)


async def xor_step(dut, port: LinkPort, rng: random.Random, *, retries: int = 0, **garble):
    """One ES step of a tiny xor job driven by the host's own ``pentegg.device.Device``
    and ``Trainer`` (RESET, configuration, samples, labels, weights, latent, batch
    indices, RUN train, STATUS polls, read-back), compared with ``pentegg.golden``'s
    ``es_step`` (scores, theta, weights, latent). Returns the driver's and the
    transport's counters."""
    p = _params()
    task = XorTask()
    batch = len(task.x_train)
    cfg = Config(
        layers=task.layers((p["max_width"],)),
        population=p["max_population"],
        rank=p["rank"],
        mode=p["mode"],
        digits=p["digits"],
        update=p["update"],
        latent_bits=p["latent_bits"],
        shaping=rng.choice(["rank", "sign"]),
        init="random",
        seed=rng.randrange(1 << 32),
    ).validate()
    state = init_state(cfg)
    state.step = rng.randrange(60000)
    dut._log.info(f"xor job: {cfg}, step {state.step}")
    transport = BridgedTransport(port, **garble)

    def host():
        dev = HostDevice(transport, timeout=3600.0, retries=retries, name="cocotb")
        trainer = Trainer(dev, task, cfg, batch)
        trainer.start(state)
        new, scores = trainer.steps(state.step, 1)
        return new, scores, dev.read_regs(["theta"])["theta"], dev.stats

    got, scores, theta, stats = await bridge(host)()
    want, step_info = es_step(state, task.scorer(cfg, state.step, batch))
    dut._log.info(f"host traffic: {stats}, line errors made: {transport.garbled}")
    compare("scores", step_info.scores, scores)
    assert theta == step_info.theta, f"theta {theta}, golden {step_info.theta}"
    assert got.step == want.step
    for l in range(cfg.n_layers):
        compare(f"layer {l} weights", want.weights[l], got.weights[l])
        if cfg.update == "latent":
            compare(f"layer {l} latent", want.latent[l], got.latent[l])
    return stats, transport


@cocotb.test()
async def training_step(dut):
    """One xor step through the host's driver on a clean line (no retries allowed)
    equals golden."""
    port, rng = await setup(dut)
    stats, _ = await xor_step(dut, port, rng)
    assert stats["retries"] == 0


@cocotb.test()
async def training_step_through_line_errors(dut):
    """Line errors: three requests (of the configuration, the uploads and the step's
    requests; at least three writes apart) and the response to RUN get one bit flipped;
    the driver's retries recover (the device answers CRC or FRAME to a corrupted request;
    RUN's retry has the same ``seq`` and is answered without a second run) and the step
    still equals golden."""
    port, rng = await setup(dut)
    # three writes at least three apart: a request is then corrupted at most twice, and
    # with the garbled RUN response its retries stay within the driver's 3 (writes 9, 10
    # and 12 once hit RUN three times after its garbled response: four failed attempts)
    while True:
        garble = sorted(rng.sample(range(1, 24), 3))
        if garble[1] - garble[0] >= 3 and garble[2] - garble[1] >= 3:
            break
    dut._log.info(f"corrupting writes {garble} and the first RUN's response")
    stats, transport = await xor_step(
        dut, port, rng, retries=3, garble_writes=garble, garble_run_response=True
    )
    assert transport.garbled == 4, f"{transport.garbled} line errors made, not 4"
    assert stats["retries"] == 4, f"{stats['retries']} retries for 4 line errors"
