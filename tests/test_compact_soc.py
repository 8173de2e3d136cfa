# amaranth: UnusedElaboratable=no
"""The compact device's hardware (rtl/compact/soc.py, boot.py): the flash boot in the
Amaranth simulator against a model of the SPI flash that checks mode 0's COPI timing, the
release's framing and tRES1 (the image copied, then run; an erased flash; FlashBoot
alone: exactly the image's words, the length's checks, a reset during the copy), the
MMIO registers (a program echoing a byte; TX back-pressure, an RX flood, the unmapped
regions, a write to RX; reset clearing CTRL), and the whole device (the RV32I core running
the firmware, Verilated) through the host protocol: its steps equal the golden model's."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from amaranth.sim import Simulator

from pentegg.golden import Config
from pentegg.rtl.compact.firmware import Image, flash_image
from pentegg.rtl.compact.soc import MMIO_BASE, RAM_BASE, CompactSoC
from pentegg.sim.rv32_iss import Asm

RAM_BYTES = 4096
OFFSET = 0x100


def _program() -> list[int]:
    """Write CTRL = busy, echo one received byte + 1 back, then stop."""
    a = Asm(base=RAM_BASE)
    a.li("s0", MMIO_BASE)
    a.addi("t0", "zero", 1)
    a.sw("t0", 8, "s0")  # CTRL: busy
    a.label("wait")
    a.lw("t1", 0, "s0")  # RX
    a.andi("t2", "t1", 0x100)
    a.beq("t2", "zero", "wait")
    a.addi("t1", "t1", 1)
    a.sw("t1", 4, "s0")  # TX
    a.ebreak()
    return a.words()


class FlashModel:
    """An SPI flash (mode 0) answering READ (0x03 and a 24-bit address) from ``data`` at
    ``base`` (0xFF elsewhere: erased); other commands are clocked in and ignored. A
    command is what is clocked in after CS falls (CS low from the start frames none). It
    starts in deep power-down: it answers a command only when CS fell at least
    ``wake_cycles`` after the CS rise that ended a release (0xAB; tRES1, 3 us, at up to
    80 MHz: 240 cycles), CIPO high until then. A COPI change in the cycle SCK rises (mode
    0: COPI changes while SCK is low) is recorded in ``errors``."""

    def __init__(self, data: bytes, base: int, wake_cycles: int = 240):
        self.mem = {base + i: b for i, b in enumerate(data)}
        self.wake_cycles = wake_cycles
        self.errors: list[str] = []

    async def run(self, ctx, spi):
        bits = nbits = 0  # bits clocked in since CS fell (COPI, on rising edges)
        prev_cs, prev_sck, prev_copi = ctx.get(spi.cs), 0, 0
        cycle = 0
        selected = False  # CS fell and is low
        awake = None  # the cycle from which the flash answers (after a release)
        answers = False  # this command is answered (CS fell after ``awake``)
        ctx.set(spi.cipo, 1)
        async for _ in ctx.tick():
            cycle += 1
            cs, sck, copi = ctx.get(spi.cs), ctx.get(spi.sck), ctx.get(spi.copi)
            if cs:
                if selected and nbits == 8 and bits == 0xAB:  # the release ends
                    awake = cycle + self.wake_cycles
                bits = nbits = 0
                selected = False
            elif prev_cs:  # CS falls: a command starts
                selected = True
                answers = awake is not None and cycle >= awake
            if selected and sck and not prev_sck:
                if copi != prev_copi:
                    self.errors.append(f"cycle {cycle}: COPI changed as SCK rose")
                bits, nbits = bits << 1 | copi, nbits + 1
            elif selected and not sck and prev_sck and nbits >= 32 and answers:
                head = bits >> (nbits - 32)  # command and address: the next data bit
                if head >> 24 == 0x03:
                    k = nbits - 32
                    byte = self.mem.get((head & 0xFFFFFF) + k // 8, 0xFF)
                    ctx.set(spi.cipo, byte >> (7 - k % 8) & 1)
            prev_cs, prev_sck, prev_copi = cs, sck, copi


def _rx_sender(dut, rx: bytes):
    """A testbench that offers the bytes ``rx`` to the SoC's RX stream, each until taken."""

    async def host(ctx):
        for b in rx:
            ctx.set(dut.rx.payload, b)
            ctx.set(dut.rx.valid, 1)
            await ctx.tick().until(dut.rx.ready)
        ctx.set(dut.rx.valid, 0)

    return host


