"""The PopulationEvaluator's architecture in Python: what every memory holds, which value
each lane and finalizer computes, in which order, and how many cycles it takes.

This is not a second golden model: the RTL is checked against ``pentegg.golden``
(``population_forward`` and the spec 7.1 scores). This model states the hardware's
decomposition of the same arithmetic (docs/rtl.md, "PopulationEvaluator"), so that

* tests pin the decomposition to golden (``evaluate`` equals ``population_forward``),
* unit tests of single blocks (the noise fill, the finalizer) have their expected
  memory images and values (``noise_image``, ``lane_values``),
* the benchmark can state the schedule's cycle count next to the simulated one
  (``schedule_cycles``).

Low-rank mode, per member ``m`` (pair ``j``, sign ``s``), layer ``l``, row ``o``, with
``n = fan - 1`` inputs (the bias column is not stored: its term is added by the
finalizer)::

    v        = sum_{k<n} x[k] * W[o, k]                      (a lane MAC, one pass)
    u_0[c]   = 127 * B_0[n, c] + sum_{k<n} x[k] * B_0[k, c]  (u-row passes + finalizer)
    u_l[c]   = 127 * B_l[n, c] + sum_{o'} h_{l-1}[o'] * B_l[o', c]   (finalizer, l >= 1)
    p        = sum_c A_l[o, c] * u_l[c]
    acc      = v + 127 * W[o, n] + s * rshr(p, k)
    h or y   = activate(acc, s_l)                            (spec 5.3)

Quantized mode: ``acc = sum_{k<n} x[k] * (W[o,k] + s E[o,k]) + 127 * (W[o,n] + s E[o,n])``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pentegg.golden import Config, lrgen, lrmul, rshr
from pentegg.golden.fitness import classification_scores
from pentegg.golden.forward import activate

__all__ = [
    "Layout",
    "evaluate",
    "layout",
    "noise_image",
    "schedule",
    "schedule_cycles",
]

BIAS = 127


# ----------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class Layout:
    """Where the noise of one pair lives in the two-digit slots of the noise banks.

    ``u_rows`` passes read slot ``U(q, k)`` = ``(B0[k, 2q], B0[k, 2q+1])``; the finalizer
    reads rows ``F(row, c)`` = ``(A digit, B digit)`` for ``c = 0..r-1``. Row ``-1`` (index
    0 of ``f_rows``) holds the bias row of ``B_0``; layer ``l`` has ``out_l`` rows of
    ``(A_l[o, c], B_{l+1}[o, c])`` and, unless it is the last layer, one more row
    ``(0, B_{l+1}[out_l, c])`` (the bias row of ``B_{l+1}``).
    """

    rank: int
    banks: int  # 1 (rank 1) or 2
    u_passes: int  # ceil(rank / 2)
    n0: int  # inputs of layer 0 (fan - 1)
    f_row_base: tuple[int, ...]  # F row index of each layer's first row (row -1 is 0)
    f_rows: int  # F rows in all
    depth: int  # slots per bank

    def u_slot(self, q: int, k: int) -> tuple[int, int]:
        """(bank, address) of slot U(q, k)."""
        return q % self.banks, (q // self.banks) * self.n0 + k

    def f_slot(self, row: int, c: int) -> tuple[int, int]:
        """(bank, address) of slot F(row, c), ``row`` counted from row -1 = 0."""
        per_bank = self.rank // self.banks
        u_depth = -(-self.u_passes // self.banks) * self.n0
        return c % self.banks, u_depth + row * per_bank + c // self.banks


def layout(layers: tuple[int, ...], rank: int) -> Layout:
    """The noise layout of a network (low-rank mode)."""
    banks = 2 if rank >= 2 else 1
    u_passes = -(-rank // 2)
    n0 = layers[0]
    n_layers = len(layers) - 1
    bases = []
    row = 1  # row 0 is B_0's bias row
    for l in range(n_layers):
        bases.append(row)
        row += layers[l + 1] + (1 if l < n_layers - 1 else 0)
    u_depth = -(-u_passes // banks) * n0
    depth = u_depth + row * (rank // banks)
    return Layout(rank, banks, u_passes, n0, tuple(bases), row, depth)


def noise_image(cfg: Config, step: int, pair: int) -> np.ndarray:
    """Slots of one pair: array (banks, depth, 2) of digits, as the noise fill writes
    them (unused slots are 0)."""
    lay = layout(cfg.layers, cfg.rank)
    img = np.zeros((lay.banks, lay.depth, 2), dtype=np.int8)
    ab = [
        lrgen(cfg.seed, step, 1, l, *cfg.shape(l), cfg.rank, cfg.digits, first_pair=pair)
        for l in range(cfg.n_layers)
    ]
    r = cfg.rank
    b0 = ab[0][1][0]  # (fan0, r)
    for q in range(lay.u_passes):
        for k in range(lay.n0):
            bank, addr = lay.u_slot(q, k)
            img[bank, addr, 0] = b0[k, 2 * q]
            if 2 * q + 1 < r:
                img[bank, addr, 1] = b0[k, 2 * q + 1]
    for c in range(r):
        bank, addr = lay.f_slot(0, c)
        img[bank, addr, 1] = b0[lay.n0, c]
    for l in range(cfg.n_layers):
        a = ab[l][0][0]  # (out, r)
        b_next = ab[l + 1][1][0] if l + 1 < cfg.n_layers else None  # (out + 1, r)
        out = cfg.layers[l + 1]
        rows = out + (1 if b_next is not None else 0)
        for o in range(rows):
            for c in range(r):
                bank, addr = lay.f_slot(lay.f_row_base[l] + o, c)
                if o < out:
                    img[bank, addr, 0] = a[o, c]
                if b_next is not None:
                    img[bank, addr, 1] = b_next[o, c]
    return img


# --------------------------------------------------------------------------- schedule
def schedule(n_layers: int, shared: bool, rank: int) -> list[tuple[str, int, int]]:
    """Blocks of one sample, in the order the lanes run them: ``("U", sign, q)`` u-row
    passes and ``("L", sign, layer)`` layer blocks; sign 0 is member ``2j``, 1 is
    ``2j+1``. Every layer block of a member comes two blocks after the one it depends
    on, so the finalizer drains one while the lanes run the other."""
    blocks: list[tuple[str, int, int]] = []
    for s in (0,) if shared else (0, 1):
        blocks += [("U", s, q) for q in range(-(-rank // 2))]
    for l in range(n_layers):
        blocks += [("L", 0, l), ("L", 1, l)]
    return blocks


def schedule_cycles(cfg: Config, batch: int, lanes: int, shared: bool) -> dict:
    """Lane cycles of one evaluation when nothing stalls: passes of ``n`` cycles, two
    rows per pass; plus the noise fill per round (two slots per cycle)."""
    rounds = -(-cfg.pairs // lanes)
    lay = layout(cfg.layers, cfg.rank)
    per_sample = 0
    for kind, _s, x in schedule(cfg.n_layers, shared, cfg.rank):
        if kind == "U":
            per_sample += cfg.layers[0]
        else:
            per_sample += -(-cfg.layers[x + 1] // 2) * cfg.layers[x]
    fill_pair = 0
    fill_pair += cfg.layers[0] * -(-lay.u_passes // lay.banks)  # B0 rows into U slots
    fill_pair += lay.f_rows * (cfg.rank // lay.banks)  # F rows
    return {
        "rounds": rounds,
        "lane_cycles_per_sample": per_sample,
        "fill_cycles_per_round": fill_pair * min(lanes, cfg.pairs),
        "cycles": rounds * (batch * per_sample + fill_pair * min(lanes, cfg.pairs)),
    }


# ------------------------------------------------------------------------- arithmetic
def _member_lowrank(cfg: Config, w, noise, j: int, s: int, x0: np.ndarray) -> np.ndarray:
    """Logits of member 2j+s for inputs x0 (batch, n0), the hardware's decomposition."""
    sign = 1 - 2 * s
    kk = cfg.pert_shift()
    shifts = cfg.shifts()
    x = x0.astype(np.int64)
    b0 = noise[0][1].astype(np.int64)  # (fan0, r)
    u = x @ b0[:-1] + BIAS * b0[-1]  # u-rows + the STORE ops' bias
    for l in range(cfg.n_layers):
        wl = w[l].astype(np.int64)
        a = noise[l][0].astype(np.int64)  # (out, r)
        v = x @ wl[:, :-1].T  # lane MACs
        p = u @ a.T
        acc = v + BIAS * wl[:, -1] + sign * rshr(p, kk)
        last = l == cfg.n_layers - 1
        h = activate(acc, shifts[l], last)
        if not last:
            b_next = noise[l + 1][1].astype(np.int64)  # (out + 1, r)
            u = BIAS * b_next[-1] + h @ b_next[:-1]  # INIT op, then ACT ops' u_next
        x = h
    return x


