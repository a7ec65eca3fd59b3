"""NumPy memory: flat buffers, strided views onto them, transfers and casts.

``array`` turns a :class:`View` into a NumPy view (no copy: a slice and a reshape of the flat
buffer when the view is dense, ``as_strided`` otherwise); ``flat`` makes a new, writeable,
contiguous 1-D buffer (what every primitive returns).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..contract import View, contiguous_strides, numel


def array(v: View) -> np.ndarray:
    """The NumPy view (no copy) of a strided window onto a flat buffer."""
    if v.strides == contiguous_strides(v.shape):
        # Dense (most operands): a slice and a reshape, ~10x cheaper than as_strided.
        return v.buf[v.offset:v.offset + numel(v.shape)].reshape(v.shape)
    item = v.buf.itemsize
    base = v.buf[v.offset:] if v.buf.size else v.buf
    return as_strided(base, shape=v.shape, strides=tuple(s * item for s in v.strides),
                      writeable=False)


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
