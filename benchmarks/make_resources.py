"""Regenerate the measured tables of docs/resources.md.

    python -m pentegg.benchmarks.make_resources [--only TABLE,...] [--match TEXT] [--rerun]

Every row is one ``pentegg synth ...`` or ``pentegg bench evaluator ...`` command, printed
in the table with the commit it was measured at. Its JSON record is cached in
``build/resources/`` under the command; a cached record of another commit is measured
again (``--keep`` reuses it and the table then names the commit it came from, so no row
claims a commit it was not measured at). The tables replace the text between the
``BEGIN GENERATED: <table>`` and ``END GENERATED: <table>`` markers of docs/resources.md;
the prose around them is written by hand from these figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "resources"
DOC = ROOT / "docs" / "resources.md"

#: A finalizer per 4 lanes and two noise buffers (issue 9's throughput rows).
GROUP4_NB2 = ("--group", "4", "--noise-buffers", "2")


def _bench_evaluator(lanes: int, batch: int, inputs: str, mode: str | None, *extra: str):
    """``pentegg bench evaluator`` arguments of a row (the order keys the stored result)."""
    mode_args = ["--mode", mode] if mode else []
    return [
        "bench",
        "evaluator",
        "--lanes",
        str(lanes),
        "--batch",
        str(batch),
        *mode_args,
        "--inputs",
        inputs,
        *extra,
        "--json",
    ]


SYNTH = ["synth"]
#: (table, label, pentegg arguments)
ROWS: list[tuple[str, str, list[str]]] = [
    *[
        ("noise", f"{mod} {label}".strip(), [*SYNTH, mod, "--device", dev, *extra, "--json"])
        for mod, label, extra in (
            (
                "pquant",
                "width 6, f = 1 + shift",
                ["--param", "width=6", "--param", "shift_offset=1", "--param", "max_shift=8"],
            ),
            ("keyer", "", []),
            ("keyer", "serial", ["--param", "keyer=serial"]),
            ("prng", "4 digits per beat", []),
            ("lrgen", "rank 4", []),
            ("lrgen-lane", "rank 4", []),
            ("lrgen-compact", "rank 4", []),
        )
        for dev in ("up5k", "ecp5-85")
    ],
    *[
        (
            "evaluator-synth",
            f"lanes {lanes}" + (f", {note}" if note else ""),
            [*SYNTH, "evaluator", "--device", dev, "--param", f"lanes={lanes}", *extra, "--json"],
        )
        for dev, lanes, extra, note in (
            ("up5k", 4, ["--param", "noise_depth=256"], "noise_depth 256"),
            ("up5k", 8, ["--param", "noise_depth=256"], "noise_depth 256"),
            ("up5k", 16, ["--param", "noise_depth=256"], "noise_depth 256"),
            ("ecp5-85", 16, [], ""),
            ("ecp5-85", 32, [], ""),
            # nextpnr's placement seed and placer timing weight of the 125 MHz runs
            # (docs/resources.md, "The 128-lane ECP5 evaluator's routed runs")
            (
                "ecp5-85",
                128,
                ["--freq", "125", "--seed", "3", "--timing-weight", "30"],
                "seed 3, placer timing weight 30",
            ),
            # two noise buffers: the next step's first round made ahead (gmacs from
            # the evaluation that finds it made, "Noise made ahead" in docs/rtl.md);
            # noise_depth 256 (the digits network's 217 slots) keeps the two buffers in
            # the one buffer's 64 DP16KD (the default depth's 1,024 words took 128)
            (
                "ecp5-85",
                128,
                [
                    *("--param", "noise_buffers=2", "--param", "noise_depth=256"),
                    *("--freq", "125", "--seed", "3", "--timing-weight", "30"),
                ],
                "noise buffers 2, noise_depth 256, seed 3, placer timing weight 30",
            ),
        )
    ],
    *[
        (
            "evaluator-cycles",
            f"lanes {lanes}, {inputs} inputs, noise buffers {nb}, batch 16",
            _bench_evaluator(lanes, 16, inputs, None, "--noise-buffers", str(nb)),
        )
        for nb in (1, 2)
        for inputs in ("shared", "member")
        for lanes in (8, 16)
    ],
    # issue 9's throughput target (>= 0.90 at lanes 8 and 16, batch >= 16, both modes,
    # both input kinds): a finalizer per 4 lanes and the next round's noise made during
    # this one
    *[
        (
            "evaluator-cycles",
            f"lanes {lanes}, {inputs} inputs, {mode}, group 4, noise buffers 2, batch {batch}",
            _bench_evaluator(lanes, batch, inputs, mode, *GROUP4_NB2),
        )
        for mode, batch in (("lowrank", 16), ("quantized", 16), ("quantized", 32))
        for inputs in ("shared", "member")
        for lanes in (8, 16)
    ],
    # quantized mode with two E generators: the round's fill in half the time
    *[
        (
            "evaluator-cycles",
            f"lanes {lanes}, {inputs} inputs, quantized, group 4, noise buffers 2, "
            "2 E generators, batch 16",
            _bench_evaluator(lanes, 16, inputs, "quantized", *GROUP4_NB2, "--e-generators", "2"),
        )
        for inputs in ("shared", "member")
        for lanes in (8, 16)
    ],
    # the 128-lane build's single round (population 256) with its fill by several noise
    # generators (issue 9's G inference-MAC/s: per-member inputs)
    *[
        (
            "evaluator-cycles",
            f"lanes 128, member inputs, {note}{gens} noise generators, batch 16",
            _bench_evaluator(128, 16, "member", None, *extra, "--noise-generators", str(gens)),
        )
        for gens, extra, note in (
            (6, (), ""),
            (12, (), ""),
            (12, ("--group", "4"), "group 4, "),
        )
    ],
    # ... and with one generator, its fill made during the step before (two buffers)
    (
        "evaluator-cycles",
        "lanes 128, member inputs, noise buffers 2, the next step's noise made ahead, batch 16",
        _bench_evaluator(128, 16, "member", None, "--noise-buffers", "2", "--ahead"),
    ),
    # an evaluation within a training run (the accelerator's TRAIN makes each step's first
    # round ahead with two buffers) at the default group, one E generator: per-member
    # inputs, both modes; and quantized mode's from cold at the default group
    *[
        (
            "evaluator-cycles",
            f"lanes {lanes}, member inputs, {mode}, noise buffers 2, "
            "the next step's noise made ahead, batch 16",
            _bench_evaluator(lanes, 16, "member", mode, "--noise-buffers", "2", "--ahead"),
        )
        for mode in ("lowrank", "quantized")
        for lanes in (8, 16)
    ],
    *[
        (
            "evaluator-cycles",
            f"lanes {lanes}, member inputs, quantized, noise buffers 2, batch 16",
            _bench_evaluator(lanes, 16, "member", "quantized", "--noise-buffers", "2"),
        )
        for lanes in (8, 16)
    ],
]


ROWS += [
    (
        "accelerator-synth",
        label,
        [*SYNTH, "accelerator", "--device", dev, "--json"],
    )
    for dev, label in (
        ("up5k", "the iCEBreaker build's parameters (1 lane)"),
        ("ecp5-85", "the ULX3S-85F build's parameters (128 lanes)"),
    )
]
ROWS += [
    (
        "accelerator-cycles",
        f"lanes {lanes}"
        + (f", update lanes {upd}" if upd else "")
        + (f", pivots {piv}" if piv else ""),
        ["bench", "accelerator", "--lanes", str(lanes)]
        + (["--update-lanes", str(upd)] if upd else [])
        + (["--pivots", str(piv)] if piv else [])
        + ["--json"],
    )
    # 16: issue 10's ratio target; 64: the bench's default and the ULX3S build (a whole
    # weight row of 65 per update cycle, and 4 pivots since 0908284); 128: a row in two
    # Z words of 33 (what fits the ECP5-85's block RAM), and with 64 update lanes
    for lanes, upd, piv in (
        (16, None, None),
        (64, None, None),
        (64, 65, None),
        (64, 65, 4),
        (128, 64, None),
        (128, 33, None),
        (128, 33, 4),
    )
]

# the compact device (the iCEBreaker's core): its RV32I core alone, and the device with and
# without the datapath (the synthesis wrapper's defaults: the RAM preloaded, no flash boot)
ROWS += [
    ("compact-synth", label, [*SYNTH, module, "--device", "up5k", *extra, "--json"])
    for module, label, extra in (
        ("rv32", "core", []),
        ("rv32", "core without the cycle counter", ["--param", "counters=0"]),
        ("compact", "without the datapath", ["--param", "engine=0"]),
        ("compact", "with the datapath", ["--param", "engine=1"]),
    )
]


def commit() -> str:
    r = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return r.stdout.strip() + ("+dirty" if dirty else "")


def _key(args: list[str]) -> str:
    return hashlib.sha256(json.dumps(args).encode()).hexdigest()[:16]


def measure(args: list[str], *, rerun: bool, keep: bool, head: str) -> dict:
    path = CACHE / f"{_key(args)}.json"
    if path.exists() and not rerun:
        rec = json.loads(path.read_text())
        if keep or rec.get("commit") == head:
            return rec
    cmd = [sys.executable, "-m", "pentegg", *args]
    print("$ pentegg " + shlex.join(args), file=sys.stderr, flush=True)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): pentegg {shlex.join(args)}\n{r.stderr[-2000:]}")
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    rec["commit"] = head
    rec["wall_s_command"] = time.perf_counter() - t
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    return rec


def _synth_cells(label, args, rec) -> list[str]:
    dev = "UP5K" if rec["device"] == "up5k" else "ECP5-85"
    fmax = f"{rec['fmax_mhz']:.2f}" if rec.get("fmax_mhz") else "did not place"
    util = rec.get("wrapped_utilisation", {})
    lc = util.get("ICESTORM_LC") or util.get("TRELLIS_COMB", "")
    return [
        f"{rec['module']} {label}",
        dev,
        str(rec["luts"]),
        str(rec["ffs"]),
        str(rec["brams"]),
        str(rec["dsps"]),
        fmax,
        lc,
        f"`{rec['commit']}`",
        f"`pentegg {shlex.join(args)}`",
    ]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _synth_row(label, args, rec) -> str:
    return _row(_synth_cells(label, args, rec))


def _accel_synth_row(label, args, rec) -> str:
    """The synth columns plus SPRAM after BRAM and the step's cycles and time after fmax."""
    c = _synth_cells(label, args, rec)
    step = f"{rec['step_ms']:.1f}" if rec.get("step_ms") is not None else "none"
    cycles = str(rec.get("step_cycles") or "-")
    return _row([*c[:5], str(rec.get("sprams", 0)), *c[5:7], cycles, step, *c[7:]])


