"""Block RAM with a registered read: two cycles from address to data.

:class:`RegisteredRAM` is a simple dual-port RAM (one write port, one read port, one clock
domain) or a ROM whose read data passes through one more register after the RAM's own
read register. Generic Amaranth memory plus a flip-flop stage everywhere, except when
elaborated for an ECP5 (``platform.family == "ecp5"``), where it instantiates ``DP16KD``
block RAMs with their output register (``REGMODE_B = "OUTREG"``): Yosys maps memories onto
``DP16KD`` without it, and the block RAM's clock-to-data time without the output register
(5.6 ns at speed grade 6) alone leaves less than a nanosecond of a 150 MHz cycle for the
route to the next flip-flop.

Both forms behave the same: ``r_data`` is the word at the ``r_addr`` presented two enabled
cycles earlier (each of the two registers advances when ``r_en`` is high). A read of an
address in the cycle it is written gives an unspecified word (``no_rw_check``).
``tests/test_rtl_bram.py`` checks the ``DP16KD`` form against the generic one in Icarus
(random writes, reads and enables; a RAM and a ROM), with a behavioural model of the
primitive (``sim/dp16kd.v``) for the configuration used here. The port conventions (18-bit
mode: word address on ``AD[13:4]``, byte enables on ``AD[1:0]``; 16 words of 18 bits per
``INITVAL`` row, each in a 20-bit slot) are those of Yosys's own ``DP16KD`` mapping
(``techlibs/lattice/brams_map_16kd.v``).

:class:`SinglePortRAM` is a RAM that is written and read at different times (the
accelerator's sample and label memories: the host writes them while the accelerator is
idle, the evaluator reads them while it runs), with a read latency of one or two cycles.
Elaborated for an iCE40 (``platform.family == "ice40"``) and larger than
:data:`SPRAM_MIN_BITS`, it is built of the iCE40UP5K's single-port RAMs
(``SB_SPRAM256KA``, 16 K words of 16 bits, four on the device), so the block RAMs stay
free for the memories that are read and written in the same cycle. Elaborated for an
ECP5 with a latency of two, it is built of ``DP16KD`` block RAMs with their output
register, the read multiplexer across the blocks after it: Yosys maps a deep memory onto
``DP16KD`` without the register (the 92,160-byte sample memory of the ULX3S build: 45
blocks), so the block RAM's 5.6 ns clock-to-data time and the multiplexer across the
die made one path (14.03 ns, the critical path of the 128-lane accelerator at 5d8c66b,
docs/resources.md). Otherwise it is a generic Amaranth memory.
``tests/test_rtl_bram.py`` checks the SPRAM form against the generic one in Icarus on
Yosys's simulation model of the primitive (``share/ice40/cells_sim.v`` of the YoWASP
Yosys package), and the ``DP16KD`` form on ``sim/dp16kd.v``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from amaranth import (
    Array,
    Cat,
    ClockSignal,
    Const,
    Elaboratable,
    Instance,
    Module,
    Mux,
    Signal,
    unsigned,
)
from amaranth.lib import memory
from amaranth.utils import ceil_log2

from .evaluator.pass_engine import REPLICA_ATTR

__all__ = [
    "ADDR_COPY_BLOCKS",
    "DP16KD_DEPTH",
    "DP16KD_WIDTH",
    "NO_RW_CHECK",
    "SPRAM_DEPTH",
    "SPRAM_MIN_BITS",
    "SPRAM_WIDTH",
    "UP5K_SPRAMS",
    "RWWatch",
    "RegisteredRAM",
    "SinglePortRAM",
    "dp16kd_blocks",
    "dp16kd_initvals",
    "dp16kd_instance",
]

#: ``attrs`` of an ``amaranth.lib.memory.Memory`` none of whose reads uses a word written
#: in the same cycle (the read data of such a cycle is never consumed): without it, Yosys
#: emulates read-first behaviour around the block RAM (an address comparator, a register
#: of the written word and a multiplexer on every read data bit; for the evaluator's
#: memories 10.5 LUT4 and 21 flip-flops per lane on the UP5K, docs/resources.md).
#: rtl/synth.py applies the attribute (:func:`pentegg.rtl.synth.honour_no_rw_check`). A
#: memory that carries it lists its ports and the condition under which a read is used
#: (:class:`RWWatch`), and the tests watch them (``pentegg.sim.collisions``).
NO_RW_CHECK = {"no_rw_check": 1}


class RWWatch(NamedTuple):
    """The ports of a :data:`NO_RW_CHECK` memory, for the tests' collision monitor: a read
    in a cycle where ``write`` writes its address must not have ``used`` high (a 1-bit
    value of that cycle: the read's word will be consumed)."""

    name: str
    read: Any
    write: Any
    used: Any


#: A DP16KD in 18-bit mode: 1024 words of 18 bits (9-bit mode: 2048 words of 9).
DP16KD_DEPTH, DP16KD_WIDTH = 1024, 18
#: An SB_SPRAM256KA: 16,384 words of 16 bits; the iCE40UP5K has four.
SPRAM_DEPTH, SPRAM_WIDTH, UP5K_SPRAMS = 16384, 16, 4
#: A :class:`SinglePortRAM` of more bits than this goes to SPRAM on the iCE40 (four
#: 4-Kbit block RAMs; a smaller memory would waste most of a 256-Kbit SPRAM).
SPRAM_MIN_BITS = 16384


def dp16kd_initvals(words: list[int]) -> dict[str, int]:
    """``INITVAL_00`` .. ``INITVAL_3F`` of a DP16KD in 18-bit mode holding ``words`` (at
    most 1024 of at most 18 bits): 16 words per 320-bit row, each in a 20-bit slot."""
    words = list(words) + [0] * (DP16KD_DEPTH - len(words))
    out = {}
    for row in range(DP16KD_DEPTH // 16):
        value = 0
        for i in range(16):
            value |= (words[row * 16 + i] & ((1 << DP16KD_WIDTH) - 1)) << (20 * i)
        out[f"INITVAL_{row:02X}"] = value
    return out


def dp16kd_instance(
    width: int, we, ada, dia, adb, dob, r_en, initvals: dict[str, int] | None = None
) -> Instance:
    """One ``DP16KD`` as the RAM classes use it: ``width`` (9, 18 or 36) bits on both
    ports, port A writes (write enable ``we``, the 14 address bits ``ada``, which hold the
    byte enables of the 18-bit (``ada[1:0]``) and 36-bit (``ada[3:0]``) modes, the data
    bits ``dia``: 18, or 36 in the 36-bit mode), port B reads (address bits ``adb``)
    through its output register into ``dob`` (18 bits, or 36: the 36-bit mode's read data
    leaves on both ports' outputs, so both ports' ``REGMODE`` are ``OUTREG``), the read and
    output registers enabled by ``r_en``; chip selects, resets and port B's write side tied
    off; ``initvals``: its ``INITVAL_*`` (:func:`dp16kd_initvals`)."""
    if width not in (9, DP16KD_WIDTH, 2 * DP16KD_WIDTH):
        raise ValueError(f"dp16kd_instance: width={width} is not 9, 18 or 36")
    wide = width == 2 * DP16KD_WIDTH
    params = {
        "p_DATA_WIDTH_A": width,
        "p_DATA_WIDTH_B": width,
        "p_REGMODE_A": "OUTREG" if wide else "NOREG",
        "p_REGMODE_B": "OUTREG",
        "p_RESETMODE": "SYNC",
        "p_ASYNC_RESET_RELEASE": "SYNC",
        "p_CSDECODE_A": "0b000",
        "p_CSDECODE_B": "0b000",
        "p_WRITEMODE_A": "NORMAL",
        "p_WRITEMODE_B": "NORMAL",
        "p_GSR": "DISABLED",
    }
    params.update({f"p_{k}": Const(v, 320) for k, v in (initvals or {}).items()})
    ports = {
        "i_CLKA": ClockSignal("sync"),
        "i_CEA": Const(1, 1),
        "i_OCEA": r_en if wide else Const(1, 1),
        "i_WEA": we,
        "i_RSTA": Const(0, 1),
        "i_CLKB": ClockSignal("sync"),
        "i_CEB": r_en,
        "i_OCEB": r_en,
        "i_WEB": Const(0, 1),
        "i_RSTB": Const(0, 1),
    }
    for k in range(3):
        ports[f"i_CSA{k}"] = Const(0, 1)
        ports[f"i_CSB{k}"] = Const(0, 1)
    for k in range(14):
        ports[f"i_ADA{k}"] = ada[k]
        ports[f"i_ADB{k}"] = adb[k]
    for k in range(DP16KD_WIDTH):
        ports[f"i_DIA{k}"] = dia[k]
        ports[f"i_DIB{k}"] = dia[DP16KD_WIDTH + k] if wide else Const(0, 1)
        if wide:
            ports[f"o_DOA{k}"] = dob[k]
            ports[f"o_DOB{k}"] = dob[DP16KD_WIDTH + k]
        else:
            ports[f"o_DOB{k}"] = dob[k]
    return Instance("DP16KD", **params, **ports)


def dp16kd_blocks(width: int, depth: int) -> tuple[int, int, int]:
    """``(data width, columns, rows)`` of ``depth`` words of ``width`` bits in ``DP16KD``
    blocks: 9-bit mode (2048 words) or 18-bit mode (1024 words), the one with fewer
    blocks, 9-bit when equal."""
    best = None
    for w, words in ((9, 2 * DP16KD_DEPTH), (DP16KD_WIDTH, DP16KD_DEPTH)):
        cols, rows = -(-width // w), -(-depth // words)
        if best is None or cols * rows < best[1] * best[2]:
            best = (w, cols, rows)
    return best


#: Blocks of a :class:`RegisteredRAM` with ``addr_reg`` served by one copy of its read
#: address register (``DP16KD`` form).
ADDR_COPY_BLOCKS = 8

MUX_GROUP = 8  # rows per first-stage multiplexer of a split read (dp16kd_rows)


def dp16kd_rows(
    m: Module, width: int, depth: int, w, r_addr, r_en, r_data, *, split: bool = False
) -> None:
    """``depth`` words of ``width`` bits in ``DP16KD`` blocks (:func:`dp16kd_blocks`),
    port A writing ``w = (addr, data, en)`` (the enable decoded from the address's upper
    bits), port B reading ``r_addr`` into its output register, both of its registers
    enabled by ``r_en``. ``r_data`` is the column outputs of the row the address chose:
    its number follows the read through two registers (enabled by ``r_en`` too), so the
    multiplexer (``rows`` to 1 per bit) starts from flip-flops, not from a read.

    ``split``: a third cycle of latency inside the multiplexer: groups of
    :data:`MUX_GROUP` rows each choose their row into a register, and ``r_data`` is the
    groups' multiplexer (``ceil(rows / 8)`` to 1) after those registers (``rows`` of 45,
    the ULX3S's sample memory: 8 to 1, then 6 to 1)."""
    w_addr, w_data, w_en = w
    bw, cols, rows = dp16kd_blocks(width, depth)
    wbits = 11 if bw == 9 else 10  # word address bits within a block
    lo = 3 if bw == 9 else 4  # the word address's lowest AD bit
    w_data = Cat(w_data, Const(0, cols * bw - width))
    w_word = Cat(w_addr, Const(0, wbits))[:wbits]
    r_word = Cat(r_addr, Const(0, wbits))[:wbits]
    w_row = w_addr[wbits:]
    r_row = r_addr[wbits:]
    sel = [Signal(max(len(r_row), 1), name=f"row_d{k}", reset_less=True) for k in range(2)]
    if rows > 1:
        with m.If(r_en):
            m.d.sync += [sel[0].eq(r_row), sel[1].eq(sel[0])]

    # the word address on AD[13:lo]; below it zeros, except in 18-bit mode the write
    # port's byte enables AD[1:0], set with the write enable
    def ada(we):
        low = [we if (bw == DP16KD_WIDTH and k < 2) else Const(0, 1) for k in range(lo)]
        return low + [w_word[k] for k in range(14 - lo)]

    adb = [Const(0, 1)] * lo + [r_word[k] for k in range(14 - lo)]
    outs = []
    for r in range(rows):
        we = w_en & (w_row == r) if rows > 1 else w_en
        row = []
        for c in range(cols):
            dout = Signal(DP16KD_WIDTH, name=f"dout{r}_{c}")
            row.append(dout[:bw])
            dia = Cat(w_data[c * bw : (c + 1) * bw], Const(0, DP16KD_WIDTH - bw))
            m.submodules[f"dp16kd{r}_{c}"] = dp16kd_instance(bw, we, ada(we), dia, adb, dout, r_en)
        outs.append(Cat(*row)[:width])
    if not split:
        m.d.comb += r_data.eq(Array(outs)[sel[1]] if rows > 1 else outs[0])
        return
    gb = ceil_log2(MUX_GROUP)
    groups = [outs[i : i + MUX_GROUP] for i in range(0, rows, MUX_GROUP)]
    g_out = [Signal(width, name=f"group{g}", reset_less=True) for g in range(len(groups))]
    g_sel = Signal(max(len(sel[1]) - gb, 1), name="group_d", reset_less=True)
    with m.If(r_en):
        for g, group in enumerate(groups):
            m.d.sync += g_out[g].eq(Array(group)[sel[1][:gb]] if len(group) > 1 else group[0])
        if len(groups) > 1:
            m.d.sync += g_sel.eq(sel[1][gb:])
    m.d.comb += r_data.eq(Array(g_out)[g_sel] if len(groups) > 1 else g_out[0])


class RegisteredRAM(Elaboratable):
    """``depth`` words of ``width`` bits; read latency two cycles.

    Parameters
    ----------
    width, depth : int
        Word width and number of words.
    init : list of int or None
        Contents of a ROM. With ``init``, there is no write port.
    dp16kd : bool or None
        ``True``: ``DP16KD`` instances (any ``width``; ``depth`` <= 1024 in one row of
        18-bit blocks, or a RAM of any depth in rows, :func:`dp16kd_rows`, its read data
        a multiplexer of the rows' output registers); ``False``: a generic Amaranth
        memory; ``None`` (default): ``DP16KD`` when elaborated for an ECP5
        (``platform.family == "ecp5"``), a ROM only of ``depth`` <= 1024.
    addr_reg : bool
        ``r_addr`` and ``r_en`` through a register before the blocks (read latency three):
        in the one-row ``DP16KD`` form a copy of the address register beside each
        :data:`ADDR_COPY_BLOCKS` blocks (marked ``REPLICA_ATTR``), so that no logic and
        no single register's route across the die comes before the blocks' address pins.

    Attributes
    ----------
    w_addr : Signal(range(depth)), w_data : Signal(width), w_en : Signal()
        Write port (RAM only): ``w_data`` is stored at ``w_addr`` at the end of a cycle
        with ``w_en`` high.
    r_addr : Signal(range(depth)), r_en : Signal()
        Read address, sampled at the end of a cycle with ``r_en`` high.
    r_data : Signal(width)
        The word read: it moves from the RAM's register to the output register at the end
        of a cycle with ``r_en`` high (with ``addr_reg``: the ``r_en`` of a cycle before).
    r_addr_q : Signal(range(depth))
        With ``addr_reg``: the address the blocks read in this cycle (``r_addr`` a cycle
        before), for the collision watch (:class:`RWWatch`).
    """

    def __init__(
        self,
        width: int,
        depth: int,
        *,
        init: list[int] | None = None,
        dp16kd: bool | None = None,
        addr_reg: bool = False,
    ):
        if not 1 <= width or not 1 <= depth:
            raise ValueError(f"RegisteredRAM: width={width} and depth={depth} must be >= 1")
        if addr_reg and init is not None:
            raise ValueError("RegisteredRAM: addr_reg is for a RAM (init=None)")
        if dp16kd and init is not None and depth > DP16KD_DEPTH:
            raise ValueError(f"RegisteredRAM: a ROM of depth={depth} > {DP16KD_DEPTH} with dp16kd")
        self.dp16kd = dp16kd
        self.width = width
        self.depth = depth
        self.init = None if init is None else list(init)
        self.abits = ceil_log2(depth)
        self.w_addr = Signal(self.abits)
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.r_addr = Signal(self.abits)
        self.r_en = Signal()
        self.r_data = Signal(width)
        self.addr_reg = addr_reg
        if addr_reg:
            self.r_addr_q = Signal(
                self.abits, name="r_addr_q", reset_less=True, attrs={REPLICA_ATTR: 1}
            )

    def _read_regs(self, m: Module, copies: int = 1) -> tuple[list, Any]:
        """The address the blocks read (``copies`` registers of it with ``addr_reg``)
        and their read enable."""
        if not self.addr_reg:
            return [self.r_addr] * copies, self.r_en
        # the enable's register: constant (folded away) when r_en is tied high
        en_q = Signal(name="r_en_q", init=1, reset_less=True)
        regs = [self.r_addr_q] + [
            Signal(self.abits, name=f"r_addr_q{k}", reset_less=True, attrs={REPLICA_ATTR: 1})
            for k in range(1, copies)
        ]
        m.d.sync += [en_q.eq(self.r_en)] + [r.eq(self.r_addr) for r in regs]
        return regs, en_q

    def uses_dp16kd(self, platform) -> bool:
        if self.dp16kd is not None:
            return self.dp16kd
        return getattr(platform, "family", None) == "ecp5" and (
            self.depth <= DP16KD_DEPTH or self.init is None
        )

    def elaborate(self, platform):
        m = Module()
        if self.uses_dp16kd(platform):
            self._dp16kd(m)
            return m
        m.submodules.mem = mem = memory.Memory(
            shape=unsigned(self.width),
            depth=self.depth,
            init=self.init or [],
            attrs=None if self.init is not None else NO_RW_CHECK,
        )
        if self.init is None:
            wr = mem.write_port()
            m.d.comb += [wr.addr.eq(self.w_addr), wr.data.eq(self.w_data), wr.en.eq(self.w_en)]
        rd = mem.read_port(domain="sync")
        (r_addr,), r_en = self._read_regs(m)
        m.d.comb += [rd.addr.eq(r_addr), rd.en.eq(r_en)]
        out = Signal(self.width, reset_less=True)
        with m.If(r_en):
            m.d.sync += out.eq(rd.data)
        m.d.comb += self.r_data.eq(out)
        return m

    def _dp16kd(self, m: Module) -> None:
        rom = self.init is not None
        if not rom and self.depth > DP16KD_DEPTH:
            w = (self.w_addr, self.w_data, self.w_en)
            (r_addr,), r_en = self._read_regs(m)
            dp16kd_rows(m, self.width, self.depth, w, r_addr, r_en, self.r_data)
            return
        n = -(-self.width // DP16KD_WIDTH)
        pad = n * DP16KD_WIDTH - self.width
        w_data = Cat(self.w_data, Const(0, pad))
        w_addr = Cat(Const(0, 4), self.w_addr, Const(0, 10 - self.abits))
        r_regs, r_en = self._read_regs(m, -(-n // ADDR_COPY_BLOCKS))
        w_en = Const(0, 1) if rom else self.w_en
        # 18-bit mode: address bits 13..4; on the write port bits 1..0 are the byte
        # enables, both set with the write enable
        ada = [w_en if k < 2 else w_addr[k] for k in range(14)]
        outs = []
        for j in range(n):
            initvals = None
            if rom:
                lo = j * DP16KD_WIDTH
                words = [(v >> lo) & ((1 << DP16KD_WIDTH) - 1) for v in self.init]
                initvals = dp16kd_initvals(words)
            dout = Signal(DP16KD_WIDTH, name=f"dout{j}")
            outs.append(dout)
            dia = w_data[j * DP16KD_WIDTH : (j + 1) * DP16KD_WIDTH]
            r_addr = Cat(Const(0, 4), r_regs[j // ADDR_COPY_BLOCKS], Const(0, 10 - self.abits))
            m.submodules[f"dp16kd{j}"] = dp16kd_instance(
                DP16KD_WIDTH, w_en, ada, dia, r_addr, dout, r_en, initvals
            )
        m.d.comb += self.r_data.eq(Cat(*outs)[: self.width])


class SinglePortRAM(Elaboratable):
    """``depth`` words of ``width`` bits, written and read in different cycles; read
    latency ``latency`` cycles.

    Parameters
    ----------
    width, depth : int
        Word width (1..16 for the SPRAM form) and number of words.
    latency : int
        1, 2 or 3 (default 1): cycles from ``r_addr`` to ``r_data``.
    spram : bool or None
        ``True``: ``SB_SPRAM256KA`` instances; ``False``: not; ``None`` (default): SPRAM
        when elaborated for an iCE40 and ``width * depth`` > :data:`SPRAM_MIN_BITS`.
    dp16kd : bool or None
        ``True``: ``DP16KD`` instances with their output register (``latency`` 2 or 3);
        ``False``: not; ``None`` (default): ``DP16KD`` when elaborated for an ECP5
        (``platform.family == "ecp5"``) with ``latency`` 2 or 3.

    Attributes
    ----------
    w_addr : Signal(range(depth)), w_data : Signal(width), w_en : Signal()
        Write port: ``w_data`` is stored at ``w_addr`` at the end of a cycle with ``w_en``.
    r_addr : Signal(range(depth))
        Read address, sampled at the end of every cycle without ``w_en``.
    r_data : Signal(width)
        The word at the ``r_addr`` of ``latency`` cycles before; unspecified when that
        cycle had ``w_en`` (the SPRAM form shares one address between reading and
        writing).

    The SPRAM form packs two words of up to 8 bits into each 16-bit SPRAM word (its
    nibble write mask selects the half), so it takes :meth:`sprams` =
    ``ceil(depth / (16384 * per_word))`` primitives (``per_word`` 2 or 1); the address's
    upper bits choose the primitive, a registered copy of them the read data. No logic
    but the address multiplexer, the write masks and the read multiplexer. With
    ``latency`` 2 or 3, one or two registers after it (the generic form likewise).

    The ``DP16KD`` form (:meth:`dp16kd_blocks`) uses the block RAMs in 9-bit mode (2048
    words) or 18-bit mode (1024 words), whichever takes fewer (9-bit mode when equal):
    ``ceil(width / w)`` columns of ``ceil(depth / words)`` rows. The host writes port A
    (the write enable decoded from the address's upper bits), port B reads every cycle
    into the block's output register, and the read data is the column outputs of the row
    the address chose two cycles before (a register of the row number, then a second):
    the multiplexer (``rows`` to 1 per bit) starts from flip-flops, not from the block
    RAM's read. With ``latency`` 3 the multiplexer is split by a register
    (:func:`dp16kd_rows`: groups of eight rows, then the groups).
    """

    def __init__(
        self,
        width: int,
        depth: int,
        *,
        latency: int = 1,
        spram: bool | None = None,
        dp16kd: bool | None = None,
    ):
        if not 1 <= width or not 1 <= depth:
            raise ValueError(f"SinglePortRAM: width={width} and depth={depth} must be >= 1")
        if latency not in (1, 2, 3):
            raise ValueError(f"SinglePortRAM: latency={latency!r} is not 1, 2 or 3")
        if spram and width > SPRAM_WIDTH:
            raise ValueError(f"SinglePortRAM: width={width} > {SPRAM_WIDTH} with spram")
        if dp16kd and latency == 1:
            raise ValueError(
                "SinglePortRAM: the DP16KD form has latency 2 or 3 (its output register)"
            )
        if spram and dp16kd:
            raise ValueError("SinglePortRAM: spram and dp16kd exclude each other")
        self.width, self.depth, self.latency = width, depth, latency
        self.spram, self.dp16kd = spram, dp16kd
        self.abits = ceil_log2(depth)
        self.w_addr = Signal(self.abits)
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.r_addr = Signal(self.abits)
        self.r_data = Signal(width)

    @property
    def per_word(self) -> int:
        """Words held in one 16-bit SPRAM word."""
        return 2 if self.width <= 8 else 1

    def sprams(self, platform=None) -> int:
        """SB_SPRAM256KA primitives this memory takes when elaborated for ``platform``."""
        if not self.uses_spram(platform):
            return 0
        return -(-self.depth // (SPRAM_DEPTH * self.per_word))

    def uses_spram(self, platform) -> bool:
        if self.spram is not None:
            return self.spram
        return (
            # SynthPlatform says "ice40", Amaranth's SiliconBluePlatform "iCE40"
            str(getattr(platform, "family", "")).lower() == "ice40"
            and self.width <= SPRAM_WIDTH
            and self.width * self.depth > SPRAM_MIN_BITS
        )

    def uses_dp16kd(self, platform) -> bool:
        if self.dp16kd is not None:
            return self.dp16kd
        return (
            str(getattr(platform, "family", "")).lower() == "ecp5"
            and self.latency >= 2
            and not self.uses_spram(platform)
        )

    def dp16kd_blocks(self) -> tuple[int, int, int]:
        """``(data width, columns, rows)`` of the ``DP16KD`` form (:func:`dp16kd_blocks`)."""
        return dp16kd_blocks(self.width, self.depth)

    def elaborate(self, platform):
        m = Module()
        if self.uses_dp16kd(platform):
            self._dp16kd(m)
            return m
        data = Signal(self.width)
        if self.uses_spram(platform):
            self._spram(m, platform, data)
        else:
            m.submodules.mem = mem = memory.Memory(
                shape=unsigned(self.width), depth=self.depth, init=[], attrs=NO_RW_CHECK
            )
            wr = mem.write_port()
            rd = mem.read_port(domain="sync")
            m.d.comb += [
                wr.addr.eq(self.w_addr),
                wr.data.eq(self.w_data),
                wr.en.eq(self.w_en),
                rd.addr.eq(self.r_addr),
                rd.en.eq(~self.w_en),
                data.eq(rd.data),
            ]
        for k in range(self.latency - 1):  # the registers after the read
            out = Signal(self.width, name=f"out{k}", reset_less=True)
            m.d.sync += out.eq(data)
            data = out
        m.d.comb += self.r_data.eq(data)
        return m

    def _dp16kd(self, m: Module) -> None:
        w = (self.w_addr, self.w_data, self.w_en)
        dp16kd_rows(
            m,
            self.width,
            self.depth,
            w,
            self.r_addr,
            Const(1, 1),
            self.r_data,
            split=self.latency == 3,
        )

    def _spram(self, m: Module, platform, data: Signal) -> None:
        half = self.per_word == 2
        addr = Signal(max(self.abits, 1))
        m.d.comb += addr.eq(Mux(self.w_en, self.w_addr, self.r_addr))
        lo = 1 if half else 0  # the half-word bit
        word = addr[lo:]
        n = self.sprams(platform)
        sel = word[14:] if n > 1 else Const(0, 1)
        # which primitive and which half the read data comes from, one cycle later
        r_sel = Signal(len(sel), reset_less=True)
        r_half = Signal(reset_less=True)
        with m.If(~self.w_en):
            m.d.sync += r_sel.eq(sel)
            if half:
                m.d.sync += r_half.eq(addr[0])
        if half:  # the word in both halves; the mask picks the one written
            pad = Const(0, 8 - self.width)
            data_in = Cat(self.w_data, pad, self.w_data, pad)
        else:
            data_in = Cat(self.w_data, Const(0, SPRAM_WIDTH - self.width))
        mask = Mux(addr[0], Const(0b1100, 4), Const(0b0011, 4)) if half else Const(0b1111, 4)
        outs = []
        for j in range(n):
            dout = Signal(SPRAM_WIDTH, name=f"spram{j}_dout")
            outs.append(dout)
            m.submodules[f"spram{j}"] = Instance(
                "SB_SPRAM256KA",
                i_ADDRESS=Cat(word[:14], Const(0, max(0, 14 - len(word)))),
                i_DATAIN=data_in,
                i_MASKWREN=mask,
                i_WREN=self.w_en & (sel == j),
                i_CHIPSELECT=Const(1, 1),
                i_CLOCK=ClockSignal("sync"),
                i_STANDBY=Const(0, 1),
                i_SLEEP=Const(0, 1),
                i_POWEROFF=Const(1, 1),
                o_DATAOUT=dout,
            )
        chosen = Signal(SPRAM_WIDTH)
        m.d.comb += chosen.eq(Array(outs)[r_sel] if n > 1 else outs[0])
        if half:
            m.d.comb += data.eq(Mux(r_half, chosen[8:], chosen[:8]))
        else:
            m.d.comb += data.eq(chosen)
