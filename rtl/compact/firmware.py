"""The compact device's firmware (``rtl/compact/firmware/*.c``): its build parameters and
its native build.

The firmware is the compact device's controller: the host protocol, the accelerator's
registers and memories, and the ES step of docs/spec.md. It is C, compiled from the same
sources for two targets:

* the compact device's RV32I core (:mod:`pentegg.rtl.compact.soc`, through the ``ziglang``
  cross compiler);
* the host (``cc``): :func:`native_device` builds an executable that speaks the protocol
  on stdin/stdout, the same bytes as the device's link, so the host driver drives it as a
  ``sim:PATH`` device. The tests use it to check the firmware against the golden model at
  native speed, before and besides the RTL that runs it.

The build's parameters have the names and ranges of the Accelerator's elaboration
parameters (rtl/accelerator.py) and reach the C code as ``-D`` definitions
(:func:`defines`); INFO reports them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...golden import SPEC_VERSION
from ..link.engine import check_frame_bytes
from ..link.protocol import INFO_CHOICES, VERSION
from ..params import check_choice, check_int
from .engine import Z_WORDS

__all__ = [
    "DEFAULTS",
    "FIRMWARE_DIR",
    "SOURCES",
    "FirmwareBuildError",
    "Image",
    "check_params",
    "defines",
    "engine_fits",
    "image",
    "native_device",
]

FIRMWARE_DIR = Path(__file__).resolve().parent / "firmware"
#: The sources of every build; ``hal_native.c`` or ``hal_soc.c`` is added per target.
SOURCES = ("main.c", "link.c", "accel.c", "spec.c")
HEADERS = ("fw.h",)

#: Build parameters and their defaults (the Accelerator's names).
DEFAULTS: dict[str, Any] = {
    "lanes": 1,
    "max_layers": 2,
    "max_width": 64,
    "rank": 4,
    "mode": "lowrank",
    "digits": "binomial",
    "update": "latent",
    "latent_bits": 8,
    "max_population": 256,
    "max_batch": 1024,
    "sample_bytes": 4096,
    "label_words": 1024,
    "batch_words": 1024,
    "member_bytes": 4096,
    "logit_bytes": 1024,
    "frame_bytes": 2048,
    "clock_hz": 0,
    "baud": 0,
}


class FirmwareBuildError(RuntimeError):
    """The compiler failed or is missing (one-line message naming the log)."""


def check_params(**params: Any) -> dict[str, Any]:
    """:data:`DEFAULTS` updated with ``params``, every value checked (``ValueError`` naming
    the parameter and its range, ``TypeError`` for an unknown name)."""
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown firmware parameter(s): {', '.join(sorted(unknown))}")
    p = {**DEFAULTS, **params}
    check_int("lanes", p["lanes"], 1, 256)
    check_int("max_layers", p["max_layers"], 1, 8)
    check_int("max_width", p["max_width"], 1, 4096)
    check_choice("rank", p["rank"], (1, 4, 16, 64))
    for name in ("mode", "digits", "update"):
        check_choice(name, p[name], INFO_CHOICES[name])
    check_int("latent_bits", p["latent_bits"], 3, 8)
    if not isinstance(p["max_population"], int) or p["max_population"] % 2:
        raise ValueError(
            f"max_population={p['max_population']!r} is not an even integer in 2..4096"
        )
    check_int("max_population", p["max_population"], 2, 4096)
    check_int("max_batch", p["max_batch"], 1, 65535)
    for name in ("sample_bytes", "label_words", "batch_words", "member_bytes", "logit_bytes"):
        check_int(name, p[name], 16, 1 << 20)
    for name in ("sample_bytes", "member_bytes"):  # whole packed words, as the Accelerator's
        if p[name] % 4:
            raise ValueError(f"{name}={p[name]} is not a multiple of 4 in 16..{1 << 20}")
    check_frame_bytes(p["frame_bytes"])
    check_int("clock_hz", p["clock_hz"], 0, 10**9)
    check_int("baud", p["baud"], 0, 10**8)
    # a memory's words are addressed by the protocol's 24 bits (docs/protocol.md)
    latent = p["max_layers"] * p["max_width"] * (p["max_width"] + 1)
    if latent > 1 << 24:
        raise ValueError(
            f"max_layers={p['max_layers']}, max_width={p['max_width']}: the latent memory's "
            f"{latent} words are past the protocol's 2**24 addresses"
        )
    # the firmware holds Z in 32 bits: |Z| <= pairs * max|g| * max|e| (spec 9.2)
    pairs = p["max_population"] // 2
    e_max = 2 if p["mode"] == "quantized" else 4 * p["rank"]
    z_bound = pairs * 2 * (p["max_population"] - 1) * e_max
    if z_bound >= 1 << 31:
        raise ValueError(
            f"max_population={p['max_population']} with rank {p['rank']} ({p['mode']}) "
            f"gives |Z| up to {z_bound}: the firmware holds Z in 32 bits (at most 2**31 - 1)"
        )
    return p


def defines(params: dict[str, Any]) -> dict[str, int]:
    """The C definitions of a checked parameter set (:func:`check_params`)."""
    p = params
    major, minor = (int(x) for x in SPEC_VERSION.split("."))
    return {
        "LANES": p["lanes"],
        "MAX_LAYERS": p["max_layers"],
        "MAX_WIDTH": p["max_width"],
        "RANK": p["rank"],
        "QUANTIZED": int(p["mode"] == "quantized"),
        "UNIFORM": int(p["digits"] == "uniform"),
        "PENTARY": int(p["update"] == "pentary"),
        "LATENT_BITS": p["latent_bits"],
        "MAX_POPULATION": p["max_population"],
        "MAX_BATCH": p["max_batch"],
        "SAMPLE_BYTES": p["sample_bytes"],
        "LABEL_WORDS": p["label_words"],
        "BATCH_WORDS": p["batch_words"],
        "MEMBER_BYTES": p["member_bytes"],
        "LOGIT_BYTES": p["logit_bytes"],
        "FRAME_BYTES": p["frame_bytes"],
        "CLOCK_HZ": p["clock_hz"],
        "BAUD": p["baud"],
        "SPEC_VERSION_WORD": major << 16 | minor,
        "PROTOCOL_VERSION": VERSION,
    }


def _define_flags(params: dict[str, Any]) -> list[str]:
    return [f"-D{k}={v}" for k, v in defines(params).items()]


def _digest(files: list[Path], flags: list[str]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update("\0".join(flags).encode())
    return h.hexdigest()[:20]


def _cache_root() -> Path:
    env = os.environ.get("PENTEGG_SIM_CACHE")
    if env:
        return Path(env) / "firmware"
    root = Path(__file__).resolve().parents[2]
    base = root / "build" if (root / "pyproject.toml").is_file() else Path.cwd() / "build"
    return base / "firmware"


def native_device(params: dict[str, Any] | None = None, *, cache_dir=None) -> Path:
    """The firmware built for the host with ``params`` (:func:`check_params`): an
    executable speaking the protocol on stdin/stdout, cached by the hash of its sources
    and flags (built in a private directory, renamed into place)."""
    p = check_params(**(params or {}))
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise FirmwareBuildError("no C compiler found (install gcc, or set CC)")
    sources = [FIRMWARE_DIR / s for s in (*SOURCES, "hal_native.c")]
    flags = ["-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", *_define_flags(p)]
    key = _digest([*sources, *(FIRMWARE_DIR / h for h in HEADERS)], [cc, *flags])
    root = Path(cache_dir) if cache_dir else _cache_root()
    exe = root / key / "device"
    if exe.is_file():
        return exe
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=root))
    try:
        log = tmp / "cc.log"
        cmd = [cc, *flags, *map(str, sources), "-o", str(tmp / "device")]
        with open(log, "w") as f:
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False)
        if r.returncode:
            keep = root / f"{key}.failed"
            shutil.rmtree(keep, ignore_errors=True)
            tmp.rename(keep)
            raise FirmwareBuildError(f"native firmware build failed; log: {keep / 'cc.log'}")
        with contextlib.suppress(OSError):  # another process may have won the race
            tmp.rename(root / key)
        if exe.is_file():
            return exe
        raise FirmwareBuildError(f"native firmware build left no executable in {root / key}")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------- RV32I builds
#: The compact device's RAM starts here (rtl/compact/soc.py, RAM_BASE); the image too.
RAM_BASE = 0x1000_0000
#: The firmware's code and read-only data: the first CODE_BYTES of the RAM (the rest is
#: its data, the host memories and the stack).
CODE_BYTES = 24 * 1024
#: The least room the firmware's stack must have above its zeroed data (bytes).
MIN_STACK = 2048
#: the largest RAM the compact device takes (``CompactSoC``'s ``ram_bytes`` range; the
#: iCEBreaker build's four SPRAMs are 128 KiB)
MAX_RAM_BYTES = 512 * 1024
#: The firmware's optimisation (-Os: -O2 took 10 % fewer cycles for 25 % more code on the
#: xor step, measured at the first build)
OPT = "-Os"


@dataclass(frozen=True)
class Image:
    """An RV32I build for the compact device: ``words`` (little-endian 32-bit words from
    ``base``: code, read-only data, the data's initial values), the zeroed data's size
    and the stack's room."""

    words: tuple[int, ...]
    base: int
    bss_bytes: int
    stack_bytes: int

    @property
    def nbytes(self) -> int:
        return 4 * len(self.words)


def _rv32(sources, **kw):
    from ..cpu.toolchain import FirmwareError, ToolNotFound, build_firmware

    try:
        return build_firmware(
            [FIRMWARE_DIR / s for s in sources],
            out_dir=_cache_root(),
            cflags=[f"-I{FIRMWARE_DIR}"],
            opt=OPT,
            **kw,
        )
    except (FirmwareError, ToolNotFound) as e:
        raise FirmwareBuildError(str(e)) from None


def engine_fits(params: dict[str, Any]) -> bool:
    """Does the compact device's datapath (rtl/compact/engine.py) take this build? It
    computes the low-rank mode at ranks 1 and 4 and layers up to 127 wide; otherwise the
    firmware computes the forward pass itself."""
    return params["mode"] == "lowrank" and params["rank"] in (1, 4) and params["max_width"] <= 127


def image(params: dict[str, Any] | None = None, *, ram_bytes: int, engine: bool = False) -> Image:
    """The firmware built for the compact device's RV32I core: code and read-only data in
    the first :data:`CODE_BYTES` of a RAM of ``ram_bytes`` at :data:`RAM_BASE`, its data
    after them (``FirmwareBuildError`` when it does not fit with :data:`MIN_STACK` bytes
    of stack). ``engine``: the device has the datapath (:func:`engine_fits`), which the
    firmware then drives."""
    p = check_params(**(params or {}))
    if engine and not engine_fits(p):
        raise ValueError("engine=True: the datapath does not take this build (engine_fits)")
    if not CODE_BYTES < ram_bytes <= MAX_RAM_BYTES:  # a parameter's range: a ValueError
        why = (
            f"the compact device's RAM holds at most {MAX_RAM_BYTES}"
            if ram_bytes > MAX_RAM_BYTES
            else f"the firmware's code alone takes {CODE_BYTES}"
        )
        raise ValueError(
            f"ram_bytes={ram_bytes} is not in {CODE_BYTES + 1}..{MAX_RAM_BYTES} ({why})"
        )
    fw = _rv32(
        [*SOURCES, "hal_soc.c"],
        rom_base=RAM_BASE,
        rom_bytes=CODE_BYTES,
        ram_base=RAM_BASE + CODE_BYTES,
        ram_bytes=ram_bytes - CODE_BYTES,
        defines={**defines(p), "ENGINE": int(engine), "ENGINE_Z_WORDS": Z_WORDS},
    )
    stack = ram_bytes - CODE_BYTES - fw.ram_used
    if stack < MIN_STACK:
        raise FirmwareBuildError(
            f"the firmware's data ({fw.ram_used} bytes) leaves {stack} bytes of stack in "
            f"the RAM's {ram_bytes - CODE_BYTES} past its code, less than {MIN_STACK}: "
            f"reduce the memories (sample_bytes, label_words, member_bytes, ...)"
        )
    used = -(-fw.rom_used // 4)
    return Image(tuple(fw.words[:used]), RAM_BASE, fw.bss_bytes, stack)


def flash_image(img: Image) -> bytes:
    """What the flash holds at ``flash_offset`` for a ``flash`` boot: the image's length
    in bytes (a little-endian word), then the image."""
    return struct.pack("<I", img.nbytes) + struct.pack(f"<{len(img.words)}I", *img.words)
