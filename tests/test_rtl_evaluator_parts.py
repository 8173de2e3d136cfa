# amaranth: UnusedElaboratable=no
"""The PopulationEvaluator's parts in the Amaranth simulator, each against its reference:
the lane MACs against integer sums, the weight streamer against the packed matrices
(spec 1.4), the noise fill against ``sim/evaluator_model.noise_image`` (golden's LRGEN),
and the quantized-mode parts: the lane's ``x * (W + s E)`` MAC and the E fill against
golden's ``lrmul`` (``sim/evaluator_model.e_image``).
"""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.golden import Config
from pentegg.golden.digit import pack
from pentegg.rtl.evaluator.e_fill import EFill, e_fill_cycles
from pentegg.rtl.evaluator.finalizer import record_layout
from pentegg.rtl.evaluator.lane import PairLane, digit_ctrl
from pentegg.rtl.evaluator.loader import InputLoader
from pentegg.rtl.evaluator.noise_fill import NoiseFill, noise_fill_cycles
from pentegg.rtl.evaluator.params import EvaluatorParams
from pentegg.rtl.evaluator.pass_engine import PassEngine
from pentegg.rtl.evaluator.sequencer import above_const
from pentegg.rtl.evaluator.skid import SkidBuffer
from pentegg.rtl.evaluator.weights import WeightStreamer
from pentegg.sim import harness
from pentegg.sim.evaluator_model import e_image, layout, noise_image, schedule_cycles
from pentegg.sim.scoreboard import Scoreboard
from pentegg.sim.stream import random_traffic


def _run(dut, *benches, background=()):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    for b in background:
        sim.add_process(b)
    for b in benches:
        sim.add_testbench(b)
    sim.run()


def _ctrl(d: int) -> dict:
    code = d & 0b111
    return {k: int(v) for k, v in digit_ctrl([(code >> b) & 1 for b in range(3)]).items()}


def test_digit_ctrl_decodes_every_code():
    for d in range(-2, 3):
        c = _ctrl(d)
        assert (c["nz"], c["neg"], c["is2"]) == (int(d != 0), int(d < 0), int(abs(d) == 2))


@pytest.mark.parametrize("clear_terms", [False, True], ids=["enable", "clear"])
def test_pair_lane_sums_every_pass_exactly(clear_terms):
    """Random passes (1..64 inputs, both digit sources, extreme activations), each
    flushed into the captures: cap_i = sum_k x[k] * d_i[k]; in both forms of the MAC
    (the accumulator's enable, the ECP5's; the term register cleared, the iCE40's). The
    flush ignores ``en``: a flush beat with ``en`` high and non-zero digits adds no term
    to the capture nor to the next pass."""
    rng = random.Random(harness.pick_seed(f"pair lane {clear_terms}"))
    dut = PairLane(15, clear_terms=clear_terms)
    board = Scoreboard("pair lane")

    async def bench(ctx):
        for trial in range(60):
            n = rng.choice([1, 2, 63, 64, rng.randint(1, 64)])
            xs = [rng.choice([-127, 127, 0, rng.randint(-127, 127)]) for _ in range(n)]
            src = rng.randint(0, 1)
            d = [[rng.randint(-2, 2) for _ in range(n)] for _ in range(2)]
            for k in range(n):
                ctx.set(dut.x, xs[k])
                ctx.set(dut.src, src)
                ctx.set(dut.en, 1)
                for i in range(2):
                    own, other = (d[i][k], rng.randint(-2, 2))
                    ctx.set(dut.nd[i], own if src else other)
                    ctx.set(dut.w[i], _ctrl(other if src else own))
                await ctx.tick()
                if rng.random() < 0.2:  # an idle cycle in the middle of a pass
                    ctx.set(dut.en, 0)
                    await ctx.tick()
            # the flush beat, half of them with en high and random non-zero digits
            ctx.set(dut.en, trial % 2)
            ctx.set(dut.x, rng.choice([-127, 127]))
            for i in range(2):
                ctx.set(dut.nd[i], rng.choice([-2, -1, 1, 2]))
                ctx.set(dut.w[i], _ctrl(rng.choice([-2, -1, 1, 2])))
            ctx.set(dut.flush, 1)
            await ctx.tick()
            ctx.set(dut.flush, 0)
            ctx.set(dut.en, 0)
            exp = [sum(a * b for a, b in zip(xs, d[i], strict=True)) for i in range(2)]
            board.check(f"pass {trial}", exp, [ctx.get(dut.cap[i]) for i in range(2)])

    _run(dut, bench)


def test_pair_lane_quantized_sums_x_times_w_plus_sign_e_and_the_bias_e_term():
    """Quantized lane (acc_bits for 64 inputs): random passes with W and E at their
    extremes, both member signs: cap_i = sum_k x[k] (W_i[k] + s E_i[k]) + 127 s E_i[n]
    (the bias column's E digit arrives with the flush), digits in -4..4 without a
    multiplier. Passes without ``qe`` add no E term (their own digits ``nd`` are then
    random): cap_i = sum_k x[k] d_i[k], with ``d`` the broadcast digits or, ``src`` high,
    the lane's own."""
    rng = random.Random(harness.pick_seed("pair lane quantized"))
    dut = PairLane(17, quantized=True)
    board = Scoreboard("pair lane quantized")

    async def bench(ctx):
        for trial in range(60):
            n = rng.choice([1, 2, 63, 64, rng.randint(1, 64)])
            s = rng.randint(0, 1)
            qe = trial % 4 != 3  # a pass in four without the E term
            src = 0 if qe else rng.randint(0, 1)
            xs = [rng.choice([-127, 127, 0, rng.randint(-127, 127)]) for _ in range(n)]
            ext = rng.random() < 0.3  # all digits at +-2
            pick = (lambda: rng.choice([-2, 2])) if ext else (lambda: rng.randint(-2, 2))
            w = [[pick() for _ in range(n)] for _ in range(2)]
            e = [[pick() for _ in range(n + 1)] for _ in range(2)]
            ctx.set(dut.s, s)
            ctx.set(dut.qe, qe)
            ctx.set(dut.src, src)
            for k in range(n):
                ctx.set(dut.x, xs[k])
                ctx.set(dut.en, 1)
                for i in range(2):
                    ctx.set(dut.w[i], _ctrl(e[i][k] if src else w[i][k]))
                    ctx.set(dut.nd[i], w[i][k] if src else e[i][k])
                await ctx.tick()
                if rng.random() < 0.2:
                    ctx.set(dut.en, 0)
                    await ctx.tick()
            ctx.set(dut.en, 0)
            ctx.set(dut.flush, 1)
            ctx.set(dut.x, rng.randint(-127, 127))  # not used at the flush
            for i in range(2):
                ctx.set(dut.w[i], _ctrl(rng.randint(-2, 2)))  # nor the broadcast digit
                ctx.set(dut.nd[i], e[i][n])
            await ctx.tick()
            ctx.set(dut.flush, 0)
            sg = (1 - 2 * s) * qe
            exp = [
                sum(x * (a + sg * b) for x, a, b in zip(xs, w[i], e[i][:n], strict=True))
                + 127 * sg * e[i][n]
                for i in range(2)
            ]
            board.check(
                f"pass {trial} (n {n}, sign {s}, qe {qe}, src {src})",
                exp,
                [ctx.get(dut.cap[i]) for i in range(2)],
            )

    _run(dut, bench)


def test_pair_lane_clears_its_terms_on_the_ice40_only():
    """The MAC's form follows the platform: the cleared term register on the iCE40 (no
    capture multiplexer: fewer LUT4), the enable elsewhere (the ECP5, the simulator)."""
    from pentegg.rtl.evaluator.lane import clear_terms_for
    from pentegg.rtl.synth import SynthPlatform

    assert clear_terms_for(SynthPlatform("ice40")) is True
    assert clear_terms_for(SynthPlatform("ecp5")) is False
    assert clear_terms_for(None) is False


