"""LinkEngine: the device side of the host protocol (docs/protocol.md).

Bytes in (``rx``), bytes out (``tx``), the Accelerator's command words in between::

    rx -> CobsDecoder -> frame buffer (+ CRC) -> checks -> command words -> cmd
                                      ^                                      |
                                      +--------- response words <-- rsp <---+
    tx <- CobsEncoder <- header registers + frame buffer (payload) + CRC

One frame buffer (``frame_bytes`` bytes, one byte wide, one read and one write port)
holds the request and then the response: the request's payload starts at byte 5, and
the response's payload is written over it from byte 5 on (its header is kept in
registers and its CRC computed before it is sent), so a response word never overwrites a
request word that has not been read yet (``READ_REGS`` reads word ``j`` before it writes
answer ``j`` at the same place).

A request is handled in phases, and nothing reaches ``cmd`` before the whole request has
passed every check:

1. receive: the decoded bytes are written to the buffer and run through CRC-16 as they
   arrive; the header bytes are kept in registers; a frame longer than the buffer sets
   ``OVERSIZE`` and the rest of it is dropped up to its delimiter;
2. frame checks, in this order: ``OVERSIZE``, ``FRAME`` (a COBS block running past the
   delimiter, or fewer than 7 bytes), ``CRC``, ``VERSION``, ``LENGTH`` (``len`` against
   the bytes received), ``COMMAND``, ``LENGTH`` (``len`` against the command);
3. ``PARAM``: every register address, the memory select, address and count, the run kind;
4. a ``RUN`` whose ``seq`` is that of the last run started (no ``RUN``, ``WRITE_*`` or
   ``RESET`` executed since) is answered ``OK`` without running; then ``BUSY`` for
   ``WRITE_REGS``, ``WRITE_MEM``, ``READ_MEM`` and ``RUN`` while ``busy``;
5. execute: the command words go out on ``cmd``, response words come back on ``rsp``
   and are written to the buffer; ``RESET`` pulses ``accel_reset`` for one cycle;
6. respond: the response's CRC is computed over header and payload, then the
   CobsEncoder sends the frame and its delimiter on ``tx``; back to 1.

A ``RUN`` is answered after the Accelerator's ``busy`` has risen (it does two cycles after
the ``RUN`` word is taken, for at least one cycle even for a run the controller refuses;
the engine waits at most 16 cycles), so a ``STATUS`` that follows reports the run.

Empty payload ``WRITE_REGS``, ``READ_REGS`` and ``WRITE_MEM`` requests are ``LENGTH``; a
``WRITE_MEM`` with its header word and no value is ``PARAM`` (count 0).

Latency and throughput (cycles, no back-pressure): one byte per cycle received; the checks
take 2 cycles (the verdict, then the branch), plus 6 per word read from the buffer (its
read latency 2) (``PARAM`` reads every address of ``WRITE_REGS``/``READ_REGS``, the first
word or two of the others) and 3 for a memory request's range (end address, compares,
branch: registered steps); execution takes 6 cycles per request word read and 5 per
response word written, plus the Accelerator's time (a few cycles per word); the response's
CRC one cycle per byte; the encoder about five cycles per byte (read latency 3) plus three
per block. A UART at 115200 baud delivers a byte every ~87 us, thousands of cycles, so the
link runs at the UART's speed.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import crc, fifo, stream, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from ..bram import SinglePortRAM
from ..control.command import Op
from ..control.registers import register_map
from ..params import check_choice, check_int
from .cobs import CobsDecoder, CobsEncoder
from .protocol import (
    CRC_BYTES,
    FRAME_BYTES_RANGE,
    REQUEST_HEADER,
    RESPONSE_HEADER,
    VERSION,
    Cmd,
    Status,
    max_payload,
)

__all__ = ["LinkEngine", "check_frame_bytes"]

#: How long a RUN waits for ``busy`` to rise before answering (cycles).
RUN_WAIT = 16


def check_frame_bytes(frame_bytes) -> int:
    lo, hi = FRAME_BYTES_RANGE
    if (
        not isinstance(frame_bytes, int)
        or isinstance(frame_bytes, bool)
        or not lo <= frame_bytes <= hi
        or frame_bytes & (frame_bytes - 1)
    ):
        raise ValueError(f"frame_bytes={frame_bytes!r} is not a power of two in {lo}..{hi}")
    return frame_bytes


class LinkEngine(wiring.Component):
    """Frames in and out, Accelerator command words in between (module docstring).

    Parameters
    ----------
    frame_bytes : int
        The frame buffer's size in bytes, a power of two, 256..65536.
    memories : dict
        ``name -> (sel, depth, access)``: the Accelerator's ``host_memories``, which
        ``WRITE_MEM``/``READ_MEM`` are checked against (``access``: ``"rw"``, ``"r"``
        read-only, ``"w"`` write-only).
    max_layers : int
        The Accelerator's (its register map, 1..8).
    info : list of int
        INFO's words (``INFO_FIELDS`` order), each 0..2**32-1.

    Interface attributes
    --------------------
    rx : In(stream.Signature(8))
        Received bytes, delimiters included. Ready only while a frame is received.
    tx : Out(stream.Signature(8))
        Response bytes: COBS-encoded frames, each ended by ``0x00``; ``valid`` and
        ``payload`` come from flip-flops (a three-entry FIFO after the encoder).
    cmd : Out(stream.Signature(32)), rsp : In(stream.Signature(32))
        The Accelerator's command and response words (rtl/control/command.py).
    busy : In(1)
        The Accelerator runs.
    accel_reset : Out(1)
        A one-cycle pulse for ``RESET``: resets the Accelerator's registers.
    """

    def __init__(
        self,
        *,
        frame_bytes: int = 2048,
        memories: dict[str, tuple[int, int, str]],
        max_layers: int,
        info: list[int],
    ):
        self.frame_bytes = check_frame_bytes(frame_bytes)
        self.max_layers = check_int("max_layers", max_layers, 1, 8)
        self.max_words = max_payload(frame_bytes) // 4
        self.memories = {}
        for name, (sel, depth, access) in memories.items():
            check_int(f"memories[{name!r}] select", sel, 0, 15)
            check_int(f"memories[{name!r}] depth", depth, 1, 1 << 24)
            check_choice(f"memories[{name!r}] access", access, ("rw", "r", "w"))
            self.memories[name] = (sel, depth, access)
        self.info = [check_int("info word", w, 0, 0xFFFF_FFFF) for w in info]
        if not 1 <= len(self.info) <= self.max_words:
            raise ValueError(f"info has {len(self.info)} words, not 1..{self.max_words}")
        super().__init__(
            {
                "rx": In(stream.Signature(8)),
                "tx": Out(stream.Signature(8)),
                "cmd": Out(stream.Signature(32)),
                "rsp": In(stream.Signature(32)),
                "busy": In(1),
                "accel_reset": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        fb = self.frame_bytes
        ab = ceil_log2(fb)  # byte address bits
        m.submodules.dec = dec = CobsDecoder()
        m.submodules.enc = enc = CobsEncoder(ab + 1, latency=3)
        m.submodules.rx_crc = rx_crc = crc.catalog.CRC16_CCITT_FALSE(8).create()
        m.submodules.tx_crc = tx_crc = crc.catalog.CRC16_CCITT_FALSE(8).create()
        # the frame buffer: read latency 2, through the block RAMs' output registers on
        # the ECP5 (SinglePortRAM: its rows' multiplexer starts from flip-flops). Its
        # unregistered outputs through the rows' multiplexer into the fetched words and
        # the response's bytes had 61 of the 128-lane ULX3S build's 477 endpoints past
        # 10 ns at a321e40 (seed 1, 10.83 ns). It is written (a request's bytes, a
        # response's words) and read in different states, never in one cycle; block RAM
        # on the iCE40 too (the SPRAMs are the accelerator's)
        m.submodules.buf = buf = SinglePortRAM(8, fb, latency=2, spram=False)
        rp = SimpleNamespace(addr=buf.r_addr, data=buf.r_data)
        wp = SimpleNamespace(addr=buf.w_addr, data=buf.w_data, en=buf.w_en)
        wiring.connect(m, wiring.flipped(self.rx), dec.i)
        # The encoder's bytes pass a small FIFO with registered outputs: ``tx`` is
        # driven from flip-flops, so the frame buffer's read data (the encoder's payload)
        # and the encoder's address logic end at the FIFO, not in the UART's shift
        # register (the ULX3S build's critical path at `acbbf46`). Depth 3: the output
        # register and a two-entry memory (depth 2 leaves a memory of one entry, whose
        # zero-width address Verilator's lint flags).
        m.submodules.tx_fifo = tx_fifo = fifo.SyncFIFOBuffered(width=8, depth=3)
        m.d.comb += [
            tx_fifo.w_data.eq(enc.o.payload),
            tx_fifo.w_en.eq(enc.o.valid),
            enc.o.ready.eq(tx_fifo.w_rdy),
            self.tx.payload.eq(tx_fifo.r_data),
            self.tx.valid.eq(tx_fifo.r_rdy),
            tx_fifo.r_en.eq(self.tx.ready),
        ]

        # ---- request header, response header
        n = Signal(ab + 1)  # decoded bytes received (saturates at fb)
        over = Signal()
        cobs_err = Signal()
        ver, seq, cmd, len_f = Signal(8), Signal(8), Signal(8), Signal(16)
        status = Signal(4)
        resp_n = Signal(ab + 1)  # response payload bytes
        crc_val = Signal(16)

        # ---- execution
        rptr, wptr = Signal(ab + 1), Signal(ab + 1)
        k = Signal(3)
        word, wword, hdr0, hdr1 = Signal(32), Signal(32), Signal(32), Signal(32)
        cnt = Signal(max(ab + 1, 6))
        dup_valid, dup_seq = Signal(), Signal(8)
        wait = Signal(range(RUN_WAIT + 1))

        # ---- register and memory tables
        regs = register_map(self.max_layers)
        rw_mask = sum(1 << r.addr for r in regs if r.access == "rw")
        mapped_mask = sum(1 << r.addr for r in regs)
        reg_addr = {r.name: r.addr for r in regs}

        def reg_ok(a, mask):
            return (a[8:] == 0) & Const(mask, 256).bit_select(a[:8], 1)

        # a memory request's range check in three registered steps (its end address,
        # the check, the branch): in one cycle, the 34-bit sum, its compares with every
        # memory's depth and the state's next-state logic made the ULX3S build's
        # critical path at 1f6f876 (14.17 ns with router1, seed 3)
        mem_end = Signal(34)  # the request's sel's first word + count
        mem_good = Signal()

        def mem_check(state, write, then):
            """``state``: ``mem_end``; ``state``_K: ``mem_good``; ``state``_C: ``PARAM``
            unless good, else ``then``. 3 cycles."""
            sel, addr = hdr0[24:], hdr0[:24]
            count = cnt if write else hdr1
            with m.State(state):
                m.d.sync += mem_end.eq(addr + count)
                m.next = f"{state}_K"
            with m.State(f"{state}_K"):
                ok = Const(0)
                for s, depth, access in self.memories.values():
                    if ("w" if write else "r") not in access:
                        continue
                    ok |= (sel == s) & (mem_end <= depth)
                m.d.sync += mem_good.eq(ok & (count != 0) & (count <= self.max_words))
                m.next = f"{state}_C"
            with m.State(f"{state}_C"):
                with m.If(~mem_good):
                    answer(Status.PARAM)
                with m.Else():
                    m.next = then

        # ---- the response's bytes, as the CRC pass and the encoder read them:
        # header registers, the buffer's payload (response byte i at buffer byte i - 1),
        # the CRC; the byte at vaddr comes out as vdata two cycles later: vaddr is
        # registered before the header's select and the payload's compares (from the
        # state's choice of vaddr through them in one cycle, 6 of the 128-lane ULX3S
        # build's 583 endpoints past 10 ns at 3f25487, seed 1), the buffer's byte with it
        # The buffer's read address and vaddr are each a choice of two registers by a
        # flip-flop (tx_rd: set for R_TX), not by a decode of the state: the fetches'
        # rptr, which is also vcnt - 1 in the CRC pass, else the encoder's addr_prev;
        # the CRC pass's vcnt, else the encoder's addr. Outside those states the read
        # data is not used (the states' choice of rptr, vcnt - 1 or the encoder's
        # address into the block RAMs' read address had 22 of the 128-lane ULX3S build's
        # endpoints past 9.3 ns at f3eb1f7, seed 1, 10.23 ns)
        tx_rd = Signal()
        vcnt = Signal(ab + 1)
        vaddr = Mux(tx_rd, enc.addr, vcnt)
        va_d = Signal(ab + 1, reset_less=True)
        m.d.sync += va_d.eq(vaddr)
        m.d.comb += rp.addr.eq(Mux(tx_rd, enc.addr_prev, rptr))
        hb, hb_d = Signal(8), Signal(8)
        pay_d = Signal()
        # (the buffer's byte at va_d - 1 comes out of its read latency 2 with hb_d)
        head = Array(
            [Const(VERSION, 8), seq, cmd, Cat(status, Const(0, 4)), resp_n[:8], resp_n[8:]]
        )
        # the payload's end, a register of resp_n's sum a cycle behind it: resp_n is set
        # before R_START and stays through the response, and the compares matter only
        # from vaddr = RESPONSE_HEADER on, six cycles or more into a pass that starts
        # at 0 (the sum before the compares had 7 of the 128-lane ULX3S build's 413
        # endpoints past 10 ns at cd6a36f, seed 1)
        resp_end = Signal(ab + 2, reset_less=True)
        m.d.sync += resp_end.eq(RESPONSE_HEADER + resp_n)
        m.d.comb += hb.eq(
            Mux(
                va_d < RESPONSE_HEADER,
                head[va_d[:3]],
                Mux(va_d == resp_end, crc_val[8:], crc_val[:8]),
            )
        )
        m.d.sync += [
            hb_d.eq(hb),
            pay_d.eq((va_d >= RESPONSE_HEADER) & (va_d < resp_end)),
        ]
        vdata = Mux(pay_d, rp.data, hb_d)
        resp_len = RESPONSE_HEADER + resp_n  # bytes before the CRC
        feed_d, feed_d2, feed_d3 = Signal(), Signal(), Signal()
        # the encoder and the CRC read through one more register (latency 3): no path
        # from the frame buffer's block RAM output into the encoder's scan (the ULX3S
        # build's critical path at 7b4a072 and 6a2d402) or the CRC's XOR network (at
        # aae9720, 13.19 ns, seed 2 at 60 MHz)
        enc_data = Signal(8)
        m.d.sync += [enc_data.eq(vdata), feed_d2.eq(feed_d), feed_d3.eq(feed_d2)]
        m.d.comb += [
            tx_crc.data.eq(enc_data),
            tx_crc.valid.eq(feed_d3),
            enc.data.eq(enc_data),
        ]

        # every byte reaches the frame buffer a cycle later, from registers: a received
        # byte (the decoder's output through its state into the block RAMs' write data
        # and enables had 14 of the 128-lane ULX3S build's 17 endpoints past 10 ns at
        # f3eb1f7, seed 1, 10.67 ns) and a response's (``store``, below). A request's last
        # byte lands in CHECK, before any state that reads the buffer; a store's last
        # in the state after it, which reads nothing (the next read is a later fetch or
        # R_CRC, two states on)
        w_addr = Signal(ab, reset_less=True)
        w_data = Signal(8, reset_less=True)
        w_en = Signal()
        m.d.sync += w_en.eq(0)
        m.d.comb += [wp.addr.eq(w_addr), wp.data.eq(w_data), wp.en.eq(w_en)]

        # ---- helpers: states that read a word from the buffer, write one, send, receive
        def fetch(state, dest, then):
            """``dest`` = the little-endian word at ``rptr``; ``rptr`` += 4. 6 cycles (the
            buffer's read latency 2). ``rptr`` moves with each of the four reads, so the
            buffer's address is a register, not ``rptr + k`` (that adder and the states'
            multiplexer into the block RAMs' address had 31 of the 128-lane ULX3S build's
            80 endpoints past 10 ns at 5e791fe, seed 1, 11.21 ns)."""
            with m.State(state):
                with m.If(~k[2]):
                    m.d.sync += rptr.eq(rptr + 1)
                with m.If(k >= 2):
                    m.d.sync += dest.word_select((k - 2)[:2], 8).eq(rp.data)
                with m.If(k == 5):
                    m.d.sync += k.eq(0)
                    m.next = then
                with m.Else():
                    m.d.sync += k.eq(k + 1)

        def store(state, then):
            """``wword`` written at ``wptr``; ``wptr`` += 4. 4 cycles. Each byte goes
            through the write registers (``w_addr``, ``w_data``, ``w_en``, above) and
            reaches the buffer a cycle later; ``wptr`` moves with each byte, so no
            ``wptr + k`` adder and no choice of the states lies before the block RAMs'
            write port (the write port's inputs, the receiver's and these through the
            states' multiplexer, had 19 of the 128-lane ULX3S build's endpoints past
            9.3 ns at f3eb1f7, seed 1, 10.45 ns)."""
            with m.State(state):
                m.d.sync += [
                    w_addr.eq(wptr),
                    w_data.eq(wword.word_select(k[:2], 8)),
                    w_en.eq(1),
                    wptr.eq(wptr + 1),
                ]
                with m.If(k == 3):
                    m.d.sync += k.eq(0)
                    m.next = then
                with m.Else():
                    m.d.sync += k.eq(k + 1)

        def send(state, value, then, done=()):
            with m.State(state):
                m.d.comb += [self.cmd.valid.eq(1), self.cmd.payload.eq(value)]
                with m.If(self.cmd.ready):
                    m.d.sync += list(done)
                    then()

        def recv(state, then):
            with m.State(state):
                m.d.comb += self.rsp.ready.eq(1)
                with m.If(self.rsp.valid):
                    m.d.sync += wword.eq(self.rsp.payload)
                    m.next = then

        def goto(state):
            def f():
                m.next = state

            return f

        # The checks of CHECK and GATE from registers, computed every cycle: what they
        # read is final a cycle before the state (the frame's length, CRC and header at
        # its end beat; the command, sequence number and dup_valid since RX). busy is
        # seen a cycle late: it rises only in X_RUN_W, which waits for it, so a GATE
        # never meets a rise; a GATE in the cycle busy falls answers BUSY, as it would
        # have a cycle earlier (the compares and the accelerator's busy through the
        # state decode into resp_n's and cnt's enables had 28 of the 948 endpoints past
        # 10 ns of the 128-lane ULX3S build at 23e1484, seed 2)
        chk_short, chk_crc, chk_len = Signal(), Signal(), Signal()
        # the frame's length as its length field gives it, a register a cycle behind
        # len_f (final at the field's last byte, three beats or more before the end
        # beat of any frame not too short to have a CRC), so chk_len is one compare
        # (len_f's subtraction from n before the compare: 10.04 ns in the 128-lane
        # ULX3S build at f3eb1f7, seed 1)
        len_tot = Signal(18, reset_less=True)
        m.d.sync += len_tot.eq(len_f + REQUEST_HEADER + CRC_BYTES)
        gate_dup, gate_busy = Signal(), Signal()
        waits = (cmd == Cmd.WRITE_REGS) | (cmd == Cmd.WRITE_MEM)
        waits |= (cmd == Cmd.READ_MEM) | (cmd == Cmd.RUN)
        m.d.sync += [
            chk_short.eq(n < REQUEST_HEADER + CRC_BYTES),
            chk_crc.eq(rx_crc.crc != 0),
            chk_len.eq(len_tot != n),
            gate_dup.eq((cmd == Cmd.RUN) & dup_valid & (seq == dup_seq)),
            gate_busy.eq(waits & self.busy),
        ]

        def answer(code, payload_bytes=0):
            m.d.sync += [status.eq(code), resp_n.eq(payload_bytes)]
            m.next = "R_START"

        def loop(again, then="R_START"):
            """Count ``cnt`` down: to ``again`` while words are left, else ``then``."""
            m.d.sync += cnt.eq(cnt - 1)
            with m.If(cnt == 1):
                m.next = then
            with m.Else():
                m.next = again

        # the frame checks' verdict (CHECK, below): the first failing check's status, else OK
        verdict = Signal(4)
        code = Signal(4)
        lw = len_f[:2] != 0  # not whole words
        length_bad = Signal()
        with m.Switch(cmd):
            with m.Case(Cmd.INFO, Cmd.STATUS, Cmd.RESET):
                m.d.comb += length_bad.eq(len_f != 0)
            with m.Case(Cmd.WRITE_REGS):
                m.d.comb += length_bad.eq(lw | len_f[2] | (len_f == 0))
            with m.Case(Cmd.READ_REGS, Cmd.WRITE_MEM):
                m.d.comb += length_bad.eq(lw | (len_f == 0))
            with m.Case(Cmd.READ_MEM):
                m.d.comb += length_bad.eq(len_f != 8)
            with m.Case(Cmd.RUN):
                m.d.comb += length_bad.eq(len_f != 4)
        known = Cat(cmd == c for c in Cmd).any()
        with m.If(over):
            m.d.comb += code.eq(Status.OVERSIZE)
        with m.Elif(cobs_err | chk_short):
            m.d.comb += code.eq(Status.FRAME)
        with m.Elif(chk_crc):
            m.d.comb += code.eq(Status.CRC)
        with m.Elif(ver != VERSION):
            m.d.comb += code.eq(Status.VERSION)
        with m.Elif(chk_len):
            m.d.comb += code.eq(Status.LENGTH)
        with m.Elif(~known):
            m.d.comb += code.eq(Status.COMMAND)
        with m.Elif(length_bad):
            m.d.comb += code.eq(Status.LENGTH)
        with m.Else():
            m.d.comb += code.eq(Status.OK)

        op = lambda o, low: (o.value << 28) | low  # noqa: E731
        payload_words = len_f[2:]

        with m.FSM():
            # ---- 1. receive
            with m.State("RX"):
                beat = dec.o.payload
                m.d.comb += [dec.o.ready.eq(1), rx_crc.start.eq(n == 0)]
                with m.If(dec.o.valid & beat.end):
                    m.d.sync += cobs_err.eq(beat.error)
                    m.next = "CHECK"
                with m.Elif(dec.o.valid):
                    m.d.comb += [rx_crc.data.eq(beat.data), rx_crc.valid.eq(1)]
                    with m.If(n == fb):
                        m.d.sync += over.eq(1)
                    with m.Else():
                        m.d.sync += [w_addr.eq(n), w_data.eq(beat.data), w_en.eq(1)]
                        m.d.sync += n.eq(n + 1)
                        for i, reg in enumerate((ver, seq, cmd)):
                            with m.If(n == i):
                                m.d.sync += reg.eq(beat.data)
                        with m.If(n == 3):
                            m.d.sync += len_f[:8].eq(beat.data)
                        with m.If(n == 4):
                            m.d.sync += len_f[8:].eq(beat.data)

            # ---- 2. frame checks: CHECK registers the verdict (the first failing check's
            # status, OK if none), CHECK_GO branches on it. In one cycle, the checks'
            # priority chain into the status, resp_n and next-state enables had 25 of the
            # 128-lane ULX3S build's 117 endpoints past 10 ns at 005e676 (seed 1)
            with m.State("CHECK"):
                m.d.sync += [verdict.eq(code), rptr.eq(REQUEST_HEADER), k.eq(0)]
                m.next = "CHECK_GO"
            with m.State("CHECK_GO"):
                with m.If(verdict != Status.OK):
                    m.d.sync += [status.eq(verdict), resp_n.eq(0)]
                    m.next = "R_START"
                with m.Else():
                    with m.Switch(cmd):
                        with m.Case(Cmd.INFO, Cmd.STATUS, Cmd.RESET):
                            m.next = "GATE"
                        with m.Case(Cmd.WRITE_REGS):
                            m.d.sync += cnt.eq(len_f[3:])
                            m.next = "SC_WR"
                        with m.Case(Cmd.READ_REGS):
                            m.d.sync += cnt.eq(payload_words)
                            m.next = "SC_RR"
                        with m.Case(Cmd.WRITE_MEM):
                            m.d.sync += cnt.eq(payload_words - 1)
                            m.next = "SC_WM"
                        with m.Case(Cmd.READ_MEM):
                            m.next = "SC_RM0"
                        with m.Case(Cmd.RUN):
                            m.next = "SC_RUN"

            # ---- 3. PARAM
            fetch("SC_WR", word, "SC_WR_C")
            with m.State("SC_WR_C"):
                m.d.sync += rptr.eq(rptr + 4)  # skip the value
                with m.If(~reg_ok(word, rw_mask)):
                    answer(Status.PARAM)
                with m.Else():
                    loop("SC_WR", "GATE")
            fetch("SC_RR", word, "SC_RR_C")
            with m.State("SC_RR_C"):
                with m.If(~reg_ok(word, mapped_mask)):
                    answer(Status.PARAM)
                with m.Else():
                    loop("SC_RR", "GATE")
            fetch("SC_WM", hdr0, "SC_WM_E")
            mem_check("SC_WM_E", True, "GATE")
            fetch("SC_RM0", hdr0, "SC_RM1")
            fetch("SC_RM1", hdr1, "SC_RM_E")
            mem_check("SC_RM_E", False, "GATE")
            fetch("SC_RUN", hdr0, "SC_RUN_C")
            with m.State("SC_RUN_C"):
                with m.If(hdr0 >= 4):
                    answer(Status.PARAM)
                with m.Else():
                    m.next = "GATE"

            # ---- 4. duplicate RUN, BUSY; then execute
            with m.State("GATE"):
                m.d.sync += [rptr.eq(REQUEST_HEADER), wptr.eq(REQUEST_HEADER), k.eq(0)]
                with m.If(gate_dup):
                    answer(Status.OK)
                with m.Elif(gate_busy):
                    answer(Status.BUSY)
                with m.Else():
                    m.d.sync += status.eq(Status.OK)
                    with m.Switch(cmd):
                        with m.Case(Cmd.INFO):
                            m.d.sync += [resp_n.eq(4 * len(self.info)), cnt.eq(len(self.info))]
                            m.next = "X_INFO"
                        with m.Case(Cmd.WRITE_REGS):
                            m.d.sync += [resp_n.eq(0), cnt.eq(len_f[3:]), dup_valid.eq(0)]
                            m.next = "X_WR_A"
                        with m.Case(Cmd.READ_REGS):
                            m.d.sync += [resp_n.eq(len_f), cnt.eq(payload_words)]
                            m.next = "X_RR_A"
                        with m.Case(Cmd.WRITE_MEM):
                            m.d.sync += [resp_n.eq(0), dup_valid.eq(0)]
                            m.d.sync += rptr.eq(REQUEST_HEADER + 4)
                            m.next = "X_WM_H"
                        with m.Case(Cmd.READ_MEM):
                            m.d.sync += [resp_n.eq(hdr1 << 2), cnt.eq(hdr1)]
                            m.next = "X_RM_H"
                        with m.Case(Cmd.RUN):
                            m.d.sync += resp_n.eq(0)
                            m.next = "X_RUN"
                        with m.Case(Cmd.STATUS):
                            m.d.sync += [resp_n.eq(12), cnt.eq(3)]
                            m.next = "X_ST"
                        with m.Case(Cmd.RESET):
                            m.d.sync += resp_n.eq(0)
                            m.next = "X_RESET"

            # ---- 5. execute
            info = Array(Const(w, 32) for w in self.info)
            with m.State("X_INFO"):
                m.d.sync += wword.eq(info[(len(self.info) - cnt)[: ceil_log2(len(self.info) + 1)]])
                m.next = "X_INFO_S"
            store("X_INFO_S", "X_INFO_N")
            with m.State("X_INFO_N"):
                loop("X_INFO")

            fetch("X_WR_A", word, "X_WR_SA")
            send("X_WR_SA", op(Op.WREG, 0) | word[:8], goto("X_WR_V"))
            fetch("X_WR_V", word, "X_WR_SV")
            send("X_WR_SV", word, lambda: loop("X_WR_A"))

            fetch("X_RR_A", word, "X_RR_S")
            send("X_RR_S", op(Op.RREG, 0) | word[:8], goto("X_RR_R"))
            recv("X_RR_R", "X_RR_W")
            store("X_RR_W", "X_RR_N")
            with m.State("X_RR_N"):
                loop("X_RR_A")

            mem_head = Cat(hdr0[:24], hdr0[24:28])
            send("X_WM_H", op(Op.WMEM, 0) | mem_head, goto("X_WM_C"))
            send("X_WM_C", cnt, goto("X_WM_D"))
            fetch("X_WM_D", word, "X_WM_S")
            send("X_WM_S", word, lambda: loop("X_WM_D"))

            send("X_RM_H", op(Op.RMEM, 0) | mem_head, goto("X_RM_C"))
            send("X_RM_C", hdr1, goto("X_RM_R"))
            recv("X_RM_R", "X_RM_W")
            store("X_RM_W", "X_RM_N")
            with m.State("X_RM_N"):
                loop("X_RM_R")

            send(
                "X_RUN",
                op(Op.RUN, 0) | hdr0[:4],
                goto("X_RUN_W"),
                [dup_valid.eq(1), dup_seq.eq(seq), wait.eq(0)],
            )
            with m.State("X_RUN_W"):  # until busy rises (module docstring)
                m.d.sync += wait.eq(wait + 1)
                with m.If(self.busy | (wait == RUN_WAIT)):
                    m.next = "R_START"

            # cnt 3, 2, 1: status, error, step
            status_regs = Array(
                Const(op(Op.RREG, reg_addr[name]), 32)
                for name in ("step", "step", "error", "status")
            )
            send("X_ST", status_regs[cnt[:2]], goto("X_ST_R"))
            recv("X_ST_R", "X_ST_W")
            store("X_ST_W", "X_ST_N")
            with m.State("X_ST_N"):
                loop("X_ST")

            with m.State("X_RESET"):
                m.d.comb += self.accel_reset.eq(1)
                m.d.sync += dup_valid.eq(0)
                m.next = "R_START"

            # ---- 6. respond
            with m.State("R_START"):
                m.d.comb += tx_crc.start.eq(1)
                m.d.sync += [vcnt.eq(0), rptr.eq(-1), feed_d.eq(0)]
                m.next = "R_CRC"
            with m.State("R_CRC"):
                m.d.sync += [vcnt.eq(vcnt + 1), rptr.eq(rptr + 1), feed_d.eq(vcnt < resp_len)]
                with m.If(vcnt == resp_len):
                    m.next = "R_CRC_L"
            with m.State("R_CRC_L"):
                m.next = "R_CRC_L2"
            with m.State("R_CRC_L2"):  # the last byte enters the CRC
                m.next = "R_CRC_W"
            with m.State("R_CRC_W"):
                m.d.sync += crc_val.eq(tx_crc.crc)
                m.next = "R_TX0"
            with m.State("R_TX0"):
                m.d.comb += [enc.start.eq(1), enc.length.eq(resp_len + CRC_BYTES)]
                m.d.sync += tx_rd.eq(1)
                m.next = "R_TX"
            with m.State("R_TX"):
                with m.If(~enc.busy):
                    m.d.sync += [
                        tx_rd.eq(0),
                        n.eq(0),
                        over.eq(0),
                        cobs_err.eq(0),
                        ver.eq(0),
                        seq.eq(0),
                        cmd.eq(0),
                        len_f.eq(0),
                    ]
                    m.next = "RX"
        return m
