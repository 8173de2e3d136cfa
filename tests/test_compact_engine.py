# amaranth: UnusedElaboratable=no
"""CompactEngine (rtl/compact/engine.py) in the Amaranth simulator, driven through its bus
as the firmware drives it: one pair's forward pass (NOISE, BASE, LAYER per layer) equal
to golden's logits of both members, for a shared sample (layer 0 from the base product)
and for per-member inputs, at ranks 1 and 4, random widths and weights with the +-2
extremes, inputs that saturate, and at the build's limits (every layer ``max_width``
wide, the weights at the weight memory's top, the shifts at their registers' tops);
VOTE equal to golden's votes, also at rows past 64; LAYER's cycles a row as documented;
the bus as the core drives it (``valid`` held through ``ready``), an access during an op
waiting for its end; no used read of a memory word written in the same cycle (the
memories carry no_rw_check)."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest

from pentegg.golden import Config
from pentegg.golden.digit import pack
from pentegg.golden.forward import population_forward
from pentegg.golden.model import make_noise
from pentegg.golden.prng import AB_A, AB_B, stream_state
from pentegg.golden.update import accumulate_z
from pentegg.rtl.compact.engine import OPS, REGS, SLOT_SHIFT, SLOTS, CompactEngine
from pentegg.sim.collisions import simulate_watched

SEED = int(os.environ.get("PENTEGG_SEED", "0")) or random.randrange(1 << 30)


class Bus:
    """The core's side of the bus: one request at a time, held until ``ready`` and through
    the cycle of ``ready`` (``valid`` is the core's register), the next one in the cycle
    after (rtl/cpu/rv32.py)."""

    def __init__(self, ctx, bus):
        self.ctx, self.bus = ctx, bus

    async def _access(self, word: int, write: bool, data: int = 0) -> int:
        ctx, b = self.ctx, self.bus
        ctx.set(b.addr, word)
        ctx.set(b.write, write)
        ctx.set(b.wdata, data & 0xFFFF_FFFF)
        ctx.set(b.wmask, 0b1111)
        ctx.set(b.valid, 1)
        while True:
            await ctx.tick()
            if ctx.get(b.ready):
                break
        value = ctx.get(b.rdata)
        await ctx.tick()  # the transfer's cycle ends with valid high
        ctx.set(b.valid, 0)
        return value

    async def write(self, sel: int, index: int, data: int):
        await self._access(sel << 24 | index, True, data)

    async def read(self, sel: int, index: int) -> int:
        return await self._access(sel << 24 | index, False)

    async def reg(self, name: str, value: int, offset: int = 0):
        await self.write(2, REGS[name] + offset, value)

    async def run(
        self, op: str, layer: int = 0, shared: bool = False, ab: int = 0, slot: int = 0
    ) -> int:
        await self.reg(
            "cmd", OPS[op] | ab << 3 | layer << 4 | int(shared) << 7 | slot << SLOT_SHIFT
        )
        cycles = 0
        while await self.read(2, REGS["cmd"]) & 1:
            cycles += 1
            assert cycles < 100_000, "the engine did not finish"
        return cycles


def _case(rng, rank, widths=(1, 2, 3, 5, 8, 11), sigma=(0, 3), act=(0, 5), population=8):
    n_layers = rng.choice([1, 2, 3])
    layers = tuple(rng.choice(widths) for _ in range(n_layers + 1))
    cfg = Config(
        layers=layers,
        population=population,
        rank=rank,
        sigma_shift=rng.randint(*sigma),
        seed=rng.randrange(1 << 32),
        act_shifts=tuple(rng.randint(*act) for _ in range(n_layers)),
    )
    weights = [
        np.array([[rng.choice([-2, -2, -1, 0, 1, 2, 2]) for _ in range(f)] for _ in range(o)])
        for o, f in (cfg.shape(l) for l in range(n_layers))
    ]
    return cfg, weights


async def _load_network(bus, cfg, weights, at=0):
    """The weights (from word ``at``) and the network's registers, as the firmware writes
    them."""
    words, bases = [], []
    for w in weights:
        bases.append(at + len(words))
        words += [int(v) for v in pack(w)]
    for i, v in enumerate(words):
        await bus.write(0, at + i, v)
    await bus.reg("n_layers", cfg.n_layers)
    await bus.reg("pert_shift", cfg.pert_shift())
    for i, w in enumerate(cfg.layers):
        await bus.reg("width", w, i)
    for l, s in enumerate(cfg.shifts()):
        await bus.reg("act_shift", s, l)
        await bus.reg("wbase", bases[l], l)


async def _pair_noise(bus, cfg, step, j):
    for l in range(cfg.n_layers):  # the firmware mixes the keys (spec 2.3)
        for ab in (AB_A, AB_B):
            await bus.reg("x0", int(stream_state(cfg.seed, step, j, l, ab)))
            await bus.run("noise", l, ab=ab)


async def _read_logits(bus, cfg):
    """Both members' logits from the last layer's bank."""
    bank = 1 + ((cfg.n_layers - 1) & 1)
    y = [await bus.read(1, 128 * bank + o) for o in range(cfg.layers[-1])]
    return [
        [(v & 0xFF) - ((v & 0x80) << 1) for v in y],
        [(v >> 8 & 0xFF) - ((v >> 8 & 0x80) << 1) for v in y],
    ]


def _byte(v):
    return int(v) & 0xFF


def _engine_forward(cfg, weights, step, pairs, xs, shared, max_width=11, at_top=False):
    """The engine's logits of members (2 j, 2 j + 1) of each pair ``j`` in ``pairs`` (run
    one after another) for inputs ``xs`` (two vectors; equal when shared); ``at_top``: the
    weights in the weight memory's last words."""
    # max_layers 8: the widest register map (every register at its own index)
    eng = CompactEngine(max_layers=8, max_width=max_width, rank=cfg.rank)
    n_words = sum(len(pack(w)) for w in weights)
    out = {}

    async def bench(ctx):
        bus = Bus(ctx, eng.bus)
        await _load_network(bus, cfg, weights, eng.wwords - n_words if at_top else 0)
        for k in range(cfg.layers[0]):
            await bus.write(1, k, _byte(xs[0][k]) | _byte(xs[1][k]) << 8)
        if shared:
            await bus.run("base")
        out["logits"] = {}
        for j in pairs:  # one after another, as the firmware runs them
            await _pair_noise(bus, cfg, step, j)
            if not shared:
                for k in range(cfg.layers[0]):
                    await bus.write(1, k, _byte(xs[0][k]) | _byte(xs[1][k]) << 8)
            for l in range(cfg.n_layers):
                await bus.run("layer", l, shared)
            out["logits"][j] = await _read_logits(bus, cfg)

    simulate_watched(eng, bench, lambda: eng.rw_watch)
    return out


