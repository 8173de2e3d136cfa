"""SerialNoiseEngine (spec 2): key mixing and stream words on one bit-serial datapath.

One 32-bit shift register holds the state ``x`` and rotates right one bit per cycle, so
that ``ring[0]`` is bit ``i`` of ``x`` in cycle ``i`` of a 32-cycle *pass* and the bit
computed in that cycle enters at ``ring[31]``. A pass applies one whole function to ``x``:

* a **mix pass** is one ``mix32`` round, ``x = xs32(x); x = x + (x << 11)`` (spec 2.2);
* a **stream pass** is one ``xs32`` step, the next word of the stream (spec 2.4).

Both in one pass, LSB first. With ``y = x ^ (x << 13)``, ``z = y ^ (y >> 17)`` and
``w = z ^ (z << 5)`` (``xs32(x) = w``):

* ``z[i] = x[i] ^ x[i-13] ^ (x[i+17] ^ x[i+4] if i < 15)``: ``x[i-13]`` from a 13-bit
  delay line of the bits already shifted out, ``x[i+17]`` and ``x[i+4]`` from
  ``ring[17]`` and ``ring[4]``, not yet overwritten while ``i < 15``;
* ``w[i] = z[i] ^ z[i-5]`` (a 5-bit delay line of ``z``);
* the addition: bit ``i`` of ``w + (w << 11)`` is ``w[i] ^ w[i-11] ^ c`` with the carry
  ``c`` in one flip-flop (an 11-bit delay line of ``w``).

The delay lines and the carry are cleared at every pass end, so that the bits below bit
0 read as zero. A pass that is neither (the delay lines held at zero) rotates ``x``
unchanged; loads are an XOR into the shift path at a pass end, as in the serial
:class:`~pentegg.rtl.noise.keyer.StreamKeyer` (``k ^ cap ^ RUN_SALT`` with ``cap`` the seed in
pass A and ``RUN_SALT`` otherwise, one LUT4 per key bit). Passes, one-hot:

* with ``reseed``: A (clear; load ``k ^ seed ^ RUN_SALT``), B (load ``k`` again: ``x =
  seed ^ RUN_SALT``), six mix passes, the last of which saves ``S = x | 2^31`` into a
  32-bit shift register ``srk`` and ends with ``x = S ^ k``;
* without: Z (clear), R (shift ``S`` in from ``srk``; load ``k``: ``x = S ^ k``);
* then six mix passes (``x = x0``, spec 2.3) and stream passes until ``stop``.

In a stream pass the word that is being replaced stays readable where it has not been
overwritten: ``ring[c - 1 : 0]`` holds bits ``[j + c - 1 : j]`` of it in cycle ``j`` for
``j + c <= 32``. A chunk of ``c`` bits (at most 16) is therefore taken straight from
``ring[c - 1 : 0]`` every ``c`` cycles, with no multiplexer: word 0 (``x0`` itself) in the
first stream pass, word ``t`` in pass ``t + 1``.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_choice
from .keyer import RUN_SALT
from .prng import DIGIT_DISTS, DIGITS_PER_WORD, decode_digit, digits_layout

__all__ = ["CHUNK_DIGITS", "SerialNoiseEngine", "chunk_digits"]

KEY_BITS = 31
#: Digits per chunk allowed per distribution: chunks of at most 16 bits.
CHUNK_DIGITS = {"binomial": (1, 2, 4), "uniform": (1, 2)}
#: One-hot pass indices.
P_A, P_B, P_SAVE, P_Z, P_R, P_MIX, P_LAST = 0, 1, 7, 8, 9, 10, 15
MIX_RUN = range(2, 8)  # the run key's six rounds (P_SAVE is the last)
MIX_KEY = range(10, 16)  # the stream key's six rounds


def chunk_digits(rank: int, digits: str) -> int:
    """Digits per chunk for rows of ``rank`` digits: a whole row if it fits in 16 bits,
    else the largest power of two that does (4 binomial, 2 uniform)."""
    return min(rank, 16 // (32 // DIGITS_PER_WORD[digits]))


class SerialNoiseEngine(wiring.Component):
    """Start state and digits of one noise stream, one bit per cycle (module docstring).

    Parameters
    ----------
    digits : str
        ``"binomial"`` (default) or ``"uniform"`` (spec 2.5).
    chunk : int
        Digits per chunk on ``o``: 1, 2 or 4 binomial (4, 8, 16 bits), 1 or 2 uniform
        (8, 16 bits). Default 4.

    Interface attributes
    --------------------
    seed : In(32)
        Run seed, read in the cycle of a ``start`` with ``reseed``.
    key : In(31)
        The stream key ``step << 15 | pair << 4 | layer << 1 | ab`` (spec 2.3), read at
        the end of passes A and B (with ``reseed``) or R (without): 32 and 64 cycles
        after ``start`` with ``reseed``, 64 without. Hold it stable until the first chunk.
    start : In(1)
        Strobe: abandon any work and begin the stream of ``key`` from its start state.
    reseed : In(1)
        Sampled with ``start``: compute the run key from ``seed`` first (required after
        reset and whenever ``seed`` changes); 0 reuses the stored one.
    stop : In(1)
        Strobe: end the stream (``start`` in the same cycle wins).
    busy : Out(1)
        High from the cycle after ``start`` until the cycle after ``stop``.
    o : Out(stream.Signature(ArrayLayout(signed(3), chunk)))
        The stream's digits, ``chunk`` per beat, in stream order. While a beat waits for
        ``o.ready`` the engine stands still (the beat's bits are those of the state).

    Latency and throughput: the first beat is valid ``32 * 8 = 256`` cycles after
    ``start`` (passes Z, R and six mix passes), ``32 * 14 = 448`` with ``reseed`` (A, B,
    twelve mix passes); then, while ``o.ready`` is high, one beat every ``4 * chunk``
    cycles (binomial) or ``8 * chunk`` (uniform): a word of 32 bits every 32 cycles.
    """

    def __init__(self, *, digits: str = "binomial", chunk: int = 4):
        self.digits = check_choice("digits", digits, DIGIT_DISTS)
        self.chunk = check_choice("chunk", chunk, CHUNK_DIGITS[digits])
        self.bits_per_digit = 32 // DIGITS_PER_WORD[digits]
        super().__init__(
            {
                "seed": In(32),
                "key": In(KEY_BITS),
                "start": In(1),
                "reseed": In(1),
                "stop": In(1),
                "busy": Out(1),
                "o": Out(stream.Signature(digits_layout(chunk))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        # Datapath flip-flops need no reset: a start sets what it uses.
        ring = Signal(32, reset_less=True)  # x, rotating right one bit per cycle
        cap = Signal(32, reset_less=True)  # the seed during pass A, else RUN_SALT
        srk = Signal(32, reset_less=True)  # the run key S, bit 0 first at a pass start
        dx = Signal(13, reset_less=True)  # x[i-1] .. x[i-13]
        dz = Signal(5, reset_less=True)  # z[i-1] .. z[i-5]
        dw = Signal(11, reset_less=True)  # w[i-1] .. w[i-11]
        carry = Signal(reset_less=True)
        r17 = Signal(reset_less=True)  # an xs32 pass, i < 15: x[i+17] ^ x[i+4] applies
        xs_on = Signal()  # this pass applies xs32 (mix or stream pass)
        add_on = Signal()  # this pass adds x << 11 (mix pass)
        pas = Signal(16)  # one-hot pass of the key schedule, 0 when streaming or idle
        streaming = Signal()
        step = Signal(32)  # one-hot bit index i of the pass, 0 while idle
        act = Signal()

        end = step[31]  # never a beat's cycle: a wait never stops a pass end
        go = ~self.o.valid | self.o.ready  # not waiting for a beat to be taken
        begin = self.start
        halt = self.stop & ~begin
        m.d.comb += self.busy.eq(act)

        # Control: the pass and bit indices.
        nxt = Signal(16)  # the pass after this one
        m.d.comb += nxt.eq(
            Cat(
                0,
                pas[P_A],
                pas[MIX_RUN.start - 1 : P_SAVE],  # B, run rounds 1..5 -> rounds 1..6
                0,
                pas[P_Z],
                pas[P_SAVE] | pas[P_R],
                pas[MIX_KEY.start : P_LAST],
            )
        )
        first_mix = pas[P_B] | pas[P_R]
        with m.If(begin):
            m.d.sync += [
                act.eq(1),
                step.eq(1),
                pas.eq(Mux(self.reseed, 1 << P_A, 1 << P_Z)),
                streaming.eq(0),
                xs_on.eq(0),
                add_on.eq(0),
            ]
        with m.Elif(halt):
            m.d.sync += [act.eq(0), step.eq(0), pas.eq(0), streaming.eq(0)]
        with m.Elif(act & go):
            m.d.sync += step.eq(Cat(end, step[:31]))
            with m.If(end):
                m.d.sync += [
                    pas.eq(nxt),
                    streaming.eq(streaming | pas[P_LAST]),
                    xs_on.eq(xs_on | first_mix),
                    add_on.eq((add_on & ~pas[P_LAST]) | first_mix),
                ]
        # r17: cycles 0..14 of an xs32 pass
        with m.If(begin | step[14]):
            m.d.sync += r17.eq(0)
        with m.Elif(end):
            m.d.sync += r17.eq(xs_on | first_mix)

        # Datapath: one bit per cycle.
        z = Signal()
        w = Signal()
        v = Signal()
        m.d.comb += [
            z.eq(ring[0] ^ dx[12] ^ (r17 & (ring[17] ^ ring[4]))),
            w.eq(z ^ dz[4]),
            v.eq(w ^ dw[10] ^ carry),
        ]
        clear = begin | halt | end
        with m.If(clear):
            m.d.sync += [dx.eq(0), dz.eq(0), dw.eq(0), carry.eq(0)]
        with m.Elif(xs_on & go):
            m.d.sync += [dx.eq(Cat(ring[0], dx[:12])), dz.eq(Cat(z, dz[:4]))]
            with m.If(add_on):
                m.d.sync += [
                    dw.eq(Cat(w, dw[:10])),
                    carry.eq((w & dw[10]) | (carry & (w | dw[10]))),
                ]
        # cap: the seed from a start with reseed to the end of pass A, RUN_SALT after
        with m.If(begin & self.reseed):
            m.d.sync += cap.eq(self.seed)
        with m.Elif(begin | end):
            m.d.sync += cap.eq(RUN_SALT)
        # The bit entering ring[31]: the pass's result bit (x itself in the passes that
        # only rotate); the seed's bit 31 in pass A (bits 0..30 come with the load);
        # S from srk in pass R; bit 31 of S forced to 1 in the pass that saves it.
        top = Signal()
        m.d.comb += top.eq(
            (v ^ cap[31] ^ ((RUN_SALT >> 31) & 1) ^ (pas[P_R] & srk[0])) | (pas[P_SAVE] & end)
        )
        with m.If(pas[P_SAVE]):
            m.d.sync += srk.eq(Cat(srk[1:], top))
        with m.Elif(pas[P_R]):
            m.d.sync += srk.eq(Cat(srk[1:], srk[0]))
        load = end & (pas[P_A] | pas[P_B] | pas[P_SAVE] | pas[P_R])
        ld = Cat(self.key ^ cap[:KEY_BITS] ^ Const(RUN_SALT, 32)[:KEY_BITS], 0)
        with m.If(act & go):
            with m.If((pas[P_A] | pas[P_Z]) & ~end):
                m.d.sync += ring.eq(0)
            with m.Else():
                m.d.sync += ring.eq(Cat(ring[1:], top) ^ Mux(load, ld, 0))

        # Chunks of the word being replaced, every `bits` cycles of a stream pass.
        bits = self.chunk * self.bits_per_digit
        strobe = Cat(step[j] for j in range(0, 32, bits)).any()
        bpd = self.bits_per_digit
        m.d.comb += [
            self.o.valid.eq(streaming & strobe),
            self.o.payload.as_value().eq(
                Cat(
                    decode_digit(ring[j * bpd : (j + 1) * bpd], self.digits)
                    for j in range(self.chunk)
                )
            ),
        ]
        return m
