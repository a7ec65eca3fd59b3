"""Strided indexing on the device: from a thread's linear output index to an input element.

A view's element ``i`` (in row-major order of its shape) lives at
``offset + sum(digit_d(i) * strides[d])`` where ``digit_d`` are the mixed-radix digits of
``i`` in base ``shape``. Peeling digits from the last dimension keeps neighbouring threads on
neighbouring elements of the innermost dimension, so a warp reads memory coalesced whenever the
innermost stride is 1.
"""
from numba import cuda


@cuda.jit(device=True, inline=True)
def strided_offset(i, shape, strides, offset):
    """Buffer position of the i-th element (row-major) of a view; shape/strides are tuples."""
    pos = offset
    for d in range(len(shape) - 1, -1, -1):
        extent = shape[d]
        pos += (i % extent) * strides[d]
        i //= extent
    return pos
