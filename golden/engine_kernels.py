"""Numba kernels of :mod:`pentegg.golden.engine` (imported only when Numba is installed).

Integer arithmetic only; see engine.py for the layout and the exactness argument.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .config import ACT_MAX as act_max
from .config import BIAS_INPUT as bias_in


@njit(cache=True)
def affine_rows(src, w, wo, n_in, n_out, half, acc):
    """acc[o, :] = sum_i w[o, i] * src[i, :] + 127 * w[o, n_in] + half (row-major
    (n_out, n_in + 1) at offset wo); digits that are 0 are skipped."""
    fan = n_in + 1
    bsz = src.shape[1]
    for o in range(n_out):
        c0 = np.int32(w[wo + o * fan + n_in] * bias_in + half)
        for t in range(bsz):
            acc[o, t] = c0
    for i in range(n_in):
        for o in range(n_out):
            wv = w[wo + o * fan + i]
            if wv != 0:
                for t in range(bsz):
                    acc[o, t] += wv * src[i, t]


@njit(cache=True)
def project_b(src, b, bo, j, n_in, r, q):
    """q[c, :] = sum_i B_j[i, c] * src[i, :] + 127 * B_j[n_in, c] (B_j (fan, r))."""
    fan = n_in + 1
    bsz = src.shape[1]
    base = bo + j * fan * r
    for c in range(r):
        c0 = np.int32(b[base + n_in * r + c] * bias_in)
        for t in range(bsz):
            q[c, t] = c0
    for i in range(n_in):
        for c in range(r):
            bv = b[base + i * r + c]
            if bv != 0:
                for t in range(bsz):
                    q[c, t] += bv * src[i, t]


@njit(cache=True)
def pert_row(q, a, ao, j, o, n_out, r, half_k, k, p):
    """p[:] = rshr(sum_c A_j[o, c] * q[c, :], k)."""
    bsz = q.shape[1]
    base = ao + (j * n_out + o) * r
    for t in range(bsz):
        p[t] = half_k
    for c in range(r):
        av = a[base + c]
        if av != 0:
            for t in range(bsz):
                p[t] += av * q[c, t]
    for t in range(bsz):
        p[t] = p[t] >> k


@njit(parallel=True, cache=True)
def forward(xt, shared, w, woff, a, aoff, b, boff, dims, shifts, k, r, out):
    n_pairs = out.shape[0] // 2
    bsz = xt.shape[2]
    n_layers = dims.shape[0] - 1
    wmax = 0
    for l in range(n_layers + 1):
        wmax = max(wmax, dims[l])
    half_k = np.int32((1 << (k - 1)) if k > 0 else 0)
    # layer 0's x.W^T once per step when every member sees the same input
    s0 = shifts[0]
    base0 = np.empty((dims[1], bsz), np.int32)
    if shared:
        affine_rows(xt[0], w, woff[0], dims[0], dims[1], (1 << (s0 - 1)) if s0 > 0 else 0, base0)
    for j in prange(n_pairs):
        cur = np.empty((2, wmax, bsz), np.int32)
        nxt = np.empty((2, wmax, bsz), np.int32)
        acc = np.empty((2, wmax, bsz), np.int32)
        q = np.empty((2, r, bsz), np.int32)
        p = np.empty(bsz, np.int32)
        for l in range(n_layers):
            n_in = dims[l]
            n_out = dims[l + 1]
            s = shifts[l]
            half_s = (1 << (s - 1)) if s > 0 else 0
            lo = -act_max if l == n_layers - 1 else 0
            one = shared and l == 0  # both members see one input
            for sg in range(1 if one else 2):
                if l == 0:
                    src = xt[0] if shared else xt[2 * j + sg]
                else:
                    src = cur[sg]
                project_b(src, b, boff[l], j, n_in, r, q[sg])
                if not one:
                    affine_rows(src, w, woff[l], n_in, n_out, half_s, acc[sg])
            for o in range(n_out):
                for sg in range(2):
                    if sg == 0 or not one:
                        pert_row(q[0 if one else sg], a, aoff[l], j, o, n_out, r, half_k, k, p)
                    base = base0[o] if one else acc[sg, o]
                    sign = 1 - 2 * sg
                    if l == n_layers - 1:
                        m = 2 * j + sg
                        for t in range(bsz):
                            v = (base[t] + sign * p[t]) >> s
                            out[m, t, o] = min(max(v, lo), act_max)
                    else:
                        for t in range(bsz):
                            v = (base[t] + sign * p[t]) >> s
                            nxt[sg, o, t] = min(max(v, lo), act_max)
            cur, nxt = nxt, cur


@njit(cache=True)
def lowrank_z(g, a, bt, z):
    """z[o, f] = sum_j g[j] * sum_c a[j, o, c] * bt[j, c, f] (int64; a (P, out, r),
    bt (P, r, fan)); zero digits skipped. Serial: about 0.3 ms for the digits default's
    first layer, and a parallel loop measured slower (thread hand-off) on 2 cores."""
    n_pairs, n_out, r = a.shape
    fan = bt.shape[2]
    for o in range(n_out):
        for f in range(fan):
            z[o, f] = 0
        for j in range(n_pairs):
            gj = g[j]
            if gj == 0:
                continue
            for c in range(r):
                ag = gj * a[j, o, c]
                if ag != 0:
                    for f in range(fan):
                        z[o, f] += ag * bt[j, c, f]


_M32 = 0xFFFFFFFF


@njit(cache=True)
def _xs32(x):
    """xorshift32 (13, 17, 5) on a value held in int64, kept to 32 bits."""
    x ^= (x << 13) & _M32
    x ^= x >> 17
    x ^= (x << 5) & _M32
    return x


@njit(cache=True)
def _mix32(x):
    for _ in range(6):
        x = _xs32(x)
        x = (x + (x << 11)) & _M32
    return x


@njit(cache=True)
def stream_digits(run_key, step, layer, ab, uniform, out):
    """out[j, :] = the first out.shape[1] digits of stream (step, pair j, layer, ab):
    spec 2.3-2.5 (binomial: popcount of a nibble - 2; uniform: (byte * 5 >> 8) - 2)."""
    n_pairs, n = out.shape
    for j in range(n_pairs):
        x = _mix32(((step << 15) | (j << 4) | (layer << 1) | ab) ^ run_key)
        i = 0
        while i < n:
            if uniform:
                for d in range(4):
                    if i < n:
                        out[j, i] = (((x >> (8 * d)) & 0xFF) * 5 >> 8) - 2
                        i += 1
            else:
                for d in range(8):
                    if i < n:
                        nib = (x >> (4 * d)) & 0xF
                        pop = (nib & 1) + ((nib >> 1) & 1) + ((nib >> 2) & 1) + (nib >> 3)
                        out[j, i] = pop - 2
                        i += 1
            x = _xs32(x)
