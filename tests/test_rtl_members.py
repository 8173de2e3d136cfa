"""The per-member path's blocks (rtl/control/members.py) in the Amaranth simulator: the fit
check and strides, the reader (member_x into the InputLoader's word order) and the
writer (logits beats into (member, sample, output) addresses)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.golden import Config
from pentegg.rtl.control.members import LogitWriter, MemberReader, MemberSizes
from pentegg.rtl.evaluator.evaluator import out_logits_layout
from pentegg.rtl.evaluator.params import EvaluatorParams
from pentegg.sim import harness
from pentegg.sim.evaluator_bench import EvalJob


def _sizes(dut: MemberSizes, jobs):
    """(fits, in_stride, out_stride, cycles) of each ``(population, batch, n_in, n_out)``."""
    out = []

    async def bench(ctx):
        for pop, batch, n_in, n_out in jobs:
            ctx.set(dut.population, pop)
            ctx.set(dut.batch, batch)
            ctx.set(dut.n_in, n_in)
            ctx.set(dut.n_out, n_out)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            # the controller reads busy the cycle after its start
            assert ctx.get(dut.busy), "busy low the cycle after start"
            cycles = 0
            while True:
                await ctx.tick()
                cycles += 1
                if not ctx.get(dut.busy):
                    break
                assert cycles < 100
            out.append((ctx.get(dut.fits), ctx.get(dut.in_stride), ctx.get(dut.out_stride), cycles))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def test_sizes_give_strides_and_refuse_a_run_one_byte_over_either_depth():
    dut = MemberSizes(in_depth=4096, out_depth=1000, width_bits=14)
    jobs = [
        (16, 1, 4, 2),  # cartpole: fits
        (16, 16, 16, 2),  # 4096 input bytes exactly: fits
        (16, 16, 16, 4),  # 1024 logit bytes: over 1000
        (2, 1, 1, 1),
        (4096, 65535, 8191, 8191),  # the widest registers: no overflow
        (34, 3, 40, 5),  # 4080 input bytes, 510 logit bytes: fits
        (34, 3, 41, 5),  # 4182 input bytes: over
    ]
    # and random ones, zeros and the widest values among them, run back to back
    rng = random.Random(harness.pick_seed("member sizes"))

    def pick(bits):
        return rng.choice([0, 1, (1 << bits) - 1, rng.getrandbits(bits)])

    jobs += [(pick(12), pick(16), pick(13), pick(13)) for _ in range(60)]
    got = _sizes(dut, jobs)
    for (pop, batch, n_in, n_out), (fits, si, so, cycles) in zip(jobs, got, strict=True):
        want = pop * batch * n_in <= 4096 and pop * batch * n_out <= 1000
        assert (fits, si, so) == (int(want), batch * n_in, batch * n_out), (pop, batch, n_in)
        assert cycles <= 32


def _mem_process(dut_en, dut_addr, dut_data, image, lat):
    """A read port with ``lat`` cycles of latency over the list ``image``."""

    async def proc(ctx):
        pipe = [None] * lat
        async for _, _, e, a in ctx.tick().sample(dut_en, dut_addr):
            pipe = [int(a) if e else None, *pipe[:-1]]
            if pipe[-1] is not None:
                ctx.set(dut_data, image[pipe[-1]])

    return proc


def _read_words(lanes, lat, jobs, rng, abort=None):
    """Run the reader on each ``(population, batch, x)`` of ``jobs`` back to back on one
    instance (random back-pressure on ``inp``); returns the words of each and the
    addresses it read. ``abort[i]``: job ``i``'s run is cut after that many cycles by the
    next job's start."""
    dut = MemberReader(lanes=lanes, addr_bits=12, width_bits=8, mem_latency=lat)
    image = [0] * (1 << 12)
    got, reads = [], []

    async def bench(ctx):
        for i, (pop, batch, x) in enumerate(jobs):
            cut = abort[i] if abort else None
            flat = [int(v) & 0xFF for v in np.asarray(x).reshape(-1)]
            image[: len(flat)] = flat
            image[len(flat) :] = [0xEE] * (len(image) - len(flat))  # never read
            n0 = x.shape[2]
            ctx.set(dut.population, pop)
            ctx.set(dut.batch, batch)
            ctx.set(dut.n_in, n0)
            ctx.set(dut.stride, batch * n0)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            words, addrs, cycles = [], [], 0
            while True:
                ready = int(rng.random() < 0.7)
                ctx.set(dut.inp.ready, ready)
                _, _, v, pl, busy, en, a = await ctx.tick().sample(
                    dut.inp.valid, dut.inp.payload, dut.busy, dut.r_en, dut.r_addr
                )
                if v and ready:
                    words.append(int(pl))
                if en:
                    addrs.append(int(a))
                cycles += 1
                if not busy or cycles == cut:
                    break
                assert cycles < 100_000, "the reader stalled"
            got.append(words)
            reads.append(addrs)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(_mem_process(dut.r_en, dut.r_addr, dut.r_data, image, lat))
    sim.add_testbench(bench)
    sim.run()
    return got, reads


