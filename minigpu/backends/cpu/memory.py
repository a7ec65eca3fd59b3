"""NumPy memory: flat buffers, strided views onto them, transfers and casts.

``array`` turns a :class:`View` into a NumPy view (no copy); ``flat`` makes a new, writeable,
contiguous 1-D buffer (what every primitive returns).
"""
from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..contract import View, is_contiguous, numel


def array(v: View) -> np.ndarray:
    """The NumPy view (no copy) of a strided window onto a flat buffer.

    Most views are dense, or a transpose of a dense block (``W.T``): those are a reshape (and
    a transpose) of the buffer, several times cheaper than ``as_strided``, which serves the
    rest (broadcasts, stepped slices)."""
    layout = _permuted_dense(tuple(v.shape), tuple(v.strides))
    if layout is None:
        item = v.buf.itemsize
        base = v.buf[v.offset:] if v.buf.size else v.buf
        return as_strided(base, shape=v.shape, strides=tuple(s * item for s in v.strides),
                          writeable=False)
    n = numel(v.shape)
    buf = v.buf if v.offset == 0 and v.buf.size == n else v.buf[v.offset:v.offset + n]
    dense_shape, axes = layout
    return buf.reshape(dense_shape) if axes is None else buf.reshape(dense_shape).transpose(axes)


@functools.lru_cache(maxsize=4096)
def _permuted_dense(shape: tuple, strides: tuple):
    """``(dense_shape, axes)`` when the layout is a dense row-major block of ``dense_shape``
    with its dims permuted by ``axes`` (None: not permuted), else None. Cached per layout."""
    order = sorted(range(len(shape)), key=lambda d: (shape[d] == 1, -strides[d]))
    dense_shape = tuple(shape[d] for d in order)
    if not is_contiguous(dense_shape, tuple(strides[d] for d in order)):
        return None
    axes = tuple(order.index(d) for d in range(len(shape)))
    return dense_shape, (None if axes == tuple(range(len(shape))) else axes)


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
    item = dst.buf.itemsize
    out = as_strided(dst.buf[dst.offset:], shape=dst.shape,
                     strides=tuple(s * item for s in dst.strides))
    out[...] = array(src)


def synchronize():
    pass
