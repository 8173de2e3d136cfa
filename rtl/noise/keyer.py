"""StreamKeyer (spec 2.2, 2.3): the start state ``x0`` of a noise stream from its key.

``x0 = mix32(stream_key ^ S)`` with the run key ``S = mix32(seed ^ RUN_SALT) | 2^31``.
One keyer per device serves every generator: a request carries the key fields of one
stream (step, pair, layer, A|B), the answer is that stream's 32-bit start state, which a
:class:`~pentegg.rtl.noise.prng.PentaryStreamCore` (inside each LowRankGenerator lane) loads.

One 32-bit state register does the mixing, one operation per cycle:

* ``LOAD``: ``x <- seed ^ RUN_SALT`` or ``x <- stream_key ^ S``;
* ``XS``:   ``x <- xs32(x)`` (half a ``mix32`` round);
* ``ADD``:  ``x <- x + (x << 11)`` (the other half).

A round takes two cycles (``XS`` then ``ADD``) so that the 21-bit carry chain starts at
the state flip-flops (a one-cycle-round prototype, not kept, measured 48 MHz on an
iCE40UP5K with ``pentegg synth keyer``; this form 61.66 MHz, docs/resources.md).
``LOAD`` is a multiplexer inside the last level of the ``xs32`` logic. The run key (31
bits; bit 31 is always 1) is kept in a register between requests.

``keyer="serial"`` selects the area-minimal form: the same interface, one bit per cycle.
The state rotates through a 32-bit shift register, LSB first; each ``mix32`` half-step
is a 32-cycle pass that rewrites one bit per cycle at ``ring[31]``:

* ``x ^= x << s`` (s = 13, 5) and ``x += x << 11`` take ``x[i - s]`` from a 13-bit delay
  line of the bits already shifted out (cleared at each pass end, so 0 below bit 0); the
  addition keeps its carry in one flip-flop;
* ``x ^= x >> 17`` takes ``x[i + 17]`` from ``ring[17]`` (not yet rewritten) for i < 15.

Keys enter in parallel, as an XOR into the shift path at the end of a pass (one LUT4 per
bit, the unavoidable cost of 63 input bits): ``seed`` is captured into a register at the
start of a ``reseed`` request; pass A loads ``k ^ seed ^ RUN_SALT``, pass B loads ``k``
again (cancelling it; the captured seed is back to ``RUN_SALT`` by then), 24 passes mix,
the last of them also shifts ``S`` into a 32-bit run-key shift register that rotates with
the state. A stream key then costs pass Z (clear), pass R (shift ``S`` back in, load
``k``) and 24 mixing passes. All counters are one-hot shift registers (a 32-bit bit
index, a 52-bit pass index, a 4-bit mixing-pass kind), so that they cost flip-flops and
almost no LUT4.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ..params import check_choice

__all__ = [
    "KEYERS",
    "KEY_LAYOUT",
    "LAYER_BITS",
    "PAIR_BITS",
    "RUN_SALT",
    "STEP_BITS",
    "StreamKeyer",
    "xs32",
]

#: ``run_key(seed) = mix32(seed ^ RUN_SALT) | 0x80000000`` (spec 2.3).
RUN_SALT = 0x5EED_E66B
XS_SHIFTS = (13, 17, 5)
MIX_ROUNDS = 6
MIX_ADD_SHIFT = 11
STEP_BITS, PAIR_BITS, LAYER_BITS = 16, 11, 3
#: Keyer implementations (the ``keyer`` elaboration parameter): ``"parallel"`` mixes one
#: operation per cycle on a 32-bit state, ``"serial"`` one bit per cycle (far smaller,
#: about 60 times slower; :class:`StreamKeyer` gives both latencies).
KEYERS = ("parallel", "serial")

#: A request: bits ``[30:0]`` are the spec's 31-bit stream key
#: ``step << 15 | pair << 4 | layer << 1 | ab``; bit 31 asks for the run key to be
#: recomputed from ``seed`` first.
KEY_LAYOUT = data.StructLayout(
    {"ab": 1, "layer": LAYER_BITS, "pair": PAIR_BITS, "step": STEP_BITS, "reseed": 1}
)


def xs32(x):
    """Marsaglia's xorshift32 (13, 17, 5) on a 32-bit Amaranth value."""
    a, b, c = XS_SHIFTS
    x = x ^ (x << a)[:32]
    x = x ^ (x >> b)
    return x ^ (x << c)[:32]