def _check_pair_forward(rng, cfg, weights, shared, what, **engine):
    """Every pair's logits of one random input (the int8 extremes among them), for a
    shared sample or per-member inputs, equal golden's."""
    step = rng.randrange(65535)
    n_in = cfg.layers[0]
    extreme = [-127, 127]
    x0 = [rng.choice([*extreme, rng.randint(-127, 127)]) for _ in range(n_in)]
    x1 = x0 if shared else [rng.randint(-127, 127) for _ in range(n_in)]
    # golden: every member's logits for its input
    noise = make_noise(cfg, step)
    if shared:
        want = population_forward(cfg, weights, noise, np.array([x0]))[:, 0]
    else:
        x = np.zeros((cfg.population, 1, n_in), dtype=np.int64)
        x[0::2, 0], x[1::2, 0] = x0, x1
        want = population_forward(cfg, weights, noise, x)[:, 0]
    pairs = range(cfg.pairs)
    got = _engine_forward(cfg, weights, step, pairs, (x0, x1), shared, **engine)["logits"]
    for j in pairs:
        for member in range(2):
            g, w = np.array(got[j][member]), want[2 * j + member]
            bad = np.flatnonzero(g != w)
            assert not bad.size, (
                f"seed {SEED} {what} {cfg.layers} rank {cfg.rank} shared {shared}: member "
                f"{2 * j + member} logit {bad[0]}: golden {w[bad[0]]}, engine {g[bad[0]]}"
            )


@pytest.mark.parametrize("rank", [1, 4])
@pytest.mark.parametrize("shared", [True, False])
def test_one_pair_forward_equals_golden(rank, shared):
    rng = random.Random(SEED * 7 + rank * 2 + shared)
    for trial in range(8):
        cfg, weights = _case(rng, rank)
        _check_pair_forward(rng, cfg, weights, shared, f"trial {trial}")


