# amaranth: UnusedElaboratable=no
"""The Accelerator trains: whole ES steps in the Amaranth simulator, every step's weights,
latent integers and member scores equal to golden's (small networks; the cocotb tests
run the larger ones); its per-member path (member_x in, logits out) equals golden's
forward pass."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from amaranth import ClockDomain, Module
from amaranth.sim import Simulator

from pentegg import accel_protocol as ap
from pentegg.golden import Config, init_state, make_noise, population_forward
from pentegg.golden.digit import pack
from pentegg.rtl.accelerator import PACKED_MEMORIES, Accelerator
from pentegg.sim import harness
from pentegg.sim.accelerator_host import golden_steps, load_words, random_job
from pentegg.sim.collisions import simulate_watched
from pentegg.sim.evaluator_bench import evaluator_watches
from pentegg.sim.scoreboard import Scoreboard


def sender(ctx, dut: Accelerator):
    """``await send(words, n)``: send command words to ``dut`` and return the ``n``
    response words."""

    async def send(words, n_rsp=0):
        got = []
        ctx.set(dut.rsp.ready, 1)
        for w in words:
            ctx.set(dut.cmd.valid, 1)
            ctx.set(dut.cmd.payload, w)
            while True:
                _, _, rdy, rv, rp = await ctx.tick().sample(
                    dut.cmd.ready, dut.rsp.valid, dut.rsp.payload
                )
                if rv:
                    got.append(int(rp))
                if rdy:
                    break
        ctx.set(dut.cmd.valid, 0)
        waited = 0
        while len(got) < n_rsp:
            _, _, rv, rp = await ctx.tick().sample(dut.rsp.valid, dut.rsp.payload)
            if rv:
                got.append(int(rp))
            waited += 1
            assert waited < 10_000, "no response"
        return got

    return send


def run_on(dut: Accelerator, script, processes=()):
    """Run ``script(send)`` (``send`` from :func:`sender`), then check that no read of the
    accelerator's, the evaluator's and the vote accumulator's no_rw_check memories used a
    word written in its cycle."""

    async def bench(ctx):
        await script(sender(ctx, dut))

    ev = evaluator_watches(dut.evaluator)
    simulate_watched(
        dut, bench, lambda: [*ev(), *dut.votes.rw_watch, *dut.rw_watch], processes=processes
    )


def layer_widths_at_starts(dut: Accelerator, seen: list):
    """A process that appends ``(block, layer, out, fan)`` whenever the vote accumulator
    or the updater gets its start strobe (the widths it is given then)."""
    vo, up = dut.votes, dut.updater

    async def proc(ctx):
        sigs = (vo.start, vo.layer, vo.out, vo.fan, up.start, up.out, up.fan)
        async for _, _, vs, layer, vout, vfan, us, uout, ufan in ctx.tick().sample(*sigs):
            if vs:
                seen.append(("votes", layer, vout, vfan))
            if us:
                seen.append(("updater", layer, uout, ufan))

    return proc


async def wait_idle(send, max_layers, limit=2_000_000):
    for _ in range(limit):
        (status,) = await send(ap.reg_read("status", max_layers), 1)
        if not status & 1:
            return status
    raise AssertionError("the accelerator stayed busy")


def _second_batch_that_changes_the_scores(job) -> bool:
    """Sets ``job.batches[1]`` to the first shift of the first batch whose second step's
    scores differ from those of the first batch taken twice; False if none does."""
    b0 = job.batches[0]
    again = list(golden_steps(replace(job, batches=[b0, b0]))[-1][1].scores)
    for k in range(1, 5):
        job.batches[1] = (b0 + k) % len(job.x)
        if list(golden_steps(job)[-1][1].scores) != again:
            return True
    return False


@pytest.mark.parametrize(
    "layers, update, shaping, init, mem_latency, noise_buffers, wide",
    [
        ((3, 4, 2), "latent", "rank", "random", 3, 1, False),
        ((2, 3, 3), "pentary", "sign", "zero", 1, 1, False),
        ((3, 4, 2), "latent", "rank", "random", 2, 2, False),
        ((3, 4, 2), "latent", "rank", "random", 3, 2, True),
    ],
)
def test_accelerator_trains_bit_exact_with_golden(
    layers, update, shaping, init, mem_latency, noise_buffers, wide, monkeypatch
):
    """Two ES steps, every step's weights, latent, scores, g and theta equal to golden's;
    then both in one run from the same start (step t's batch indices at t * batch: the
    loader reads them from the controller's batch base), ending in golden's state; the
    vote accumulator and the updater start each layer with its widths. The latent
    case at the ULX3S's memory latency (3: the weights and the scores through the block
    RAMs' output registers), the pentary one at the iCE40's (1). With two noise buffers
    each TRAIN run's evaluation makes the next step's first round ahead, and the next
    run's evaluation (no register the noise depends on written between them) uses it:
    the steps stay golden's and the second step's evaluation is the shorter. Once in the
    evaluator's wide forms too (forced on 2 lanes; the 128-lane ULX3S build's)."""
    from pentegg.rtl.evaluator import params as params_mod

    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    rng = np.random.default_rng(harness.pick_seed(f"accelerator {layers} {update}"))
    cfg = Config(
        layers=layers,
        population=6,
        seed=int(rng.integers(1 << 32)),
        update=update,
        shaping=shaping,
        init=init,
        latent_shift=1,
        tau=8,
    ).validate()
    # a second batch whose step's scores differ from the first batch's (so that the
    # run of both steps shows a batch read at the wrong base); about one job in 70 has
    # none (its second step's scores all equal whatever the batch), so a new job is
    # drawn from the same generator (the seed still replays the run)
    for _ in range(20):
        job = random_job(rng, cfg, samples=5, batch=3, steps=2)
        if _second_batch_that_changes_the_scores(job):
            break
    else:
        raise AssertionError("no job of 20 has a second batch that changes the scores")
    ref = golden_steps(job)
    ml = 2
    dut = Accelerator(
        lanes=2,
        max_layers=ml,
        max_width=4,
        max_population=8,
        update=update,
        max_batch=4,
        sample_bytes=64,
        label_words=16,
        batch_words=16,
        mem_latency=mem_latency,
        noise_buffers=noise_buffers,
    )
    assert dut.params.wide == wide
    n_w = sum(len(pack(w)) for w in ref[0][0].weights)
    eval_cycles = []
    n_v = sum(w.size for w in ref[0][0].weights)
    board = Scoreboard(f"accelerator {layers} {update} {shaping}")

    async def check_state(send, what, state, info):
        """Weight words and latent equal golden's ``state``, scores ``info``'s."""
        words = await send(ap.mem_read("weights", 0, n_w), n_w)
        board.check(f"{what}: weight words", ap.weight_words(state.weights), words)
        if update == "latent":
            lat = await send(ap.mem_read("latent", 0, n_v), n_v)
            board.check(
                f"{what}: latent", ap.latent_words(state.latent), [ap.to_signed(v, 32) for v in lat]
            )
        if info is not None:
            sc = await send(ap.mem_read("scores", 0, cfg.population), cfg.population)
            board.check(f"{what}: scores", info.scores, [ap.to_signed(v, 32) for v in sc])

    async def script(send):
        await send(load_words(job, ml, steps=len(job.batches)))
        await send(ap.run("init"))
        await wait_idle(send, ml)
        for t, (state, info) in enumerate(ref):
            await check_state(send, f"step {t}", state, info)
            if info is not None:
                npairs = cfg.population // 2
                g = await send(ap.mem_read("g", 0, npairs), npairs)
                board.check(f"step {t}: g", info.g, [ap.to_signed(v, 32) for v in g])
                (theta,) = await send(ap.reg_read("theta", ml), 1)
                assert theta == info.theta, f"step {t}: theta {theta} != golden {info.theta}"
            if t + 1 < len(ref):  # one step: its batch indices at 0
                await send(ap.mem_write("batch", 0, job.batches[t]))
                await send(ap.reg_write("steps", 1, ml) + ap.run("train"))
                status = await wait_idle(send, ml)
                (err,) = await send(ap.reg_read("error", ml), 1)
                assert not status & 2, f"step {t}: error flags {ap.decode_error(err)}"
                eval_cycles.extend(await send(ap.reg_read("eval_cycles", ml), 1))
        n = len(job.batches)
        await send(ap.reg_write("step", job.step0, ml) + ap.reg_write("steps", n, ml))
        await send(ap.mem_write("batch", 0, np.concatenate(job.batches)))
        await send(ap.run("init"))
        await wait_idle(send, ml)
        await send(ap.run("train"))
        status = await wait_idle(send, ml)
        (err,) = await send(ap.reg_read("error", ml), 1)
        assert not status & 2, f"{n} steps in one run: error flags {ap.decode_error(err)}"
        await check_state(send, f"{n} steps in one run", *ref[-1])

    seen = []
    run_on(dut, script, processes=[layer_widths_at_starts(dut, seen)])
    if noise_buffers == 2:  # round 0's fill of 2 lanes: about 70 cycles
        assert eval_cycles[1] < eval_cycles[0] - 40, eval_cycles
    # every layer's vote and update start with that layer's widths (from registers
    # loaded in the controller's VOTE_SETUP cycle): (out, fan) = (n_{l+1}, n_l + 1)
    want = [
        (block, layer, layers[layer + 1], layers[layer] + 1)
        for _ in range(2 * (len(ref) - 1))  # the steps one by one, then in one run
        for layer in range(len(layers) - 1)
        for block in ("votes", "updater")
    ]
    assert seen == want, (seen, want)


def small_accelerator(lanes, mem_latency, **params) -> Accelerator:
    """An Accelerator of 2 layers of width <= 4, population <= 8, batch <= 4 and small
    memories; ``params`` adds or overrides parameters (the per-member memories' depths,
    ``max_width``)."""
    return Accelerator(
        **{
            "lanes": lanes,
            "max_layers": 2,
            "max_width": 4,
            "max_population": 8,
            "max_batch": 4,
            "sample_bytes": 64,
            "label_words": 16,
            "batch_words": 16,
            "mem_latency": mem_latency,
            **params,
        }
    )


@pytest.mark.parametrize(
    "lanes, mem_latency, wide",
    [(2, 1, False), (3, 2, False), (2, 3, False), (3, 4, False), (3, 2, True)],
)
def test_accelerator_per_member_eval_reads_member_x_and_writes_golden_logits(
    lanes, mem_latency, wide, monkeypatch
):
    """RUN eval with shared = 0 through the command stream only: inputs written to
    ``member_x``, logits read from ``logits`` equal golden's, batch 2, a population not
    a multiple of 2 lanes, two evaluations back to back; then a run whose logits would
    not fit ``logit_bytes`` sets error flag 15 and leaves the logits as they were. Also
    in the evaluator's wide forms (forced on 3 lanes: the loader takes a member input
    word every other cycle at most, from the accelerator's input register)."""
    from pentegg.rtl.evaluator import params as params_mod

    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    rng = np.random.default_rng(harness.pick_seed(f"accelerator per-member {lanes}"))
    cfg = Config(
        layers=(3, 4, 3),
        population=2 * lanes + 2,
        seed=int(rng.integers(1 << 32)),
        init="random",
        sigma_shift=int(rng.integers(0, 3)),
    ).validate()
    state = init_state(cfg)
    ml, batch = 2, 2
    dut = small_accelerator(
        lanes,
        mem_latency,
        member_bytes=128,
        logit_bytes=cfg.population * batch * 3,  # exactly one batch-2 run
    )
    assert dut.params.wide == wide
    n_y = cfg.population * batch * cfg.layers[-1]

    async def script(send):
        await send(ap.mem_write("weights", 0, ap.weight_words(state.weights)))
        for t in range(2):
            step = int(rng.integers(0, 65535))
            x = rng.integers(-127, 128, size=(cfg.population, batch, cfg.layers[0]))
            x[0, 0] = 127
            await send(ap.config_words(cfg, ml, step=step, batch=batch, shared=False))
            await send(ap.mem_write("member_x", 0, ap.member_words(x)))
            await send(ap.run("eval"))
            status = await wait_idle(send, ml)
            (err,) = await send(ap.reg_read("error", ml), 1)
            assert not status & 2, f"eval {t}: error flags {ap.decode_error(err)}"
            words = await send(ap.mem_read("logits", 0, n_y), n_y)
            got = ap.logits_from_words(words, cfg.population, batch, cfg.layers[-1])
            want = population_forward(cfg, state.weights, make_noise(cfg, step), x)
            Scoreboard(f"per-member eval {t}").check("logits", want.ravel(), got.ravel())
            n4 = n_y // 4  # the same logits through logits_packed, four a word
            packed = await send(ap.mem_read("logits_packed", 0, n4), n4)
            want4 = ap.pack_bytes(np.asarray(words[: 4 * n4]))
            Scoreboard(f"per-member eval {t}, packed").check(
                "logits_packed", np.array(want4), np.array(packed)
            )
        # 2 more samples per member: the logits do not fit, the run is refused
        await send(ap.reg_write("batch", batch + 1, ml) + ap.run("eval"))
        status = await wait_idle(send, ml)
        (err,) = await send(ap.reg_read("error", ml), 1)
        assert status & 2 and ap.decode_error(err) == ["members"], ap.decode_error(err)
        assert await send(ap.mem_read("logits", 0, n_y), n_y) == words

    run_on(dut, script)


