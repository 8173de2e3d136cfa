"""Timings whose ratios withstand a changing machine load, and the record of the machine.

A ratio of two timings taken one after the other moves whenever the machine's load changes
between them (another process starts, BLAS threads lose their cores). :func:`interleave`
runs the sides in rounds instead, one call of every side per round (A, B, A, B, ...), so the
load of a moment weighs on every side of that round; each ratio is computed per round, and
the median of the per-round ratios, with its spread, is the figure to report.

    from pentegg.benchmarks import timing

    start = timing.load_average()
    res = timing.interleave(
        {"plain": plain, "perturbed": perturbed},
        rounds=15,
        ratios={"speedup": ("plain", "perturbed")},  # time(plain) / time(perturbed)
    )
    res.median("plain")                  # seconds per call, median over the rounds
    res.times["plain"]                   # seconds per call, one value per round
    res.ratios["speedup"]                # one ratio per round
    s = timing.summary(res.ratios["speedup"])   # median, q1, q3, min, max, n
    print("speedup", timing.format_summary(s))  # 1.23 (IQR 1.20-1.25, range 1.10-1.31)
    record = timing.machine_record(start)       # CPUs, versions, load at start/end, BLAS

Every ``pentegg bench`` JSON record carries ``machine_record`` under ``"machine"``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import re
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Interleaved",
    "blas_limit",
    "blas_threads",
    "contention_note",
    "describe_machine",
    "format_summary",
    "interleave",
    "load_average",
    "machine_record",
    "summary",
]


@dataclass(frozen=True)
class Interleaved:
    """The result of :func:`interleave`.

    ``times[side][i]``: wall time of one call of ``side`` in round ``i``, seconds (the
    mean over ``number`` back-to-back calls). ``ratios[name][i]``: the quotient
    ``times[num][i] / times[den][i]`` of the sides ``(num, den)`` named for ``name``,
    both measured in round ``i``.
    """

    rounds: int
    number: int
    times: dict[str, list[float]]
    ratios: dict[str, list[float]]

    def median(self, side: str) -> float:
        """Median over the rounds of ``side``'s time per call, seconds."""
        return statistics.median(self.times[side])

    def ratio(self, num: str, den: str) -> list[float]:
        """Per-round quotients ``times[num][i] / times[den][i]`` of any two sides."""
        return [a / b for a, b in zip(self.times[num], self.times[den], strict=True)]

    def to_dict(self, scale: float = 1e3) -> dict:
        """JSON-ready: per-round times multiplied by ``scale`` (default: milliseconds)
        under ``"times"``, per-round ratios under ``"ratios"``."""
        return {
            "rounds": self.rounds,
            "number": self.number,
            "times": {k: [t * scale for t in v] for k, v in self.times.items()},
            "ratios": {k: list(v) for k, v in self.ratios.items()},
        }


