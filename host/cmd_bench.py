"""``pentegg bench``: speed benchmarks that print figures and ratios."""

from __future__ import annotations

import json
import os
import platform
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "bench",
        help="run a benchmark (figures and ratios, no pass/fail)",
        description="Measure speed. `golden`: the golden model's population "
        "throughput, naive-ES comparison and ES-step breakdown "
        "(benchmarks/golden_bench.py documents each figure).",
    )
    p.add_argument("suite", choices=("golden",), help="what to benchmark")
    p.add_argument("--batch", type=int, default=256, help="samples per member (default 256)")
    p.add_argument("--repeat", type=int, default=3, help="best of N timings (default 3)")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the figures as one JSON object on the last line of stdout",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    from .cli import UsageError

    if not 1 <= args.batch <= 4096:
        raise UsageError(f"--batch {args.batch} out of range 1..4096")
    if not 1 <= args.repeat <= 100:
        raise UsageError(f"--repeat {args.repeat} out of range 1..100")
    from .benchmarks import golden_bench

    log = (lambda s: print(s, file=sys.stderr)) if args.json else print
    res = golden_bench.run(batch=args.batch, repeat=args.repeat, log=log)
    res["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": __import__("numpy").__version__,
        "platform": platform.platform(),
    }
    if args.json:
        print(json.dumps(res))
    return 0
