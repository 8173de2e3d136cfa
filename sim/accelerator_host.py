"""Drive an Accelerator's command stream from a simulator testbench, and the golden
reference of a training run (the tests of the whole accelerator use both).

``AcceleratorJob`` holds one training run: a golden ``Config``, a labelled dataset and the
batch indices of each step. :func:`golden_steps` runs golden's ES steps on it;
:func:`job_words` gives the command words that load the job into the accelerator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pentegg import accel_protocol as ap
from pentegg.golden import Config, init_state
from pentegg.golden.model import es_step_classify

__all__ = ["AcceleratorJob", "golden_steps", "load_words", "random_job"]


@dataclass
class AcceleratorJob:
    cfg: Config
    x: np.ndarray  # (samples, n_0) int, in [-127, 127]
    y: np.ndarray  # (samples,) labels
    batches: list[np.ndarray]  # per step: the sample indices
    step0: int = 0

    @property
    def batch(self) -> int:
        return len(self.batches[0])


def random_job(rng: np.random.Generator, cfg: Config, *, samples: int, batch: int, steps: int):
    x = rng.integers(-127, 128, size=(samples, cfg.layers[0]))
    x[rng.random(x.shape) < 0.1] = 127
    y = rng.integers(0, cfg.layers[-1], size=samples)
    batches = [rng.integers(0, samples, size=batch) for _ in range(steps)]
    return AcceleratorJob(cfg, x, y, batches, step0=int(rng.integers(0, 1000)))


def golden_steps(job: AcceleratorJob):
    """The golden state before the first step and after each step, with each step's
    scores: ``[(state, None), (state_1, info_1), ...]``."""
    state = init_state(job.cfg)
    state.step = job.step0
    out = [(state, None)]
    for idx in job.batches:
        state, info = es_step_classify(state, job.x[idx], job.y[idx])
        out.append((state, info))
    return out


def load_words(job: AcceleratorJob, max_layers: int, *, steps: int) -> list[int]:
    """Registers, samples, labels and the batch indices of ``steps`` steps."""
    words = ap.config_words(job.cfg, max_layers, step=job.step0, steps=steps, batch=job.batch)
    words += ap.mem_write("samples", 0, (job.x.astype(np.int64) & 0xFF).ravel())
    words += ap.mem_write("labels", 0, job.y)
    words += ap.mem_write("batch", 0, np.concatenate(job.batches[:steps]))
    return words