def interleave(
    sides: Mapping[str, Callable[[], object]],
    rounds: int,
    *,
    ratios: Mapping[str, tuple[str, str]] | None = None,
    number: int = 1,
    warmup: int = 1,
    alternate: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> Interleaved:
    """Time the callables ``sides`` in ``rounds`` interleaved rounds.

    Each side is first called ``warmup`` times, untimed. Then every round times one
    sample of every side: ``number`` back-to-back calls, divided by ``number``. Rounds
    run the sides in the order given, every other round in reverse when ``alternate``
    (A B, B A, A B, ...), so that a load that rises or falls steadily does not favour the
    side that runs first. The garbage collector is off while timing (as in ``timeit``).

    ``ratios`` names the quotients to compute per round: ``{name: (num, den)}`` gives
    ``times[num][i] / times[den][i]``. A throughput ratio "B relative to A" on the same
    work is ``(A, B)``: the time of A over the time of B.

    ``clock`` returns seconds (``time.perf_counter``; tests pass a fake clock).
    Raises ``ValueError`` for no sides, ``rounds``/``number`` < 1, ``warmup`` < 0, or a
    ratio naming an unknown side.
    """
    if not sides:
        raise ValueError("interleave: no sides to time")
    if rounds < 1 or number < 1 or warmup < 0:
        raise ValueError(
            f"interleave: rounds={rounds}, number={number}, warmup={warmup}: "
            "need rounds >= 1, number >= 1, warmup >= 0"
        )
    ratios = dict(ratios or {})
    for name, pair in ratios.items():
        unknown = [s for s in pair if s not in sides]
        if len(pair) != 2 or unknown:
            raise ValueError(
                f"interleave: ratio {name!r} = {pair!r} must name two of {list(sides)}"
            )
    names = list(sides)
    for name in names:
        for _ in range(warmup):
            sides[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for i in range(rounds):
            for name in reversed(names) if alternate and i % 2 else names:
                fn = sides[name]
                t0 = clock()
                for _ in range(number):
                    fn()
                times[name].append((clock() - t0) / number)
    finally:
        if gc_was_on:
            gc.enable()
    per_round = {
        name: [times[a][i] / times[b][i] for i in range(rounds)] for name, (a, b) in ratios.items()
    }
    return Interleaved(rounds, number, times, per_round)


def summary(values: Sequence[float]) -> dict:
    """Median and spread of ``values``: ``median``, ``q1`` and ``q3`` (quartiles, the
    inclusive method; the IQR is ``q3 - q1``), ``min``, ``max`` and ``n``."""
    if not values:
        raise ValueError("summary: no values")
    v = [float(x) for x in values]
    q1, _, q3 = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else v * 3
    return {
        "median": statistics.median(v),
        "q1": q1,
        "q3": q3,
        "min": min(v),
        "max": max(v),
        "n": len(v),
    }


def format_summary(s: Mapping[str, float], fmt: str = ".2f") -> str:
    """``"1.05 (IQR 1.02-1.07, range 0.98-1.10)"`` from a :func:`summary`."""
    return (
        f"{s['median']:{fmt}} (IQR {s['q1']:{fmt}}-{s['q3']:{fmt}}, "
        f"range {s['min']:{fmt}}-{s['max']:{fmt}})"
    )


def load_average() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (``os.getloadavg``), or None where the
    platform has none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _available_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _numpy_blas() -> tuple[str | None, str | None, int | None]:
    """(name, version, MAX_THREADS) of the BLAS numpy was built with, from its config."""
    try:
        import numpy as np

        cfg = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    except Exception:  # older numpy, or a build without the section
        return None, None, None
    m = re.search(r"MAX_THREADS=(\d+)", str(cfg.get("openblas configuration", "")))
    return cfg.get("name"), cfg.get("version"), int(m.group(1)) if m else None


# Environment variables each BLAS reads for its thread count, first match wins.
_THREAD_VARS = {
    "openblas": ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"),
    "mkl": ("MKL_NUM_THREADS", "OMP_NUM_THREADS"),
    "blis": ("BLIS_NUM_THREADS", "OMP_NUM_THREADS"),
}


def blas_threads(environ: Mapping[str, str] | None = None, use_threadpoolctl: bool = True) -> dict:
    """The BLAS numpy uses and its thread count: ``{"library", "version", "threads",
    "source"}``.

    ``source`` says where ``threads`` comes from: ``"threadpoolctl"`` (the count the
    loaded library reports, when threadpoolctl is installed); else
    ``"environment NAME"`` (the variable that library reads, e.g. OPENBLAS_NUM_THREADS);
    else ``"assumed: OpenBLAS default ..."`` (one thread per available CPU, capped by the
    build's MAX_THREADS); else ``"unknown"`` with ``threads`` None.
    """
    env = os.environ if environ is None else environ
    if use_threadpoolctl:
        try:
            import numpy  # noqa: F401  (loads numpy's BLAS, so threadpoolctl sees it)
            from threadpoolctl import threadpool_info
        except ImportError:
            pass
        else:
            libs = [i for i in threadpool_info() if i.get("user_api") == "blas"]
            libs.sort(key=lambda i: "numpy" not in str(i.get("filepath", "")))
            if libs:
                lib = libs[0]
                return {
                    "library": lib.get("internal_api"),
                    "version": lib.get("version"),
                    "threads": lib.get("num_threads"),
                    "source": "threadpoolctl",
                }
    name, version, max_threads = _numpy_blas()
    family = next((f for f in _THREAD_VARS if name and f in name.lower()), None)
    rec = {"library": name, "version": version, "threads": None, "source": "unknown"}
    for var in _THREAD_VARS.get(family or "", ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
        value = env.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            rec["threads"], rec["source"] = int(value), f"environment {var}"
            return rec
    if family == "openblas":
        cpus = _available_cpus()
        rec["threads"] = min(cpus, max_threads) if cpus and max_threads else cpus
        rec["source"] = (
            "assumed: OpenBLAS default, one thread per available CPU (threadpoolctl not "
            "installed, OPENBLAS_NUM_THREADS/OMP_NUM_THREADS not set)"
        )
    return rec


@contextlib.contextmanager
def blas_limit(threads: int | None):
    """Inside the block numpy's BLAS runs at most ``threads`` threads (threadpoolctl);
    ``None`` leaves it as it is. Raises ``RuntimeError`` when threadpoolctl is missing."""
    if threads is None:
        yield
        return
    try:
        import numpy  # noqa: F401  (loads numpy's BLAS, so threadpoolctl can limit it)
        from threadpoolctl import threadpool_limits
    except ImportError:
        raise RuntimeError(
            "limiting BLAS threads needs threadpoolctl (pip install threadpoolctl)"
        ) from None
    with threadpool_limits(limits=threads, user_api="blas"):
        yield


def machine_record(load_at_start: list[float] | None) -> dict:
    """What the figures were measured on: ``cpus`` (``os.cpu_count``), ``cpus_available``
    (this process's affinity), Python, NumPy, platform, ``load_avg_start`` (pass
    :func:`load_average` taken before measuring), ``load_avg_end`` (read now) and
    ``blas`` (:func:`blas_threads`)."""
    import numpy as np

    return {
        "cpus": os.cpu_count(),
        "cpus_available": _available_cpus(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "load_avg_start": load_at_start,
        "load_avg_end": load_average(),
        "blas": blas_threads(),
    }


def describe_machine(rec: Mapping) -> str:
    """One line from a :func:`machine_record`: CPUs, 1-minute load at start and end, BLAS."""

    def one(load):
        return "?" if not load else f"{load[0]:.2f}"

    b = rec["blas"]
    lib = " ".join(str(x) for x in (b["library"], b["version"]) if x) or "BLAS"
    n = b["threads"]
    threads = "? threads" if n is None else f"{n} thread{'s' if n != 1 else ''}"
    return (
        f"machine: {rec['cpus']} CPUs, load average {one(rec['load_avg_start'])} at start, "
        f"{one(rec['load_avg_end'])} at end; {lib} with {threads} ({b['source']})"
    )


def contention_note(rec: Mapping) -> str | None:
    """A warning when a :func:`machine_record` shows more runnable work than CPUs: the
    1-minute load at start plus the BLAS threads exceeds the available CPUs. Then a BLAS
    thread waits for a CPU now and then, which slows code making many small multi-threaded
    BLAS calls far more than code making few large ones, so a ratio between such sides
    depends on the load itself (interleaving cannot remove that); None otherwise."""
    load, threads = rec.get("load_avg_start"), rec["blas"].get("threads")
    cpus = rec.get("cpus_available") or rec.get("cpus")
    if not load or not threads or not cpus or threads < 2 or load[0] + threads <= cpus:
        return None
    return (
        f"note: load average {load[0]:.2f} at start plus {threads} BLAS threads exceeds "
        f"{cpus} CPUs: ratios between BLAS-heavy sides depend on the load; "
        "--blas-threads 1 measures in a configuration load affects less"
    )
