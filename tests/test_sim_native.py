"""The simulated device's native harness and the host's transports (pentegg.transport).

The device here is EchoDevice (sim/native_echo.py), a byte echo with the link device's
ports that holds its output for LATENCY cycles after every 0x00 it sends: a response then
ends long after its request did, so the harness must keep clocking while one is
outstanding. One build per test session, in a private cache.
"""

import contextlib
import gc
import io
import os
import random
import subprocess
import time
import warnings

import pytest

from pentegg.link import request_bytes
from pentegg.rtl.link.protocol import Cmd
from pentegg.sim import native_build
from pentegg.sim.native_echo import EchoDevice
from pentegg.transport import (
    SerialTransport,
    SimTransport,
    TransportError,
    TransportSpecError,
    open_transport,
    parse_spec,
)

LATENCY = 1000
PARAMS = {"depth": 16, "latency": LATENCY}


@pytest.fixture(scope="module")
def echo_build(tmp_path_factory):
    cache = tmp_path_factory.mktemp("native-cache")
    err = io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stderr(err):
        exe = native_build.native_device(EchoDevice, PARAMS, cache_dir=cache)
    seconds = time.monotonic() - t0
    print(f"[native] first build {seconds:.1f} s")
    return {"exe": exe, "cache": cache, "log": err.getvalue(), "seconds": seconds}


@pytest.fixture
def sim(echo_build):
    with SimTransport(echo_build["exe"]) as t:
        yield t


def read_exactly(t, n: int, timeout: float = 20.0) -> bytes:
    got = bytearray()
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += t.read(deadline - time.monotonic())
    return bytes(got)


def test_cache_hit_on_second_build(echo_build):
    assert "building simulated device" in echo_build["log"]
    assert echo_build["exe"].is_file()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        t0 = time.monotonic()
        again = native_build.native_device(EchoDevice, PARAMS, cache_dir=echo_build["cache"])
        hit = time.monotonic() - t0
        # the same design through its Verilog: elaborated, but not Verilated again
        same = native_build.build_native(EchoDevice(**PARAMS), cache_dir=echo_build["cache"])
    print(f"[native] cache hit {hit * 1e3:.0f} ms (first build {echo_build['seconds']:.1f} s)")
    assert again == same == echo_build["exe"]
    assert err.getvalue() == ""
    assert hit < 2.0
    assert not list(echo_build["cache"].glob("*.tmp-*"))


def test_bulk_bytes_round_trip(sim):
    # frames of 4 KB (each delimiter costs the echo LATENCY cycles), every byte value
    rng = random.Random(1)
    data = b"".join(rng.randbytes(4095).replace(b"\x00", b"\x01") + b"\x00" for _ in range(128))
    data = data.replace(b"\x01", b"\x00", 1000)  # and some empty frames
    t0 = time.monotonic()
    sim.write(data)
    got = read_exactly(sim, len(data), timeout=60)
    seconds = time.monotonic() - t0
    assert got == data
    print(
        f"[native] bulk: {len(data)} bytes echoed in {seconds:.3f} s, "
        f"{len(data) / seconds / 1e6:.2f} MB/s"
    )


def test_many_small_frames(sim):
    n = 2000
    t0 = time.monotonic()
    for seq in range(n):
        req = request_bytes(Cmd.READ_REGS, seq, (seq * 2654435761 % 2**32).to_bytes(4, "little"))
        sim.write(req)
        assert read_exactly(sim, len(req), timeout=5) == req, f"request {seq}"
    seconds = time.monotonic() - t0
    print(
        f"[native] {n} round trips of {len(req)} bytes: {seconds / n * 1e6:.0f} us each "
        f"(echo latency {LATENCY} cycles)"
    )
    assert sim.read(0.05) == b""


def test_partial_frames_wait_for_their_delimiter(sim):
    frame = request_bytes(Cmd.WRITE_MEM, 7, bytes(range(1, 200)))
    head, tail = frame[:60], frame[60:]
    sim.write(head)
    early = sim.read(0.3)
    # only whole bytes of the head came back, and no frame can have ended
    assert head.startswith(early)
    assert early.count(0) <= 1
    for i in range(len(tail)):  # the rest one byte at a time
        sim.write(tail[i : i + 1])
    rest = read_exactly(sim, len(frame) - len(early))
    assert early + rest == frame
    assert sim.read(0.05) == b""


def test_empty_frames_get_no_response_but_do_not_stall(sim):
    zeros = b"\x00" * 10
    sim.write(zeros)  # empty frames: nothing is outstanding, the harness may block
    time.sleep(0.1)
    frame = b"\x05\x06\x07\x00"
    sim.write(frame)  # a non-empty frame: everything comes out
    assert read_exactly(sim, len(zeros) + len(frame)) == zeros + frame


