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


@cuda.jit(device=True, inline=True)
def unravel4(i, d1, d2, d3):
    """The (a, b, c, d) coordinates of row-major element i of an (*, d1, d2, d3) array, e.g.
    (n, c, h, w) of an NCHW tensor: d is the fastest-moving, so consecutive threads of a
    grid-stride loop get neighbouring d and their accesses coalesce."""
    d = i % d3
    t = i // d3
    c = t % d2
    t //= d2
    return t // d1, t % d1, c, d  # (a, b, c, d)
