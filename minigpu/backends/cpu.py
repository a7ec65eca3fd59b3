"""The NumPy backend: the reference semantics of every primitive in ``contract.py``.

The recurrent-cell and optimizer references live in ``cpu_lstm.py`` and ``cpu_optim.py``.

Each function turns its :class:`View` arguments into NumPy views (``as_strided`` over the
flat buffer, no copy), does the math with NumPy, and returns a new flat buffer.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .contract import View, result_dtype

name = "cpu"


def array(v: View) -> np.ndarray:
    """The NumPy view (no copy) of a strided window onto a flat buffer."""
    item = v.buf.itemsize
    base = v.buf[v.offset:] if v.buf.size else v.buf
    return as_strided(base, shape=v.shape, strides=tuple(s * item for s in v.strides),
                      writeable=False)


def _flat(a, dtype=None) -> np.ndarray:
    """A new, writeable, contiguous 1-D buffer (never a view of an input buffer)."""
    out = np.ascontiguousarray(a, dtype=dtype)
    if not out.flags.writeable or np.may_share_memory(out, a):
        out = out.copy()
    return out.reshape(-1)


# --- memory and transfer --------------------------------------------------------------------
def empty(n, dtype):
    return np.empty(int(n), dtype=dtype)


def full(n, value, dtype):
    return np.full(int(n), value, dtype=dtype)


def from_numpy(a):
    return np.array(a, order="C").reshape(-1)


def to_numpy(v):
    return np.array(array(v), order="C")


def contiguous(v):
    return _flat(array(v))


def cast(v, dtype):
    return _flat(array(v), dtype=dtype)


def assign_(dst: View, src: View):
    item = dst.buf.itemsize
    out = as_strided(dst.buf[dst.offset:], shape=dst.shape,
                     strides=tuple(s * item for s in dst.strides))
    out[...] = array(src)


def synchronize():
    pass


# --- elementwise ------------------------------------------------------------------------------
def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


_UNARY = {
    "neg": lambda x, a, b: -x,
    "exp": lambda x, a, b: np.exp(x),
    "log": lambda x, a, b: np.log(x),
    "sqrt": lambda x, a, b: np.sqrt(x),
    "tanh": lambda x, a, b: np.tanh(x),
    "sigmoid": lambda x, a, b: _sigmoid(x),
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
    return _flat(out, dtype=result_dtype(op, a.dtype))


def binary(op, x, y, alpha=0.0, beta=0.0):
    a, b = array(x), array(y)
    with np.errstate(all="ignore"):
        out = _BINARY[op](a, b, _scalar(alpha, a.dtype), _scalar(beta, a.dtype))
    return _flat(out, dtype=result_dtype(op, a.dtype))


def where(cond, x, y):
    return _flat(np.where(array(cond), array(x), array(y)), dtype=x.dtype)


# --- reductions ---------------------------------------------------------------------------------
_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}


def reduce(op, x, axes):
    a = array(x)
    return _flat(_REDUCE[op](a, axis=tuple(axes)), dtype=a.dtype)


def argreduce(op, x, axis):
    a = array(x)
    idx = (np.argmax if op == "max" else np.argmin)(a, axis=axis)
    values = np.take_along_axis(a, np.expand_dims(idx, axis), axis).squeeze(axis)
    return _flat(values, dtype=a.dtype), _flat(idx, dtype=np.int64)


# --- linear algebra -----------------------------------------------------------------------------
def matmul(a, b):
    return _flat(np.matmul(array(a), array(b)), dtype=a.dtype)


# --- softmax ------------------------------------------------------------------------------------
def softmax(x, log):
    a = array(x)
    shifted = a - a.max(axis=1, keepdims=True)
    if log:
        out = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    else:
        e = np.exp(shifted)
        out = e / e.sum(axis=1, keepdims=True)
    return _flat(out, dtype=a.dtype)


def softmax_backward(y, g, log):
    yv, gv = array(y), array(g)
    if log:
        out = gv - np.exp(yv) * gv.sum(axis=1, keepdims=True)
    else:
        out = yv * (gv - (gv * yv).sum(axis=1, keepdims=True))
    return _flat(out, dtype=yv.dtype)


# --- convolution and pooling --------------------------------------------------------------------
def _out_size(size, k, s, p, d=1):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _windows(x, kernel, stride, padding, dilation, pad_value):
    """(N, C, kh, kw, OH, OW) strided windows over a padded copy of x."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value)
    oh, ow = _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    s = xp.strides
    return as_strided(xp, shape=(n, c, kh, kw, oh, ow),
                      strides=(s[0], s[1], s[2] * dh, s[3] * dw, s[2] * sh, s[3] * sw),
                      writeable=False)


