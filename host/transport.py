"""Byte transports to a pentegg device: a board's serial port, or the simulated device.

A :class:`Transport` moves the protocol's bytes (docs/protocol.md) and nothing else:
:meth:`~Transport.write` sends, :meth:`~Transport.read` returns whatever arrived within a
timeout (possibly nothing). Framing, retries and the command set are the device driver's
(``pentegg.link``, ``pentegg.device``). Both transports carry the same bytes.

* ``serial:PORT[@BAUD]`` -- :class:`SerialTransport`, a UART through pyserial
  (``serial:/dev/ttyUSB1@3000000``; the default rate is the boards' 3 Mbaud).
* ``sim`` -- :class:`SimTransport`, the device Verilated with the native harness
  (``sim/native/device_main.cpp``) as a child process on pipes; ``device_factory`` builds
  the Amaranth device, built once and cached (``pentegg.sim.native_build``).
* ``sim:PATH`` -- a simulated device executable already built.

:func:`open_transport` parses a spec; a bad one raises :class:`TransportSpecError`, a
``ValueError`` with a one-line message.
"""

from __future__ import annotations

import abc
import errno
import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_BAUD",
    "SerialTransport",
    "SimTransport",
    "Transport",
    "TransportError",
    "TransportSpecError",
    "open_transport",
]

#: The UART's rate when a ``serial:`` spec names none.
DEFAULT_BAUD = 3_000_000  # both board builds run their UART at 3 Mbaud (docs/boards.md)


class TransportError(RuntimeError):
    """The transport failed: the simulated device exited, the port vanished."""


class TransportSpecError(TransportError, ValueError):
    """A transport spec that does not parse, or names something that is not there."""


class Transport(abc.ABC):
    """Bytes to and from a device. Subclasses implement :meth:`write`, :meth:`read` and
    :meth:`close`; a transport is a context manager that closes itself."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None:
        """Send ``data`` (all of it, in order)."""

    @abc.abstractmethod
    def read(self, timeout: float) -> bytes:
        """The bytes received so far, waiting up to ``timeout`` seconds for the first; ``b""``
        when none came."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the device; idempotent."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SimTransport(Transport):
    """The simulated device: ``executable`` (built by :mod:`pentegg.sim.native_build`) as a
    child process, its stdin and stdout the device's rx and tx byte streams.

    Both pipes are non-blocking: :meth:`write` drains the child's output into a buffer
    while it waits for room in the child's input, so neither side can block the other
    however much is in flight, without a thread (a thread hand-off tripled the round trip).
    :meth:`close` closes the child's stdin (the harness finishes an outstanding response,
    then exits) and kills it if it has not exited within ``close_timeout`` seconds; a child
    whose host dies sees EOF the same way.

    ``run_ahead`` cycles are clocked after each response before the harness blocks waiting
    for the next request (default 0: the device advances only while a request is
    outstanding; see docs/protocol.md, "The simulated device").
    """

    def __init__(
        self,
        executable: str | os.PathLike,
        *,
        run_ahead: int = 0,
        close_timeout: float = 5.0,
    ):
        exe = Path(executable)
        if not exe.is_file():
            raise TransportSpecError(f"simulated device {exe} does not exist")
        args = [str(exe.absolute())]  # not looked up on PATH
        if run_ahead:
            args += ["--run-ahead", str(int(run_ahead))]
        self.executable = exe
        self.close_timeout = close_timeout
        try:
            self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as e:  # not executable, not a program for this machine
            raise TransportSpecError(
                f"simulated device {exe} cannot run ({e.strerror}): give a harness "
                "executable built by pentegg (--device sim builds one)"
            ) from None
        self._in = self._proc.stdin.fileno()
        self._out = self._proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._buf = bytearray()
        self._eof = False
        self._closed = False

    @classmethod
    def for_device(
        cls,
        factory: Callable[..., Any],
        params: dict[str, Any] | None = None,
        *,
        cache_dir: str | os.PathLike | None = None,
        **kwargs: Any,
    ) -> SimTransport:
        """Build (or find in the cache) ``factory(**params)`` under the native harness and
        open it. ``kwargs`` go to the constructor."""
        from .sim.native_build import native_device

        return cls(native_device(factory, params, cache_dir=cache_dir), **kwargs)

    def _pull(self) -> bool:
        """Move what the child has written into the buffer; False if there was nothing."""
        try:
            chunk = os.read(self._out, 1 << 16)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    def _died(self) -> TransportError:
        try:
            code = self._proc.wait(timeout=1.0)
            text = f"exit code {code}"
        except subprocess.TimeoutExpired:
            text = "its pipes are closed"
        return TransportError(f"the simulated device exited ({text})")

    def write(self, data: bytes) -> None:
        if self._closed:
            raise TransportError("write to a closed simulated device")
        view = memoryview(bytes(data))
        while view:
            try:
                n = os.write(self._in, view)
                view = view[n:]
                continue
            except BlockingIOError:
                pass
            except OSError as e:  # BrokenPipeError: the child has gone
                raise self._died() from e
            # the pipe is full: take the child's output meanwhile, so that it can go on
            while self._pull():
                pass
            select.select([] if self._eof else [self._out], [self._in], [], 1.0)

    def read(self, timeout: float) -> bytes:
        if self._closed:
            return b""
        deadline = time.monotonic() + max(0.0, timeout)
        while self._pull():
            pass
        while not self._buf and not self._eof:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            select.select([self._out], [], [], left)
            while self._pull():
                pass
        if not self._buf and self._eof:
            raise self._died()
        data = bytes(self._buf)
        self._buf.clear()
        return data

    @property
    def returncode(self) -> int | None:
        """The child's exit code once it has exited, else ``None``."""
        return self._proc.poll()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + self.close_timeout
        while self._proc.poll() is None and time.monotonic() < deadline:
            # keep its stdout drained: a child blocked writing a response would never exit
            select.select([] if self._eof else [self._out], [], [], 0.05)
            self._buf.clear()
            while self._pull():
                self._buf.clear()
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._proc.stdout.close()

    def __del__(self):  # a forgotten transport must not leave its child behind
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None and not getattr(self, "_closed", True):
            proc.kill()