def test_the_finalizer_is_lean_on_the_ice40_only():
    """The finalizer's form follows the platform: lean on the iCE40 (one control for all
    groups, y1's own compares, fewer LUT4), the timing copies elsewhere (the ECP5, the
    simulator); a ``lean`` other than None, True or False is refused in one line."""
    from pentegg.rtl.evaluator.finalizer import Finalizer, lean_for
    from pentegg.rtl.evaluator.params import EvaluatorParams
    from pentegg.rtl.synth import SynthPlatform

    assert lean_for(SynthPlatform("ice40")) is True
    assert lean_for(SynthPlatform("ecp5")) is False
    assert lean_for(None) is False
    with pytest.raises(ValueError, match="lean='yes' is not None, True or False"):
        Finalizer(EvaluatorParams(lanes=2), 8, lean="yes")


def test_pair_lane_rejects_bad_width():
    with pytest.raises(ValueError, match="acc_bits"):
        PairLane(1)
    with pytest.raises(ValueError, match="clear_terms='yes' is not None, True or False"):
        PairLane(15, clear_terms="yes")


@pytest.mark.parametrize("latency", [1, 2, 4])
def test_weight_streamer_walks_two_rows_of_packed_matrices(latency):
    """Every pass of a random three-layer network: rows o and o + 1 digit by digit, the
    bias digit last, from the spec 1.4 packing, with random back-pressure;
    ``cmd_ready_next`` is in every cycle the next cycle's ``cmd.ready``."""
    rng = random.Random(harness.pick_seed(f"weights latency {latency}"))
    widths = [rng.randint(1, 20) for _ in range(4)]
    mats = [
        np.array([[rng.randint(-2, 2) for _ in range(widths[l] + 1)] for _ in range(widths[l + 1])])
        for l in range(3)
    ]
    words, base = [], []
    for w in mats:
        base.append(len(words))
        words += [int(v) for v in pack(w)]
    passes, expected = [], []
    for l, w in enumerate(mats):
        out, fan = w.shape
        for o in range(0, out, 2):
            two = o + 1 < out
            d0, d1 = o * fan, (o + 1) * fan
            passes.append(
                {
                    "word0": base[l] + d0 // 5,
                    "off0": d0 % 5,
                    "word1": base[l] + d1 // 5 if two else 0,
                    "off1": d1 % 5 if two else 0,
                    "n": fan - 1,
                    "two": int(two),
                }
            )
            for k in range(fan):
                expected.append(
                    (int(w[o, k]) & 7, int(w[o + 1, k]) & 7 if two else 0, k == fan - 1)
                )
    dut = WeightStreamer(addr_bits=12, n_bits=8, mem_latency=latency)
    got, late_ready = [], []

    async def memory(ctx):
        pipe = [None] * latency
        predicted, cycle = None, 0
        async for _, _, en, addr, ready, ready_next in ctx.tick().sample(
            dut.mem_en, dut.mem_addr, dut.cmd.ready, dut.cmd_ready_next
        ):
            if predicted is not None and predicted != ready and not late_ready:
                late_ready.append((cycle, int(predicted), int(ready)))
            predicted, cycle = ready_next, cycle + 1
            pipe = [int(addr) if en else None, *pipe[:-1]]
            if pipe[-1] is not None:
                ctx.set(dut.mem_data, words[pipe[-1]])

    async def drive(ctx):
        for p in passes:
            ctx.set(dut.cmd.valid, 1)
            ctx.set(dut.cmd.payload, p)
            await ctx.tick().until(dut.cmd.ready)
        ctx.set(dut.cmd.valid, 0)

    async def sink(ctx):
        cycles = 0
        while len(got) < len(expected):
            ready = rng.random() < 0.8
            ctx.set(dut.o.ready, ready)
            _, _, valid, p = await ctx.tick().sample(dut.o.valid, dut.o.payload)
            cycles += 1
            if valid and ready:
                got.append((int(p.d[0]), int(p.d[1]), bool(p.bias)))
            assert cycles < 20 * len(expected), "the streamer stalled"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(memory)
    sim.add_testbench(drive, background=True)
    sim.add_testbench(sink)
    sim.run()
    Scoreboard("weight streamer").check("digit pairs", np.array(expected), np.array(got))
    assert not late_ready, f"(cycle, cmd_ready_next the cycle before, cmd.ready): {late_ready}"


def test_skid_buffer_passes_every_word_once_in_order_with_no_path_across():
    """Random offers (random payload bits while none is offered) and random takes
    through the SkidBuffer: the sink gets exactly the source's words, in order; in
    every cycle the source's ready and the sink's valid and payload are what they were
    before this cycle's ready and valid were set (flip-flops, no combinational path
    across); the sink is offered a word in every cycle the buffer holds one (a word
    taken while the sink stalls included); with both sides always willing a word moves
    every cycle."""
    rng = random.Random(harness.pick_seed("skid buffer"))
    dut = SkidBuffer(16)
    sent, got = [], []
    held = [0]  # words taken and not yet given, at the start of the cycle

    async def bench(ctx):
        def no_path_across(ctx, before):
            after = (ctx.get(dut.i.ready), ctx.get(dut.o.valid), ctx.get(dut.o.payload))
            assert after == before, (
                f"combinational path across the skid buffer: {before} -> {after}"
            )
            valid = ctx.get(dut.o.valid)
            assert valid == (held[0] > 0), f"o.valid {valid} while holding {held[0]} words"
            took = ctx.get(dut.i.valid) & ctx.get(dut.i.ready)
            held[0] += took - (valid & ctx.get(dut.o.ready))

        s, g = await random_traffic(
            ctx, dut, rng, 800, 16, offer=0.7, take=0.6, check=no_path_across
        )
        sent.extend(s)
        got.extend(g)
        assert not ctx.get(dut.o.valid)
        # full rate: 50 words offered back to back leave in 51 cycles
        moved = []
        for n in range(51):
            ctx.set(dut.i.valid, n < 50)
            ctx.set(dut.i.payload, n)
            if ctx.get(dut.o.valid):
                moved.append(ctx.get(dut.o.payload))
            assert n >= 50 or ctx.get(dut.i.ready)
            await ctx.tick()
        assert moved == list(range(50))

    _run(dut, bench)
    assert len(sent) > 200
    first = next((i for i, (a, b) in enumerate(zip(sent, got, strict=False)) if a != b), None)
    assert first is None, f"word {first}: sent {sent[first]:#x}, got {got[first]:#x}"
    assert len(got) == len(sent), f"sent {len(sent)} words, got {len(got)}"


