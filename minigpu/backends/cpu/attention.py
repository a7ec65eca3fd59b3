"""NumPy scaled-dot-product attention over (B, L, E) batches, and its backward (the reference
of the fused kernels in ``backends/cuda/attention.py``).

Computed in float64 with the whole (B, L, S) score matrix in memory and rounded to the
inputs' dtype, so the reference is at least as exact as the kernels it checks.
"""
from __future__ import annotations

import numpy as np

from .memory import array, flat


def _probabilities(q, k, mask, causal, scale):
    """(p (B, L, S), lse (B, L)) in float64: softmax of ``scale * q k^T + mask`` (``j > i``
    masked when causal); a row with every score -inf has lse -inf and p 0."""
    scores = scale * np.einsum("ble,bse->bls", q, k)
    if mask is not None:
        scores = scores + array(mask)
    if causal:
        L, S = scores.shape[1:]
        scores = np.where(np.tril(np.ones((L, S), dtype=np.bool_)), scores, -np.inf)
    m = scores.max(axis=2, keepdims=True, initial=-np.inf)
    live = m > -np.inf
    with np.errstate(invalid="ignore"):
        e = np.where(live, np.exp(scores - np.where(live, m, 0)), 0)
    total = e.sum(axis=2, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(live, e / np.where(live, total, 1), 0)
        lse = np.where(live, m + np.log(np.where(live, total, 1)), -np.inf)[..., 0]
    return p, lse


def attention(q, k, v, mask, causal, scale):
    """(out (B, L, Ev), lse (B, L)): ``softmax(scale * q k^T + mask) v`` and the row
    log-sum-exp of the scores (the contract's ``attention``)."""
    qa = array(q)
    q64, k64, v64 = (array(t).astype(np.float64) for t in (q, k, v))
    p, lse = _probabilities(q64, k64, mask, causal, scale)
    return flat(p @ v64, dtype=qa.dtype), flat(lse, dtype=qa.dtype)


def attention_backward(q, k, v, out, lse, g, mask, causal, scale):
    """(dq, dk, dv) of ``attention`` for the upstream gradient g (B, L, Ev), with
    ``dp = g v^T``, ``ds = p * (dp - rowsum(g * out))``, ``dq = scale * ds k``,
    ``dk = scale * ds^T q``, ``dv = p^T g``. ``out`` and ``lse`` are unused here (the
    probabilities are recomputed exactly); the cuda kernels use them."""
    qa = array(q)
    q64, k64, v64, g64 = (array(t).astype(np.float64) for t in (q, k, v, g))
    p, _ = _probabilities(q64, k64, mask, causal, scale)
    dp = g64 @ v64.transpose(0, 2, 1)
    ds = p * (dp - (p * dp).sum(axis=2, keepdims=True))
    dq = scale * ds @ k64
    dk = scale * ds.transpose(0, 2, 1) @ q64
    dv = p.transpose(0, 2, 1) @ g64
    return tuple(flat(t, dtype=qa.dtype) for t in (dq, dk, dv))
