"""WeightUpdater (spec 8.2-8.4, 1.3) under cocotb, against golden (run by
tests/test_cocotb_weight_update.py through the harness).

A coroutine models the three memories around the updater with the read latencies its
docstring gives (``Z`` four cycles, the latent memory two, the weight memory one; a write
takes effect at the clock edge). Each random layer (shape at the edges 1 and max, theta
0 / 1 / huge, ``Z`` at 0, +-theta, +-(theta + 1) and the extremes of a ``Z`` entry, ``V``
at +-Vmax, ``W`` at +-2, any ``latent_shift``) is compared with golden's ``moves`` and
``apply_latent`` / ``apply_pentary``, packed by ``pack``: the weight digits by (row,
input), the packed words with their padding, the words around the matrix untouched,
``V`` by (row, input), and ``done`` after ``out * fan + 8`` cycles. Then a start with
each run-time value out of range sets ``error`` and writes nothing.

Test environment (optional): ``PENTEGG_TB_CASES`` random layers (default 10).
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

from pentegg.golden import Config
from pentegg.golden.digit import DigitRangeError, pack, unpack
from pentegg.golden.update import apply_latent, apply_pentary, moves
from pentegg.rtl.update.apply import latent_shift_max
from pentegg.rtl.update.votes import z_layout
from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import reset, start_clock

__all__ = ["golden_update", "random_update_case"]

FILL = 0x7FFF  # the weight memory's words outside the matrix (code 7 is not a digit)


def random_update_case(rng: random.Random, max_width: int, z_bits: int, latent_bits: int):
    """A random layer with the edges: ``(out, fan, theta, q, z, v, w)``. ``Z`` holds 0,
    +-theta (does not move), +-(theta + 1) and the extremes of a ``z_bits`` entry; ``V``
    +-Vmax; ``W`` +-2; ``theta`` 0, 1, random, 2^20 and 2^32 - 1."""
    out = rng.choice([1, max_width, rng.randint(1, max_width)])
    fan = rng.choice([1, 5, max_width + 1, rng.randint(1, max_width + 1)])
    theta = rng.choice([0, 0, 1, rng.randint(0, 50), 1 << 20, (1 << 32) - 1])
    vmax = (1 << (latent_bits - 1)) - 1
    zlo, zhi = -(1 << (z_bits - 1)), (1 << (z_bits - 1)) - 1
    edges = [e for e in (0, theta, -theta, theta + 1, -theta - 1, zlo, zhi) if zlo <= e <= zhi]
    size = out * fan
    z = np.array([rng.choice([*edges, rng.randint(-99, 99)]) for _ in range(size)])
    v = np.array([rng.choice([vmax, -vmax, 0, rng.randint(-vmax, vmax)]) for _ in range(size)])
    w = np.array([rng.choice([2, -2, rng.randint(-2, 2)]) for _ in range(size)])
    q = rng.randint(0, latent_shift_max(latent_bits))
    return out, fan, theta, q, z.reshape(out, fan), v.reshape(out, fan), w.reshape(out, fan)


def golden_update(update: str, latent_bits: int, case):
    """Golden's ``(V, W)`` after the update of a :func:`random_update_case` ``case``
    (``V`` None for the pentary update): ``moves``, then ``apply_latent`` or
    ``apply_pentary``."""
    out, fan, theta, q, z, v, w = case
    mv = moves(z, theta)
    if update == "latent":
        cfg = Config(layers=(fan - 1, out), latent_bits=latent_bits, latent_shift=q)
        return apply_latent(cfg, v, mv)
    return None, apply_pentary(w, mv)


def _tb(name: str, default):
    v = os.environ.get(f"PENTEGG_TB_{name.upper()}")
    return json.loads(v) if v is not None else default


class Memories:
    """The Z, weight and latent memories of one layer, as the updater's ports see them."""

    def __init__(self, dut, p: dict, z, w, v, w_base: int, v_base: int):
        self.dut, self.latent = dut, p["update"] == "latent"
        self.lanes, self.z_bits, self.vbits = p["lanes"], p["z_bits"], p["latent_bits"]
        out, fan = z.shape
        nkb = -(-fan // self.lanes)
        depth, _ = z_layout(self.lanes, p["max_width"])
        mask = (1 << self.z_bits) - 1
        self.z = [0] * depth  # each word the lanes' entries, lane i at bits i * z_bits
        for o in range(out):
            for k in range(fan):
                self.z[o * nkb + k // self.lanes] |= (int(z[o, k]) & mask) << (
                    (k % self.lanes) * self.z_bits
                )
        words = [int(x) for x in pack(w)]
        self.w = [FILL] * (w_base + len(words) + 8)
        self.w[w_base : w_base + len(words)] = words
        self.v = [0] * (v_base + z.size + 8)
        if v is not None:
            self.v[v_base : v_base + z.size] = [int(x) for x in v.reshape(-1)]
        self.writes = 0

    async def run(self):
        """Every clock edge: the writes of the cycle before it, then the read data."""
        dut = self.dut
        z_addrs = [0, 0, 0]  # the Z addresses of the last three edges, oldest first
        v_read = 0  # the latent word read at the last edge, out at this one
        while True:
            await ReadOnly()
            za = int(dut.z_addr.value)
            # the write data only with its enable (it is X before the first read data)
            w_write = int(dut.w_wen.value) and (int(dut.w_waddr.value), int(dut.w_wdata.value))
            if self.latent:
                v_write = int(dut.v_wen.value) and (
                    int(dut.v_waddr.value),
                    dut.v_wdata.value.to_signed(),
                )
                vr = int(dut.v_raddr.value)
            else:
                wr = int(dut.w_raddr.value)
            await RisingEdge(dut.clk)
            if w_write:
                self.w[w_write[0]] = w_write[1]
                self.writes += 1
            if self.latent:
                if v_write:
                    self.v[v_write[0]] = v_write[1]
                    self.writes += 1
                dut.v_rdata.value = v_read
                v_read = self.v[vr] if vr < len(self.v) else 0
            else:
                dut.w_rdata.value = self.w[wr] if wr < len(self.w) else 0
            zp = z_addrs[0]
            dut.z_data.value = self.z[zp] if zp < len(self.z) else 0
            z_addrs = [*z_addrs[1:], za]


async def _run(dut, p: dict, out: int, fan: int, theta: int, q: int, w_base, v_base, limit):
    """One start with these inputs (at a falling edge); the cycles from the start cycle
    to ``done``. Returns at the falling edge after ``done``: the memories' coroutine has
    taken the last write, so that it can be stopped."""
    dut.out.value = out
    dut.fan.value = fan
    dut.theta.value = theta
    dut.w_base.value = w_base
    if p["update"] == "latent":
        dut.v_base.value = v_base
        dut.latent_shift.value = q
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    cycles = 1
    await ReadOnly()
    while not int(dut.done.value):
        await RisingEdge(dut.clk)
        cycles += 1
        assert cycles <= limit, f"no done after {limit} cycles (out {out}, fan {fan})"
        await ReadOnly()
    await RisingEdge(dut.clk)  # the last word's write
    await FallingEdge(dut.clk)  # the memories have taken it
    return cycles


def _digits(words: list[int], out: int, fan: int):
    """The weight digits (out, fan) the written words hold, or None if a code is not a
    digit (the words' comparison then names the word)."""
    try:
        return unpack(np.asarray(words, dtype=np.uint16), out * fan).reshape(out, fan)
    except DigitRangeError:
        return None


@cocotb.test()
async def random_layers_match_golden(dut):
    """Random layers back to back: W digits, packed words, V and the cycle count equal
    golden's; the words around the matrix untouched; ``error`` low."""
    p = json.loads(os.environ["PENTEGG_PARAMS"])
    rng = random.Random(cocotb.RANDOM_SEED)
    update, vbits = p["update"], p["latent_bits"]
    start_clock(dut)
    dut.start.value = 0
    await reset(dut)
    await FallingEdge(dut.clk)
    board = Scoreboard(f"weight-update {p}", dut._log)
    for n in range(max(1, _tb("cases", 10))):
        case = random_update_case(rng, p["max_width"], p["z_bits"], vbits)
        out, fan, theta, q, z, v, w = case
        ev, ew = golden_update(update, vbits, case)
        w_base, v_base = rng.randint(1, 9), rng.randint(0, 9)
        mem = Memories(dut, p, z, w, v if ev is not None else None, w_base, v_base)
        task = cocotb.start_soon(mem.run())
        cycles = await _run(dut, p, out, fan, theta, q, w_base, v_base, out * fan + 100)
        task.cancel()
        tag = f"layer {n} (out {out}, fan {fan}, theta {theta}, q {q})"
        words = pack(ew)
        got = mem.w[w_base : w_base + len(words)]
        digits = _digits(got, out, fan)
        if digits is not None:
            board.check(f"{tag} W [row, input]", ew, digits, "W digits")
        board.check(f"{tag} W words", words, got, "W words")
        board.check(
            f"{tag} words around W", [FILL, FILL], [mem.w[w_base - 1], mem.w[w_base + len(words)]]
        )
        if ev is not None:
            vgot = np.asarray(mem.v[v_base : v_base + out * fan]).reshape(out, fan)
            board.check(f"{tag} V [row, input]", ev, vgot, "V")
        board.check(f"{tag} cycles", [out * fan + 8], [cycles], "cycle counts")
        assert not int(dut.error.value), f"{tag}: error set"
    board.report()


@cocotb.test()
async def out_of_range_starts_write_nothing(dut):
    """out 0 or above max_width, fan 0 or above max_width + 1, latent_shift above its
    maximum: ``done`` at once with ``error``, no memory written; the next good start
    clears ``error``."""
    p = json.loads(os.environ["PENTEGG_PARAMS"])
    mw, latent = p["max_width"], p["update"] == "latent"
    start_clock(dut)
    dut.start.value = 0
    await reset(dut)
    await FallingEdge(dut.clk)
    zeros = np.zeros((1, 1), dtype=np.int64)
    bad = [(0, 2, 0), (1, 0, 0)]
    if mw + 1 < 1 << mw.bit_length():  # out's port (0..max_width) holds max_width + 1
        bad.append((mw + 1, 2, 0))
    if mw + 2 < 1 << (mw + 1).bit_length():
        bad.append((1, mw + 2, 0))
    q_max = latent_shift_max(p["latent_bits"])
    if latent and q_max < 7:
        bad.append((1, 2, q_max + 1))
    for out, fan, q in bad:
        mem = Memories(dut, p, zeros, zeros, zeros if latent else None, 1, 0)
        task = cocotb.start_soon(mem.run())
        await _run(dut, p, out, fan, 0, q, 1, 0, 20)
        task.cancel()
        what = f"out {out}, fan {fan}, latent_shift {q}"
        assert int(dut.error.value), f"{what}: error not set"
        assert mem.writes == 0, f"{what}: {mem.writes} memory writes"
    mem = Memories(dut, p, zeros + 5, zeros, zeros if latent else None, 1, 0)
    task = cocotb.start_soon(mem.run())
    await _run(dut, p, 1, 1, 0, 0, 1, 0, 20)
    task.cancel()
    assert not int(dut.error.value), "a good start after the errors: error still set"
    assert mem.writes > 0, "a good start after the errors wrote nothing"
