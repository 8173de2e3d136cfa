# amaranth: UnusedElaboratable=no
"""StreamKeyer (spec 2.2, 2.3) and the LowRankGenerator lane driven by start states.

The keyed blocks (PentaryPRNG, KeyedLowRankGenerator) are checked against golden in
tests/test_rtl_prng.py and tests/test_rtl_lrgen.py; here the keyer's and the lane's own
stream interfaces, with gaps and back-pressure, in the Amaranth simulator.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.golden import lrgen, lrmul, rank_shift, stream_state
from pentegg.rtl.noise.keyer import KEYERS, StreamKeyer
from pentegg.rtl.noise.lrgen import LowRankGenerator
from pentegg.sim import harness
from pentegg.sim.scoreboard import Scoreboard, lrgen_expected


@pytest.mark.parametrize("keyer", KEYERS)
def test_keyer_answers_equal_golden(keyer):
    """Random requests, some with reseed (new seed), random gaps, random x0.ready."""
    rng = np.random.default_rng(harness.pick_seed(f"keyer {keyer}"))
    dut = StreamKeyer(keyer=keyer)
    reqs = []
    seed = int(rng.integers(1 << 32))
    for j in range(24 if keyer == "parallel" else 12):
        reseed = j == 0 or rng.random() < 0.25
        if reseed:
            seed = int(rng.integers(1 << 32))
        key = (int(rng.integers(1 << 16)), int(rng.integers(1 << 11)), int(rng.integers(8)))
        reqs.append((seed, *key, int(rng.integers(2)), int(reseed)))
    got, cycles = [], []

    async def bench(ctx):
        pending = list(reqs)
        n = since = 0
        offered = False  # a request once valid stays valid until taken
        while len(got) < len(reqs):
            if pending and (offered or rng.random() < 0.3):
                offered = True
                seed, step, pair, layer, ab, reseed = pending[0]
                ctx.set(dut.seed, seed)
                ctx.set(
                    dut.k.payload,
                    {"ab": ab, "layer": layer, "pair": pair, "step": step, "reseed": reseed},
                )
                ctx.set(dut.k.valid, 1)
            else:
                ctx.set(dut.k.valid, 0)
            ready = bool(rng.random() < 0.6)
            ctx.set(dut.x0.ready, ready)
            if ctx.get(dut.k.valid) and ctx.get(dut.k.ready):
                pending.pop(0)
                offered = False
            if ready and ctx.get(dut.x0.valid):
                got.append(ctx.get(dut.x0.payload))
                cycles.append(n - since)
                since = n
            await ctx.tick()
            n += 1
            assert n < (100 if keyer == "parallel" else 3000) * len(reqs)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    ref = [int(stream_state(s, st, p, l, ab)) for s, st, p, l, ab, _ in reqs]
    Scoreboard("keyer").check("x0", np.array(ref), np.array(got))


@pytest.mark.parametrize("keyer, latency", [("parallel", [28, 14]), ("serial", [1665, 833])])
def test_keyer_latency(keyer, latency):
    """x0 valid 28 cycles after a reseed request is first seen, 14 without (parallel);
    1665 and 833 (serial)."""
    dut = StreamKeyer(keyer=keyer)
    seen = []

    async def bench(ctx):
        ctx.set(dut.x0.ready, 1)
        for reseed in (1, 0):
            ctx.set(dut.k.payload, {"ab": 1, "layer": 1, "pair": 5, "step": 3, "reseed": reseed})
            ctx.set(dut.k.valid, 1)
            n = 0
            while not ctx.get(dut.x0.valid):
                if ctx.get(dut.k.ready):
                    ctx.set(dut.k.valid, 0)
                await ctx.tick()
                n += 1
            assert ctx.get(dut.x0.payload) == 0x96282E7B  # spec 2.3's example
            seen.append(n)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == latency


@pytest.mark.parametrize("keyer", KEYERS)
def test_keyer_cancel_drops_an_answer_already_waiting(keyer):
    """A reseed request answered and left waiting (``x0.ready`` low), then a cancel with
    another request valid in the same cycle: the waiting answer is gone, the only answer
    is the new request's (under the seed the cancelled reseed had loaded)."""
    dut = StreamKeyer(keyer=keyer)
    seed = 0x1234_5678
    first = {"ab": 0, "layer": 1, "pair": 2, "step": 3, "reseed": 1}
    second = {"ab": 1, "layer": 4, "pair": 5, "step": 6, "reseed": 0}
    seen = []

    async def bench(ctx):
        ctx.set(dut.seed, seed)
        ctx.set(dut.x0.ready, 0)
        ctx.set(dut.k.payload, first)
        ctx.set(dut.k.valid, 1)
        await ctx.tick().until(dut.k.ready)
        ctx.set(dut.k.valid, 0)
        await ctx.tick().until(dut.x0.valid)
        await ctx.tick().repeat(3)  # the answer waits
        ctx.set(dut.cancel, 1)
        ctx.set(dut.k.payload, second)
        ctx.set(dut.k.valid, 1)
        await ctx.tick()
        ctx.set(dut.cancel, 0)
        ctx.set(dut.x0.ready, 1)
        for _ in range(3000):
            if ctx.get(dut.k.ready):
                ctx.set(dut.k.valid, 0)
            if ctx.get(dut.x0.valid):
                seen.append(ctx.get(dut.x0.payload))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen == [int(stream_state(seed, 6, 5, 4, 1))], [hex(v) for v in seen]


