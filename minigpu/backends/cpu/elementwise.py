"""NumPy elementwise maps: ``unary``, ``binary`` and ``where``; each op's NumPy form is its
entry in ``backends/optable.py``."""
from __future__ import annotations

import numpy as np

from .. import optable
from ..contract import result_dtype
from .memory import array, flat

_UNARY = {op.name: op.numpy for op in optable.UNARY}
_BINARY = {op.name: op.numpy for op in optable.BINARY}


def _scalar(value, dtype):
    """Python scalars take the tensor's dtype (float32 stays float32)."""
    return dtype.type(value) if dtype.kind == "f" else value


def unary(op, x, alpha=0.0, beta=0.0):
    a = array(x)
    with np.errstate(all="ignore"):
        out = _UNARY[op](a, _scalar(alpha, a.dtype), _scalar(beta, a.dtype))
    return flat(out, dtype=result_dtype(op, a.dtype))


def binary(op, x, y, alpha=0.0, beta=0.0):
    a, b = array(x), array(y)
    with np.errstate(all="ignore"):
        out = _BINARY[op](a, b, _scalar(alpha, a.dtype), _scalar(beta, a.dtype))
    return flat(out, dtype=result_dtype(op, a.dtype))


def where(cond, x, y):
    return flat(np.where(array(cond), array(x), array(y)), dtype=x.dtype)