def _eval_synth_row(label, args, rec) -> str:
    """The synth columns plus, after fmax, ``gmacs`` with the per-member ratio it used."""
    c = _synth_cells(label, args, rec)
    g = rec.get("gmacs")
    gm = f"{g:.2f} ({rec['gmacs_throughput_ratio']:.3f})" if g is not None else "-"
    return _row([*c[:7], gm, *c[7:]])


def _spram_synth_row(label, args, rec) -> str:
    """The synth columns plus SPRAM after BRAM."""
    c = _synth_cells(label, args, rec)
    return _row([*c[:5], str(rec.get("sprams", 0)), *c[5:]])


def _cycles_row(label, args, rec) -> str:
    a = rec["activity"]
    total = rec["cycles"]
    waits = ", ".join(f"{k} {100 * v / total:.1f}" for k, v in a.items() if k != "mac" and v)
    return (
        f"| {label} | {rec['cycles']} | {rec['ideal_cycles']:.0f} | "
        f"{rec['throughput_ratio']:.3f} | {100 * a['mac'] / total:.1f} | {waits} | "
        f"`{rec['commit']}` | `pentegg {shlex.join(args)}` |"
    )


def _step_row(label, args, rec) -> str:
    total = rec["cycles_per_step"]
    part = ", ".join(
        f"{k.split('_')[0]} {100 * rec[k] / total:.1f}"
        for k in ("eval_cycles", "shaping_cycles", "update_cycles", "other_cycles")
    )
    return (
        f"| {label} | {total} | {part} | {rec['eval_cycles_per_sample']:.1f} | "
        f"{rec['ideal_cycles']:.0f} | {rec['throughput_ratio']:.3f} | `{rec['commit']}` | "
        f"`pentegg {shlex.join(args)}` |"
    )


