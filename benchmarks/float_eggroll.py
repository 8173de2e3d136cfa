"""Float Gaussian EGGROLL in NumPy (not the golden path): the readable definition that the
JAX reference of docs/results.md (benchmarks/float_eggroll_jax.py) is tested against, and
``pentegg bench reference float-eggroll --backend numpy`` where JAX is not installed.

A small float32 implementation of EGGROLL as published (arXiv 2511.16652; the
ESHyperscale/HyperscaleES noiser): per layer and antithetic pair, Gaussian factors
A (out x r) and B (fan x r); member ``m`` evaluates
``x W^T + sign_m * (sigma / sqrt(r)) * (x B) A^T``; fitness is z-scored over the
population; the update ``g = 1/(N sigma) * sum_m f_m E_m`` is applied with Adam. The
network, inputs and batches are those of the pentegg task (the int8 inputs divided by
127, bias column included), so only the arithmetic differs.

It exists to answer "what does integer pentary training cost against float EGGROLL?";
nothing in pentegg's hardware path uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class FloatConfig:
    layers: tuple[int, ...] = (64, 64, 10)
    population: int = 256
    rank: int = 4
    sigma: float = 0.05
    lr: float = 0.01
    seed: int = 0


class FloatEggroll:
    def __init__(self, cfg: FloatConfig):
        self.cfg = cfg
        self.rng = np.random.default_rng(cfg.seed)
        self.w = [
            (self.rng.standard_normal((o, i + 1)) * np.sqrt(1.0 / (i + 1))).astype(np.float32)
            for i, o in zip(cfg.layers[:-1], cfg.layers[1:], strict=True)
        ]
        self.m = [np.zeros_like(w) for w in self.w]
        self.v = [np.zeros_like(w) for w in self.w]
        self.t = 0

    @staticmethod
    def _bias(x):
        return np.concatenate([x, np.ones((*x.shape[:-1], 1), x.dtype)], axis=-1)

    def forward(self, x, noise=None):
        """Logits (N, batch, C) with noise, (batch, C) without."""
        h = x.astype(np.float32) / 127.0
        n = self.cfg.population
        p = n // 2
        scale = self.cfg.sigma / np.sqrt(self.cfg.rank)
        sign = np.array([1.0, -1.0], np.float32)[None, :, None, None]
        for l, w in enumerate(self.w):
            hb = self._bias(h)
            base = hb @ w.T
            if noise is not None:
                a, b = noise[l]  # (P, out, r), (P, fan, r)
                at = np.swapaxes(a, 1, 2)  # (P, r, out)
                if hb.ndim == 2:
                    xb = (
                        (hb @ b.transpose(1, 0, 2).reshape(hb.shape[-1], -1))
                        .reshape(len(hb), p, -1)
                        .transpose(1, 0, 2)
                    )  # (P, batch, r)
                    pert = scale * np.matmul(xb, at)
                    acc = (base[None, None] + pert[:, None] * sign).reshape(n, -1, w.shape[0])
                else:
                    hp = hb.reshape(p, -1, hb.shape[-1])  # (P, 2*batch, fan)
                    pert = scale * np.matmul(np.matmul(hp, b), at)
                    acc = (
                        base.reshape(p, 2, -1, w.shape[0])
                        + pert.reshape(p, 2, -1, w.shape[0]) * sign
                    ).reshape(n, -1, w.shape[0])
            else:
                acc = base
            h = np.maximum(acc, 0) if l < len(self.w) - 1 else acc
        return h

    def noise(self):
        p, r = self.cfg.population // 2, self.cfg.rank
        return [
            (
                self.rng.standard_normal((p, w.shape[0], r)).astype(np.float32),
                self.rng.standard_normal((p, w.shape[1], r)).astype(np.float32),
            )
            for w in self.w
        ]

    def step(self, x, y):
        noise = self.noise()
        logits = self.forward(x, noise)  # (N, batch, C)
        z = logits - logits.max(axis=2, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=2, keepdims=True))
        fit = logp[:, np.arange(len(y)), y].mean(axis=1)  # mean log-likelihood
        f = (fit - fit.mean()) / (fit.std() + 1e-8)
        fp = f[0::2] - f[1::2]  # antithetic pairs: E_2j = +E, E_2j+1 = -E
        n, c = self.cfg.population, self.cfg
        self.t += 1
        for l, (a, b) in enumerate(noise):
            ag = (a * fp[:, None, None]).transpose(1, 0, 2).reshape(a.shape[1], -1)
            g = (ag @ b.transpose(0, 2, 1).reshape(-1, b.shape[1])) * (1.0 / np.sqrt(c.rank)) / n
            self.m[l] = 0.9 * self.m[l] + 0.1 * g
            self.v[l] = 0.999 * self.v[l] + 0.001 * g * g
            mh = self.m[l] / (1 - 0.9**self.t)
            vh = self.v[l] / (1 - 0.999**self.t)
            self.w[l] += c.lr * mh / (np.sqrt(vh) + 1e-8)  # ascent on the fitness

    def accuracy(self, x, y) -> float:
        return float((self.forward(x).argmax(axis=1) == y).mean())
