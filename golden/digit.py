"""Spec section 1: the pentary digit, its storage code and its packing.

A digit takes a value in P = {-2, -1, 0, +1, +2}. Its storage code is the 3-bit two's
complement of the value (``110 111 000 001 010``); codes ``011 100 101`` are invalid.
Five digits pack into one 16-bit word, digit ``i`` in bits ``[3i+2 : 3i]``, bit 15 zero.
A matrix packs row-major, starting on a word boundary; the last word is padded with the
code of 0. Words are serialised little-endian.
"""

from __future__ import annotations

import numpy as np

DIGIT_MIN = -2
DIGIT_MAX = 2
CODE_BITS = 3
DIGITS_PER_WORD = 5
WORD_BITS = 16
INVALID_CODES = (0b011, 0b100, 0b101)


class DigitRangeError(ValueError):
    """A value outside P = {-2..2} was given where a pentary digit is required."""


def check_digits(d, name: str = "digits") -> np.ndarray:
    """Return ``d`` as int8, or raise naming the first value outside -2..2."""
    a = np.asarray(d)
    if a.size and (a.min() < DIGIT_MIN or a.max() > DIGIT_MAX):
        flat = a.reshape(-1)
        i = int(np.flatnonzero((flat < DIGIT_MIN) | (flat > DIGIT_MAX))[0])
        raise DigitRangeError(
            f"{name}: value {int(flat[i])} at flat index {i} is not a pentary digit "
            f"(allowed range {DIGIT_MIN}..{DIGIT_MAX})"
        )
    return a.astype(np.int8)


def encode(d) -> np.ndarray:
    """Digit values -> 3-bit codes (uint8)."""
    return (check_digits(d).astype(np.int16) & 0b111).astype(np.uint8)


def decode(code) -> np.ndarray:
    """3-bit codes -> digit values; invalid codes raise."""
    c = np.asarray(code, dtype=np.int16)
    if c.size and ((c < 0) | (c > 7)).any():
        raise DigitRangeError("decode: code outside 0..7")
    bad = np.isin(c, INVALID_CODES)
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        raise DigitRangeError(
            f"decode: invalid digit code {int(c.reshape(-1)[i]):03b} at index {i}"
        )
    return np.where(c >= 4, c - 8, c).astype(np.int8)


def pack(d) -> np.ndarray:
    """Pack a digit array (any shape, read row-major) into uint16 words."""
    codes = encode(np.asarray(d).reshape(-1)).astype(np.uint16)
    n = codes.size
    nw = -(-n // DIGITS_PER_WORD)
    padded = np.zeros(nw * DIGITS_PER_WORD, dtype=np.uint16)
    padded[:n] = codes
    lanes = padded.reshape(nw, DIGITS_PER_WORD)
    shifts = (np.arange(DIGITS_PER_WORD, dtype=np.uint16) * CODE_BITS).astype(np.uint16)
    return np.bitwise_or.reduce(lanes << shifts, axis=1).astype(np.uint16)


def unpack(words, count: int) -> np.ndarray:
    """Inverse of :func:`pack`: the first ``count`` digits of a word array."""
    w = np.asarray(words, dtype=np.uint16).reshape(-1)
    if count > w.size * DIGITS_PER_WORD:
        raise ValueError(f"unpack: {count} digits requested from {w.size} words")
    if w.size and (w >> 15).any():
        raise DigitRangeError("unpack: bit 15 of a packed word is set")
    shifts = (np.arange(DIGITS_PER_WORD, dtype=np.uint16) * CODE_BITS).astype(np.uint16)
    codes = (w[:, None] >> shifts) & 0b111
    return decode(codes.reshape(-1)[:count])


def packed_bytes(mats) -> bytes:
    """Storage format of a list of digit matrices: each packed from a word boundary,
    words little-endian, matrices concatenated in order (spec 1.4; packing: 1.3)."""
    return b"".join(pack(m).astype("<u2").tobytes() for m in mats)
