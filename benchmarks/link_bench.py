"""``pentegg bench link``: ES steps through the host protocol on the simulated device.

For each task it opens the simulated device built for the task's default configuration
(``--device sim``: the accelerator; ``sim-compact``: the compact device, the iCEBreaker's
core, with that build's memories: a dataset larger than its sample memory, as digits, is
sent a batch a step, as on the board), loads the dataset and the initial state, then
times ES steps two ways:

* ``per_step``: one ``RUN train`` per step and the whole state read back after each (what
  ``pentegg compare`` does);
* ``chunked``: ``--steps`` steps in one ``RUN train`` and one read-back (what
  ``pentegg train --device`` does between evaluations).

It prints the simulated wall time per step, the device's cycles per step (its ``cycles``
register), the link's bytes per step (both directions; the STATUS polls of a run are
counted as one, since a simulated run's poll count follows the host's wall time) and the
predicted step time on each board: ``cycles / clock + bytes / (baud / 10)`` (8N1: ten bit
times per byte), with the boards' clocks and baud rates from ``pentegg.boards``.
"""

from __future__ import annotations

import time

__all__ = ["board_links", "board_memories", "hypothetical_boards", "run"]


def board_links(device: str = "sim") -> dict[str, tuple[int, int]]:
    """Core clock (Hz) and UART rate (baud) of each board build (docs/boards.md) of the
    simulated device's core: ``sim``, the accelerator (every board, at the default clock
    of a core without lanes: on the iCEBreaker, which it does not fit, hypothetical);
    ``sim-compact``, the compact device (the boards whose build has it, at its clock)."""
    from pentegg.boards import boards

    if device == "sim-compact":
        return {
            name: (c.hz, c.baud)
            for name, b in boards().items()
            if "compact" in b.core_defaults
            for c in [b.clock(None, "compact")]
        }
    return {name: (b.clock_hz, b.baud) for name, b in boards().items()}


def hypothetical_boards(device: str = "sim") -> list[str]:
    """The boards in :func:`board_links` whose build cannot hold the simulated device's
    core (the accelerator, ``device``, on the iCEBreaker): their predictions are what the
    core would take at that board's clock and baud rate, not what the board runs."""
    from pentegg.boards import boards

    core = "compact" if device == "sim-compact" else "device"
    return [name for name in board_links(device) if core in boards()[name].unfit]


#: The compact device's memories that decide the link's traffic: the iCEBreaker build's
#: (a sample memory of one digits batch, so a larger dataset is sent step by step).
ICEBREAKER_LINK_PARAMS = ("sample_bytes", "label_words", "batch_words", "frame_bytes")


def board_memories(device: str) -> dict[str, int]:
    """Memory sizes for the simulated device: for ``sim-compact`` the iCEBreaker build's
    (:data:`ICEBREAKER_LINK_PARAMS`), so that a dataset the board cannot hold is sent a
    batch a step here too and its bytes count in the predictions; none for ``sim`` (the
    ULX3S build holds the tasks' datasets)."""
    if device != "sim-compact":
        return {}
    from pentegg.boards.icebreaker import COMPACT_PARAMS

    return {k: COMPACT_PARAMS[k] for k in ICEBREAKER_LINK_PARAMS}


#: A STATUS request and its response on the wire (COBS, delimiters): 10 + 22 bytes.
STATUS_BYTES = 32


