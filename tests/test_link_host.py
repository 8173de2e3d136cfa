"""The host side of the protocol (pentegg.link, pentegg.device) without hardware: framing
against its definition, and the driver's retries against a scripted transport."""

from __future__ import annotations

import os
import struct
import time

import pytest

from pentegg.device import Device, DeviceError
from pentegg.golden import SPEC_VERSION
from pentegg.link import (
    FrameError,
    FrameReader,
    cobs_decode,
    cobs_encode,
    crc16,
    decode_info,
    parse_response,
    request_frame,
    words,
)
from pentegg.rtl.link.protocol import INFO_FIELDS, VERSION, Cmd, Status


def test_crc16_is_ccitt_false_check_value():
    assert crc16(b"123456789") == 0x29B1


@pytest.mark.parametrize("n", [0, 1, 253, 254, 255, 508, 509, 1000])
def test_cobs_round_trips_without_zero_bytes(n):
    for data in (os.urandom(n), bytes(n), bytes([1]) * n, bytes(range(256)) * (n // 256 + 1)):
        enc = cobs_encode(data)
        assert 0 not in enc and cobs_decode(enc) == data
        assert len(enc) <= len(data) + 1 + len(data) // 254


def test_cobs_decode_refuses_a_block_past_the_end():
    with pytest.raises(FrameError, match="past the end"):
        cobs_decode(bytes([5, 1, 2]))


def test_request_frame_has_zero_crc_residue_and_le_length():
    f = request_frame(Cmd.READ_MEM, 7, words([1, 2]))
    assert f[:5] == bytes([VERSION, 7, Cmd.READ_MEM, 8, 0]) and crc16(f) == 0


def test_frame_reader_cuts_at_delimiters_and_keeps_partial_frames():
    r = FrameReader()
    assert r.feed(b"\x00\x00ab") == []
    assert r.feed(b"c\x00d\x00e") == [b"abc", b"d"]
    assert r.pending() == 1


def _response(seq, cmd, status=0, payload=b""):
    body = struct.pack("<BBBBH", VERSION, seq, cmd, status, len(payload)) + payload
    return body + crc16(body).to_bytes(2, "big")


def test_parse_response_checks_crc_length_and_status():
    ok = _response(3, Cmd.STATUS, 0, words([1, 0, 5]))
    r = parse_response(ok)
    assert (r.seq, r.cmd, r.status, r.words()) == (3, Cmd.STATUS, Status.OK, [1, 0, 5])
    bad = bytearray(ok)
    bad[7] ^= 1
    with pytest.raises(FrameError, match="CRC"):
        parse_response(bytes(bad))
    with pytest.raises(FrameError, match="shorter"):
        parse_response(ok[:5])


def test_parse_response_refuses_another_version_a_wrong_length_and_odd_payloads():
    ok = _response(3, Cmd.STATUS, 0, words([1, 0, 5]))
    for version in (VERSION - 1, VERSION + 1):  # with a valid CRC
        other = bytes([version]) + ok[1:-2]
        with pytest.raises(FrameError, match="protocol version"):
            parse_response(other + crc16(other).to_bytes(2, "big"))
    long = struct.pack("<BBBBH", VERSION, 3, Cmd.STATUS, 0, 4) + words([1, 2])
    with pytest.raises(FrameError, match="response len 4 but 8 payload bytes"):
        parse_response(long + crc16(long).to_bytes(2, "big"))
    for n in (3, 6):
        with pytest.raises(FrameError, match="not whole words"):
            parse_response(_response(1, Cmd.READ_REGS, 0, bytes(n))).words()


def test_logit_words_are_signed_bytes_and_an_empty_write_is_no_command():
    from pentegg.accel_protocol import logits_from_words, mem_write, to_signed

    assert [to_signed(v, 8) for v in (0x7F, 0x80, 0xFF, 0x100)] == [127, -128, -1, 0]
    assert logits_from_words([0xFF, 0x7F, 0x80], 1, 1, 3).tolist() == [[[-1, 127, -128]]]
    assert mem_write("weights", 0, []) == []


def _info_words(**over):
    vals = dict.fromkeys(INFO_FIELDS, 0)
    major, minor = (int(v) for v in SPEC_VERSION.split("."))
    vals.update(magic=0x50454747, protocol=VERSION, spec=major << 16 | minor, max_layers=2)
    vals.update(over)
    vals["frame_bytes"] = vals["frame_bytes"] or 256
    return words(vals[f] for f in INFO_FIELDS)


def test_decode_info_names_enumerated_fields():
    info = decode_info(_info_words(mode=0, digits=1, update=1, lanes=4))
    assert (info["mode"], info["digits"], info["update"], info["lanes"]) == (
        "lowrank",
        "uniform",
        "pentary",
        4,
    )
    assert info["spec"] == SPEC_VERSION
    info = decode_info(_info_words(mode=2, digits=3))
    assert (info["mode"], info["digits"]) == ("unknown (2)", "unknown (3)")
    short = _info_words()[:-4]  # one word short
    with pytest.raises(FrameError, match=f"INFO has {len(INFO_FIELDS) - 1} words"):
        decode_info(short)


class ScriptedTransport:
    """Answers each request with what ``script(frame, n)`` returns (bytes to deliver,
    already framed), ``n`` counting the requests."""

    def __init__(self, script):
        self.script, self.n, self.out = script, 0, b""
        self.reader = FrameReader()

    def write(self, data):
        for raw in self.reader.feed(data):
            frame = cobs_decode(raw)
            self.out += self.script(frame, self.n)
            self.n += 1

    def read(self, timeout):
        out, self.out = self.out, b""
        return out

    def close(self):
        pass


def _framed(frame):
    return b"\x00" + cobs_encode(frame) + b"\x00"


def test_driver_retries_after_a_lost_response_with_the_same_seq():
    seqs = []

    def script(frame, n):
        seqs.append(frame[1])
        if n == 0:
            return b""  # lost
        return _framed(_response(frame[1], frame[2], 0, _info_words()))

    dev = Device(ScriptedTransport(script), timeout=0.05, retries=2)
    assert dev.info()["magic"] == 0x50454747
    assert seqs == [0, 0] and dev.stats["retries"] == 1


def test_driver_retries_after_a_corrupted_response_and_a_crc_status():
    def script(frame, n):
        good = _response(frame[1], frame[2], 0, _info_words())
        if n == 0:
            return _framed(good[:-1] + bytes([good[-1] ^ 0xFF]))
        if n == 1:
            return _framed(_response(frame[1], frame[2], Status.CRC))
        return _framed(good)

    dev = Device(ScriptedTransport(script), timeout=1.0, retries=3)
    dev.info()
    assert dev.stats["retries"] == 2


def test_driver_names_a_refusal_in_one_line():
    def script(frame, n):
        if frame[2] == Cmd.INFO:
            return _framed(_response(frame[1], frame[2], 0, _info_words()))
        return _framed(_response(frame[1], frame[2], Status.BUSY))

    dev = Device(ScriptedTransport(script), timeout=1.0, name="sim")
    with pytest.raises(DeviceError, match=r"^sim: WRITE_REGS refused: BUSY$"):
        dev.write_regs({"seed": 1})


def test_driver_gives_up_after_its_retries():
    dev = Device(ScriptedTransport(lambda f, n: b""), timeout=0.01, retries=2, name="x")
    with pytest.raises(DeviceError, match="no response after 3 attempts"):
        dev.info()


def test_driver_refuses_another_spec_version():
    def script(frame, n):
        return _framed(_response(frame[1], frame[2], 0, _info_words(spec=9 << 16)))

    with pytest.raises(DeviceError, match=r"built for spec 9\.0"):
        Device(ScriptedTransport(script)).info()


def test_a_device_of_another_protocol_version_is_named_at_once_not_retried():
    """A board built before this host's protocol (it answers VERSION, in its own version's
    header): one line that says to rebuild it, after one request."""

    def script(frame, n):
        body = struct.pack("<BBBBH", VERSION - 1, frame[1], frame[2], Status.VERSION, 0)
        return _framed(body + crc16(body).to_bytes(2, "big"))

    t = ScriptedTransport(script)
    with pytest.raises(DeviceError) as e:
        Device(t, timeout=1.0, retries=3, name="serial:/dev/ttyUSB1").info()
    assert str(e.value) == (
        f"serial:/dev/ttyUSB1: the device speaks protocol version {VERSION - 1}, this host "
        f"{VERSION}: build and program the board from this version "
        "(pentegg build --board B --program)"
    )
    assert t.n == 1


@pytest.mark.parametrize(
    "addr, n", [(0, 8), (0, 11), (3, 10), (2, 1), (1, 3), (4, 4), (0, 3), (5, 0)]
)
def test_write_bytes_sends_whole_words_packed_and_the_rest_a_byte_a_word(addr, n):
    """``Device.write_bytes``: bytes from a multiple of 4 go four to a word through the
    packed select (low byte first); the one to three before it and after the last whole
    word through the byte select; every byte once, at its address."""
    from pentegg.rtl.accelerator import MEMORIES

    mem: dict[int, int] = {}
    sends = []

    def script(frame, k):
        if frame[2] == Cmd.WRITE_MEM:
            ws = struct.unpack(f"<{(len(frame) - 7) // 4}I", frame[5:-2])
            sel, at = ws[0] >> 24, ws[0] & 0xFFFFFF
            sends.append((sel, len(ws) - 1))
            for i, w in enumerate(ws[1:]):
                if sel == MEMORIES["samples_packed"]:
                    for j in range(4):
                        mem[4 * (at + i) + j] = (w >> 8 * j) & 0xFF
                else:
                    assert sel == MEMORIES["samples"] and w < 256
                    mem[at + i] = w
            return _framed(_response(frame[1], frame[2]))
        return _framed(_response(frame[1], frame[2], 0, _info_words()))

    values = [(37 * i - 100) for i in range(n)]  # negative: the low 8 bits are sent
    Device(ScriptedTransport(script), timeout=1.0).write_bytes("samples", addr, values)
    assert mem == {addr + i: v & 0xFF for i, v in enumerate(values)}
    head = min(n, -addr % 4)
    whole = (n - head) // 4
    want = [(MEMORIES["samples"], head)] * bool(head) + [
        (MEMORIES["samples_packed"], whole)
    ] * bool(whole)
    want += [(MEMORIES["samples"], n - head - 4 * whole)] * bool(n - head - 4 * whole)
    assert sends == want


@pytest.mark.parametrize("mem", ["weights", "latent", "logits"])
@pytest.mark.parametrize("addr, n", [(0, 8), (0, 11), (3, 10), (2, 1), (1, 3), (5, 0)])
def test_read_mem_packed_reads_whole_words_packed_and_the_rest_a_word_each(mem, addr, n):
    """``Device.read_mem_packed``: the same values as ``read_mem`` (latent values signed),
    whole words through the packed select (two weight words or four latent bytes a word)
    from a multiple of 2 or 4 on, the elements before and after them a word each."""
    from pentegg.rtl.accelerator import MEMORIES

    per = 2 if mem == "weights" else 4
    sel, psel = MEMORIES[mem], MEMORIES[f"{mem}_packed"]
    if mem == "weights":
        values = [(0xF00D + 77 * i) & 0xFFFF for i in range(40)]
    else:  # signed bytes, the extremes among them
        values = [(i * 29) % 255 - 127 for i in range(40)]
    sends = []

    def script(frame, k):
        if frame[2] == Cmd.READ_MEM:
            h, count = struct.unpack("<2I", frame[5:13])
            s, at = h >> 24, h & 0xFFFFFF
            sends.append((s, count))
            if s == psel:
                bits = 32 // per
                mask = (1 << bits) - 1
                out = [
                    sum((values[per * (at + i) + j] & mask) << bits * j for j in range(per))
                    for i in range(count)
                ]
            else:
                assert s == sel
                out = [values[at + i] & 0xFFFF_FFFF for i in range(count)]
            return _framed(_response(frame[1], frame[2], 0, words(out)))
        return _framed(_response(frame[1], frame[2], 0, _info_words()))

    got = Device(ScriptedTransport(script), timeout=1.0).read_mem_packed(mem, addr, n)
    assert got.tolist() == values[addr : addr + n]
    head = min(n, -addr % per)
    whole = (n - head) // per
    tail = n - head - per * whole
    assert sends == [(sel, head)] * bool(head) + [(psel, whole)] * bool(whole) + [
        (sel, tail)
    ] * bool(tail)


def test_serial_without_a_rate_tries_each_board_rate_then_names_them():
    """A port where nothing answers: every board rate is tried, and the one-line error
    names them and how to give a rate."""
    import pty

    from pentegg.device import open_device

    master, slave = pty.openpty()
    try:
        with pytest.raises(DeviceError) as e:
            open_device(f"serial:{os.ttyname(slave)}", timeout=0.2)
    finally:
        os.close(master)
        os.close(slave)
    msg = str(e.value)
    assert "no pentegg device answered at 3000000 or 2000000 baud" in msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("spec", "timeout", "expected"),
    [("sim:/harness", None, 60.0), ("serial:/dev/ttyUSB1@3000000", None, 5.0), ("sim:/h", 7, 7)],
)
def test_a_simulated_device_waits_longer_for_a_response_than_a_board(
    monkeypatch, spec, timeout, expected
):
    """A simulated device's pipe loses nothing: a late answer means a slow simulation (a
    loaded machine), so its default wait is SIM_TIMEOUT_S; a board's is BOARD_TIMEOUT_S,
    a retry recovering a lost frame soon. A given timeout is kept."""
    from pentegg import device, transport

    assert (device.SIM_TIMEOUT_S, device.BOARD_TIMEOUT_S) == (60.0, 5.0)

    def script(frame, n):
        return _framed(_response(frame[1], frame[2], 0, _info_words()))

    monkeypatch.setattr(transport, "open_transport", lambda spec: ScriptedTransport(script))
    dev = device.open_device(spec, timeout=timeout)
    assert dev.timeout == expected
    with pytest.raises(DeviceError, match="must be above 0 s"):
        device.open_device(spec, timeout=0)


@pytest.mark.parametrize("poll_s", [0.01, 0.2])
def test_run_polls_status_with_doubling_waits_up_to_poll_s(monkeypatch, poll_s):
    """RUN, then STATUS until not busy: the waits between polls double from 0.1 ms up to
    the device's ``poll_s`` (0.01 s; the simulated compact device's is larger, so that
    its firmware does not spend its cycles answering polls: SIM_COMPACT_POLL_S)."""
    import pentegg.device as device

    sleeps = []
    monkeypatch.setattr(device.time, "sleep", sleeps.append)

    def script(frame, n):
        if frame[2] == Cmd.STATUS:
            busy = int(n < 14)
            return _framed(_response(frame[1], frame[2], 0, struct.pack("<3I", busy, 0, 0)))
        return _framed(_response(frame[1], frame[2], 0))

    dev = Device(ScriptedTransport(script), timeout=0.05)
    dev.poll_s = poll_s
    dev.run("train")
    assert len(sleeps) == 13
    assert sleeps[0] == pytest.approx(1e-4) and sleeps[1] == pytest.approx(2e-4)
    assert max(sleeps) == pytest.approx(poll_s) and sleeps[-1] == pytest.approx(poll_s)
    assert device.SIM_COMPACT_POLL_S >= 0.1


@pytest.mark.parametrize(
    "what, answer, call, msg",
    [
        ("a short INFO", lambda: _info_words()[:12], "info", "a malformed INFO response"),
        ("9 layers", lambda: _info_words(max_layers=9), "info", "INFO describes no possible"),
        ("an empty STATUS", lambda: b"", "status", "STATUS answered 0 bytes, not 12"),
        ("READ_REGS short", lambda: struct.pack("<I", 1), "regs", "answered 1"),
        ("READ_REGS ragged", lambda: b"\x01\x02\x03", "regs", "not whole words"),
        ("READ_MEM short", lambda: struct.pack("<I", 1), "mem", "answered 4 bytes"),
    ],
)
def test_a_malformed_answer_is_a_one_line_device_error(what, answer, call, msg):
    """A device (or a broken harness) whose OK answers do not have the payload their
    command promises: a :class:`DeviceError` naming the command, never a struct or
    frame exception from inside the driver."""

    def script(frame, n):
        if frame[2] == Cmd.INFO and call != "info":
            return _framed(_response(frame[1], frame[2], 0, _info_words()))
        return _framed(_response(frame[1], frame[2], 0, answer()))

    dev = Device(ScriptedTransport(script), timeout=1.0, name="x")
    with pytest.raises(DeviceError, match=msg):
        if call == "info":
            dev.info()
        elif call == "status":
            dev.status()
        elif call == "regs":
            dev.read_regs(["seed", "population"])
        else:
            dev.read_mem("weights", 0, 2)


def test_info_with_an_impossible_frame_buffer_is_refused():
    def script(frame, n):
        return _framed(_response(frame[1], frame[2], 0, _info_words(frame_bytes=8)))

    with pytest.raises(DeviceError, match="a frame buffer of 8 bytes, not a power of two"):
        Device(ScriptedTransport(script), name="x").info()


def test_answers_with_another_seq_are_named_and_each_retry_is_told():
    """A device that answers with the wrong seq: the retries are announced (``on_retry``)
    and the error says that answers came, to other requests."""
    told = []

    def script(frame, n):
        return _framed(_response(frame[1] + 1, frame[2], 0, _info_words()))

    dev = Device(ScriptedTransport(script), timeout=0.05, retries=2, name="x")
    dev.on_retry = told.append
    with pytest.raises(DeviceError, match=r"no response with seq 0 \(1 to other requests"):
        dev.info()
    assert len(told) == 2 and "sending it again (2 of 3)" in told[0], told


def _run_script(statuses):
    """INFO, then OK to RUN and RESET, and STATUS answers from ``statuses`` (busy, step),
    the last repeated."""
    polls = []

    def script(frame, n):
        if frame[2] == Cmd.INFO:
            return _framed(_response(frame[1], frame[2], 0, _info_words()))
        if frame[2] == Cmd.STATUS:
            busy, step = statuses[min(len(polls), len(statuses) - 1)]
            polls.append(step)
            return _framed(_response(frame[1], frame[2], 0, words([busy, 0, step])))
        return _framed(_response(frame[1], frame[2], 0))

    return script


def test_a_run_is_given_up_when_its_step_stops_moving_not_when_it_is_long():
    # a step every two polls: longer than the timeout in all, never stalled
    script = _run_script([(1, s // 2) for s in range(400)] + [(0, 200)])
    dev = Device(ScriptedTransport(script), timeout=1.0, name="x")
    dev.poll_s = 0.002
    t0 = time.monotonic()
    assert dev.run("train", timeout=0.5)["step"] == 200
    assert time.monotonic() - t0 > 0.5
    # a step that never ends: reset and a one-line error
    dev = Device(ScriptedTransport(_run_script([(1, 3)])), timeout=1.0, name="x")
    dev.poll_s = 0.002
    with pytest.raises(DeviceError, match=r"still busy at step 3 after 0\.1 s without a step"):
        dev.run("train", timeout=0.1)


def test_a_job_whose_scores_no_device_holds_is_refused_before_a_build():
    from pentegg.device import sim_params
    from pentegg.golden import Config

    cfg = Config(layers=(4, 16, 2), population=8)
    assert sim_params(cfg, batch=64, samples=0, score_bound=64 * 500)["max_batch"] == 126
    with pytest.raises(DeviceError, match=r"scores up to 32767500 .* use a smaller --batch"):
        sim_params(cfg, batch=65535, samples=0, score_bound=65535 * 500)


def test_serial_without_a_rate_raises_what_a_board_that_answered_is_refused_for(monkeypatch):
    """A board that answers INFO at the first rate but is refused (another spec): that
    reason, not "no pentegg device answered"."""
    import pentegg.transport as transport_mod
    from pentegg.device import open_device

    def script(frame, n):
        return _framed(_response(frame[1], frame[2], 0, _info_words(spec=9 << 16)))

    opened = []
    monkeypatch.setattr(
        transport_mod,
        "open_transport",
        lambda spec, **kw: opened.append(spec) or ScriptedTransport(script),
    )
    with pytest.raises(DeviceError, match=r"built for spec 9\.0"):
        open_device("serial:/dev/ttyFAKE", quiet=True)
    assert opened == ["serial:/dev/ttyFAKE@3000000"]


@pytest.mark.parametrize(
    "port, reason",
    [
        ("/dev/nonexistent-pentegg", "no such device (is the board plugged in?"),
        ("/dev/null", "not a serial port"),
    ],
)
def test_a_serial_port_that_does_not_open_is_named_with_the_reason(port, reason):
    from pentegg.transport import SerialTransport, TransportSpecError

    with pytest.raises(TransportSpecError) as e:
        SerialTransport(port)
    assert str(e.value).startswith(f"cannot open serial port {port}: {reason}"), str(e.value)


def test_a_serial_port_without_permission_says_which_group_to_join():
    import errno

    from pentegg.transport import _open_error

    e = OSError(errno.EACCES, "Permission denied")
    assert "join the group that owns it, usually dialout" in _open_error(e)
    assert _open_error(OSError(errno.EBUSY, "busy")).startswith("busy")
