"""Spec section 9: parameters, their valid ranges and the derived widths.

A :class:`Config` is immutable; :meth:`Config.validate` raises :class:`ConfigError`
naming the parameter and its allowed range. Derived quantities (activation shifts,
worst-case accumulator bounds and widths) are methods so they cannot go stale.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from .arith import bits_for
from .prng import DIGIT_DISTS, MAX_LAYERS, MAX_PAIRS, MAX_STEP

MODES = ("lowrank", "quantized")
SHAPINGS = ("rank", "sign")
UPDATES = ("latent", "pentary")
INITS = ("random", "zero")
RANKS = (1, 4, 16, 64)
ACT_MAX = 127
BIAS_INPUT = 127
MAX_WIDTH = 4096
DEFAULT_TAU_LATENT = 16
DEFAULT_TAU_PENTARY = {"lowrank": 96, "quantized": 28}


class ConfigError(ValueError):
    """A parameter outside its valid range."""


def _default_shift(fan: int) -> int:
    """Default activation shift of a layer with ``fan`` inputs: ceil(log2(fan) / 2)."""
    return ((fan - 1).bit_length() + 1) // 2


@dataclass(frozen=True)
class Config:
    """Model and training parameters (spec section 9 lists ranges and defaults)."""

    layers: tuple[int, ...] = (64, 64, 10)
    population: int = 256
    rank: int = 4
    mode: str = "lowrank"
    digits: str = "binomial"
    sigma_shift: int = 1
    act_shifts: tuple[int, ...] | None = None
    shaping: str = "rank"
    update: str = "latent"
    tau: int | None = None
    latent_bits: int = 8
    latent_shift: int = 3
    margin: int = 32
    init: str = "zero"
    seed: int = 0
    acc_bits: int = 32

    # ---------------------------------------------------------------- derived
    @property
    def n_layers(self) -> int:
        return len(self.layers) - 1

    @property
    def pairs(self) -> int:
        return self.population // 2

    def shape(self, l: int) -> tuple[int, int]:
        """``(out, fan)`` of weight matrix ``l``; ``fan`` counts the bias column."""
        return self.layers[l + 1], self.layers[l] + 1

    def shifts(self) -> tuple[int, ...]:
        """Activation shift per layer (explicit, or the default ceil(log2(fan)/2))."""
        if self.act_shifts is not None:
            return tuple(self.act_shifts)
        return tuple(_default_shift(self.shape(l)[1]) for l in range(self.n_layers))

    def pert_shift(self) -> int:
        """Right shift applied to the low-rank product: log4(r) + sigma_shift."""
        from .lowrank import rank_shift

        return rank_shift(self.rank) + self.sigma_shift

    def tau_q4(self) -> int:
        """Significance threshold multiplier (explicit, or the default of spec 8.2:
        16 for the latent update; 96 low-rank / 28 quantized for the pentary update)."""
        if self.tau is not None:
            return self.tau
        if self.update == "latent":
            return DEFAULT_TAU_LATENT
        return DEFAULT_TAU_PENTARY[self.mode]

    def latent_max(self) -> int:
        return (1 << (self.latent_bits - 1)) - 1

    def acc_bound(self, l: int) -> int:
        """Worst-case |accumulator| of layer ``l`` before the activation shift.

        Base ``x.W^T`` is at most ``127 * 2 * fan``. The perturbation adds at most
        ``127 * 2 * fan`` (quantized, ``|E| <= 2``) or
        ``rshr(127 * 2 * fan * 2 * r, k)`` (low-rank, ``|A.B^T| <= 4r``).
        """
        _, fan = self.shape(l)
        base = ACT_MAX * 2 * fan
        if self.mode == "quantized":
            return 2 * base
        pert = base * 2 * self.rank
        k = self.pert_shift()
        return base + ((pert + ((1 << (k - 1)) if k else 0)) >> k)

    def pert_product_bound(self, l: int) -> int:
        """Worst-case |(x.B).A^T| of layer ``l`` in low-rank mode (before the shift)."""
        _, fan = self.shape(l)
        return ACT_MAX * 2 * fan * 2 * self.rank

    def engine_bound(self) -> int:
        """Largest magnitude an intermediate of the forward pass can reach, rounding
        constants included (picks the exact float dtype of golden.forward)."""
        b = 0
        for l, s in enumerate(self.shifts()):
            b = max(b, self.acc_bound(l) + (1 << s))
            if self.mode == "lowrank":
                b = max(b, self.pert_product_bound(l) + (1 << self.pert_shift()))
        return b

    def z_bound(self, l: int) -> int:
        """Worst-case |Z| of layer ``l``: pairs * max|g| * max|E|."""
        gmax = 2 * (self.population - 1) if self.shaping == "rank" else 1
        emax = 2 if self.mode == "quantized" else 4 * self.rank
        return self.pairs * gmax * emax

    def widths(self) -> dict[str, list[int]]:
        """Two's-complement widths of the accumulators, from the worst cases."""
        out = {
            "acc": [bits_for(-self.acc_bound(l), self.acc_bound(l)) for l in range(self.n_layers)],
            "z": [bits_for(-self.z_bound(l), self.z_bound(l)) for l in range(self.n_layers)],
        }
        if self.mode == "lowrank":
            out["pert_product"] = [
                bits_for(-self.pert_product_bound(l), self.pert_product_bound(l))
                for l in range(self.n_layers)
            ]
        return out

    # ------------------------------------------------------------- validation
    def validate(self) -> Config:
        """Raise :class:`ConfigError` naming the first parameter out of range."""

        def need(ok: bool, name: str, allowed: str) -> None:
            if not ok:
                raise ConfigError(f"{name}={getattr(self, name)!r} out of range: allowed {allowed}")

        need(
            isinstance(self.layers, tuple) and 2 <= len(self.layers) <= MAX_LAYERS + 1,
            "layers",
            f"a tuple of 2..{MAX_LAYERS + 1} widths (1..{MAX_LAYERS} weight layers)",
        )
        need(
            all(isinstance(w, int) and 1 <= w <= MAX_WIDTH for w in self.layers),
            "layers",
            f"every width in 1..{MAX_WIDTH}",
        )
        need(
            isinstance(self.population, int)
            and self.population % 2 == 0
            and 2 <= self.population <= 2 * MAX_PAIRS,
            "population",
            f"an even number in 2..{2 * MAX_PAIRS}",
        )
        need(self.rank in RANKS, "rank", f"one of {RANKS}")
        need(self.mode in MODES, "mode", f"one of {MODES}")
        need(self.digits in DIGIT_DISTS, "digits", f"one of {DIGIT_DISTS}")
        need(
            isinstance(self.sigma_shift, int) and 0 <= self.sigma_shift <= 8, "sigma_shift", "0..8"
        )
        if self.act_shifts is not None:
            need(
                isinstance(self.act_shifts, tuple)
                and len(self.act_shifts) == self.n_layers
                and all(isinstance(s, int) and 0 <= s <= 15 for s in self.act_shifts),
                "act_shifts",
                f"{self.n_layers} shifts, each 0..15",
            )
        need(self.shaping in SHAPINGS, "shaping", f"one of {SHAPINGS}")
        need(self.update in UPDATES, "update", f"one of {UPDATES}")
        need(
            self.tau is None or (isinstance(self.tau, int) and 0 <= self.tau <= 4095),
            "tau",
            "0..4095 (Q4)",
        )
        need(
            isinstance(self.latent_bits, int) and 3 <= self.latent_bits <= 8, "latent_bits", "3..8"
        )
        qmax = max(q for q in range(8) if 3 << q <= 2 * self.latent_max())
        need(
            isinstance(self.latent_shift, int) and 0 <= self.latent_shift <= qmax,
            "latent_shift",
            f"0..{qmax} (level 2, |V| >= 1.5 * 2**q, must be reachable)",
        )
        need(isinstance(self.margin, int) and 1 <= self.margin <= 254, "margin", "1..254")
        need(self.init in INITS, "init", f"one of {INITS}")
        need(isinstance(self.seed, int) and 0 <= self.seed < 1 << 32, "seed", "0..2**32-1")
        need(isinstance(self.acc_bits, int) and 16 <= self.acc_bits <= 48, "acc_bits", "16..48")
        for l in range(self.n_layers):
            for kind, w in self.widths().items():
                if w[l] > self.acc_bits:
                    raise ConfigError(
                        f"acc_bits={self.acc_bits} out of range: layer {l} ({kind}) needs "
                        f"{w[l]} bits for its worst case; raise acc_bits or shrink the "
                        f"layer widths, rank or population"
                    )
        return self

    # --------------------------------------------------------------- (de)serialise
    def to_dict(self) -> dict:
        d = asdict(self)
        d["layers"] = list(self.layers)
        d["act_shifts"] = None if self.act_shifts is None else list(self.act_shifts)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Config:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown config keys: {', '.join(sorted(unknown))}")
        d = dict(d)
        if "layers" in d:
            d["layers"] = tuple(int(w) for w in d["layers"])
        if d.get("act_shifts") is not None:
            d["act_shifts"] = tuple(int(s) for s in d["act_shifts"])
        return cls(**d).validate()

    def replace(self, **kw) -> Config:
        if "layers" in kw:
            kw["layers"] = tuple(kw["layers"])
        if kw.get("act_shifts") is not None:
            kw["act_shifts"] = tuple(kw["act_shifts"])
        return replace(self, **kw)


__all__ = ["MAX_STEP", "Config", "ConfigError"]
