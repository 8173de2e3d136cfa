"""The Accelerator's word-level commands, host side (rtl/control/command.py is the device
side; docs/rtl.md, "Commands", the reference).

Pure Python: functions that turn a training configuration and data into command words and
decode what comes back. The simulation tests drive the RTL with them; the host link
(UART framing) carries the same words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from .golden.config import Config
from .golden.digit import DIGITS_PER_WORD, pack, unpack
from .rtl.accelerator import MEMORIES
from .rtl.control.command import Op
from .rtl.control.controller import CONTROL_ERRORS, RUN_KINDS
from .rtl.control.registers import register_map
from .rtl.evaluator.sequencer import ERROR_FLAGS

__all__ = [
    "config_regs",
    "config_words",
    "decode_error",
    "latent_from_words",
    "logits_from_words",
    "mem_read",
    "mem_write",
    "member_words",
    "pack_bytes",
    "reg_read",
    "reg_write",
    "run",
    "weights_from_words",
]


def _addr(name: str, max_layers: int) -> int:
    for r in register_map(max_layers):
        if r.name == name:
            return r.addr
    raise KeyError(f"no register '{name}'")


def reg_write(name: str, value: int, max_layers: int) -> list[int]:
    return [(Op.WREG.value << 28) | _addr(name, max_layers), int(value) & 0xFFFF_FFFF]


def reg_read(name: str, max_layers: int) -> list[int]:
    return [(Op.RREG.value << 28) | _addr(name, max_layers)]


def mem_write(mem: str, addr: int, values: Iterable[int]) -> list[int]:
    vals = [int(v) & 0xFFFF_FFFF for v in values]
    if not vals:
        return []
    return [(Op.WMEM.value << 28) | (MEMORIES[mem] << 24) | addr, len(vals), *vals]


def low_bytes(values: Iterable[int]) -> np.ndarray:
    """Each value's low 8 bits, flat, as uint8 (an array is taken as it is, without a
    Python list in between: a dataset is tens of thousands of values)."""
    a = values if isinstance(values, np.ndarray) else np.asarray(list(values))
    return (a.astype(np.int64) & 0xFF).astype(np.uint8).ravel()


def pack_bytes(values: Iterable[int]) -> list[int]:
    """Bytes (each value's low 8 bits) four to a word, the first in bits 7:0: the words of
    a packed select (docs/protocol.md, "Packed words"). A multiple of 4 values."""
    b = low_bytes(values)
    if b.size % 4:
        raise ValueError(f"{b.size} bytes do not fill whole words (a multiple of 4)")
    return [int(w) for w in b.view("<u4")]


def mem_read(mem: str, addr: int, count: int) -> list[int]:
    return [(Op.RMEM.value << 28) | (MEMORIES[mem] << 24) | addr, count]


def run(kind: str) -> list[int]:
    return [(Op.RUN.value << 28) | RUN_KINDS[kind]]


def config_regs(
    cfg: Config, *, step: int, steps: int = 1, batch: int = 1, shared=True
) -> dict[str, int]:
    """The registers of a run of ``cfg`` (its run-time parameters, spec 9.1), by name."""
    regs = {
        "population": cfg.population,
        "batch": batch,
        "n_layers": cfg.n_layers,
        "sigma_shift": cfg.sigma_shift,
        "shaping": int(cfg.shaping == "sign"),
        "tau": cfg.tau_q4(),
        "latent_shift": cfg.latent_shift,
        "margin": cfg.margin,
        "seed": cfg.seed,
        "init": int(cfg.init == "random"),
        "step": step,
        "steps": steps,
        "batch_stride": batch,
        "shared": int(shared),
    }
    for i, w in enumerate(cfg.layers):
        regs[f"width{i}"] = w
    for l, s in enumerate(cfg.shifts()):
        regs[f"act_shift{l}"] = s
    return regs


def config_words(
    cfg: Config, max_layers: int, *, step: int, steps: int = 1, batch: int = 1, shared=True
) -> list[int]:
    """Register writes for a run of ``cfg`` (:func:`config_regs`) as command words."""
    regs = config_regs(cfg, step=step, steps=steps, batch=batch, shared=shared)
    return [w for name, value in regs.items() for w in reg_write(name, value, max_layers)]


def weight_words(weights: Sequence[np.ndarray]) -> list[int]:
    """The weight memory image (spec 1.4)."""
    return [int(v) for w in weights for v in pack(w)]


def latent_words(latent: Sequence[np.ndarray]) -> list[int]:
    """The latent memory image: one V per word, layers one after another, row-major."""
    return [int(v) for x in latent for v in np.asarray(x).ravel()]


def weights_from_words(words, shapes: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """Inverse of :func:`weight_words`: the digit matrices of ``shapes`` (out, fan) from
    the weight memory's words (each layer from a word boundary, spec 1.4);
    :class:`~pentegg.golden.DigitRangeError` for a word no digits pack to."""
    words, out, at = np.asarray(words), [], 0
    for rows, fan in shapes:
        n = -(-rows * fan // DIGITS_PER_WORD)
        out.append(unpack(words[at : at + n], rows * fan).reshape(rows, fan))
        at += n
    return out


def latent_from_words(values, shapes: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """Inverse of :func:`latent_words`: the V matrices of ``shapes`` (out, fan)."""
    values, out, at = np.asarray(values), [], 0
    for rows, fan in shapes:
        out.append(values[at : at + rows * fan].reshape(rows, fan))
        at += rows * fan
    return out


def member_words(x) -> list[int]:
    """The ``member_x`` memory image of per-member inputs ``x`` (population, batch, n_0),
    int8: member ``m``, sample ``b``, input ``k`` at ``(m * batch + b) * n_0 + k``, a
    byte per word."""
    return [int(v) & 0xFF for v in np.asarray(x).reshape(-1)]


def logits_from_words(words: Sequence[int], population: int, batch: int, n_out: int):
    """Logits (population, batch, n_out) from the words of ``RMEM logits`` (read from
    address 0, ``population * batch * n_out`` of them)."""
    n = population * batch * n_out
    if len(words) != n:
        raise ValueError(f"{len(words)} logit words, expected {n}")
    vals = [to_signed(int(w), 8) for w in words]
    return np.array(vals, dtype=np.int64).reshape(population, batch, n_out)


def to_signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def decode_error(flags: int) -> list[str]:
    """Names of the error flags set in the ``error`` register."""
    names = {**{b: f"evaluator {t}" for b, t in ERROR_FLAGS.items()}, **CONTROL_ERRORS}
    names[14] = "bad command"
    return [names.get(b, f"bit {b}") for b in range(16) if flags >> b & 1]
