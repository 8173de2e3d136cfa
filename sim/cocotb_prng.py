"""cocotb tests of PentaryPRNG (run by tests/test_rtl_prng.py through the harness).

Test environment (set by the pytest side, all optional):
``PENTEGG_TB_DIGITS`` total digits compared per run of ``streams_equal_golden``,
``PENTEGG_TB_KEYS`` number of keys they are spread over,
``PENTEGG_TB_READY`` probability that the sink is ready in a cycle.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from pentegg.golden import stream_digits, stream_state
from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import StreamSink, decode_digits, reset, start_clock

KEY_FIELDS = ("seed", "step", "pair", "layer", "ab")
KEY_RANGES = {"seed": 1 << 32, "step": 1 << 16, "pair": 1 << 11, "layer": 1 << 3, "ab": 2}


def _tb(name: str, default):
    v = os.environ.get(f"PENTEGG_TB_{name.upper()}")
    return json.loads(v) if v is not None else default


def _params():
    return json.loads(os.environ["PENTEGG_PARAMS"])


def _slack() -> int:
    """Extra cycles a stream start may take with the serial keyer (1666 with reseed)."""
    return 1700 if _params().get("keyer") == "serial" else 0


def random_key(rng: random.Random) -> dict[str, int]:
    return {f: rng.randrange(KEY_RANGES[f]) for f in KEY_FIELDS}


def key_text(key) -> str:
    return ":".join(str(key[f]) for f in KEY_FIELDS)


async def restart(dut, key, *, reseed=True):
    for f in KEY_FIELDS:
        getattr(dut, f).value = key[f]
    dut.reseed.value = int(reseed)
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0


async def setup(dut):
    start_clock(dut)
    dut.start.value = 0
    dut.reseed.value = 0
    dut.o__ready.value = 0
    await reset(dut)


def golden_digits(key, n, dist):
    state = stream_state(key["seed"], key["step"], key["pair"], key["layer"], key["ab"])
    return stream_digits(state, n, dist)


@cocotb.test()
async def streams_equal_golden(dut):
    """Several keys, many digits each, random back-pressure: every digit equals golden."""
    p = _params()
    per_beat, dist = p["digits_per_beat"], p["digits"]
    rng = random.Random(cocotb.RANDOM_SEED)
    total = _tb("digits", 100_000)
    n_keys = _tb("keys", 4)
    await setup(dut)
    sink = StreamSink(dut, "o", ready_probability=_tb("ready", 0.8))
    board = Scoreboard(f"prng {dist} x{per_beat}", dut._log)
    seed = rng.randrange(1 << 32)
    beats_per_key = -(-total // (n_keys * per_beat))
    for j in range(n_keys):
        key = random_key(rng)
        key["seed"] = seed if j < n_keys - 1 else rng.randrange(1 << 32)  # one reseed
        await restart(dut, key, reseed=(j in (0, n_keys - 1)))
        beats = await sink.take(beats_per_key, timeout_cycles=100 * beats_per_key + 200 + _slack())
        got = np.array([d for b in beats for d in decode_digits(b, per_beat)])
        board.check(
            f"digits (key {key_text(key)})", golden_digits(key, got.size, dist), got, "digits"
        )
    board.report()
    assert board.checked["digits"] >= total


@cocotb.test()
async def restart_replays(dut):
    """A restart with the same key, at any point, replays the stream from its first digit;
    the stored run key survives restarts without reseed."""
    p = _params()
    per_beat, dist = p["digits_per_beat"], p["digits"]
    rng = random.Random(cocotb.RANDOM_SEED + 1)
    await setup(dut)
    sink = StreamSink(dut, "o", ready_probability=0.7)
    board = Scoreboard(f"prng {dist} x{per_beat} replay", dut._log)
    key = random_key(rng)
    await restart(dut, key)
    first = await sink.take(40, timeout_cycles=2000 + _slack())
    for trial in range(6):
        # restart after a random number of beats, or during the key mixing
        await restart(dut, key, reseed=trial % 2 == 0)
        wait = rng.randrange(0, 20)
        for _ in range(wait):
            await RisingEdge(dut.clk)
        if rng.random() < 0.5:
            await restart(dut, key, reseed=False)
        again = await sink.take(40, timeout_cycles=2000 + _slack())
        board.check(f"replay {trial} (key {key_text(key)})", first, again, "beats")
    ref = golden_digits(key, 40 * per_beat, dist)
    got = [d for b in first for d in decode_digits(b, per_beat)]
    board.check("first stream", ref, got, "digits")
    # another key in between must not disturb the replay of the first
    other = random_key(rng)
    other["seed"] = key["seed"]
    await restart(dut, other, reseed=False)
    await sink.take(5, timeout_cycles=500 + _slack())
    await restart(dut, key, reseed=False)
    board.check(
        "replay after another key",
        first,
        await sink.take(40, timeout_cycles=2000 + _slack()),
        "beats",
    )
    board.report()


@cocotb.test()
async def distinct_keys_distinct_streams(dut):
    """Keys that differ in a single field (seed, step, pair, layer or A|B) give different
    streams, each equal to its golden stream."""
    p = _params()
    per_beat, dist = p["digits_per_beat"], p["digits"]
    rng = random.Random(cocotb.RANDOM_SEED + 2)
    await setup(dut)
    sink = StreamSink(dut, "o")
    board = Scoreboard(f"prng {dist} x{per_beat} keys", dut._log)
    n_beats = -(-64 // per_beat)
    base = random_key(rng)
    keys = [base]
    for f in KEY_FIELDS:
        k = dict(base)
        k[f] ^= 1 << rng.randrange(KEY_RANGES[f].bit_length() - 1)
        keys.append(k)
    streams = {}
    for k in keys:
        await restart(dut, k)
        beats = await sink.take(n_beats, timeout_cycles=1000 + _slack())
        got = [d for b in beats for d in decode_digits(b, per_beat)]
        board.check(f"digits (key {key_text(k)})", golden_digits(k, len(got), dist), got, "digits")
        streams[key_text(k)] = tuple(got)
    assert len(set(streams.values())) == len(keys), f"two keys gave the same stream: {streams}"
    board.report()
