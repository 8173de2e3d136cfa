"""Spec section 11: the state file format.

``save_state`` writes atomically (temporary file in the same directory, fsync, rename);
``load_state`` refuses anything that is not an intact pentegg state file with a one-line
:class:`StateFileError`.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from pathlib import Path

import numpy as np

from .config import Config, ConfigError
from .digit import DigitRangeError, pack, unpack
from .model import TrainState
from .prng import MAX_STEP

MAGIC = b"PENTEGG\0"
FORMAT_VERSION = 1
_DIGEST = 32


class StateFileError(ValueError):
    """A file that is not an intact pentegg state file of a supported version."""


def _encode(state: TrainState, meta: dict | None) -> bytes:
    from . import SPEC_VERSION

    arrays, payload = [], []
    for l, w in enumerate(state.weights):
        raw = pack(w).astype("<u2").tobytes()
        arrays.append(
            {"name": f"W{l}", "kind": "digits", "shape": list(w.shape), "nbytes": len(raw)}
        )
        payload.append(raw)
    for l, v in enumerate(state.latent or []):
        raw = v.astype("<i2").tobytes()
        arrays.append({"name": f"V{l}", "kind": "i16", "shape": list(v.shape), "nbytes": len(raw)})
        payload.append(raw)
    header = json.dumps(
        {
            "spec": SPEC_VERSION,
            "config": state.cfg.to_dict(),
            "step": state.step,
            "arrays": arrays,
            "meta": meta or {},
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    body = MAGIC + struct.pack("<II", FORMAT_VERSION, len(header)) + header + b"".join(payload)
    return body + hashlib.sha256(body).digest()


def _umask() -> int:
    """The process's umask: from /proc where Linux gives it (no change to the process),
    else by setting it and back."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def new_file_mode(path: str | os.PathLike | None = None) -> int:
    """The permissions a file written through a temporary file and a rename should get:
    those of ``path`` if it exists (a user's ``chmod`` is kept), else what ``open(path,
    "w")`` would give a new file (0o666 less the umask), not ``tempfile.mkstemp``'s 0o600."""
    if path is not None:
        try:
            return os.stat(path).st_mode & 0o7777
        except OSError:
            pass
    return 0o666 & ~_umask()


def write_atomically(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in its directory, flushed to
    disk, then renamed over it: a reader sees the old file or the new one, never a part.
    The file gets :func:`new_file_mode` (a file system that refuses modes, such as vfat,
    keeps the write working)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            try:
                os.fchmod(f.fileno(), new_file_mode(path))
            except OSError:
                pass
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save_state(path: str | os.PathLike, state: TrainState, meta: dict | None = None) -> None:
    """Write ``state`` (and JSON-serialisable ``meta``) to ``path`` atomically
    (:func:`write_atomically`)."""
    write_atomically(path, _encode(state, meta))


def decode_state(data: bytes, name: str = "state file") -> tuple[TrainState, dict]:
    """Parse and verify the bytes of a state file. Returns (state, meta)."""
    if len(data) < len(MAGIC) + 8 + _DIGEST or data[: len(MAGIC)] != MAGIC:
        raise StateFileError(f"{name}: not a pentegg state file (bad magic)")
    version, hlen = struct.unpack_from("<II", data, len(MAGIC))
    if version != FORMAT_VERSION:
        raise StateFileError(
            f"{name}: format version {version} is not supported (this pentegg reads "
            f"version {FORMAT_VERSION})"
        )
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha256(body).digest() != digest:
        raise StateFileError(f"{name}: checksum mismatch, the file is corrupt or truncated")
    start = len(MAGIC) + 8
    try:
        header = json.loads(body[start : start + hlen].decode())
        cfg = Config.from_dict(header["config"])
        step = int(header["step"])
        arrays = header["arrays"]
        meta = header.get("meta", {})
        if not isinstance(meta, dict):
            raise TypeError(f"meta is a {type(meta).__name__}, not an object")
    except (
        ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError,
        ConfigError,
    ) as e:  # fmt: skip
        raise StateFileError(f"{name}: malformed header ({type(e).__name__}: {e})") from None
    if not 0 <= step <= MAX_STEP + 1:
        raise StateFileError(f"{name}: step {step} out of range")
    pos = start + hlen
    found: dict[str, np.ndarray] = {}
    try:
        for a in arrays:
            shape = tuple(int(n) for n in a["shape"])
            raw = body[pos : pos + int(a["nbytes"])]
            if len(raw) != int(a["nbytes"]):
                raise StateFileError(f"{name}: array {a['name']} is truncated")
            pos += len(raw)
            count = int(np.prod(shape))
            if a["kind"] == "digits":
                found[a["name"]] = unpack(np.frombuffer(raw, "<u2"), count).reshape(shape)
            elif a["kind"] == "i16":
                found[a["name"]] = np.frombuffer(raw, "<i2").astype(np.int16).reshape(shape)
            else:
                raise StateFileError(f"{name}: unknown array kind {a['kind']!r}")
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, DigitRangeError) as e:
        if isinstance(e, StateFileError):
            raise
        raise StateFileError(f"{name}: array payload does not match its header ({e})") from None
    if pos != len(body):
        raise StateFileError(f"{name}: {len(body) - pos} unexpected trailing bytes")
    weights, latent = [], []
    for l in range(cfg.n_layers):
        if f"W{l}" not in found or found[f"W{l}"].shape != cfg.shape(l):
            raise StateFileError(f"{name}: weight matrix W{l} missing or of the wrong shape")
        weights.append(found[f"W{l}"])
        if cfg.update == "latent":
            v = found.get(f"V{l}")
            if v is None or v.shape != cfg.shape(l):
                raise StateFileError(f"{name}: latent matrix V{l} missing or of the wrong shape")
            if np.abs(v).max(initial=0) > cfg.latent_max():
                raise StateFileError(f"{name}: latent matrix V{l} exceeds ±{cfg.latent_max()}")
            latent.append(v)
    return TrainState(cfg, step, weights, latent if cfg.update == "latent" else None), meta


def load_state(path: str | os.PathLike) -> tuple[TrainState, dict]:
    """Read and verify a state file. Returns (state, meta)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise StateFileError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise StateFileError(f"{p}: is a directory, not a state file") from None
    except OSError as e:
        raise StateFileError(f"{p}: cannot read ({e.strerror})") from None
    return decode_state(data, str(p))
