"""pentegg.golden: the NumPy golden model of Pentary-EGGROLL.

This package is docs/spec.md in code: one module per spec section, the spec's names.

Public API::

    from pentegg.golden import Config, init_state, es_step, es_step_classify, accuracy
    cfg = Config(layers=(64, 64, 10), population=256, seed=1).validate()
    state = init_state(cfg)
    state, info = es_step_classify(state, x_batch, y_batch)   # x: int8 in [-127, 127]
    accuracy(state, x_test, y_test)
    save_state("run.pegg", state); state, meta = load_state("run.pegg")

All arithmetic is integer; the same configuration, seed and data give the same bits.
"""

from .arith import bits_for, exact_matmul, isqrt, pquant, rshr, sat
from .checkpoint import StateFileError, decode_state, load_state, save_state
from .config import Config, ConfigError
from .digit import DigitRangeError, decode, encode, pack, packed_bytes, unpack
from .fitness import centered_ranks, classification_scores, shape
from .forward import (
    InputError,
    central_forward,
    lowrank_term,
    member_forward_materialised,
    population_forward,
)
from .lowrank import Noise, lrgen, lrmul, rank_shift
from .model import (
    StepInfo,
    TrainState,
    accuracy,
    es_step,
    es_step_classify,
    init_state,
    make_noise,
    predict,
)
from .prng import (
    mix32,
    run_key,
    stream_digits,
    stream_key,
    stream_state,
    stream_words,
    words_to_digits,
    xs32,
)
from .update import accumulate_z, apply_latent, apply_pentary, moves, threshold

SPEC_VERSION = "1.0"


def weights_sha256(state: TrainState) -> str:
    """SHA-256 of the weights in the spec's storage format (spec 1.4)."""
    import hashlib

    return hashlib.sha256(packed_bytes(state.weights)).hexdigest()


__all__ = [
    "SPEC_VERSION",
    "Config",
    "ConfigError",
    "DigitRangeError",
    "InputError",
    "Noise",
    "StateFileError",
    "StepInfo",
    "TrainState",
    "accumulate_z",
    "accuracy",
    "apply_latent",
    "apply_pentary",
    "bits_for",
    "centered_ranks",
    "central_forward",
    "classification_scores",
    "decode",
    "decode_state",
    "encode",
    "es_step",
    "es_step_classify",
    "exact_matmul",
    "init_state",
    "isqrt",
    "load_state",
    "lowrank_term",
    "lrgen",
    "lrmul",
    "make_noise",
    "member_forward_materialised",
    "mix32",
    "moves",
    "pack",
    "packed_bytes",
    "population_forward",
    "pquant",
    "predict",
    "rank_shift",
    "rshr",
    "run_key",
    "sat",
    "save_state",
    "shape",
    "stream_digits",
    "stream_key",
    "stream_state",
    "stream_words",
    "threshold",
    "unpack",
    "weights_sha256",
    "words_to_digits",
    "xs32",
]
