"""Interleaved timing: two workloads measured in alternating rounds on a shared machine.

On a 2-core machine that other jobs share, two workloads timed one after the other see
different loads. Timing them in rounds (A, B, A, B, ...) exposes both to the same load
at nearly the same moment; the ratio of each round's two times cancels most of the
load, and the median over rounds discards the rounds a burst hit. Deliberately small
and self-contained so that a shared helper can replace it (same inputs, same record).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


class Rounds:
    """Per-round wall times of named workloads; ``time(name, fn)`` runs and records."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self.times: dict[str, list[float]] = {n: [] for n in names}

    def time(self, name: str, fn: Callable[[], object]):
        t = time.perf_counter()
        out = fn()
        self.times[name].append(time.perf_counter() - t)
        return out

    def summary(self, num: str, den: str) -> dict:
        """Medians (ms) of both, and the median and spread of the per-round ratios
        ``num / den`` (rounds where both ran)."""
        a, b = self.times[num], self.times[den]
        ratios = sorted(x / y for x, y in zip(a, b, strict=False) if y > 0)
        return {
            f"{num}_ms": 1e3 * statistics.median(a),
            f"{den}_ms": 1e3 * statistics.median(b),
            "ratio": statistics.median(ratios),
            "ratio_spread": spread(ratios),
            "rounds": len(ratios),
        }


def spread(values: list[float]) -> dict:
    """10th, 25th, 75th, 90th percentile, min and max of ``values``."""
    v = sorted(values)

    def pct(p: float) -> float:
        return v[min(len(v) - 1, max(0, round(p * (len(v) - 1))))]

    return {
        "p10": pct(0.1),
        "p25": pct(0.25),
        "p75": pct(0.75),
        "p90": pct(0.9),
        "min": v[0],
        "max": v[-1],
    }


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        return None
