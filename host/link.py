"""Host side of the framed byte protocol (docs/protocol.md): COBS, CRC, frames.

Pure Python and transport-free: :func:`request_bytes` gives the bytes to send for one
request, :class:`FrameReader` cuts a received byte stream into frames and
:func:`parse_response` checks and decodes one. The device driver (``pentegg.device``)
puts them on a transport.
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass

from .rtl.link.protocol import (
    CRC_BYTES,
    INFO_CHOICES,
    INFO_FIELDS,
    RESPONSE_HEADER,
    VERSION,
    Status,
)

__all__ = [
    "FrameError",
    "FrameReader",
    "Response",
    "VersionMismatch",
    "cobs_decode",
    "cobs_encode",
    "crc16",
    "decode_info",
    "parse_response",
    "request_bytes",
    "request_frame",
    "words",
]


class FrameError(ValueError):
    """A received frame is malformed (COBS, CRC, header or length)."""


class VersionMismatch(FrameError):
    """A whole, CRC-checked response of another protocol version: the device was built
    from another version of pentegg (``version``: its protocol version)."""

    def __init__(self, version: int):
        super().__init__(f"response protocol version {version}, expected {VERSION}")
        self.version = version


def crc16(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (0x29B1 for b"123456789")."""
    return binascii.crc_hqx(bytes(data), crc)


def cobs_encode(data: bytes) -> bytes:
    """Consistent Overhead Byte Stuffing: ``data`` without zero bytes (no delimiter)."""
    out = bytearray()
    block = bytearray()
    for b in data:
        if b == 0:
            out.append(len(block) + 1)
            out += block
            block.clear()
        else:
            block.append(b)
            if len(block) == 254:
                out.append(255)
                out += block
                block.clear()
    out.append(len(block) + 1)
    out += block
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    """The inverse of :func:`cobs_encode`; :class:`FrameError` if ``data`` is not COBS."""
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        code = data[i]
        if code == 0:
            raise FrameError("COBS: zero byte inside a frame")
        end = i + code
        if end > n:
            raise FrameError("COBS: block runs past the end of the frame")
        block = data[i + 1 : end]
        if 0 in block:
            raise FrameError("COBS: zero byte inside a frame")
        out += block
        i = end
        if code != 255 and i < n:
            out.append(0)
    return bytes(out)


def request_frame(cmd: int, seq: int, payload: bytes = b"", *, version: int = VERSION) -> bytes:
    """The decoded request frame: header, payload and CRC."""
    body = struct.pack("<BBBH", version & 0xFF, seq & 0xFF, int(cmd) & 0xFF, len(payload))
    body += bytes(payload)
    return body + crc16(body).to_bytes(2, "big")


def request_bytes(cmd: int, seq: int, payload: bytes = b"") -> bytes:
    """What the host sends for one request: a delimiter (which ends any partial frame
    the device holds), the COBS-encoded frame, a delimiter."""
    return b"\x00" + cobs_encode(request_frame(cmd, seq, payload)) + b"\x00"


def words(values) -> bytes:
    """32-bit little-endian words (each value taken modulo 2**32)."""
    vals = [int(v) & 0xFFFF_FFFF for v in values]
    return struct.pack(f"<{len(vals)}I", *vals)


@dataclass(frozen=True)
class Response:
    seq: int
    cmd: int
    status: Status
    payload: bytes

    def words(self) -> list[int]:
        if len(self.payload) % 4:
            raise FrameError(f"payload of {len(self.payload)} bytes is not whole words")
        return list(struct.unpack(f"<{len(self.payload) // 4}I", self.payload))


def parse_response(frame: bytes) -> Response:
    """Check and decode one COBS-decoded response frame."""
    if len(frame) < RESPONSE_HEADER + CRC_BYTES:
        raise FrameError(f"response of {len(frame)} bytes is shorter than a header and CRC")
    if crc16(frame) != 0:
        raise FrameError("response CRC is wrong")
    ver, seq, cmd, status, n = struct.unpack_from("<BBBBH", frame)
    if ver != VERSION:
        raise VersionMismatch(ver)
    if n != len(frame) - RESPONSE_HEADER - CRC_BYTES:
        raise FrameError(f"response len {n} but {len(frame) - 8} payload bytes")
    try:
        st = Status(status)
    except ValueError:
        raise FrameError(f"unknown response status {status}") from None
    return Response(seq, cmd, st, frame[RESPONSE_HEADER:-CRC_BYTES])


class FrameReader:
    """Cuts a byte stream at zero delimiters; :meth:`feed` returns the complete frames
    (still COBS-encoded, empty frames dropped)."""

    def __init__(self):
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        *done, rest = (bytes(self._buf) + bytes(data)).split(b"\x00")
        self._buf = bytearray(rest)
        return [f for f in done if f]

    def pending(self) -> int:
        return len(self._buf)


def decode_info(payload: bytes) -> dict:
    """INFO's payload as a dict (enumerated fields by name, ``spec`` as "major.minor")."""
    n = len(payload) // 4
    vals = struct.unpack(f"<{n}I", payload[: 4 * n])
    if n < len(INFO_FIELDS):
        raise FrameError(f"INFO has {n} words, expected {len(INFO_FIELDS)}")
    info = dict(zip(INFO_FIELDS, vals, strict=False))
    for name, choices in INFO_CHOICES.items():
        v = info[name]
        info[name] = choices[v] if v < len(choices) else f"unknown ({v})"
    info["spec"] = f"{info['spec'] >> 16}.{info['spec'] & 0xFFFF}"
    return info
