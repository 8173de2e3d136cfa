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

Read latency: three cycles. ``r_data`` is the word at the ``r_addr`` of three cycles
earlier: the address register, the block RAM's read register, then its output register.
Elaborated for an ECP5, each slice is a ``DP16KD`` instance (:func:`dp16kd_mode`: 36, 18
or 9 bits by depth, a write granule in whole 9-bit bytes) with its output register
(``REGMODE`` ``OUTREG``): the data leave the block RAM about 2 ns after the clock instead
of 5.6, and the finalizers' noise registers, which took the block RAMs' outputs across
the chip (a noise bank into a finalizer group's register had up to 10.3 ns, 287 of the
128-lane ULX3S build's 3,498 endpoints past 8 ns at ``b56882b``, seed 1), are those
output registers (the lanes take them into input registers of their own since
``f83f779``: :data:`~pentegg.rtl.evaluator.pass_engine.LATENCY`). Elsewhere (and in
simulation) a slice is an Amaranth memory and a register. Writes (``writes``):

* ``"direct"``: the block RAMs' own (``w_*`` written at the end of their cycle);
* ``"registered"``: from a copy per slice of registers loaded with ``w_*`` (written a
  cycle later; ``landing``: the slices' write enables of the cycle);
* ``"broadcast"``: one unit's value (``w_unit``, ``unit`` granules) into the unit
  ``w_index`` of the word (the noise fill's writes: one lane's slot, one group's, or the
  slots of its generators' lanes), through a tree of
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

With ``w_copies`` > 1 (not "broadcast") the write address comes in that many copies
(``w_addr`` an array), each from sources of its own: the slice of granules ``lo ..
hi - 1`` takes copy ``lo * w_copies // granules``. The evaluator's activation memory
takes its address so from copies of the finalizer's and the loader's address registers:
one multiplexer of theirs into every slice's address copy was the 128-lane ULX3S
build's critical path at ``0fd11e5``, seed 2 (a 7.64 ns route, 11.01 ns).

A read of a word written in the same cycle gives an unspecified word
(:data:`~pentegg.rtl.bram.NO_RW_CHECK`): :meth:`watches` lists each slice's ports for the
tests' collision monitor.
"""

from __future__ import annotations

from amaranth import Cat, Const, Module, Signal
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..bram import DP16KD_WIDTH, NO_RW_CHECK, RWWatch, dp16kd_instance
from ..params import check_int
from .pass_engine import REPLICA_ATTR

__all__ = [
    "WRITES",
    "WRITE_FANOUT",
    "SlicedRAM",
    "dp16kd_mode",
    "slice_granules_for",
    "slice_spans",
]

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


def slice_spans(width: int, granule: int, per_slice: int | None) -> list[tuple[int, int]]:
    """The slices of a ``width``-bit word of ``granule``-bit write granules, ``per_slice``
    granules each (None: one slice), as ``(first, end)`` granule ranges."""
    n = width // granule
    # a word narrower than a block RAM's granules is one slice
    per = n if per_slice is None else min(check_int("per_slice", per_slice, 1, 1 << 16), n)
    return [(lo, min(lo + per, n)) for lo in range(0, n, per)]


def dp16kd_mode(depth: int, granule: int, granules: int) -> int | None:
    """The ``DP16KD`` data width (36 up to 512 words, 18 up to 1,024, 9 up to 2,048) that
    holds ``granules`` write granules of ``granule`` bits, each in whole 9-bit bytes (one
    write enable each), at ``depth`` words; None if one block RAM cannot."""
    width = 36 if depth <= 512 else 18 if depth <= 1024 else 9 if depth <= 2048 else None
    if width is None or granules * -(-granule // 9) > width // 9:
        return None
    return width


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
    dp16kd : bool or None
        ``True``: every slice a ``DP16KD`` (each must fit one, :func:`dp16kd_mode`);
        ``False``: Amaranth memories; None (default): ``DP16KD`` when elaborated for an
        ECP5 and every slice fits one.
    w_copies : int
        Copies of the write address (1 .. granules; "direct" and "registered").
    r_copies : int
        Copies of the read address (1 .. slices): slice ``s`` registers copy
        ``s * r_copies // slices``, so that each copy's source drives a few slices.
    unit : int
        Granules of a "broadcast" write (default 1; ``width // granule`` a multiple).

    Interface attributes
    --------------------
    r_addr : In(ceil_log2(depth))
    r_data : Out(width)
        The word at ``r_addr`` three cycles earlier. With ``r_copies`` > 1 ``r_addr`` is
        ``In(ArrayLayout(ceil_log2(depth), r_copies))``, the copies equal.
    w_addr : In(ceil_log2(depth)), w_data : In(width), w_en : In(width // granule)
        A write, per granule ("direct", "registered"); with ``w_copies`` > 1 ``w_addr``
        is ``In(ArrayLayout(ceil_log2(depth), w_copies))``, the copies equal.
    w_addr, w_unit : In(granule * unit), w_index : In(range(width // granule // unit)),
    w_valid : In(1)
        A write of one unit ("broadcast"): granule ``i`` of ``w_unit`` into granule
        ``w_index * unit + i`` of the word.
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
        dp16kd: bool | None = None,
        w_copies: int = 1,
        r_copies: int = 1,
        unit: int = 1,
    ):
        check_int("granule", granule, 1, width)
        if writes not in WRITES:
            raise ValueError(f"SlicedRAM {name}: writes {writes!r} is not one of {list(WRITES)}")
        if width % granule:
            raise ValueError(f"SlicedRAM {name}: width {width} is not a multiple of {granule}")
        self.width, self.depth, self.granule = width, depth, granule
        self.writes, self.name = writes, name
        n = width // granule
        self.unit = check_int("unit", unit, 1, n if writes == "broadcast" else 1)
        if n % unit:
            raise ValueError(f"SlicedRAM {name}: {n} granules are not whole units of {unit}")
        self.w_copies = check_int("w_copies", w_copies, 1, 1 if writes == "broadcast" else n)
        self.spans = slice_spans(width, granule, per_slice)
        self.r_copies = check_int("r_copies", r_copies, 1, len(self.spans))
        self.abits = max(1, ceil_log2(depth))
        self.modes = [dp16kd_mode(depth, granule, hi - lo) for lo, hi in self.spans]
        if dp16kd and None in self.modes:
            raise ValueError(
                f"SlicedRAM {name}: a slice of {max(h - lo for lo, h in self.spans)} "
                f"granules of {granule} bits at depth {depth} does not fit one DP16KD"
            )
        self.dp16kd = dp16kd
        self._memories = None  # the generic form's, made by watches() or elaborate()
        super().__init__(
            {
                "r_addr": In(
                    data.ArrayLayout(self.abits, r_copies) if r_copies > 1 else self.abits
                ),
                "r_data": Out(width),
                "w_addr": In(
                    data.ArrayLayout(self.abits, w_copies) if w_copies > 1 else self.abits
                ),
                **(
                    {
                        "w_unit": In(granule * unit),
                        "w_index": In(range(n // unit)),
                        "w_valid": In(1),
                    }
                    if writes == "broadcast"
                    else {"w_data": In(width), "w_en": In(n)}
                ),
                "landing": Out(n),
            }
        )

    @property
    def slices(self) -> int:
        return len(self.spans)

    def uses_dp16kd(self, platform) -> bool:
        if self.dp16kd is not None:
            return self.dp16kd
        return getattr(platform, "family", None) == "ecp5" and None not in self.modes

    @property
    def write_latency(self) -> int:
        """Cycles from a write on ``w_*`` to its ``landing``."""
        return WRITES[self.writes]

    def memories(self) -> list[tuple]:
        """The generic form's ``(memory, read port, write port)`` per slice, made at the
        first call (the collision monitor's watches take the ports before elaboration)."""
        if self._memories is None:
            self._memories = []
            for lo, hi in self.spans:
                mem = memory.Memory(
                    shape=(hi - lo) * self.granule, depth=self.depth, init=[], attrs=NO_RW_CHECK
                )
                self._memories.append(
                    (mem, mem.read_port(), mem.write_port(granularity=self.granule))
                )
        return self._memories

    def watches(self, used) -> list[RWWatch]:
        """Each slice's read and write port (the generic form's: a simulation's);
        ``used``: the read of the cycle (at the registered address) is consumed."""
        return [
            RWWatch(f"{self.name}.{s}", rp, wp, used)
            for s, (_, rp, wp) in enumerate(self.memories())
        ]

    def elaborate(self, platform):
        m = Module()
        g = self.granule
        gu = g * self.unit
        dp = self.uses_dp16kd(platform)
        copy = {REPLICA_ATTR: 1} if self.slices > 1 else {}
        datas = []
        if self.writes == "broadcast":
            # the head: one register of the write, beside its source
            head = (
                Signal(self.abits, name=f"{self.name}_ha", reset_less=True),
                Signal(gu, name=f"{self.name}_hu", reset_less=True),
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
                    Signal(gu, name=f"{self.name}_vu{k}", reset_less=True, attrs=kc),
                    Signal.like(self.w_index, name=f"{self.name}_vi{k}", reset_less=True, attrs=kc),
                    Signal(name=f"{self.name}_vv{k}", attrs=kc),
                )
                m.d.sync += [r.eq(v) for r, v in zip(regs, head, strict=True)]
                first.append(regs)
        for s, (lo, hi) in enumerate(self.spans):
            ra = Signal(self.abits, name=f"{self.name}_ra{s}", reset_less=True, attrs=copy)
            r_addr = self.r_addr
            if self.r_copies > 1:
                r_addr = self.r_addr[s * self.r_copies // self.slices]
            m.d.sync += ra.eq(r_addr)
            if self.writes == "broadcast":
                a1, u1, i1, v1 = first[s // WRITE_FANOUT]
                u = self.unit
                w = (
                    a1,
                    Cat(u1[(j % u) * g : (j % u + 1) * g] for j in range(lo, hi)),
                    Cat(v1 & (i1 == j // u) for j in range(lo, hi)),
                )
            else:
                w_addr = self.w_addr
                if self.w_copies > 1:
                    w_addr = self.w_addr[lo * self.w_copies // (self.width // g)]
                w = (w_addr, self.w_data[lo * g : hi * g], self.w_en[lo:hi])
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
            m.d.comb += self.landing[lo:hi].eq(w[2])
            if dp:
                datas.append(self._dp16kd(m, s, self.modes[s], hi - lo, ra, w))
                continue
            mem, rp, wp = self.memories()[s]
            m.submodules[f"slice{s}"] = mem
            q = Signal((hi - lo) * g, name=f"{self.name}_q{s}", reset_less=True)
            m.d.comb += [rp.addr.eq(ra), rp.en.eq(1)]
            m.d.comb += [wp.addr.eq(w[0]), wp.data.eq(w[1]), wp.en.eq(w[2])]
            m.d.sync += q.eq(rp.data)
            datas.append(q)
        m.d.comb += self.r_data.eq(Cat(*datas))
        return m

    def _dp16kd(self, m: Module, s: int, width: int, n: int, ra, w):
        """Slice ``s`` (``n`` granules) as one ``DP16KD`` of data width ``width``: granule
        ``j`` in bytes ``j k .. j k + k - 1`` (``k`` 9-bit bytes a granule), each byte's
        write enable its granule's; the word address above the mode's byte-enable bits
        (36-bit mode: ``AD[13:5]``, 18: ``AD[13:4]``, 9: ``AD[13:3]``). In the 36-bit
        mode port A only writes (``WEA`` high, as Yosys maps it), the byte enables decide.
        Returns the slice's read data (``n * granule`` bits, from the output register)."""
        g = self.granule
        k = -(-g // 9)
        nbytes = width // 9
        addr_lo = {36: 5, 18: 4, 9: 3}[width]
        w_addr, w_data, w_en = w
        dia = Cat(*(Cat(w_data[j * g : (j + 1) * g], Const(0, 9 * k - g)) for j in range(n)))
        be = Cat(*(w_en[j].replicate(k) for j in range(n)))
        be = Cat(be, Const(0, nbytes - len(be)))
        dia = Cat(dia, Const(0, max(width, DP16KD_WIDTH) - len(dia)))
        pad = Const(0, 14 - addr_lo - self.abits)
        if width == 9:
            ada = Cat(Const(0, 3), w_addr, pad)
            we = w_en[0]
        else:
            ada = Cat(be, Const(0, addr_lo - nbytes), w_addr, pad)
            we = Const(1, 1) if width == 36 else w_en.any()
        adb = Cat(Const(0, addr_lo), ra, pad)
        dout = Signal(max(width, DP16KD_WIDTH), name=f"{self.name}_q{s}")
        m.submodules[f"slice{s}"] = dp16kd_instance(width, we, ada, dia, adb, dout, Const(1, 1))
        return Cat(*(dout[9 * k * j : 9 * k * j + g] for j in range(n)))