@pytest.mark.parametrize("lanes, lat", [(1, 1), (2, 2), (3, 3), (4, 2), (72, 1)])
def test_reader_streams_member_x_in_the_input_loaders_word_order(lanes, lat):
    """Batches above 1, populations not a multiple of 2 lanes (pairs past the population
    give zero bytes and are never read), back-to-back runs on one instance."""
    rng = np.random.default_rng(harness.pick_seed(f"member reader {lanes} {lat}"))
    shapes = [(2 * lanes + 2, 3, 5), (2, 1, 1), (4 * lanes, 2, 3), (2 * lanes - 2 or 6, 4, 2)]
    jobs, want = [], []
    for pop, batch, n0 in shapes:
        x = rng.integers(-128, 128, size=(pop, batch, n0))
        x[0, 0, 0] = -128
        jobs.append((pop, batch, x))
        cfg = Config(layers=(n0, 2), population=pop).validate()
        want.append(EvalJob(cfg, [], 0, member_x=x).input_words(lanes))
    got, reads = _read_words(lanes, lat, jobs, rng)
    for (pop, batch, x), w, g, r in zip(jobs, want, got, reads, strict=True):
        assert g == w, f"population {pop} batch {batch} n0 {x.shape[2]}"
        assert sorted(r) == list(range(x.size)), "each byte read once, nothing past them"


@pytest.mark.parametrize("lanes, lat", [(3, 2), (20, 3)])
def test_reader_restarted_mid_run_streams_the_new_run(lanes, lat):
    """A start while a run's bytes are still landing (cut at every phase of a word:
    issuing, waiting, offering) begins the new run; its words are exact (nothing of the
    old run's landing bytes reaches them)."""
    rng = np.random.default_rng(harness.pick_seed(f"member reader restart {lanes} {lat}"))
    jobs, want, cuts = [], [], []
    for cut in range(lanes + 1, 3 * (lanes + lat + 2), 3):
        for pop, batch, n0, c in ((2 * lanes, 2, 3, cut), (2 * lanes + 2, 1, 2, None)):
            x = rng.integers(-128, 128, size=(pop, batch, n0))
            jobs.append((pop, batch, x))
            cfg = Config(layers=(n0, 2), population=pop).validate()
            want.append(EvalJob(cfg, [], 0, member_x=x).input_words(lanes))
            cuts.append(c)
    got, _ = _read_words(lanes, lat, jobs, rng, abort=cuts)
    for i, (w, g, c) in enumerate(zip(want, got, cuts, strict=True)):
        if c is None:
            assert g == w, f"the run after the one cut at cycle {cuts[i - 1]}"


