"""Protocol fuzzing on the simulated device and on the compact device's firmware
(docs/protocol.md): random and malformed frames interleaved with valid requests. Every
frame gets the right status, nothing hangs, and the weights and latent state read back
unchanged at the end."""

from __future__ import annotations

import os
import random
import struct

import numpy as np
import pytest

from pentegg import accel_protocol as ap
from pentegg.device import DeviceError
from pentegg.golden import Config, init_state
from pentegg.link import (
    FrameReader,
    cobs_decode,
    cobs_encode,
    crc16,
    parse_response,
    request_frame,
    words,
)
from pentegg.rtl.link.protocol import VERSION, Cmd, Status
from pentegg.sim import harness

FRAMES = int(os.environ.get("PENTEGG_FUZZ_FRAMES", "10000"))
CFG = Config(layers=(4, 8, 3), population=8, rank=4, init="random", seed=5)


@pytest.fixture(scope="module", params=["sim", "firmware"])
def device(request):
    """The accelerator's Verilog (sim) and the compact device's firmware built for this
    host (firmware): the same protocol, the same answers."""
    from pentegg.device import open_device

    dev = open_device(
        request.param, cfg=CFG, batch=4, samples=16, lanes=2, frame_bytes=256, quiet=True
    )
    yield dev
    dev.close()


class Raw:
    """Raw frames on the device's transport; one response expected per non-empty frame."""

    def __init__(self, dev):
        self.t = dev.transport
        self.reader = FrameReader()
        self.pending: list[bytes] = []

    def send(self, encoded: bytes, timeout: float = 5.0):
        """Send ``encoded`` (COBS bytes, no delimiters) framed; return the response."""
        self.t.write(b"\x00" + encoded + b"\x00")
        return self.receive(timeout)

    def receive(self, timeout: float = 5.0):
        import time

        end = time.monotonic() + timeout
        while not self.pending:
            left = end - time.monotonic()
            assert left > 0, "the device did not answer (hang?)"
            self.pending += self.reader.feed(self.t.read(min(left, 0.05)))
        return parse_response(cobs_decode(self.pending.pop(0)))

    def request(self, cmd, payload=b"", seq=0):
        return self.send(cobs_encode(request_frame(cmd, seq, payload)))


def _frame(ver, seq, cmd, length, payload):
    body = struct.pack("<BBBH", ver, seq, cmd, length) + payload
    return body + crc16(body).to_bytes(2, "big")


KINDS = ["valid", "random", "flip", "truncate", "oversize", "command", "version", "length", "param"]


def _random_invalid(rng) -> bytes:
    """Random non-zero bytes that are not, by chance, a frame with a valid CRC."""
    while True:
        data = bytes(rng.randint(1, 255) for _ in range(rng.randint(1, 40)))
        try:
            frame = cobs_decode(data)
        except ValueError:
            return data
        if len(frame) < 7 or crc16(frame) != 0:
            return data


