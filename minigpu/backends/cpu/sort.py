"""NumPy ``sort``: stable, NaN largest, along the last axis."""
from __future__ import annotations

import numpy as np

from .memory import array, flat


def sort(x, descending=False):
    a = array(x)
    if descending:  # stable descending: the stable ascending order of the reversed row, reversed
        c = a.shape[-1] if a.ndim else 1
        order = c - 1 - np.flip(np.argsort(np.flip(a, -1), axis=-1, kind="stable"), -1)
    else:
        order = np.argsort(a, axis=-1, kind="stable")
    return (flat(np.take_along_axis(a, order, -1), dtype=a.dtype),
            flat(order, dtype=np.int64))