def im2col(x, kernel, stride, padding, dilation=(1, 1)):
    a = array(x)
    win = _windows(a, kernel, stride, padding, dilation, 0)
    n, c, kh, kw, oh, ow = win.shape
    return _flat(win.reshape(n, c * kh * kw, oh * ow), dtype=a.dtype)


def col2im(cols, x_shape, kernel, stride, padding, dilation=(1, 1)):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = x_shape
    oh, ow = _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    col = array(cols).reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw] += col[:, :, i, j]
    return _flat(out[:, :, ph:ph + h, pw:pw + w])


def maxpool2d(x, kernel, stride, padding):
    a = array(x)
    n, c, h, w = a.shape
    win = _windows(a, kernel, stride, padding, (1, 1), -np.inf)
    kh, kw, oh, ow = win.shape[2:]
    flat = win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c, oh, ow, kh * kw)
    k = flat.argmax(axis=-1)
    values = np.take_along_axis(flat, k[..., None], -1)[..., 0]
    i, j = k // kw, k % kw
    rows = np.arange(oh)[:, None] * stride[0] - padding[0] + i
    cols = np.arange(ow)[None, :] * stride[1] - padding[1] + j
    return _flat(values, dtype=a.dtype), _flat(rows * w + cols, dtype=np.int64)


def maxpool2d_backward(g, argmax, x_shape):
    n, c, h, w = x_shape
    gv, idx = array(g), array(argmax)
    out = np.zeros((n * c, h * w), dtype=g.dtype)
    planes = np.repeat(np.arange(n * c), gv[0, 0].size)
    np.add.at(out, (planes, idx.reshape(-1)), gv.reshape(-1))
    return out.reshape(-1)


def _avg_divisor(x_shape, kernel, stride, padding, count_include_pad, dtype):
    """Per-window divisor (OH, OW): the window's size, or its in-bounds part."""
    ones = np.ones((1, 1) + tuple(x_shape[2:]), dtype=dtype)
    win = _windows(ones, kernel, stride, padding, (1, 1), 1 if count_include_pad else 0)
    return win.sum(axis=(2, 3))[0, 0]


def avgpool2d(x, kernel, stride, padding, count_include_pad=True):
    a = array(x)
    win = _windows(a, kernel, stride, padding, (1, 1), 0)
    div = _avg_divisor(a.shape, kernel, stride, padding, count_include_pad, a.dtype)
    return _flat(win.sum(axis=(2, 3)) / div, dtype=a.dtype)


def avgpool2d_backward(g, x_shape, kernel, stride, padding, count_include_pad=True):
    gv = array(g)
    div = _avg_divisor(x_shape, kernel, stride, padding, count_include_pad, gv.dtype)
    n, c, oh, ow = gv.shape
    share = np.broadcast_to((gv / div)[:, :, None, None], (n, c) + tuple(kernel) + (oh, ow))
    cols = View(_flat(share), (n, c * kernel[0] * kernel[1], oh * ow),
                (c * kernel[0] * kernel[1] * oh * ow, oh * ow, 1), 0)
    return col2im(cols, x_shape, kernel, stride, padding)


# --- indexing -----------------------------------------------------------------------------------
def gather(x, idx):
    a, i = array(x), array(idx)
    return _flat(a[np.arange(a.shape[0]), i], dtype=a.dtype)


def scatter(idx, src, c):
    i, s = array(idx), array(src)
    out = np.zeros((i.shape[0], c), dtype=s.dtype)
    out[np.arange(i.shape[0]), i] = s
    return out.reshape(-1)


