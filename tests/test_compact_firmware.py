"""The compact device's firmware (rtl/compact/firmware/), compiled for this host and driven
through the protocol like any device: every step equal to the golden model to the bit,
RUN init equal to golden's initial state, the controller's refusals and error flags, a
RESET in the middle of a run, and its build parameters checked with one-line errors.
(tests/test_link_fuzz.py fuzzes its protocol beside the RTL device's.)"""

from __future__ import annotations

import json
import random
import subprocess
import time

import numpy as np
import pytest

from pentegg import accel_protocol as ap
from pentegg.device import DeviceError, Trainer, open_device
from pentegg.golden import Config, init_state
from pentegg.link import request_frame, words
from pentegg.rtl.compact.firmware import check_params, defines, native_device
from pentegg.rtl.link.protocol import VERSION, Cmd, Status

DIGITS = ["--task", "digits", "--hidden", "16", "--population", "32", "--batch", "16"]


def _compare(pentegg_cmd, *args):
    r = subprocess.run(
        [*pentegg_cmd, "compare", *args, "--device", "firmware", "--json", "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "args",
    [
        ["--task", "xor", "--steps", "20"],
        ["--task", "xor", "--steps", "20", "--mode", "quantized", "--latent-bits", "5"],
        [*DIGITS, "--steps", "3"],
        [*DIGITS, "--steps", "3", "--mode", "quantized"],
        [*DIGITS, "--steps", "3", "--shaping", "sign", "--update", "pentary"],
        [*DIGITS, "--steps", "2", "--mode", "quantized", "--update", "pentary", "--digits",
         "uniform", "--rank", "16"],
        ["--task", "cartpole", "--population", "16", "--steps", "3"],
    ],
    ids=["xor", "xor-quantized", "digits", "digits-quantized", "digits-sign-pentary",
         "digits-uniform-rank16", "cartpole"],
)  # fmt: skip
def test_firmware_device_steps_equal_golden(pentegg_cmd, args):
    rec = _compare(pentegg_cmd, *args)
    assert rec["identical"] and rec["first_mismatch"] is None
    assert rec["steps"] == int(args[args.index("--steps") + 1])


def test_the_digits_default_step_on_the_firmware_equals_golden(pentegg_cmd):
    """The whole digits default (64-64-10, population 256, batch 256)."""
    rec = _compare(pentegg_cmd, "--task", "digits", "--steps", "1")
    assert rec["identical"]


def test_train_on_the_firmware_reproduces_golden_weights_sha256(pentegg_cmd):
    out = {}
    for device in ("golden", "firmware"):
        r = subprocess.run(
            [*pentegg_cmd, "train", "--task", "xor", "--steps", "30", "--device", device,
             "--json", "--quiet"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        out[device] = json.loads(r.stdout.strip().splitlines()[-1])["weights_sha256"]
    assert out["firmware"] == out["golden"]


def _device(cfg, **over):
    return open_device("firmware", cfg=cfg, batch=4, samples=16, quiet=True, **over)


@pytest.mark.parametrize("init", ["zero", "random"])
@pytest.mark.parametrize("update", ["latent", "pentary"])
@pytest.mark.parametrize("digits", ["binomial", "uniform"])
def test_run_init_writes_the_golden_initial_state(init, update, digits):
    cfg = Config(
        layers=(7, 9, 3), population=8, init=init, update=update, digits=digits, seed=11,
        latent_bits=6, latent_shift=2,
    )  # fmt: skip
    with _device(cfg) as dev:
        dev.reset()
        dev.write_regs(ap.config_regs(cfg, step=0, batch=4))
        want = init_state(cfg)
        n = len(ap.weight_words(want.weights))
        dev.write_mem("weights", 0, [0x7FFF] * n)  # garbage that init must overwrite
        dev.run("init")
        got = Trainer(dev, object(), cfg, 4).read_state(0)
        for l in range(cfg.n_layers):
            np.testing.assert_array_equal(got.weights[l], want.weights[l], err_msg=f"W{l}")
            if update == "latent":
                np.testing.assert_array_equal(got.latent[l], want.latent[l], err_msg=f"V{l}")
        # the last word of each layer is padded with the code of 0 (spec 1.3)
        words_ = dev.read_mem("weights", 0, len(ap.weight_words(want.weights)))
        np.testing.assert_array_equal(words_, ap.weight_words(want.weights))


def _status_after(dev, kind):
    dev.request(Cmd.RUN, words([ap.RUN_KINDS[kind]]))
    while (st := dev.status())["busy"]:
        pass
    return st


@pytest.mark.parametrize("population", [2, 6, 64, 250])
def test_rank_shaping_equals_golden_on_scores_full_of_ties(population):
    """The firmware's centered ranks (a merge sort and a walk over runs of equal scores)
    give golden's g for scores drawn from a few values (long runs of ties), at a
    population that is not a power of two as well."""
    from pentegg.golden import shape

    cfg = Config(layers=(2, 8, 2), population=population)
    rng = np.random.default_rng(population)
    with _device(cfg) as dev:
        dev.reset()
        dev.write_regs(ap.config_regs(cfg, step=0, batch=4))
        few, many = rng.integers(-3, 4, size=population), rng.integers(-500, 500, size=population)
        for values in (few, many):
            dev.write_mem("scores", 0, [int(v) & 0xFFFFFFFF for v in values])
            assert _status_after(dev, "update")["error"] == 0
            g = [int(v) for v in dev.read_mem("g", 0, population // 2)]
            assert g == shape(values, "rank").tolist()


@pytest.mark.parametrize(
    "regs,kind,flags",
    [
        ({"n_layers": 3}, "train", [13]),  # more layers than the build holds
        ({"width1": 0}, "eval", [13]),
        ({"population": 66}, "train", [13]),  # above max_population
        ({"steps": 0}, "train", [11]),
        ({"step": 65534, "steps": 2}, "train", [11]),
        ({"step": 65535}, "update", [11]),
        ({"margin": 0}, "eval", [5]),
        ({"sigma_shift": 9, "batch": 5}, "eval", [3, 4]),
        ({"population": 7}, "eval", [2]),
        ({"population": 7}, "update", [9]),
        ({"shared": 0, "batch": 4, "population": 64}, "eval", [15]),  # members do not fit
    ],
)
def test_runs_the_controller_refuses_set_its_error_flags(regs, kind, flags):
    cfg = Config(layers=(2, 8, 2), population=64)
    with _device(cfg) as dev:
        dev.reset()
        dev.write_regs(ap.config_regs(cfg, step=0, batch=4))
        dev.write_regs(regs)
        st = _status_after(dev, kind)
        assert st["error"] == sum(1 << f for f in flags), ap.decode_error(st["error"])
        assert dev.read_regs(["status"])["status"] == 0b10  # idle, error
        # the next run clears the flags
        dev.write_regs(ap.config_regs(cfg, step=0, batch=4))
        dev.write_mem("batch", 0, [0, 1, 2, 3])
        assert _status_after(dev, "eval")["error"] == 0


def test_a_label_past_the_last_class_sets_flag_8():
    cfg = Config(layers=(2, 8, 2), population=8)
    with _device(cfg) as dev:
        dev.reset()
        dev.write_regs(ap.config_regs(cfg, step=0, batch=2))
        dev.write_mem("labels", 0, [0, 2])
        dev.write_mem("batch", 0, [0, 1])
        assert _status_after(dev, "eval")["error"] == 1 << 8


def test_reset_during_a_run_ends_it_and_keeps_the_memories():
    """A long run, a RESET in the middle: the device answers at once, is idle, every
    register is back at its reset value, and the next run from the same state gives the
    same result as one that was never interrupted."""
    cfg = Config(layers=(64, 64, 10), population=256, seed=3)
    rng = np.random.default_rng(1)
    x = rng.integers(-127, 128, size=(64, 64))
    y = rng.integers(0, 10, size=64)

    class Task:
        x_train, y_train = x, y

        @staticmethod
        def batch_indices(cfg, step, batch):
            return np.arange(step, step + batch) % 64

    with open_device(
        "firmware", cfg=cfg, batch=64, samples=64, quiet=True, member_bytes=16, logit_bytes=16
    ) as dev:
        tr = Trainer(dev, Task, cfg, 64)
        tr.start(init_state(cfg))
        dev.write_mem("batch", 0, Task.batch_indices(cfg, 0, 64))
        dev.request(Cmd.RUN, words([ap.RUN_KINDS["train"]]))
        time.sleep(0.05)
        assert dev.status()["busy"] == 1
        dev.reset()
        st = dev.status()
        assert st == {"busy": 0, "error": 0, "step": 0}
        regs = dev.read_regs(["population", "tau", "steps", "width0", "cycles"])
        assert regs == {"population": 2, "tau": 16, "steps": 1, "width0": 1, "cycles": 0}
        # the step, rerun whole, equals golden
        tr.start(init_state(cfg))
        state, scores = tr.steps(0, 1)
    from pentegg.golden import es_step_classify

    want, info = es_step_classify(init_state(cfg), x[:64], y[:64])
    np.testing.assert_array_equal(scores, info.scores)
    for l in range(2):
        np.testing.assert_array_equal(state.weights[l], want.weights[l])


def test_a_repeated_run_request_does_not_run_twice():
    cfg = Config(layers=(2, 8, 2), population=8)
    with _device(cfg) as dev:
        dev.reset()
        dev.write_regs(ap.config_regs(cfg, step=5, batch=4))
        dev.write_mem("batch", 0, [0, 1, 2, 3])
        t = dev.transport
        frame = request_frame(Cmd.RUN, 77, words([ap.RUN_KINDS["update"]]))
        from pentegg.link import FrameReader, cobs_decode, cobs_encode, parse_response

        reader = FrameReader()
        for _ in range(2):  # the same seq twice: the second is a retry
            t.write(b"\x00" + cobs_encode(frame) + b"\x00")
            got = []
            while not got:
                got = reader.feed(t.read(0.5))
            assert parse_response(cobs_decode(got[0])).status == Status.OK
        while dev.status()["busy"]:
            pass
        assert dev.status()["step"] == 6


def test_firmware_parameters_are_checked_with_one_line_errors():
    with pytest.raises(ValueError, match=r"rank=5 is not one of 1, 4, 16, 64"):
        check_params(rank=5)
    with pytest.raises(ValueError, match=r"max_population=7 is not an even integer"):
        check_params(max_population=7)
    with pytest.raises(ValueError, match=r"holds Z in 32 bits"):
        check_params(max_population=4096, rank=64)
    with pytest.raises(TypeError, match="unknown firmware parameter"):
        check_params(lanez=4)
    for name in ("sample_bytes", "member_bytes"):  # whole packed words, as the RTL's
        with pytest.raises(ValueError, match=rf"^{name}=18 is not a multiple of 4 in 16"):
            check_params(**{name: 18})
    with pytest.raises(DeviceError, match="cannot build the firmware device"):
        open_device("firmware", cfg=Config(layers=(2, 8, 2), population=64), lanes=0)
    d = defines(check_params(mode="quantized", update="pentary"))
    assert d["QUANTIZED"] == 1 and d["PENTARY"] == 1 and d["SPEC_VERSION_WORD"] == 1 << 16
    assert d["PROTOCOL_VERSION"] == VERSION


def test_native_builds_are_cached_and_shared(tmp_path):
    a = native_device({"max_width": 8}, cache_dir=tmp_path)
    t = a.stat().st_mtime_ns
    b = native_device({"max_width": 8}, cache_dir=tmp_path)
    assert a == b and b.stat().st_mtime_ns == t
    assert native_device({"max_width": 9}, cache_dir=tmp_path) != a


def test_random_register_and_memory_round_trips_keep_each_width():
    """Writes keep each register's and memory's low bits; signed memories read back
    sign-extended (the RTL accelerator's widths, docs/rtl.md)."""
    cfg = Config(layers=(2, 8, 2), population=8)
    rng = random.Random(7)
    with _device(cfg, max_batch=4) as dev:
        dev.reset()
        for name, bits in (("steps", 16), ("population", 13), ("tau", 12), ("seed", 32)):
            v = rng.getrandbits(32)
            dev.write_regs({name: v})
            assert dev.read_regs([name])[name] == v & ((1 << bits) - 1)
        score_bits = (254 * 4).bit_length() + 1  # bits_for(-1016, 1016) = 11
        v = [rng.getrandbits(32) for _ in range(8)]
        dev.write_mem("scores", 0, v)
        got = dev.read_mem("scores", 0, 8)
        for w, g in zip(v, got, strict=True):
            s = w & ((1 << score_bits) - 1)
            assert g == (s - (1 << score_bits) if s >> (score_bits - 1) else s)
        dev.write_mem("latent", 0, [0xFF, 0x80, 0x17F])
        assert list(dev.read_mem("latent", 0, 3)) == [-1, -128, 127]
        dev.write_mem("samples", 0, [0x1FF])
        assert list(dev.read_mem("samples", 0, 1)) == [0xFF]


def test_a_dataset_larger_than_the_sample_memory_is_sent_a_batch_at_a_time():
    """The iCEBreaker's compact device holds a batch, not the digits training set: the
    host sends each step's samples and labels, and the steps stay golden's."""
    from pentegg.golden import es_step
    from pentegg.tasks import get_task

    task = get_task("digits")
    cfg = Config(layers=(64, 16, 10), population=16, seed=2)
    batch = 8
    with open_device(
        "firmware", cfg=cfg, batch=batch, samples=len(task.x_train), quiet=True,
        sample_bytes=batch * 64, label_words=16, batch_words=16,
    ) as dev:  # fmt: skip
        tr = Trainer(dev, task, cfg, batch)
        state = init_state(cfg)
        tr.start(state)
        assert tr.stream
        for t in range(3):
            state, info = es_step(state, task.scorer(cfg, t, batch))
            got, scores = tr.steps(t, 1)
            np.testing.assert_array_equal(scores, info.scores, err_msg=f"scores, step {t}")
            for l in range(cfg.n_layers):
                np.testing.assert_array_equal(got.weights[l], state.weights[l])
                np.testing.assert_array_equal(got.latent[l], state.latent[l])
        with pytest.raises(DeviceError, match=r"a batch of 32 x 64 \(the sample memory holds"):
            Trainer(dev, task, cfg, 32).start(state)


@pytest.mark.parametrize(
    "cfg, samples",
    [
        (Config(layers=(64, 64, 10), population=16), 32),
        (Config(layers=(7, 9, 3), population=8, update="pentary"), 0),
    ],
    ids=["digits-shaped", "pentary-host-scored"],
)
def test_every_memory_ends_where_the_rtl_devices_does(cfg, samples):
    """The host cannot tell the compact device from the RTL Device by its memories: for
    the same build parameters each memory's last word reads (and writes) ``OK`` and the
    word past it is ``PARAM``, at the depths of ``Accelerator.host_memories`` (the
    weights: the largest network's packed words, not the power of two the RTL memory is
    built with); a read of a write-only memory (the packed selects), a write of a
    read-only one and any access of a memory the build does not have (latent in a
    pentary build) is ``PARAM``."""
    from pentegg.device import sim_params
    from pentegg.rtl.catalog import silence
    from pentegg.rtl.link.device import Device as DeviceTop

    p = sim_params(cfg, batch=4, samples=samples)
    top = DeviceTop(**p)
    silence(top)  # built for its memories' depths only
    mems = top.accel.host_memories
    assert ("latent" in mems) == (cfg.update == "latent")
    with open_device("firmware", cfg=cfg, batch=4, samples=samples, quiet=True) as dev:
        for name in ap.MEMORIES:
            if name not in mems:
                with pytest.raises(DeviceError, match="READ_MEM refused: PARAM"):
                    dev.read_mem(name, 0, 1)
                continue
            _, depth, access = mems[name]
            if "r" in access:
                dev.read_mem(name, depth - 1, 1)
            with pytest.raises(DeviceError, match="READ_MEM refused: PARAM"):
                dev.read_mem(name, depth if "r" in access else 0, 1)
            if "w" in access:
                dev.write_mem(name, depth - 1, [0])
            with pytest.raises(DeviceError, match="WRITE_MEM refused: PARAM"):
                dev.write_mem(name, depth if "w" in access else 0, [0])