@pytest.mark.parametrize("keyer", KEYERS)
def test_keyer_cancel(keyer):
    """Random cancels (during the run key, the stream key, or with an answer waiting), each
    with a new request valid in the same cycle: the answers are those of the requests not
    cancelled, in order; a request after a cancelled reseed reseeds too. The last two requests
    are never cancelled, so that answers survive whatever the seed."""
    rng = np.random.default_rng(harness.pick_seed(f"keyer cancel {keyer}"))
    dut = StreamKeyer(keyer=keyer)
    span = 30 if keyer == "parallel" else 1700  # cycles: cancel anywhere in a request
    # requests 2 and 4 are always cancelled while they are worked on: before the shortest
    # request can have been answered (15 cycles parallel, 834 serial)
    early = 12 if keyer == "parallel" else 800
    n_req = 16
    survivors = 2  # the last requests, never cancelled (a random cancel may hit all others)
    state = {"seed": int(rng.integers(1 << 32)), "reseed": True}

    def new_request():
        if rng.random() < 0.3:
            state["seed"] = int(rng.integers(1 << 32))
            state["reseed"] = True
        key = (int(rng.integers(1 << 16)), int(rng.integers(1 << 11)), int(rng.integers(8)))
        req = (state["seed"], *key, int(rng.integers(2)), int(state["reseed"]))
        state["reseed"] = False
        return req

    want, got = [], []

    async def bench(ctx):
        outstanding = []  # requests accepted, not yet answered
        offer = None
        issued = cancels = n = 0
        cancel_at = -1  # the cycle of the next cancel (some requests get one)
        while issued < n_req or offer or outstanding:
            cancel = n == cancel_at and bool(offer or outstanding)
            if cancel:
                cancels += 1
                if any(r[-1] for r in [*outstanding, *([offer] if offer else [])]):
                    state["reseed"] = True
                outstanding.clear()
                offer = None
            if offer is None and issued < n_req and (cancel or rng.random() < 0.05):
                offer = new_request()
                issued += 1
                if issued in (2, 4):
                    cancel_at = n + 1 + int(rng.integers(early))
                elif issued > n_req - survivors:
                    cancel_at = -1  # the last requests are never cancelled: answers survive
                elif rng.random() < 0.3:
                    cancel_at = n + 1 + int(rng.integers(span))
            ctx.set(dut.cancel, cancel)
            ctx.set(dut.k.valid, offer is not None)
            if offer is not None:
                seed, step, pair, layer, ab, reseed = offer
                ctx.set(dut.seed, seed)
                ctx.set(
                    dut.k.payload,
                    {"ab": ab, "layer": layer, "pair": pair, "step": step, "reseed": reseed},
                )
            ready = not cancel and bool(rng.random() < 0.5)  # (a cancelled answer is gone)
            ctx.set(dut.x0.ready, ready)
            if offer is not None and ctx.get(dut.k.ready):
                outstanding.append(offer)
                offer = None
            if ready and ctx.get(dut.x0.valid):
                assert outstanding, "an answer without a request"
                want.append(outstanding.pop(0))
                got.append(ctx.get(dut.x0.payload))
            await ctx.tick()
            n += 1
            assert n < 4 * span * n_req
        ctx.set(dut.cancel, 0)
        assert cancels >= 2, cancels

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert len(got) >= survivors
    ref = [int(stream_state(s, st, p, l, ab)) for s, st, p, l, ab, _ in want]
    Scoreboard(f"keyer cancel {keyer}").check("x0", np.array(ref), np.array(got))


