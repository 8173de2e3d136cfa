"""The Device (rtl/link/device.py: LinkEngine + Accelerator) under cocotb on Icarus, on
its byte streams, with frames made and parsed by ``pentegg.link`` (sim/cocotb_link.py):
INFO against the build's parameters, register and memory round trips, the largest
frames, every error status a request's bytes can cause (each followed by a read-back
showing nothing changed), BUSY during a run, and one xor training step driven by the
host's ``Device`` and ``Trainer``, equal to ``pentegg.golden``. Random pacing on both
streams and all data come from the run's seed: ``PENTEGG_SEED`` / ``COCOTB_RANDOM_SEED``
replays a run."""

import pytest

from pentegg.sim import harness

_TINY = {
    "max_layers": 2,
    "max_population": 8,
    "max_batch": 4,
    "mem_latency": 1,
    "sample_bytes": 16,
    "label_words": 16,
    "batch_words": 16,
    "member_bytes": 128,
    "logit_bytes": 128,
}

#: Two tiny builds that differ in everything the link sees: the memories (a pentary build
#: has no latent memory), the frame buffer (512 bytes hold 254-byte COBS blocks), the
#: INFO words (a board's clock and baud, or simulation's zeros).
BUILDS = {
    "lowrank-pentary-fb256": {
        **_TINY,
        "lanes": 1,
        "max_width": 4,
        "rank": 4,
        "update": "pentary",
        "frame_bytes": 256,
        "clock_hz": 12_000_000,
        "baud": 115_200,
    },
    "quantized-latent-fb512": {
        **_TINY,
        "lanes": 2,
        "max_width": 8,
        "rank": 1,
        "mode": "quantized",
        "digits": "uniform",
        "latent_bits": 6,
        "frame_bytes": 512,
    },
}


@pytest.mark.parametrize("build", BUILDS)
def test_icarus_device_answers_requests_and_errors_and_trains_like_golden(build):
    harness.run("device", BUILDS[build], "cocotb_link")
