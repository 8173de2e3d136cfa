"""PRNG (spec 2): the keyed, restartable xorshift32 generator of pentary digits.

One 32-bit state register does everything, one operation per cycle:

* ``XS``:   ``x <- xs32(x)`` (streaming: word ``i+1`` from word ``i``; half a mix round);
* ``ADD``:  ``x <- x + (x << 11)`` (the other half of a ``mix32`` round);
* ``LOAD``: ``x <- v`` for ``v`` = ``seed ^ RUN_SALT`` or ``stream_key ^ S``.

A ``mix32`` round takes two cycles (``XS`` then ``ADD``) so that the 21-bit carry chain
starts at the state flip-flops: one round per cycle measured 48 MHz on an iCE40UP5K,
two cycles 60 MHz (docs/resources.md). ``LOAD`` is a multiplexer inside the last level of
the ``xs32`` logic. The run key ``S`` (31 bits; bit 31 is always 1) is kept in a register
so that a restart without ``reseed`` does not recompute it.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from .params import check_choice

__all__ = [
    "DIGITS_PER_WORD",
    "DIGIT_DISTS",
    "RUN_SALT",
    "PentaryPRNG",
    "decode_digit",
    "xs32",
]

#: ``run_key(seed) = mix32(seed ^ RUN_SALT) | 0x80000000`` (spec 2.3).
RUN_SALT = 0x5EED_E66B
XS_SHIFTS = (13, 17, 5)
MIX_ROUNDS = 6
MIX_ADD_SHIFT = 11
DIGIT_DISTS = ("binomial", "uniform")
#: Digits per 32-bit word (spec 2.5).
DIGITS_PER_WORD = {"binomial": 8, "uniform": 4}
#: Supported digits per beat: powers of two up to 64.
DIGITS_PER_BEAT = (1, 2, 4, 8, 16, 32, 64)

STEP_BITS, PAIR_BITS, LAYER_BITS = 16, 11, 3


def xs32(x):
    """Marsaglia's xorshift32 (13, 17, 5) on a 32-bit Amaranth value."""
    a, b, c = XS_SHIFTS
    x = x ^ (x << a)[:32]
    x = x ^ (x >> b)
    return x ^ (x << c)[:32]


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


