"""``pentegg info``: the spec version and every default parameter."""

from __future__ import annotations

import json
from dataclasses import fields


def register(sub) -> None:
    p = sub.add_parser(
        "info",
        help="print the spec version and every default parameter",
        description="Print the spec version, the golden model's default "
        "parameters with their valid ranges, and the derived widths.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


RANGES = {
    "layers": "2..9 widths, each 1..4096",
    "population": "even, 2..4096",
    "rank": "1, 4, 16, 64",
    "mode": "lowrank | quantized",
    "digits": "binomial | uniform",
    "sigma_shift": "0..8",
    "act_shifts": "one per layer, 0..15 (default ceil(log2(fan)/2))",
    "shaping": "rank | sign",
    "update": "latent | pentary",
    "tau": "0..4095 (Q4); default 16 latent, 96/28 pentary lowrank/quantized",
    "latent_bits": "3..8",
    "latent_shift": "0..q_max with 3*2^q <= 2*(2^(latent_bits-1)-1)",
    "margin": "1..254",
    "init": "random | zero",
    "seed": "0..4294967295",
    "acc_bits": "16..48",
}


def run(args) -> int:
    from . import __version__
    from .golden import SPEC_VERSION, Config
    from .golden.prng import MAX_STEP

    cfg = Config().validate()
    defaults = {f.name: getattr(cfg, f.name) for f in fields(Config)}
    defaults["act_shifts"] = list(cfg.shifts())
    defaults["layers"] = list(cfg.layers)
    defaults["tau"] = cfg.tau_q4()
    if args.json:
        print(
            json.dumps(
                {
                    "pentegg": __version__,
                    "spec": SPEC_VERSION,
                    "defaults": defaults,
                    "ranges": RANGES,
                    "max_step": MAX_STEP,
                    "widths": cfg.widths(),
                }
            )
        )
        return 0
    print(f"pentegg {__version__}, spec {SPEC_VERSION} (docs/spec.md)")
    print("default parameters (spec 9.1):")
    w = max(len(k) for k in defaults)
    for k, v in defaults.items():
        print(f"  {k:<{w}}  {v!s:<16} range {RANGES[k]}")
    print(  # --steps: a run's length; its steps are numbered 0..MAX_STEP (spec 2.3)
        f"  {'steps':<{w}}  {'':<16} range 1..{MAX_STEP + 1} (a run's steps; step "
        f"indices 0..{MAX_STEP}, spec 2.3)"
    )
    print(f"derived widths for layers {tuple(cfg.layers)} (bits, per layer, spec 9.2):")
    for k, v in cfg.widths().items():
        print(f"  {k:<{w}}  {v}")
    return 0
