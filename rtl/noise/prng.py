"""PRNG (spec 2): the pentary digit streams.

* :class:`PentaryStreamCore`: one stream. It loads a start state ``x0`` (spec 2.3) from a
  stream and emits the stream's digits (spec 2.4, 2.5): a 32-bit xorshift32 state register,
  its load multiplexer and the digit decoders. Each LowRankGenerator lane has one.
* :class:`PentaryPRNG`: the keyed generator of spec 2, a
  :class:`~pentegg.rtl.noise.keyer.StreamKeyer` (the key mixing) feeding a
  :class:`PentaryStreamCore`. In the accelerator one keyer serves every lane; this block
  is the keyed PRNG on its own.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..params import check_choice
from .keyer import KEYERS, LAYER_BITS, PAIR_BITS, RUN_SALT, STEP_BITS, StreamKeyer, xs32

__all__ = [
    "DIGITS_PER_BEAT",
    "DIGITS_PER_WORD",
    "DIGIT_DISTS",
    "LAYER_BITS",
    "PAIR_BITS",
    "RUN_SALT",
    "STEP_BITS",
    "PentaryPRNG",
    "PentaryStreamCore",
    "decode_digit",
    "digits_layout",
    "xs32",
]

DIGIT_DISTS = ("binomial", "uniform")
#: Digits per 32-bit word (spec 2.5).
DIGITS_PER_WORD = {"binomial": 8, "uniform": 4}
#: Supported digits per beat: powers of two up to 64.
DIGITS_PER_BEAT = (1, 2, 4, 8, 16, 32, 64)


def _code(value: int) -> int:
    return value & 0b111


def _binomial_value(nibble: int) -> int:
    return bin(nibble).count("1") - 2


def _uniform_value(byte: int) -> int:
    return ((byte * 5) >> 8) - 2


def decode_digit(bits, dist: str):
    """The digit code (3-bit two's complement) of its random bits: a nibble for
    ``binomial`` (popcount - 2), a byte for ``uniform`` (``((byte * 5) >> 8) - 2``).

    Written as truth tables so that each code bit maps to one LUT (binomial) rather than
    to an adder.
    """
    if dist == "binomial":
        table = [_code(_binomial_value(v)) for v in range(16)]
        return Cat(
            Const(sum(((code >> b) & 1) << v for v, code in enumerate(table)), 16).bit_select(
                bits, 1
            )
            for b in range(3)
        )
    # uniform: the value is the number of thresholds ceil(256 k / 5) the byte reaches
    level = sum((bits >= -(-256 * k // 5)).as_unsigned() for k in range(1, 5))
    return (level - 2)[:3]


def digits_layout(n: int) -> data.ArrayLayout:
    """Payload of ``n`` digits: digit ``j`` in bits ``[3j+2 : 3j]``, 3-bit two's complement."""
    return data.ArrayLayout(signed(3), n)


class PentaryStreamCore(wiring.Component):
    """One stream of digits from its start state: word ``i`` is ``xs32^i(x0)`` (spec 2.4),
    its digits LSB first (spec 2.5), ``digits_per_beat`` per beat.

    Parameters
    ----------
    digits : str
        ``"binomial"`` (default, 8 digits per word) or ``"uniform"`` (4 digits per word).
    digits_per_beat : int
        Digits per transfer on ``o``: 1, 2, 4, 8, 16, 32 or 64 (default 4).

    Interface attributes
    --------------------
    x0 : In(stream.Signature(32))
        Start states (spec 2.3), e.g. from a :class:`~pentegg.rtl.noise.keyer.StreamKeyer`.
        Always ready: a beat (re)starts the stream from word 0 of ``x0``, dropping the
        current one and any beat not yet taken. Loading the same ``x0`` again replays the
        same digits.
    o : Out(stream.Signature(ArrayLayout(signed(3), digits_per_beat)))
        Digit beats; digit ``j`` of a beat is bits ``[3j+2:3j]`` of ``o.payload``.

    Latency and throughput: the first beat is valid the cycle after the ``x0`` beat, plus
    ``digits_per_beat / D - 1`` cycles when a beat spans several words (D = digits per
    word). Then one beat per cycle while ``o.ready`` is high if ``digits_per_beat <= D``,
    one beat every ``digits_per_beat / D`` cycles otherwise. Never valid after reset until
    the first ``x0`` beat.
    """

    def __init__(self, *, digits: str = "binomial", digits_per_beat: int = 4):
        self.digits = check_choice("digits", digits, DIGIT_DISTS)
        self.digits_per_beat = check_choice("digits_per_beat", digits_per_beat, DIGITS_PER_BEAT)
        per_word = DIGITS_PER_WORD[digits]
        #: beats per word (>= 1) and words per beat (>= 1)
        self.beats_per_word = max(1, per_word // digits_per_beat)
        self.words_per_beat = max(1, digits_per_beat // per_word)
        super().__init__(
            {
                "x0": In(stream.Signature(32)),
                "o": Out(stream.Signature(digits_layout(digits_per_beat))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        x = Signal(32)  # the current word
        streaming = Signal()
        load = self.x0.valid
        m.d.comb += self.x0.ready.eq(1)
        step = Signal()  # advance the stream by one word this cycle
        with m.If(load | step):
            m.d.sync += x.eq(Mux(load, self.x0.payload, xs32(x)))
        with m.If(load):
            m.d.sync += streaming.eq(1)

        per_word = DIGITS_PER_WORD[self.digits]
        bits_per_digit = 32 // per_word
        n = self.digits_per_beat
        accept = self.o.valid & self.o.ready

        if self.words_per_beat == 1:
            # Several beats per word: `pos` selects the beat within the current word.
            m.d.comb += self.o.valid.eq(streaming)
            if self.beats_per_word == 1:
                m.d.comb += step.eq(accept)
                window = x
            else:
                pos = Signal(range(self.beats_per_word))
                # streaming and at the word's last beat: a flip-flop, so that `o.ready`
                # reaches the state's enables through one LUT
                last = Signal()
                pos_next = Signal.like(pos)
                m.d.comb += [
                    step.eq(last & self.o.ready),
                    pos_next.eq(Mux(load, 0, Mux(accept, pos + 1, pos))),  # wraps
                ]
                m.d.sync += [
                    pos.eq(pos_next),
                    last.eq((streaming | load) & (pos_next == self.beats_per_word - 1)),
                ]
                width = n * bits_per_digit
                window = Signal(width)
                with m.Switch(pos):
                    for p in range(self.beats_per_word):
                        with m.Case(p):
                            m.d.comb += window.eq(x[p * width : (p + 1) * width])
            words = [window]
        else:
            # Several words per beat: the older ones wait in a shift register, the newest
            # is the state itself; `fill` counts the words of the beat being assembled.
            k = self.words_per_beat
            buf = [Signal(32, name=f"buf{j}") for j in range(k - 1)]
            fill = Signal(ceil_log2(k))
            fill_next = Signal.like(fill)
            full = Signal()  # fill == k - 1: the beat is complete
            m.d.comb += self.o.valid.eq(streaming & full)
            m.d.comb += step.eq(streaming & (~full | self.o.ready))
            m.d.comb += fill_next.eq(Mux(load, 0, Mux(step, fill + 1, fill)))  # wraps
            m.d.sync += [fill.eq(fill_next), full.eq(fill_next == k - 1)]
            with m.If(step):
                m.d.sync += [buf[j].eq(buf[j + 1]) for j in range(k - 2)]
                m.d.sync += buf[k - 2].eq(x)
            words = [*buf, x]

        digit_codes = []
        for word in words:
            for j in range(len(word) // bits_per_digit):
                digit_codes.append(
                    decode_digit(word[j * bits_per_digit : (j + 1) * bits_per_digit], self.digits)
                )
        m.d.comb += self.o.payload.as_value().eq(Cat(*digit_codes[:n]))
        return m


class PentaryPRNG(wiring.Component):
    """The spec's keyed digit generator (spec 2): a :class:`~pentegg.rtl.noise.keyer.StreamKeyer`
    and a :class:`PentaryStreamCore`, ``digits_per_beat`` digits per transfer.

    Word ``i`` of the stream keyed by (seed, step, pair, layer, ab) is ``xs32^i(x0)`` with
    ``x0 = mix32(stream_key ^ run_key(seed))``; its digits are emitted LSB first, in
    stream order, ``digits_per_beat`` per beat.

    Parameters
    ----------
    digits : str
        Digit distribution: ``"binomial"`` (default, 8 digits per word) or ``"uniform"``
        (4 digits per word).
    digits_per_beat : int
        Digits per transfer on ``o``: 1, 2, 4, 8, 16, 32 or 64 (default 4).
    keyer : str
        The :class:`~pentegg.rtl.noise.keyer.StreamKeyer`'s form: ``"parallel"`` (default) or
        ``"serial"`` (far smaller, far slower: see the timing below).

    Interface attributes
    --------------------
    seed : In(32)
        Run seed. Read only when the run key is recomputed (``start`` with ``reseed``).
    step : In(16), pair : In(11), layer : In(3), ab : In(1)
        Stream key fields (``ab``: 0 for A, 1 for B). All key inputs must be held stable
        from ``start`` until ``o.valid`` rises.
    start : In(1)
        Strobe: (re)start the stream from word 0 of the current key, dropping any beat on
        ``o`` and any key being mixed. Restarting with the same key replays the same
        digits.
    reseed : In(1)
        Sampled with ``start``: 1 recomputes the run key from ``seed`` (required after reset
        and whenever ``seed`` changes); 0 reuses the stored run key.
    busy : Out(1)
        High while the key is being mixed (from the cycle after ``start`` until ``o.valid``
        rises).
    o : Out(stream.Signature(ArrayLayout(signed(3), digits_per_beat)))
        Digit beats; digit ``j`` of a beat is bits ``[3j+2:3j]`` of ``o.payload``.

    Latency and throughput: the first beat is valid 29 cycles after ``start`` with
    ``reseed`` (28 in the keyer, one to load the core), 15 cycles without, plus
    ``digits_per_beat / D - 1`` cycles when a beat spans several words (D = digits per
    word). Then one beat per cycle while ``o.ready`` is high if ``digits_per_beat <= D``,
    one beat every ``digits_per_beat / D`` cycles otherwise. Never valid after reset until
    the first ``start``. With ``keyer="serial"`` the first beat comes 1666 cycles after
    ``start`` with ``reseed``, 834 without (a ``start`` during the mixing adds up to 32
    cycles: the keyer finishes its current pass first).
    """

    def __init__(
        self, *, digits: str = "binomial", digits_per_beat: int = 4, keyer: str = "parallel"
    ):
        self.keyer = check_choice("keyer", keyer, KEYERS)
        self.digits = check_choice("digits", digits, DIGIT_DISTS)
        self.digits_per_beat = check_choice("digits_per_beat", digits_per_beat, DIGITS_PER_BEAT)
        super().__init__(
            {
                "seed": In(32),
                "step": In(STEP_BITS),
                "pair": In(PAIR_BITS),
                "layer": In(LAYER_BITS),
                "ab": In(1),
                "start": In(1),
                "reseed": In(1),
                "busy": Out(1),
                "o": Out(stream.Signature(digits_layout(digits_per_beat))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.keyer = keyer = StreamKeyer(keyer=self.keyer)
        m.submodules.core = core = PentaryStreamCore(
            digits=self.digits, digits_per_beat=self.digits_per_beat
        )
        # `start` aborts the keyer's work and posts a request, which stays valid (from
        # `pending`) until the keyer takes it; `live` hides the core's old stream from
        # `start` until the new x0 is loaded.
        pending = Signal()
        reseed = Signal()
        live = Signal()
        request = self.start | pending
        with m.If(self.start):
            m.d.sync += [pending.eq(1), reseed.eq(self.reseed)]
        with m.Elif(keyer.k.ready):
            m.d.sync += pending.eq(0)
        with m.If(self.start):
            m.d.sync += live.eq(0)
        with m.Elif(keyer.x0.valid):
            m.d.sync += live.eq(1)
        m.d.comb += [
            keyer.seed.eq(self.seed),
            keyer.cancel.eq(self.start),
            keyer.k.valid.eq(request),
            keyer.k.payload.ab.eq(self.ab),
            keyer.k.payload.layer.eq(self.layer),
            keyer.k.payload.pair.eq(self.pair),
            keyer.k.payload.step.eq(self.step),
            keyer.k.payload.reseed.eq(Mux(self.start, self.reseed, reseed)),
            # the answer goes straight into the core (which is always ready)
            core.x0.valid.eq(keyer.x0.valid & ~self.start),
            core.x0.payload.eq(keyer.x0.payload),
            keyer.x0.ready.eq(1),
            self.o.valid.eq(core.o.valid & live),
            self.o.payload.eq(core.o.payload),
            core.o.ready.eq(self.o.ready & live),
            self.busy.eq(pending | keyer.busy),
        ]
        return m