def test_fuzzed_frames_get_the_right_status_and_change_nothing(device):
    dev = device
    info = dev.info()
    frame_bytes = info["frame_bytes"]
    state = init_state(CFG)
    dev.reset()
    dev.write_regs(ap.config_regs(CFG, step=0, batch=4))
    dev.write_mem("weights", 0, ap.weight_words(state.weights))
    dev.write_mem("latent", 0, ap.latent_words(state.latent))
    dev.write_mem("samples", 0, [1] * 8)
    dev.write_mem("labels", 0, [0] * 4)
    dev.write_mem("batch", 0, [0, 1, 2, 3])
    want_w = ap.weight_words(state.weights)
    want_v = ap.latent_words(state.latent)
    raw = Raw(dev)
    rng = random.Random(harness.pick_seed("link fuzz"))  # PENTEGG_SEED=N replays a run
    kinds: dict[str, int] = {}

    def expect(rsp, status, what):
        assert rsp.status == status, f"{what}: status {rsp.status.name}, want {status.name}"

    for i in range(FRAMES):
        # oversize frames are rare: each is longer than the frame buffer (256 bytes here),
        # and the simulated device takes one byte a cycle
        kind = rng.choices(KINDS, weights=[10, 10, 10, 10, 0.5, 10, 10, 10, 10])[0]
        kinds[kind] = kinds.get(kind, 0) + 1
        seq = i & 0xFF
        if kind == "valid":
            rsp = raw.request(Cmd.READ_MEM, words([0, 4]), seq)
            expect(rsp, Status.OK, "valid READ_MEM")
            assert rsp.words() == [w & 0xFFFF for w in want_w[:4]], "weights changed"
        elif kind == "random":
            data = _random_invalid(rng)
            try:  # not COBS, or shorter than a header and its CRC: FRAME; else CRC
                want = Status.FRAME if len(cobs_decode(data)) < 7 else Status.CRC
            except ValueError:
                want = Status.FRAME
            expect(raw.send(data), want, f"random bytes {data.hex()}")
        elif kind == "flip":
            f = bytearray(_frame(VERSION, seq, Cmd.WRITE_MEM, 8, words([0, 0x1234])))
            bit = rng.randrange(8 * len(f))
            f[bit // 8] ^= 1 << (bit % 8)
            expect(raw.send(cobs_encode(bytes(f))), Status.CRC, f"bit {bit} flipped")
        elif kind == "truncate":
            f = _frame(VERSION, seq, Cmd.WRITE_MEM, 12, words([0, 0x4321, 7]))
            n = rng.randrange(1, len(f))
            want = Status.FRAME if n < 7 else Status.LENGTH if crc16(f[:n]) == 0 else Status.CRC
            expect(raw.send(cobs_encode(f[:n])), want, f"truncated to {n}")
        elif kind == "oversize":
            n = rng.randint(frame_bytes, frame_bytes + 300)
            payload = bytes(rng.randint(0, 255) for _ in range(n))
            f = _frame(VERSION, seq, Cmd.WRITE_MEM, n & 0xFFFF, payload)
            expect(raw.send(cobs_encode(f)), Status.OVERSIZE, f"{n}-byte payload")
        elif kind == "command":
            cmd = rng.choice([0, *range(9, 256)])
            expect(raw.request(cmd, b"", seq), Status.COMMAND, f"cmd {cmd}")
        elif kind == "version":
            ver = rng.choice([v for v in range(256) if v != VERSION])
            f = _frame(ver, seq, Cmd.INFO, 0, b"")
            expect(raw.send(cobs_encode(f)), Status.VERSION, f"version {ver}")
        elif kind == "length":
            f = _frame(VERSION, seq, Cmd.WRITE_MEM, 4, words([0, 0x55]))
            expect(raw.send(cobs_encode(f)), Status.LENGTH, "len 4 with 8 bytes")
        else:
            depth = 1 << 20
            payload = rng.choice(
                [
                    (Cmd.WRITE_MEM, words([6 << 24, 1])),  # g is read-only
                    (Cmd.WRITE_MEM, words([15 << 24, 1])),  # no memory 15
                    (Cmd.WRITE_MEM, words([(depth - 1), 1, 2])),  # past the end
                    (Cmd.READ_MEM, words([9 << 24, 1])),  # samples_packed is write-only
                    (Cmd.READ_MEM, words([10 << 24, 1])),  # member_x_packed too
                    (Cmd.WRITE_MEM, words([11 << 24, 1])),  # weights_packed is read-only
                    (Cmd.WRITE_MEM, words([12 << 24, 1])),  # latent_packed too
                    (Cmd.WRITE_MEM, words([13 << 24, 1])),  # logits_packed too
                    (Cmd.READ_MEM, words([14 << 24, 1])),  # no memory 14
                    # past samples_packed's 16 words (64 sample bytes)
                    (Cmd.WRITE_MEM, words([9 << 24 | 15, 1, 2])),
                    (Cmd.READ_MEM, words([0, 0])),  # count 0
                    (Cmd.READ_MEM, words([0, frame_bytes])),  # more than a frame
                    (Cmd.WRITE_REGS, words([0x00, 1])),  # id is read-only
                    (Cmd.READ_REGS, words([0xEE])),  # unmapped
                    (Cmd.RUN, words([9])),  # no run kind 9
                ]
            )
            expect(raw.request(payload[0], payload[1], seq), Status.PARAM, str(payload))
    # a request while the device is busy: RUN eval (scores only) and a WRITE_MEM sent
    # right behind it, so that the write arrives while the evaluation runs
    dev.write_regs({"batch": 4, "shared": 1})
    run = cobs_encode(request_frame(Cmd.RUN, 1, words([ap.RUN_KINDS["eval"]])))
    write = cobs_encode(request_frame(Cmd.WRITE_MEM, 2, words([0, 0x1111])))
    raw.t.write(b"\x00" + run + b"\x00\x00" + write + b"\x00")
    expect(raw.receive(), Status.OK, "RUN eval")
    expect(raw.receive(), Status.BUSY, "WRITE_MEM while busy")
    while dev.status()["busy"]:
        pass
    # run-time values out of range are taken (OK) and refused by the RUN that would use
    # them, with their flag, before it changes anything
    good = ap.config_regs(CFG, step=0, batch=4)
    for reg, bad, flag in (("population", 5, "population"), ("sigma_shift", 9, "sigma_shift")):
        dev.write_regs({reg: bad})
        with pytest.raises(DeviceError, match=f"ended with error flags: .*{flag}"):
            dev.run("train")
        dev.reset()
        dev.write_regs(good)
    got_w = dev.read_mem("weights", 0, len(want_w))
    got_v = dev.read_mem("latent", 0, len(want_v))
    np.testing.assert_array_equal(got_w, want_w, err_msg="weights changed")
    np.testing.assert_array_equal(got_v, want_v, err_msg="latent changed")
    assert set(kinds) >= {"valid", "random", "flip", "oversize", "param"}
