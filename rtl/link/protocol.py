"""Constants of the host protocol (docs/protocol.md), shared by the device's engine and
the host's driver so that the two cannot disagree.

A frame, before COBS (docs/protocol.md, "Frames"):

* request:  ``ver  seq  cmd  len[2, LE]  payload[len]  crc[2, BE]``
* response: ``ver  seq  cmd  status  len[2, LE]  payload[len]  crc[2, BE]``

``crc`` is CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no xorout) of
every byte before it, most significant byte first, so the CRC of a whole frame is 0.
"""

from __future__ import annotations

import enum

__all__ = [
    "INFO_FIELDS",
    "REQUEST_HEADER",
    "RESPONSE_HEADER",
    "VERSION",
    "Cmd",
    "Status",
    "max_payload",
]

#: Protocol version, the first byte of every frame.
VERSION = 2

#: Header bytes before the payload.
REQUEST_HEADER = 5
RESPONSE_HEADER = 6
#: CRC bytes after the payload.
CRC_BYTES = 2


class Cmd(enum.IntEnum):
    """Request commands (docs/protocol.md, "Commands")."""

    INFO = 0x01
    WRITE_REGS = 0x02
    READ_REGS = 0x03
    WRITE_MEM = 0x04
    READ_MEM = 0x05
    RUN = 0x06
    STATUS = 0x07
    RESET = 0x08


class Status(enum.IntEnum):
    """Response status codes (docs/protocol.md, "Status")."""

    OK = 0
    CRC = 1  # the frame's CRC is wrong
    FRAME = 2  # COBS error, or fewer bytes than a header and a CRC
    LENGTH = 3  # len differs from the payload, or is wrong for the command
    OVERSIZE = 4  # the frame is longer than the device's frame buffer
    VERSION = 5  # ver is not VERSION
    COMMAND = 6  # unknown cmd
    PARAM = 7  # a register, memory, address, count or run kind out of range
    BUSY = 8  # the accelerator runs; only INFO, READ_REGS, STATUS, RESET are served


#: INFO's payload: one 32-bit little-endian word per field, in this order.
INFO_FIELDS = (
    "magic",  # 0x50454747, 'PEGG'
    "protocol",  # VERSION
    "spec",  # spec version, major << 16 | minor
    "lanes",
    "max_layers",
    "max_width",
    "rank",
    "mode",  # 0 lowrank, 1 quantized
    "digits",  # 0 binomial, 1 uniform
    "update",  # 0 latent, 1 pentary
    "latent_bits",
    "max_population",
    "max_batch",
    "sample_bytes",
    "label_words",
    "batch_words",
    "frame_bytes",
    "clock_hz",  # the core clock; 0 in simulation
    "baud",  # the UART's rate; 0 without a UART (simulation)
    "member_bytes",  # per-member inputs (RL)
    "logit_bytes",  # per-member logits
)

#: Enumerated INFO fields: the value is the index in the tuple.
INFO_CHOICES = {
    "mode": ("lowrank", "quantized"),
    "digits": ("binomial", "uniform"),
    "update": ("latent", "pentary"),
}

#: Frame buffer sizes a device may be built with (bytes, a power of two).
FRAME_BYTES_RANGE = (256, 65536)


def max_payload(frame_bytes: int) -> int:
    """The largest payload (bytes, a multiple of 4) of a device with this frame buffer:
    a response (the larger header) and its CRC must fit."""
    return (frame_bytes - RESPONSE_HEADER - CRC_BYTES) // 4 * 4