@pytest.mark.parametrize("max_width", [8, 9])
@pytest.mark.parametrize("rank", [1, 4])
def test_one_pair_forward_at_the_builds_limits_equals_golden(max_width, rank):
    """Every layer as wide as the build (``max_width`` 8: a B stream's 9 rows fill the
    noise memory's power of two; 9: the base memory's rows past one), the weights in the
    weight memory's last words (``WBASE`` at its widest), the shifts at their registers'
    tops: a shared sample at sigma_shift 8 (``PERT_SHIFT`` 8 or 9), per-member inputs at
    ``ACT_SHIFT`` 8..15."""
    rng = random.Random(SEED * 13 + max_width * 2 + rank)
    for shared, sigma, act in ((True, (8, 8), (0, 5)), (False, (0, 3), (8, 15))):
        cfg, weights = _case(rng, rank, (max_width,), sigma, act, population=4)
        what = f"max_width {max_width} pert shift {cfg.pert_shift()} act shifts {cfg.shifts()}"
        _check_pair_forward(rng, cfg, weights, shared, what, max_width=max_width, at_top=True)


def test_an_access_during_an_op_waits_and_only_cmd_reads_busy():
    """While LAYER runs (its CMD written, busy not polled): the registers but CMD read 0,
    CMD reads busy, and a read of the activations waits for the op's end: the logits read
    at once are golden's."""
    rng = random.Random(SEED * 17)
    cfg, weights = _case(rng, 4, widths=(11,), population=2)
    step = rng.randrange(65535)
    x = [rng.randint(-127, 127) for _ in range(cfg.layers[0])]
    want = population_forward(cfg, weights, make_noise(cfg, step), np.array([x]))[:, 0]
    eng = CompactEngine(max_layers=8, max_width=11, rank=4)
    got = {}

    async def bench(ctx):
        bus = Bus(ctx, eng.bus)
        await _load_network(bus, cfg, weights)
        for k in range(cfg.layers[0]):
            await bus.write(1, k, _byte(x[k]) * 0x101)
        await _pair_noise(bus, cfg, step, 0)
        for l in range(cfg.n_layers - 1):
            await bus.run("layer", l)
        await bus.reg("cmd", OPS["layer"] | (cfg.n_layers - 1) << 4)
        for name in ("x0", "width"):
            got[name] = await bus.read(2, REGS[name])
        got["cmd"] = await bus.read(2, REGS["cmd"])
        got["logits"] = await _read_logits(bus, cfg)
        got["cmd after"] = await bus.read(2, REGS["cmd"])

    simulate_watched(eng, bench, lambda: eng.rw_watch)
    regs = {k: got[k] for k in ("x0", "width", "cmd", "cmd after")}
    assert regs == {"x0": 0, "width": 0, "cmd": 1, "cmd after": 0}, f"seed {SEED}: registers read"
    for member in range(2):
        g, w = np.array(got["logits"][member]), want[member]
        bad = np.flatnonzero(g != w)
        assert not bad.size, (
            f"seed {SEED} {cfg.layers}: member {member} logit {bad[0]} read during the op: "
            f"golden {w[bad[0]]}, engine {g[bad[0]]}"
        )


def _layer_cycles(rank: int, fan_in: int, n_out: int, shared: bool) -> int:
    """The cycles of one LAYER 0 op (``fan_in`` inputs, ``n_out`` rows; shared: from the
    base products) from its CMD write's answer until busy falls."""
    cfg = Config(layers=(fan_in, n_out), population=2, rank=rank, seed=1)
    eng = CompactEngine(max_layers=8, max_width=11, rank=rank)
    out = {}

    async def bench(ctx):
        bus = Bus(ctx, eng.bus)
        await _load_network(bus, cfg, [np.ones((n_out, fan_in + 1), dtype=np.int64)])
        await _pair_noise(bus, cfg, 0, 0)
        if shared:
            await bus.run("base")
        await bus.reg("cmd", OPS["layer"] | int(shared) << 7)
        out["cycles"] = 0
        while ctx.get(eng.busy) or not out["cycles"]:
            await ctx.tick()
            out["cycles"] += 1

    simulate_watched(eng, bench, lambda: eng.rw_watch)
    return out["cycles"]


@pytest.mark.parametrize("fan_in", [1, 5, 10])
def test_layer_rows_take_the_documented_cycles(fan_in):
    """LAYER's throughput at rank 4 (module docstring): a row of both members takes
    ``max(fan, 2r + 2)`` cycles (``fan`` for its two MACs, one weight read for both
    members; ``2r + 2`` at least for the finish of both), a shared layer 0's ``r + 3``:
    two more rows add that."""
    fan, r = fan_in + 1, 4
    for shared, want in ((False, max(fan, 2 * r + 2)), (True, r + 3)):
        a, b = (_layer_cycles(r, fan_in, n_out, shared) for n_out in (3, 5))
        assert (b - a) / 2 == want, (
            f"fan {fan} shared {shared}: {(b - a) / 2} cycles a row, documented {want}"
        )