def _beats(logits, p: EvaluatorParams, rng):
    """The evaluator's ``logits`` beats for ``logits`` (population, batch, n_L): per round,
    the rows of every (lane i, sign s) in (sample, row) order, the (i, s) interleaved at
    random; lanes past the population masked (their y random)."""
    pop, batch, n_l = logits.shape
    pairs, L, G, F = pop // 2, p.lanes, p.group_lanes, p.finalizers
    beats = []
    for fp in range(0, pairs, L):
        active = min(L, pairs - fp)
        queues = []
        for i in range(G):
            for s in (0, 1):
                q = []
                for b in range(batch):
                    for row in range(n_l):
                        lanes = [g * G + i for g in range(F)]
                        mask = [int(lane < active) for lane in lanes]
                        y = [
                            int(logits[2 * (fp + lane) + s, b, row])
                            if ok
                            else int(rng.integers(-128, 128))
                            for lane, ok in zip(lanes, mask, strict=True)
                        ]
                        q.append(
                            {"first_pair": fp, "i": i, "s": s, "row": row, "y": y, "mask": mask}
                        )
                if any(q[0]["mask"]) or rng.random() < 0.5:  # idle lanes may or may not emit
                    queues.append(q)
        while queues:
            q = queues[int(rng.integers(len(queues)))]
            beats.append(q.pop(0))
            queues = [q for q in queues if q]
    return beats


def _write_logits(p: EvaluatorParams, jobs, rng):
    """Run the writer on each ``(logits, beats)`` of ``jobs`` back to back; returns the
    writes ``{addr: value}`` of each (a repeated address fails)."""
    dut = LogitWriter(p, addr_bits=11)
    layout = out_logits_layout(p)
    got = []

    async def bench(ctx):
        for logits, beats in jobs:
            _, batch, n_l = logits.shape
            ctx.set(dut.stride, batch * n_l)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            writes = {}
            pending = list(beats)
            cycles = 0
            while pending or ctx.get(dut.busy):
                if pending and not ctx.get(dut.logits.valid) and rng.random() < 0.3:
                    pass  # a gap between beats
                elif pending:
                    bt = pending[0]
                    ctx.set(
                        dut.logits.payload,
                        layout.const(
                            {
                                **bt,
                                "y": [v & 0xFF for v in bt["y"]],
                                "mask": sum(m << g for g, m in enumerate(bt["mask"])),
                            }
                        ),
                    )
                    ctx.set(dut.logits.valid, 1)
                _, _, v, r, en, a, d = await ctx.tick().sample(
                    dut.logits.valid, dut.logits.ready, dut.w_en, dut.w_addr, dut.w_data
                )
                if v and r:
                    pending.pop(0)
                    ctx.set(dut.logits.valid, 0)
                if en:
                    assert int(a) not in writes, f"address {int(a)} written twice"
                    writes[int(a)] = int(d) - (256 if int(d) >= 128 else 0)
                cycles += 1
                assert cycles < 100_000, "the writer stalled"
            got.append(writes)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return got


@pytest.mark.parametrize(
    "lanes, group",
    [(1, None), (2, None), (3, None), (3, 1), (4, 2), (5, 2)],
    ids=lambda v: str(v),
)
def test_writer_puts_each_logit_at_member_sample_output_address(lanes, group):
    """Batches above 1, populations not a multiple of 2 lanes (masked lanes write
    nothing), several finalizer groups, rounds, back-to-back runs on one instance."""
    rng = np.random.default_rng(harness.pick_seed(f"logit writer {lanes} {group}"))
    p = EvaluatorParams(lanes=lanes, max_layers=2, max_width=16, group=group).check()
    jobs = []
    for pop, batch, n_l in [(2 * lanes + 2, 3, 2), (2, 1, 1), (4 * lanes, 2, 3), (6, 4, 5)]:
        logits = rng.integers(-128, 128, size=(pop, batch, n_l))
        jobs.append((logits, _beats(logits, p, rng)))
    got = _write_logits(p, jobs, rng)
    for (logits, _), writes in zip(jobs, got, strict=True):
        want = {a: int(v) for a, v in enumerate(logits.reshape(-1))}
        assert writes == want, f"logits {logits.shape}"