def _boot(flash_bytes: bytes, cycles: int, rx=b""):
    dut = CompactSoC(image=[], ram_bytes=RAM_BYTES, boot="flash", flash_offset=OFFSET)
    flash = FlashModel(flash_bytes, OFFSET)
    out = {"busy": 0, "error": 0, "halted": 0, "tx": []}

    host = _rx_sender(dut, rx)

    async def bench(ctx):
        ctx.set(dut.tx.ready, 1)
        for _ in range(cycles):
            await ctx.tick()
            if ctx.get(dut.tx.valid):
                out["tx"].append(ctx.get(dut.tx.payload))
            if ctx.get(dut.halted):
                break
        for k in ("busy", "error", "halted"):
            out[k] = ctx.get(getattr(dut, k))

    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def flash_process(ctx):
        await flash.run(ctx, dut.flash)

    sim.add_testbench(flash_process, background=True)
    sim.add_testbench(host)
    sim.add_testbench(bench)
    sim.run()
    out["spi"] = flash.errors
    return out


def test_flash_boot_copies_the_image_into_the_ram_and_runs_it():
    words = _program()
    img = flash_image(Image(tuple(words), RAM_BASE, 0, 0))
    out = _boot(img, 60_000, rx=b"\x41")
    assert out["halted"] == 1, "the program did not run to its ebreak"
    assert out["busy"] == 1 and out["error"] == 0
    assert out["tx"] == [0x42]
    assert out["spi"] == [], "the boot's SPI timing"


def test_an_erased_flash_sets_the_error_output_and_stops():
    out = _boot(b"", 20_000)
    assert out["error"] == 1 and out["busy"] == 0 and out["halted"] == 0


def _flash_boot(flash_bytes: bytes, max_bytes: int, reset_at: int | None = None):
    """FlashBoot alone against the flash model: the RAM words it writes (address, data),
    its outputs when it stops (done, error or 20,000 cycles), the model's SPI errors; a
    reset ``reset_at`` cycles in (two cycles long) starts it again."""
    from amaranth import Module, ResetInserter, Signal

    from pentegg.rtl.compact.boot import FlashBoot

    fb = FlashBoot(offset=OFFSET, max_bytes=max_bytes)
    rst = Signal()
    m = Module()
    m.submodules.fb = ResetInserter(rst)(fb)
    flash = FlashModel(flash_bytes, OFFSET)
    out = {"writes": []}

    async def bench(ctx):
        for cycle in range(20_000):
            ctx.set(rst, reset_at is not None and reset_at <= cycle < reset_at + 2)
            await ctx.tick()
            if ctx.get(rst):
                out["writes"] = []  # the copy starts again
            elif ctx.get(fb.w_en):
                out["writes"].append((ctx.get(fb.w_addr), ctx.get(fb.w_data)))
            if ctx.get(fb.done) or ctx.get(fb.error):
                break
        out.update(done=ctx.get(fb.done), error=ctx.get(fb.error), spi=flash.errors)

    async def flash_process(ctx):
        await flash.run(ctx, fb.spi)

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(flash_process, background=True)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize("n_words", [1, 2, 15])
def test_flash_boot_writes_the_image_words_and_no_other(n_words):
    """Images of one word, two, and as long as the RAM (``max_bytes`` 60: 15 words, a
    count that is not a power of two): RAM words 0 .. n - 1 get the image's words,
    nothing else is written, then ``done``; COPI changes only while SCK is low, the
    release is a command of its own and the READ waits tRES1 after it."""
    words = [(0x1357_9BDF * (i + 1) ^ 0x8040_2010) & 0xFFFF_FFFF for i in range(n_words)]
    img = flash_image(Image(tuple(words), RAM_BASE, 0, 0))
    out = _flash_boot(img, max_bytes=60)
    assert out["writes"] == list(enumerate(words)), "the RAM words written"
    assert (out["done"], out["error"]) == (1, 0)
    assert out["spi"] == [], "the boot's SPI timing"