def _delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def run_task(
    task_name: str, *, steps: int, lanes: int, seed: int = 0, device: str = "sim", log=print
) -> dict:
    from pentegg.cmd_train import _config_from_args
    from pentegg.device import Trainer, open_device
    from pentegg.golden import init_state
    from pentegg.tasks import get_task

    task = get_task(task_name)

    from pentegg.cli import build_parser

    # the task's defaults, exactly as `pentegg train --task T --seed S` takes them
    args = build_parser().parse_args(["train", "--task", task_name, "--seed", str(seed)])
    cfg = _config_from_args(args, task)
    batch = task.defaults.get("batch", 256)
    samples = len(task.x_train)
    step_batch = min(batch, samples)
    t0 = time.perf_counter()
    dev = open_device(
        device, cfg=cfg, batch=step_batch, samples=samples, lanes=lanes, **board_memories(device)
    )
    open_s = time.perf_counter() - t0
    try:
        trainer = Trainer(dev, task, cfg, batch)
        state = init_state(cfg)
        s0 = dict(dev.stats)
        t0 = time.perf_counter()
        trainer.start(state)
        load = {"wall_s": time.perf_counter() - t0, **_delta(dev.stats, s0)}
        info = dev.info()

        per = []
        for _ in range(steps):
            s0 = dict(dev.stats)
            t0 = time.perf_counter()
            state, _ = trainer.steps(state.step, 1)
            wall = time.perf_counter() - t0
            cycles = dev.read_regs(["cycles"])["cycles"]
            per.append({"wall_s": wall, "cycles": cycles, **_delta(dev.stats, s0)})
        s0 = dict(dev.stats)
        t0 = time.perf_counter()
        state, _ = trainer.steps(state.step, steps)
        wall = time.perf_counter() - t0
        cycles = dev.read_regs(["cycles"])["cycles"]
        chunk = {"wall_s": wall, "cycles": cycles, **_delta(dev.stats, s0)}
    finally:
        dev.close()

    def mean(rows, k):
        return sum(r[k] for r in rows) / len(rows)

    res = {
        "task": task.name,
        "device": device,
        "layers": list(cfg.layers),
        "population": cfg.population,
        "batch": step_batch,
        "lanes": info["lanes"],
        "steps": steps,
        "open_s": round(open_s, 3),
        # the dataset does not fit the device: each step's batch is sent before it
        "dataset_streamed": trainer.stream,
        "load": load,
        "per_step": {k: mean(per, k) for k in per[0]},
        "chunked": {k: chunk[k] / steps for k in chunk},
    }
    for way in ("per_step", "chunked"):
        r = res[way]
        # STATUS polls: as many as the simulation's wall time allows, not a board's;
        # a board needs about one (the step's cycles pass between two polls)
        r["link_bytes"] = r["bytes_out"] + r["bytes_in"] - r["status_bytes"] + STATUS_BYTES
        link_bytes = r["link_bytes"]
        r["predicted_ms"] = {
            board: 1e3 * (r["cycles"] / clock + link_bytes * 10 / baud)
            for board, (clock, baud) in board_links(device).items()
        }
    log(
        f"{task.name} {'-'.join(map(str, cfg.layers))} population {cfg.population} batch "
        f"{step_batch} "
        + (f"lanes {info['lanes']}" if device == "sim" else "on the compact device")
        + f": device built/opened in {open_s:.1f} s, dataset "
        f"and state loaded in {load['wall_s']:.2f} s ({load['bytes_out']} bytes)"
        + ("; the dataset does not fit, so each step's batch is sent" if trainer.stream else "")
    )
    res["hypothetical_boards"] = hypothetical_boards(device)
    for way in ("per_step", "chunked"):
        r = res[way]
        pred = ", ".join(
            f"{b} {ms:.1f} ms"
            + (
                " (hypothetical: the accelerator does not fit it)"
                if b in res["hypothetical_boards"]
                else ""
            )
            for b, ms in r["predicted_ms"].items()
        )
        log(
            f"  {way:<9} sim {r['wall_s']:.3f} s/step, {r['cycles']:.0f} cycles/step, link "
            f"{r['link_bytes']:.0f} B per step (without the simulation's STATUS polls); "
            f"predicted {pred}"
        )
    return res


def run(
    *,
    tasks=("xor", "digits"),
    steps: dict | None = None,
    lanes: int = 8,
    device: str = "sim",
    log=print,
) -> dict:
    steps = steps or {}
    default = {"digits": 2, "xor": 3 if device == "sim-compact" else 20}
    return {
        "device": device,
        "tasks": [
            run_task(
                t, steps=steps.get(t) or default.get(t, 20), lanes=lanes, device=device, log=log
            )
            for t in tasks
        ],
        "boards": {b: {"clock_hz": c, "baud": r} for b, (c, r) in board_links(device).items()},
    }
