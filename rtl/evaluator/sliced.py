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
(the address register, then the block RAM's read register). Writes (``writes``):

* ``"direct"``: the block RAMs' own (``w_*`` written at the end of their cycle);
* ``"registered"``: from a copy per slice of registers loaded with ``w_*`` (written a
  cycle later; ``landing``: the slices' write enables of the cycle);
* ``"broadcast"``: one granule's value (``w_unit``) into the granule ``w_index`` of the
  word (the noise fill's writes: one lane's slot, or one group's), through a tree of
  registers: one register of the write where it is made, a copy of it per
  :data:`WRITE_FANOUT` slices, then each slice's own registers, whose enables it decodes
  from its copy's index (written three cycles later). The head register takes the
  write's source logic (the noise fill's staging memory, read asynchronously) off the
  routes to the copies: the copies of the unit had 48 of the
  128-lane ULX3S build's 413 endpoints past 10 ns (``cd6a36f``, seed 1).
  A source reaches a few copies, not every slice: a register net of hundreds of loads
  over the chip gives the placer no reason to put any of them near the source, so
  "registered" cuts such a route once at best (the 128-lane evaluator at ``41cf5da``:
  the fill into the first of two per-slice registers, 13.84 ns).

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

__all__ = ["WRITES", "WRITE_FANOUT", "SlicedRAM", "slice_granules_for"]

#: slices one first-level copy of a broadcast write feeds
WRITE_FANOUT = 4

#: the write structures and their latency, ``w_*`` to ``landing``
WRITES = {"direct": 0, "registered": 1, "broadcast": 3}


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
    writes : str
        One of :data:`WRITES` (above).
    name : str
        Prefix of the slices' names.

    Interface attributes
    --------------------
    r_addr : In(ceil_log2(depth))
    r_data : Out(width)
        The word at ``r_addr`` two cycles earlier.
    w_addr : In(ceil_log2(depth)), w_data : In(width), w_en : In(width // granule)
        A write, per granule ("direct", "registered").
    w_addr, w_unit : In(granule), w_index : In(range(width // granule)), w_valid : In(1)
        A write of one granule ("broadcast").
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
        writes: str = "direct",
        name: str = "ram",
    ):
        check_int("granule", granule, 1, width)
        if writes not in WRITES:
            raise ValueError(f"SlicedRAM {name}: writes {writes!r} is not one of {list(WRITES)}")
        if width % granule:
            raise ValueError(f"SlicedRAM {name}: width {width} is not a multiple of {granule}")
        self.width, self.depth, self.granule = width, depth, granule
        self.writes, self.name = writes, name
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
                **(
                    {"w_unit": In(granule), "w_index": In(range(n)), "w_valid": In(1)}
                    if writes == "broadcast"
                    else {"w_data": In(width), "w_en": In(n)}
                ),
                "landing": Out(n),
            }
        )

    @property
    def slices(self) -> int:
        return len(self.spans)

    @property
    def write_latency(self) -> int:
        """Cycles from a write on ``w_*`` to its ``landing``."""
        return WRITES[self.writes]

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
        if self.writes == "broadcast":
            # the head: one register of the write, beside its source
            head = (
                Signal(self.abits, name=f"{self.name}_ha", reset_less=True),
                Signal(g, name=f"{self.name}_hu", reset_less=True),
                Signal.like(self.w_index, name=f"{self.name}_hi", reset_less=True),
                Signal(name=f"{self.name}_hv"),
            )
            src = (self.w_addr, self.w_unit, self.w_index, self.w_valid)
            m.d.sync += [r.eq(v) for r, v in zip(head, src, strict=True)]
            # the first level: a copy of the head per WRITE_FANOUT slices
            k_copies = -(-self.slices // WRITE_FANOUT)
            kc = {REPLICA_ATTR: 1} if k_copies > 1 else {}
            first = []
            for k in range(k_copies):
                regs = (
                    Signal(self.abits, name=f"{self.name}_va{k}", reset_less=True, attrs=kc),
                    Signal(g, name=f"{self.name}_vu{k}", reset_less=True, attrs=kc),
                    Signal.like(self.w_index, name=f"{self.name}_vi{k}", reset_less=True, attrs=kc),
                    Signal(name=f"{self.name}_vv{k}", attrs=kc),
                )
                m.d.sync += [r.eq(v) for r, v in zip(regs, head, strict=True)]
                first.append(regs)
        for s, ((lo, hi), mem, rp, wp) in enumerate(
            zip(self.spans, self.mems, self.rports, self.wports, strict=True)
        ):
            m.submodules[f"slice{s}"] = mem
            ra = Signal(self.abits, name=f"{self.name}_ra{s}", reset_less=True, attrs=copy)
            m.d.sync += ra.eq(self.r_addr)
            m.d.comb += [rp.addr.eq(ra), rp.en.eq(1)]
            datas.append(rp.data)
            if self.writes == "broadcast":
                a1, u1, i1, v1 = first[s // WRITE_FANOUT]
                w = (a1, u1.replicate(hi - lo), Cat(v1 & (i1 == j) for j in range(lo, hi)))
            else:
                w = (self.w_addr, self.w_data[lo * g : hi * g], self.w_en[lo:hi])
            if self.writes != "direct":
                # every register a copy of the slice's own: a word that repeats one
                # value (the noise fill's slot in every lane's field) would otherwise
                # have its data registers merged into one driving every slice (the
                # 128-lane ECP5 evaluator's critical path at 0a4b63e: a noise bank's
                # write data register into another slice's block RAM, 14.67 ns, all of
                # it routing but 0.74)
                regs = (
                    Signal(self.abits, name=f"{self.name}_wa{s}", reset_less=True, attrs=copy),
                    Signal((hi - lo) * g, name=f"{self.name}_wd{s}", reset_less=True, attrs=copy),
                    Signal(hi - lo, name=f"{self.name}_we{s}", attrs=copy),
                )
                m.d.sync += [r.eq(v) for r, v in zip(regs, w, strict=True)]
                w = regs
            m.d.comb += [wp.addr.eq(w[0]), wp.data.eq(w[1]), wp.en.eq(w[2])]
            m.d.comb += self.landing[lo:hi].eq(wp.en)
        m.d.comb += self.r_data.eq(Cat(*datas))
        return m
