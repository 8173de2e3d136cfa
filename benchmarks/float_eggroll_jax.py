"""Float Gaussian EGGROLL in JAX: the reference row of docs/results.md.

EGGROLL as its authors run it (arXiv 2511.16652): the whole ES step is one jit-compiled
XLA function, float32, on the CPU here. Written from the paper and from
benchmarks/float_eggroll.py (the same algorithm in NumPy); no code of the authors'
library is used. Per step, inside the one compiled function:

1. **noise**: per layer and antithetic pair ``j``, Gaussian factors ``A_j`` (out x r)
   and ``B_j`` (fan x r) from ``jax.random`` keyed by (seed, step);
2. **perturbed forward** of all ``N`` members: member ``m`` (pair ``j = m // 2``, sign
   ``+1`` even, ``-1`` odd) evaluates ``x W^T + sign_m * (sigma / sqrt(r)) * (x B_j) A_j^T``
   per layer, ReLU between layers, bias column included; the first layer's ``x W^T`` is
   computed once because every member sees the same batch;
3. **fitness**: mean log-likelihood of the labels, z-scored over the population;
4. **update**: ``g = 1/(N sigma) sum_m f_m E_m`` with ``E_m = sign_m (sigma/sqrt(r)) A B^T``,
   in factored form ``(A * (f_2j - f_2j+1)) @ B^T / (N sqrt(r))`` (one matmul of inner
   size ``P r`` per layer, never a per-member matrix), then Adam (beta 0.9 / 0.999,
   eps 1e-8), ascent, as benchmarks/float_eggroll.py.

The network, the int8 inputs (divided by 127 inside the compiled step), the batches
(``pentegg.tasks.step_rng``, the task's schedule) and the population are those of the
pentegg task, so only the arithmetic differs. JAX is imported lazily: it is the optional
extra ``reference`` (``pip install -e '.[reference]'``), not part of ``.[all]``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

INSTALL_HINT = (
    "the JAX float reference needs the optional extra 'reference': "
    "pip install -e '.[reference]' (inside ./run shell)"
)


class MissingJax(ImportError):
    """JAX is not installed (the message says how to install the extra)."""


def import_jax():
    """``(jax, jax.numpy)``, or :class:`MissingJax` with the install hint."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        raise MissingJax(INSTALL_HINT) from e
    return jax, jnp


@dataclass(frozen=True)
class JaxConfig:
    layers: tuple[int, ...] = (64, 64, 10)
    population: int = 256
    rank: int = 4
    sigma: float = 0.05
    lr: float = 0.01
    seed: int = 0


def init_params(cfg: JaxConfig) -> list[np.ndarray]:
    """Initial weights (out, in + 1), N(0, 1/fan), as benchmarks/float_eggroll.py."""
    rng = np.random.default_rng(cfg.seed)
    return [
        (rng.standard_normal((o, i + 1)) * np.sqrt(1.0 / (i + 1))).astype(np.float32)
        for i, o in zip(cfg.layers[:-1], cfg.layers[1:], strict=True)
    ]