@pytest.mark.parametrize("length", [0, 6, 64, 0xFFFF_FFFF], ids=["0", "6", "64", "erased"])
def test_flash_boot_refuses_an_empty_odd_or_too_long_image(length):
    """A length of 0, not a multiple of 4, or above ``max_bytes`` (60) sets ``error``,
    writes no RAM word and never raises ``done``."""
    img = length.to_bytes(4, "little") + bytes(range(64))
    out = _flash_boot(img, max_bytes=60)
    assert out["writes"] == [], f"length {length}: RAM words written"
    assert (out["done"], out["error"]) == (0, 1), f"length {length}: done, error"


def test_a_reset_during_the_copy_ends_the_read_and_the_boot_copies_again():
    """A reset in the middle of the image: CS rises (the flash drops the READ), and the
    boot after it copies the whole image from its start."""
    words = list(range(0x100, 0x10F))
    img = flash_image(Image(tuple(words), RAM_BASE, 0, 0))
    out = _flash_boot(img, max_bytes=60, reset_at=1200)  # about the 6th word
    assert out["writes"] == list(enumerate(words)), "the RAM words written after the reset"
    assert (out["done"], out["error"]) == (1, 0)
    assert out["spi"] == [], "the boot's SPI timing"


def test_flash_image_is_the_length_then_the_words():
    img = flash_image(Image((0x11223344, 0x55667788), RAM_BASE, 0, 0))
    assert img == bytes.fromhex("080000004433221188776655")


def test_soc_parameters_are_checked():
    with pytest.raises(ValueError, match="does not fit the RAM"):
        CompactSoC(image=[0] * 2000, ram_bytes=4096)
    with pytest.raises(ValueError, match=r"flash_offset=16777216 is not an integer in"):
        CompactSoC(image=[], ram_bytes=4096, boot="flash", flash_offset=1 << 24)
    with pytest.raises(ValueError, match="boot='rom' is not one of preload, flash"):
        CompactSoC(image=[], ram_bytes=4096, boot="rom")
    with pytest.raises(ValueError, match="rx_depth=100 is not a power of two"):
        CompactSoC(image=[], ram_bytes=4096, rx_depth=100)


def _mmio_program(n_rx: int) -> list[int]:
    """Sends "A", "B" (the host not reading yet: the TX FIFO fills), then TX's room bit
    + 0x30, then the OR of words read from the unmapped regions 0 and 3, then writes RX
    (no byte taken), then echoes ``n_rx`` received bytes, then stops."""
    a = Asm(base=RAM_BASE)
    a.li("s0", MMIO_BASE)
    for b in b"AB":
        a.addi("t0", "zero", b)
        a.sw("t0", 4, "s0")
    a.lw("t0", 4, "s0")  # TX: bit 0 room
    a.andi("t0", "t0", 1)
    a.addi("t0", "t0", 0x30)
    a.sw("t0", 4, "s0")
    a.lw("t0", 0x100, "zero")  # region 0
    a.li("s1", 0x3000_0000)
    a.lw("t1", 0, "s1")  # region 3: no engine in this SoC
    a.or_("t0", "t0", "t1")
    a.sw("t0", 4, "s0")
    a.sw("t0", 0, "s0")  # a write to RX
    a.addi("s2", "zero", n_rx)
    a.label("next")
    a.lw("t1", 0, "s0")  # RX
    a.andi("t2", "t1", 0x100)
    a.beq("t2", "zero", "next")
    a.sw("t1", 4, "s0")
    a.addi("s2", "s2", -1)
    a.bne("s2", "zero", "next")
    a.ebreak()
    return a.words()


