"""NumPy reductions: ``reduce`` and ``argreduce``."""
from __future__ import annotations

import numpy as np

from .memory import array, flat


_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}


def reduce(op, x, axes):
    a = array(x)
    return flat(_REDUCE[op](a, axis=tuple(axes)), dtype=a.dtype)


def argreduce(op, x, axis):
    a = array(x)
    idx = (np.argmax if op == "max" else np.argmin)(a, axis=axis)
    values = np.take_along_axis(a, np.expand_dims(idx, axis), axis).squeeze(axis)
    return flat(values, dtype=a.dtype), flat(idx, dtype=np.int64)