def _engine_slots(cfg, weights, step, xs, order):
    """The engine's logits of every member for the shared samples ``xs`` (up to SLOTS),
    sample ``s`` in slot ``s``: their BASE ops in the slot order ``order``, then per pair
    its noise once and every layer for each slot in ``order``, as the firmware runs a
    group of samples."""
    eng = CompactEngine(max_layers=8, max_width=11, rank=cfg.rank)
    out = {}

    async def bench(ctx):
        bus = Bus(ctx, eng.bus)
        await _load_network(bus, cfg, weights)
        x = [xs[s] if s < len(xs) else [0] * cfg.layers[0] for s in range(SLOTS)]
        for k in range(cfg.layers[0]):
            await bus.write(1, k, _byte(x[0][k]) | _byte(x[2][k]) << 8)
            await bus.write(1, 384 + k, _byte(x[1][k]) | _byte(x[3][k]) << 8)
        for s in order:
            await bus.run("base", slot=s)
        for j in range(cfg.pairs):
            await _pair_noise(bus, cfg, step, j)
            for s in order:
                for l in range(cfg.n_layers):
                    await bus.run("layer", l, True, slot=s)
                out[j, s] = await _read_logits(bus, cfg)

    simulate_watched(eng, bench, lambda: eng.rw_watch)
    return out


@pytest.mark.parametrize("rank", [1, 4])
def test_shared_samples_in_their_slots_equal_golden(rank):
    """Up to four shared samples at once (banks 0 and 3, low and high bytes; the base
    memory's slots), their ops in any slot order: each sample's logits are golden's."""
    rng = random.Random(SEED * 11 + rank)
    for trial in range(4):
        cfg, weights = _case(rng, rank)
        step = rng.randrange(65535)
        n_in = cfg.layers[0]
        n = rng.choice([2, 3, 4])
        xs = [
            [rng.choice([-127, 127, rng.randint(-127, 127)]) for _ in range(n_in)] for _ in range(n)
        ]
        order = rng.sample(range(n), n)
        want = population_forward(cfg, weights, make_noise(cfg, step), np.array(xs))
        got = _engine_slots(cfg, weights, step, xs, order)
        for (j, s), members in got.items():
            for member in range(2):
                g, w = np.array(members[member]), want[2 * j + member, s]
                bad = np.flatnonzero(g != w)
                assert not bad.size, (
                    f"seed {SEED} trial {trial} {cfg.layers} rank {rank} slots {order}: "
                    f"sample {s} member {2 * j + member} logit {bad[0]}: golden "
                    f"{w[bad[0]]}, engine {g[bad[0]]}"
                )


def _engine_votes(cfg, step, g, layer, blocks, max_width=11):
    """The engine's votes ``Z`` of ``layer`` for each block ``(z_row, z_rows)``: per pair
    its noise (NOISE A, B), then VOTE (the first pair's writes), then the block read."""
    eng = CompactEngine(
        max_layers=3, max_width=max_width, rank=cfg.rank, max_population=cfg.population
    )
    fan = cfg.layers[layer] + 1
    out = {}

    async def bench(ctx):
        bus = Bus(ctx, eng.bus)
        await bus.reg("n_layers", cfg.n_layers)
        for i, w in enumerate(cfg.layers):
            await bus.reg("width", w, i)
        for z_row, z_rows in blocks:
            await bus.reg("z_row", z_row)
            await bus.reg("z_rows", z_rows)
            for j in range(cfg.pairs):
                for ab in (AB_A, AB_B):
                    await bus.reg("x0", int(stream_state(cfg.seed, step, j, layer, ab)))
                    await bus.run("noise", layer, ab=ab)
                await bus.reg("g", int(g[j]))
                await bus.run("vote", layer, shared=j == 0)  # bit 7: the first pair's
            words = [await bus.read(3, i) for i in range(z_rows * fan)]
            z = [w - (1 << 32) if w >> 31 else w for w in words]
            out[z_row] = np.array(z).reshape(z_rows, fan)

    simulate_watched(eng, bench, lambda: eng.rw_watch)
    return out


