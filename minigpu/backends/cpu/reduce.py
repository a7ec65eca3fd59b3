"""NumPy reductions: ``reduce`` and ``argreduce``."""
from __future__ import annotations

import numpy as np

from .memory import array, dense_flat, flat, quietly

# The ufuncs' own reductions: what np.sum/np.max call, without their Python wrapper.
_REDUCE = {"sum": np.add.reduce, "max": np.maximum.reduce, "min": np.minimum.reduce,
           "prod": np.multiply.reduce}


def reduce(op, x, axes):
    """With NumPy's warnings off: a product or sum that overflows is inf, as in PyTorch."""
    a = dense_flat(x) if len(axes) == len(x.shape) else None
    if a is not None:  # every dim of a dense operand: one reduction over its flat buffer
        return flat(quietly(_REDUCE[op], a), dtype=a.dtype)
    a = array(x)
    return flat(quietly(_REDUCE[op], a, tuple(axes)), dtype=a.dtype)


def argreduce(op, x, axis):
    a = array(x)
    idx = (np.argmax if op == "max" else np.argmin)(a, axis=axis)
    values = np.take_along_axis(a, np.expand_dims(idx, axis), axis).squeeze(axis)
    return flat(values, dtype=a.dtype), flat(idx, dtype=np.int64)
