"""Shared hypothesis strategies: small shapes, finite values, and strided views of buffers.

Shapes stay tiny (the simulator interprets every CUDA thread). ``views`` draws layouts a
tensor can really have: dense, permuted, sliced with steps, offset into a larger buffer, and
broadcast (stride 0).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from minigpu.backends.contract import View, contiguous_strides, numel

MAX_SIDE = 6


def shapes(min_dims=1, max_dims=3, min_side=1, max_side=MAX_SIDE):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side,
                            max_side=max_side)


def values(dtype=np.float32, lo=-4.0, hi=4.0):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, width=32).map(np.dtype(dtype).type)


# ``hnp.arrays`` normally draws a few elements and fills the rest with one repeated value, so
# most drawn arrays are mostly constant: a kernel that reads the wrong element (a swapped
# index, a gate from the wrong block, an off-by-one) then still sees the right value.
# ``fill=st.nothing()`` draws every element.
ALL_DRAWN = st.nothing()


def arrays(shape, dtype=np.float32, lo=-4.0, hi=4.0):
    return hnp.arrays(np.dtype(dtype), shape, elements=st.floats(
        lo, hi, allow_nan=False, allow_infinity=False, width=32), fill=ALL_DRAWN)


@dataclass
class ViewSpec:
    """A layout over a host buffer; ``on(backend)`` uploads the buffer and returns the View."""

    base: np.ndarray
    shape: tuple
    strides: tuple
    offset: int

    def on(self, backend) -> View:
        return View(backend.from_numpy(self.base), self.shape, self.strides, self.offset)

    def numpy(self) -> np.ndarray:
        item = self.base.itemsize
        return np.lib.stride_tricks.as_strided(
            self.base[self.offset:], self.shape, tuple(s * item for s in self.strides)).copy()


@st.composite
def views(draw, shape=None, dtype=np.float32, lo=-4.0, hi=4.0, contiguous=False):
    """A (possibly non-contiguous) view: permute, step-slice, offset and broadcast a buffer."""
    if shape is None:
        shape = draw(shapes())
    shape = tuple(shape)
    ndim = len(shape)
    if contiguous:
        perm, steps, broadcast, pad = tuple(range(ndim)), (1,) * ndim, (False,) * ndim, 0
    else:
        perm = tuple(draw(st.permutations(range(ndim))))
        steps = tuple(draw(st.lists(st.integers(1, 2), min_size=ndim, max_size=ndim)))
        broadcast = tuple(draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim)))
        pad = draw(st.integers(0, 3))
    # Storage shape: the view's dims in `perm` order, stretched by the slice steps.
    stored = [1] * ndim
    for d in range(ndim):
        stored[perm[d]] = 1 if broadcast[d] else shape[d] * steps[d]
    dense = contiguous_strides(stored)
    strides = tuple(0 if broadcast[d] else dense[perm[d]] * steps[d] for d in range(ndim))
    n = numel(stored) + pad
    if dtype == np.bool_:
        base = draw(hnp.arrays(np.bool_, n, fill=ALL_DRAWN))
    elif np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        base = draw(hnp.arrays(np.dtype(dtype), n, elements=st.integers(
            max(int(lo), info.min), min(int(hi), info.max)),
                               fill=ALL_DRAWN))
    else:
        base = draw(arrays(n, dtype, lo, hi))
    return ViewSpec(base, shape, strides, pad)


def broadcastable_shapes(max_dims=3):
    """Two shapes that broadcast together, and the result shape."""
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=max_dims,
                                             max_side=4)