def _member_quantized(cfg: Config, w, noise, j: int, s: int, x0: np.ndarray) -> np.ndarray:
    sign = 1 - 2 * s
    shifts = cfg.shifts()
    x = x0.astype(np.int64)
    for l in range(cfg.n_layers):
        a, b = noise[l]
        e = lrmul(a, b, cfg.pert_shift()).astype(np.int64)
        v = w[l].astype(np.int64) + sign * e  # digits in [-4, 4]
        acc = x @ v[:, :-1].T + BIAS * v[:, -1]
        x = activate(acc, shifts[l], l == cfg.n_layers - 1)
    return x


def evaluate(cfg: Config, weights, step: int, x, y=None):
    """Every member's logits ``(population, batch, classes)`` (and, with labels ``y``,
    the spec 7.1 scores), computed member by member through the hardware's
    decomposition. ``x`` is ``(batch, n0)`` (shared) or ``(population, batch, n0)``."""
    x = np.asarray(x)
    out = []
    for j in range(cfg.pairs):
        noise = [
            tuple(
                t[0]
                for t in lrgen(
                    cfg.seed, step, 1, l, *cfg.shape(l), cfg.rank, cfg.digits, first_pair=j
                )
            )
            for l in range(cfg.n_layers)
        ]
        for s in (0, 1):
            xm = x if x.ndim == 2 else x[2 * j + s]
            member = _member_lowrank if cfg.mode == "lowrank" else _member_quantized
            out.append(member(cfg, weights, noise, j, s, xm))
    logits = np.stack(out).astype(np.int8)
    if y is None:
        return logits
    return logits, classification_scores(logits, y, cfg.margin)
