"""``pentegg bench evaluator``: cycles of one population evaluation, cycle-exact.

The PopulationEvaluator runs in Verilator (the EvaluatorSystem wrapper: the evaluator and
its memories) on the digits default network (64-64-10, population 256) or any network
given, with random weights, inputs and ES step; its outputs are checked bit for bit
against golden, so a figure is only reported for a correct run. Figures:

* ``cycles``: from ``start`` until ``busy`` falls (noise fills, loading, drain included);
  with ``ahead`` (two noise buffers) the second of two evaluations at consecutive ES
  steps, whose first round's noise the first made while it ran (``first_cycles``: the
  first's, which made its own), as every evaluation but a run's first is in training;
* ``ideal_cycles = inference_MACs / (2 * lanes)`` with ``inference_MACs = population *
  batch * sum_l fan_l * out_l``, the work of plain inference (spec 9.2's fan counts the
  bias), and ``throughput_ratio = ideal_cycles / cycles``;
* the lanes' cycles by activity (MAC beats, flushes, and why they waited), from the
  design's own counters.

A cycle count does not depend on the machine: no interleaving is needed. The machine
record says what ran it (wall time is informative only).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from pentegg.rtl.evaluator.params import EvaluatorParams

__all__ = ["GMACS_BATCH", "inference_macs", "run", "run_for_build"]


def inference_macs(layers, population: int, batch: int) -> int:
    return population * batch * sum((layers[l] + 1) * layers[l + 1] for l in range(len(layers) - 1))


def run(
    *,
    lanes: int = 16,
    batch: int = 16,
    mode: str = "lowrank",
    inputs: str = "shared",
    layers=(64, 64, 10),
    population: int = 256,
    rank: int = 4,
    digits: str = "binomial",
    group: int | None = None,
    noise_buffers: int = 1,
    e_generators: int = 1,
    noise_generators: int = 1,
    ahead: bool = False,
    simulator: str = "verilator",
    seed: int = 0,
    log=print,
) -> dict:
    from pentegg.sim import harness
    from pentegg.sim.evaluator_system import EvaluatorSystem

    params = {
        "lanes": lanes,
        "max_layers": len(layers) - 1,
        "max_width": max(layers),
        "rank": rank,
        "digits": digits,
        "mode": mode,
        "noise_buffers": noise_buffers,
        "e_generators": e_generators,
        "noise_generators": noise_generators,
    }
    if group is not None:
        params["group"] = group
    ep = EvaluatorParams(**params).check()
    if ahead and noise_buffers != 2:
        raise ValueError(
            "ahead: the next evaluation's noise is made in the free buffer: two noise buffers"
        )
    weights = sum(-(-(layers[l] + 1) * layers[l + 1] // 5) for l in range(len(layers) - 1))
    memories = {
        "weight_words": 1 << max(4, (weights - 1).bit_length()),
        "sample_bytes": 1 << max(4, (batch * layers[0] - 1).bit_length()),
        "label_words": 1 << max(4, (batch - 1).bit_length()),
        "batch_words": 1 << max(4, (batch - 1).bit_length()),
        "score_words": 1 << max(4, (population - 1).bit_length()),
    }
    with tempfile.TemporaryDirectory(prefix="pentegg-bench-") as tmp:
        out = Path(tmp) / "bench.json"
        spec = {
            "layers": list(layers),
            "population": population,
            "batch": batch,
            "inputs": inputs,
            "seed": seed,
            "ahead": ahead,
        }
        log(
            f"bench evaluator: lanes {lanes}, layers {list(layers)}, population {population}, "
            f"batch {batch}, {mode}, {inputs} inputs, rank {rank}"
            + (", the next step's first-round noise made ahead" if ahead else "")
            + f": building and simulating ({simulator})..."
        )
        t = time.perf_counter()
        harness.run(
            "evaluator",
            params,
            "cocotb_evaluator",
            simulator=simulator,
            testcase="benchmark",
            seed=seed,
            env={"bench": spec, "bench_out": str(out), "max_cycles": 200_000_000},
            factory=lambda: EvaluatorSystem(**params, **memories),
        )
        wall = time.perf_counter() - t
        res = json.loads(out.read_text())
    macs = inference_macs(layers, population, batch)
    ideal = macs / (2 * lanes)
    cycles = res["cycles"]
    return {
        "lanes": lanes,
        "layers": list(layers),
        "population": population,
        "batch": batch,
        "mode": mode,
        "inputs": inputs,
        "rank": rank,
        "digits": digits,
        "group": ep.group_lanes,
        "finalizers": ep.finalizers,
        "noise_buffers": noise_buffers,
        "e_generators": e_generators,
        "noise_generators": noise_generators,
        "ahead": ahead,
        "cycles": cycles,
        "first_cycles": res["first_cycles"],
        "inference_macs": macs,
        "ideal_cycles": ideal,
        "throughput_ratio": ideal / cycles,
        "activity": res["counters"],
        "bit_exact": res["bit_exact"],
        "simulator": simulator,
        "seed": seed,
        "wall_s": wall,
    }


#: the batch of :func:`run_for_build`'s evaluation (issue 9's targets take batch >= 16)
GMACS_BATCH = 16


def run_for_build(params: dict, *, log=print) -> dict:
    """One evaluation of the digits default network (64-64-10, population 256, batch
    :data:`GMACS_BATCH`) with per-member inputs, where nothing is shared, on the datapath
    of an evaluator build with elaboration ``params`` (as ``pentegg synth`` resolves
    them): its lanes, mode, rank, digits, group, noise buffers, E generators and noise
    generators (a multiple of the build's noise write group, which does not change the
    cycles), with the bench's own maxima and memory sizes. With two noise buffers the
    evaluation is one of a run of ES steps (``ahead``: its first round's noise made
    during the evaluation before, as when the build trains). Its ``throughput_ratio`` is
    the one ``pentegg synth evaluator`` turns into G inference-MAC/s at the fmax found."""
    return run(
        lanes=params["lanes"],
        batch=GMACS_BATCH,
        mode=params.get("mode", "lowrank"),
        inputs="member",
        rank=params.get("rank", 4),
        digits=params.get("digits", "binomial"),
        group=params.get("group"),
        noise_buffers=params.get("noise_buffers", 1),
        e_generators=params.get("e_generators", 1),
        noise_generators=params.get("noise_generators", 1),
        ahead=params.get("noise_buffers", 1) == 2,
        log=log,
    )