def _set_loader_run(ctx, dut, *, shared, n0, batch, rounds=1, label_max=10):
    """An InputLoader run's inputs (``start`` not raised)."""
    ctx.set(dut.shared, shared)
    ctx.set(dut.n0, n0)
    ctx.set(dut.batch, batch)
    ctx.set(dut.rounds, rounds)
    ctx.set(dut.label_max, label_max)


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("n0", [3, 1])
@pytest.mark.parametrize("shared", [0, 1], ids=["per_member", "shared"])
def test_input_loader_takes_input_words_only_while_it_loads_a_per_member_unit(
    shared, n0, wide, monkeypatch
):
    """With a word offered on ``inp`` in every cycle and every loaded slot released at
    once: a per-member evaluation (2 rounds of 2 samples, 3 inputs or 1) takes exactly
    ``rounds * batch * 2 * n0`` words, each written (``aw_en``, its bytes in ``aw_data``)
    in the next cycle and in the order taken, and no word after its last unit; a shared
    evaluation takes none (its inputs come from the sample memory, the byte replicated in
    every lane). Every write goes to input ``k`` of its slot (sign ``s`` of a per-member
    unit, ``g % 2`` for shared sample ``g``: address ``slot << region_bits | k``), never
    in a cycle of the finalizer's writes (``aw_cycles`` of the window count, from the
    same reset); in the narrow forms and the wide ones (a word every other cycle)."""
    from pentegg.rtl.evaluator.finalizer import aw_cycles

    p = _wide_params(monkeypatch, wide, lanes=2, max_width=8)
    dut = InputLoader(p)
    rounds, batch = 2, 2
    taken, written, taken_at, written_at, addrs, in_fin = [], [], [], [], [], []

    async def bench(ctx):
        _set_loader_run(ctx, dut, shared=shared, n0=n0, batch=batch, rounds=rounds)
        ctx.set(dut.s_data, 0x5A)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.inp.valid, 1)
        for n in range(400):
            word = 0x100 + n
            ctx.set(dut.inp.payload, word)
            ctx.set(dut.release, ctx.get(dut.loaded))
            if ctx.get(dut.aw_en):
                written.append(ctx.get(dut.aw_data))
                written_at.append(n)
                addrs.append(ctx.get(dut.aw_addr))
                if (n + 1) % p.period in aw_cycles(p.period):  # n + 1 edges since reset
                    in_fin.append(n)
            if ctx.get(dut.inp.ready):
                taken.append(word)
                taken_at.append(n)
            await ctx.tick()

    _run(dut, bench)
    units = rounds * batch * (1 if shared else 2)
    # per-member units alternate the signs (slots 0, 1); shared samples alternate slots
    want = [(u % 2) << p.region_bits | k for u in range(units) for k in range(n0)]
    first = next((i for i, (a, b) in enumerate(zip(addrs, want, strict=False)) if a != b), None)
    assert first is None, f"write {first}: address {addrs[first]}, expected {want[first]}"
    assert len(addrs) == len(want), f"{len(addrs)} writes, expected {len(want)}"
    assert not in_fin, f"writes in the finalizer's write cycles: {in_fin[:4]}"
    if shared:
        assert taken == [], f"a shared evaluation took {len(taken)} input words"
        assert written == [0x5A5A] * len(want), f"shared byte writes {written}"
    else:
        assert len(taken) == rounds * batch * 2 * n0, f"took {len(taken)} words"
        first = next(
            (i for i, (a, b) in enumerate(zip(taken, written, strict=False)) if a != b), None
        )
        assert first is None, f"write {first}: took {taken[first]:#x}, wrote {written[first]:#x}"
        assert len(written) == len(taken), f"took {len(taken)} words, wrote {len(written)}"
        late = [(t, w) for t, w in zip(taken_at, written_at, strict=True) if w != t + 1]
        assert not late, f"(cycle taken, cycle written) not one apart: {late[:3]}"


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
def test_input_loader_puts_shared_sample_gs_label_in_labels_g_mod_4(wide, monkeypatch):
    """Shared inputs, 2 rounds of 3 samples, batch indices and labels from memories of
    ``mem_latency`` cycles (one label equal to ``label_max``): sample ``g``'s label
    (``label[batch[b]]``) is in ``labels[g % 4]`` once its slot is loaded, until sample
    ``g + 4``'s; ``bad_label`` is set by the label at ``label_max`` (not only past it)."""
    p = _wide_params(monkeypatch, wide, lanes=2, max_width=8)
    dut = InputLoader(p)
    rounds, batch, n0, classes = 2, 3, 2, 9
    bidx = [5, 2, 7]
    label = {5: 3, 2: classes, 7: 6}  # sample index 2's label is label_max
    want = [label[bidx[g % batch]] for g in range(rounds * batch)]
    res = {}

    def memory(en, addr, data, image):
        async def proc(ctx):
            pipe = [None] * p.mem_latency
            async for _, _, e, a in ctx.tick().sample(en, addr):
                pipe = [int(a) if e else None, *pipe[:-1]]
                if pipe[-1] is not None:
                    ctx.set(data, image(pipe[-1]))

        return proc

    async def bench(ctx):
        _set_loader_run(ctx, dut, shared=1, n0=n0, batch=batch, rounds=rounds, label_max=classes)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        g = 0
        for _ in range(600):
            loaded = ctx.get(dut.loaded)
            if loaded:  # a slot loaded: its sample's label, then release it
                now = ctx.get(dut.labels[g % 4]) if g < len(want) else None
                assert g >= len(want) or now == want[g], (
                    f"sample {g}: labels[{g % 4}] {now}, expected {want[g]}"
                )
                g += 1
            ctx.set(dut.release, loaded)
            await ctx.tick()
        res["bad"] = ctx.get(dut.bad_label)
        assert g == len(want), f"{g} slots loaded, expected {len(want)}"
        labels = [ctx.get(dut.labels[j]) for j in range(4)]
        last = {j % 4: want[j] for j in range(len(want))}
        assert labels == [last[j] for j in range(4)], f"labels {labels} at the end"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(memory(dut.b_en, dut.b_addr, dut.b_data, lambda a: bidx[a]))
    sim.add_process(memory(dut.l_en, dut.l_addr, dut.l_data, lambda a: label.get(a, 0)))
    sim.add_testbench(bench)
    sim.run()
    assert res["bad"], "a label equal to label_max did not set bad_label"


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
def test_input_loader_waits_for_a_released_slot_before_loading_into_it(wide, monkeypatch):
    """Per-member inputs (one round of 2 samples, 3 inputs), a word offered in every
    cycle and no slot released: the loader fills both slots (``2 * n0`` words) and then
    takes nothing; releasing slot 0 lets it load the next unit (sign 0) into it alone."""
    p = _wide_params(monkeypatch, wide, lanes=2, max_width=8)
    dut = InputLoader(p)
    n0 = 3
    taken = []

    async def bench(ctx):
        _set_loader_run(ctx, dut, shared=0, n0=n0, batch=2)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.inp.valid, 1)
        for n in range(120):
            ctx.set(dut.inp.payload, n)
            ctx.set(dut.release, 0b01 if n == 60 else 0)
            if n == 60:
                assert ctx.get(dut.loaded) == 0b11, f"loaded {ctx.get(dut.loaded):02b}"
                assert len(taken) == 2 * n0, f"{len(taken)} words taken, no slot released"
            if ctx.get(dut.inp.ready):
                taken.append(n)
            await ctx.tick()
        assert ctx.get(dut.loaded) == 0b11, f"loaded {ctx.get(dut.loaded):02b} at the end"

    _run(dut, bench)
    assert len(taken) == 3 * n0, f"{len(taken)} words taken after slot 0's release"


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
def test_input_loader_start_clears_bad_label_even_with_a_check_pending(wide, monkeypatch):
    """A shared run whose labels are all at ``label_max``, restarted ``d`` cycles after
    its start for every ``d`` in 1..30 (so also in the cycle its first label's range
    check is pending, the wide builds' a cycle later), the new run's labels valid:
    ``bad_label`` is low in every cycle after the restart (``start`` clears it, and no
    check of the run before reaches the new run)."""
    p = _wide_params(monkeypatch, wide, lanes=2, max_width=8)
    dut = InputLoader(p)
    classes = 4
    image = {"label": classes}
    late = []

    async def labels(ctx):
        pipe = [None] * p.mem_latency
        async for _, _, e in ctx.tick().sample(dut.l_en):
            pipe = [bool(e), *pipe[:-1]]
            if pipe[-1]:
                ctx.set(dut.l_data, image["label"])

    async def bench(ctx):
        _set_loader_run(ctx, dut, shared=1, n0=2, batch=2, label_max=classes)
        saw_bad = 0
        for d in range(1, 31):
            image["label"] = classes  # the run to be abandoned: every label bad
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for _ in range(d - 1):
                ctx.set(dut.release, ctx.get(dut.loaded))
                await ctx.tick()
            saw_bad |= ctx.get(dut.bad_label)
            image["label"] = classes - 1  # the new run: valid labels
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for n in range(30):
                if ctx.get(dut.bad_label):
                    late.append((d, n))
                ctx.set(dut.release, ctx.get(dut.loaded))
                await ctx.tick()
        assert saw_bad, "no restart came after the first run's bad label was flagged"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(labels)
    sim.add_testbench(bench)
    sim.run()
    assert not late, f"bad_label in the new run, (restart delay, cycle): {late[:4]}"


