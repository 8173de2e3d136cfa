"""WeightUpdater (spec 8.2 moves, 8.3 pentary update, 8.4 latent update).

After :class:`~pentegg.rtl.update.votes.VoteAccumulator` has completed ``Z`` of a layer,
the updater walks the layer row-major, one weight per cycle::

    move = sign(Z) if |Z| > theta else 0            (strict: Z = 0 never moves)
    pentary:  W = sat(W + move, -2, 2)
    latent:   V = sat(V + move, -Vmax, Vmax),  W = PQUANT(V, latent_shift)

and writes ``W`` to the weight memory in the spec 1.3/1.4 storage format (five 3-bit
codes per 16-bit word, digit ``i`` in bits ``[3i+2:3i]``, the matrix from word
``w_base`` on, its last word padded with the code of 0): the layout the evaluator's
:class:`~pentegg.rtl.evaluator.weights.WeightStreamer` reads. In latent mode ``V`` (one
word of ``latent_bits`` per weight, at ``v_base + o * fan + k``) is read and written
back; the old ``W`` is not needed. In pentary mode the old ``W`` words are read.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..evaluator.pass_engine import lane_copies
from ..params import check_choice, check_int
from .votes import MAX_WIDTH, lanes_max, z_layout

__all__ = ["UPDATES", "WeightUpdater", "latent_shift_max"]

UPDATES = ("latent", "pentary")
DIGITS_PER_WORD = 5
THETA_BITS = 32


def latent_shift_max(latent_bits: int) -> int:
    """Largest ``latent_shift`` (spec 9.1): ``3 * 2^q <= 2 * Vmax``."""
    vmax = (1 << (latent_bits - 1)) - 1
    return max(q for q in range(8) if 3 << q <= 2 * vmax)


class WeightUpdater(wiring.Component):
    """Moves and the update of one layer's weights, one weight per cycle.

    Parameters
    ----------
    update : str
        ``"latent"`` (default, spec 8.4) or ``"pentary"`` (spec 8.3).
    latent_bits : int
        3..8 (latent update): ``Vmax = 2^(latent_bits - 1) - 1``.
    lanes, max_width : int
        As the :class:`~pentegg.rtl.update.votes.VoteAccumulator` whose ``Z`` is read
        (1..max(64, max_width + 1), 1..4096): they fix the ``Z`` word layout.
    z_bits : int
        Width of a ``Z`` entry, 2..48 (the accumulator's ``z_bits``).
    addr_bits : int
        Width of the weight and latent memory addresses, 1..32 (default 16).

    Interface attributes
    --------------------
    start : In(1)
        Strobe, taken while ``busy`` is low; the other inputs stay stable until ``done``.
    out : In(range(max_width + 1)), fan : In(range(max_width + 2))
        The layer's shape (1..max_width, 1..max_width + 1).
    theta : In(32)
        Threshold (spec 8.2), unsigned.
    latent_shift : In(3)
        ``q`` of spec 8.4, 0..latent_shift_max(latent_bits) (latent update only).
    w_base : In(addr_bits), v_base : In(addr_bits)
        First word of the layer's packed weights; first latent word (latent only).
    busy : Out(1), done : Out(1), error : Out(1)
        ``busy`` from the cycle after an accepted start; ``done`` a one-cycle strobe when
        the last word is written (or the start was refused); ``error`` set with ``done``
        when a run-time input is out of range (nothing is written), cleared by ``start``.
    z_addr : Out(range), z_data : In(ArrayLayout(signed(z_bits), lanes))
        ``Z`` read port, latency 4 (the accumulator's ``z_addr``/``z_data``).
    w_raddr : Out(addr_bits), w_rdata : In(16)
        Pentary update only: read port of the weight memory, latency 1.
    w_waddr : Out(addr_bits), w_wdata : Out(16), w_wen : Out(1)
        Write port of the weight memory.
    v_raddr : Out(addr_bits), v_rdata : In(signed(latent_bits))
        Latent update only: read port of the latent memory, latency 2 (the block RAMs'
        output registers).
    v_waddr : Out(addr_bits), v_wdata : Out(signed(latent_bits)), v_wen : Out(1)
        Latent update only: write port of the latent memory.
    r_en : Out(1)
        The read at ``v_raddr`` (a weight walks stage 1) or ``w_raddr`` (stage 1a) in
        this cycle is used; the address is held otherwise.

    Timing: ``done`` is high ``out * fan + 8`` cycles after the ``start`` cycle: one weight
    per cycle (a ``V`` write per cycle, a ``W`` word write every five) through eight
    pipeline stages (three while the ``Z`` word is read; ``Z`` into a
    shift register of ``lanes * z_bits`` flip-flops, so that no lane multiplexer meets
    the block RAM's output; ``Z`` to move while ``V`` or
    ``W`` is read into a register; the move applied, saturated; ``V`` written and ``PQUANT`` as
    four comparisons of ``V`` with the thresholds of ``latent_shift``; the digit packed
    and the word written). No memory's read data meets logic before a register.
    Read ports: ``z_data`` four cycles after ``z_addr``, ``v_rdata`` two cycles after
    ``v_raddr``, ``w_rdata`` one cycle after ``w_raddr``.
    """

    def __init__(
        self,
        *,
        update: str = "latent",
        latent_bits: int = 8,
        lanes: int = 4,
        max_width: int = 64,
        z_bits: int = 21,
        addr_bits: int = 16,
    ):
        self.update = check_choice("update", update, UPDATES)
        self.latent_bits = check_int("latent_bits", latent_bits, 3, 8)
        self.max_width = check_int("max_width", max_width, 1, MAX_WIDTH)
        self.lanes = check_int("lanes", lanes, 1, lanes_max(max_width))
        self.z_bits = check_int("z_bits", z_bits, 2, 48)
        self.addr_bits = check_int("addr_bits", addr_bits, 1, 32)
        self.q_max = latent_shift_max(latent_bits)
        self.z_depth, self.z_addr_bits = z_layout(lanes, max_width)
        members = {
            "start": In(1),
            "out": In(range(max_width + 1)),
            "fan": In(range(max_width + 2)),
            "theta": In(THETA_BITS),
            "w_base": In(addr_bits),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
            "z_addr": Out(self.z_addr_bits),
            "z_data": In(data.ArrayLayout(signed(z_bits), lanes)),
            "w_waddr": Out(addr_bits),
            "w_wdata": Out(16),
            "w_wen": Out(1),
            "r_en": Out(1),
        }
        if update == "pentary":
            members |= {"w_raddr": Out(addr_bits), "w_rdata": In(16)}
        else:
            members |= {
                "latent_shift": In(3),
                "v_base": In(addr_bits),
                "v_raddr": Out(addr_bits),
                "v_rdata": In(signed(latent_bits)),
                "v_waddr": Out(addr_bits),
                "v_wdata": Out(signed(latent_bits)),
                "v_wen": Out(1),
            }
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        latent = self.update == "latent"
        ab = self.addr_bits

        # ---- stage 0: walk (o, k), row-major
        walking = Signal()
        o = Signal(range(self.max_width + 1))
        k = Signal(range(self.max_width + 2))
        lane = Signal(range(max(lanes, 2)))
        zaddr = Signal(self.z_addr_bits)
        n = Signal(ab)  # v_base + flat index
        wi = Signal(ab)  # w_base + word index
        dpos = Signal(range(DIGITS_PER_WORD))
        # the row's last column and the layer's last row: flags set with k and o (the
        # compares of k + 1 and o + 1 with the layer's shape before the walk's enables
        # had 4 of the 128-lane ULX3S build's 84 endpoints past 10 ns at 22de219, seed 1)
        last_k = Signal()
        last_o = Signal()
        last = last_k & last_o
        m.d.comb += self.z_addr.eq(zaddr)
        with m.If(walking):
            m.d.sync += n.eq(n + 1)
            with m.If(dpos == DIGITS_PER_WORD - 1):
                m.d.sync += [dpos.eq(0), wi.eq(wi + 1)]
            with m.Else():
                m.d.sync += dpos.eq(dpos + 1)
            with m.If(last_k):
                m.d.sync += [
                    k.eq(0),
                    last_k.eq(self.fan == 1),
                    lane.eq(0),
                    o.eq(o + 1),
                    last_o.eq(o + 2 == self.out),
                    zaddr.eq(zaddr + 1),
                ]
            with m.Elif(lane == lanes - 1):
                m.d.sync += [
                    k.eq(k + 1),
                    last_k.eq(k + 2 == self.fan),
                    lane.eq(0),
                    zaddr.eq(zaddr + 1),
                ]
            with m.Else():
                m.d.sync += [k.eq(k + 1), last_k.eq(k + 2 == self.fan), lane.eq(lane + 1)]
            with m.If(last):
                m.d.sync += walking.eq(0)

        def later(stage, **fields):
            """The walk's ``fields`` registered into stage ``stage``."""
            regs = {k: Signal.like(v, name=f"{stage}_{k}") for k, v in fields.items()}
            m.d.sync += [regs[k].eq(v) for k, v in fields.items()]
            return SimpleNamespace(**regs)

        # ---- stage 0a: the walk a cycle later, while Z (read latency 4 from stage 0) is
        # on its way: its word comes out of the vote accumulator's register in stage 1a
        # (the block RAM's unregistered output, about 5 ns from the clock on the ECP5, had
        # made the read registers' inputs late: 29 of the 128-lane ULX3S build's 413
        # endpoints past 10 ns at cd6a36f, seed 1)
        lane0 = Signal()
        m.d.comb += lane0.eq(lane == 0)
        s0a = later("s0a", valid=walking, last=last, n=n, wi=wi, dpos=dpos, lane0=lane0)
        # ---- stage 0b: a cycle more (the accumulator's address register beside its block
        # RAMs: read latency 4)
        s0b = later("s0b", **vars(s0a))
        # ---- stage 1: Z (read at stage 0) into a shift register. A Z word holds the
        # entries of `lanes` consecutive weights (lane 0 first) and the walk takes them in
        # that order, one per cycle, so the word is loaded at its lane 0 and shifted by one
        # entry a cycle after: the entry of the weight in stage 1b is always the register's
        # lowest, with no lane multiplexer after the Z read.
        s1_valid = Signal()
        s1_last = Signal()
        s1_n = Signal(ab)
        s1_wi = Signal(ab)
        s1_dpos = Signal.like(dpos)
        m.d.sync += [
            s1_valid.eq(s0b.valid),
            s1_last.eq(s0b.last),
            s1_n.eq(s0b.n),
            s1_wi.eq(s0b.wi),
            s1_dpos.eq(s0b.dpos),
        ]
        zb = self.z_bits
        # ---- stage 1a: the Z word (z_data, a register's output), the walk's fields a
        # cycle later
        zq = self.z_data.as_value()
        s1a = later("s1a", valid=s1_valid, last=s1_last, n=s1_n, wi=s1_wi, dpos=s1_dpos)
        # data, loaded at lane 0 of every word before it is read: no reset (the reset net
        # reaches only control state)
        zsh = Signal(lanes * zb, reset_less=True)
        if lanes > 1:
            # whether to load comes from registers (lane 0 decoded at stage 0, carried to
            # stage 1a), a copy per COPY_LANES entries: the decode of the lane at stage 1
            # had driven all lanes * z_bits multiplexers (693 at 33 lanes; the 128-lane
            # accelerator at e4e6c56 had 251 of the register's endpoints over 9.5 ns after
            # routing)
            s1_lane0 = Signal()
            m.d.sync += s1_lane0.eq(s0b.lane0)
            load = lane_copies(m, "s1a_load", s1_lane0, lanes)
            nxt = Cat(zsh[zb:], Const(0, zb))  # entry i + 1 into entry i
            for i in range(lanes):
                e = slice(i * zb, (i + 1) * zb)
                m.d.sync += zsh[e].eq(Mux(load[i], zq[e], nxt[e]))
        else:
            m.d.sync += zsh.eq(zq)

        # ---- stage 1b: Z -> move; the V or W word read at stage 1 registered
        s1b = later("s1b", **vars(s1a))
        # the V (or W) read is issued at stage 1 (1a) and its data registered here, so
        # that the latent or weight memory's output meets no adder
        if latent:
            m.d.comb += [self.r_en.eq(s1_valid), self.v_raddr.eq(s1_n)]
            s2_old = Signal(signed(self.latent_bits))
            m.d.sync += s2_old.eq(self.v_rdata)
        else:
            m.d.comb += [self.r_en.eq(s1a.valid), self.w_raddr.eq(s1a.wi)]
            s2_old = Signal(16)
            m.d.sync += s2_old.eq(self.w_rdata)
        z = Signal(signed(zb))
        m.d.comb += z.eq(zsh[:zb].as_signed())
        # PQUANT(V, q) thresholds on |V|, fixed for a run: t1 = 2^(q-1), t2 = 3 * 2^(q-1)
        # (q = 0: 1 and 2), from a table at start
        if latent:
            t1 = Signal(self.latent_bits)
            t2 = Signal(self.latent_bits + 1)
            with m.If(self.start & ~self.busy):
                with m.Switch(self.latent_shift):
                    for q in range(self.q_max + 1):
                        with m.Case(q):
                            m.d.sync += [
                                t1.eq((1 << q) >> 1 if q else 1),
                                t2.eq(3 << (q - 1) if q else 2),
                            ]
        # theta clamped to 2^(z_bits-1) (no |Z| exceeds it) and negated once, at start
        zlim = 1 << (self.z_bits - 1)
        th_pos = Signal(range(zlim + 1))
        th_neg = Signal(signed(self.z_bits + 1))
        with m.If(self.start & ~self.busy):
            th = Mux(self.theta > zlim, zlim, self.theta)
            m.d.sync += [th_pos.eq(th), th_neg.eq(-th)]
        move = Signal(signed(2))
        with m.If(z > th_pos):
            m.d.comb += move.eq(1)
        with m.Elif(z < th_neg):
            m.d.comb += move.eq(-1)

        # ---- stage 2: the move applied to V (or W)
        s2_valid = Signal()
        s2_last = Signal()
        s2_move = Signal(signed(2))
        s2_n = Signal(ab)
        s2_wi = Signal(ab)
        s2_dpos = Signal.like(dpos)
        m.d.sync += [
            s2_valid.eq(s1b.valid),
            s2_last.eq(s1b.last),
            s2_move.eq(move),
            s2_n.eq(s1b.n),
            s2_wi.eq(s1b.wi),
            s2_dpos.eq(s1b.dpos),
        ]
        # stage 2 gives the new V (latent) or the new W digit (pentary) to stage 3
        s3_valid = Signal()
        s3_last = Signal()
        s3_wi = Signal(ab)
        s3_dpos = Signal.like(dpos)
        m.d.sync += [
            s3_valid.eq(s2_valid),
            s3_last.eq(s2_last),
            s3_wi.eq(s2_wi),
            s3_dpos.eq(s2_dpos),
        ]
        code = Signal(3)  # the new W digit, in stage 3
        if latent:
            vmax = (1 << (self.latent_bits - 1)) - 1
            vsum = Signal(signed(self.latent_bits))
            m.d.comb += vsum.eq(s2_old + s2_move)
            # saturation decided from the old V and the move, beside the adder, not from
            # its sum: V + move leaves [-Vmax, Vmax] only at V = Vmax with +1, V = -Vmax
            # with -1, or V = -Vmax - 1 (a host's write) with 0 or -1. (Compared after the
            # sum, the adder's carry chain fed a comparator's: the 128-lane ULX3S build's
            # critical path at de10e19, seed 1, 9.98 ns.)
            hi = Signal()
            lo = Signal()
            m.d.comb += [
                hi.eq((s2_old == vmax) & (s2_move == 1)),
                lo.eq(
                    ((s2_old == -vmax) & (s2_move == -1)) | ((s2_old == -vmax - 1) & (s2_move != 1))
                ),
            ]
            s3_v = Signal(signed(self.latent_bits))
            m.d.sync += s3_v.eq(Mux(hi, vmax, Mux(lo, -vmax, vsum)))
            s3_n = Signal(ab)
            m.d.sync += s3_n.eq(s2_n)
            # ---- stage 3: V written, W = PQUANT(V, q) as comparisons of V with the
            # thresholds of q (spec 4.1: level 1 from |V| >= t1, level 2 from |V| >= t2)
            pos1 = Signal()
            pos2 = Signal()
            neg1 = Signal()
            neg2 = Signal()
            m.d.comb += [
                pos1.eq(s3_v >= t1),
                pos2.eq(s3_v >= t2),
                neg1.eq(s3_v <= -t1),
                neg2.eq(s3_v <= -t2),
            ]
            m.d.comb += code.eq(Mux(pos2, 2, Mux(neg2, -2, Mux(pos1, 1, Mux(neg1, -1, 0)))))
            m.d.comb += [
                self.v_waddr.eq(s3_n),
                self.v_wdata.eq(s3_v),
                self.v_wen.eq(s3_valid),
            ]
        else:
            old = s2_old.word_select(s2_dpos, 3).as_signed()
            wsum = Signal(signed(4))
            m.d.comb += wsum.eq(old + s2_move)
            s3_code = Signal(3)
            m.d.sync += s3_code.eq(Mux(wsum > 2, 2, Mux(wsum < -2, -2, wsum)))
            m.d.comb += code.eq(s3_code)

        # ---- stage 4: the digit into the word being assembled; W written
        s4_valid = Signal()
        s4_last = Signal()
        s4_code = Signal(3)
        s4_wi = Signal(ab)
        s4_dpos = Signal.like(dpos)
        m.d.sync += [
            s4_valid.eq(s3_valid),
            s4_last.eq(s3_last),
            s4_code.eq(code),
            s4_wi.eq(s3_wi),
            s4_dpos.eq(s3_dpos),
        ]
        word = Signal(15)  # digits 0..dpos-1 of the word
        placed = Signal(15)
        m.d.comb += placed.eq(Mux(s4_dpos == 0, 0, word) | (s4_code << (s4_dpos * 3)))
        with m.If(s4_valid):
            m.d.sync += word.eq(placed)
        m.d.comb += [
            self.w_waddr.eq(s4_wi),
            self.w_wdata.eq(placed),
            self.w_wen.eq(s4_valid & ((s4_dpos == DIGITS_PER_WORD - 1) | s4_last)),
        ]

        # ---- control
        bad = (
            (self.out == 0)
            | (self.out > self.max_width)
            | (self.fan == 0)
            | (self.fan > self.max_width + 1)
            | ((self.latent_shift > self.q_max) if latent else Const(0))
        )
        busy = Signal()
        refused = Signal()
        m.d.comb += [self.busy.eq(busy), self.done.eq(refused | (s4_valid & s4_last))]
        m.d.sync += refused.eq(0)
        with m.If(self.start & ~busy):
            # the walk's registers start whether or not the run is refused (a refused
            # run never walks): the range checks' compare tree reaches only the flags
            # (through it into the lane index and the latent address, 7 of the 128-lane
            # ULX3S build's 80 endpoints past 10 ns at 5e791fe, seed 1, 11.18 ns)
            m.d.sync += [
                self.error.eq(bad),
                o.eq(0),
                last_o.eq(self.out == 1),
                k.eq(0),
                last_k.eq(self.fan == 1),
                lane.eq(0),
                zaddr.eq(0),
                dpos.eq(0),
                n.eq(self.v_base if latent else 0),
                wi.eq(self.w_base),
            ]
            with m.If(bad):
                m.d.sync += refused.eq(1)
            with m.Else():
                m.d.sync += [busy.eq(1), walking.eq(1)]
        with m.If(s4_valid & s4_last):
            m.d.sync += busy.eq(0)
        return m