def test_run_with_a_register_out_of_range_sets_params_and_sees_a_write_just_before_it():
    """RUN eval with width1 past max_width, written in the word before RUN: the run ends
    at its check with error flag 13 (params) and no evaluation cycle; width1 written back
    in range just before the next RUN: that run's check sees it, the run evaluates."""
    ml = 2
    dut = small_accelerator(2, 2)
    cfg = Config(layers=(3, 4, 2), population=4, seed=1).validate()

    async def script(send):
        await send(ap.config_words(cfg, ml, step=0, batch=1))
        for width1, flags in ((5, ["params"]), (4, [])):
            await send(ap.reg_write("width1", width1, ml) + ap.run("eval"))
            status = await wait_idle(send, ml)
            (err,) = await send(ap.reg_read("error", ml), 1)
            (cycles,) = await send(ap.reg_read("eval_cycles", ml), 1)
            assert ap.decode_error(err) == flags and bool(status & 2) == bool(flags), (
                width1,
                ap.decode_error(err),
            )
            assert (cycles == 0) == bool(flags), (width1, cycles)

    run_on(dut, script)


@pytest.mark.parametrize("mem_latency", [1, 2, 3])
def test_host_reads_back_every_writable_memory_as_written(mem_latency):
    """WMEM of random words to every host-writable memory, then RMEM of each: the words
    come back at their addresses, whatever the memories' read latency (the single-port
    memories take up to two cycles, the decoder samples the third) and with the address
    moving by one per word."""
    rng = np.random.default_rng(harness.pick_seed(f"accelerator host memories {mem_latency}"))
    dut = small_accelerator(2, mem_latency, member_bytes=64, logit_bytes=16)
    # 0..127 is the same word in every memory (all at least 8 bits, signed or not)
    want = {
        name: [int(v) for v in rng.integers(0, 128, size=min(depth, 16))]
        for name, (_, depth, access) in dut.host_memories.items()
        if access == "rw"
    }

    async def script(send):
        for name, words in want.items():
            await send(ap.mem_write(name, 0, words))
        for name, words in want.items():
            got = await send(ap.mem_read(name, 0, len(words)), len(words))
            Scoreboard(f"RMEM {name}").check(name, np.array(words), np.array(got))

    run_on(dut, script)


