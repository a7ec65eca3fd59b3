"""NumPy elementwise maps: ``unary``, ``binary`` and ``where``; each op's NumPy form is its
entry in ``backends/optable.py``."""
from __future__ import annotations

import numpy as np

from .. import optable
from ..contract import result_dtype
from .memory import array, dense_flat, flat, fresh, quietly, repeated_value

_UNARY = {op.name: op.numpy for op in optable.UNARY}
_BINARY = {op.name: op.numpy for op in optable.BINARY}
_INTEGER_DIVISIONS = ("floor_divide", "remainder")

def _scalar(value, dtype):
    """Python scalars take the tensor's dtype (float32 stays float32); 0, the default of the
    maps that take no parameter, stays a Python 0 (NumPy treats it as the array's dtype)."""
    return dtype.type(value) if value and dtype.kind == "f" else value


def unary(op, x, alpha=0.0, beta=0.0):
    a = dense_flat(x)  # a dense operand: the map runs on its flat buffer
    if a is None:
        a = array(x)
    if alpha or beta:
        alpha, beta = _scalar(alpha, a.dtype), _scalar(beta, a.dtype)
    out = quietly(_UNARY[op], a, alpha, beta)
    return fresh(out, result_dtype(op, a.dtype), a)


def binary(op, x, y, alpha=0.0, beta=0.0):
    a = b = None
    if x.shape == y.shape:  # the map runs on 1-D operands: two dense buffers, or one dense
        a, b = dense_flat(x), dense_flat(y)  # buffer and one broadcast value (NumPy repeats it)
        if a is None and b is not None:
            a = repeated_value(x)
        elif b is None and a is not None:
            b = repeated_value(y)
    if a is None or b is None:
        a, b = array(x), array(y)
    if op in _INTEGER_DIVISIONS and a.dtype.kind in "iu" and not b.all():
        raise RuntimeError("ZeroDivisionError")  # PyTorch's cpu message (NumPy would give 0)
    if alpha or beta:
        alpha, beta = _scalar(alpha, a.dtype), _scalar(beta, a.dtype)
    out = quietly(_BINARY[op], a, b, alpha, beta)
    return fresh(out, result_dtype(op, a.dtype), a, b)


def where(cond, x, y):
    return flat(np.where(array(cond), array(x), array(y)), dtype=x.dtype)
