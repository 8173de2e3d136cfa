"""CompactDevice: the pentegg protocol device for small FPGAs, an RV32I core and its
firmware.

::

    rx --> RX FIFO --\\
                      MMIO <-- bus <-- RV32Core --> RAM: code, data and host memories
    tx <-- TX FIFO --/   busy, error                  (the UP5K's SPRAM)  <-- FlashBoot

The firmware (``firmware/*.c``, :mod:`.firmware`) implements the host protocol
(docs/protocol.md), the Accelerator's registers and memories and the ES step of
docs/spec.md; the host sees the same device as the :class:`~pentegg.rtl.link.device.Device`
(INFO, registers, memories, runs, errors), built into far less logic. It is the
iCEBreaker's core: the Device needs about three UP5Ks.

Memory map (byte addresses, the core's one bus; ``docs/rtl.md``, "The compact device"):

=============  =====================================================================
0x1000_0000    RAM, ``ram_bytes``: the firmware image (code, read-only data, data) at
               its start, then its zeroed data and the stack; reads answered two
               cycles after the request
0x2000_0000    ``RX``: read: bit 8 a byte was waiting, bits 7:0 the byte (the read takes it)
0x2000_0004    ``TX``: write: send bits 7:0 (the write waits while the FIFO is full);
               read: bit 0 the FIFO has room
0x2000_0008    ``CTRL``: bit 0 ``busy``, bit 1 ``error`` (the outputs), read/write
=============  =====================================================================

Boot: ``preload`` (default; simulation, and FPGAs whose block RAM the bitstream
initialises): the RAM holds the firmware image from configuration. ``flash`` (the
iCE40UP5K, whose SPRAM the bitstream cannot initialise): after every reset
:class:`~.boot.FlashBoot` copies the image from the SPI flash at ``flash_offset`` (a word
with the image's length in bytes, then the image) into the RAM while the core is held in
reset; a flash without an image sets ``error`` and the core stays in reset. Either way
the core starts at the RAM's first word.

Throughput: the core takes 3 cycles for most instructions and 5 for loads and stores
(rtl/cpu/rv32.py), 6 for an MMIO access (its answer comes two cycles after the request,
from registers); the FIFOs take a byte per cycle from ``rx`` and give one per cycle to
``tx``. ``rx_depth`` bytes of a request are held while the firmware computes (it reads
the link between pieces of a run).
"""

from __future__ import annotations

from amaranth import Array, Cat, ClockSignal, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..bram import NO_RW_CHECK, SPRAM_DEPTH, UP5K_SPRAMS
from ..cpu.rv32 import BUS_SIGNATURE, RV32Core
from ..params import check_choice, check_int
from .boot import SPI_SIGNATURE, FlashBoot
from .engine import CompactEngine
from .firmware import MAX_RAM_BYTES

__all__ = [
    "BOOTS",
    "MMIO_BASE",
    "RAM_BASE",
    "SIM_RAM_BYTES",
    "SPI_SIGNATURE",
    "BusRAM",
    "CompactSoC",
]

#: The RAM of a simulated compact device (``--device sim-compact``): room for any
#: firmware build the parameters allow (the boards' RAM is the FPGA's, smaller).
SIM_RAM_BYTES = 512 * 1024

RAM_BASE = 0x1000_0000
MMIO_BASE = 0x2000_0000
BOOTS = ("preload", "flash")


def _region(addr: Signal) -> Signal:
    """The region of a word address: its byte address's bits 29:28."""
    return addr[26:28]