@pytest.mark.parametrize("idx", [1436, 65535])
def test_input_loader_reads_a_shared_sample_past_64_kib_at_idx_times_n0(idx):
    """A shared sample's bytes are read at ``idx * n0 + k``: with 64 inputs, the
    digits training set's last sample (index 1,436: byte 91,904, past 2**16) and the
    largest index (65,535: the base's widest value, ``65535 * max_width``) read
    their whole rows, in order."""
    n0 = 64
    p = EvaluatorParams(lanes=1, max_width=n0)
    dut = InputLoader(p)
    reads = []

    async def bench(ctx):
        _set_loader_run(ctx, dut, shared=1, n0=n0, batch=1)
        ctx.set(dut.b_data, idx)  # the batch memory's word, whatever its address
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for _ in range(1200):
            if ctx.get(dut.s_en):
                reads.append(ctx.get(dut.s_addr))
            if len(reads) == n0:
                break
            await ctx.tick()

    _run(dut, bench)
    want = [idx * n0 + k for k in range(n0)]
    first = next((i for i, (a, b) in enumerate(zip(reads, want, strict=False)) if a != b), None)
    assert first is None, f"read {first}: address {reads[first]}, expected {want[first]}"
    assert len(reads) == n0, f"{len(reads)} sample reads in 1,200 cycles, expected {n0}"


def test_pass_engine_starts_a_pass_only_when_its_dependencies_hold():
    """The engine's dependency checks are registered a cycle behind: a command that
    waits for a block count reaches the head of an empty queue after one whose count was
    met (the queue's output still holds the old command while it says nothing), and a
    u-row pass waits for the finalizer's idle flag (which falls only when the finalizer
    takes a record). Neither starts before its dependency holds, and each starts in the
    cycle after the first cycle it holds (the registers' cycle)."""
    p = EvaluatorParams(lanes=2, max_width=8)
    dut = PassEngine(p, record_layout(p, 8), 8)

    def cmd(need=0, wait_block=0, wait_idle=0):
        return {"u": 1, "n": 2, "wait_block": wait_block, "need": need, "wait_idle": wait_idle}

    async def drain(ctx):  # the finalizer: takes every record and its captures
        ctx.set(dut.rec.ready, 1)
        async for _, _, rv in ctx.tick().sample(dut.rec.valid):
            ctx.set(dut.consumed, rv)

    async def bench(ctx):
        ctx.set(dut.fin_idle, 1)

        async def offer(c, hold):
            """Offer ``c``; ``hold(n)`` is the dependency's state in the ``n``-th cycle
            of the offer; returns the cycle it was taken in (the dependency held)."""
            ctx.set(dut.cmd.payload, c)
            ctx.set(dut.cmd.valid, 1)
            for n in range(40):
                ok = hold(ctx, n)
                if ctx.get(dut.cmd.ready):
                    assert ok, (
                        f"command {c} taken in cycle {n} of its offer before its dependency held"
                    )
                    await ctx.tick()
                    ctx.set(dut.cmd.valid, 0)  # the queue runs empty; its data stays
                    return n
                await ctx.tick()
            raise AssertionError(f"command {c} not taken in 40 cycles")

        def blocks(at):
            def hold(ctx, n):
                ctx.set(dut.blocks_done, 3 if n >= at else 1)
                return n >= at

            return hold

        def idle(at):
            def hold(ctx, n):
                ctx.set(dut.fin_idle, int(n >= at))
                return n >= at

            return hold

        assert await offer(cmd(need=0, wait_block=1), blocks(0)) == 1
        for _ in range(12):  # the pass runs; the queue says nothing, still holding it
            await ctx.tick()
        assert await offer(cmd(need=3, wait_block=1), blocks(5)) == 6
        ctx.set(dut.fin_idle, 0)  # the finalizer works on the pass's record
        for _ in range(12):
            await ctx.tick()
        assert await offer(cmd(wait_idle=1), idle(4)) == 5

    _run(dut, bench, background=[drain])


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("nz_copies", [1, 3])
def test_pass_engine_noise_reads_are_exactly_the_u_row_passes_mac_beats(
    nz_copies, wide, monkeypatch
):
    """Every copy of the noise read (``nz_reads``) and ``nz_en`` are enabled in exactly
    the MAC beats of u-row passes, at ``u_addr + k`` of the beat's input index ``k`` and
    the pass's bank, and in no other cycle (not in the flush, nor while the engine
    waits for the next pass or for weights): the finalizer has the banks' port then.
    No cycle has two activities (a beat, or why the lanes wait; the take's cycle has
    none), the wide form's bubble a dependence wait. Random passes
    of both kinds, ``n`` 0..8, with gaps in the commands, the weight beats and the
    finalizer's taking of the captures; in the wide form the queue pops a taken command
    a cycle later (``cmd_pop``), and a u-row pass starts after a cycle's bubble."""
    from pentegg.rtl.evaluator import params as params_mod

    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    p = EvaluatorParams(lanes=2, max_width=8)
    assert p.wide == wide
    dut = PassEngine(p, record_layout(p, 8), 8, nz_copies=nz_copies)
    rng = random.Random(11)
    cmds = [
        {
            "u": rng.random() < 0.5,
            "n": rng.choice([0, 1, 2, 3, 8]),
            "u_addr": rng.randrange(240),
            "u_bank": rng.randrange(2),
        }
        for _ in range(60)
    ]
    if wide:
        for c in cmds:
            c["u_mac"] = c["u"] and c["n"] != 0

    async def bench(ctx):
        ctx.set(dut.fin_idle, 1)
        ctx.set(dut.rec.ready, 1)
        cur, k, i, macs, rec_seen, held = None, 0, 0, 0, 0, False
        for cycle in range(2000):
            # wide: the taken command stays at the head until the pop a cycle later
            offer = held or (i < len(cmds) and rng.random() < 0.7)
            if offer:
                ctx.set(dut.cmd.payload, {k_: int(v) for k_, v in cmds[i].items()})
            ctx.set(dut.cmd.valid, offer)
            ctx.set(dut.wbeat.valid, rng.random() < 0.6)
            ctx.set(dut.consumed, rec_seen and rng.random() < 0.5)
            mac = ctx.get(dut.activity.mac)
            acts = ctx.get(dut.activity)
            kinds = [
                n for n in ("mac", "flush", "dep", "caps", "weights", "none") if getattr(acts, n)
            ]
            assert len(kinds) <= 1, f"cycle {cycle}: activity {kinds}"
            if held and cur["u_mac"]:  # the bubble before a u-row pass's first beat
                assert kinds == ["dep"], f"cycle {cycle}: the bubble's activity {kinds}"
            want = bool(mac and cur and cur["u"])
            got = [ctx.get(dut.nz_en)] + [ctx.get(dut.nz_reads[j].en) for j in range(nz_copies)]
            assert got == [want] * (nz_copies + 1), (
                f"cycle {cycle}, pass {i} {cur}, beat {k}: read enables {got}, want {want}"
            )
            if want:
                for j in range(nz_copies):
                    rd = ctx.get(dut.nz_reads[j])
                    assert (rd.addr, rd.bank) == (cur["u_addr"] + k, cur["u_bank"]), (
                        f"cycle {cycle}, beat {k} of {cur}: copy {j} reads {(rd.addr, rd.bank)}"
                    )
                assert ctx.get(dut.nz_addr) == cur["u_addr"] + k
                macs += 1
            if mac:
                k += 1
            if ctx.get(dut.rec.valid):
                rec_seen = 1
            elif ctx.get(dut.consumed):
                rec_seen = 0
            if held:
                assert ctx.get(dut.cmd_pop) and not ctx.get(dut.cmd.ready), (
                    f"cycle {cycle}: the taken command not popped, or taken again"
                )
                held, i = False, i + 1
            elif offer and ctx.get(dut.cmd.ready):
                cur, k = cmds[i], 0
                if wide:
                    held = True
                else:
                    i += 1
            await ctx.tick()
        assert i == len(cmds), f"{i} of {len(cmds)} passes taken"
        assert macs == sum(c["n"] for c in cmds if c["u"]), "u-row MAC beats missing"

    _run(dut, bench)


