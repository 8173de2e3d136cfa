"""Firmware for RV32Core: C and assembly through the PyPI ``ziglang`` compiler.

:func:`build_firmware` compiles and links ``sources`` with ``python -m ziglang cc
-target riscv32-freestanding-none -mcpu=generic_rv32`` (RV32I: multiply and divide come
from zig's compiler_rt, which it links, as well as ``memcpy``/``memset``), the start-up
code ``crt0.S`` next to this file and a generated linker script, then ``python -m ziglang
objcopy -O binary`` makes the ROM image. Memory layout:

* ROM at ``rom_base``: ``.text`` (``crt0``'s ``_start`` first, so execution starts at
  ``rom_base``), ``.rodata``, then the load image of ``.data``;
* RAM at ``ram_base``: ``.data`` (copied from ROM by ``crt0``), ``.bss`` (zeroed by
  ``crt0``); the stack grows down from ``_stack_top`` (default: the end of RAM).

Symbols the start-up code uses: ``_stack_top``, ``_data_start``, ``_data_end``,
``_data_load``, ``_bss_start``, ``_bss_end``. ``main``'s return value is in ``a0`` when
the core halts (``ebreak`` after ``main``).

Builds are cached by content: a hash of the sources (and the ``*.h`` files next to them,
which are on the include path), the start-up code, the options and the compiler version
names a directory under ``out_dir`` that holds the ELF, the image and a manifest; the
same inputs give the same words, and a second call only reads them. The first build on
a machine also compiles zig's compiler_rt for the target (cached by zig, a few seconds).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..params import check_int
from ..toolchain import ToolNotFound

__all__ = ["CRT0", "Firmware", "FirmwareError", "ToolNotFound", "build_firmware", "linker_script"]

#: The start-up code linked first into every firmware.
CRT0 = Path(__file__).with_name("crt0.S")

TARGET = ("-target", "riscv32-freestanding-none", "-mcpu=generic_rv32")
#: Compiler flags besides ``opt``: debug information keeps the symbol table (zig strips
#: it otherwise), per-function sections let the linker drop what is not called.
CFLAGS = (
    "-g",
    "-ffunction-sections",
    "-fdata-sections",
    "-fno-unwind-tables",
    "-fno-asynchronous-unwind-tables",
    "-Wall",
)
_SUFFIXES = (".c", ".S", ".s")


class FirmwareError(RuntimeError):
    """The firmware did not compile or link, or does not fit the memories."""


@dataclass(frozen=True)
class Firmware:
    """A built firmware.

    ``words``: the ROM image as 32-bit little-endian words, padded with zeros to
    ``rom_bytes // 4``. ``text_bytes``: ``.text`` + ``.rodata``; ``data_bytes``:
    ``.data`` (in RAM, and its image in ROM); ``bss_bytes``: ``.bss``. ``symbols``: name ->
    address of the functions, objects and linker symbols of the ELF.
    """

    words: list[int]
    elf: Path
    image: Path
    rom_base: int
    ram_base: int
    rom_bytes: int
    ram_bytes: int
    stack_top: int
    text_bytes: int
    data_bytes: int
    bss_bytes: int
    symbols: dict[str, int] = field(repr=False)
    key: str = ""

    @property
    def rom_used(self) -> int:
        return self.text_bytes + self.data_bytes

    @property
    def ram_used(self) -> int:
        return self.data_bytes + self.bss_bytes

    def symbol(self, name: str) -> int:
        """Address of ``name`` (``KeyError`` names the symbol)."""
        try:
            return self.symbols[name]
        except KeyError:
            raise KeyError(f"no symbol {name!r} in {self.elf}") from None


def linker_script(*, rom_base: int, ram_base: int, stack_top: int) -> str:
    """The linker script of a firmware (regions larger than the memories: the sizes are
    checked after linking, to report them)."""
    return f"""\
