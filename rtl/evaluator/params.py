"""Elaboration parameters of the PopulationEvaluator and every width derived from them.

:class:`EvaluatorParams` validates the parameters (a ``ValueError`` naming the parameter
and its range) and derives the widths from their worst cases (spec 9.2), so that every
block of the evaluator sizes its registers from one place. docs/rtl.md lists them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth import Cat
from amaranth.utils import ceil_log2

from ..noise.prng import DIGIT_DISTS
from ..params import check_choice, check_int

#: Most E generators of quantized mode's fill.
MAX_E_GENERATORS = 4
#: Most lanes per write of the low-rank noise banks (6 x 6 bits: a DP16KD's 36-bit word).
MAX_NOISE_WRITE_LANES = 6
#: Most low-rank noise generators (a keyer and two stream cores each)
MAX_NOISE_GENERATORS = 16
#: lanes served by one copy of the activation memory's write address and select
#: (:attr:`EvaluatorParams.act_write_copies`): four block RAM slices of four lanes
ACT_WRITE_LANES = 16
#: lanes from which the evaluator takes its wide forms (:attr:`EvaluatorParams.wide`)
WIDE_LANES = 32

__all__ = ["MODES", "RANKS", "EvaluatorParams", "bits_for"]

RANKS = (1, 4, 16, 64)
MODES = ("lowrank", "quantized")
ACT_MAX = 127
BIAS = 127
SIGMA_SHIFT_MAX = 8
ACT_SHIFT_MAX = 15
MAX_POPULATION = 4096
MAX_STEP = 65534
MARGIN_MAX = 254


def bits_for(bound: int) -> int:
    """Width of a two's-complement register holding every integer in [-bound, bound]."""
    return max(1, bound).bit_length() + 1


def rank_shift(rank: int) -> int:
    """log4(rank): 0, 1, 2, 3 for rank 1, 4, 16, 64."""
    return (rank.bit_length() - 1) // 2


