"""SlicedRAM: a wide RAM whose block RAMs each take the read address from a register of
their own.

The evaluator's activation and noise memories are one word per cycle for every lane (8
or 6 bits a lane, 768 to 1,024 bits at 128 lanes): their block RAMs lie beside the lanes
they feed, spread over the chip, and a read address from one register reached them all
through routing alone (the 128-lane ECP5 evaluator's critical path at ``013a584``: the
pass engine's beat into the noise banks' read address, 15.19 ns, 14.22 of it routing).
Here the word is cut into *slices* of whole write granules, each its own memory of one
block RAM's width (:func:`slice_granules_for`), and each slice registers the read
address in a copy of its own (:data:`~pentegg.rtl.evaluator.pass_engine.REPLICA_ATTR`):
the placer puts every copy between the shared address and its block RAM, so the route
is cut in two.

Read latency: two cycles. ``r_data`` is the word at the ``r_addr`` of two cycles earlier
(the address register, then the block RAM's read register). Writes are the block RAM's
own (``w_*`` written at the end of their cycle) or, with ``reg_writes`` 1, from a copy per
slice of registers loaded with them (written a cycle later; ``landing``: the slices'
write enables of the cycle). With ``reg_writes`` 2 each slice has two such copies in a row
(written two cycles later): the placer puts the first between the write's source and the
second, beside the block RAM, so the route from one source to slices all over the chip is
cut twice.

A read of a word written in the same cycle gives an unspecified word
(:data:`~pentegg.rtl.bram.NO_RW_CHECK`): :meth:`watches` lists each slice's ports for the
tests' collision monitor.
"""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..bram import NO_RW_CHECK, RWWatch
from ..params import check_int
from .pass_engine import REPLICA_ATTR

__all__ = ["SlicedRAM", "slice_granules_for"]


def slice_granules_for(platform, depth: int, granule: int) -> int | None:
    """Write granules of ``granule`` bits that one block RAM of ``depth`` words holds:
    the ECP5's ``DP16KD`` has a write enable per 9 bits, four of them up to 512 words
    (36 bits), two up to 1,024, one up to 2,048, and a granule takes whole ones (four
    6-bit lane slots, or two 18-bit writes of three lanes). Also in simulation
    (``platform`` None), so that the tests see the slices. None (one slice) on the iCE40,
    whose 16-bit block RAMs a design of a few lanes fills anyway."""
    if getattr(platform, "family", None) == "ice40":
        return None
    enables = 4 if depth <= 512 else 2 if depth <= 1024 else 1
    return max(1, enables // -(-granule // 9))


class SlicedRAM(wiring.Component):
    """``depth`` words of ``width`` bits, written in granules of ``granule`` bits.

    Parameters
    ----------
    width, depth, granule : int
        ``width`` a multiple of ``granule``.
    per_slice : int or None
        Granules of a slice (:func:`slice_granules_for`); None: one slice.
    reg_writes : int
        Write registers of each slice in a row, 0..2: none (the block RAMs' own), one (a
        cycle later) or two (two cycles later); ``write_latency``.
    name : str
        Prefix of the slices' names.

    Interface attributes
    --------------------
    r_addr : In(ceil_log2(depth))
    r_data : Out(width)
        The word at ``r_addr`` two cycles earlier.
    w_addr : In(ceil_log2(depth)), w_data : In(width), w_en : In(width // granule)
        A write, per granule.
    landing : Out(width // granule)
        The write enables reaching the memories this cycle.
    """

    def __init__(
        self,
        *,
        width: int,
        depth: int,
        granule: int,
        per_slice: int | None,
        reg_writes: int = 0,
        name: str = "ram",
    ):
        check_int("granule", granule, 1, width)
        check_int("reg_writes", int(reg_writes), 0, 2)
        if width % granule:
            raise ValueError(f"SlicedRAM {name}: width {width} is not a multiple of {granule}")
        self.width, self.depth, self.granule = width, depth, granule
        self.reg_writes, self.name = int(reg_writes), name
        n = width // granule
        # a word narrower than a block RAM's granules is one slice
        per = n if per_slice is None else min(check_int("per_slice", per_slice, 1, 1 << 16), n)
        self.spans = [(lo, min(lo + per, n)) for lo in range(0, n, per)]
        self.abits = max(1, ceil_log2(depth))
        # the slices and their ports exist from here on, for the collision monitor
        self.mems, self.rports, self.wports = [], [], []
        for lo, hi in self.spans:
            mem = memory.Memory(shape=(hi - lo) * granule, depth=depth, init=[], attrs=NO_RW_CHECK)
            self.mems.append(mem)
            self.rports.append(mem.read_port())
            self.wports.append(mem.write_port(granularity=granule))
        super().__init__(
            {
                "r_addr": In(self.abits),
                "r_data": Out(width),
                "w_addr": In(self.abits),
                "w_data": In(width),
                "w_en": In(n),
                "landing": Out(n),
            }
        )

    @property
    def slices(self) -> int:
        return len(self.spans)

    @property
    def write_latency(self) -> int:
        """Cycles from a write on ``w_*`` to its ``landing``."""
        return self.reg_writes

    def watches(self, used) -> list[RWWatch]:
        """Each slice's read and write port; ``used``: the read of the cycle (at the
        registered address) is consumed."""
        return [
            RWWatch(f"{self.name}.{s}", rp, wp, used)
            for s, (rp, wp) in enumerate(zip(self.rports, self.wports, strict=True))
        ]

    def elaborate(self, platform):
        m = Module()
        g = self.granule
        copy = {REPLICA_ATTR: 1} if self.slices > 1 else {}
        datas = []
        for s, ((lo, hi), mem, rp, wp) in enumerate(
            zip(self.spans, self.mems, self.rports, self.wports, strict=True)
        ):
            m.submodules[f"slice{s}"] = mem
            ra = Signal(self.abits, name=f"{self.name}_ra{s}", reset_less=True, attrs=copy)
            m.d.sync += ra.eq(self.r_addr)
            m.d.comb += [rp.addr.eq(ra), rp.en.eq(1)]
            datas.append(rp.data)
            w = (self.w_addr, self.w_data[lo * g : hi * g], self.w_en[lo:hi])
            if self.reg_writes == 2:
                w = self._regs(m, w, f"{self.name}_v", s, copy)
            if self.reg_writes:
                # every register a copy of the slice's own: a word that repeats one
                # value (the noise fill's slot in every lane's field) would otherwise
                # have its data registers merged into one driving every slice (the
                # 128-lane ECP5 evaluator's critical path at 0a4b63e: a noise bank's
                # write data register into another slice's block RAM, 14.67 ns, all of
                # it routing but 0.74)
                w = self._regs(m, w, f"{self.name}_w", s, copy)
            m.d.comb += [wp.addr.eq(w[0]), wp.data.eq(w[1]), wp.en.eq(w[2])]
            m.d.comb += self.landing[lo:hi].eq(wp.en)
        m.d.comb += self.r_data.eq(Cat(*datas))
        return m

    def _regs(self, m, w, prefix, s, copy):
        """The write ``w`` (address, data, enables) through registers named
        ``{prefix}a{s}``, ``d``, ``e``."""
        addr, data, en = w
        regs = (
            Signal(self.abits, name=f"{prefix}a{s}", reset_less=True, attrs=copy),
            Signal(len(data), name=f"{prefix}d{s}", reset_less=True, attrs=copy),
            Signal(len(en), name=f"{prefix}e{s}", attrs=copy),
        )
        m.d.sync += [r.eq(v) for r, v in zip(regs, (addr, data, en), strict=True)]
        return regs