OUTPUT_ARCH(riscv)
ENTRY(_start)
MEMORY
{{
  ROM (rx) : ORIGIN = {rom_base:#x}, LENGTH = 0x1000000
  RAM (rwx) : ORIGIN = {ram_base:#x}, LENGTH = 0x1000000
}}
SECTIONS
{{
  .text : {{ KEEP(*(.text.start)) *(.text .text.*) . = ALIGN(4); }} > ROM
  .rodata : ALIGN(4) {{ *(.rodata .rodata.* .srodata .srodata.*) . = ALIGN(4); }} > ROM
  .data : ALIGN(4)
  {{
    _data_start = .;
    *(.data .data.* .sdata .sdata.*)
    . = ALIGN(4);
    _data_end = .;
  }} > RAM AT > ROM
  _data_load = LOADADDR(.data);
  .bss (NOLOAD) : ALIGN(4)
  {{
    _bss_start = .;
    *(.bss .bss.* .sbss .sbss.* COMMON)
    . = ALIGN(4);
    _bss_end = .;
  }} > RAM
  _stack_top = {stack_top:#x};
  /DISCARD/ : {{ *(.eh_frame) *(.eh_frame_hdr) *(.comment) *(.note .note.*) }}
}}
"""


def _zig_version() -> str:
    if importlib.util.find_spec("ziglang") is None:
        raise ToolNotFound(
            "the ziglang package (its C compiler builds the firmware) is not installed: "
            "pip install ziglang"
        )
    try:
        return importlib.metadata.version("ziglang")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def _zig(args: list[str], cwd: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "ziglang", *args], cwd=cwd, capture_output=True, text=True
    )
    if r.returncode != 0:
        out = (r.stderr or r.stdout).strip()
        # the first line says why (a one-line error shows only it), the whole output follows
        lines = out.splitlines()
        why = next((ln.strip() for ln in lines if "error" in ln.lower()), lines[0] if lines else "")
        raise FirmwareError(f"zig {args[0]} failed (exit {r.returncode}): {why}\n{out}")


def _elf_info(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    """(section name -> size, symbol name -> value) of a little-endian ELF32 file."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 1 or data[5] != 1:
        raise FirmwareError(f"{path} is not a little-endian ELF32 file")
    shoff = struct.unpack_from("<I", data, 0x20)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x2E)
    sections = [
        struct.unpack_from("<IIIIIIIIII", data, shoff + i * shentsize) for i in range(shnum)
    ]

    def string(table: int, offset: int) -> str:
        start = sections[table][4] + offset
        return data[start : data.index(b"\0", start)].decode()

    sizes: dict[str, int] = {}
    symbols: dict[str, int] = {}
    for name_off, sh_type, _flags, _addr, off, size, link, _info, _align, entsize in sections:
        name = string(shstrndx, name_off)
        sizes[name] = sizes.get(name, 0) + size
        if sh_type != 2 or not entsize:  # SHT_SYMTAB
            continue
        for k in range(size // entsize):
            st_name, value, _size, info, _other, _shndx = struct.unpack_from(
                "<IIIBBH", data, off + k * entsize
            )
            sym = string(link, st_name) if st_name else ""
            if not sym or sym[0] in ".$" or info & 0xF not in (0, 1, 2):
                continue  # section, file, and mapping symbols
            if info >> 4 == 1 or sym not in symbols:  # a global one wins over a local
                symbols[sym] = value
    return sizes, symbols


def build_firmware(
    sources: Sequence[str | os.PathLike],
    *,
    out_dir: str | os.PathLike,
    rom_bytes: int,
    ram_bytes: int,
    rom_base: int = 0,
    ram_base: int = 0x1000_0000,
    stack_top: int | None = None,
    defines: Mapping[str, object] | None = None,
    opt: str = "-Os",
    cflags: Sequence[str] = (),
) -> Firmware:
    """Compile, link and pack ``sources`` (``.c``, ``.S``, ``.s``) into a ROM image.

    ``rom_bytes``/``ram_bytes``: the memories' sizes (multiples of 4); the firmware must
    fit them (``FirmwareError``, one line naming the sizes, otherwise). ``stack_top``:
    default ``ram_base + ram_bytes``. ``defines``: ``-D`` macros (a value of ``None``:
    defined without a value). ``cflags``: further compiler flags (e.g. ``-I`` paths).
    Raises ``ToolNotFound`` when the ``ziglang`` package is missing.
    """
    check_int("rom_bytes", rom_bytes, 4, 1 << 24)
    check_int("ram_bytes", ram_bytes, 4, 1 << 24)
    check_int("rom_base", rom_base, 0, (1 << 32) - 4)
    check_int("ram_base", ram_base, 0, (1 << 32) - 4)
    for name, v in (("rom_bytes", rom_bytes), ("ram_bytes", ram_bytes)):
        if v % 4:
            raise ValueError(f"{name}={v} is not a multiple of 4")
    for name, v in (("rom_base", rom_base), ("ram_base", ram_base)):
        if v % 4:
            raise ValueError(f"{name}={v:#x} is not word aligned")
    if rom_base < ram_base + ram_bytes and ram_base < rom_base + rom_bytes:
        raise ValueError("the ROM and RAM address ranges overlap")
    if stack_top is None:
        stack_top = ram_base + ram_bytes
    check_int("stack_top", stack_top, 0, 1 << 32)
    if stack_top % 16:
        raise ValueError(f"stack_top={stack_top:#x} is not 16-byte aligned (the ABI's)")
    if not opt.startswith("-O"):
        raise ValueError(f"opt={opt!r} is not an -O option")
    paths = [Path(s) for s in sources]
    if not paths:
        raise ValueError("no sources")
    for p in paths:
        if p.suffix not in _SUFFIXES:
            raise ValueError(f"{p}: not a C or assembly source ({', '.join(_SUFFIXES)})")
        if not p.is_file():
            raise FileNotFoundError(f"no source file {p}")

    version = _zig_version()
    script = linker_script(rom_base=rom_base, ram_base=ram_base, stack_top=stack_top)
    flags = [opt, *CFLAGS]
    for name, value in sorted((defines or {}).items()):
        flags.append(f"-D{name}" if value is None else f"-D{name}={value}")
    flags += list(cflags)

    h = hashlib.sha256()
    for part in (version, script, json.dumps(flags), CRT0.read_text()):
        h.update(part.encode())
        h.update(b"\0")
    for p in paths:
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    # the headers next to the sources (they are on the include path)
    for inc in sorted({p.parent.resolve() for p in paths}):
        for hdr in sorted(inc.glob("*.h")):
            h.update(hdr.name.encode() + b"\0" + hdr.read_bytes() + b"\0")
    key = h.hexdigest()[:20]

    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"fw-{key}"
    if not (final / "manifest.json").is_file():
        work = Path(tempfile.mkdtemp(prefix=f"fw-{key}-", dir=root))
        try:
            _build(work, paths, script, flags)
            try:
                os.replace(work, final)
            except OSError:  # built concurrently by another process
                if not (final / "manifest.json").is_file():
                    raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _load(final, key, rom_base, ram_base, rom_bytes, ram_bytes, stack_top)


def _build(work: Path, sources: list[Path], script: str, flags: list[str]) -> None:
    (work / "link.ld").write_text(script)
    # the sources are copied, so that the build depends on their content only
    names = []
    for i, p in enumerate(sources):
        dst = work / "src" / f"{i}_{p.name}"
        dst.parent.mkdir(exist_ok=True)
        shutil.copyfile(p, dst)
        names.append(str(dst.relative_to(work)))
    shutil.copyfile(CRT0, work / "crt0.S")
    cflags = [*flags, *(f"-I{d}" for d in sorted({p.parent.resolve() for p in sources}))]
    _zig(
        [
            "cc",
            *TARGET,
            *cflags,
            "-T",
            "link.ld",
            "-Wl,--gc-sections",
            "crt0.S",
            *names,
            "-o",
            "firmware.elf",
        ],
        work,
    )
    _zig(["objcopy", "-O", "binary", "firmware.elf", "firmware.bin"], work)
    sizes, symbols = _elf_info(work / "firmware.elf")
    manifest = {
        "text_bytes": sizes.get(".text", 0) + sizes.get(".rodata", 0),
        "data_bytes": sizes.get(".data", 0),
        "bss_bytes": sizes.get(".bss", 0),
        "image_bytes": (work / "firmware.bin").stat().st_size,
        "symbols": symbols,
    }
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))


def _load(d: Path, key, rom_base, ram_base, rom_bytes, ram_bytes, stack_top) -> Firmware:
    man = json.loads((d / "manifest.json").read_text())
    text, data, bss = man["text_bytes"], man["data_bytes"], man["bss_bytes"]
    image = (d / "firmware.bin").read_bytes()
    if len(image) > rom_bytes or data + bss > ram_bytes:
        raise FirmwareError(
            f"firmware does not fit: ROM {len(image)} of {rom_bytes} bytes "
            f"(text+rodata {text}, data {data}), RAM {data + bss} of {ram_bytes} bytes "
            f"(data {data}, bss {bss})"
        )
    if stack_top > ram_base + ram_bytes or stack_top <= ram_base + data + bss:
        raise FirmwareError(
            f"stack_top={stack_top:#x} is not above the firmware's RAM "
            f"({ram_base:#x}..{ram_base + data + bss:#x}) and within it"
        )
    image += bytes(rom_bytes - len(image))
    words = list(struct.unpack(f"<{rom_bytes // 4}I", image))
    return Firmware(
        words=words,
        elf=d / "firmware.elf",
        image=d / "firmware.bin",
        rom_base=rom_base,
        ram_base=ram_base,
        rom_bytes=rom_bytes,
        ram_bytes=ram_bytes,
        stack_top=stack_top,
        text_bytes=text,
        data_bytes=data,
        bss_bytes=bss,
        symbols=dict(man["symbols"]),
        key=key,
    )