class StreamKeyer(wiring.Component):
    """Start states of noise streams: ``x0 = mix32(stream_key ^ run_key(seed))`` (spec 2.3).

    Interface attributes
    --------------------
    seed : In(32)
        Run seed. Read once per run-key computation (a request with ``reseed``), in the
        cycle after that request is first seen valid.
    k : In(stream.Signature(KEY_LAYOUT))
        Requests, 32 bits: ``ab`` (bit 0; 0 for A, 1 for B), ``layer`` (bits 3:1),
        ``pair`` (14:4), ``step`` (30:15), so that bits ``[30:0]`` are the stream key, and
        ``reseed`` (bit 31): recompute the run key from ``seed`` before this request
        (required for the first request after reset and whenever ``seed`` changes). A
        request is accepted when its key is loaded, after the run key when ``reseed`` is
        set: as for any stream, it must stay valid and unchanged until then.
    x0 : Out(stream.Signature(32))
        The answers, one per request, in order: the stream's start state (word 0 of the
        stream, spec 2.4), never zero.
    cancel : In(1)
        Strobe: drop the request being worked on (accepted or not) and an answer not yet
        taken. A request valid in the same cycle is served next.
    busy : Out(1)
        High while a request is being worked on or its answer waits on ``x0``.

    Parameters
    ----------
    keyer : str
        ``"parallel"`` (default): one ``mix32`` half-round per cycle on a 32-bit state.
        ``"serial"``: one bit per cycle on shift registers (module docstring), about a
        third of the LUT4 and 60 times the latency.

    Latency and throughput, ``keyer="parallel"``: ``x0.valid`` rises 14 cycles after a
    request is first seen valid by an idle keyer (one cycle to decide, the load, six
    two-cycle rounds), 28 with ``reseed`` (the run key first: load, six rounds, store).
    The keyer works on one request at a time and takes the next one the cycle after the
    answer is taken: one answer every 15 cycles (29 with ``reseed``) when ``x0.ready`` is
    high.

    Latency and throughput, ``keyer="serial"``: the keyer begins a request in the cycle it
    is first seen valid by an idle keyer (reading ``seed`` in that cycle if ``reseed``),
    then runs 32-cycle passes: 26 for a stream key (``k.ready`` in the last cycle of the
    second, 64 cycles after the request is first seen), 52 with ``reseed`` (``k.ready``
    after 896 cycles). ``x0.valid`` rises 833 cycles after the request is first seen, 1665
    with ``reseed``: one answer every 834 cycles (1666 with ``reseed``) when ``x0.ready``
    is high. ``cancel`` takes effect at the end of the current pass (at most 32 cycles;
    ``busy`` stays high and no request is taken meanwhile), then the request valid by then
    is begun.
    """

    def __init__(self, *, keyer: str = "parallel"):
        self.keyer = check_choice("keyer", keyer, KEYERS)
        super().__init__(
            {
                "seed": In(32),
                "k": In(stream.Signature(KEY_LAYOUT)),
                "x0": Out(stream.Signature(32)),
                "cancel": In(1),
                "busy": Out(1),
            }
        )

    def elaborate(self, platform):
        if self.keyer == "serial":
            return self._elaborate_serial()
        return self._elaborate_parallel()

    def _elaborate_parallel(self):
        m = Module()
        x = Signal(32)  # the state; the answer while x0.valid
        run_key = Signal(31)  # S without its bit 31 (always 1)
        # Schedule, t = 0..26 (27 cycles with reseed, 13 without):
        #   0: LOAD seed ^ salt;  1..12: (XS, ADD) x 6;  13: SAVE run key;
        #  14: LOAD key ^ S (the request is accepted);  15..26: (XS, ADD) x 6.
        # A request without reseed enters at 14.
        T_SAVE, T_KEY, T_END = 13, 14, 26
        t = Signal(range(T_END + 1))
        mixing = Signal()
        done = Signal()  # x0.valid
        m.d.comb += [self.x0.valid.eq(done), self.x0.payload.eq(x), self.busy.eq(mixing | done)]

        # Control signals are flip-flops decoded one cycle ahead, so the state register's
        # enables and multiplexers never see a request's valid or the answer's ready.
        load = Signal()
        add = Signal()
        save = Signal()
        key_phase = Signal()
        mix_hi = Signal()  # bits 11..31 change: not SAVE
        mix_lo = Signal()  # bits 0..10 change: not SAVE, not ADD
        idle = ~mixing & ~done
        begin = self.k.valid & (idle | self.cancel)
        going = mixing & (t != T_END) & ~self.cancel
        mixing_n = begin | going
        reseed = self.k.payload.reseed
        add_n = ~begin & going & t[0] & (t != T_KEY - 1)  # after XS, but not at T_KEY
        save_n = ~begin & going & (t == T_SAVE - 1)
        m.d.sync += [
            t.eq(Mux(begin, Mux(reseed, 0, T_KEY), t + 1)),
            mixing.eq(mixing_n),
            load.eq(begin | (going & (t == T_KEY - 1))),
            add.eq(add_n),
            save.eq(save_n),
            key_phase.eq(Mux(begin, ~reseed, t >= T_KEY - 1)),
            mix_hi.eq(mixing_n & ~save_n),
            mix_lo.eq(mixing_n & ~save_n & ~add_n),
        ]
        with m.If(self.cancel | (done & self.x0.ready)):
            m.d.sync += done.eq(0)
        with m.Elif(mixing & (t == T_END)):
            m.d.sync += done.eq(1)
        with m.If(save):
            m.d.sync += run_key.eq(x[:31])
        # The request is taken in the cycle its key is loaded.
        m.d.comb += self.k.ready.eq(load & key_phase & ~self.cancel)

        key = self.k.payload.as_value()[:31]  # stream_key
        load_value = Signal(32)
        m.d.comb += load_value.eq(
            Mux(key_phase, Cat(key ^ run_key, Const(1, 1)), self.seed ^ RUN_SALT)
        )
        # XS and LOAD share the xs32 logic (the load is a mux in its last level); ADD's
        # carry chain takes its operands straight from the state flip-flops.
        xs_or_load = Signal(32)
        m.d.comb += xs_or_load.eq(Mux(load, load_value, xs32(x)))
        hi = MIX_ADD_SHIFT
        summed = (x[hi:] + x[: 32 - hi])[: 32 - hi]
        # ADD leaves bits 0..10 alone: they keep their value through the enable.
        with m.If(mix_lo):
            m.d.sync += x[:hi].eq(xs_or_load[:hi])
        with m.If(mix_hi):
            m.d.sync += x[hi:].eq(Mux(add, summed, xs_or_load[hi:]))
        return m

    def _elaborate_serial(self):
        """One bit per cycle: see the class docstring for the schedule."""
        m = Module()
        # Datapath and most control flip-flops need no reset: a request sets what it uses.
        # Flip-flops start at 0 (iCE40 flip-flops power up at 0: no init of 1 anywhere).
        ring = Signal(32, reset_less=True)  # the state x, rotating right one bit per cycle
        cap = Signal(32, reset_less=True)  # the seed while loading it, else RUN_SALT
        srk = Signal(32, reset_less=True)  # the run key S, rotating in step with `ring`
        dly = Signal(13, reset_less=True)  # x[i-1], ..., x[i-13] (0 below bit 0)
        carry = Signal(reset_less=True)
        # One-hot pass (all zero while idle): 0 (A) load seed ^ RUN_SALT ^ k at its end;
        # 1 (B) load k (cancels A's k); 2..25 mix32 of the run key (25 saves it in srk);
        # 26 (Z) clear; 27 (R) shift S in from srk, load k; 28..51 mix32 of the stream key.
        pas = Signal(52, reset_less=True)
        P_A, P_B, P_S, P_Z, P_R, P_X = 0, 1, 25, 26, 27, 51
        kind = Signal(4, reset_less=True)  # one-hot mix pass: <<13, >>17, <<5, +(x<<11)
        r17 = Signal(reset_less=True)  # pass x ^= x >> 17 and i < 15
        # cancelled: finish the pass, then idle. No reset: a drop left over by a reset in
        # the middle of a cancelled pass only makes the first request after the reset
        # stop at the end of its first pass and begin again (at most 32 cycles later).
        drop = Signal(reset_less=True)
        step = Signal(32)  # one-hot bit index i of the pass, all zero while idle
        act = Signal()  # working (every pass runs to its end, also when dropped)
        done = Signal()  # x0.valid
        m.d.comb += [
            self.x0.valid.eq(done),
            self.x0.payload.eq(ring),
            self.busy.eq(act | done),
        ]
        end = step[31]  # the last bit of a pass
        begin = self.k.valid & ~act & (~done | self.cancel)
        reseed = self.k.payload.reseed
        stop = self.cancel | drop
        m.d.comb += self.k.ready.eq(end & pas[P_R] & ~stop)

        # Control.
        go_on = end & ~stop & ~pas[P_X]
        m.d.sync += [
            act.eq(begin | (act & ~(end & ~go_on))),
            step.eq(Cat(begin | go_on, step[:31])),
        ]
        with m.If(begin):
            m.d.sync += [
                pas.eq(Cat(reseed, Const(0, P_Z - 1), ~reseed, Const(0, P_X - P_Z))),
                kind.eq(0),
            ]
        with m.Elif(end):
            m.d.sync += [
                pas.eq(Cat(0, pas[:P_X])),
                kind.eq(Cat(pas[P_B] | pas[P_R] | (kind[3] & ~pas[P_S]), kind[:3])),
            ]
        with m.If(end):
            m.d.sync += drop.eq(0)
        with m.Elif(self.cancel):
            m.d.sync += drop.eq(act)
        with m.If(self.cancel | (done & self.x0.ready)):
            m.d.sync += done.eq(0)
        with m.Elif(end & pas[P_X] & ~stop):
            m.d.sync += done.eq(1)
        with m.If(step[14]):
            m.d.sync += r17.eq(0)
        with m.Elif(end):
            m.d.sync += r17.eq(kind[0])
        with m.If(end):
            m.d.sync += cap.eq(RUN_SALT)
        with m.Elif(begin & reseed):
            m.d.sync += cap.eq(self.seed)

        # Datapath: one bit of x per cycle, LSB first; ring[0] is x[i]. x[i - s] for the
        # left shifts and the addition come from the delay line (zero for i < s, cleared
        # at the end of each pass), x[i + 17] from ring[17] (not yet overwritten).
        o1 = (kind[0] & dly[12]) | (kind[2] & dly[4])
        o2 = (kind[3] & dly[10]) | (r17 & ring[17])
        new = ring[0] ^ carry ^ o1 ^ o2
        with m.If(act):
            with m.If(end):
                m.d.sync += dly.eq(0)
            with m.Else():
                m.d.sync += dly.eq(Cat(ring[0], dly[:12]))
        with m.If(end):
            m.d.sync += carry.eq(0)
        with m.Elif(kind[3]):
            m.d.sync += carry.eq((ring[0] & (o1 | o2)) | (carry & (ring[0] | o1 | o2)))
        # Loads happen at the end of a pass, when ring[j + 1] is bit j of x: the XOR of
        # k, cap and RUN_SALT (zero but in pass A, when cap is the seed). Pass R shifts S
        # in from srk into the ring that pass Z cleared.
        load = end & (pas[P_A] | pas[P_B] | pas[P_R])
        ld = Cat(self.k.payload.as_value()[:31] ^ cap[:31] ^ Const(RUN_SALT, 32)[:31], 0)
        top = Signal()  # the bit entering ring[31]: `new` in the mixing passes
        m.d.comb += top.eq(new ^ cap[31] ^ (pas[P_R] & srk[0]))
        shifted = Cat(ring[1:], top)
        # The run key is saved as the last pass of its mixing produces it; bit 31 forced.
        with m.If(act):
            m.d.sync += srk.eq(Cat(srk[1:], Mux(pas[P_S], top | end, srk[0])))
        with m.If(act):
            with m.If((pas[P_A] | pas[P_Z]) & ~end):
                m.d.sync += ring.eq(0)
            with m.Else():
                m.d.sync += ring.eq(shifted ^ Mux(load, ld, 0))
        return m
