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


MAP_BLOCK = 1 << 16
"""Elements of flat operands a map of several NumPy passes computes at a time (``_mapped``)."""
BLOCKS_FROM = 1 << 20
"""Operands at least this long (4 MiB of float32) are mapped in blocks."""
SEVERAL_PASSES = frozenset(
    [op.name for op in optable.BINARY if op.name.endswith("_grad")]
    + ["sigmoid", "leaky_relu", "erf", "gelu", "gelu_tanh", "silu", "softplus", "elu",
       "hardswish", "mish"])
"""The maps whose NumPy formula makes temporaries of the operands' size (a mask, a product)."""


def _mapped(op, fn, operands, alpha, beta):
    """``fn(*operands, alpha, beta)`` with NumPy's warnings off. For an op of
    ``SEVERAL_PASSES`` on flat operands (each 1-D, of one length n or a single repeated
    value) of ``BLOCKS_FROM`` elements or more, a block at a time into one result: the
    formula's temporaries (``leaky_relu_grad``'s mask and product, ``select``'s bit masks) are
    one block, not arrays of the operands' size (a DCGAN step's peak memory was one such
    backward map), and stay in the cache (4M elements: ``leaky_relu_grad`` 13.5 -> 6.4 ms,
    ``sigmoid`` 15.3 -> 8.1 ms; a one-pass map such as ``add`` would only gain a copy, so it is
    never blocked). Every map is elementwise: the values are the same as in one piece."""
    if op not in SEVERAL_PASSES:  # checked first: most maps, and every small one, stop here
        return quietly(fn, *operands, alpha, beta)
    n = max(o.size for o in operands)
    if n < BLOCKS_FROM or any(o.ndim != 1 for o in operands):
        return quietly(fn, *operands, alpha, beta)

    def block(start):
        return quietly(fn, *(o if o.size == 1 else o[start:start + MAP_BLOCK]
                             for o in operands), alpha, beta)

    first = block(0)
    out = np.empty(n, first.dtype)
    out[:MAP_BLOCK] = first
    for start in range(MAP_BLOCK, n, MAP_BLOCK):
        out[start:start + MAP_BLOCK] = block(start)
    return out


def unary(op, x, alpha=0.0, beta=0.0):
    a = dense_flat(x)  # a dense operand: the map runs on its flat buffer
    if a is None:
        a = array(x)
    if alpha or beta:
        alpha, beta = _scalar(alpha, a.dtype), _scalar(beta, a.dtype)
    out = _mapped(op, _UNARY[op], (a,), alpha, beta)
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
    out = _mapped(op, _BINARY[op], (a, b), alpha, beta)
    return fresh(out, result_dtype(op, a.dtype), a, b)


def where(cond, x, y):
    return flat(np.where(array(cond), array(x), array(y)), dtype=x.dtype)