def test_mmio_waits_for_room_keeps_every_byte_and_answers_unmapped_regions_with_0():
    """A program against the MMIO registers (``_mmio_program``), the host sending more
    bytes than the RX FIFO holds (``rx_depth`` 16) at once and not reading TX for the
    first 3,000 cycles: TX writes wait for room (none lost), TX reads no room once two
    bytes wait, regions 0 and 3 read 0, a write to RX takes no byte, and every received
    byte comes back in order."""
    rx = bytes(range(0x61, 0x61 + 20))
    dut = CompactSoC(image=_mmio_program(len(rx)), ram_bytes=RAM_BYTES, rx_depth=16)
    out = {"tx": []}

    host = _rx_sender(dut, rx)

    async def bench(ctx):
        halted = 0
        for cycle in range(20_000):
            ctx.set(dut.tx.ready, cycle >= 3_000)
            if ctx.get(dut.tx.valid) and ctx.get(dut.tx.ready):  # taken at this edge
                out["tx"].append(ctx.get(dut.tx.payload))
            await ctx.tick()
            if ctx.get(dut.halted):  # the bytes still in the FIFO leave in 8 cycles
                halted = halted or cycle
                if cycle > halted + 8:
                    break
        out["halted"] = ctx.get(dut.halted)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(host, background=True)  # (a stalled program takes no more bytes)
    sim.add_testbench(bench)
    sim.run()
    assert out["halted"] == 1, f"the program did not run to its ebreak: sent {bytes(out['tx'])}"
    want = b"AB0\x00" + rx
    assert bytes(out["tx"]) == want, f"TX bytes: {bytes(out['tx'])}, want {want}"


def test_reset_clears_ctrl():
    """``reset`` clears CTRL (busy and error, set by a program that then stops): both
    outputs low the cycle after it ends, before the program sets them again."""
    a = Asm(base=RAM_BASE)
    a.li("s0", MMIO_BASE)
    a.addi("t0", "zero", 3)
    a.sw("t0", 8, "s0")  # CTRL: busy, error
    a.ebreak()
    dut = CompactSoC(image=a.words(), ram_bytes=RAM_BYTES)
    out = {}

    async def bench(ctx):
        await ctx.tick().until(dut.halted)
        out["before"] = ctx.get(dut.busy), ctx.get(dut.error)
        ctx.set(dut.reset, 1)
        await ctx.tick().repeat(2)
        ctx.set(dut.reset, 0)
        await ctx.tick()
        out["after"] = ctx.get(dut.busy), ctx.get(dut.error)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert out == {"before": (1, 1), "after": (0, 0)}, f"busy, error: {out}"


# ---------------------------------------------------------------- the whole device


def _compare(pentegg_cmd, *args):
    r = subprocess.run(
        [*pentegg_cmd, "compare", *args, "--device", "sim-compact", "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["--task", "xor", "--steps", "2", "--mode", "quantized", "--update", "pentary",
         "--shaping", "sign"],
        ["--task", "xor", "--steps", "2"],
    ],
    ids=["xor-quantized-pentary-sign", "xor"],
)  # fmt: skip
def test_the_compact_device_steps_equal_golden(pentegg_cmd, args):
    """``compare --device sim-compact``: the iCEBreaker's build (low-rank xor: the
    datapath computes the forward pass; quantized mode, which it does not take: the
    firmware)."""
    rec = _compare(pentegg_cmd, *args)
    assert rec["identical"] and rec["steps"] == int(args[args.index("--steps") + 1])


@pytest.mark.parametrize("engine", [1, 0], ids=["datapath", "firmware"])
@pytest.mark.parametrize(
    "task, cfg, batch, steps",
    [
        ("xor", Config(layers=(2, 8, 2), population=64), 4, 3),
        ("cartpole", Config(layers=(4, 16, 2), population=8, latent_shift=1, sigma_shift=0), 1, 2),
    ],
    ids=["xor-shared-inputs", "cartpole-per-member-inputs"],
)
def test_the_compact_device_with_and_without_its_datapath_steps_equal_golden(
    task, cfg, batch, steps, engine
):
    """The datapath (rtl/compact/engine.py; the iCEBreaker's build) or the firmware on
    the core computes the forward pass: shared inputs (xor: per sample the base product,
    per pair the noise and both members) and per-member inputs (CartPole: host-scored);
    with the datapath its VOTE op also makes the update's votes."""
    _steps_equal_golden(task, cfg, batch, steps, engine)


