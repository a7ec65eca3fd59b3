"""NumPy memory: flat buffers, strided views onto them, transfers and casts.

``array`` turns a :class:`View` into a NumPy view (no copy); ``flat`` makes a new, writeable,
contiguous 1-D buffer (what every primitive returns).
"""
from __future__ import annotations

import functools

import numpy as np

from ..contract import View, contiguous_strides, numel


# Maps and products run with NumPy's floating-point warnings off: inf and nan are results, as
# in PyTorch. ``with np.errstate(all="ignore")`` rebuilds its error-state object on every entry
# (about 1 us, more than a 4x4 map itself), so the maps set a prebuilt one in the context
# variable where NumPy 2 keeps it (a private name: np.errstate is the fallback).
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _errors
except ImportError:  # pragma: no cover - another NumPy layout
    _errors = None

if _errors is not None:
    with np.errstate(all="ignore"):
        _IGNORE_ALL = _errors.get()

    def quietly(fn, *args):
        """fn(*args) with NumPy's floating-point warnings off."""
        token = _errors.set(_IGNORE_ALL)
        try:
            return fn(*args)
        finally:
            _errors.reset(token)
else:  # pragma: no cover
    def quietly(fn, *args):
        """fn(*args) with NumPy's floating-point warnings off."""
        with np.errstate(all="ignore"):
            return fn(*args)


def array(v: View) -> np.ndarray:
    """The NumPy view (no copy) of a strided window onto a flat buffer: NumPy's array
    constructor over the buffer with the layout in bytes (what ``as_strided`` does too, through
    several Python layers: this is ~8x cheaper, and every op's operands go through here)."""
    item = v.buf.itemsize
    return np.ndarray(v.shape, v.buf.dtype, v.buf, v.offset * item,
                      _in_bytes(tuple(v.strides), item))


@functools.lru_cache(maxsize=4096)
def _in_bytes(strides: tuple, itemsize: int) -> tuple:
    """Element strides as byte strides (cached: the same layouts come back at every step)."""
    return tuple(s * itemsize for s in strides)


def dense_flat(v: View):
    """The 1-D slice of ``v.buf`` that a contiguous view covers (no copy), or None for a
    strided view. Elementwise maps of same-layout operands run on these directly: no n-d
    NumPy view to build."""
    strides, n = _dense_layout(v.shape)
    if v.strides != strides:
        return None
    if v.offset == 0 and len(v.buf) == n:  # the whole buffer (the common case)
        return v.buf
    return v.buf[v.offset:v.offset + n]


def repeated_value(v: View):
    """The 1-element slice of ``v.buf`` that a view with every stride 0 repeats (a scalar
    broadcast to a shape, such as the gradient of a sum, or a per-channel mean of one channel
    seen as (1, H, W): a dim of size 1 may keep its stride), or None for any other view."""
    if not _repeats_one_value(v.shape, v.strides):
        return None
    return v.buf[v.offset:v.offset + 1]


@functools.lru_cache(maxsize=4096)
def _repeats_one_value(shape: tuple, strides: tuple) -> bool:
    """Whether every dim of more than one element has stride 0 (cached per layout)."""
    return not any(s for s, n in zip(strides, shape) if n != 1)


@functools.lru_cache(maxsize=4096)
def _dense_layout(shape: tuple) -> tuple:
    """(row-major strides, element count) of ``shape``, cached: one lookup per operand."""
    return contiguous_strides(shape), numel(shape)


def fresh(out, dtype, x, y=None) -> np.ndarray:
    """``flat(out, dtype)`` for a map's result on the flat operands x (and y): a new 1-D array
    of the right dtype (what a NumPy ufunc returns for 1-D inputs) is returned as it is."""
    if (out.base is None and out.dtype == dtype and out.ndim == 1 and out.flags.writeable
            and out is not x and out is not y):
        return out
    return flat(out, dtype=dtype)


def flat(a, dtype=None) -> np.ndarray:
    """A new, writeable, contiguous 1-D buffer (never a view of an input buffer)."""
    out = np.ascontiguousarray(a, dtype=dtype)
    # A result that owns its memory is new; one that looks into another array (an input
    # passed through, or a view of one) is copied.
    if out.base is not None or not out.flags.writeable:
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
    return flat(array(v))


def cast(v, dtype):
    return flat(array(v), dtype=dtype)


def assign_(dst: View, src: View):
    array(dst)[...] = array(src)  # a view of a writeable buffer is writeable


def synchronize():
    pass
