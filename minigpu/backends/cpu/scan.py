"""NumPy scans and stream compaction: ``scan``, ``masked_select``, ``masked_scatter``."""
from __future__ import annotations

import numpy as np

from .memory import array, flat

_SCAN = {"sum": np.cumsum, "prod": np.cumprod}


def scan(op, x, axis, exclusive=False, reverse=False):
    a = array(x)
    if reverse:
        a = np.flip(a, axis)
    out = _SCAN[op](a, axis=axis, dtype=a.dtype)
    if exclusive:  # shift by one along axis, the identity first
        first = np.full_like(np.take(out, [0], axis=axis), 0 if op == "sum" else 1)
        out = np.concatenate([first, np.take(out, np.arange(a.shape[axis] - 1), axis=axis)],
                             axis=axis)
    if reverse:
        out = np.flip(out, axis)
    return flat(out, dtype=a.dtype)


def masked_select(x, mask):
    return flat(array(x)[array(mask)], dtype=x.dtype)


def masked_scatter(mask, src):
    m = array(mask)
    out = np.zeros(m.shape, dtype=src.dtype)
    out[m] = array(src)
    return out.reshape(-1)
