"""The Device (rtl/link/device.py: LinkEngine + Accelerator) under cocotb on its byte
streams, with frames made and parsed by ``pentegg.link`` (sim/cocotb_link.py): INFO
against the build's parameters, register and weight round trips, every error status a
request's bytes can cause (each followed by a read-back showing nothing changed), BUSY
during a run, and one xor training step driven by the host's ``Device`` and ``Trainer``
equal to ``pentegg.golden``. Random pacing on both streams and random data come from the
run's seed: ``PENTEGG_SEED`` / ``COCOTB_RANDOM_SEED`` replays a run."""

from pentegg.sim import harness

#: A tiny build: one lane, 2 layers of up to 4, population 8, a 256-byte frame buffer;
#: non-zero clock and baud so that INFO must report what was elaborated.
BUILD = {
    "lanes": 1,
    "max_layers": 2,
    "max_width": 4,
    "rank": 4,
    "max_population": 8,
    "max_batch": 4,
    "mem_latency": 1,
    "sample_bytes": 16,
    "label_words": 16,
    "batch_words": 16,
    "member_bytes": 128,
    "logit_bytes": 128,
    "frame_bytes": 256,
    "clock_hz": 12_000_000,
    "baud": 115_200,
}


def test_cocotb_icarus_device_link():
    harness.run("device", BUILD, "cocotb_link")
