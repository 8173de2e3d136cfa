"""The host's driver of a pentegg device (docs/protocol.md): one API over any transport.

:class:`Device` speaks the framed protocol: one request outstanding, sequence numbers,
retries on timeouts and on corrupted frames, one-line :class:`DeviceError` for anything the
device refuses. :class:`Trainer` runs ES steps of a training task on a device and reads the
state back as a golden :class:`~pentegg.golden.TrainState`, so the host's training loop,
checkpoints and ``compare`` treat a device exactly like the golden model.

Transports (``pentegg.transport``): ``sim`` (the accelerator's Verilog in a native
Verilator harness, built for the job's elaboration parameters and cached) and
``serial:PORT[@BAUD]`` (a board).
"""

from __future__ import annotations

import struct
import sys
import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from . import accel_protocol as ap
from .golden import SPEC_VERSION, Config, TrainState
from .golden.digit import DIGITS_PER_WORD
from .link import (
    FrameError,
    FrameReader,
    Response,
    VersionMismatch,
    cobs_decode,
    decode_info,
    parse_response,
    request_bytes,
    words,
)
from .rtl.accelerator import PACKED_MEMORIES
from .rtl.control.registers import register_map
from .rtl.link.protocol import VERSION, Cmd, Status, max_payload

__all__ = ["Device", "DeviceError", "Trainer", "check_build", "open_device", "sim_params"]

#: The memories whose words the device returns sign-extended.
SIGNED_MEMORIES = {"latent", "scores", "g", "logits"}

#: The longest wait between STATUS polls during a RUN on the simulated compact device.
#: Its firmware answers each poll between two pairs (a few thousand cycles); polled every
#: 10 ms of wall time, the simulation (about 3 M cycles a second) would spend a large
#: part of its cycles on them, where the board (48 M cycles a second, polled as often)
#: spends little: 0.2 s of the simulation is about 10 ms of the board.
SIM_COMPACT_POLL_S = 0.2

#: Seconds :func:`open_device` waits for a response before a retry: a board's link can
#: lose or corrupt a frame, and a retry (docs/protocol.md) recovers it soon; a simulated
#: device's pipe loses nothing, and a late answer only means the simulation is slow (a
#: WRITE_MEM to the simulated compact device missed 5 s on a machine running seven
#: processes on two cores), so it is given longer.
BOARD_TIMEOUT_S = 5.0
SIM_TIMEOUT_S = 60.0


class DeviceError(Exception):
    """The device refused a request, stopped answering, or does not fit the job."""


class NoAnswer(DeviceError):
    """No well-formed answer came to a request, through every retry (a wrong baud rate
    gives garbled bytes, which end here too)."""


