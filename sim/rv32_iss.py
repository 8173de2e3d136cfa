"""RV32I instruction-set simulator and a tiny assembler, the reference for RV32Core.

:class:`RV32ISS` executes the instructions of ``rtl/cpu/rv32.py`` with the same
behaviour outside the happy path (see the core's docstring): ``ecall``/``ebreak`` halt,
anything outside RV32I (and CSR accesses other than reads of ``cycle``/``cycleh``) halts
with ``fault``; unaligned accesses ignore the low address bits their width does not use
(``lw`` at ``addr & ~3``, ``lh``/``lhu``/``sh`` at ``addr & ~1``), and jump and branch
targets drop their two low bits. ``cycle`` reads the number of instructions retired so
far (the core counts clock cycles: differential tests leave it out).

Memory is a list of regions (:class:`Memory`): a ROM ignores stores, an access outside
every region raises :class:`BusError`. Decoded instructions are cached per address (a
store drops the entry of its word), so straight-line code runs at several hundred
thousand instructions per second.

:class:`Asm` assembles RV32I from method calls (``a.addi(1, 0, 5)``, labels as branch
and jump targets), for hand-written test programs; ``assemble_one`` encodes a single
instruction (random instruction streams).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["ABI", "RV32ISS", "Asm", "BusError", "Memory", "encode"]

MASK = 0xFFFF_FFFF

#: ABI register names -> numbers
ABI = {
    name: i
    for i, name in enumerate(
        "zero ra sp gp tp t0 t1 t2 s0 s1 a0 a1 a2 a3 a4 a5 a6 a7 "
        "s2 s3 s4 s5 s6 s7 s8 s9 s10 s11 t3 t4 t5 t6".split()
    )
}
ABI["fp"] = 8


def _sext(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


class BusError(RuntimeError):
    """An access outside every memory region."""


class Memory:
    """Byte-addressed regions: ``add(base, size_or_bytes, writable=True)``."""

    def __init__(self):
        self.regions: list[tuple[int, int, bytearray, bool]] = []

    def add(self, base: int, content: int | bytes | Iterable[int], writable: bool = True):
        """Add a region at ``base``: ``content`` is its size in bytes (zeros), its bytes,
        or (a list of ints) its 32-bit little-endian words."""
        if isinstance(content, int):
            buf = bytearray(content)
        elif isinstance(content, bytes | bytearray):
            buf = bytearray(content)
        else:
            buf = bytearray(b"".join((w & MASK).to_bytes(4, "little") for w in content))
        if base % 4 or len(buf) % 4:
            raise ValueError("regions are word aligned and a whole number of words")
        self.regions.append((base, base + len(buf), buf, writable))
        return buf

    def _find(self, addr: int):
        for base, end, buf, writable in self.regions:
            if base <= addr < end:
                return base, buf, writable
        raise BusError(f"no memory at {addr:#010x}")

    def read_word(self, addr: int) -> int:
        addr &= MASK & ~3
        base, buf, _ = self._find(addr)
        o = addr - base
        return int.from_bytes(buf[o : o + 4], "little")

    def write(self, addr: int, value: int, mask: int) -> None:
        """Store the bytes of ``value`` whose bits are set in ``mask`` (bit i: byte i)
        into the word at ``addr & ~3``; a ROM ignores it."""
        addr &= MASK & ~3
        base, buf, writable = self._find(addr)
        if not writable:
            return
        o = addr - base
        for i in range(4):
            if mask >> i & 1:
                buf[o + i] = value >> (8 * i) & 0xFF

    def words(self, base: int, count: int) -> list[int]:
        return [self.read_word(base + 4 * i) for i in range(count)]


# ------------------------------------------------------------------ encoding

_OPC = {
    "lui": 0x37,
    "auipc": 0x17,
    "jal": 0x6F,
    "jalr": 0x67,
    "branch": 0x63,
    "load": 0x03,
    "store": 0x23,
    "opimm": 0x13,
    "op": 0x33,
    "fence": 0x0F,
    "system": 0x73,
}
_BRANCH = {"beq": 0, "bne": 1, "blt": 4, "bge": 5, "bltu": 6, "bgeu": 7}
_LOAD = {"lb": 0, "lh": 1, "lw": 2, "lbu": 4, "lhu": 5}
_STORE = {"sb": 0, "sh": 1, "sw": 2}
_OPIMM = {"addi": 0, "slti": 2, "sltiu": 3, "xori": 4, "ori": 6, "andi": 7}
_SHIFTI = {"slli": (1, 0), "srli": (5, 0), "srai": (5, 0x20)}
_OP = {
    "add": (0, 0),
    "sub": (0, 0x20),
    "sll": (1, 0),
    "slt": (2, 0),
    "sltu": (3, 0),
    "xor": (4, 0),
    "srl": (5, 0),
    "sra": (5, 0x20),
    "or": (6, 0),
    "and": (7, 0),
}


def _reg(r) -> int:
    if isinstance(r, str):
        r = ABI[r] if r in ABI else int(r.lstrip("x"))
    if not 0 <= r < 32:
        raise ValueError(f"register {r} out of range")
    return r


def _i(opc, rd, f3, rs1, imm):
    if not -2048 <= imm < 2048:
        raise ValueError(f"I-immediate {imm} out of range")
    return (imm & 0xFFF) << 20 | _reg(rs1) << 15 | f3 << 12 | _reg(rd) << 7 | opc


def _s(opc, f3, rs1, rs2, imm):
    if not -2048 <= imm < 2048:
        raise ValueError(f"S-immediate {imm} out of range")
    imm &= 0xFFF
    return (imm >> 5) << 25 | _reg(rs2) << 20 | _reg(rs1) << 15 | f3 << 12 | (imm & 31) << 7 | opc


def _b(f3, rs1, rs2, off):
    if off % 2 or not -4096 <= off < 4096:
        raise ValueError(f"branch offset {off} out of range")
    o = off & 0x1FFF
    return (
        (o >> 12) << 31
        | ((o >> 5) & 0x3F) << 25
        | _reg(rs2) << 20
        | _reg(rs1) << 15
        | f3 << 12
        | ((o >> 1) & 0xF) << 8
        | ((o >> 11) & 1) << 7
        | _OPC["branch"]
    )


def _j(rd, off):
    if off % 2 or not -(1 << 20) <= off < 1 << 20:
        raise ValueError(f"jump offset {off} out of range")
    o = off & 0x1FFFFF
    return (
        (o >> 20) << 31
        | ((o >> 1) & 0x3FF) << 21
        | ((o >> 11) & 1) << 20
        | ((o >> 12) & 0xFF) << 12
        | _reg(rd) << 7
        | _OPC["jal"]
    )


def encode(name: str, *args) -> int:
    """One instruction word. Operands as in assembly, offsets of branches and ``jal``
    relative to the instruction: ``encode("addi", 1, 0, 5)``, ``encode("lw", 5, 8, 2)``
    (``lw x5, 8(x2)``), ``encode("sw", 5, 8, 2)`` (``sw x5, 8(x2)``),
    ``encode("beq", 1, 2, -8)``, ``encode("jal", 1, 2048)``, ``encode("lui", 3, 0x12345)``
    (upper 20 bits), ``encode("csrrs", 5, 0xC00, 0)``."""
    name = name.rstrip("_")
    if name in ("lui", "auipc"):
        rd, imm20 = args
        return (imm20 & 0xFFFFF) << 12 | _reg(rd) << 7 | _OPC[name]
    if name == "jal":
        return _j(*args)
    if name == "jalr":
        rd, rs1, imm = args
        return _i(_OPC["jalr"], rd, 0, rs1, imm)
    if name in _BRANCH:
        return _b(_BRANCH[name], *args)
    if name in _LOAD:
        rd, off, rs1 = args
        return _i(_OPC["load"], rd, _LOAD[name], rs1, off)
    if name in _STORE:
        rs2, off, rs1 = args
        return _s(_OPC["store"], _STORE[name], rs1, rs2, off)
    if name in _OPIMM:
        rd, rs1, imm = args
        return _i(_OPC["opimm"], rd, _OPIMM[name], rs1, imm)
    if name in _SHIFTI:
        rd, rs1, sh = args
        f3, f7 = _SHIFTI[name]
        if not 0 <= sh < 32:
            raise ValueError(f"shift amount {sh} out of range")
        return f7 << 25 | sh << 20 | _reg(rs1) << 15 | f3 << 12 | _reg(rd) << 7 | _OPC["opimm"]
    if name in _OP:
        rd, rs1, rs2 = args
        f3, f7 = _OP[name]
        return f7 << 25 | _reg(rs2) << 20 | _reg(rs1) << 15 | f3 << 12 | _reg(rd) << 7 | _OPC["op"]
    if name == "fence":
        return 0x0FF0000F
    if name == "ecall":
        return 0x00000073
    if name == "ebreak":
        return 0x00100073
    if name in ("csrrs", "csrrsi"):
        rd, csr, src = args
        f3 = 2 if name == "csrrs" else 6
        return csr << 20 | (src & 31) << 15 | f3 << 12 | _reg(rd) << 7 | _OPC["system"]
    raise ValueError(f"unknown instruction {name!r}")


class Asm:
    """Collects instructions; branch and ``jal`` targets may be labels.

    >>> a = Asm(base=0)
    >>> a.addi(1, 0, 3); a.label("loop"); a.addi(1, 1, -1); a.bne(1, 0, "loop"); a.ebreak()
    >>> a.words()[:1]
    [3145875]
    """

    def __init__(self, base: int = 0):
        self.base = base
        self._items: list[tuple[str, tuple]] = []
        self._labels: dict[str, int] = {}

    @property
    def here(self) -> int:
        """Byte address of the next instruction."""
        return self.base + 4 * len(self._items)

    def label(self, name: str) -> None:
        self._labels[name] = self.here

    def word(self, value: int) -> None:
        """A raw word (data, or an illegal instruction)."""
        self._items.append((".word", (value & MASK,)))

    def li(self, rd, value: int) -> None:
        """``rd = value`` (lui + addi, or addi alone)."""
        value = _sext(value, 32)
        if -2048 <= value < 2048:
            self.addi(rd, 0, value)
            return
        lo = _sext(value, 12)
        hi = ((value - lo) >> 12) & 0xFFFFF
        self.lui(rd, hi)
        if lo:
            self.addi(rd, rd, lo)

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("_"):
            raise AttributeError(name)

        def emit(*args):
            self._items.append((name, args))

        return emit

    def words(self) -> list[int]:
        out = []
        for i, (name, args) in enumerate(self._items):
            pc = self.base + 4 * i
            if name == ".word":
                out.append(args[0])
                continue
            args = list(args)
            if name.rstrip("_") in _BRANCH or name == "jal":
                k = len(args) - 1
                if isinstance(args[k], str):
                    args[k] = self._labels[args[k]] - pc
            out.append(encode(name, *args))
        return out


# ------------------------------------------------------------------ simulator


class RV32ISS:
    """Executes RV32I from ``memory`` starting at ``reset_addr``.

    Attributes: ``x`` (32 registers, ``x[0]`` always 0), ``pc``, ``halted``, ``fault``,
    ``retired`` (instructions executed, the halting one not counted).
    """

    def __init__(self, memory: Memory, reset_addr: int = 0):
        self.mem = memory
        self.x = [0] * 32
        self.pc = reset_addr & ~3
        self.halted = False
        self.fault = False
        self.retired = 0
        self._cache: dict[int, Callable[[], None]] = {}

    # -- public
    def step(self) -> bool:
        """Execute one instruction; False once halted."""
        if self.halted:
            return False
        op = self._cache.get(self.pc)
        if op is None:
            op = self._fill(self.pc)
        op()
        return not self.halted

    def run(self, max_steps: int) -> int:
        """Execute until halted or ``max_steps`` instructions; returns the count."""
        cache = self._cache
        n = 0
        while n < max_steps and not self.halted:
            op = cache.get(self.pc)
            if op is None:
                op = self._fill(self.pc)
            op()
            n += 1
        return n

    # -- decoding
    def _fill(self, pc: int) -> Callable[[], None]:
        op = self._decode(self.mem.read_word(pc), pc)
        self._cache[pc] = op
        return op

    def _stop(self, fault: bool) -> Callable[[], None]:
        def f():
            self.halted = True
            self.fault = fault

        return f

    def _decode(self, w: int, pc: int) -> Callable[[], None]:
        s = self
        r = self.x
        mem = self.mem
        opc = w & 0x7F
        rd = (w >> 7) & 31
        f3 = (w >> 12) & 7
        rs1 = (w >> 15) & 31
        rs2 = (w >> 20) & 31
        f7 = w >> 25
        npc = (pc + 4) & MASK
        imm_i = _sext(w >> 20, 12)
        illegal = self._stop(True)

        def done():
            s.pc = npc
            s.retired += 1

        if opc & 3 != 3:
            return illegal
        if opc in (0x37, 0x17):  # lui, auipc
            v = (w & 0xFFFFF000) + (pc if opc == 0x17 else 0) & MASK

            def f():
                if rd:
                    r[rd] = v
                done()

            return f
        if opc == 0x6F:  # jal
            off = _sext(
                (w >> 31) << 20
                | ((w >> 12) & 0xFF) << 12
                | ((w >> 20) & 1) << 11
                | ((w >> 21) & 0x3FF) << 1,
                21,
            )
            target = (pc + off) & MASK & ~3

            def f():
                if rd:
                    r[rd] = npc
                s.pc = target
                s.retired += 1

            return f
        if opc == 0x67:  # jalr
            if f3:
                return illegal

            def f():
                t = (r[rs1] + imm_i) & MASK & ~3
                if rd:
                    r[rd] = npc
                s.pc = t
                s.retired += 1

            return f
        if opc == 0x63:  # branches
            if f3 in (2, 3):
                return illegal
            off = _sext(
                (w >> 31) << 12
                | ((w >> 7) & 1) << 11
                | ((w >> 25) & 0x3F) << 5
                | ((w >> 8) & 0xF) << 1,
                13,
            )
            target = (pc + off) & MASK & ~3
            cond = {
                0: lambda a, b: a == b,
                1: lambda a, b: a != b,
                4: lambda a, b: _sext(a, 32) < _sext(b, 32),
                5: lambda a, b: _sext(a, 32) >= _sext(b, 32),
                6: lambda a, b: a < b,
                7: lambda a, b: a >= b,
            }[f3]

            def f():
                s.pc = target if cond(r[rs1], r[rs2]) else npc
                s.retired += 1

            return f
        if opc == 0x03:  # loads
            if f3 in (3, 6, 7):
                return illegal

            def f():
                a = (r[rs1] + imm_i) & MASK
                word = mem.read_word(a)
                if f3 & 3 == 0:
                    v = word >> (8 * (a & 3)) & 0xFF
                    if f3 == 0 and v & 0x80:
                        v |= 0xFFFFFF00
                elif f3 & 3 == 1:
                    v = word >> (16 * (a >> 1 & 1)) & 0xFFFF
                    if f3 == 1 and v & 0x8000:
                        v |= 0xFFFF0000
                else:
                    v = word
                if rd:
                    r[rd] = v
                done()

            return f
        if opc == 0x23:  # stores
            if f3 > 2:
                return illegal
            imm_s = _sext((w >> 25) << 5 | rd, 12)
            cache = self._cache

            def f():
                a = (r[rs1] + imm_s) & MASK
                v = r[rs2]
                if f3 == 0:
                    mem.write(a, (v & 0xFF) * 0x01010101, 1 << (a & 3))
                elif f3 == 1:
                    mem.write(a, (v & 0xFFFF) * 0x00010001, 0b1100 if a & 2 else 0b0011)
                else:
                    mem.write(a, v, 0b1111)
                cache.pop(a & ~3, None)
                done()

            return f
        if opc in (0x13, 0x33):  # op-imm, op
            reg = opc == 0x33
            if reg:
                if not (f7 == 0 or (f7 == 0x20 and f3 in (0, 5))):
                    return illegal
            elif (f3 == 1 and f7 != 0) or (f3 == 5 and f7 not in (0, 0x20)):
                return illegal
            alu = _alu(f3, f7 == 0x20 and (reg or f3 == 5))
            if reg:

                def f():
                    if rd:
                        r[rd] = alu(r[rs1], r[rs2])
                    done()

            else:
                b = imm_i & MASK

                def f():
                    if rd:
                        r[rd] = alu(r[rs1], b)
                    done()

            return f
        if opc == 0x0F:  # fence
            if f3:
                return illegal
            return done
        if opc == 0x73:  # system
            if f3 == 0 and w >> 7 & 0x1FFF == 0 and w >> 21 == 0:
                return self._stop(False)  # ecall, ebreak
            csr = w >> 20
            if f3 in (2, 6) and rs1 == 0 and csr in (0xC00, 0xC80):
                hi = csr == 0xC80

                def f():
                    if rd:
                        r[rd] = (s.retired >> 32 if hi else s.retired) & MASK
                    done()

                return f
        return illegal


def _alu(f3: int, alt: bool) -> Callable[[int, int], int]:
    """The OP/OP-IMM operation of ``f3`` (``alt``: sub, sra) on 32-bit unsigned values."""
    if f3 == 0:
        return (lambda a, b: (a - b) & MASK) if alt else (lambda a, b: (a + b) & MASK)
    if f3 == 1:
        return lambda a, b: (a << (b & 31)) & MASK
    if f3 == 2:
        return lambda a, b: int(_sext(a, 32) < _sext(b, 32))
    if f3 == 3:
        return lambda a, b: int(a < b)
    if f3 == 4:
        return lambda a, b: a ^ b
    if f3 == 5:
        if alt:
            return lambda a, b: (_sext(a, 32) >> (b & 31)) & MASK
        return lambda a, b: a >> (b & 31)
    if f3 == 6:
        return lambda a, b: a | b
    return lambda a, b: a & b