@pytest.mark.parametrize("mem_latency", [1, 3])
def test_packed_selects_write_the_byte_memories_and_read_weights_and_latent(mem_latency):
    """WMEM of ``samples_packed`` and ``member_x_packed`` (random words, from word 1): the
    byte memories read back with each word's four bytes at ``4 (addr + i) + j``, low byte
    first, and the bytes before them as a byte-a-word WMEM left them; RMEM of
    ``weights_packed`` and ``latent_packed`` (from word 1) after random plain writes: two
    weight words and four latent values (their two's complement bytes) a word, the first
    in the low bits, whatever the memories' read latency."""
    rng = np.random.default_rng(harness.pick_seed(f"accelerator packed {mem_latency}"))
    dut = small_accelerator(2, mem_latency, member_bytes=64, logit_bytes=16)
    mems = dut.host_memories
    writes, reads = {}, {}
    for packed, (target, bits, access) in PACKED_MEMORIES.items():
        per = 32 // bits
        assert mems[packed][1:] == (mems[target][1] // per, access)
        if access == "w":
            words = [int(v) for v in rng.integers(0, 1 << 32, size=5, dtype=np.uint64)]
            head = [int(v) for v in rng.integers(0, 256, size=4)]
            writes[target] = (head, words, packed)
        elif target != "logits":  # (the host cannot write the logits: the per-member
            # eval's test reads them packed) weights: 16-bit words; latent: in range
            lo, hi = (0, 1 << 16) if target == "weights" else (-31, 32)
            vals = [int(v) for v in rng.integers(lo, hi, size=per * 4)]
            reads[target] = (vals, packed, per, bits)

    async def script(send):
        for target, (head, words, packed) in writes.items():
            await send(ap.mem_write(target, 0, head))
            await send(ap.mem_write(packed, 1, words))
        for target, (vals, *_) in reads.items():
            await send(ap.mem_write(target, 0, vals))
        for target, (head, words, _) in writes.items():
            n = 4 + 4 * len(words)
            got = await send(ap.mem_read(target, 0, n), n)
            exp = head + [(w >> 8 * j) & 0xFF for w in words for j in range(4)]
            Scoreboard(f"RMEM {target}").check(target, np.array(exp), np.array(got))
        for vals, packed, per, bits in reads.values():
            got = await send(ap.mem_read(packed, 1, 3), 3)
            mask = (1 << bits) - 1
            exp = [
                sum((vals[per * i + j] & mask) << bits * j for j in range(per)) for i in range(1, 4)
            ]
            Scoreboard(f"RMEM {packed}").check(packed, np.array(exp), np.array(got))
        # a write to the read-only weights_packed reaches no memory
        await send(ap.mem_write("weights_packed", 1, [0xBEEF_CAFE, 0x1234_5678]))
        got = await send(ap.mem_read("weights", 0, 8), 8)
        Scoreboard("weights").check("weights", np.array(reads["weights"][0]), np.array(got))

    run_on(dut, script)


def test_a_build_whose_memory_holds_less_than_a_word_has_no_packed_select_for_it():
    """A 1-wide, 1-layer build: its weights are one word and its latent state two values,
    so it has neither weights_packed nor latent_packed (a select of depth 0), and its
    Device (the link engine checks every depth) still builds."""
    from pentegg.rtl.catalog import silence
    from pentegg.rtl.link.device import Device

    mems = Accelerator(lanes=1, max_layers=1, max_width=1).host_memories
    assert mems["weights"][1] == 1 and mems["latent"][1] == 2
    assert "weights_packed" not in mems and "latent_packed" not in mems
    assert all(depth >= 1 for _, depth, _ in mems.values())
    silence(Device(lanes=1, max_layers=1, max_width=1))


def test_accelerator_per_member_memories_are_selects_7_and_8_and_logits_read_only():
    acc = Accelerator(lanes=2, max_width=4, member_bytes=100, logit_bytes=16)
    mems = acc.host_memories
    assert mems["member_x"] == (7, 100, "rw") and mems["logits"] == (8, 16, "r")
    assert mems["member_x_packed"] == (10, 25, "w") and mems["samples_packed"][:2] == (9, 1024)
    assert mems["weights_packed"][2] == mems["latent_packed"][2] == "r"
    assert "latent_packed" not in Accelerator(lanes=2, max_width=4, update="pentary").host_memories
    for name, bad in (("member_bytes", 15), ("logit_bytes", 1 << 21)):
        with pytest.raises(ValueError, match=rf"^{name}={bad} is not an integer in 16\.\.1048576$"):
            Accelerator(**{name: bad})
    for name in ("member_bytes", "sample_bytes"):  # a packed word's bytes all in the memory
        msg = rf"^{name}=18 is not a multiple of 4 in 16\.\.1048576$"
        with pytest.raises(ValueError, match=msg):
            Accelerator(**{name: 18})


@pytest.mark.parametrize("group", [None, 1])
def test_a_reset_during_a_step_leaves_nothing_that_changes_the_next_step(group):
    """The Device's RESET is a one-cycle pulse on the Accelerator's ``reset``, which
    reaches each block through a flip-flop of its own (rtl/reset.py), and the datapath's
    registers take no reset (they are written before they are read): a reset at any
    point of a step (evaluation, shaping, update) must leave nothing behind that the next
    run reads. The clock domain has no reset here (as on the boards), so every register
    that needs one must be reached by the tree. A step is cut at three points of each
    block's work; after each cut the host reloads the registers, weights and latent
    state, and the next step equals golden's (weights, latent integers, scores). With
    ``group`` 1, two finalizer groups: the pass engine's per-lane control leaves, which
    take no reset (the copies' flush reaches them a cycle later)."""
    key = "accelerator reset mid-step" + ("" if group is None else f" group {group}")
    rng = np.random.default_rng(harness.pick_seed(key))
    cfg = Config(
        layers=(3, 5, 3),
        population=6,
        seed=int(rng.integers(1 << 32)),
        update="latent",
        init="random",
        latent_shift=1,
        tau=4,
    ).validate()
    job = random_job(rng, cfg, samples=5, batch=3, steps=1)
    (state0, _), (state1, info1) = golden_steps(job)
    ml = 2
    dut = small_accelerator(2, 1, max_layers=ml, max_width=5, group=group)
    assert dut.evaluator.params.finalizers == (2 if group else 1)
    top = Module()
    top.domains.sync = ClockDomain("sync", reset_less=True)
    top.submodules.acc = dut
    n_w = sum(len(pack(w)) for w in state0.weights)
    n_v = sum(w.size for w in state0.weights)
    board = Scoreboard("accelerator reset mid-step")

    async def bench(ctx):
        send = sender(ctx, dut)

        async def start_step():
            await send(load_words(job, ml, steps=1))
            await send(ap.mem_write("weights", 0, ap.weight_words(state0.weights)))
            await send(ap.mem_write("latent", 0, ap.latent_words(state0.latent)))
            await send(ap.run("train"))

        blocks = {
            "evaluation": dut.evaluator.busy,
            "shaping": dut.shaper.busy,
            "votes": dut.votes.busy,
            "update": dut.updater.busy,
        }

        async def run_until_idle(limit=500_000):
            """Cycles from the run's start until it ends, and the cycles each block
            was busy in."""
            while not ctx.get(dut.busy):  # the run starts a few cycles after its word
                await ctx.tick()
            spans = {name: [] for name in blocks}
            for n in range(limit):
                _, _, busy, *each = await ctx.tick().sample(dut.busy, *blocks.values())
                if not busy:
                    return n, spans
                for name, b in zip(blocks, each, strict=True):
                    if b:
                        spans[name].append(n)
            raise AssertionError("the accelerator stayed busy")

        # a run's length depends on the phase of the finalizer's window counter at its
        # start (it runs free, and the evaluation's waits end on its phase): measured,
        # 1,953 to 1,956 cycles here, over the four phases of its period. A cut run may
        # be up to period - 1 cycles shorter than the reference, so no cut falls in the
        # reference's last period + 1 cycles (the run is still busy at the cut and in
        # the cycle after it, whatever the phase; CI's run cut at its last cycle once)
        await start_step()
        full, spans = await run_until_idle()
        period = dut.params.period
        # three cuts at random cycles of each block's work (the seed varies them)
        cuts = []
        for name, busy in spans.items():
            busy = [c for c in busy if c + period + 1 < full]
            assert busy, f"the {name} block was never busy before the run's last cycles"
            cuts += [(name, int(c)) for c in rng.choice(busy, size=3)]
        for name, cut in cuts:
            await start_step()
            while not ctx.get(dut.busy):
                await ctx.tick()
            for _ in range(cut + 1):
                await ctx.tick()
            assert ctx.get(dut.busy), f"the step ended before its cut at {cut} cycles"
            ctx.set(dut.reset, 1)
            await ctx.tick()
            ctx.set(dut.reset, 0)
            assert ctx.get(dut.busy), (
                f"the blocks take the reset a cycle later (cut {cut} of {full})"
            )
            await ctx.tick()
            assert not ctx.get(dut.busy), "RESET ends the run"
            (step,) = await send(ap.reg_read("step", ml), 1)
            assert step == 0, "RESET returns the registers to their reset values"
            await start_step()
            await run_until_idle()
            (err,) = await send(ap.reg_read("error", ml), 1)
            assert err == 0, f"cut at {cut}: error flags {ap.decode_error(err)}"
            what = f"step after a reset at cycle {cut} of {full} ({name})"
            words = await send(ap.mem_read("weights", 0, n_w), n_w)
            board.check(f"{what}: weight words", ap.weight_words(state1.weights), words)
            lat = await send(ap.mem_read("latent", 0, n_v), n_v)
            lat = [ap.to_signed(v, 32) for v in lat]
            board.check(f"{what}: latent", ap.latent_words(state1.latent), lat)
            sc = await send(ap.mem_read("scores", 0, cfg.population), cfg.population)
            board.check(f"{what}: scores", info1.scores, [ap.to_signed(v, 32) for v in sc])

    sim = Simulator(top)
    sim.add_clock(1e-6, domain="sync")
    sim.add_testbench(bench)
    sim.run()


def test_an_evaluation_keeps_its_noise_only_without_a_noise_register_written_since():
    """The evaluator's ``keep`` at each evaluation's start: 0 for the first after a reset
    (the domain's, and the Device's RESET) and after any host write of a register the
    noise depends on (seed, population, n_layers, sigma_shift, a width: even of the
    value it holds), 1 after writes of others (steps, margin) or none."""
    rng = np.random.default_rng(harness.pick_seed("accelerator keep"))
    cfg = Config(layers=(3, 4, 2), population=6, seed=int(rng.integers(1 << 32))).validate()
    job = random_job(rng, cfg, samples=5, batch=3, steps=1)
    ml = 2
    dut = small_accelerator(2, 1)
    seen = []

    async def starts(ctx):
        ev = dut.evaluator
        async for _, _, start, keep in ctx.tick().sample(ev.start, ev.keep):
            if start:
                seen.append(int(keep))

    writes = [
        [],
        ap.reg_write("seed", cfg.seed, ml),
        ap.reg_write("steps", 1, ml),
        ap.reg_write("width1", 4, ml),
        ap.reg_write("population", 6, ml),
        ap.reg_write("margin", 7, ml),
        ap.reg_write("n_layers", 2, ml),
        ap.reg_write("sigma_shift", cfg.sigma_shift, ml),
        [],
    ]

    async def bench(ctx):
        send = sender(ctx, dut)

        async def load_and_eval(words_before):
            await send(load_words(job, ml, steps=1))
            await send(ap.run("init"))
            await wait_idle(send, ml)
            for words in words_before:
                await send(words)
                await send(ap.run("eval"))
                await wait_idle(send, ml)

        await load_and_eval([[], *writes])
        ctx.set(dut.reset, 1)  # RESET: the registers to their reset values, no write
        await ctx.tick()
        ctx.set(dut.reset, 0)
        await ctx.tick().repeat(2)
        for _ in range(2):  # the registers' reset values (a network the build holds)
            await send(ap.run("eval"))
            await wait_idle(send, ml)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(starts)
    sim.add_testbench(bench)
    sim.run()
    assert seen[:10] == [0, 1, 0, 1, 0, 0, 1, 0, 0, 1], seen
    assert seen[10:] == [0, 1], seen