class Device:
    """A device behind ``transport`` (``write(bytes)``, ``read(timeout) -> bytes``,
    ``close()``).

    Parameters
    ----------
    timeout : float
        Seconds to wait for a response before sending the request again.
    retries : int
        Repeats of a request after a timeout or a corrupted response.
    name : str
        How errors name the device (e.g. ``sim`` or ``serial:/dev/ttyUSB1``).
    """

    def __init__(self, transport, *, timeout: float = 2.0, retries: int = 3, name="device"):
        self.transport = transport
        self.timeout, self.retries, self.name = timeout, retries, name
        #: the longest wait between two STATUS polls while a RUN goes on (seconds)
        self.poll_s = 0.01
        self._reader = FrameReader()
        self._pending: list[bytes] = []
        self._seq = 0
        self._info: dict | None = None
        #: called with a line when a request is sent again (``open_device`` prints it
        #: on stderr unless quiet): a device that does not answer is waited for up to
        #: ``(retries + 1) * timeout`` seconds
        self.on_retry: Callable[[str], None] | None = None
        #: traffic counters; ``status_bytes`` is the part of both directions spent on
        #: STATUS polls (on a simulated device their number follows the host's wall time)
        self.stats = {"requests": 0, "retries": 0, "bytes_out": 0, "bytes_in": 0, "status_bytes": 0}

    # ------------------------------------------------------------------ requests
    def close(self) -> None:
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def request(self, cmd: Cmd, payload: bytes = b"", *, timeout: float | None = None) -> Response:
        """Send one request and return its ``OK`` response (retrying as docs/protocol.md
        says); :class:`DeviceError` for any other status or when no answer comes."""
        seq, self._seq = self._seq, (self._seq + 1) & 0xFF
        data = request_bytes(cmd, seq, payload)
        why = "no response"
        for attempt in range(self.retries + 1):
            if attempt:
                self.stats["retries"] += 1
                if self.on_retry:
                    waited = f" in {self.timeout:g} s" if why == "no response" else ""
                    self.on_retry(
                        f"{self.name}: {Cmd(cmd).name}: {why}{waited}; sending it again "
                        f"({attempt + 1} of {self.retries + 1})"
                    )
            self.transport.write(data)
            self.stats["requests"] += 1
            self.stats["bytes_out"] += len(data)
            rsp, why = self._await(seq, int(cmd), self.timeout if timeout is None else timeout)
            if cmd == Cmd.STATUS:
                got = 0 if rsp is None else 10 + len(rsp.payload)  # frame, COBS, delimiter
                self.stats["status_bytes"] += len(data) + got
            if rsp is None:
                continue
            if rsp.status == Status.OK:
                return rsp
            raise DeviceError(f"{self.name}: {Cmd(cmd).name} refused: {rsp.status.name}")
        raise NoAnswer(
            f"{self.name}: {Cmd(cmd).name}: {why} after {self.retries + 1} attempts "
            f"(timeout {self.timeout:g} s)"
        )

    def _await(self, seq: int, cmd: int, timeout: float) -> tuple[Response | None, str]:
        """The response to (seq, cmd), or None and why a retry is due."""
        deadline = time.monotonic() + timeout
        others = 0  # answers to other requests (late ones, or a device's wrong seq)
        while True:
            while self._pending:
                raw = self._pending.pop(0)
                try:
                    rsp = parse_response(cobs_decode(raw))
                except VersionMismatch as e:  # not a corruption: a retry cannot help
                    raise DeviceError(
                        f"{self.name}: the device speaks protocol version {e.version}, this "
                        f"host {VERSION}: build and program the board from this version "
                        "(pentegg build --board B --program)"
                    ) from None
                except FrameError as e:
                    return None, f"corrupted response ({e})"
                if rsp.status in (Status.CRC, Status.FRAME):
                    return None, f"the device saw a corrupted request ({rsp.status.name})"
                if rsp.seq == seq and rsp.cmd == cmd:
                    return rsp, ""
                others += 1  # a late answer to an earlier, retried request: dropped
            left = deadline - time.monotonic()
            if left <= 0:
                if others:
                    return None, (
                        f"no response with seq {seq} ({others} to other requests, dropped)"
                    )
                return None, "no response"
            data = self.transport.read(min(left, 0.05))
            if data:
                self.stats["bytes_in"] += len(data)
                self._pending += self._reader.feed(data)

    # ------------------------------------------------------------------ commands
    def info(self) -> dict:
        """INFO, checked against this host's protocol and spec versions (cached)."""
        if self._info is None:
            try:
                info = decode_info(self.request(Cmd.INFO).payload)
            except FrameError as e:
                raise DeviceError(f"{self.name}: a malformed INFO response ({e})") from None
            if info["magic"] != 0x5045_4747:
                raise DeviceError(f"{self.name}: not a pentegg device (magic {info['magic']:#x})")
            if info["protocol"] != VERSION:
                raise DeviceError(
                    f"{self.name}: protocol version {info['protocol']}, this host speaks {VERSION}"
                )
            if info["spec"] != SPEC_VERSION:
                raise DeviceError(
                    f"{self.name}: built for spec {info['spec']}, this host implements "
                    f"spec {SPEC_VERSION}"
                )
            fb = info["frame_bytes"]
            if not 256 <= fb <= 65536 or fb & (fb - 1):
                raise DeviceError(
                    f"{self.name}: INFO gives a frame buffer of {fb} bytes, not a power of "
                    "two in 256..65536"
                )
            try:
                self._regs = {r.name: r for r in register_map(info["max_layers"])}
                self._max_words = max_payload(info["frame_bytes"]) // 4
            except ValueError as e:
                raise DeviceError(f"{self.name}: INFO describes no possible build ({e})") from None
            self._info = info
        return self._info

    def _reg(self, name: str):
        self.info()
        try:
            return self._regs[name]
        except KeyError:
            raise DeviceError(f"{self.name}: no register '{name}'") from None

    def write_regs(self, values: dict[str, int]) -> None:
        pairs = [(self._reg(n).addr, int(v)) for n, v in values.items()]
        per = self._max_words // 2
        for i in range(0, len(pairs), per):
            self.request(Cmd.WRITE_REGS, words(x for p in pairs[i : i + per] for x in p))

    def read_regs(self, names: Sequence[str]) -> dict[str, int]:
        addrs = [self._reg(n).addr for n in names]
        vals: list[int] = []
        for i in range(0, len(addrs), self._max_words):
            part = addrs[i : i + self._max_words]
            rsp = self.request(Cmd.READ_REGS, words(part))
            try:
                got = rsp.words()
            except FrameError as e:
                raise DeviceError(f"{self.name}: READ_REGS answered {e}") from None
            if len(got) != len(part):
                raise DeviceError(
                    f"{self.name}: READ_REGS of {len(part)} registers answered {len(got)}"
                )
            vals += got
        return dict(zip(names, vals, strict=True))

    def write_mem(self, mem: str, addr: int, values: Iterable[int]) -> None:
        self.info()
        vals = [int(v) for v in values]
        sel = ap.MEMORIES[mem]
        per = self._max_words - 1
        for i in range(0, len(vals), per):
            head = sel << 24 | (addr + i)
            self.request(Cmd.WRITE_MEM, words([head, *vals[i : i + per]]))

    def write_bytes(self, mem: str, addr: int, values: Iterable[int]) -> None:
        """``write_mem`` of a byte memory (``samples``, ``member_x``: each value's low 8
        bits), four bytes a word through its packed select from a multiple of 4 on
        (docs/protocol.md, "Packed words"); the one to three bytes before it and after
        the last whole word one a word."""
        vals = ap.low_bytes(values)
        packed, _ = _packed_select(mem, "w")
        head, end = _word_span(addr, len(vals), 4)
        if head:
            self.write_mem(mem, addr, vals[:head])
        if end > head:
            self.write_mem(packed, (addr + head) // 4, ap.pack_bytes(vals[head:end]))
        if end < len(vals):
            self.write_mem(mem, addr + end, vals[end:])

    def read_mem_packed(self, mem: str, addr: int, count: int) -> np.ndarray:
        """``read_mem`` of the weights, the latent state or the logits, two weight words or
        four latent values or logits a word through its packed select (docs/protocol.md,
        "Packed words")
        from a multiple of 2 or 4 on; the elements before it and after the last whole
        word one a word. The same values as ``read_mem``."""
        packed, bits = _packed_select(mem, "r")
        per = 32 // bits
        head, end = _word_span(addr, count, per)
        out = []
        if head:
            out.append(self.read_mem(mem, addr, head))
        if end > head:
            w = self.read_mem(packed, (addr + head) // per, (end - head) // per)
            kind = "i" if mem in SIGNED_MEMORIES else "u"
            out.append(w.astype("<u4").view(f"<{kind}{bits // 8}").astype(np.int64))
        if end < count:
            out.append(self.read_mem(mem, addr + end, count - end))
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def read_mem(self, mem: str, addr: int, count: int) -> np.ndarray:
        """``count`` words of memory ``mem`` from ``addr`` (int64; signed memories
        sign-extended)."""
        self.info()
        sel = ap.MEMORIES[mem]
        out = []
        for i in range(0, count, self._max_words):
            n = min(self._max_words, count - i)
            got = self.request(Cmd.READ_MEM, words([sel << 24 | (addr + i), n])).payload
            if len(got) != 4 * n:
                raise DeviceError(f"{self.name}: READ_MEM of {n} words answered {len(got)} bytes")
            out.append(got)
        raw = b"".join(out)
        fmt = "<i4" if mem in SIGNED_MEMORIES else "<u4"
        return np.frombuffer(raw, dtype=fmt).astype(np.int64)

    def status(self) -> dict[str, int]:
        got = self.request(Cmd.STATUS).payload
        if len(got) < 12:
            raise DeviceError(f"{self.name}: STATUS answered {len(got)} bytes, not 12")
        st, err, step = struct.unpack("<3I", got[:12])
        return {"busy": st & 1, "error": err, "step": step}

    def reset(self) -> None:
        self.request(Cmd.RESET)

    def run(
        self, kind: str, *, timeout: float = 3600.0, poll: Callable[[dict], None] | None = None
    ) -> dict:
        """RUN ``kind`` and wait until it ends; :class:`DeviceError` naming the error
        flags if it ends with any, or when the run's step counter has not moved for
        ``timeout`` seconds (the device is then reset: a run of many steps may take
        longer than that, one step may not)."""
        self.request(Cmd.RUN, words([ap.RUN_KINDS[kind]]))
        since = time.monotonic()
        last = None
        wait = 0.0001
        while True:
            st = self.status()
            if not st["busy"]:
                break
            if poll:
                poll(st)
            now = time.monotonic()
            if st["step"] != last:
                last, since = st["step"], now
            elif now - since > timeout:
                self.reset()
                raise DeviceError(
                    f"{self.name}: RUN {kind} still busy at step {last} after {timeout:g} s "
                    "without a step; reset"
                )
            time.sleep(wait)
            wait = min(wait * 2, self.poll_s)
        if st["error"]:
            raise DeviceError(
                f"{self.name}: RUN {kind} ended with error flags: "
                + ", ".join(ap.decode_error(st["error"]))
            )
        return st


# ---------------------------------------------------------------------- build fit
def check_build(
    info: dict, cfg: Config, *, batch: int = 1, samples: int = 0, members: int = 0
) -> None:
    """:class:`DeviceError` naming the ways ``cfg`` (with this batch and dataset size, or
    ``members`` per-member samples each) does not fit the device's build (its INFO)."""
    problems = []
    for name in ("mode", "digits", "update", "rank"):
        if info[name] != getattr(cfg, name):
            problems.append(f"{name} {getattr(cfg, name)} (the build has {info[name]})")
    if cfg.update == "latent" and info["latent_bits"] != cfg.latent_bits:
        problems.append(f"latent_bits {cfg.latent_bits} (the build has {info['latent_bits']})")
    if cfg.n_layers > info["max_layers"]:
        problems.append(f"{cfg.n_layers} layers (the build holds {info['max_layers']})")
    if max(cfg.layers) > info["max_width"]:
        problems.append(f"width {max(cfg.layers)} (the build holds {info['max_width']})")
    if cfg.population > info["max_population"]:
        problems.append(f"population {cfg.population} (the build holds {info['max_population']})")
    if batch > info["max_batch"] or batch > info["batch_words"]:
        problems.append(f"batch {batch} (the build holds {info['max_batch']})")
    if not dataset_fits(info, cfg, samples) and not dataset_fits(info, cfg, batch):
        problems.append(
            f"a batch of {batch} x {cfg.layers[0]} (the sample memory holds "
            f"{info['sample_bytes']} bytes, {info['label_words']} labels)"
        )
    if members:
        need_x = cfg.population * members * cfg.layers[0]
        need_y = cfg.population * members * cfg.layers[-1]
        if need_x > info.get("member_bytes", 0) or need_y > info.get("logit_bytes", 0):
            problems.append(
                f"per-member inputs of {need_x} bytes and logits of {need_y} (the build "
                f"holds {info.get('member_bytes', 0)} and {info.get('logit_bytes', 0)})"
            )
    if problems:
        raise DeviceError("the job does not fit the device: " + "; ".join(problems))


def dataset_fits(info: dict, cfg: Config, samples: int) -> bool:
    """Do ``samples`` labelled samples fit the device's sample and label memories? A
    dataset that does not is sent a batch at a time (:class:`Trainer`)."""
    return samples * cfg.layers[0] <= info["sample_bytes"] and samples <= info["label_words"]


def _pow2(n: int, lo: int = 16) -> int:
    return max(lo, 1 << max(0, int(n - 1).bit_length()))


def sim_params(
    cfg: Config, *, batch: int, samples: int, lanes: int = 8, score_bound: int = 0, **over
) -> dict:
    """Elaboration parameters of a simulated device built for this job: the maxima are
    the job's own (memories rounded up to powers of two; ``max_batch`` also large enough
    for scores up to ``score_bound``, spec 9.2's ``254 * max_batch``). A job with a
    dataset (``samples``) trains on chip; one without is host-scored and gets the
    per-member memories."""
    if -(-score_bound // 254) > 65535:
        raise DeviceError(
            f"scores up to {score_bound} (this task at batch {batch}) are past what a device "
            "holds (254 x 65535): use a smaller --batch"
        )
    return {
        "lanes": min(lanes, cfg.pairs),
        "max_layers": cfg.n_layers,
        "max_width": max(cfg.layers),
        "rank": cfg.rank,
        "mode": cfg.mode,
        "digits": cfg.digits,
        "update": cfg.update,
        "latent_bits": cfg.latent_bits,
        "max_population": cfg.population,
        "max_batch": max(batch, -(-score_bound // 254)),
        "sample_bytes": _pow2(samples * cfg.layers[0]),
        "label_words": _pow2(samples),
        "batch_words": _pow2(batch * 32),
        # per-member inputs and logits: host-scored jobs only (no dataset)
        "member_bytes": _pow2(cfg.population * batch * cfg.layers[0] if not samples else 0),
        "logit_bytes": _pow2(cfg.population * batch * cfg.layers[-1] if not samples else 0),
        "frame_bytes": 8192,
        **over,
    }


def _word_span(addr: int, count: int, per: int) -> tuple[int, int]:
    """Of ``count`` elements from ``addr``, ``per`` a packed word: the offsets ``(head,
    end)`` of the whole words (the elements before ``head`` and from ``end`` on go one
    a word)."""
    head = min(count, -addr % per)
    return head, head + (count - head) // per * per


def _packed_select(mem: str, access: str) -> tuple[str, int]:
    """The packed select of memory ``mem`` a host may use for ``access`` ("r", "w") and
    its element bits (``PACKED_MEMORIES``)."""
    for name, (target, bits, acc) in PACKED_MEMORIES.items():
        if target == mem and acc == access:
            return name, bits
    raise ValueError(f"memory {mem!r} has no packed select for {access!r}")


# ---------------------------------------------------------------------- training
class Trainer:
    """ES steps of a training task on a device, with golden's data order.

    Classification tasks (``task.batch_indices``) train on chip: the dataset is loaded
    once, each step's batch indices are computed by the task exactly as the golden run
    draws them, and ``RUN train`` runs the steps. A dataset larger than the device's
    sample memory (the iCEBreaker's compact device) is sent a batch at a time instead:
    each step's samples and labels at addresses ``0 .. batch - 1``, batch indices
    ``0 .. batch - 1``, one step per run (the same bits; more link traffic). Other tasks
    (CartPole) are host-scored: the device evaluates the members on the host's
    per-member inputs (``member_x`` -> ``RUN eval`` -> ``logits``), the host scores them
    and the device shapes and updates (``RUN update``).

    ``start(state)`` loads the configuration and ``state``; ``steps(step, k)`` runs
    ``k`` steps and returns the state read back and the scores of the last step.
    """

    def __init__(self, dev: Device, task, cfg: Config, batch: int):
        self.dev, self.task, self.cfg, self.batch = dev, task, cfg, batch
        self.classify = hasattr(task, "batch_indices")
        if self.classify:
            self.x, self.y = task.x_train, task.y_train
            self.step_batch = min(batch, len(self.x))
        else:
            self.step_batch = batch

    def start(self, state: TrainState) -> None:
        info = self.dev.info()
        cfg = self.cfg
        if self.classify:
            check_build(info, cfg, batch=self.step_batch, samples=len(self.x))
        else:
            check_build(info, cfg, batch=self.step_batch, members=self.step_batch)
        self.max_chunk = max(1, min(info["batch_words"] // self.step_batch, 65535))
        self.stream = self.classify and not dataset_fits(info, cfg, len(self.x))
        dev = self.dev
        dev.reset()
        regs = ap.config_regs(cfg, step=state.step, batch=self.step_batch, shared=self.classify)
        dev.write_regs(regs)
        self._batch_reg = self.step_batch
        if self.classify and not self.stream:
            dev.write_bytes("samples", 0, np.asarray(self.x, dtype=np.int64))
            dev.write_mem("labels", 0, self.y)
        self.load_state(state)

    def load_state(self, state: TrainState) -> None:
        self.dev.write_mem("weights", 0, ap.weight_words(state.weights))
        if self.cfg.update == "latent":
            self.dev.write_mem("latent", 0, ap.latent_words(state.latent))
        self.dev.write_regs({"step": state.step})

    def read_state(self, step: int) -> TrainState:
        cfg = self.cfg
        shapes = [cfg.shape(l) for l in range(cfg.n_layers)]
        n_words = sum(-(-out * fan // DIGITS_PER_WORD) for out, fan in shapes)  # spec 1.4
        weights = ap.weights_from_words(self.dev.read_mem_packed("weights", 0, n_words), shapes)
        latent = None
        if cfg.update == "latent":
            flat = self.dev.read_mem_packed("latent", 0, sum(o * f for o, f in shapes))
            latent = [v.astype(np.int16) for v in ap.latent_from_words(flat, shapes)]
        return TrainState(cfg, step, weights, latent)

    def steps(self, step: int, k: int) -> tuple[TrainState, np.ndarray]:
        """``k`` ES steps from step ``step`` (the device holds the state before it); the
        state after them, read back, and the last step's scores."""
        if not self.classify:
            for t in range(step, step + k):
                scores = self._host_scored_step(t)
            return self.read_state(step + k), scores
        done = 0
        while done < k:
            n = 1 if self.stream else min(k - done, self.max_chunk)
            t0 = step + done
            idx = np.concatenate(
                [self.task.batch_indices(self.cfg, t0 + i, self.batch) for i in range(n)]
            )
            if self.stream:  # this step's samples in place of the dataset
                x = np.asarray(self.x, dtype=np.int64)[idx]
                self.dev.write_bytes("samples", 0, x)
                self.dev.write_mem("labels", 0, np.asarray(self.y)[idx])
                idx = np.arange(len(idx))
            self.dev.write_mem("batch", 0, idx)
            self.dev.write_regs({"step": t0, "steps": n})
            self.dev.run("train")
            done += n
        scores = self.dev.read_mem("scores", 0, self.cfg.population)
        return self.read_state(step + k), scores

    def forward(self, x) -> np.ndarray:
        """Every member's int8 logits for its own inputs ``x`` (population, batch, n_0),
        computed by the device at the step in its ``step`` register."""
        cfg = self.cfg
        x = np.asarray(x)
        pop, batch = x.shape[0], x.shape[1]
        if pop != cfg.population or x.ndim != 3:
            raise ValueError(f"per-member inputs of shape {x.shape}")
        if batch != self._batch_reg:
            self.dev.write_regs({"batch": batch})
            self._batch_reg = batch
        self.dev.write_bytes("member_x", 0, ap.member_words(x))
        self.dev.run("eval")
        n = pop * batch * cfg.layers[-1]
        return self.dev.read_mem_packed("logits", 0, n).reshape(pop, batch, cfg.layers[-1])

    def _host_scored_step(self, t: int) -> np.ndarray:
        self.dev.write_regs({"step": t})
        scores = np.asarray(self.task.scorer(self.cfg, t, self.batch)(self.forward))
        bound = 254 * self.dev.info()["max_batch"]  # the score memory's range (spec 9.2)
        if np.abs(scores).max(initial=0) > bound:
            raise DeviceError(
                f"step {t}: a host score of {int(np.abs(scores).max())} is outside the "
                f"device's score range +-{bound} (a build with max_batch >= "
                f"{-(-int(np.abs(scores).max()) // 254)} holds it)"
            )
        self.dev.write_mem("scores", 0, scores)
        self.dev.run("update")  # at step t still: RUN eval does not advance it
        return scores


def open_device(
    spec: str,
    *,
    cfg: Config | None = None,
    batch: int = 1,
    samples: int = 0,
    lanes: int = 8,
    timeout: float | None = None,
    quiet: bool = False,
    **params,
) -> Device:
    """A :class:`Device` on ``spec``: ``sim`` (the accelerator built for ``cfg``'s job by
    :func:`sim_params`, ``params`` overriding; Verilated once and cached), ``firmware``
    (the compact device's firmware compiled for this host, built for the same
    parameters; pentegg.rtl.compact.firmware), ``sim-compact`` (the compact device: its
    RV32I core running that firmware, Verilated; with the datapath as the iCEBreaker's
    build has it, or as ``engine=0|1`` says), ``sim:PATH`` (a harness executable) or
    ``serial:PORT[@BAUD]``. INFO is read and checked. ``timeout``: seconds to wait for
    each response before a retry (default :data:`BOARD_TIMEOUT_S` for a board,
    :data:`SIM_TIMEOUT_S` for a simulated device)."""
    from .transport import TransportSpecError, open_transport

    if timeout is None:
        timeout = BOARD_TIMEOUT_S if spec.startswith("serial:") else SIM_TIMEOUT_S
    if not timeout > 0:
        raise DeviceError(f"the response timeout must be above 0 s, not {timeout:g}")

    if spec == "sim":
        if cfg is None:
            raise DeviceError("--device sim needs a job configuration to build for")
        from .rtl.catalog import silence
        from .rtl.link.device import Device as DeviceTop

        p = sim_params(cfg, batch=batch, samples=samples, lanes=lanes, **params)
        p.update(clock_hz=0, baud=0)
        if not quiet:
            print(
                f"[sim] device: lanes {p['lanes']}, {p['max_layers']} layers of up to "
                f"{p['max_width']}, population {p['max_population']}, batch {p['max_batch']}",
                file=sys.stderr,
            )
        try:  # elaborate once here: a job the RTL cannot hold is a one-line error
            silence(DeviceTop(**p))  # checked, not elaborated
        except (ValueError, TypeError) as e:
            raise DeviceError(f"cannot build a simulated device for this job: {e}") from None
        transport = open_transport("sim", device_factory=DeviceTop, params=p)
    elif spec in ("firmware", "sim-compact"):
        if cfg is None:
            raise DeviceError(f"--device {spec} needs a job configuration to build for")
        from .rtl.compact.firmware import FirmwareBuildError, check_params, native_device

        engine = params.pop("engine", None)
        p = sim_params(cfg, batch=batch, samples=samples, lanes=lanes, **params)
        p = {k: v for k, v in p.items() if k in _FIRMWARE_PARAMS}
        try:
            p = check_params(**p)
            if spec == "firmware":
                transport = open_transport(f"sim:{native_device(p)}")
            else:  # the RV32I core running it, Verilated: the iCEBreaker's core
                from .boards.icebreaker import COMPACT_PARAMS
                from .rtl.compact.soc import SIM_RAM_BYTES, CompactDevice

                if engine is None:  # as the iCEBreaker's build has it
                    engine = COMPACT_PARAMS["engine"]
                if not quiet:
                    print(
                        f"[sim] compact device: {p['max_layers']} layers of up to "
                        f"{p['max_width']}, population {p['max_population']}, batch "
                        f"{p['max_batch']}, {'with' if engine else 'without'} the datapath",
                        file=sys.stderr,
                    )
                del p["clock_hz"], p["baud"]
                transport = open_transport(
                    "sim",
                    device_factory=CompactDevice,
                    params={**p, "ram_bytes": SIM_RAM_BYTES, "engine": engine},
                )
        except (ValueError, TypeError, FirmwareBuildError) as e:
            raise DeviceError(f"cannot build the {spec} device for this job: {e}") from None
    elif spec.startswith("serial:") and "@" not in spec:
        from .transport import parse_spec

        parse_spec(spec)  # an empty port is named as the user gave it
        dev = _open_serial_any_rate(spec, timeout)
        if not quiet:
            dev.on_retry = lambda line: print(line, file=sys.stderr)
        return dev
    else:
        try:
            transport = open_transport(spec)
        except TransportSpecError as e:
            if not spec.startswith(("sim", "serial")):
                raise DeviceError(
                    f"unknown device {spec!r}: use golden, sim, sim-compact, firmware, "
                    "sim:PATH or serial:PORT[@BAUD]"
                ) from None
            raise e from None
    dev = Device(transport, timeout=timeout, name=spec)
    if not quiet:
        dev.on_retry = lambda line: print(line, file=sys.stderr)
    if spec == "sim-compact":
        dev.poll_s = SIM_COMPACT_POLL_S
    try:
        dev.info()
    except BaseException:
        dev.close()
        raise
    return dev


#: The build parameters of the compact device's firmware (the Accelerator's names).
_FIRMWARE_PARAMS = (
    "lanes",
    "max_layers",
    "max_width",
    "rank",
    "mode",
    "digits",
    "update",
    "latent_bits",
    "max_population",
    "max_batch",
    "sample_bytes",
    "label_words",
    "batch_words",
    "member_bytes",
    "logit_bytes",
    "frame_bytes",
)


def _open_serial_any_rate(spec: str, timeout: float) -> Device:
    """``serial:PORT`` without a rate: the board builds' default rates, then the rates of
    their other clocks (``--param clock_mhz``), tried in turn until the device answers
    INFO (a wrong rate gives garbled bytes, which INFO's CRC rejects)."""
    from .boards import boards
    from .transport import open_transport

    defaults = sorted({b.baud for b in boards().values()}, reverse=True)
    others = {c.baud for b in boards().values() for c in b.clocks.values()}
    rates = defaults + sorted(others - set(defaults), reverse=True)
    for baud in rates:
        dev = Device(open_transport(f"{spec}@{baud}"), timeout=0.3, retries=1, name=spec)
        try:
            dev.info()
        except NoAnswer:
            dev.close()
            continue
        except BaseException:  # an answer that fails INFO's checks is the board's
            dev.close()
            raise
        dev.timeout, dev.retries = timeout, 3
        return dev
    tried = " or ".join(str(r) for r in rates)
    raise DeviceError(
        f"{spec}: no pentegg device answered at {tried} baud (is the board programmed? "
        f"give the rate as {spec}@BAUD)"
    )
