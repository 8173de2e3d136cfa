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
    "e_image",
    "e_slot",
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
    """Where the noise of one pair lives in the two noise banks (low-rank mode). Every
    slot holds two digits.

    * ``U(q, k)``, bank ``q % 2``, address ``(q // 2) * n0 + k``: ``(B0[k, 2q], B0[k, 2q+1])``,
      read by the lanes in u-row pass ``q``;
    * ``Ub(q)``, bank ``q % 2``, address ``ub_base + q // 2``: ``(B0[n0, 2q], B0[n0, 2q+1])``,
      the bias row of ``B_0``, read by the finalizer with pass ``q``'s results;
    * ``F(l, t, c)``, address ``f_base + (pair_base[l] + t) * r + c`` in both banks: bank 0
      ``(A_l[2t, c], A_l[2t+1, c])``, bank 1 ``(B_{l+1}[2t, c], B_{l+1}[2t+1, c])`` (rows of
      ``B_{l+1}`` up to its bias row ``out_l``; zero in the last layer), read by the
      finalizer for the pass of rows ``2t, 2t+1``.
    """

    rank: int
    u_passes: int  # ceil(rank / 2)
    n0: int  # inputs of layer 0 (fan - 1)
    ub_base: int
    f_base: int
    pair_base: tuple[int, ...]  # first row pair of each layer
    row_pairs: tuple[int, ...]  # row pairs of each layer
    depth: int  # slots per bank

    def u_slot(self, q: int, k: int) -> tuple[int, int]:
        """(bank, address) of slot U(q, k)."""
        return q % 2, (q // 2) * self.n0 + k

    def ub_slot(self, q: int) -> tuple[int, int]:
        return q % 2, self.ub_base + q // 2

    def f_addr(self, l: int, t: int, c: int) -> int:
        """Address of slot F(l, t, c) (the same in both banks)."""
        return self.f_base + (self.pair_base[l] + t) * self.rank + c


def layout(layers: tuple[int, ...], rank: int) -> Layout:
    """The noise layout of a network (low-rank mode)."""
    u_passes = -(-rank // 2)
    n0 = layers[0]
    n_layers = len(layers) - 1
    ub_base = -(-u_passes // 2) * n0
    f_base = ub_base + -(-u_passes // 2)
    bases, pairs, total = [], [], 0
    for l in range(n_layers):
        rows = layers[l + 1] + (1 if l < n_layers - 1 else 0)
        bases.append(total)
        pairs.append(-(-rows // 2))
        total += pairs[-1]
    return Layout(
        rank, u_passes, n0, ub_base, f_base, tuple(bases), tuple(pairs), f_base + total * rank
    )


def noise_image(cfg: Config, step: int, pair: int) -> np.ndarray:
    """Slots of one pair: array (2 banks, depth, 2 digits), as the noise fill writes them
    (unused slots and digits are 0)."""
    lay = layout(cfg.layers, cfg.rank)
    img = np.zeros((2, lay.depth, 2), dtype=np.int8)
    ab = [
        tuple(
            t[0]
            for t in lrgen(
                cfg.seed, step, 1, l, *cfg.shape(l), cfg.rank, cfg.digits, first_pair=pair
            )
        )
        for l in range(cfg.n_layers)
    ]
    r = cfg.rank
    b0 = ab[0][1]  # (fan0, r)
    for q in range(lay.u_passes):
        cols = [c for c in (2 * q, 2 * q + 1) if c < r]
        for k in range(lay.n0):
            bank, addr = lay.u_slot(q, k)
            img[bank, addr, : len(cols)] = b0[k, cols]
        bank, addr = lay.ub_slot(q)
        img[bank, addr, : len(cols)] = b0[lay.n0, cols]
    for l in range(cfg.n_layers):
        a = ab[l][0]  # (out, r)
        b_next = ab[l + 1][1] if l + 1 < cfg.n_layers else np.zeros((0, r), np.int8)
        for t in range(lay.row_pairs[l]):
            for c in range(r):
                addr = lay.f_addr(l, t, c)
                for i, o in enumerate((2 * t, 2 * t + 1)):
                    if o < len(a):
                        img[0, addr, i] = a[o, c]
                    if o < len(b_next):
                        img[1, addr, i] = b_next[o, c]
    return img


def e_slot(layers: tuple[int, ...], l: int, i: int, k: int) -> tuple[int, int, int]:
    """Quantized mode: (bank, address, digit) of ``E_l[i, k]`` in a lane's noise slots:
    slot ``E(l, t, k)`` (``t = i // 2``) in bank ``t % 2`` at ``e_base_l + (t // 2) *
    fan_l + k``, digit ``i % 2``; ``e_base_l = sum_{l' < l} ceil(n_{l'+1} / 4) fan_{l'}``."""
    base = sum(-(-layers[j + 1] // 4) * (layers[j] + 1) for j in range(l))
    t = i // 2
    return t % 2, base + (t // 2) * (layers[l] + 1) + k, i % 2


def e_image(cfg: Config, step: int, pair: int) -> tuple[np.ndarray, np.ndarray]:
    """Quantized mode: the E slots of one pair as EFill writes them, array (2 banks,
    depth, 2 digits), and which digits are written (rows past ``out`` are not).
    ``E_l = lrmul(A_l, B_l, cfg.pert_shift())`` of golden's LRGEN, i.e. ``Noise.E``."""
    depth = sum(-(-cfg.layers[j + 1] // 4) * (cfg.layers[j] + 1) for j in range(cfg.n_layers))
    img = np.zeros((2, depth, 2), dtype=np.int8)
    written = np.zeros((2, depth, 2), dtype=bool)
    for l in range(cfg.n_layers):
        a, b = lrgen(cfg.seed, step, 1, l, *cfg.shape(l), cfg.rank, cfg.digits, first_pair=pair)
        e = lrmul(a[0], b[0], cfg.pert_shift())
        for i in range(e.shape[0]):
            for k in range(e.shape[1]):
                bank, addr, d = e_slot(cfg.layers, l, i, k)
                img[bank, addr, d] = e[i, k]
                written[bank, addr, d] = True
    return img, written


# --------------------------------------------------------------------------- schedule
#: The sign of a layer block that serves both members of the pair.
BOTH = 2


def schedule(
    n_layers: int, shared: bool, rank: int, lowrank: bool = True
) -> list[tuple[str, int, int]]:
    """Blocks of one sample, in the order the lanes run them: ``("U", sign, q)`` u-row
    passes and ``("L", sign, layer)`` layer blocks; sign 0 is member ``2j``, 1 is
    ``2j+1``. Every layer block of a member comes two blocks after the one it depends
    on, so the finalizer drains one while the lanes run the other; but with shared
    inputs in low-rank mode layer 0 is one block for both members (sign ``BOTH``: the
    same ``x . W^T``, the finalizer makes both members' outputs from it), and member
    ``2j``'s layer 1 comes right after it."""
    blocks: list[tuple[str, int, int]] = []
    for s in (0,) if shared else (0, 1):
        blocks += [("U", s, q) for q in range(-(-rank // 2))]
    for l in range(n_layers):
        if l == 0 and shared and lowrank:
            blocks.append(("L", BOTH, 0))
        else:
            blocks += [("L", 0, l), ("L", 1, l)]
    return blocks


def schedule_cycles(cfg: Config, batch: int, lanes: int, shared: bool, generators: int = 1) -> dict:
    """Lane cycles of one evaluation when nothing stalls: passes of ``n`` cycles, two
    rows per pass; plus the noise fill per round (two slots per cycle, for ``generators``
    lanes at once)."""
    rounds = -(-cfg.pairs // lanes)
    lay = layout(cfg.layers, cfg.rank)
    per_sample = 0
    for kind, _s, x in schedule(cfg.n_layers, shared, cfg.rank, cfg.mode == "lowrank"):
        if kind == "U":
            per_sample += cfg.layers[0]
        else:
            per_sample += -(-cfg.layers[x + 1] // 2) * cfg.layers[x]
    # the fill writes one slot per bank and cycle: a row of B0 gives u_passes slots, a
    # row pair of A_l and B_{l+1} gives r slots in each bank
    fill_pair = (cfg.layers[0] + 1) * -(-lay.u_passes // 2) + sum(lay.row_pairs) * cfg.rank
    fill = fill_pair * -(-min(lanes, cfg.pairs) // generators)
    return {
        "rounds": rounds,
        "lane_cycles_per_sample": per_sample,
        "fill_cycles_per_round": fill,
        "cycles": rounds * (batch * per_sample + fill),
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