def index_select(w, idx):
    return _flat(array(w)[array(idx)], dtype=w.dtype)


def index_add(idx, src, v):
    s = array(src)
    out = np.zeros((v,) + s.shape[1:], dtype=s.dtype)
    np.add.at(out, array(idx), s)
    return out.reshape(-1)


# --- random -------------------------------------------------------------------------------------
def _mix32(x):
    """A 32-bit integer hash (the 'lowbias32' finaliser): every output bit depends on every
    input bit. uint32 arithmetic wraps exactly as it does in the CUDA kernel."""
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def random_bits(n, seed, offset, stream):
    """uint32 bits of elements offset..offset+n-1: mix32(counter ^ mix32(seed + stream))."""
    with np.errstate(over="ignore"):
        key = _mix32(np.uint32((int(seed) + stream * 0x9E3779B9) & 0xFFFFFFFF))
        counter = (np.arange(n, dtype=np.uint64) + np.uint64(offset)).astype(np.uint32)
        return _mix32(counter ^ key)


def random_uniform(n, seed, offset, dtype):
    """[0, 1) from the top 24 bits: exactly representable in float32."""
    top24 = random_bits(n, seed, offset, 0) >> np.uint32(8)
    return top24.astype(dtype) * np.dtype(dtype).type(2.0 ** -24)


def random_normal(n, seed, offset, dtype):
    """Box-Muller on two independent uniform streams; u1 in (0, 1] so log(u1) is finite."""
    u1 = ((random_bits(n, seed, offset, 1) >> np.uint32(8)).astype(np.float64) + 1) * 2.0 ** -24
    u2 = (random_bits(n, seed, offset, 2) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    return (np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)).astype(dtype)


# The recurrent-cell and optimizer references, re-exported so this module is the whole backend.
from .cpu_lstm import lstm_cell, lstm_cell_backward  # noqa: E402,F401
from .cpu_optim import adam_step_, sgd_step_  # noqa: E402,F401

# --- issue 14: AdamW, RMSprop and Adagrad references ----------------------------------------------
from .cpu_optim import adagrad_step_, adamw_step_, rmsprop_step_  # noqa: E402,F401


# --- issue 14: layer normalisation over the rows of an (R, C) matrix ------------------------------
def layer_norm(x, weight, bias, eps):
    """(y, mean, rstd): ``y = (x - mean) * rstd * w + b`` per row, the variance biased
    (PyTorch's), ``rstd = 1/sqrt(var + eps)``; weight/bias (C,) views or None."""
    a = array(x)
    t = a.dtype.type
    with np.errstate(all="ignore"):  # rows of no features: NaN statistics, as in NumPy
        mean = a.mean(axis=1, dtype=a.dtype)
        var = ((a - mean[:, None]) ** 2).mean(axis=1, dtype=a.dtype)
        rstd = t(1) / np.sqrt(var + t(eps))
    y = (a - mean[:, None]) * rstd[:, None]
    if weight is not None:
        y = y * array(weight)
    if bias is not None:
        y = y + array(bias)
    return _flat(y, dtype=a.dtype), _flat(mean, dtype=a.dtype), _flat(rstd, dtype=a.dtype)


def layer_norm_backward(g, x, mean, rstd, weight, param_grads):
    """(dx, dweight, dbias) with ``xhat = (x - mean) * rstd``, ``gw = g * w``:
    ``dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))`` per row,
    ``dweight = sum_rows(g * xhat)``, ``dbias = sum_rows(g)`` (None unless param_grads)."""
    gv, a = array(g), array(x)
    r = array(rstd)[:, None]
    xhat = (a - array(mean)[:, None]) * r
    gw = gv if weight is None else gv * array(weight)
    c = a.shape[1]
    dx = r * (gw - gw.sum(axis=1, keepdims=True) / c -
              xhat * (gw * xhat).sum(axis=1, keepdims=True) / c) if c else gw
    if not param_grads:
        return _flat(dx, dtype=a.dtype), None, None
    return (_flat(dx, dtype=a.dtype), _flat((gv * xhat).sum(axis=0), dtype=a.dtype),
            _flat(gv.sum(axis=0), dtype=a.dtype))
