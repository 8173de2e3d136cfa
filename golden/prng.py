"""Spec section 2: the keyed, restartable pentary PRNG.

* ``xs32``: Marsaglia's xorshift32 with shifts (13, 17, 5); the stream generator.
* ``mix32``: six rounds of ``x = xs32(x); x = x + (x << 11)`` (mod 2**32), a
  bijection of 32-bit words that fixes 0 and is non-linear over GF(2) (carries).
* ``run_key(seed) = mix32(seed ^ RUN_SALT) | 0x8000_0000`` once per run.
* ``stream_key(step, pair, layer, ab) = step<<15 | pair<<4 | layer<<1 | ab`` (31 bits).
* ``stream_state = mix32(stream_key ^ run_key)``: never 0, and distinct keys of one run
  give distinct states (mix32 is a bijection and ``stream_key ^ run_key`` has bit 31 set).
* Word ``i`` of a stream is ``xs32^i(stream_state)``; digits are taken LSB first.

All functions are vectorised over arrays of keys/states.
"""

from __future__ import annotations

import numpy as np

XS_SHIFTS = (13, 17, 5)
MIX_ROUNDS = 6
MIX_ADD_SHIFT = 11
RUN_SALT = 0x5EED_E66B

STEP_BITS = 16
PAIR_BITS = 11
LAYER_BITS = 3
MAX_STEP = (1 << STEP_BITS) - 2  # 0xFFFF is reserved for the initial weights
INIT_STEP = (1 << STEP_BITS) - 1
MAX_PAIRS = 1 << PAIR_BITS
MAX_LAYERS = 1 << LAYER_BITS
AB_A = 0
AB_B = 1

DIGIT_DISTS = ("binomial", "uniform")
DIGITS_PER_WORD = {"binomial": 8, "uniform": 4}

_U32 = np.uint32
_POP4 = np.array([bin(i).count("1") for i in range(16)], dtype=np.int8)


def xs32(x):
    """One xorshift32 step on a uint32 array."""
    x = np.asarray(x, dtype=_U32)
    x = x ^ (x << _U32(XS_SHIFTS[0]))
    x = x ^ (x >> _U32(XS_SHIFTS[1]))
    return x ^ (x << _U32(XS_SHIFTS[2]))


def mix32(x):
    """The key mixer: MIX_ROUNDS rounds of xs32 then ``x += x << 11`` (mod 2**32)."""
    x = np.asarray(x, dtype=_U32)
    with np.errstate(over="ignore"):  # addition is mod 2**32 by definition
        for _ in range(MIX_ROUNDS):
            x = xs32(x)
            x = x + (x << _U32(MIX_ADD_SHIFT))
    return x


def run_key(seed: int) -> np.uint32:
    """Per-run key ``S``: bit 31 is always set."""
    if not 0 <= int(seed) < 1 << 32:
        raise ValueError(f"seed={seed} out of range 0..{(1 << 32) - 1}")
    return _U32(mix32(_U32(int(seed) ^ RUN_SALT)) | _U32(0x8000_0000))


def stream_key(step, pair, layer, ab):
    """Pack (step, pair, layer, A|B) into 31 bits: ``step<<15 | pair<<4 | layer<<1 | ab``."""
    step = np.asarray(step, dtype=np.int64)
    pair = np.asarray(pair, dtype=np.int64)
    layer = np.asarray(layer, dtype=np.int64)
    ab = np.asarray(ab, dtype=np.int64)
    for name, v, hi in (
        ("step", step, (1 << STEP_BITS) - 1),
        ("pair", pair, MAX_PAIRS - 1),
        ("layer", layer, MAX_LAYERS - 1),
        ("ab", ab, 1),
    ):
        if v.size and (v.min() < 0 or v.max() > hi):
            raise ValueError(f"stream_key: {name} out of range 0..{hi}")
    k = (step << 15) | (pair << 4) | (layer << 1) | ab
    return k.astype(_U32)


def stream_state(seed: int, step, pair, layer, ab):
    """Initial xorshift32 state of the stream keyed by (seed, step, pair, layer, ab)."""
    return mix32(stream_key(step, pair, layer, ab) ^ run_key(seed))


def stream_words(state0, n_words: int) -> np.ndarray:
    """Words 0..n_words-1 of every stream: ``w[..., i] = xs32^i(state0)``.

    The loop runs over the position in the stream (the generator is sequential by
    definition); each iteration advances every stream of the call at once.
    """
    x = np.asarray(state0, dtype=_U32)
    out = np.empty((*x.shape, n_words), dtype=_U32)
    for i in range(n_words):
        out[..., i] = x
        x = xs32(x)
    return out


def words_to_digits(words, dist: str) -> np.ndarray:
    """Digits of a word array, LSB first within each word (spec 2.5)."""
    w = np.asarray(words, dtype=_U32)
    if dist == "binomial":
        nib = (w[..., None] >> (np.arange(8, dtype=_U32) * _U32(4))) & _U32(0xF)
        d = _POP4[nib] - 2
    elif dist == "uniform":
        byte = (w[..., None] >> (np.arange(4, dtype=_U32) * _U32(8))) & _U32(0xFF)
        d = ((byte * _U32(5)) >> _U32(8)).astype(np.int8) - 2
    else:
        raise ValueError(f"digit distribution {dist!r} not one of {DIGIT_DISTS}")
    return d.reshape((*w.shape[:-1], -1)).astype(np.int8)


def stream_digits(state0, n_digits: int, dist: str) -> np.ndarray:
    """The first ``n_digits`` digits of every stream (spec 2.5)."""
    per = DIGITS_PER_WORD[dist]
    words = stream_words(state0, -(-n_digits // per))
    return words_to_digits(words, dist)[..., :n_digits]


def digit_probabilities(dist: str) -> dict[int, float]:
    """Exact probability of each digit value under ``dist`` (for tests and docs)."""
    if dist == "binomial":
        return {d: c / 16 for d, c in zip(range(-2, 3), (1, 4, 6, 4, 1), strict=True)}
    if dist == "uniform":
        return {d: c / 256 for d, c in zip(range(-2, 3), (52, 51, 51, 51, 51), strict=True)}
    raise ValueError(f"digit distribution {dist!r} not one of {DIGIT_DISTS}")
