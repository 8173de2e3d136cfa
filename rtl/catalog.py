"""The hardware modules by name, their elaboration parameters, and Verilog generation.

``pentegg verilog`` and ``pentegg synth``, the simulation harness and the tests all build
components through :func:`build` so that a name and a parameter set mean one thing
everywhere.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from typing import Any

from amaranth import Shape
from amaranth.back import verilog
from amaranth.lib import wiring

from .accelerator import Accelerator
from .compact.firmware import DEFAULTS as FIRMWARE_DEFAULTS
from .compact.soc import CompactDevice
from .cpu.rv32 import RV32Core
from .evaluator.evaluator import PopulationEvaluator
from .link.device import Device
from .noise.keyer import StreamKeyer
from .noise.lrgen import KeyedLowRankGenerator, LowRankGenerator
from .noise.lrgen_compact import CompactLowRankGenerator
from .noise.prng import PentaryPRNG
from .pquant import PentaryQuantizer
from .update.apply import WeightUpdater
from .update.shaper import Shaper
from .update.votes import VoteAccumulator

__all__ = [
    "MODULES",
    "VERILATOR_WAIVERS",
    "ModuleSpec",
    "ParameterError",
    "build",
    "parse_params",
    "port_list",
    "to_verilog",
    "validate",
]

#: Verilator lint warnings waived for Amaranth's Verilog (docs/rtl.md explains each).
VERILATOR_WAIVERS = ("CASEINCOMPLETE", "WIDTHEXPAND", "WIDTHTRUNC")


class ParameterError(ValueError):
    """An unknown module, an unknown parameter, or a value out of its range."""


@dataclass(frozen=True)
class ModuleSpec:
    name: str
    cls: type
    summary: str
    #: parameter name -> "int", "str" or "int|none"
    params: dict[str, str] = field(default_factory=dict)
    #: a class ``cls`` passes its ``**kwargs`` to (their defaults are that class's)
    forwards: type | None = None

    def defaults(self) -> dict[str, Any]:
        out = {}
        for cls in (self.forwards, self.cls):
            if cls is None:
                continue
            sig = inspect.signature(cls.__init__)
            out.update(
                (n, p.default)
                for n, p in sig.parameters.items()
                if n in self.params and p.default is not inspect.Parameter.empty
            )
        return out


LRGEN_PARAMS = {"rank": "int", "max_fan": "int", "max_out": "int", "digits": "str", "pquant": "str"}

EVALUATOR_PARAMS = {
    "lanes": "int",
    "max_layers": "int",
    "max_width": "int",
    "rank": "int",
    "mode": "str",
    "digits": "str",
    "group": "int|none",
    "noise_depth": "int|none",
    "max_batch": "int",
    "mem_latency": "int",
    "noise_buffers": "int",
    "e_generators": "int",
    "noise_write_lanes": "int",
    "noise_generators": "int",
}

ACCELERATOR_PARAMS = {
    **EVALUATOR_PARAMS,
    "max_population": "int",
    "update": "str",
    "latent_bits": "int",
    "update_lanes": "int|none",
    "pivots": "int",
    "sample_bytes": "int",
    "label_words": "int",
    "batch_words": "int",
    "member_bytes": "int",
    "logit_bytes": "int",
}

MODULES: dict[str, ModuleSpec] = {
    spec.name: spec
    for spec in (
        ModuleSpec(
            "pquant",
            PentaryQuantizer,
            "PentaryQuantizer: PQUANT, combinational (spec 4.1)",
            {"width": "int", "shift": "int|none", "shift_offset": "int", "max_shift": "int|none"},
        ),
        ModuleSpec(
            "prng",
            PentaryPRNG,
            "PentaryPRNG: keyed restartable digit stream (spec 2)",
            {"digits": "str", "digits_per_beat": "int", "keyer": "str"},
        ),
        ModuleSpec(
            "keyer",
            StreamKeyer,
            "StreamKeyer: stream start states x0 = mix32(key ^ S), one per device (spec 2.2, 2.3)",
            {"keyer": "str"},
        ),
        ModuleSpec(
            "lrgen",
            KeyedLowRankGenerator,
            "KeyedLowRankGenerator: StreamKeyer + LRGEN/LRMUL lane, A, B and "
            "E = PQUANT(A.B^T) (spec 2, 3, 4.2)",
            {**LRGEN_PARAMS, "keyer": "str"},
        ),
        ModuleSpec(
            "lrgen-compact",
            CompactLowRankGenerator,
            "CompactLowRankGenerator: LRGEN/LRMUL keyed by (seed, step, pair, layer) with "
            "one bit-serial noise engine, A, B and E = PQUANT(A.B^T) (spec 2, 3, 4.2)",
            LRGEN_PARAMS,
        ),
        ModuleSpec(
            "evaluator",
            PopulationEvaluator,
            "PopulationEvaluator: every member's perturbed forward pass of an ES step on "
            "pair-lanes, scored or as logits (spec 5, 6, 7.1)",
            EVALUATOR_PARAMS,
        ),
        ModuleSpec(
            "lrgen-lane",
            LowRankGenerator,
            "LowRankGenerator: one LRGEN/LRMUL lane fed with start states (spec 3, 4.2)",
            LRGEN_PARAMS,
        ),
        ModuleSpec(
            "shaper",
            Shaper,
            "Shaper: pair weights g (rank or sign shaping), sum g^2, isqrt and theta "
            "(spec 7.2, 8.2)",
            {"max_population": "int", "score_bits": "int", "mem_latency": "int", "pivots": "int"},
        ),
        ModuleSpec(
            "accelerator",
            Accelerator,
            "Accelerator: the whole trainer (evaluator, shaper, votes, update, init, "
            "controller, registers, memories) behind one command stream (spec 10.2)",
            ACCELERATOR_PARAMS,
        ),
        ModuleSpec(
            "device",
            Device,
            "Device: the Accelerator behind the host link (COBS frames with CRC-16 on a byte "
            "stream in and out, docs/protocol.md); rx/tx for a UART or a pipe",
            {**ACCELERATOR_PARAMS, "frame_bytes": "int", "clock_hz": "int", "baud": "int"},
            forwards=Accelerator,
        ),
        ModuleSpec(
            "votes",
            VoteAccumulator,
            "VoteAccumulator: Z of one layer, sum over pairs of g_j A_j B_j^T (low-rank) or "
            "g_j PQUANT(A_j B_j^T) (quantized), noise regenerated from the keys (spec 8.1)",
            {
                "lanes": "int",
                "rank": "int",
                "mode": "str",
                "digits": "str",
                "max_width": "int",
                "max_population": "int",
            },
        ),
        ModuleSpec(
            "weight-update",
            WeightUpdater,
            "WeightUpdater: moves sign(Z) where |Z| > theta, pentary or latent update, W "
            "written packed (spec 8.2-8.4, 1.3)",
            {
                "update": "str",
                "latent_bits": "int",
                "lanes": "int",
                "max_width": "int",
                "z_bits": "int",
                "addr_bits": "int",
            },
        ),
        ModuleSpec(
            "compact",
            CompactDevice,
            "CompactDevice: the protocol device for small FPGAs (the iCEBreaker's core): "
            "RV32Core running the firmware of rtl/compact/firmware (host protocol, "
            "registers, memories, ES step) in its RAM, the link's byte FIFOs",
            {
                **{k: "str" if isinstance(v, str) else "int" for k, v in FIRMWARE_DEFAULTS.items()},
                "ram_bytes": "int",
                "boot": "str",
                "rx_depth": "int",
                "flash_offset": "int",
                "engine": "int",
            },
        ),
        ModuleSpec(
            "rv32",
            RV32Core,
            "RV32Core: RV32I control processor, one word-addressed bus for instructions "
            "and data, register file in block RAM (rtl/cpu/rv32.py)",
            {"reset_addr": "int", "counters": "int"},
        ),
    )
}

#: Defaults a module needs that its class does not have (a width must be chosen; the
#: compact device's firmware parameters, which its class passes on as ``**params``).
REQUIRED_DEFAULTS = {"pquant": {"width": 6}, "compact": dict(FIRMWARE_DEFAULTS)}


def _spec(module: str) -> ModuleSpec:
    try:
        return MODULES[module]
    except KeyError:
        raise ParameterError(f"unknown module '{module}' (known: {', '.join(MODULES)})") from None


def _convert(spec: ModuleSpec, name: str, text: str):
    kind = spec.params[name]
    if kind == "str":
        return text
    if kind == "int|none" and text.lower() == "none":
        return None
    try:
        return int(text, 0)
    except ValueError:
        raise ParameterError(f"{spec.name}: parameter {name}={text!r} is not an integer") from None


def parse_params(module: str, assignments: list[str] | None) -> dict[str, Any]:
    """``["rank=4", ...]`` -> ``{"rank": 4}``, checked against the module's parameters."""
    spec = _spec(module)
    out: dict[str, Any] = {}
    for item in assignments or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ParameterError(f"--param {item!r} is not NAME=VALUE")
        if name not in spec.params:
            raise ParameterError(
                f"{module}: unknown parameter '{name}' (known: {', '.join(spec.params)})"
            )
        if name in out:
            raise ParameterError(f"--param {name} is given twice")
        out[name] = _convert(spec, name, value.strip())
    return out