def _open_error(e: Exception) -> str:
    """Why a serial port did not open, in a few words and what to do (pyserial's message
    names the port twice and the errno twice)."""
    code = getattr(e, "errno", None)
    if code is None:  # "Could not configure port": the termios error it came from
        code = next(iter(getattr(e.__context__, "args", ())), None)
    if code == errno.ENOTTY:
        return "not a serial port"
    if code == errno.ENOENT:
        return "no such device (is the board plugged in? docs/boards.md, 'Finding the serial port')"
    if code in (errno.EACCES, errno.EPERM):
        return "permission denied (on Linux: join the group that owns it, usually dialout)"
    if code == errno.EBUSY:
        return "busy (another program has it open)"
    if isinstance(code, int):
        return os.strerror(code)
    return str(e)


class SerialTransport(Transport):
    """A UART through pyserial: ``port`` at ``baud``, 8N1, no flow control. The driver's
    low-latency mode is asked for where it exists (Linux FTDI/CP210x; failure ignored),
    so that short responses are not held for the adapter's 16 ms latency timer."""

    def __init__(self, port: str, baud: int = DEFAULT_BAUD, *, write_timeout: float = 5.0):
        try:
            import serial
        except ImportError as e:  # pragma: no cover - a dependency of pentegg
            raise TransportError("pyserial is not installed (pip install pyserial)") from e
        try:
            self._serial = serial.Serial(port, baud, timeout=0, write_timeout=write_timeout)
        except (serial.SerialException, ValueError) as e:
            raise TransportSpecError(f"cannot open serial port {port}: {_open_error(e)}") from None
        try:
            self._serial.set_low_latency_mode(True)
        except (AttributeError, NotImplementedError, ValueError, OSError):
            pass
        self.port, self.baud = port, baud
        self._timeout = 0.0

    def write(self, data: bytes) -> None:
        import serial

        try:
            self._serial.write(bytes(data))
            self._serial.flush()
        except serial.SerialException as e:
            raise TransportError(f"serial port {self.port}: {e}") from None

    def read(self, timeout: float) -> bytes:
        import serial

        timeout = max(0.0, timeout)
        try:
            if timeout != self._timeout:
                self._serial.timeout = self._timeout = timeout
            data = self._serial.read(1)
            if data:
                data += self._serial.read(self._serial.in_waiting)
        except serial.SerialException as e:
            raise TransportError(f"serial port {self.port}: {e}") from None
        return data

    def close(self) -> None:
        self._serial.close()


def parse_spec(spec: str) -> tuple[str, str | None, int | None]:
    """``(kind, target, baud)`` of a transport spec: ``("sim", None|PATH, None)`` or
    ``("serial", PORT, BAUD)``; :class:`TransportSpecError` if it does not parse."""
    kind, sep, rest = spec.partition(":")
    if kind == "sim":
        if sep and not rest:
            raise TransportSpecError(f"transport {spec!r}: 'sim:' needs a path after the colon")
        return "sim", rest or None, None
    if kind == "serial":
        port, at, baud_text = rest.rpartition("@") if "@" in rest else (rest, "", "")
        if not port:
            raise TransportSpecError(
                f"transport {spec!r}: expected serial:PORT[@BAUD], e.g. serial:/dev/ttyUSB1@3000000"
            )
        baud = DEFAULT_BAUD
        if at:
            try:
                baud = int(baud_text)
            except ValueError:
                baud = 0
            if baud <= 0:
                raise TransportSpecError(
                    f"transport {spec!r}: baud {baud_text!r} is not a positive integer"
                )
        return "serial", port, baud
    raise TransportSpecError(f"unknown transport {spec!r}: use sim, sim:PATH or serial:PORT[@BAUD]")


def open_transport(
    spec: str,
    *,
    device_factory: Callable[..., Any] | None = None,
    params: dict[str, Any] | None = None,
    run_ahead: int = 0,
) -> Transport:
    """Open the transport named by ``spec`` (``sim``, ``sim:PATH``, ``serial:PORT[@BAUD]``).

    For ``sim`` the device is ``device_factory(**params)``, built under the native harness
    on first use and cached (:func:`pentegg.sim.native_build.native_device`); ``run_ahead``
    is :class:`SimTransport`'s. Other specs ignore the three.
    """
    kind, target, baud = parse_spec(spec)
    if kind == "sim":
        if target is not None:
            return SimTransport(target, run_ahead=run_ahead)
        if device_factory is None:
            raise TransportSpecError(
                "transport 'sim' needs a device to simulate (no device_factory given)"
            )
        return SimTransport.for_device(device_factory, params, run_ahead=run_ahead)
    return SerialTransport(target, baud)