@pytest.mark.parametrize("latency", [1, 2, 4])
def test_weight_streamer_alternates_the_read_port_between_the_two_rows(latency):
    """A pass of two 60-digit rows (words 0.. and 100..), the sink always ready: while
    both cursors want words the read port grants them in turn, so the reads alternate
    between the rows from the first (0, 100, 1, 101, ...) and the first beat does not
    wait for one row's words behind the other's."""
    dut = WeightStreamer(addr_bits=8, n_bits=7, mem_latency=latency)
    reads = []

    async def memory(ctx):
        async for _, _, en, addr in ctx.tick().sample(dut.mem_en, dut.mem_addr):
            if en:
                reads.append(int(addr))

    async def drive(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.cmd.valid, 1)
        row = {"word0": 0, "off0": 0, "word1": 100, "off1": 0, "n": 59, "two": 1}
        ctx.set(dut.cmd.payload, row)
        await ctx.tick().until(dut.cmd.ready)
        ctx.set(dut.cmd.valid, 0)
        await ctx.tick().repeat(80)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(memory)
    sim.add_testbench(drive)
    sim.run()
    want = [a for k in range(12) for a in (k, 100 + k)]
    assert reads == want, f"read addresses {reads[:8]}..., expected {want[:8]}..."


def test_weight_streamer_runs_passes_back_to_back():
    """Always ready: one beat per cycle after the first words, no gap between passes."""
    fan, out = 13, 8
    words = [0] * 64
    dut = WeightStreamer(addr_bits=8, n_bits=6, mem_latency=2)
    seen = {}

    async def memory(ctx):
        async for _ in ctx.tick():
            ctx.set(dut.mem_data, words[0])

    async def drive(ctx):
        for o in range(0, out, 2):
            d0 = o * fan
            ctx.set(dut.cmd.valid, 1)
            ctx.set(
                dut.cmd.payload,
                {
                    "word0": d0 // 5,
                    "off0": d0 % 5,
                    "word1": (d0 + fan) // 5,
                    "off1": (d0 + fan) % 5,
                    "n": fan - 1,
                    "two": 1,
                },
            )
            await ctx.tick().until(dut.cmd.ready)
        ctx.set(dut.cmd.valid, 0)

    async def sink(ctx):
        ctx.set(dut.o.ready, 1)
        beats, cycles, first = 0, 0, None
        while beats < out // 2 * fan:
            _, _, v = await ctx.tick().sample(dut.o.valid)
            cycles += 1
            if v:
                first = cycles if first is None else first
                beats += 1
            assert cycles < 20 * out * fan, f"the streamer stalled after {beats} beats"
        seen.update(span=cycles - first + 1, beats=beats)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(memory)
    sim.add_testbench(drive, background=True)
    sim.add_testbench(sink)
    sim.run()
    assert seen["span"] == seen["beats"]