def _check_votes(want, got, blocks, what):
    """Each block's Z rows from the engine equal golden's; else the first differing
    element with both values."""
    for z_row, z_rows in blocks:
        w, e = want[z_row : z_row + z_rows], got[z_row]
        bad = np.argwhere(w != e)
        if bad.size:
            o, k = bad[0]
            raise AssertionError(
                f"seed {SEED} {what}: Z[{z_row + o}, {k}]: golden {w[o, k]}, engine {e[o, k]}"
            )


@pytest.mark.parametrize("rank", [1, 4])
def test_vote_equals_golden_z(rank):
    """VOTE: the votes ``Z = sum_j g_j A_j B_j^T`` (spec 8.1) of a layer, in blocks of
    rows, equal golden's ``accumulate_z``, with ``g`` at its extremes ``+-2 (N - 1)``, 0
    and between."""
    rng = random.Random(SEED * 11 + rank)
    for trial in range(4):
        cfg, _ = _case(rng, rank)
        step = rng.randrange(65535)
        g_max = 2 * (cfg.population - 1)
        g = np.array([rng.choice([-g_max, g_max, 0, rng.randint(-g_max, g_max)])
                      for _ in range(cfg.pairs)])  # fmt: skip
        layer = rng.randrange(cfg.n_layers)
        want = accumulate_z(cfg, make_noise(cfg, step), g, layer)
        n_out = cfg.layers[layer + 1]
        split = rng.randint(1, n_out)  # two blocks (or one)
        blocks = [(0, split)] + ([(split, n_out - split)] if split < n_out else [])
        got = _engine_votes(cfg, step, g, layer, blocks)
        what = f"trial {trial} {cfg.layers} rank {rank} layer {layer}"
        _check_votes(want, got, blocks, what)


def test_vote_of_rows_past_64_equals_golden_z():
    """VOTE's blocks at the widest layer's last rows (``Z_ROW`` up to 126, its register's
    top bit set; ``max_width`` 127) equal golden's ``accumulate_z``."""
    rng = random.Random(SEED * 19)
    cfg = Config(layers=(3, 127), population=4, seed=rng.randrange(1 << 32))
    step = rng.randrange(65535)
    g = np.array([6, -5])
    want = accumulate_z(cfg, make_noise(cfg, step), g, 0)
    blocks = [(63, 3), (100, 27)]
    got = _engine_votes(cfg, step, g, 0, blocks, max_width=127)
    _check_votes(want, got, blocks, f"{cfg.layers}")


def _activation_cases(acc_bits: int, rng: random.Random) -> list[tuple[int, int, bool]]:
    """(y, shift, last): for every shift, y around each bound of the result (-127, 0,
    127) at the rounding's ties, and random y over the accumulator's range."""
    cases = []
    lim = 1 << (acc_bits - 2)
    for s in range(16):
        half = (1 << s) >> 1
        for k in (-129, -128, -127, -126, -1, 0, 1, 126, 127, 128, 129):
            for d in {-half - 1, -half, -half + 1, -1, 0, 1, half - 1, half, half + 1}:
                y = (k << s) + d
                if -lim <= y < lim:
                    cases += [(y, s, False), (y, s, True)]
        cases += [(rng.randrange(-lim, lim), s, rng.random() < 0.5) for _ in range(40)]
    return cases


def test_activation_tail_equals_golden_activate_at_every_bound():
    """The tail's T4..T6 (``activation_tail``: the saturation's compares on the value
    before the last rounding) equal golden's spec 5.3 activation for every shift 0..15,
    hidden and last layers, at the saturation bounds and the rounding's ties."""
    from amaranth import Module, Signal, signed
    from amaranth.sim import Simulator

    from pentegg.golden.forward import activate
    from pentegg.rtl.compact.engine import activation_tail

    acc_bits = CompactEngine().acc_bits
    cases = _activation_cases(acc_bits, random.Random(SEED))
    m = Module()
    y, shift, last = Signal(signed(acc_bits)), Signal(4), Signal()
    h = activation_tail(m, y, shift, last)
    got = []

    async def bench(ctx):
        for v, s, lst in cases:  # one value at a time: shift and last held through T6
            ctx.set(y, v)
            ctx.set(shift, s)
            ctx.set(last, lst)
            await ctx.tick().repeat(3)
            got.append(ctx.get(h) - 256 * (ctx.get(h) >> 7))

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    for (v, s, lst), g in zip(cases, got, strict=True):
        want = int(activate(np.array([v]), s, lst)[0])
        assert g == want, f"SEED={SEED}: y={v} shift={s} last={lst}: got {g}, golden {want}"