@pytest.mark.parametrize("run_ahead", [0, 5 * LATENCY])
def test_run_ahead_clocks_on_after_a_response(echo_build, run_ahead):
    # a frame, then a byte of the next: the echo holds that byte LATENCY cycles after the
    # frame's delimiter went out, when the harness (nothing outstanding) may stop clocking
    with SimTransport(echo_build["exe"], run_ahead=run_ahead) as t:
        t.write(b"\x00\x01\x00\x02")
        got = read_exactly(t, 3 if run_ahead == 0 else 4, timeout=5)
        time.sleep(0.1)
        got += t.read(0.1)
    assert got == (b"\x00\x01\x00" if run_ahead == 0 else b"\x00\x01\x00\x02")


def test_eof_ends_the_harness_cleanly(echo_build):
    frames = b"".join(request_bytes(Cmd.INFO, s) for s in range(50))
    done = subprocess.run(
        [str(echo_build["exe"])], input=frames + b"\x01\x02", capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == frames  # every whole frame answered; the partial one dropped
    t = SimTransport(echo_build["exe"])
    t.write(request_bytes(Cmd.STATUS, 1))
    t0 = time.monotonic()
    t.close()  # without reading: the harness finishes the response and exits on its own
    assert time.monotonic() - t0 < t.close_timeout
    assert t.returncode == 0
    t.close()  # idempotent
    with pytest.raises(TransportError, match="closed"):
        t.write(b"\x00")


def test_a_dead_device_is_an_error(echo_build):
    with SimTransport(echo_build["exe"]) as t:
        t._proc.kill()
        with pytest.raises(TransportError, match="exited"):
            t.read(5.0)


def test_open_transport_sim_builds_and_runs(echo_build, monkeypatch):
    monkeypatch.setenv("PENTEGG_SIM_CACHE", str(echo_build["cache"]))
    req = request_bytes(Cmd.INFO, 3)
    with open_transport("sim", device_factory=EchoDevice, params=PARAMS) as t:
        assert isinstance(t, SimTransport) and t.executable == echo_build["exe"]
        t.write(req)
        assert read_exactly(t, len(req)) == req
    with open_transport(f"sim:{echo_build['exe']}", run_ahead=10_000) as t:
        t.write(req)
        assert read_exactly(t, len(req)) == req


def test_device_without_link_ports_is_refused(tmp_path):
    from pentegg.sim.loopback import StreamLoopback

    dut = StreamLoopback(8, 4)
    with pytest.raises(native_build.NativeBuildError, match=r"rx__valid .*tx__payload"):
        native_build.build_native(dut, cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())
    with warnings.catch_warnings():  # never elaborated, by design
        warnings.simplefilter("ignore")
        del dut
        gc.collect()


@pytest.mark.parametrize(
    ("spec", "parsed"),
    [
        ("sim", ("sim", None, None)),
        ("sim:/x/device", ("sim", "/x/device", None)),
        ("serial:/dev/ttyUSB1", ("serial", "/dev/ttyUSB1", 3_000_000)),
        ("serial:/dev/ttyUSB1@3000000", ("serial", "/dev/ttyUSB1", 3_000_000)),
        ("serial:COM3@9600", ("serial", "COM3", 9600)),
    ],
)
def test_parse_spec(spec, parsed):
    assert parse_spec(spec) == parsed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tcp:localhost", "unknown transport 'tcp:localhost': use sim, sim:PATH"),
        ("serial:", "expected serial:PORT"),
        ("serial:/dev/ttyUSB1@fast", "baud 'fast' is not a positive integer"),
        ("serial:/dev/ttyUSB1@0", "baud '0' is not a positive integer"),
        ("sim:", "needs a path"),
        ("sim", "needs a device to simulate"),
        ("sim:/nonexistent/device", "does not exist"),
        ("sim:{not-executable}", "cannot run (Permission denied)"),
        ("serial:/nonexistent/tty", "cannot open serial port /nonexistent/tty"),
    ],
)
def test_bad_specs_are_one_line_value_errors(spec, message, tmp_path):
    (tmp_path / "plain").write_text("not a program\n")
    spec = spec.replace("{not-executable}", str(tmp_path / "plain"))
    with pytest.raises(TransportSpecError) as e:
        open_transport(spec)
    assert isinstance(e.value, ValueError)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_serial_transport_on_a_pty():
    master, slave = os.openpty()
    try:
        with SerialTransport(os.ttyname(slave), 115_200) as t:
            t.write(b"\x00ping\x00")
            assert os.read(master, 100) == b"\x00ping\x00"
            assert t.read(0.05) == b""
            os.write(master, b"\x00pong\x00")
            got = b""
            deadline = time.monotonic() + 2
            while len(got) < 6 and time.monotonic() < deadline:
                got += t.read(0.5)
            assert got == b"\x00pong\x00"
    finally:
        os.close(master)
        os.close(slave)