@pytest.mark.parametrize(
    "task, cfg, batch, steps",
    [
        # layer 0's votes in four blocks of rows (48 x 65 > 3 Z_WORDS), the pentary update
        # (its one step moves 221 of layer 0's weights and 27 of layer 1's); a last layer
        # of 49 inputs: the firmware compares a sample's logits while the engine runs the
        # next sample's layers (accel.c, held_rows and held_scores)
        ("digits", Config(layers=(64, 48, 10), population=32, update="pentary", tau=64), 16, 1),
        # batch 3: a group of shared samples smaller than the engine's slots
        ("xor", Config(layers=(2, 8, 2), population=16, rank=1, shaping="sign"), 3, 3),
    ],
    ids=["digits-pentary", "xor-rank1-sign"],
)
def test_the_datapath_votes_equal_golden(task, cfg, batch, steps):
    """The datapath's VOTE op (the update's votes): in blocks of rows when a layer's do not
    fit its Z memory, at rank 1 as at rank 4, under the pentary update and sign shaping
    as under the defaults (above); the digits batch fills the engine's four sample slots
    four times, xor's three of them; digits' scores from compares deferred into the
    engine's next ops (a wide last layer), xor's at once."""
    _steps_equal_golden(task, cfg, batch, steps, 1)


def _steps_equal_golden(task, cfg, batch, steps, engine):
    """``steps`` ES steps on the compact device equal golden's: scores and state; for a
    host-scored task also every member's logits (the host's scores see only their
    argmax) on random inputs with the int8 extremes, at the step after the last."""
    from pentegg.cmd_compare import compare_states, first_difference
    from pentegg.device import Trainer, open_device
    from pentegg.golden import es_step, init_state, make_noise
    from pentegg.golden.forward import population_forward
    from pentegg.sim.scoreboard import compare
    from pentegg.tasks import get_task

    t = get_task(task)
    samples = len(getattr(t, "x_train", ()))
    state = init_state(cfg)
    with open_device(
        "sim-compact", cfg=cfg, batch=batch, samples=samples, quiet=True, timeout=60,
        score_bound=t.score_bound(batch), engine=engine,
    ) as dev:  # fmt: skip
        tr = Trainer(dev, t, cfg, batch)
        tr.start(state)
        for step in range(steps):
            state, info = es_step(state, t.scorer(cfg, step, batch))
            got, scores = tr.steps(step, 1)
            assert first_difference(info.scores, scores) is None, f"scores, step {step}"
            assert compare_states(state, got) is None, f"state, step {step}"
        if not tr.classify:
            rng = np.random.default_rng(steps)
            x = rng.integers(-127, 128, (cfg.population, batch, cfg.layers[0]))
            x[0, 0], x[-1, -1] = 127, -127
            want = population_forward(cfg, state.weights, make_noise(cfg, steps), x)
            compare(f"logits at step {steps}", want, tr.forward(x))


def test_bench_link_on_the_compact_device_predicts_the_icebreaker(pentegg_cmd):
    """``pentegg bench link --device sim-compact``: cycles and link bytes of an xor step on
    the compact device, and the predicted step time on the board that runs it (the
    iCEBreaker at its compact core's clock), cycles / clock + bytes * 10 / baud."""
    from pentegg.boards.icebreaker import COMPACT_CLOCK_MHZ

    r = subprocess.run(
        [*pentegg_cmd, "bench", "link", "--device", "sim-compact", "--tasks", "xor",
         "--steps", "1", "--json"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert rec["device"] == "sim-compact"
    assert rec["boards"] == {
        "icebreaker": {"clock_hz": COMPACT_CLOCK_MHZ * 1_000_000, "baud": 3_000_000}
    }
    (task,) = rec["tasks"]
    assert task["hypothetical_boards"] == []  # the iCEBreaker runs this core
    for way in ("per_step", "chunked"):
        w = task[way]
        assert w["cycles"] > 100_000 and w["link_bytes"] > 0
        want = 1e3 * (w["cycles"] / (COMPACT_CLOCK_MHZ * 1e6) + w["link_bytes"] * 10 / 3e6)
        assert abs(w["predicted_ms"]["icebreaker"] - want) < 1e-6
