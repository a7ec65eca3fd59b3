"""NumPy ``searchsorted``: the binary search of every value in its row, run for all values at
once (one vectorised probe per step), with the cuda kernel's and PyTorch's comparisons: a
comparison with NaN is false, so a NaN value (or a value above the row) ends at S."""
from __future__ import annotations

import numpy as np

from .memory import array, flat


def searchsorted(seq, values, right=False):
    s, v = array(seq), array(values)   # (R, S) and (R, V)
    S = s.shape[1]
    lo = np.zeros(v.shape, np.int64)
    hi = np.full(v.shape, S, np.int64)
    rows = np.arange(s.shape[0])[:, None]
    searching = lo < hi
    while searching.any():
        mid = (lo + hi) // 2
        probe = s[rows, np.minimum(mid, S - 1)]
        with np.errstate(invalid="ignore"):
            left = (probe > v) if right else (probe >= v)
        hi = np.where(searching & left, mid, hi)
        lo = np.where(searching & ~left, mid + 1, lo)
        searching = lo < hi
    return flat(lo, dtype=np.int64)