def _fill(
    cfg: Config, step: int, first: int, lanes: int, active: int, max_layers: int, gens: int = 1
):
    dut = NoiseFill(
        lanes=lanes,
        rank=cfg.rank,
        digits=cfg.digits,
        max_layers=max_layers,
        width_bits=max(cfg.layers).bit_length(),
        addr_bits=11,
        generators=gens,
    )
    # lanes of the last group past `lanes` are written too: the image has room for them
    padded = -(-lanes // gens) * gens
    img = np.zeros((padded, 2, 1 << 11, 2), dtype=np.int64)
    written = np.zeros((padded, 1 << 11), dtype=bool)
    res = {}

    async def bench(ctx):
        ctx.set(dut.seed, cfg.seed)
        ctx.set(dut.step, step)
        ctx.set(dut.first_pair, first)
        ctx.set(dut.lanes_active, active)
        ctx.set(dut.n_layers, cfg.n_layers)
        for i, w in enumerate(cfg.layers):
            ctx.set(dut.widths[i], w)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        cycles = 0
        while True:
            _, _, busy, en, addr, lane, group, d = await ctx.tick().sample(
                dut.busy, dut.w_en, dut.w_addr, dut.w_lane, dut.w_group, dut.w_data
            )
            cycles += 1
            if en:
                assert lane == group * gens, f"w_lane {lane} is not w_group {group} x {gens}"
                for g in range(gens):
                    for b in range(2):
                        for i in range(2):
                            code = int(d[g][b][i])
                            img[lane + g, b, addr, i] = code - 8 if code & 4 else code
                    assert not written[lane + g, addr], f"lane {lane + g}: slot {addr} twice"
                    written[lane + g, addr] = True
            if not busy:
                break
            assert cycles < 200_000
        res["cycles"] = cycles

    _run(dut, bench)
    return img, written, res["cycles"]


@pytest.mark.parametrize("case", range(8))
def test_noise_fill_writes_golden_noise_in_the_slot_layout(case):
    """Random networks (1..3 layers, widths 1..12), ranks 1/4/16, both digit kinds,
    1..6 lanes of which some inactive, 1..4 generators in lockstep: every slot of every
    lane of the groups filled (the active lanes, and the last group's others with the
    next pairs' noise) equals the model's image of golden's LRGEN streams, written once."""
    rng = random.Random(harness.pick_seed(f"noise fill {case}"))
    nl = rng.randint(1, 3)
    lanes = rng.randint(1, 6)
    active = rng.randint(1, lanes)
    gens = 1 if case < 3 else rng.randint(2, min(4, lanes)) if lanes > 1 else 1
    cfg = Config(
        layers=tuple(rng.randint(1, 12) for _ in range(nl + 1)),
        rank=[1, 4, 16][case % 3],
        digits=rng.choice(["binomial", "uniform"]),
        population=2 * (active + 3),
        seed=rng.randrange(1 << 32),
    ).validate()
    step, first = rng.randrange(65535), rng.randrange(8)
    img, written, _ = _fill(cfg, step, first, lanes, active, 3, gens)
    lay = layout(cfg.layers, cfg.rank)
    board = Scoreboard(f"noise fill {cfg.layers} rank {cfg.rank} {cfg.digits} x{gens}")
    filled = -(-active // gens) * gens
    for j in range(filled):
        board.check(f"lane {j} slots", noise_image(cfg, step, first + j), img[j, :, : lay.depth])
        assert written[j, : lay.depth].all(), f"lane {j}: a slot was not written"
        assert not written[j, lay.depth :].any(), f"lane {j}: a write beyond the layout"
    assert not written[filled:].any()


def test_noise_fill_writes_a_slot_pair_almost_every_cycle():
    """Digits network, rank 4, 4 lanes: 217 slot writes per lane (the model's count), one
    per cycle after the keyer's first answer (29 cycles) but for a few cycles per lane
    (measured: 915 cycles for 868 writes)."""
    cfg = Config(layers=(64, 64, 10)).validate()
    _, written, cycles = _fill(cfg, 3, 0, 4, 4, 2)
    assert written.sum() == 4 * 217
    assert cycles <= 4 * 217 + 29 + 6 * 4, cycles
    assert noise_fill_cycles(cfg.layers, 4) == 4 * 217 + 29


@pytest.mark.parametrize("gens", [2, 4])
def test_noise_fill_generators_fill_that_many_lanes_at_once(gens):
    """Digits network, rank 4, 8 lanes: with G generators in lockstep the fill writes G
    lanes' slots per write and takes the cycles of 8 / G lanes (217 writes a group, a few
    cycles a group more), as :func:`noise_fill_cycles` says within those few cycles."""
    cfg = Config(layers=(64, 64, 10)).validate()
    _, written, cycles = _fill(cfg, 3, 0, 8, 8, 2, gens)
    assert written.sum() == 8 * 217
    groups = 8 // gens
    assert groups * 217 + 29 <= cycles <= groups * 217 + 29 + 6 * groups, cycles
    assert noise_fill_cycles(cfg.layers, 8, generators=gens) == groups * 217 + 29
    # the schedule model's fill (sim/evaluator_model) is the same but for the keyer's 29
    model = schedule_cycles(cfg, batch=1, lanes=8, shared=False, generators=gens)
    assert model["fill_cycles_per_round"] == groups * 217


def _e_fill(
    cfg: Config,
    step: int,
    first: int,
    lanes: int,
    active: int,
    max_layers: int,
    gens: int = 1,
    then: tuple = (),
):
    """One fill of ``active`` lanes from pair ``first``, then one per ``(first, active)``
    of ``then`` on the same EFill (the next rounds'): the last fill's E image, write
    counts and cycles."""
    dut = EFill(
        lanes=lanes,
        rank=cfg.rank,
        digits=cfg.digits,
        max_layers=max_layers,
        max_width=max(cfg.layers),
        width_bits=max(cfg.layers).bit_length() + 1,
        addr_bits=12,
        generators=gens,
    )
    img = np.zeros((lanes, 2, 1 << 12, 2), dtype=np.int64)
    written = np.zeros((lanes, 2, 1 << 12, 2), dtype=np.int64)
    res = {}

    async def bench(ctx):
        ctx.set(dut.seed, cfg.seed)
        ctx.set(dut.step, step)
        ctx.set(dut.sigma_shift, cfg.sigma_shift)
        ctx.set(dut.n_layers, cfg.n_layers)
        for i, w in enumerate(cfg.layers):
            ctx.set(dut.widths[i], w)
        for run_first, run_active in ((first, active), *then):
            img[...] = 0
            written[...] = 0
            ctx.set(dut.first_pair, run_first)
            ctx.set(dut.lanes_active, run_active)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            res["cycles"] = await _e_fill_run(ctx)

    async def _e_fill_run(ctx):
        cycles = 0
        while True:
            _, _, busy, en, bank, addr, lane, d, codes, valid = await ctx.tick().sample(
                dut.busy,
                dut.w_en,
                dut.w_bank,
                dut.w_addr,
                dut.w_lane,
                dut.w_digit,
                dut.w_e,
                dut.w_valid,
            )
            cycles += 1
            if en:
                assert lane % gens == 0, f"w_lane {lane} is not a multiple of {gens}"
                for g in range(gens):
                    if valid >> g & 1:
                        code = codes[g]
                        img[lane + g, bank, addr, d] = code - 8 if code & 4 else code
                        written[lane + g, bank, addr, d] += 1
            if not busy:
                return cycles
            assert cycles < 200_000

    _run(dut, bench)
    return img, written, res["cycles"]


@pytest.mark.parametrize("case", range(6))
def test_e_fill_writes_golden_lrmul_in_the_slot_layout(case):
    """Random networks (1..3 layers, widths 1..12, odd ones), ranks 1/4/16, both digit
    kinds, sigma_shift 0 (E saturates at +-2 often, rank 1's dot products reach +-4), 8
    (E all zero) or random, 1..4 lanes of which some inactive, 1..lanes generators
    (lanes of a last group past the active ones masked): every digit of every
    active lane's E slots equals golden's ``lrmul(A, B, pert_shift)`` (``Noise.e``),
    written exactly once; nothing else is written."""
    rng = random.Random(harness.pick_seed(f"e fill {case}"))
    nl = rng.randint(1, 3)
    lanes = rng.randint(1, 4)
    active = rng.randint(1, lanes)
    cfg = Config(
        layers=tuple(rng.choice([1, 3, 5, 7, 12, rng.randint(1, 12)]) for _ in range(nl + 1)),
        rank=[1, 4, 16][case % 3],
        mode="quantized",
        digits=["binomial", "uniform"][case % 2],
        sigma_shift=[0, 8, rng.randint(0, 8)][case % 3 if case < 3 else 0],
        population=2 * (active + 3),
        seed=rng.randrange(1 << 32),
    ).validate()
    step, first = rng.randrange(65535), rng.randrange(8)
    gens = rng.randint(1, min(4, lanes))
    img, written, _ = _e_fill(cfg, step, first, lanes, active, 3, gens)
    board = Scoreboard(f"e fill {cfg.layers} rank {cfg.rank} {cfg.digits} f {cfg.pert_shift()}")
    for j in range(active):
        exp, mask = e_image(cfg, step, first + j)
        depth = exp.shape[1]
        board.check(f"lane {j} E slots [bank, addr, digit]", exp, img[j, :, :depth] * mask)
        assert (written[j, :, :depth] == mask).all(), f"lane {j}: E digits written != once"
        assert not written[j, :, depth:].any(), f"lane {j}: a write beyond the layout"
    assert not written[active:].any()


@pytest.mark.parametrize("gens", [1, 2])
def test_e_fill_writes_golden_lrmul_again_in_the_next_rounds_fill(gens):
    """The fills of three rounds on one EFill (4 lanes: pairs 0..3, 4..7, then 8..9 on
    two lanes, the others inactive), 1 or 2 generators: the last fill's E slots equal
    golden's ``lrmul`` as a fill from reset does, each digit written once (a fill leaves
    no keyer request nor generator job behind for the next)."""
    rng = random.Random(harness.pick_seed(f"e fill again {gens}"))
    cfg = Config(
        layers=(5, 3, 2),
        rank=4,
        mode="quantized",
        sigma_shift=1,
        population=20,
        seed=rng.randrange(1 << 32),
    ).validate()
    step = rng.randrange(65535)
    img, written, _ = _e_fill(cfg, step, 0, 4, 4, 2, gens, then=((4, 4), (8, 2)))
    board = Scoreboard(f"e fill, third round, {gens} generators")
    for j in range(2):
        exp, mask = e_image(cfg, step, 8 + j)
        depth = exp.shape[1]
        board.check(f"lane {j} E slots [bank, addr, digit]", exp, img[j, :, :depth] * mask)
        assert (written[j, :, :depth] == mask).all(), f"lane {j}: E digits written != once"
    assert not written[2:].any(), "an inactive lane's E digits written"


def test_e_fill_writes_one_element_per_cycle():
    """Digits network (64-64-10), rank 4, 2 lanes: 2 * (64 * 65 + 10 * 65) element writes,
    one per cycle but for each job's B fill and pipeline (``fan + 8``) and the first run
    key: the count ``e_fill_cycles`` states."""
    cfg = Config(layers=(64, 64, 10), mode="quantized").validate()
    _, written, cycles = _e_fill(cfg, 3, 0, 2, 2, 2)
    assert written.sum() == 2 * (64 * 65 + 10 * 65)
    assert cycles == e_fill_cycles(cfg.layers, 2, 4), (
        cycles,
        e_fill_cycles(cfg.layers, 2),
    )


@pytest.mark.parametrize("gens", [2, 4])
def test_e_fill_generators_fill_that_many_lanes_at_once(gens):
    """Digits network, rank 4, 4 lanes, 2 or 4 generators in lockstep: every digit of
    every lane written once (checked against golden by the random test below), in
    ``e_fill_cycles(..., generators)`` cycles within 1 % (measured 10,008 and 5,078
    against 19,868 with one generator)."""
    cfg = Config(layers=(64, 64, 10), mode="quantized").validate()
    _, written, cycles = _e_fill(cfg, 3, 0, 4, 4, 2, gens)
    assert written.sum() == 4 * (64 * 65 + 10 * 65)
    assert written.max() == 1
    expect = e_fill_cycles(cfg.layers, 4, 4, gens)
    assert abs(cycles - expect) <= expect // 100, (cycles, expect)


def test_sliced_ram_slices_hold_what_one_block_ram_holds():
    """A slice is the write granules one ECP5 DP16KD holds (a write enable per 9 bits:
    four up to 512 words, two up to 1,024, one up to 2,048); one slice on the iCE40."""
    from pentegg.rtl.evaluator.sliced import slice_granules_for
    from pentegg.rtl.synth import SynthPlatform

    ecp5, ice40 = SynthPlatform("ecp5"), SynthPlatform("ice40")
    got = {
        (d, g): slice_granules_for(ecp5, d, g)
        for d in (256, 512, 1024, 2048)
        for g in (3, 6, 8, 18)
    }
    assert got[512, 6] == got[256, 8] == got[512, 3] == 4  # 24, 32, 12 bits
    assert got[512, 18] == 2 and got[1024, 18] == 1 and got[2048, 18] == 1
    assert got[1024, 6] == 2 and got[2048, 8] == 1
    assert slice_granules_for(None, 512, 6) == 4
    assert slice_granules_for(ice40, 512, 6) is None


@pytest.mark.parametrize(
    ("width", "granule", "per_slice", "writes", "unit"),
    [
        (40, 8, 2, "direct", 1),
        (36, 18, 2, "registered", 1),
        (30, 3, None, "registered", 1),
        (24, 6, 3, "direct", 1),
        (6, 6, 4, "registered", 1),
        (36, 6, 1, "broadcast", 1),
        (54, 18, 1, "broadcast", 1),
        (30, 3, None, "broadcast", 1),
        (72, 6, 4, "broadcast", 2),
        (108, 18, 2, "broadcast", 3),
        (36, 6, 3, "broadcast", 6),
    ],
)
def test_sliced_ram_gives_the_word_at_the_address_of_three_cycles_before(
    width, granule, per_slice, writes, unit
):
    """Random writes and reads every cycle against a model memory: ``r_data`` is the
    word at the address of three cycles earlier as the memory held it two cycles earlier,
    across slices of a few granules or one slice, with granule writes landing in their
    cycle or, registered, a cycle later, and broadcast writes (a unit of one or more
    granules into the unit it names, units across slices too, through a head register and
    more first-level copies than one) three cycles later
    (``landing`` shows them then). A read of a word written in that cycle is not
    compared (unspecified on a block RAM)."""
    from pentegg.rtl.evaluator.sliced import WRITES, SlicedRAM

    rng = random.Random(harness.pick_seed(f"sliced ram {width} {granule} {writes}"))
    depth = 8
    dut = SlicedRAM(
        width=width, depth=depth, granule=granule, per_slice=per_slice, writes=writes, unit=unit
    )
    n = width // granule
    per = n if per_slice is None else per_slice
    assert dut.slices == -(-n // per)
    latency = dut.write_latency
    assert latency == WRITES[writes]
    mask = (1 << granule) - 1
    board = Scoreboard("sliced ram")
    compared = []

    async def bench(ctx):
        mem = [0] * depth
        pending = [(0, 0, 0)] * latency  # writes in the registers, the next to land first
        history = []  # per cycle: read address, memory at the cycle's start, landing write
        for cycle in range(400):
            ra = rng.randrange(depth)
            wa = rng.randrange(depth)
            ctx.set(dut.r_addr, ra)
            ctx.set(dut.w_addr, wa)
            if writes == "broadcast":
                word = rng.getrandbits(granule * unit)
                index, valid = rng.randrange(n // unit), rng.random() < 0.7
                for sig_, v in ((dut.w_unit, word), (dut.w_index, index), (dut.w_valid, valid)):
                    ctx.set(sig_, v)
                wd = word << (granule * unit * index)
                we = (((1 << unit) - 1) << (unit * index)) if valid else 0
            else:
                wd = rng.getrandbits(width)
                we = rng.getrandbits(n) if rng.random() < 0.7 else 0
                ctx.set(dut.w_data, wd)
                ctx.set(dut.w_en, we)
            landing = pending[0] if latency else (wa, wd, we)
            board.check(f"landing, cycle {cycle}", [landing[2]], [ctx.get(dut.landing)])
            if cycle >= 3:
                addr = history[cycle - 3][0]
                _, snap, (la, _, le) = history[cycle - 2]
                if not (le and la == addr):
                    board.check(f"r_data, cycle {cycle}", [snap[addr]], [ctx.get(dut.r_data)])
                    compared.append(cycle)
            history.append((ra, list(mem), landing))
            await ctx.tick()
            la, ld, le = landing
            for g in range(n):
                if (le >> g) & 1:
                    keep = mem[la] & ~(mask << (g * granule))
                    mem[la] = keep | (ld & (mask << (g * granule)))
            pending = [*pending[1:], (wa, wd, we)]

    _run(dut, bench)
    assert len(compared) > 250


@pytest.mark.parametrize("per_slice", [2, 1])
@pytest.mark.parametrize("writes", ["direct", "registered"])
def test_sliced_ram_slices_take_the_write_address_copy_of_their_first_granule(writes, per_slice):
    """``w_copies`` 3 over 6 granules in slices of 2 (3 slices) and of 1 (6): granule
    ``g`` is written at copy ``g * 3 // 6``'s address. Each copy a different address,
    every granule enabled, then each address read back: a granule holds the data where
    its copy pointed, the old word elsewhere."""
    from pentegg.rtl.evaluator.sliced import SlicedRAM

    granule, n, copies, depth = 4, 6, 3, 8
    dut = SlicedRAM(
        width=granule * n,
        depth=depth,
        granule=granule,
        per_slice=per_slice,
        writes=writes,
        w_copies=copies,
    )
    addrs = [1, 4, 6]
    data = 0xABCDEF

    async def bench(ctx):
        for c, a in enumerate(addrs):
            ctx.set(dut.w_addr[c], a)
        ctx.set(dut.w_data, data)
        ctx.set(dut.w_en, (1 << n) - 1)
        await ctx.tick()
        ctx.set(dut.w_en, 0)
        await ctx.tick().repeat(2)
        for a in addrs:
            ctx.set(dut.r_addr, a)
            await ctx.tick().repeat(3)
            word = ctx.get(dut.r_data)
            for g in range(n):
                got = (word >> (granule * g)) & 0xF
                want = (data >> (granule * g)) & 0xF if addrs[g * copies // n] == a else 0
                assert got == want, f"granule {g} at address {a}: {got:#x}, expected {want:#x}"

    _run(dut, bench)


def test_sliced_ram_slices_read_at_their_read_address_copy():
    """Four slices of one granule, two read address copies: slices 0 and 1 read at copy
    0's address, 2 and 3 at copy 1's (``s * r_copies // slices``)."""
    from pentegg.rtl.evaluator.sliced import SlicedRAM

    dut = SlicedRAM(width=24, depth=8, granule=6, per_slice=1, r_copies=2)
    words = {a: 0x41041 * (a + 1) & 0xFFFFFF for a in range(8)}

    async def bench(ctx):
        for a, w in words.items():
            ctx.set(dut.w_addr, a)
            ctx.set(dut.w_data, w)
            ctx.set(dut.w_en, 0b1111)
            await ctx.tick()
        ctx.set(dut.w_en, 0)
        await ctx.tick().repeat(2)
        for a0, a1 in [(1, 6), (5, 2), (3, 3)]:
            ctx.set(dut.r_addr[0], a0)
            ctx.set(dut.r_addr[1], a1)
            await ctx.tick().repeat(3)
            word = ctx.get(dut.r_data)
            for s, a in enumerate((a0, a0, a1, a1)):
                got, want = (word >> (6 * s)) & 63, (words[a] >> (6 * s)) & 63
                assert got == want, f"slice {s} at address {a}: {got:#x}, expected {want:#x}"

    _run(dut, bench)


def test_sliced_ram_checks_its_write_structure_and_width():
    """An unknown ``writes`` and a width that is not whole granules are refused with the
    choices or the granule named, before anything is built."""
    from pentegg.rtl.evaluator.sliced import SlicedRAM

    with pytest.raises(ValueError, match="writes 'tree' is not one of"):
        SlicedRAM(width=12, depth=8, granule=6, per_slice=None, writes="tree")
    with pytest.raises(ValueError, match="not a multiple of 6"):
        SlicedRAM(width=10, depth=8, granule=6, per_slice=None)
    with pytest.raises(ValueError, match=r"^w_copies=3 .* 1\.\.2$"):
        SlicedRAM(width=12, depth=8, granule=6, per_slice=None, w_copies=3)
    with pytest.raises(ValueError, match=r"^w_copies=2 .* 1\.\.1$"):
        SlicedRAM(width=12, depth=8, granule=6, per_slice=1, writes="broadcast", w_copies=2)
    with pytest.raises(ValueError, match=r"^r_copies=3 .* 1\.\.2$"):
        SlicedRAM(width=12, depth=8, granule=6, per_slice=1, r_copies=3)


def _wide_params(monkeypatch, wide: bool, **kw) -> EvaluatorParams:
    """EvaluatorParams of ``kw``, its ``wide`` forms forced (from 1 lane) or not."""
    from pentegg.rtl.evaluator import params as params_mod

    if wide:
        monkeypatch.setattr(params_mod, "WIDE_LANES", 1)
    p = EvaluatorParams(**kw)
    assert p.wide == wide
    return p


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
def test_score_accumulator_takes_a_beat_every_group_count_cycles(wide, monkeypatch):
    """Three finalizer groups of two lanes, five lanes active, beats back to back (each
    the first sample, so a write is the term alone): a beat is taken every third cycle
    (its groups' terms one per cycle), and every active lane's term is written to its
    member's score address, the inactive lane's not at all; in the narrow forms and the
    wide ones (the lane index g's and i's bits side by side, the groups' terms from a
    shift register loaded by flags)."""
    from pentegg.rtl.evaluator.finalizer import terms_layout
    from pentegg.rtl.evaluator.scores import ScoreAccumulator

    p = _wide_params(monkeypatch, wide, lanes=6, max_width=8, group=2)
    assert (p.finalizers, p.group_lanes) == (3, 2)
    dut = ScoreAccumulator(p)
    rng = random.Random(harness.pick_seed("score accumulator"))
    beats = [
        {
            "i": k % 2,
            "s": (k // 2) % 2,
            "first": 1,
            "term": [rng.randint(-512, 511) for _ in range(3)],
        }
        for k in range(8)
    ]
    first_pair, active = 7, 5
    want = [
        (((first_pair + b["i"] + 2 * g) << 1) | b["s"], b["term"][g])
        for b in beats
        for g in range(3)
        if b["i"] + 2 * g < active
    ]
    taken, writes = [], []

    async def bench(ctx):
        ctx.set(dut.first_pair, first_pair)
        ctx.set(dut.lanes_active, active)
        layout = terms_layout(p)
        for cycle in range(3 * len(beats) + 8):
            k = len(taken)
            ctx.set(dut.terms.valid, k < len(beats))
            if k < len(beats):
                ctx.set(dut.terms.payload, layout.const(beats[k]))
            if ctx.get(dut.w_en):
                writes.append((ctx.get(dut.w_addr), ctx.get(dut.w_data.as_signed())))
            if k < len(beats) and ctx.get(dut.terms.ready):
                taken.append(cycle)
            await ctx.tick()

    _run(dut, bench)
    assert taken == [3 * k + 2 for k in range(len(beats))], taken
    assert writes == want, (
        next((j, w, x) for j, (w, x) in enumerate(zip(writes, want, strict=False)) if w != x)
        if len(writes) == len(want)
        else (len(writes), len(want))
    )


@pytest.mark.parametrize("wide", [False, True], ids=["narrow", "wide"])
@pytest.mark.parametrize("latency", [1, 3])
def test_score_accumulator_sums_each_members_terms_over_the_samples_and_is_busy_until_written(
    latency, wide, monkeypatch
):
    """Three samples of a round (two finalizer groups of two lanes, three lanes active),
    the beats offered with random gaps, through a score memory of ``latency`` cycles:
    each member's score is the sum of its terms (the first sample's written alone, over
    whatever the memory held), and ``busy`` is high in every cycle from a beat's offer
    to its last write and low once all are written."""
    from pentegg.rtl.evaluator.finalizer import terms_layout
    from pentegg.rtl.evaluator.scores import ScoreAccumulator

    p = _wide_params(monkeypatch, wide, lanes=4, max_width=8, group=2, mem_latency=latency)
    assert (p.finalizers, p.group_lanes) == (2, 2)
    dut = ScoreAccumulator(p)
    rng = random.Random(harness.pick_seed(f"score sums {latency} {wide}"))
    first_pair, active = 3, 3
    beats = [
        {"i": i, "s": s, "first": int(b == 0), "term": [rng.randint(-512, 511) for _ in range(2)]}
        for b in range(3)
        for i in range(2)
        for s in range(2)
    ]
    want = {}
    for bt in beats:
        for g in range(2):
            if bt["i"] + 2 * g < active:
                addr = ((first_pair + bt["i"] + 2 * g) << 1) | bt["s"]
                want[addr] = want.get(addr, 0) + bt["term"][g]
    # stale words in the memory: the first sample's term must replace them
    mem = {a: rng.randint(-1000, 1000) for a in range(32)}
    stale = dict(mem)
    res = {"not_busy": [], "busy_end": None}

    async def memory(ctx):
        pipe = [None] * latency
        async for _, _, re, ra, we, wa, wd in ctx.tick().sample(
            dut.r_en, dut.r_addr, dut.w_en, dut.w_addr, dut.w_data.as_signed()
        ):
            if we:
                mem[int(wa)] = int(wd)
            pipe = [int(ra) if re else None, *pipe[:-1]]
            # the read's word, or random bits in a cycle without one (a port shared with
            # the accelerator's other readers)
            word = mem[pipe[-1]] if pipe[-1] is not None else rng.randint(-1000, 1000)
            ctx.set(dut.r_data, word & ((1 << p.score_bits) - 1))

    async def bench(ctx):
        ctx.set(dut.first_pair, first_pair)
        ctx.set(dut.lanes_active, active)
        layout = terms_layout(p)
        k, last_write = 0, 0
        for cycle in range(400):
            offer = k < len(beats) and rng.random() < 0.6
            ctx.set(dut.terms.valid, offer)
            if offer:
                ctx.set(dut.terms.payload, layout.const(beats[k]))
            if (offer or ctx.get(dut.w_en)) and not ctx.get(dut.busy):
                res["not_busy"].append(cycle)
            if ctx.get(dut.w_en):
                last_write = cycle
            if offer and ctx.get(dut.terms.ready):
                k += 1
            await ctx.tick()
        res["busy_end"] = ctx.get(dut.busy)
        assert k == len(beats) and last_write < 390, f"{k} beats taken, last write {last_write}"

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_process(memory)
    sim.add_testbench(bench)
    sim.run()
    assert not res["not_busy"], (
        f"busy low with a beat offered or a write, cycles {res['not_busy'][:4]}"
    )
    assert not res["busy_end"], "busy high after the last write"
    got = {a: mem[a] for a in want}
    assert got == want, {a: (got[a], want[a]) for a in want if got[a] != want[a]}
    stray = [a for a in stale if a not in want and mem[a] != stale[a]]
    assert not stray, f"written outside the active members' scores: {stray}"


@pytest.mark.parametrize(("width", "bounds"), [(4, range(20)), (7, (0, 1, 63, 64, 65, 127, 200))])
def test_the_bound_checks_compare_bit_by_bit_as_greater_than(width, bounds):
    """``above_const(v, c)`` (the sequencer's range checks, written as AND and OR of
    ``v``'s bits so that synthesis keeps them out of adders) is ``v > c`` for every
    value of ``v``, bounds inside the range, at its edges and past it."""
    from amaranth import Module, Signal

    v = Signal(width)
    outs = {c: Signal(name=f"above{c}") for c in bounds}
    m = Module()
    m.d.comb += [o.eq(above_const(v, c)) for c, o in outs.items()]

    async def bench(ctx):
        for x in range(1 << width):
            ctx.set(v, x)
            for c, o in outs.items():
                assert ctx.get(o) == int(x > c), f"v = {x}, bound {c}: got {ctx.get(o)}"

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