class BusRAM(wiring.Component):
    """``depth`` words of 32 bits on the core's bus: byte writes, registered reads.

    Elaborated for an iCE40 with ``spram`` (default: at least 16 K words and no ``init``),
    it is built of ``SB_SPRAM256KA`` pairs (low and high half words; each primitive's
    nibble mask takes a byte's two nibbles), one pair per 16 K words; otherwise it is a
    generic memory with ``init``. ``ready`` and the read data (from a register) come two
    cycles after a request; a write lands the cycle after its request.

    Interface attributes
    --------------------
    bus : In(BUS_SIGNATURE)
        The word address's low ``ceil_log2(depth)`` bits select the word; ``valid`` is
        qualified by the SoC's region decode.
    boot_en : In(1), boot_addr : In(30), boot_data : In(32)
        ``boot_port`` only: a whole word written (the flash boot's, while the core is
        held in reset and makes no requests).
    """

    def __init__(self, depth: int, *, init=(), spram: bool | None = None, boot_port: bool = False):
        self.depth = check_int("depth", depth, 1, 1 << 20)
        self.init = list(init)
        if len(self.init) > depth:
            raise ValueError(f"BusRAM: {len(self.init)} words of init, depth {depth}")
        self.spram = spram
        sig = {"bus": In(BUS_SIGNATURE)}
        if boot_port:
            sig.update({"boot_en": In(1), "boot_addr": In(30), "boot_data": In(32)})
        super().__init__(sig)

    def uses_spram(self, platform) -> bool:
        if self.spram is not None:
            return self.spram
        family = str(getattr(platform, "family", "")).lower()
        return family == "ice40" and self.depth >= SPRAM_DEPTH and not self.init

    def elaborate(self, platform):
        m = Module()
        bus = self.bus
        # ``ready`` two cycles after a request, with the read data from a register: the
        # block RAM's output (the UP5K's SPRAM sits in a corner of the die) then has a
        # whole cycle to reach the core, whose instruction decode starts at ``rdata``
        # (in one cycle the pair measured 38.7 MHz on the iCEBreaker)
        a1 = Signal()
        ack = Signal()
        m.d.sync += [a1.eq(bus.valid & ~a1 & ~ack), ack.eq(a1)]
        m.d.comb += bus.ready.eq(ack)
        raw = Signal(32)  # the RAM's read data, the cycle after the address
        rdata = Signal(32, reset_less=True)
        m.d.sync += rdata.eq(raw)
        m.d.comb += bus.rdata.eq(rdata)
        abits = max(1, ceil_log2(self.depth))
        # A write lands a cycle after its request, from registers (address, data, byte
        # enables): the request's decode (the core's address adder, the SoC's region)
        # reaches only flip-flops, not the RAM's write enables (the iCEBreaker build's
        # critical path until then). The read address goes to the RAM directly; in the
        # cycle a registered write lands, the RAM takes its address instead (the core
        # makes no request then: its next one follows ``ready``).
        w_pend = Signal()
        w_addr = Signal(abits, reset_less=True)
        w_data = Signal(32, reset_less=True)
        w_mask = Signal(4, reset_less=True)
        # (the registers take the bus every cycle, without an enable: a request is held
        # until ``ready``, so the cycle after its first one they hold it)
        first = bus.valid & ~a1 & ~ack
        m.d.sync += [
            w_pend.eq(first & bus.write),
            w_addr.eq(bus.addr[:abits]),
            w_data.eq(bus.wdata),
            w_mask.eq(bus.wmask),
        ]
        if "boot_en" in self.signature.members:  # the flash boot's words (no bus then)
            with m.If(self.boot_en):
                m.d.sync += [
                    w_pend.eq(1),
                    w_addr.eq(self.boot_addr[:abits]),
                    w_data.eq(self.boot_data),
                    w_mask.eq(0b1111),
                ]
        addr = Signal(abits)
        m.d.comb += addr.eq(Mux(w_pend, w_addr, bus.addr[:abits]))
        if self.uses_spram(platform):
            if self.init:
                raise ValueError("BusRAM: an SPRAM cannot be initialised by the bitstream")
            n = -(-self.depth // SPRAM_DEPTH)
            if 2 * n > UP5K_SPRAMS:
                raise ValueError(
                    f"BusRAM: {self.depth} words need {2 * n} SPRAMs; the UP5K has {UP5K_SPRAMS}"
                )
            sel = addr[14:] if n > 1 else Const(0, 1)
            w_sel = w_addr[14:] if n > 1 else Const(0, 1)  # a write's: from registers
            r_sel = Signal(len(sel), reset_less=True)
            m.d.sync += r_sel.eq(sel)
            outs = []
            for j in range(n):
                dout = Signal(32, name=f"spram{j}_dout")
                outs.append(dout)
                for half in (0, 1):
                    mask = Cat(*(w_mask[2 * half + b // 2] for b in range(4)))
                    m.submodules[f"spram{j}_{half}"] = _spram(
                        Cat(addr[:14], Const(0, max(0, 14 - len(addr)))),
                        w_data[16 * half : 16 * half + 16],
                        mask,
                        w_pend & (w_sel == j),
                        dout[16 * half : 16 * half + 16],
                    )
            m.d.comb += raw.eq(Array(outs)[r_sel] if n > 1 else outs[0])
            return m
        m.submodules.mem = mem = memory.Memory(
            shape=32, depth=self.depth, init=self.init, attrs=NO_RW_CHECK
        )
        wp = mem.write_port(granularity=8)
        rp = mem.read_port()
        m.d.comb += [
            wp.addr.eq(w_addr),
            wp.data.eq(w_data),
            wp.en.eq(Mux(w_pend, w_mask, 0)),
            rp.addr.eq(bus.addr[:abits]),
            raw.eq(rp.data),
        ]
        return m


def _spram(addr, data, mask, we, dout):
    from amaranth import Instance

    return Instance(
        "SB_SPRAM256KA",
        i_ADDRESS=addr,
        i_DATAIN=data,
        i_MASKWREN=mask,
        i_WREN=we,
        i_CHIPSELECT=Const(1, 1),
        i_CLOCK=ClockSignal("sync"),
        i_STANDBY=Const(0, 1),
        i_SLEEP=Const(0, 1),
        i_POWEROFF=Const(1, 1),
        o_DATAOUT=dout,
    )


class CompactSoC(wiring.Component):
    """The core, its RAM and the link's byte FIFOs (module docstring).

    Parameters
    ----------
    image : list of int
        The firmware image: 32-bit words from the RAM's start (code, read-only data, data).
    ram_bytes : int
        The RAM (a multiple of 4, 4 KiB .. 512 KiB; on the UP5K at most 128 KiB, its four
        SPRAMs).
    boot : str
        ``"preload"`` or ``"flash"`` (module docstring).
    flash_offset : int
        ``flash`` boot: the image's byte address in the flash.
    rx_depth : int
        Bytes the receive FIFO holds (16..4096, a power of two; 512 is one iCE40 block RAM).
    engine : CompactEngine or None
        The datapath, at ``0x3000_0000`` (rtl/compact/engine.py); None: none (the
        firmware computes everything).

    Interface attributes
    --------------------
    rx : In(stream.Signature(8)), tx : Out(stream.Signature(8))
        The link's bytes (docs/protocol.md): received, sent.
    reset : In(1)
        Resets the core, the FIFOs, ``CTRL`` and the flash boot (the RAM keeps its
        contents, the ``flash`` boot loads it again): the firmware starts again (a
        board's power-on reset).
    busy : Out(1), error : Out(1)
        ``CTRL``'s bits, set by the firmware: a run is going on; the error flags of the
        last run are not all clear. ``error`` is also set by a flash without an image.
    flash : Out(SPI_SIGNATURE)
        ``flash`` boot only: the SPI flash's pins.
    halted : Out(1)
        The core stopped (a firmware fault; for the tests).
    """

    def __init__(
        self,
        *,
        image,
        ram_bytes: int = 128 * 1024,
        boot: str = "preload",
        flash_offset: int = 0x10_0000,
        rx_depth: int = 512,
        engine: CompactEngine | None = None,
    ):
        self.boot = check_choice("boot", boot, BOOTS)
        self.engine = engine
        check_int("ram_bytes", ram_bytes, 4096, MAX_RAM_BYTES)
        if ram_bytes % 4:
            raise ValueError(f"ram_bytes={ram_bytes} is not a multiple of 4")
        self.ram_words = ram_bytes // 4
        self.image = [int(w) & 0xFFFF_FFFF for w in image]
        if len(self.image) > self.ram_words:
            raise ValueError(
                f"the firmware image ({4 * len(self.image)} bytes) does not fit the RAM "
                f"({ram_bytes} bytes)"
            )
        self.flash_offset = check_int("flash_offset", flash_offset, 0, (1 << 24) - 4)
        check_int("rx_depth", rx_depth, 16, 4096)
        if rx_depth & (rx_depth - 1):
            raise ValueError(f"rx_depth={rx_depth} is not a power of two")
        self.rx_depth = rx_depth
        sig = {
            "rx": In(stream.Signature(8)),
            "tx": Out(stream.Signature(8)),
            "reset": In(1),
            "busy": Out(1),
            "error": Out(1),
            "halted": Out(1),
        }
        if boot == "flash":
            sig["flash"] = Out(SPI_SIGNATURE)
        super().__init__(sig)

    def elaborate(self, platform):
        m = Module()
        rst = self.reset
        cpu = RV32Core(reset_addr=RAM_BASE)
        bus = cpu.bus
        m.d.comb += self.halted.eq(cpu.halted)
        flash = self.boot == "flash"
        ram = BusRAM(self.ram_words, init=[] if flash else self.image, boot_port=flash)
        m.submodules.ram = ram
        boot_error = Const(0, 1)
        if flash:  # the core waits in reset until the image is in the RAM
            fb = FlashBoot(offset=self.flash_offset, max_bytes=4 * self.ram_words)
            m.submodules.boot = ResetInserter(rst)(fb)
            wiring.connect(m, fb.spi, wiring.flipped(self.flash))
            m.d.comb += [
                ram.boot_en.eq(fb.w_en),
                ram.boot_addr.eq(fb.w_addr),
                ram.boot_data.eq(fb.w_data),
            ]
            m.submodules.cpu = ResetInserter(rst | ~fb.done)(cpu)
            boot_error = fb.error
        else:
            m.submodules.cpu = ResetInserter(rst)(cpu)
        region = _region(bus.addr)
        m.d.comb += [
            ram.bus.addr.eq(bus.addr),
            ram.bus.wdata.eq(bus.wdata),
            ram.bus.wmask.eq(bus.wmask),
            ram.bus.write.eq(bus.write),
            ram.bus.valid.eq(bus.valid & (region == 1)),
        ]

        # ---- the link's FIFOs
        rxf = fifo.SyncFIFOBuffered(width=8, depth=self.rx_depth)
        # four bytes: the firmware sends faster than any UART takes them, so a deeper FIFO
        # only costs flip-flops (a memory this small is not a block RAM)
        txf = fifo.SyncFIFOBuffered(width=8, depth=4)
        m.submodules.rx_fifo = ResetInserter(rst)(rxf)
        m.submodules.tx_fifo = ResetInserter(rst)(txf)
        # ``rx.ready`` from a flip-flop (room for two more bytes: the one it admits in
        # the cycle it falls, and one to spare), not from the FIFO's level logic
        rx_room = Signal()
        m.d.sync += rx_room.eq(rxf.w_level < self.rx_depth - 2)
        m.d.comb += [
            self.rx.ready.eq(rx_room),
            rxf.w_data.eq(self.rx.payload),
            rxf.w_en.eq(self.rx.valid & rx_room),
        ]
        wiring.connect(m, txf.r_stream, wiring.flipped(self.tx))

        # ---- MMIO, in registered stages: the request's register, direction and data
        # are taken into flip-flops every cycle (a request is held until ``ready``) and
        # one flip-flop says a request is there; the cycle after, the captured copy acts
        # (takes the RX byte, pushes the TX byte once there is room, writes CTRL), and
        # ``ready`` with the read data follows a cycle later. The request's decode (the
        # core's address adder) reaches only those flip-flops' inputs, no enable and no
        # FIFO logic.
        ctrl = Signal(2)
        req = Signal()
        req_reg = Signal(2)
        req_write = Signal()
        req_data = Signal(8)
        # a CTRL write, decoded as the request is captured (the decode of the captured
        # register index after ``go`` into CTRL's enable was among the iCEBreaker
        # build's late paths at 48 MHz)
        req_ctrlw = Signal()
        req_rxr = Signal()  # likewise an RX read (into the FIFO's r_en)
        mm_ack = Signal()
        mm_data = Signal(9)  # zero but in an answer's cycle: ORed into the read data
        # the TX byte is pushed a cycle after ``go``, from registers; ``go`` waits for room
        # for two (the push in flight and this one), from a flip-flop
        tx_room = Signal()
        tx_push = Signal()
        tx_byte = Signal(8)
        m.d.sync += [tx_room.eq(txf.w_level < txf.depth - 2), tx_push.eq(0)]
        m.d.comb += [txf.w_data.eq(tx_byte), txf.w_en.eq(tx_push)]
        go = Signal()
        m.d.comb += go.eq(req & ((req_reg != 1) | ~req_write | tx_room))
        m.d.sync += [
            req.eq(bus.valid & (region == 2) & ~go & ~mm_ack),
            req_reg.eq(bus.addr[:2]),
            req_write.eq(bus.write),
            req_ctrlw.eq(bus.write & (bus.addr[:2] == 2)),
            req_rxr.eq(~bus.write & (bus.addr[:2] == 0)),
            req_data.eq(bus.wdata[:8]),
            mm_ack.eq(go),
            mm_data.eq(0),
        ]
        with m.If(go):
            with m.Switch(req_reg):
                with m.Case(0):  # RX: the byte is taken by the read that returns it
                    m.d.sync += mm_data.eq(Cat(rxf.r_data, rxf.r_rdy))
                with m.Case(1):  # TX: a write waits for room
                    m.d.sync += [tx_push.eq(req_write), tx_byte.eq(req_data), mm_data.eq(tx_room)]
                with m.Case(2):  # CTRL
                    m.d.sync += mm_data.eq(ctrl)
        # (go is req for RX and CTRL)
        m.d.comb += rxf.r_en.eq(req & req_rxr)
        with m.If(req & req_ctrlw):
            m.d.sync += ctrl.eq(req_data[:2])
        with m.If(rst):
            m.d.sync += [ctrl.eq(0), req.eq(0), mm_ack.eq(0)]
        m.d.comb += [self.busy.eq(ctrl[0]), self.error.eq(ctrl[1] | boot_error)]

        # ---- the engine (region 3)
        eng_rdata, eng_ready = Const(0, 32), Const(0, 1)
        unmapped = (region == 0) | (region == 3)
        if self.engine is not None:
            m.submodules.engine = ResetInserter(rst)(self.engine)
            eb = self.engine.bus
            m.d.comb += [
                eb.addr.eq(bus.addr),
                eb.wdata.eq(bus.wdata),
                eb.wmask.eq(bus.wmask),
                eb.write.eq(bus.write),
                eb.valid.eq(bus.valid & (region == 3)),
            ]
            eng_rdata, eng_ready = eb.rdata, eb.ready
            unmapped = region == 0

        # ---- the bus's answer: the RAM's data gated by a registered select, ORed with
        # the MMIO's and the engine's (zero outside their answers): one LUT level between
        # the block RAM and the core. An unmapped region answers 0 a cycle after the
        # request.
        in_ram = Signal()
        other_ack = Signal()
        m.d.sync += [
            in_ram.eq(region == 1),
            other_ack.eq(bus.valid & unmapped & ~other_ack),
        ]
        m.d.comb += [
            bus.rdata.eq(Mux(in_ram, ram.bus.rdata, 0) | mm_data | eng_rdata),
            bus.ready.eq(ram.bus.ready | mm_ack | other_ack | eng_ready),
        ]
        return m


class CompactDevice(CompactSoC):
    """The compact device for a set of build parameters: the firmware built for them
    (:func:`~pentegg.rtl.compact.firmware.image`) in a :class:`CompactSoC`.

    Parameters
    ----------
    ram_bytes, boot, flash_offset, rx_depth
        The SoC's (:class:`CompactSoC`; ``flash_offset``: default 1 MiB, above the
        bitstream).
    engine : int
        1 (default): the datapath (:class:`~.engine.CompactEngine`) computes the forward
        pass when it takes the build (``firmware.engine_fits``: low-rank mode, ranks 1
        and 4, layers up to 127 wide); 0: the firmware computes everything.
    clock_hz, baud, **params
        The firmware's build parameters (INFO reports them; rtl/compact/firmware.py).
    """

    def __init__(
        self,
        *,
        ram_bytes: int = 128 * 1024,
        boot: str = "preload",
        rx_depth: int = 512,
        flash_offset: int = 0x10_0000,
        engine: int = 1,
        **params,
    ):
        from .firmware import check_params, engine_fits, image

        check_int("engine", engine, 0, 1)
        self.params = p = check_params(**params)
        engine = bool(engine) and engine_fits(p)
        # the image first: a build it refuses leaves no datapath built and unused
        self.firmware = image(p, ram_bytes=ram_bytes, engine=engine)
        if engine:
            engine = CompactEngine(
                max_layers=p["max_layers"],
                max_width=p["max_width"],
                rank=p["rank"],
                digits=p["digits"],
                max_population=p["max_population"],
            )
        else:
            engine = None
        super().__init__(
            image=self.firmware.words,
            ram_bytes=ram_bytes,
            boot=boot,
            flash_offset=flash_offset,
            rx_depth=rx_depth,
            engine=engine,
        )

    def flash_image(self) -> bytes | None:
        """``flash`` boot: what the SPI flash must hold at :attr:`flash_offset` (the
        image's length in bytes, then the image); None for a ``preload`` boot."""
        from .firmware import flash_image

        return flash_image(self.firmware) if self.boot == "flash" else None