def test_lane_takes_a_jobs_b_state_only_while_not_busy():
    """Two jobs' start states offered back to back (B, A, B, A) under back-pressure on e:
    each job's B state is taken while ``busy`` is low (the job's run-time inputs are read
    from then on), its A state while the job runs; both jobs' E equal golden's."""
    rank, out, fan, sigma = 4, 2, 3, 1
    key = (11, 3, 5, 2)
    dut = LowRankGenerator(rank=rank, max_fan=13, max_out=5)
    taken, es = [], []

    async def bench(ctx):
        ctx.set(dut.out, out)
        ctx.set(dut.fan, fan)
        ctx.set(dut.sigma_shift, sigma)
        ctx.set(dut.mode, 0)
        states = [int(stream_state(*key, 1)), int(stream_state(*key, 0))] * 2
        for n in range(400):
            ready = n % 7 != 0
            if len(es) == out * fan - 1 and len(taken) == 2:  # the first job's last E waits
                ready = n % 50 >= 30
            ctx.set(dut.e.ready, ready)
            ctx.set(dut.x0.valid, bool(states))
            if states:
                ctx.set(dut.x0.payload, states[0])
                if ctx.get(dut.x0.ready):
                    taken.append(ctx.get(dut.busy))
                    states.pop(0)
            if ctx.get(dut.e.valid) and ready:
                es.append(int(ctx.get(dut.e.payload).e))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert taken[0::2] == [0, 0], f"busy when each state was taken (B, A, B, A): {taken}"
    e = lrgen_expected(
        {
            "seed": key[0],
            "step": key[1],
            "pair": key[2],
            "layer": key[3],
            "out": out,
            "fan": fan,
            "sigma_shift": sigma,
        },
        rank,
    )[2]
    Scoreboard("lrgen lane, two jobs back to back").check("E", [*e.reshape(-1)] * 2, es)


def test_lane_from_start_states():
    """The lane alone: B and A start states offered with gaps, random back-pressure on
    e, a and b; both modes against golden, odd shapes, ranks 1, 4, 16."""
    rng = np.random.default_rng(harness.pick_seed("lrgen lane"))
    board = Scoreboard("lrgen lane")
    expected = 0  # values compared: E and A.B^T (out * fan each), A and B (rank * dims)
    for rank in (1, 4, 16):
        dut = LowRankGenerator(rank=rank, max_fan=13, max_out=5)
        jobs = []
        for _ in range(3):
            key = (
                int(rng.integers(1 << 32)),
                int(rng.integers(1 << 16)),
                int(rng.integers(1 << 11)),
                int(rng.integers(8)),
            )
            shape = (int(rng.integers(1, 6)), int(rng.integers(1, 14)))
            jobs.append((key, shape, int(rng.integers(9))))
            expected += 2 * shape[0] * shape[1] + rank * (shape[0] + shape[1])
        results = []

        async def bench(ctx, dut=dut, jobs=jobs, results=results):
            for key, (out, fan), sigma in jobs:
                for mode in (0, 1):
                    ctx.set(dut.out, out)
                    ctx.set(dut.fan, fan)
                    ctx.set(dut.sigma_shift, sigma)
                    ctx.set(dut.mode, mode)
                    states = [int(stream_state(*key, 1)), int(stream_state(*key, 0))]
                    got = {"e": [], "a": [], "b": []}
                    n = 0
                    offer = False  # once valid, a state stays valid until taken
                    while states or ctx.get(dut.busy) or n < 3:
                        offer = bool(states) and (offer or rng.random() < 0.5)
                        ctx.set(dut.x0.valid, offer)
                        if offer:
                            ctx.set(dut.x0.payload, states[0])
                        for s in ("e", "a", "b"):
                            ctx.set(getattr(dut, s).ready, bool(rng.random() < 0.6))
                        if offer and ctx.get(dut.x0.ready):
                            states.pop(0)
                            offer = False
                        for s in ("e", "a", "b"):
                            st = getattr(dut, s)
                            if ctx.get(st.valid) and ctx.get(st.ready):
                                p = ctx.get(st.payload)
                                got[s].append(
                                    (int(p.e), int(p.dot)) if s == "e" else [int(d) for d in p]
                                )
                        await ctx.tick()
                        n += 1
                        assert n < 5000
                    ctx.set(dut.x0.valid, 0)
                    results.append((key, (out, fan), sigma, mode, got))

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        sim.add_testbench(bench)
        sim.run()
        assert len(results) == 2 * len(jobs)
        for key, (out, fan), sigma, mode, got in results:
            a, b = lrgen(*key[:2], key[2] + 1, key[3], out, fan, rank, "binomial")
            a, b = a[key[2]], b[key[2]]
            tag = f"rank {rank} key {key} shape {(out, fan)} sigma {sigma}"
            if mode == 0:
                e = lrmul(a, b, rank_shift(rank) + sigma)
                board.check(f"E ({tag})", e.reshape(-1), [v[0] for v in got["e"]])
                dot = (a.astype(int) @ b.T.astype(int)).reshape(-1)
                board.check(f"A.B^T ({tag})", dot, [v[1] for v in got["e"]])
                assert not got["a"] and not got["b"]
            else:
                board.check(f"A ({tag})", a, np.array(got["a"]).reshape(-1, rank))
                board.check(f"B ({tag})", b, np.array(got["b"]).reshape(-1, rank))
                assert not got["e"]
    assert sum(board.checked.values()) == expected, (board.checked, expected)