def make_functions(cfg: JaxConfig):
    """The pure step functions of ``cfg``:

    * ``noise(key)``: ``[(A, B), ...]`` per layer, ``A`` (P, out, r), ``B`` (P, fan, r);
    * ``step_with_noise(state, noise, x, y)``: forward, fitness, update for given noise;
    * ``step(state, key, s, x, y)``: ``noise(fold_in(key, s))`` then ``step_with_noise``:
      the ES step ``s``, jitted whole by :class:`JaxEggroll`;
    * ``logits(params, x)``: the unperturbed network.

    ``state`` is ``(params, m, v, t)``; ``x`` is the int8 batch, ``y`` the labels.
    """
    jax, jnp = import_jax()
    n, p, r = cfg.population, cfg.population // 2, cfg.rank
    shapes = [(o, i + 1) for i, o in zip(cfg.layers[:-1], cfg.layers[1:], strict=True)]
    scale = cfg.sigma / np.sqrt(r)
    sign = jnp.array([1.0, -1.0], jnp.float32)[None, :, None, None]

    def with_bias(h):
        return jnp.concatenate([h, jnp.ones((*h.shape[:-1], 1), h.dtype)], axis=-1)

    def noise(key):
        keys = jax.random.split(key, 2 * len(shapes))
        return [
            (
                jax.random.normal(keys[2 * l], (p, out, r), jnp.float32),
                jax.random.normal(keys[2 * l + 1], (p, fan, r), jnp.float32),
            )
            for l, (out, fan) in enumerate(shapes)
        ]

    def population_logits(params, nz, x):
        h = x.astype(jnp.float32) / 127.0  # (batch, in), shared by every member
        for l, (w, (a, b)) in enumerate(zip(params, nz, strict=True)):
            hb = with_bias(h)
            if l == 0:  # shared input: x W^T once; (x B_j) per pair
                base = (hb @ w.T)[None, None]  # (1, 1, batch, out)
                xb = jnp.einsum("bf,pfr->pbr", hb, b)[:, None]  # (P, 1, batch, r)
            else:  # per-member input (P, 2, batch, in)
                base = hb @ w.T
                xb = jnp.einsum("psbf,pfr->psbr", hb, b)
            pert = jnp.einsum("psbr,por->psbo", xb, a)
            acc = base + sign * (scale * pert)
            h = jax.nn.relu(acc) if l < len(params) - 1 else acc
        return h.reshape(n, *h.shape[2:])  # (N, batch, C), member 2j+s at [2j+s]

    def step_with_noise(state, nz, x, y):
        params, m, v, t = state
        logits = population_logits(params, nz, x)
        logp = jax.nn.log_softmax(logits, axis=-1)
        fit = jnp.take_along_axis(logp, y[None, :, None], axis=-1)[..., 0].mean(axis=1)
        f = (fit - fit.mean()) / (fit.std() + 1e-8)
        fp = f[0::2] - f[1::2]  # pair j: E_2j = +E_j, E_2j+1 = -E_j
        t = t + 1
        new_p, new_m, new_v = [], [], []
        for w, mi, vi, (a, b) in zip(params, m, v, nz, strict=True):
            out, fan = w.shape
            ag = (a * fp[:, None, None]).transpose(1, 0, 2).reshape(out, p * r)
            g = (ag @ b.transpose(0, 2, 1).reshape(p * r, fan)) / (n * np.sqrt(r))
            mi = 0.9 * mi + 0.1 * g
            vi = 0.999 * vi + 0.001 * g * g
            mh = mi / (1 - 0.9**t)
            vh = vi / (1 - 0.999**t)
            new_p.append(w + cfg.lr * mh / (jnp.sqrt(vh) + 1e-8))
            new_m.append(mi)
            new_v.append(vi)
        return (new_p, new_m, new_v, t)

    def step(state, key, s, x, y):
        return step_with_noise(state, noise(jax.random.fold_in(key, s)), x, y)

    def logits(params, x):
        h = x.astype(jnp.float32) / 127.0
        for l, w in enumerate(params):
            h = with_bias(h) @ w.T
            if l < len(params) - 1:
                h = jax.nn.relu(h)
        return h

    return {
        "noise": noise,
        "step_with_noise": step_with_noise,
        "step": step,
        "logits": logits,
    }


class JaxEggroll:
    """A training run: ``step(s, x, y)`` is one jit-compiled ES step on step ``s``'s
    batch; ``compile(x, y)`` compiles it ahead (seconds, reported apart)."""

    def __init__(self, cfg: JaxConfig):
        jax, jnp = import_jax()
        self.cfg, self._jax, self._jnp = cfg, jax, jnp
        fns = make_functions(cfg)
        self._step = jax.jit(fns["step"])
        self._logits = jax.jit(fns["logits"])
        params = [jnp.asarray(w) for w in init_params(cfg)]
        zeros = [jnp.zeros_like(w) for w in params]
        self.state = (params, zeros, [jnp.zeros_like(w) for w in params], jnp.float32(0))
        self.key = jax.random.key(cfg.seed)
        self.compile_s = None

    def compile(self, x, y) -> float:
        """Compile the step for the batch shape of ``x`` (not counted in step times)."""
        t = time.perf_counter()
        out = self._step(self.state, self.key, 0, np.asarray(x), np.asarray(y))
        self._jax.block_until_ready(out)
        self._logits(self.state[0], np.asarray(x)).block_until_ready()
        self.compile_s = time.perf_counter() - t
        return self.compile_s

    def step(self, s: int, x, y) -> None:
        """ES step ``s`` on its batch; returns when the new state is computed."""
        self.state = self._step(self.state, self.key, s, np.asarray(x), np.asarray(y))
        self._jax.block_until_ready(self.state)

    def accuracy(self, x, y) -> float:
        z = np.asarray(self._logits(self.state[0], np.asarray(x)))
        return float((z.argmax(axis=1) == np.asarray(y)).mean())


def backend_info() -> dict:
    jax, _ = import_jax()
    import jaxlib

    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "devices": [str(d) for d in jax.devices()],
    }
