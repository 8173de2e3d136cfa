"""Device: the Accelerator behind the host link, a byte stream in and one out.

::

    rx --> LinkEngine --cmd--> StreamRegister --> Accelerator --busy, error--> LEDs
    tx <--            <--rsp-- StreamRegister <--

The byte streams are what a UART (or, in simulation, a pipe) carries; the LinkEngine
(rtl/link/engine.py) checks every frame and turns it into the Accelerator's command
words. ``RESET`` resets the Accelerator's registers (the memories keep their contents):
the engine's pulse, or the ``reset`` input (a board's power-on reset), goes through a
flip-flop here to the Accelerator's ``reset``, which takes it through a flip-flop per
block (rtl/reset.py). ``reset`` also resets the engine, through a flip-flop of its own.
INFO is built here from the Accelerator's parameters.
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ...golden import SPEC_VERSION
from ..accelerator import Accelerator
from ..params import check_int
from ..reset import add_with_reset_leaves
from .engine import LinkEngine, check_frame_bytes
from .pipe import StreamRegister
from .protocol import INFO_CHOICES, INFO_FIELDS, VERSION

__all__ = ["INFO_MAGIC", "Device", "info_words"]

#: INFO's first word, "PEGG".
INFO_MAGIC = 0x5045_4747


def _spec_version() -> int:
    major, minor = (int(x) for x in SPEC_VERSION.split("."))
    return major << 16 | minor


def info_words(accel: Accelerator, *, frame_bytes: int, clock_hz: int, baud: int) -> list[int]:
    """INFO's words (``INFO_FIELDS`` order) for ``accel`` and the link's parameters."""
    p = accel.params
    values = {
        "magic": INFO_MAGIC,
        "protocol": VERSION,
        "spec": _spec_version(),
        "lanes": accel.lanes,
        "max_layers": accel.max_layers,
        "max_width": accel.max_width,
        "rank": p.rank,
        "mode": INFO_CHOICES["mode"].index(p.mode),
        "digits": INFO_CHOICES["digits"].index(p.digits),
        "update": INFO_CHOICES["update"].index(accel.update),
        "latent_bits": accel.latent_bits,
        "max_population": accel.max_population,
        "max_batch": p.max_batch,
        "sample_bytes": accel.depths["samples"],
        "label_words": accel.depths["labels"],
        "batch_words": accel.depths["batch"],
        "frame_bytes": frame_bytes,
        "clock_hz": clock_hz,
        "baud": baud,
        "member_bytes": accel.depths["member_x"],
        "logit_bytes": accel.depths["logits"],
    }
    assert set(values) == set(INFO_FIELDS)
    return [values[name] for name in INFO_FIELDS]


class Device(wiring.Component):
    """The LinkEngine and the Accelerator (module docstring).

    Parameters
    ----------
    frame_bytes : int
        The link's frame buffer, a power of two, 256..65536 (docs/protocol.md, "Sizes").
    clock_hz : int
        The core clock, reported by INFO; 0 in simulation (0..10**9).
    baud : int
        The UART's rate, reported by INFO; 0 without a UART (0..10**8).
    **accel_kwargs
        The Accelerator's parameters (rtl/accelerator.py).

    Interface attributes
    --------------------
    rx : In(stream.Signature(8)), tx : Out(stream.Signature(8))
        Request bytes in, response bytes out (COBS frames ended by ``0x00``).
    reset : In(1)
        A synchronous reset of the engine and the Accelerator (a board's power-on
        reset); the domain's reset, where there is one, does the same.
    busy : Out(1), error : Out(1)
        The Accelerator runs; the status register's error bit.
    """

    def __init__(
        self, *, frame_bytes: int = 2048, clock_hz: int = 0, baud: int = 0, **accel_kwargs
    ):
        self.frame_bytes = check_frame_bytes(frame_bytes)
        self.clock_hz = check_int("clock_hz", clock_hz, 0, 10**9)
        self.baud = check_int("baud", baud, 0, 10**8)
        self.accel = Accelerator(**accel_kwargs)
        self.accel._MustUse__silence = True  # elaborated by elaborate()
        self.info = info_words(self.accel, frame_bytes=frame_bytes, clock_hz=clock_hz, baud=baud)
        self.engine = LinkEngine(
            frame_bytes=frame_bytes,
            memories=self.accel.host_memories,
            max_layers=self.accel.max_layers,
            info=self.info,
        )
        self.engine._MustUse__silence = True
        super().__init__(
            {
                "rx": In(stream.Signature(8)),
                "tx": Out(stream.Signature(8)),
                "reset": In(1),
                "busy": Out(1),
                "error": Out(1),
            }
        )

    def elaborate(self, platform):
        m = Module()
        eng, acc = self.engine, self.accel
        add_with_reset_leaves(m, self.reset, engine=eng)
        # RESET reaches the Accelerator's blocks two cycles after the engine's pulse (the
        # engine is then sending the response): a flip-flop here, then the block's own.
        # Only the control state has a reset: the datapath's registers are reset-less
        # (docs/rtl.md, "RESET's reach"); a reset over every flip-flop was the 64-lane
        # ULX3S build's critical path at 073cdd7 and d24e2a5, and one net from the
        # power-on reset to every control register the 128-lane build's at 62a9b1e
        rst = Signal(reset_less=True)
        m.d.sync += rst.eq(eng.accel_reset | self.reset)
        m.submodules.accel = acc
        m.d.comb += acc.reset.eq(rst)
        wiring.connect(m, wiring.flipped(self.rx), eng.rx)
        wiring.connect(m, eng.tx, wiring.flipped(self.tx))
        # the command and response words pass a register stage each way (rtl/link/pipe.py)
        m.submodules.cmd_reg = cmd_reg = StreamRegister(32)
        m.submodules.rsp_reg = rsp_reg = StreamRegister(32)
        wiring.connect(m, eng.cmd, cmd_reg.i)
        wiring.connect(m, cmd_reg.o, acc.cmd)
        wiring.connect(m, acc.rsp, rsp_reg.i)
        wiring.connect(m, rsp_reg.o, eng.rsp)
        m.d.comb += [eng.busy.eq(acc.busy), self.busy.eq(acc.busy), self.error.eq(acc.error)]
        return m
