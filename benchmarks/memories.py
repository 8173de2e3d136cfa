"""Where a module's block RAM goes: every memory, its width and depth, and the block RAMs
it takes on a device, before any synthesis run.

    python -m pentegg.benchmarks.memories MODULE --device up5k|ecp5-85 [--param NAME=VALUE ...]

The module is elaborated for the device's family as ``pentegg synth`` elaborates it (the
accelerator and the device start from the board build's parameters), converted to RTLIL,
and each memory is costed at the block RAM configuration that needs the fewest blocks:
iCE40 4-Kbit blocks as 256 x 16, 512 x 8, 1024 x 4 or 2048 x 2; ECP5 DP16KD as 512 x 36,
1024 x 18, 2048 x 9, 4096 x 4, 8192 x 2 or 16384 x 1. A memory written in parts (write
granularity below its width) costs more on the ECP5: a DP16KD's byte enables each cover 9
bits, so a part takes whole 9-bit segments (a 6-bit lane slot leaves 3 bits of each
unused; three lanes per write fill two segments); the iCE40's blocks have a write mask
per bit. Memories under 1 Kbit (Yosys maps them to flip-flops or LUT RAM), memories read
without a clock (never a block RAM: LUT RAM on the ECP5, flip-flops on the iCE40),
memories the RTL marks ``ram_style "distributed"`` (LUT RAM) and primitives the RTL
instantiates itself (DP16KD, SB_SPRAM256KA: their count, and per module; on the ECP5
the evaluator's noise and activation banks are DP16KD of their own, costed the same way
by ``rtl/evaluator/sliced.py``: with ``noise_write_lanes=1`` a noise bank takes 32 blocks
at 128 lanes, with three lanes per write 22) are listed apart. It is an estimate of
Yosys's mapping, not a measurement: Yosys may split or pack differently (``pentegg
synth`` gives the count), but it takes seconds instead of minutes, and names the memories.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass

__all__ = ["Memory", "block_rams", "main", "memories"]

#: (width, depth) configurations of one block RAM, per family
CONFIGS = {
    "ice40": ((16, 256), (8, 512), (4, 1024), (2, 2048)),
    "ecp5": ((36, 512), (18, 1024), (9, 2048), (4, 4096), (2, 8192), (1, 16384)),
}
FAMILY = {"up5k": "ice40", "ecp5-85": "ecp5"}
SMALL_BITS = 1024


@dataclass(frozen=True)
class Memory:
    name: str  # hierarchical: module path and memory name
    width: int
    depth: int
    granularity: int = 0  # bits per write enable (0: the whole width)
    async_read: bool = False  # a read port without a clock: never a block RAM
    distributed: bool = False  # ram_style "distributed": LUT RAM (the RTL asks for it)

    @property
    def bits(self) -> int:
        return self.width * self.depth


def block_rams(width: int, depth: int, family: str, granularity: int = 0) -> int:
    """The fewest blocks of ``family`` holding ``depth`` words of ``width`` bits, written
    ``granularity`` bits at a time (0: whole words)."""
    g = granularity if 0 < granularity < width and family == "ecp5" else width
    parts = -(-width // g)
    counts = []
    for w, d in CONFIGS[family]:
        rows = -(-depth // d)
        if g == width:
            counts.append(-(-width // w) * rows)
        elif w >= 9:  # byte enables of 9 bits: a part takes ceil(g / 9) of them
            per_word = (w // 9) // -(-g // 9)
            if per_word:
                counts.append(-(-parts // per_word) * rows)
        else:  # no byte enables: each part in blocks of its own
            counts.append(parts * -(-g // w) * rows)
    return min(counts)


def _granularity(width: int, en: str) -> int:
    """Bits per write enable of a ``$memwr_v2`` cell from its ``EN`` connection: the
    width over the number of distinct signal bits in it (a constant: the whole width)."""
    bits = set()
    for name, hi, lo in re.findall(r"(\\\S+|\$\S+)(?: \[(\d+)(?::(\d+))?\])?", en):
        if not hi:
            return 1  # a whole signal: one enable per bit
        bits.update((name, i) for i in range(int(lo or hi), int(hi) + 1))
    return width // len(bits) if bits else 0


def memories(text: str) -> tuple[list[Memory], dict[str, dict[str, int]]]:
    """The memories of an RTLIL design, and how many of each instantiated primitive each
    module holds (``{primitive: {module: count}}``)."""
    sizes, gran, prims, module, comb = {}, {}, {}, "", set()
    memid = width = None
    rd = None  # the MEMID of the $memrd_v2 cell being read
    dist, attrs = set(), []  # distributed memories; the attribute lines before a line
    for line in text.splitlines():
        if line.lstrip().startswith("attribute "):
            attrs.append(line)
            continue
        before, attrs = attrs, []
        if m := re.match(r"module \\(\S+)", line):
            module = m.group(1)
        elif m := re.match(r"\s*memory width (\d+) size (\d+) \\(\S+)", line):
            sizes[f"{module}.{m.group(3)}"] = (int(m.group(1)), int(m.group(2)))
            if any(re.match(r'\s*attribute \\ram_style "distributed"', a) for a in before):
                dist.add(f"{module}.{m.group(3)}")
        elif m := re.match(r"\s*cell \\(DP16KD|SB_SPRAM256KA|SB_RAM40_4K) ", line):
            per = prims.setdefault(m.group(1), {})
            per[module] = per.get(module, 0) + 1
        elif re.match(r"\s*cell \$memwr_v2 ", line):
            memid, width = "", 0
        elif re.match(r"\s*cell \$memrd_v2 ", line):
            rd = ""
        elif rd is not None and (m := re.match(r'\s*parameter \\MEMID "\\\\(\S+)"', line)):
            rd = f"{module}.{m.group(1)}"
        elif rd is not None and re.match(r"\s*parameter \\CLK_ENABLE 0\s*$", line):
            comb.add(rd)
        elif rd is not None and line.strip() == "end":
            rd = None
        elif memid is not None and (m := re.match(r'\s*parameter \\MEMID "\\\\(\S+)"', line)):
            memid = f"{module}.{m.group(1)}"
        elif memid is not None and (m := re.match(r"\s*parameter \\WIDTH (\d+)", line)):
            width = int(m.group(1))
        elif memid is not None and (m := re.match(r"\s*connect \\EN (.*)$", line)):
            g = _granularity(width, m.group(1))
            gran[memid] = min(g, gran.get(memid, g)) if g else gran.get(memid, 0)
        elif memid is not None and line.strip() == "end":
            memid = None
    mems = [
        Memory(name, w, d, gran.get(name, 0), name in comb, name in dist)
        for name, (w, d) in sizes.items()
    ]
    return mems, prims


def main(argv=None) -> int:
    from amaranth.back import rtlil

    from pentegg import cmd_hw
    from pentegg.rtl import catalog
    from pentegg.rtl.synth import SynthPlatform

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module", choices=list(catalog.MODULES))
    ap.add_argument("--device", required=True, choices=tuple(FAMILY))
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    args = ap.parse_args(argv)
    family = FAMILY[args.device]
    try:
        params = cmd_hw.synth_params(args.module, args.device, args.param)
        text = rtlil.convert(
            catalog.build(args.module, params),
            name=catalog.top_name(args.module),
            platform=SynthPlatform(family),
        )
    except (cmd_hw.HardwareError, ValueError) as e:
        print(f"memories: error: {e}", file=sys.stderr)
        return 2
    mems, prims = memories(text)
    total = 0
    print(f"{'memory':<44} {'width':>6} {'depth':>7} {'write':>6} {'Kbit':>8} {'blocks':>7}")
    for mem in sorted(mems, key=lambda x: -x.bits):
        if mem.bits < SMALL_BITS or mem.async_read or mem.distributed:
            continue
        n = block_rams(mem.width, mem.depth, family, mem.granularity)
        total += n
        g = mem.granularity or mem.width
        print(f"{mem.name:<44} {mem.width:>6} {mem.depth:>7} {g:>6} {mem.bits / 1024:>8.1f} {n:>7}")
    small = sum(1 for x in mems if x.bits < SMALL_BITS)
    print(f"block RAMs of the memories above: {total} (estimate)")
    print(f"memories under {SMALL_BITS} bits (flip-flops or LUT RAM): {small}")
    lut = "LUT RAM" if family == "ecp5" else "flip-flops"
    for mem in sorted(mems, key=lambda x: -x.bits):
        if mem.async_read and mem.bits >= SMALL_BITS:
            print(f"read without a clock ({lut}): {mem.name}, {mem.width} x {mem.depth} bits")
    dist = [x for x in mems if x.distributed and x.bits >= SMALL_BITS and not x.async_read]
    if dist:
        bits = sum(x.bits for x in dist)
        print(
            f"distributed RAM by the RTL's choice (ram_style): {len(dist)} memories, "
            f"{bits / 1024:.1f} Kbit, e.g. {dist[0].name}, {dist[0].width} x {dist[0].depth} bits"
        )
    for prim, per in sorted(prims.items()):
        parts = ", ".join(f"{mod}: {n}" for mod, n in sorted(per.items(), key=lambda x: -x[1]))
        print(f"{prim} instantiated by the RTL: {sum(per.values())} ({parts})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