def _header(*cols: str) -> str:
    return "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols)


_SYNTH_COLS = ("module", "device", "LUT4", "FF", "BRAM", "DSP", "fmax MHz")
_SYNTH_COLS += ("logic cells placed", "commit", "command")
HEADERS = {
    "noise": _header(*_SYNTH_COLS),
    "evaluator-synth": _header(*_SYNTH_COLS[:7], "G MAC/s (ratio)", *_SYNTH_COLS[7:]),
    "accelerator-synth": _header(
        *_SYNTH_COLS[:5], "SPRAM", *_SYNTH_COLS[5:7], "step cycles", "step_ms", *_SYNTH_COLS[7:]
    ),
    "compact-synth": _header(*_SYNTH_COLS[:5], "SPRAM", *_SYNTH_COLS[5:]),
    "accelerator-cycles": _header(
        "configuration (digits default step: 64-64-10, population 256, batch 256)",
        "cycles per step",
        "% eval, shaping, update, other",
        "eval cycles per sample",
        "ideal",
        "throughput_ratio",
        "commit",
        "command",
    ),
    "evaluator-cycles": _header(
        "configuration (digits network 64-64-10, population 256, rank 4)",
        "cycles",
        "ideal",
        "throughput_ratio",
        "MAC %",
        "other cycles %",
        "commit",
        "command",
    ),
}


