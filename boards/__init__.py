"""pentegg.boards: the tops of the supported FPGA boards (docs/boards.md).

:func:`boards` maps ``pentegg build --board`` names to :class:`~.common.Board` records;
importing it needs Amaranth and amaranth-boards (the ``hw`` extra).
"""

from __future__ import annotations

#: the board names, without importing Amaranth (the CLI's choices)
BOARD_NAMES = ("icebreaker", "ulx3s-85f")


def boards():
    """``{name: Board}`` of every supported board."""
    from .icebreaker import BOARD as ICEBREAKER
    from .ulx3s import BOARD as ULX3S

    return {b.name: b for b in (ICEBREAKER, ULX3S)}
