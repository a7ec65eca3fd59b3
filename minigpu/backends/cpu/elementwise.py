"""NumPy elementwise maps: ``unary``, ``binary`` and ``where``."""
from __future__ import annotations

import numpy as np

from ..contract import result_dtype
from .memory import array, flat


def sigmoid(x):
    """1 / (1 + exp(-x)) from exp(-|x|) only, so it never overflows; stays in x's dtype (the
    LSTM cell reference uses it too)."""
    e = np.exp(-np.abs(x))
    one = x.dtype.type(1)
    return np.where(x >= 0, one / (one + e), e / (one + e)).astype(x.dtype, copy=False)


_UNARY = {
    "neg": lambda x, a, b: -x,
    "exp": lambda x, a, b: np.exp(x),
    "log": lambda x, a, b: np.log(x),
    "sqrt": lambda x, a, b: np.sqrt(x),
    "tanh": lambda x, a, b: np.tanh(x),
    "sigmoid": lambda x, a, b: sigmoid(x),
    "relu": lambda x, a, b: np.maximum(x, 0),
    "leaky_relu": lambda x, a, b: np.where(x > 0, x, a * x),
    "abs": lambda x, a, b: np.abs(x),
    "sign": lambda x, a, b: np.sign(x),
    "affine": lambda x, a, b: a * x + b,
    "rdiv": lambda x, a, b: a / x,
    "pow": lambda x, a, b: x ** a,
    "rpow": lambda x, a, b: a ** x,
    "clamp": lambda x, a, b: np.minimum(np.maximum(x, a), b),
    "gt": lambda x, a, b: x > a,
    "ge": lambda x, a, b: x >= a,
    "lt": lambda x, a, b: x < a,
    "le": lambda x, a, b: x <= a,
    "eq": lambda x, a, b: x == a,
    "ne": lambda x, a, b: x != a,
}

_BINARY = {
    "add": lambda x, y, a, b: x + y,
    "sub": lambda x, y, a, b: x - y,
    "mul": lambda x, y, a, b: x * y,
    "div": lambda x, y, a, b: x / y,
    "pow": lambda x, y, a, b: x ** y,
    "maximum": lambda x, y, a, b: np.maximum(x, y),
    "minimum": lambda x, y, a, b: np.minimum(x, y),
    "gt": lambda x, y, a, b: x > y,
    "ge": lambda x, y, a, b: x >= y,
    "lt": lambda x, y, a, b: x < y,
    "le": lambda x, y, a, b: x <= y,
    "eq": lambda x, y, a, b: x == y,
    "ne": lambda x, y, a, b: x != y,
    "relu_grad": lambda x, y, a, b: np.where(y > 0, x, 0),
    "leaky_relu_grad": lambda x, y, a, b: np.where(y > 0, x, a * x),
    "tanh_grad": lambda x, y, a, b: x * (1 - y * y),
    "sigmoid_grad": lambda x, y, a, b: x * y * (1 - y),
    "clamp_grad": lambda x, y, a, b: np.where((y >= a) & (y <= b), x, 0),
}


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