@dataclass(frozen=True)
class EvaluatorParams:
    """The PopulationEvaluator's elaboration parameters (ranges in :meth:`check`).

    Parameters
    ----------
    lanes : int
        Pair-lanes, 1..256. Lane ``j`` of round ``t`` evaluates pair ``t * lanes + j``.
    max_layers : int
        Most weight layers, 1..8 (spec 9.1).
    max_width : int
        Widest layer (inputs, hidden, outputs), 1..1024.
    rank : int
        1, 4, 16 or 64 (spec 3).
    mode : str
        ``"lowrank"`` (default) or ``"quantized"`` (spec 6).
    digits : str
        ``"binomial"`` (default) or ``"uniform"`` (spec 2.5).
    group : int or None
        Lanes per finalizer, 1..lanes; ``None``: up to 8 at ranks 1 and 4, 2 at rank 16,
        1 at rank 64 (a finalizer takes ``max(rank, 4)`` cycles per lane and pass, and
        two ops per lane for a pass that serves both members of a pair (shared inputs,
        low-rank layer 0), so a group of ``32 / max(rank, 4)`` lanes keeps up with passes
        of 64 inputs).
    noise_depth : int or None
        Slots per noise bank, 16..65536; ``None``: enough for ``max_layers`` layers of
        ``max_width`` in the build's mode (quantized mode needs far more: the E slots).
        Smaller values save block RAM; a network whose noise does not fit sets the
        ``noise`` error flag.
    max_batch : int
        Largest batch, 1..65535 (sizes the score).
    mem_latency : int
        Read latency in cycles of the external memories (weights, samples, labels, batch
        indices, scores), 1..4.
    noise_buffers : int
        1 or 2 copies of the noise banks. With 2 the next round's noise is generated
        while the current round runs (no fill between rounds), for twice the noise
        block RAM.
    e_generators : int
        Quantized mode: E generators of the fill, 1..min(4, lanes) (default 1). ``G``
        generators fill ``G`` lanes at once (one keyer, ``G`` LRGEN/LRMUL lanes in
        lockstep, one write of ``G`` lanes' digits per cycle), so a round's fill takes
        about ``1 / G`` of the time, for ``G - 1`` more generators (each a B RAM and a
        PQUANT ROM). Low-rank builds ignore it.
    noise_write_lanes : int
        Low-rank mode: lanes whose noise slots share one write enable of the noise banks,
        1..6 (default 1; at most ``lanes`` are grouped, so that a board's default holds
        for any lane count). The fill writes one lane at a time; with ``G > 1``
        each write also carries the slot of the group's earlier lanes (kept in a staging
        memory of ``6 * (G - 1)`` bits per slot and bank, read asynchronously: LUT RAM)
        so that a bank is written ``6 * G`` bits at a time. On the ECP5, whose block RAM
        has a write enable per 9 bits, 3 lanes (18 bits) fill the byte enables that 6-bit
        lane writes leave a third empty: 22 instead of 32 DP16KD per bank at 128 lanes.
        The iCE40's block RAM has a write mask per bit (and no LUT RAM): keep 1 there.
        Cycles are the same for every value. Quantized builds ignore it.
    noise_generators : int
        Low-rank mode: generators of the noise fill, 1..min(16, lanes) (default 1), 1 or a
        multiple of the noise write group (``min(noise_write_lanes, lanes)``). ``G``
        generators (a keyer and two stream cores each, about 950 ECP5 logic cells) fill
        ``G`` lanes at once in lockstep, each write of the banks carrying their ``G`` slots
        (no staging memory), so a round's fill takes about ``1 / G`` of the time: what a
        single round (population <= 2 lanes) waits for before its first pass. Quantized
        builds ignore it.
    """

    lanes: int = 4
    max_layers: int = 2
    max_width: int = 64
    rank: int = 4
    mode: str = "lowrank"
    digits: str = "binomial"
    group: int | None = None
    noise_depth: int | None = None
    max_batch: int = 1024
    mem_latency: int = 2
    noise_buffers: int = 1
    e_generators: int = 1
    noise_write_lanes: int = 1
    noise_generators: int = 1
    _derived: dict = field(default_factory=dict, compare=False, repr=False)

    def check(self) -> EvaluatorParams:
        check_int("lanes", self.lanes, 1, 256)
        check_int("max_layers", self.max_layers, 1, 8)
        check_int("max_width", self.max_width, 1, 1024)
        check_choice("rank", self.rank, RANKS)
        check_choice("mode", self.mode, MODES)
        check_choice("digits", self.digits, DIGIT_DISTS)
        if self.group is not None:
            check_int("group", self.group, 1, self.lanes)
        if self.noise_depth is not None:
            check_int("noise_depth", self.noise_depth, 16, 65536)
        check_int("max_batch", self.max_batch, 1, 65535)
        check_int("mem_latency", self.mem_latency, 1, 4)
        check_int("noise_buffers", self.noise_buffers, 1, 2)
        check_int("e_generators", self.e_generators, 1, min(MAX_E_GENERATORS, self.lanes))
        check_int("noise_write_lanes", self.noise_write_lanes, 1, MAX_NOISE_WRITE_LANES)
        check_int(
            "noise_generators", self.noise_generators, 1, min(MAX_NOISE_GENERATORS, self.lanes)
        )
        ng, g = self.noise_generators, self.noise_group
        if ng > 1 and ng % g:
            raise ValueError(
                f"noise_generators {ng} must be 1 or a multiple of the noise write group {g} "
                f"(noise_write_lanes, at most lanes)"
            )
        return self

    # -------------------------------------------------------------------- structure
    @property
    def period(self) -> int:
        """Cycles a finalizer spends on one lane's pass (both rows): ``max(rank, 4)``."""
        return max(self.rank, 4)

    @property
    def noise_group(self) -> int:
        """Lanes per write of the low-rank noise banks: ``min(noise_write_lanes, lanes)``
        (1 in quantized mode, whose E generators write the banks)."""
        return 1 if self.mode == "quantized" else min(self.noise_write_lanes, self.lanes)

    @property
    def noise_gens(self) -> int:
        """Generators of the low-rank noise fill (1 in quantized mode)."""
        return 1 if self.mode == "quantized" else self.noise_generators

    @property
    def noise_bank_lanes(self) -> int:
        """Lane fields of a noise bank's word: ``lanes`` padded to whole write groups, or
        with several generators to whole generator groups (their lockstep writes fill a
        group's fields at once)."""
        unit = self.noise_gens if self.noise_gens > 1 else self.noise_group
        return -(-self.lanes // unit) * unit

    @property
    def wide(self) -> bool:
        """The wide builds' forms, for a clock across a large chip: ``lanes >=
        WIDE_LANES`` (32). The sequencer enters a layer from registered copies of layer
        0's and the next layer's constants, its first block loaded outside the emit (the
        128-lane ECP5 evaluator's critical path ran through the layer lookup into every
        layer constant's enable); the pass engine pops its command queue a cycle after
        a take (the take, a decision of the queue head's dependences, had been the
        enable of the queue's output register). Narrow builds lose by them: the
        registers cost the one-lane ULX3S device build its 100 MHz (docs/rtl.md,
        "Schedule")."""
        return self.lanes >= WIDE_LANES

    @property
    def group_lanes(self) -> int:
        if self.group is not None:
            return self.group
        return min(self.lanes, max(1, 32 // self.period))

    @property
    def finalizers(self) -> int:
        return -(-self.lanes // self.group_lanes)

    @property
    def u_passes(self) -> int:
        """u-row passes per member at layer 0 (two u values per pass)."""
        return -(-self.rank // 2)

    @property
    def region_bits(self) -> int:
        """log2 of an activation region's size (at least ``max_width`` entries)."""
        return ceil_log2(self.max_width)

    @property
    def regions(self) -> int:
        """Activation regions per lane: the two members' inputs and hidden layers (one
        hidden region each up to two layers, two from three on)."""
        return 4 if self.max_layers <= 2 else 6

    def hidden_region(self, layer, s):
        """The activation region of the outputs of hidden layer ``layer`` of member sign
        ``s`` (Amaranth values): ``2 + s`` with four regions, ``2 + 2 s + layer % 2``
        with six (the sequencer's input regions and the finalizer's writes agree)."""
        if self.regions == 4:
            return 2 + s
        return 2 + Cat(layer[0], s)

    @property
    def act_depth(self) -> int:
        return self.regions << self.region_bits

    @property
    def act_addr_bits(self) -> int:
        """Bits of an activation memory address."""
        return max(1, ceil_log2(self.act_depth))

    @property
    def act_write_copies(self) -> int:
        """Copies of the activation memory's write address (the finalizer's address and
        write flag registers, and the choice between them and the loader's one
        register): ``ceil(lanes / ACT_WRITE_LANES)``; lane ``j`` takes copy
        ``j * act_write_copies // lanes``."""
        return -(-self.lanes // ACT_WRITE_LANES)

    def noise_slots(self, widths: tuple[int, ...]) -> int:
        """Slots per noise bank a network needs (docs/rtl.md). Quantized mode: the E row
        pairs of every layer, alternating between the banks: ``sum_l ceil(n_{l+1} / 4)
        (n_l + 1)``."""
        n_layers = len(widths) - 1
        if self.mode == "quantized":
            return sum(-(-widths[l + 1] // 4) * (widths[l] + 1) for l in range(n_layers))
        u = -(-self.u_passes // 2) * widths[0] + -(-self.u_passes // 2)
        pairs = 0
        for l in range(n_layers):
            rows = widths[l + 1] + (1 if l < n_layers - 1 else 0)
            pairs += -(-rows // 2)
        return u + pairs * self.rank

    @property
    def noise_bank_depth(self) -> int:
        if self.noise_depth is not None:
            return self.noise_depth
        return self.noise_slots((self.max_width,) * (self.max_layers + 1))

    # ----------------------------------------------------------------------- widths
    @property
    def width_bits(self) -> int:
        """Width of a layer-width port (values 1..max_width)."""
        return ceil_log2(self.max_width + 1)

    @property
    def acc_bits(self) -> int:
        """A lane MAC: ``|sum_{k<n} x[k] W[o,k]| <= 127 * 2 * max_width``; quantized mode
        ``|sum_{k<n} x[k] (W + s E)[o,k] + 127 s E[o,n]| <= 127 * 4 * max_width + 254``
        (spec 9.2: ``W + s E`` in -4..4; the lane adds the bias column's E term)."""
        if self.mode == "quantized":
            return bits_for(ACT_MAX * 4 * self.max_width + 2 * BIAS)
        return bits_for(ACT_MAX * 2 * self.max_width)

    @property
    def u_bits(self) -> int:
        """``|u[c]| <= 127 * 2 * (max_width + 1)`` (inputs and the bias)."""
        return bits_for(ACT_MAX * 2 * (self.max_width + 1))

    @property
    def p_bits(self) -> int:
        """``|p| = |sum_c A[o,c] u[c]| <= 2 * rank * 127 * 2 * (max_width + 1)``."""
        return bits_for(2 * self.rank * ACT_MAX * 2 * (self.max_width + 1))

    @property
    def pert_shift_max(self) -> int:
        return rank_shift(self.rank) + SIGMA_SHIFT_MAX

    @property
    def sum_bits(self) -> int:
        """The finalizer's accumulator before the activation shift, with its rounding
        constant: ``|v + 127 wb + s rshr(p, k)| + 2**14``."""
        base = ACT_MAX * 2 * (self.max_width + 1)
        pert = 2 * self.rank * ACT_MAX * 2 * (self.max_width + 1)
        if self.mode == "quantized":
            pert = base
        return bits_for(base + pert + (1 << (ACT_SHIFT_MAX - 1)) + 1)

    @property
    def score_bits(self) -> int:
        """``|score| <= 254 * max_batch`` (spec 7.1)."""
        return bits_for(2 * ACT_MAX * self.max_batch)

    @property
    def member_bits(self) -> int:
        return ceil_log2(MAX_POPULATION)

    def as_dict(self) -> dict:
        return {
            "lanes": self.lanes,
            "max_layers": self.max_layers,
            "max_width": self.max_width,
            "rank": self.rank,
            "mode": self.mode,
            "digits": self.digits,
            "group": self.group_lanes,
            "noise_depth": self.noise_bank_depth,
            "max_batch": self.max_batch,
            "mem_latency": self.mem_latency,
            "noise_buffers": self.noise_buffers,
            "e_generators": self.e_generators,
            "noise_write_lanes": self.noise_write_lanes,
            "noise_generators": self.noise_generators,
        }