def resolved_params(module: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every parameter of ``module`` with its value: defaults overridden by ``params``."""
    spec = _spec(module)
    full = {**spec.defaults(), **REQUIRED_DEFAULTS.get(module, {}), **(params or {})}
    return {k: full[k] for k in spec.params if k in full}


def build(module: str, params: dict[str, Any] | None = None) -> wiring.Component:
    """Elaborate-ready component ``module`` with ``params`` (missing ones take defaults)."""
    spec = _spec(module)
    kw = resolved_params(module, params)
    for k in kw:
        if k not in spec.params:  # pragma: no cover - guarded by parse_params
            raise ParameterError(f"{module}: unknown parameter '{k}'")
    try:
        return spec.cls(**kw)
    except (ValueError, TypeError) as e:
        raise ParameterError(f"{module}: {e}") from None


def silence(obj, seen: set[int] | None = None) -> None:
    """Mark an elaboratable built only to check its parameters, and the ones it holds, as
    deliberately unused (no UnusedElaboratable warnings)."""
    from amaranth.hdl import Elaboratable

    seen = set() if seen is None else seen
    if id(obj) in seen or not isinstance(obj, Elaboratable):
        return
    seen.add(id(obj))
    obj._MustUse__silence = True
    for value in vars(obj).values():
        silence(value, seen)


def validate(module: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Check ``params`` by constructing the component (raises :class:`ParameterError`);
    returns the resolved parameters."""
    dut = build(module, params)
    silence(dut)  # built only to validate: not a forgotten elaboratable
    return resolved_params(module, params)


def top_name(module: str) -> str:
    """Verilog module name: ``pentegg_`` and the catalog name, ``-`` written ``_``."""
    return "pentegg_" + module.replace("-", "_")


def port_list(
    component: wiring.Component, clocked: bool = True
) -> list[tuple[str, str, int, bool]]:
    """(name, direction, width, signed) of every Verilog port; ``clk`` and ``rst`` first
    when the component has the ``sync`` domain (``clocked``)."""
    ports = [("clk", "input", 1, False), ("rst", "input", 1, False)] if clocked else []
    for path, member in component.signature.members.flatten():
        if not member.is_port:
            continue
        shape = Shape.cast(member.shape)
        direction = "input" if member.flow == wiring.In else "output"
        ports.append(("__".join(str(p) for p in path), direction, shape.width, shape.signed))
    return ports


_TIME0_TRIGGER = re.compile(
    r"^(\s*)reg (\\\$auto\$verilog_backend\S*dump_module\$\d+) += 0;$", re.M
)


def _fix_time0(text: str) -> str:
    """Make every combinational ``always @*`` block run at time 0 under Icarus.

    Yosys's Verilog gives each module a dummy ``reg ... = 0`` that every ``always @*``
    block reads, meant to wake them all at time 0; Icarus 11 applies the initializer
    before the blocks wait on it, so a block whose inputs never change (for example a
    ``valid`` computed only from registers that keep their reset value) stays X forever.
    Assigning the dummy in an ``initial #0`` instead happens after every process has
    started. Verilator evaluates everything at time 0 anyway (and warns about delays).
    """

    def repl(m: re.Match) -> str:
        indent, name = m.group(1), m.group(2)
        return (
            f"{indent}reg {name} ;\n"
            f"`ifdef VERILATOR\n{indent}initial {name} = 1'h0;\n"
            f"`else\n{indent}initial #0 {name} = 1'h0;\n`endif"
        )

    text = _TIME0_TRIGGER.sub(repl, text)
    # Yosys also writes `always @*` blocks of a single statement, without the trigger:
    # one that reads nothing (a constant for the bits of a partly assigned signal) makes
    # Icarus loop at time 0, one whose inputs never change leaves its reg at X. They get
    # the module's trigger too.
    out = []
    for chunk in re.split(r"(?m)^(?=module )", text):
        trigger = _TRIGGER_NAME.search(chunk)
        if trigger:
            name = trigger.group(1)
            chunk = _ALWAYS_CONST.sub(
                lambda m, name=name: (
                    f"{m.group(1)}always @* begin\n{m.group(2)}if ({name} ) begin end\n"
                    f"{m.group(2)}{m.group(3)}\n{m.group(1)}end"
                ),
                chunk,
            )
        out.append(chunk)
    return "".join(out)


_TRIGGER_NAME = re.compile(r"^\s*reg (\\\$auto\$verilog_backend\S*dump_module\$\d+) ;$", re.M)
_ALWAYS_CONST = re.compile(r"^(\s*)always @\*\n(\s*)((?!begin\b)[^\n]*;)$", re.M)


def verilog_text(component: wiring.Component, name: str, platform=None) -> str:
    """Verilog of ``component`` as module ``name`` (see :func:`_fix_time0`), elaborated
    for ``platform`` (None: for simulation)."""
    return _fix_time0(verilog.convert(component, name=name, emit_src=False, platform=platform))


def to_verilog(module: str, params: dict[str, Any] | None = None) -> str:
    """Standalone Verilog of ``module`` with a header comment listing its ports."""
    dut = build(module, params)
    kw = resolved_params(module, params)
    text = verilog_text(dut, top_name(module))
    lines = [
        f"// {top_name(module)}: {MODULES[module].summary}",
        "// Generated by `pentegg verilog` from the Amaranth sources in rtl/ (pentegg).",
        "// Parameters: " + (", ".join(f"{k}={v}" for k, v in kw.items()) or "none"),
        "// Ports (docs/rtl.md describes each; streams are <name>__valid/__ready/__payload):",
    ]
    header = re.search(r"module\s+\w+\s*\(([^)]*)\)", text)
    clocked = bool(header) and "clk" in re.findall(r"\w+", header.group(1))
    for name, direction, width, signed in port_list(dut, clocked):
        kind = f"signed [{width - 1}:0]" if signed else f"[{width - 1}:0]"
        lines.append(f"//   {direction:<6} {kind:<15} {name}")
    if clocked:
        lines.append("// clk: rising-edge clock; rst: synchronous reset, active high.")
    return "\n".join(lines) + "\n" + text
