"""Reset tree: a synchronous reset that reaches each block through a flip-flop of its own.

A reset request that drives every control register of a large design is one net with
thousands of loads spread over the chip: on the 128-lane ULX3S build it was the critical
path (the power-on reset's flip-flop, an OR with RESET, then across the chip into the
control registers' LSR: 22.9 ns, 21.5 of it routing, at 62a9b1e; docs/boards.md). The
tree gives each block a *leaf*, a flip-flop that copies the request one cycle later and
drives only that block's registers (through a ``ResetInserter``), so the placer can put
the leaf beside its block and each hop has a whole cycle.

The leaves carry :data:`~pentegg.rtl.evaluator.pass_engine.REPLICA_ATTR`: Yosys's
``opt_merge`` would merge them back into one flip-flop (same input), and every synthesis
flow keeps them (``rtl/synth.py``). A leaf is reset-less and starts low: a block is not
in reset in the first cycle of a simulation (a command there would be lost); on a board
the power-on reset is held for many cycles anyway.

Latency: a block sees the request one cycle after it; the request must therefore be
held at least one cycle (a pulse of one cycle resets every block, one cycle later).
"""

from __future__ import annotations

from amaranth import Module, ResetInserter, Signal, Value

from .evaluator.pass_engine import REPLICA_ATTR

__all__ = ["add_with_reset_leaves", "reset_leaf"]


def reset_leaf(m: Module, rst: Value, name: str) -> Signal:
    """A leaf of the tree: a reset-less flip-flop (``rst_<name>``, initially 0) that
    takes ``rst`` every cycle, marked as a replica so that synthesis keeps it."""
    leaf = Signal(name=f"rst_{name}", reset_less=True, attrs={REPLICA_ATTR: 1})
    m.d.sync += leaf.eq(rst)
    return leaf


def add_with_reset_leaves(m: Module, rst: Value, **blocks) -> None:
    """Add each of ``blocks`` (name: elaboratable) to ``m`` as submodule ``name``, reset
    (its registers in domain ``sync`` set to their initial values) by a leaf of its own
    when ``rst`` was high the cycle before, besides by the domain's reset if it has one."""
    for name, block in blocks.items():
        m.submodules[name] = ResetInserter(reset_leaf(m, rst, name))(block)
