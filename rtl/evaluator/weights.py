"""WeightStreamer: two rows of a weight matrix as a stream of digit pairs (spec 1.3, 1.4).

The weight memory holds the network in the spec's storage format: every matrix packed
row-major, five 3-bit digit codes per 16-bit word (digit ``i`` in bits ``[3i+2:3i]``),
each matrix starting on a word boundary. A *pass* of the evaluator needs rows ``o`` and
``o + 1`` of one matrix side by side, one digit of each per cycle: two cursors walk the two
rows, each fetching the words its row covers (a row of ``fan`` digits starts anywhere in
a word), through one read port shared by both.
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from .pass_engine import REPLICA_ATTR

__all__ = ["WeightStreamer", "pass_layout"]

DIGITS_PER_WORD = 5
QUEUE_DEPTH = 5  # rows per cursor side queue (the all_ready comment in WeightStreamer)


def pass_layout(addr_bits: int, n_bits: int) -> data.StructLayout:
    """A pass: the start of row ``o`` (``word0``, digit ``off0``) and of row ``o + 1``
    (``word1``, ``off1``), ``n`` digits per row before the bias digit, ``two``: row
    ``o + 1`` exists."""
    return data.StructLayout(
        {
            "word0": addr_bits,
            "off0": 3,
            "word1": addr_bits,
            "off1": 3,
            "n": n_bits,
            "two": 1,
        }
    )


class _Cursor(wiring.Component):
    """One row per pass: fetch requests for the words of the row, and its digits from the
    fetched words (``n + 1`` digits per pass, the last one the bias digit)."""

    def __init__(self, addr_bits: int, n_bits: int, depth: int):
        self.addr_bits, self.n_bits, self.depth = addr_bits, n_bits, depth
        row = data.StructLayout({"word": addr_bits, "off": 3, "n": n_bits, "on": 1})
        super().__init__(
            {
                "fcmd": In(stream.Signature(row)),  # rows, fetch side
                "rcmd": In(stream.Signature(row)),  # the same rows, read side
                "req": Out(stream.Signature(addr_bits)),  # word addresses to read
                "req_next": Out(1),  # req.valid of the next cycle (its flip-flop's input)
                "word": In(stream.Signature(16)),  # the words read, in order
                "digit": Out(stream.Signature(data.StructLayout({"code": 3, "bias": 1}))),
            }
        )

    def elaborate(self, platform):
        m = Module()
        # fetch side: the row's words, from its first, until its n + 1 digits are covered
        f_busy = Signal()
        f_addr = Signal(self.addr_bits)
        # the digits still to cover, less DIGITS_PER_WORD + 1: the request covers the last
        # of them when it is negative, its sign bit alone (the compare with
        # DIGITS_PER_WORD into the done flag, the stream's ready and the next row's load
        # had 7 of the 128-lane ULX3S build's endpoints past 9.3 ns at f3eb1f7, seed 1)
        f_left = Signal(range(-8 - DIGITS_PER_WORD - 1, (1 << self.n_bits) + 8))
        m.d.comb += [self.req.valid.eq(f_busy), self.req.payload.eq(f_addr)]
        # the next row from the queue into registers (its first word, its f_left, its
        # "on"), taken from there: the queue's memory read and the f_left sum into the
        # cursor's load were the deepest logic into f_addr and f_left (17 + 17 of the
        # 128-lane ULX3S build's endpoints past 9.3 ns at 6796aae, seed 2, 10.33 ns).
        # A row waits a cycle more only when the fetch side is idle.
        n_valid = Signal()
        n_word = Signal(self.addr_bits)
        n_left = Signal.like(f_left)
        n_on = Signal()
        # The fetch side's next state is a choice by the grant (a request taken)
        # between two values made of flip-flops: granted, the row's next
        # word, or the next row's first when this request covers the row's end (f_left's
        # sign) and a row is waiting; not granted, the waiting row's first word when
        # idle. The grant, which depends on both cursors, went through the done flag
        # and the load's decision before f_addr's and f_left's choice: the 128-lane
        # ECP5 evaluator's critical path at e7fe268 (seed 3: the other cursor's request
        # through the streamer's grant into f_addr, 10.31 ns, 5 levels)
        granted = self.req.valid & self.req.ready
        load_g = n_valid & f_left[-1] & n_on  # granted, the last request, a row waits
        load_i = ~f_busy & n_valid & n_on  # idle, a row waits
        m.d.sync += [
            f_addr.eq(Mux(granted, Mux(load_g, n_word, f_addr + 1), Mux(load_i, n_word, f_addr))),
            f_left.eq(
                Mux(
                    granted,
                    Mux(load_g, n_left, f_left - DIGITS_PER_WORD),
                    Mux(load_i, n_left, f_left),
                )
            ),
        ]
        f_busy_next = Mux(granted, Mux(f_left[-1], n_valid & n_on, 1), f_busy | (n_valid & n_on))
        m.d.sync += f_busy.eq(f_busy_next)
        m.d.comb += self.req_next.eq(f_busy_next)
        # the waiting row is taken: granted with the request that covers the row's end,
        # or idle
        take = Mux(granted, n_valid & f_left[-1], n_valid & ~f_busy)
        with m.If(take):
            m.d.sync += n_valid.eq(0)
        m.d.comb += self.fcmd.ready.eq(~n_valid | take)
        with m.If(self.fcmd.valid & self.fcmd.ready):
            m.d.sync += [
                n_valid.eq(1),
                n_word.eq(self.fcmd.payload.word),
                # digits of the row from the first word's start: off + n + 1
                n_left.eq(self.fcmd.payload.off + self.fcmd.payload.n - DIGITS_PER_WORD),
                n_on.eq(self.fcmd.payload.on),
            ]

        # read side: walk the digits of the words as they arrive
        r_busy = Signal()
        r_off = Signal(3)
        r_left = Signal(self.n_bits + 1)  # digits left in the row, the bias included
        r_on = Signal()
        word = self.word.payload
        code = Signal(3)
        with m.Switch(r_off):
            for i in range(DIGITS_PER_WORD):
                with m.Case(i):
                    m.d.comb += code.eq(word[3 * i : 3 * i + 3])
        last = r_left == 1
        m.d.comb += [
            self.digit.valid.eq(r_busy & (self.word.valid | ~r_on)),
            self.digit.payload.code.eq(Mux(r_on, code, 0)),
            self.digit.payload.bias.eq(last),
        ]
        taken = self.digit.valid & self.digit.ready
        with m.If(taken):
            m.d.sync += [r_off.eq(r_off + 1), r_left.eq(r_left - 1)]
            with m.If(last):
                m.d.sync += r_busy.eq(0)
        m.d.comb += self.word.ready.eq(
            r_busy & r_on & self.digit.ready & (last | (r_off == DIGITS_PER_WORD - 1))
        )
        with m.If(self.word.ready & self.word.valid & ~last):
            m.d.sync += r_off.eq(0)
        # the next row is taken in the cycle the last digit of this one leaves
        m.d.comb += self.rcmd.ready.eq(~r_busy | (taken & last))
        with m.If(self.rcmd.valid & self.rcmd.ready):
            m.d.sync += [
                r_busy.eq(1),
                r_on.eq(self.rcmd.payload.on),
                r_off.eq(self.rcmd.payload.off),
                r_left.eq(self.rcmd.payload.n + 1),
            ]
        return m


class WeightStreamer(wiring.Component):
    """Digit pairs ``(W[o, k], W[o + 1, k])`` of passes, one pair per cycle.

    Parameters
    ----------
    addr_bits : int
        Width of a weight-memory word address.
    n_bits : int
        Width of a pass's ``n`` (digits per row before the bias digit).
    mem_latency : int
        Cycles from a read request to its word, 1..4.

    Interface attributes
    --------------------
    cmd : In(stream.Signature(pass_layout(addr_bits, n_bits)))
        Passes, in order. A pass is accepted before its first digit is out; the streamer
        fetches ahead, so passes follow each other without a gap.
    cmd_ready_next : Out(1)
        ``cmd.ready`` of the next cycle (``cmd.ready`` is a flip-flop with this input).
    mem_addr : Out(addr_bits), mem_en : Out(1), mem_data : In(16)
        The weight memory's read port: ``mem_data`` holds the word at ``mem_addr``
        ``mem_latency`` cycles after a cycle with ``mem_en`` high.
    o : Out(stream.Signature(StructLayout({"d": ArrayLayout(3, 2), "bias": 1})))
        Per pass ``n + 1`` beats: ``d[0]``, ``d[1]`` the codes of ``W[o, k]`` and
        ``W[o + 1, k]`` (0 if the pass has one row), for ``k = 0..n``; the last beat
        (``k = n``, the bias column) has ``bias`` set.

    Throughput: one beat per cycle once the first words have arrived; each cursor reads
    one word per five digits, so the port is busy two cycles in five.
    """

    def __init__(self, *, addr_bits: int, n_bits: int, mem_latency: int = 2):
        self.addr_bits, self.n_bits, self.mem_latency = addr_bits, n_bits, mem_latency
        self.pass_layout = pass_layout(addr_bits, n_bits)
        super().__init__(
            {
                "cmd": In(stream.Signature(self.pass_layout)),
                "cmd_ready_next": Out(1),
                "mem_addr": Out(addr_bits),
                "mem_en": Out(1),
                "mem_data": In(16),
                "o": Out(
                    stream.Signature(data.StructLayout({"d": data.ArrayLayout(3, 2), "bias": 1}))
                ),
            }
        )

    def elaborate(self, platform):
        m = Module()
        lat = self.mem_latency
        depth = lat + 3  # words in flight or waiting, per cursor
        cursors = []
        word_fifos = []
        for i in range(2):
            cur = _Cursor(self.addr_bits, self.n_bits, depth)
            m.submodules[f"cursor{i}"] = cur
            cursors.append(cur)
            wf = fifo.SyncFIFOBuffered(width=16, depth=depth)
            m.submodules[f"words{i}"] = wf
            word_fifos.append(wf)
            m.d.comb += [
                cur.word.valid.eq(wf.r_rdy),
                cur.word.payload.eq(wf.r_data),
                wf.r_en.eq(cur.word.ready),
            ]

        # Commands go to both sides of both cursors; a command is taken when all four
        # queues take it (each side holds one row at a time, the fetch side runs ahead).
        row_layout = data.StructLayout(
            {"word": self.addr_bits, "off": 3, "n": self.n_bits, "on": 1}
        )
        qs = []
        for i in range(2):
            for side in ("f", "r"):
                q = fifo.SyncFIFO(width=row_layout.size, depth=QUEUE_DEPTH)
                m.submodules[f"{side}cmd{i}"] = q
                qs.append((i, side, q))
        # all_ready: every queue has room for this cycle's push, a flip-flop from the
        # levels of the cycle before alone (level <= depth - 3 then: at most two pushes
        # since, one of them in the stage below). The queues' level compares (the four
        # queues beside the cursors) were the deepest inputs of the sequencer's emit
        # enables (128-lane ULX3S build at 005e676, seed 1); the levels after this
        # cycle's push and pop, compared a cycle ahead, put the sequencer's phase
        # through the push and the cursors' flags through the pops into this flip-flop
        # (the 128-lane ECP5 evaluator's critical path at dace236, 9.70 ns, 7.47 of it
        # routing). The depth is 5, so that the queues refuse no command that depth-2
        # queues with the exact level would take.
        # In two copies: the queues' write enable's, beside them, and the ready's, which
        # the sequencer's emit decision reads (a replica: Yosys keeps the two apart).
        # A push is registered (``stage``, loaded every cycle, and ``staged``) and
        # written into the queues a cycle later, so that their levels and storage take
        # it from flip-flops: the sequencer's phase through the push into the queues'
        # levels was the 128-lane ECP5 evaluator's critical path at 2ac22d9 (seed 1:
        # 8.28 ns, 6.81 of it routing; its only 9 endpoints past 8 ns were the levels).
        # A row reaches its cursor a cycle later: the same cycles where the cursors
        # fetch ahead of the engine (`bench evaluator --lanes 8 --batch 16`: 844,202),
        # 0.003 % more where a pass waits for its words (quantized, per-member inputs:
        # 1,922,154 against 1,922,094).
        all_ready = Signal(init=1)
        cmd_ready = Signal(init=1, attrs={REPLICA_ATTR: 1})
        m.d.comb += self.cmd.ready.eq(cmd_ready)
        room = Cat(q.level <= q.depth - 3 for _, _, q in qs).all()
        m.d.sync += [all_ready.eq(room), cmd_ready.eq(room)]
        m.d.comb += self.cmd_ready_next.eq(room)
        stage = Signal(self.pass_layout, reset_less=True)
        staged = Signal()
        m.d.sync += [stage.eq(self.cmd.payload), staged.eq(self.cmd.valid & all_ready)]
        for i, side, q in qs:
            row = Signal(row_layout, name=f"row_{side}{i}")
            m.d.comb += [
                row.word.eq(stage.word0 if i == 0 else stage.word1),
                row.off.eq(stage.off0 if i == 0 else stage.off1),
                row.n.eq(stage.n),
                row.on.eq(1 if i == 0 else stage.two),
                q.w_data.eq(row.as_value()),
                q.w_en.eq(staged),
            ]
            port = cursors[i].fcmd if side == "f" else cursors[i].rcmd
            m.d.comb += [port.valid.eq(q.r_rdy), port.payload.eq(q.r_data), q.r_en.eq(port.ready)]

        # The read port: cursor requests, alternating when both want it; a request is
        # granted only if its cursor's word FIFO will have room when the word arrives:
        # ``used`` counts the words granted and not yet read from the FIFO (in flight
        # or waiting). The grants are flip-flops, decided a cycle ahead from the next
        # cycle's requests (the cursors' ``req_next``), room (``used`` after this cycle's
        # grant and read, below ``depth``) and turn: they are the ready of both cursors'
        # requests, the port's enable and address choice and the word tags, and as a
        # decision of both cursors' flags they were the deepest logic into the cursors'
        # next-word and next-row registers (111 of the 128-lane ECP5 evaluator's 535
        # endpoints past 8 ns at bd4c05d, seed 3, up to 9.4 ns). Before that the room
        # was the flip-flop: the sum of the in-flight count and the FIFO's level and its
        # compare before the grant had been 8 of the 128-lane ULX3S build's 13
        # endpoints past 10 ns at 5b051d8 (seed 1, 10.37 ns).
        used = [Signal(range(depth + 1), name=f"used{i}") for i in range(2)]
        grant = [Signal(name=f"grant{i}") for i in range(2)]
        turn = Signal()
        turn_next = Mux(grant[0] | grant[1], grant[0], turn)
        m.d.sync += turn.eq(turn_next)
        for i in range(2):
            m.d.comb += cursors[i].req.ready.eq(grant[i])
        want_next = []
        for i in range(2):
            sent = grant[i]
            taken = word_fifos[i].r_en & word_fifos[i].r_rdy
            used_next = Signal.like(used[i], name=f"used_next{i}")
            m.d.comb += used_next.eq(used[i] + sent - taken)
            m.d.sync += used[i].eq(used_next)
            # used_next < depth, with the FIFO's read (``taken``: both cursors' digits
            # and the engine's ready) as the choice between two compares of flip-flops,
            # not an operand of the subtraction before the compare (its path into the
            # grants had 2 of the 128-lane ECP5 evaluator's 66 endpoints past 8 ns at
            # 9fe00a1, seed 3, 9.33 ns)
            room_next = Mux(taken, used[i] + sent <= depth, used[i] + sent < depth)
            want_next.append(cursors[i].req_next & room_next)
        m.d.sync += [
            grant[0].eq(want_next[0] & (~want_next[1] | ~turn_next)),
            grant[1].eq(want_next[1] & (~want_next[0] | turn_next)),
        ]
        m.d.comb += [
            self.mem_en.eq(grant[0] | grant[1]),
            self.mem_addr.eq(Mux(grant[1], cursors[1].req.payload, cursors[0].req.payload)),
        ]
        # delay line of (granted, which) to route the data
        tags = [Signal(2, name=f"tag{j}") for j in range(lat)]
        m.d.sync += tags[0].eq(Cat(grant[0] | grant[1], grant[1]))
        for j in range(1, lat):
            m.d.sync += tags[j].eq(tags[j - 1])
        arrive = tags[-1]
        for i in range(2):
            hit = arrive[0] & (arrive[1] == i)
            m.d.comb += [word_fifos[i].w_en.eq(hit), word_fifos[i].w_data.eq(self.mem_data)]

        # Output: one beat when both cursors have a digit.
        d0, d1 = cursors[0].digit, cursors[1].digit
        both = d0.valid & d1.valid
        m.d.comb += [
            self.o.valid.eq(both),
            self.o.payload.d[0].eq(d0.payload.code),
            self.o.payload.d[1].eq(d1.payload.code),
            self.o.payload.bias.eq(d0.payload.bias),
            d0.ready.eq(both & self.o.ready),
            d1.ready.eq(both & self.o.ready),
        ]
        return m
