"""``pentegg bench accelerator``: cycles of one whole ES step, cycle-exact, by phase.

The Accelerator runs in Verilator: from a random initial state (``init random``), one
``RUN train`` step of the digits default (64-64-10, population 256, rank 4) on random
int8 samples, at two simulated batch sizes; scores, theta and the new weights and latent
integers are checked against golden, so a figure is only reported for a correct run. The
design's counters split the step into evaluation, shaping and update. Evaluation grows
linearly with the batch (the same passes per sample), shaping and update do not depend on
it; the step at the full batch is extrapolated from the two measured batches::

    eval(B) = eval(b1) + (B - b1) * (eval(b2) - eval(b1)) / (b2 - b1)

and the JSON gives both measurements. ``throughput_ratio = inference_MACs / (2 * lanes *
cycles_per_step)``, as in ``pentegg bench evaluator``. Cycle counts do not depend on the
machine (no interleaving needed); wall time is informative only.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from pentegg.benchmarks.evaluator_bench import inference_macs

__all__ = ["CARRIED_PARAMS", "run", "run_for_build"]

#: Elaboration parameters of a build that :func:`run_for_build` carries into the
#: simulated design (they shape the datapath and its cycles); the maxima and memory sizes
#: are the bench's own (the digits default must fit, the samples are random).
CARRIED_PARAMS = (
    "mode",
    "digits",
    "group",
    "noise_depth",
    "mem_latency",
    "noise_buffers",
    "e_generators",
    "noise_write_lanes",
    "noise_generators",
    "latent_bits",
)


def run(
    *,
    lanes: int = 16,
    batch: int = 256,
    sim_batches=(16, 32),
    layers=(64, 64, 10),
    population: int = 256,
    rank: int = 4,
    update: str = "latent",
    update_lanes: int | None = None,
    pivots: int = 1,
    seed: int = 0,
    extra: dict | None = None,
    log=print,
) -> dict:
    """One step of ``layers`` at ``population`` on ``lanes`` (see the module docstring);
    ``extra`` adds elaboration parameters (:data:`CARRIED_PARAMS`) to the simulated
    design."""
    from pentegg.rtl.accelerator import Accelerator
    from pentegg.sim import harness

    b1, b2 = sorted(sim_batches)
    params = {
        "lanes": lanes,
        "max_layers": len(layers) - 1,
        "max_width": max(layers),
        "rank": rank,
        "max_population": population,
        "max_batch": max(b2, batch),
        "update": update,
        "pivots": pivots,
        "sample_bytes": 1 << max(4, (b2 * layers[0] - 1).bit_length()),
        "label_words": 1 << max(4, (b2 - 1).bit_length()),
        "batch_words": 1 << max(4, (b2 - 1).bit_length()),
    }
    update_lanes = min(lanes, 64) if update_lanes is None else update_lanes  # the default
    params["update_lanes"] = update_lanes
    params.update({k: v for k, v in (extra or {}).items() if k in CARRIED_PARAMS})
    with tempfile.TemporaryDirectory(prefix="pentegg-bench-") as tmp:
        out = Path(tmp) / "bench.json"
        spec = {"layers": list(layers), "population": population, "batches": [b1, b2], "seed": seed}
        log(
            f"bench accelerator: lanes {lanes}, update lanes {update_lanes}, layers "
            f"{list(layers)}, population {population}, rank {rank}: one step at batches {b1} "
            f"and {b2} in Verilator (building first)..."
        )
        t = time.perf_counter()
        harness.run(
            "accelerator",
            params,
            "cocotb_accelerator",
            simulator="verilator",
            testcase="benchmark",
            seed=seed,
            env={"bench": spec, "bench_out": str(out)},
            factory=lambda: Accelerator(**params),
        )
        wall = time.perf_counter() - t
        meas = json.loads(out.read_text())
    m1, m2 = meas
    per_sample = (m2["eval_cycles"] - m1["eval_cycles"]) / (b2 - b1)
    eval_cycles = m1["eval_cycles"] + (batch - b1) * per_sample
    shaping = m2["shape_cycles"]
    update_cycles = m2["update_cycles"]
    other = m2["cycles"] - m2["eval_cycles"] - shaping - update_cycles
    cycles = eval_cycles + shaping + update_cycles + other
    macs = inference_macs(layers, population, batch)
    return {
        "lanes": lanes,
        "update_lanes": update_lanes,
        "pivots": pivots,
        "layers": list(layers),
        "population": population,
        "batch": batch,
        "rank": rank,
        "update": update,
        "params": params,
        "cycles_per_step": round(cycles),
        "eval_cycles": round(eval_cycles),
        "shaping_cycles": shaping,
        "update_cycles": update_cycles,
        "other_cycles": other,
        "eval_cycles_per_sample": per_sample,
        "inference_macs": macs,
        "ideal_cycles": macs / (2 * lanes),
        "throughput_ratio": macs / (2 * lanes * cycles),
        "measured": meas,
        "extrapolated_from_batches": [b1, b2],
        "bit_exact": all(m["bit_exact"] for m in meas),
        "simulator": "verilator",
        "seed": seed,
        "wall_s": wall,
    }


def run_for_build(params: dict, *, log=print) -> dict:
    """The digits default step (64-64-10, population 256, batch 256) on the datapath of a
    build with elaboration ``params`` (an Accelerator's or a Device's, as
    ``pentegg synth`` resolves them): its lanes, rank, update and every
    :data:`CARRIED_PARAMS` entry, with the bench's own maxima and memory sizes, so that a
    build too small to hold the digits default (the iCEBreaker's) still gets the cycles
    its datapath would take."""
    return run(
        lanes=params["lanes"],
        rank=params.get("rank", 4),
        update=params.get("update", "latent"),
        update_lanes=params.get("update_lanes"),
        pivots=params.get("pivots", 1),
        extra=params,
        log=log,
    )
