"""Regenerate the measured tables of docs/results.md.

    python -m pentegg.benchmarks.make_results [--only digits,cartpole,...] [--rerun]

Every row is one ``pentegg bench ...`` command (printed in the table); its JSON record is
cached in ``build/results/`` so the tables can be re-rendered without re-running. The
tables replace the text between the ``BEGIN GENERATED`` and ``END GENERATED`` markers of
docs/results.md; the prose around them is written by hand from these figures.
Run it on an otherwise idle machine: wall times are part of the table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "build" / "results"
DOC = ROOT / "docs" / "results.md"
SEEDS = "0-4"

VARIANTS = [
    (mode, update, shaping)
    for mode in ("lowrank", "quantized")
    for update in ("latent", "pentary")
    for shaping in ("rank", "sign")
]


def rows() -> list[tuple[str, str, list[str]]]:
    """(table, label, pentegg arguments) of every row."""
    out = []
    for task in ("digits", "cartpole", "xor"):
        for mode, update, shaping in VARIANTS:
            label = f"{mode}, {update}, {shaping}"
            args = ["bench", "seeds", SEEDS, "--task", task]
            if mode != "lowrank":
                args += ["--mode", mode]
            if update != "latent":
                args += ["--update", update]
            if shaping != "rank":
                args += ["--shaping", shaping]
            out.append((task, label, args))
    out.append(
        (
            "digits",
            "lowrank, latent, rank; uniform digits",
            ["bench", "seeds", SEEDS, "--task", "digits", "--digits", "uniform"],
        )
    )
    out.append(
        (
            "digits",
            "reference: backprop MLP (sklearn, 64 hidden)",
            ["bench", "reference", "mlp", "--task", "digits", "--seeds", SEEDS],
        )
    )
    out.append(
        (
            "digits",
            "reference: float Gaussian EGGROLL, JAX jit (64 hidden, pop 256, r 4)",
            [
                "bench",
                "reference",
                "float-eggroll",
                "--task",
                "digits",
                "--seeds",
                SEEDS,
                "--steps",
                "1500",
            ],
        )
    )
    out.append(
        (
            "xor",
            "reference: backprop MLP (sklearn, 8 hidden)",
            ["bench", "reference", "mlp", "--task", "xor", "--seeds", SEEDS, "--hidden", "8"],
        )
    )
    return out


def run_row(args: list[str], rerun: bool) -> dict:
    key = hashlib.sha256(" ".join(args).encode()).hexdigest()[:16]
    path = CACHE / f"{key}.json"
    if path.exists() and not rerun:
        return json.loads(path.read_text())
    cmd = [sys.executable, "-m", "pentegg", *args, "--json"]
    print("running:", "pentegg " + shlex.join(args), flush=True)
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"failed: {shlex.join(cmd)}\n{r.stderr}")
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    rec["_args"] = args
    rec["_measured"] = time.strftime("%Y-%m-%d", time.gmtime(t))
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))
    return rec


def fmt_row(task: str, label: str, rec: dict, args: list[str]) -> str:
    v, st, w = rec["value"], rec["steps"], rec["wall_s"]
    metric = rec.get("runs", [{}])[0].get("metric", "")
    pct = metric != "mean_return"
    k = 100 if pct else 1
    d = 1 if pct else 0
    val = f"{k * v['mean']:.1f} ± {k * v['std']:.1f} ({k * v['min']:.{d}f}–{k * v['max']:.{d}f})"
    solvable = task in ("cartpole", "xor") and "solved" in rec
    solved = f"{rec['solved']}/{len(rec['runs'])}" if solvable else "–"
    return (
        f"| {label} | {val} | {st['mean']:.0f} ({st['min']:.0f}–{st['max']:.0f}) | "
        f"{w['mean']:.1f} ({w['min']:.1f}–{w['max']:.1f}) | {solved} | "
        f"`pentegg {shlex.join(args)}` |"
    )


HEAD = {
    "digits": "test accuracy %",
    "cartpole": "mean return (100 episodes)",
    "xor": "accuracy %",
}


def render(results: dict[str, list[tuple[str, dict, list[str]]]]) -> str:
    lines = [
        f"Measured on {platform.machine()}, {platform.python_version()}, "
        f"{len(results)} task tables; seeds {SEEDS}; mean ± standard deviation (min–max).",
        "",
    ]
    for task, rs in results.items():
        lines += [
            f"### {task}",
            "",
            f"| variant (mode, update, shaping) | {HEAD[task]} | steps | wall s | solved | "
            "command |",
            "|---|---|---|---|---|---|",
        ]
        lines += [fmt_row(task, label, rec, args) for label, rec, args in rs]
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", help="comma-separated tasks to (re)measure")
    p.add_argument("--rerun", action="store_true", help="ignore cached records")
    a = p.parse_args(argv)
    only = set(a.only.split(",")) if a.only else None
    results: dict[str, list] = {}
    for task, label, args in rows():
        if only and task not in only:
            key = hashlib.sha256(" ".join(args).encode()).hexdigest()[:16]
            if not (CACHE / f"{key}.json").exists():
                continue
        rec = run_row(args, a.rerun and (only is None or task in only))
        results.setdefault(task, []).append((label, rec, args))
    text = DOC.read_text()
    begin, end = "<!-- BEGIN GENERATED -->", "<!-- END GENERATED -->"
    i, j = text.index(begin) + len(begin), text.index(end)
    DOC.write_text(text[:i] + "\n" + render(results) + "\n" + text[j:])
    print(f"updated {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