class PentaryPRNG(wiring.Component):
    """The spec's keyed digit generator (spec 2): ``digits_per_beat`` digits per transfer.

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

    Interface attributes
    --------------------
    seed : In(32)
        Run seed. Read only when the run key is recomputed (``start`` with ``reseed``).
    step : In(16), pair : In(11), layer : In(3), ab : In(1)
        Stream key fields (``ab``: 0 for A, 1 for B). All key inputs must be held stable
        from ``start`` until ``o.valid`` rises.
    start : In(1)
        Strobe: (re)start the stream from word 0 of the current key, dropping any beat on
        ``o``. Restarting with the same key replays the same digits.
    reseed : In(1)
        Sampled with ``start``: 1 recomputes the run key from ``seed`` (required after reset
        and whenever ``seed`` changes); 0 reuses the stored run key.
    busy : Out(1)
        High while the key is being mixed (from the cycle after ``start`` until ``o.valid``
        can rise).
    o : Out(stream.Signature(ArrayLayout(signed(3), digits_per_beat)))
        Digit beats; digit ``j`` of a beat is bits ``[3j+2:3j]`` of ``o.payload``.

    Latency and throughput: the first beat is valid 28 cycles after ``start`` with
    ``reseed`` (two loads, two ``mix32`` of 12 cycles, one cycle to store the run key), 14
    cycles without, plus ``digits_per_beat / D - 1`` cycles when a beat spans several
    words (D = digits per word). Then one beat per cycle while ``o.ready`` is high if
    ``digits_per_beat <= D``, one beat every ``digits_per_beat / D`` cycles otherwise.
    Never valid after reset until the first ``start``.
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
        x = Signal(32)  # the state: the current word once streaming
        run_key = Signal(31)  # S without its bit 31 (always 1)
        # Mixing schedule, t = 0..26 (27 cycles with reseed, 13 without):
        #   0: LOAD seed ^ salt;  1..12: (XS, ADD) x 6;  13: SAVE run key;
        #  14: LOAD key ^ S;     15..26: (XS, ADD) x 6.  A start without reseed enters at 14.
        T_SAVE, T_KEY, T_END = 13, 14, 26
        t = Signal(range(T_END + 1))
        mixing = Signal()
        streaming = Signal()
        m.d.comb += self.busy.eq(mixing)

        # The datapath's control signals are flip-flops decoded one cycle ahead, from t
        # itself (t + 1 is the next step) with `start` entering last: decoded from a
        # multiplexed next t, `start`'s logic cone in a parent would reach every decoder.
        load = Signal()
        add = Signal()
        save = Signal()
        key_phase = Signal()
        mix_hi = Signal()  # mixing, bits 11..31 change: not SAVE
        mix_lo = Signal()  # mixing, bits 0..10 change: not SAVE, not ADD
        going = mixing & (t != T_END)
        mixing_n = self.start | going
        add_n = ~self.start & going & t[0] & (t != T_KEY - 1)  # after XS, but not at T_KEY
        save_n = ~self.start & going & (t == T_SAVE - 1)
        m.d.sync += [
            t.eq(Mux(self.start, Mux(self.reseed, 0, T_KEY), t + 1)),
            mixing.eq(mixing_n),
            load.eq(self.start | (going & (t == T_KEY - 1))),
            add.eq(add_n),
            save.eq(save_n),
            key_phase.eq(Mux(self.start, ~self.reseed, t >= T_KEY - 1)),
            mix_hi.eq(mixing_n & ~save_n),
            mix_lo.eq(mixing_n & ~save_n & ~add_n),
        ]
        with m.If(self.start):
            m.d.sync += streaming.eq(0)
        with m.Elif(mixing & (t == T_END)):
            m.d.sync += streaming.eq(1)
        with m.If(save):
            m.d.sync += run_key.eq(x[:31])

        key = Cat(self.ab, self.layer, self.pair, self.step)  # stream_key, 31 bits
        load_value = Signal(32)
        m.d.comb += load_value.eq(
            Mux(key_phase, Cat(key ^ run_key, Const(1, 1)), self.seed ^ RUN_SALT)
        )

        # XS and LOAD share the xs32 logic (the load is a mux in its last level); ADD's
        # carry chain takes its operands straight from the state flip-flops, so the
        # longest path is the 21-bit chain and two LUTs.
        xs_or_load = Signal(32)
        m.d.comb += xs_or_load.eq(Mux(load, load_value, xs32(x)))
        hi = MIX_ADD_SHIFT
        summed = (x[hi:] + x[: 32 - hi])[: 32 - hi]

        # ADD leaves bits 0..10 alone: they keep their value through the enable instead
        # of a multiplexer (11 LUT4 fewer on iCE40).
        # `o.ready` reaches the state's enables through one LUT: everything else they
        # depend on is a flip-flop.
        step = Signal()  # advance the stream by one word this cycle
        with m.If(mix_lo | step):
            m.d.sync += x[:hi].eq(xs_or_load[:hi])
        with m.If(mix_hi | step):
            m.d.sync += x[hi:].eq(Mux(add, summed, xs_or_load[hi:]))

        per_word = DIGITS_PER_WORD[self.digits]
        bits_per_digit = 32 // per_word
        n = self.digits_per_beat
        accept = self.o.valid & self.o.ready

        if self.words_per_beat == 1:
            # Several beats per word: `pos` selects the beat within the current word.
            pos = Signal(range(self.beats_per_word)) if self.beats_per_word > 1 else None
            m.d.comb += self.o.valid.eq(streaming)
            if pos is None:
                m.d.comb += step.eq(accept)
                window = x
            else:
                last = Signal()  # pos is the word's last beat
                pos_next = Signal.like(pos)
                m.d.comb += [
                    step.eq(accept & last),
                    pos_next.eq(Mux(self.start, 0, Mux(accept, pos + 1, pos))),  # wraps
                ]
                m.d.sync += [pos.eq(pos_next), last.eq(pos_next == self.beats_per_word - 1)]
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
            m.d.comb += fill_next.eq(Mux(self.start, 0, Mux(step, fill + 1, fill)))  # wraps
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
