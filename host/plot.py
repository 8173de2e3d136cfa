"""Learning-curve plots: metric against ES steps and against wall time."""

from __future__ import annotations

from pathlib import Path


def plot_curves(
    runs: list[tuple[str, list[dict]]], path: Path, metric: str | list[str] = "metric"
) -> None:
    """Write the plot (PNG, SVG or PDF by the suffix) with two panels (metric vs step,
    metric vs wall seconds), one line per run. ``metric``: the y label, one for all runs
    or one per run; runs of different metrics (test accuracy and a CartPole return) get a
    row of panels per metric, each with its own axis, in the order they first appear."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [metric] * len(runs) if isinstance(metric, str) else list(metric)
    if len(metrics) != len(runs):
        raise ValueError(f"{len(metrics)} metrics for {len(runs)} runs")
    rows = list(dict.fromkeys(metrics))
    fig, axes = plt.subplots(len(rows), 2, figsize=(10, 4 * len(rows)), sharey="row", squeeze=False)
    for (label, curve), m in zip(runs, metrics, strict=True):
        a, b = axes[rows.index(m)]
        steps = [r["step"] for r in curve]
        wall = [r["wall_s"] for r in curve]
        vals = [r["metric"] for r in curve]
        a.plot(steps, vals, label=label, marker="." if len(curve) < 40 else None)
        b.plot(wall, vals, label=label, marker="." if len(curve) < 40 else None)
    for m, (a, b) in zip(rows, axes, strict=True):
        a.set_xlabel("ES step")
        b.set_xlabel("wall time [s]")
        a.set_ylabel(m)
        for ax in (a, b):
            ax.grid(alpha=0.3)
        a.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp{path.suffix or '.png'}")
    try:
        fig.savefig(tmp, dpi=110)
        tmp.replace(path)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