#: where a column added to a table since its rows were measured goes: a kept row of the
#: old width gets "-" there (evaluator-synth's gmacs, after fmax)
ADDED_COLUMN = {"evaluator-synth": 7}


def _padded(table: str, line: str, columns: int) -> str:
    cells = line[2:-2].split(" | ")
    if table in ADDED_COLUMN and len(cells) == columns - 1:
        cells.insert(ADDED_COLUMN[table], "-")
    return _row(cells)


def render(table: str, recs: list[tuple[str, list[str], dict | None]], old: str = "") -> str:
    """The table's rows; a row without a record (not measured by this run, none cached)
    keeps its line from ``old``, the table as the document has it, if it is there."""
    fmt = {
        "evaluator-cycles": _cycles_row,
        "accelerator-cycles": _step_row,
        "accelerator-synth": _accel_synth_row,
        "compact-synth": _spram_synth_row,
        "evaluator-synth": _eval_synth_row,
    }.get(table, _synth_row)
    columns = HEADERS[table].splitlines()[0].count(" | ") + 1
    lines = [HEADERS[table]]
    for lab, args, rec in recs:
        if rec is not None:
            lines.append(fmt(lab, args, rec))
            continue
        cell = f"| `pentegg {shlex.join(args)}` |"
        kept = [ln for ln in old.splitlines() if ln.endswith(cell)]
        if kept:
            lines.append(_padded(table, kept[0], columns))
        else:
            print(f"{table}: no record and no row for pentegg {shlex.join(args)}", file=sys.stderr)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="tables, comma-separated: " + ", ".join(HEADERS))
    ap.add_argument("--match", help="only rows whose command contains this text")
    ap.add_argument("--rerun", action="store_true", help="measure even if cached at HEAD")
    ap.add_argument("--keep", action="store_true", help="reuse cached records of any commit")
    args = ap.parse_args(argv)
    tables = args.only.split(",") if args.only else list(HEADERS)
    head = commit()
    measured = {}
    for table in tables:
        recs = []
        for tab, label, cmd in ROWS:
            if tab != table:
                continue
            if args.match and args.match not in " ".join(cmd):
                path = CACHE / f"{_key(cmd)}.json"
                recs.append((label, cmd, json.loads(path.read_text()) if path.exists() else None))
                continue
            recs.append((label, cmd, measure(cmd, rerun=args.rerun, keep=args.keep, head=head)))
        measured[table] = recs
    # read the document only now: a measurement takes up to an hour, and the prose may
    # have been edited (or merged) meanwhile
    text = DOC.read_text()
    for table, recs in measured.items():
        begin, end = f"<!-- BEGIN GENERATED: {table} -->", f"<!-- END GENERATED: {table} -->"
        if begin not in text:
            raise SystemExit(f"docs/resources.md has no marker {begin}")
        a, b = text.index(begin) + len(begin), text.index(end)
        text = text[:a] + "\n" + render(table, recs, text[a:b]) + "\n" + text[b:]
    DOC.write_text(text)
    print(f"docs/resources.md: {', '.join(tables)} regenerated at {head}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
