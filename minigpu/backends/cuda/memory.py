"""Memory primitives: host<->device copies, fills, and turning any view into a dense buffer.

Lesson: a strided gather (``gather_strided_kernel``) writes coalesced but may read scattered;
it is the general fallback. Transposed views take the shared-memory tiled path in
``transpose.py`` instead, which makes both the reads and the writes coalesced.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ..contract import View, is_contiguous
from . import transpose
from .blocks import launch
from .device import current_stream, empty, scalar
from .kernelspec import KernelSpec, reported
from .elementwise import convert
from .strided import strided_offset


@reported(lambda k, x: [KernelSpec("fill", k, (x.f, x.s), x.block)])
@cuda.jit
def fill_kernel(out, value):
    """One thread per element (grid-stride): out[i] = value. Consecutive threads write
    consecutive addresses, so every warp's store is one coalesced transaction."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = value


@reported(lambda k, x: [KernelSpec("gather_strided", k, (x.f, x.t2, x.t2, 0, x.f), x.block)])
@cuda.jit
def gather_strided_kernel(src, shape, strides, offset, out):
    """One thread per output element (grid-stride): out[i] = src[strided position of i].
    Writes are coalesced; reads are coalesced only when the innermost stride is 1."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = src[strided_offset(i, shape, strides, offset)]


@reported(lambda k, x: [KernelSpec("scatter_strided", k, (x.f, x.t2, x.t2, 0, x.f), x.block)])
@cuda.jit
def scatter_strided_kernel(src, shape, strides, offset, dst):
    """One thread per source element: dst[strided position of i] = src[i] (assignment into
    a view, e.g. one slice of a ``cat`` output)."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, src.size, step):
        dst[strided_offset(i, shape, strides, offset)] = src[i]


def full(n, value, dtype):
    out = empty(n, dtype)
    if n:
        launch(fill_kernel, n, out, scalar(value, dtype))
    return out


def from_numpy(a):
    host = np.ascontiguousarray(a).reshape(-1)
    out = empty(host.size, host.dtype)
    if host.size:
        out.copy_to_device(host, stream=current_stream())
    return out


def to_numpy(v: View):
    dense_buf = _dense_slice(v) if v.is_contiguous() else contiguous(v)
    host = dense_buf.copy_to_host(stream=current_stream())
    current_stream().synchronize()
    return host.reshape(v.shape)


def _dense_slice(v: View):
    """The buffer window of a contiguous view (a device-array slice, no copy)."""
    return v.buf[v.offset:v.offset + v.numel]


def contiguous(v: View):
    """A dense row-major copy of any view (always a new buffer)."""
    n = v.numel
    out = empty(n, v.dtype)
    if n == 0:
        return out
    if is_contiguous(v.shape, v.strides):
        out.copy_to_device(_dense_slice(v), stream=current_stream())
        return out
    batched = transpose.as_batched_transpose(v)
    if batched is not None:
        return transpose.transpose_copy(batched, out)
    launch(gather_strided_kernel, n, v.buf, tuple(v.shape), tuple(v.strides), v.offset, out)
    return out


def dense(v: View):
    """The view's elements as a dense buffer (a slice when already dense, else one copy)."""
    if v.is_contiguous():
        return v.buf[v.offset:v.offset + v.numel]
    return contiguous(v)


def cast(v: View, dtype):
    return convert(v, np.dtype(dtype))


def assign_(dst: View, src: View):
    """dst[...] = src, where dst is a (possibly strided) window of an existing buffer."""
    n = src.numel
    if n == 0:
        return
    dense_src = _dense_slice(src) if src.is_contiguous() else contiguous(src)
    # a 0-d window is one element: as shape (1,), since Numba cannot type an empty tuple's
    # shape[d] (the kernel would not compile for a GPU)
    shape, strides = (tuple(dst.shape), tuple(dst.strides)) if dst.shape else ((1,), (1,))
    launch(scatter_strided_kernel, n, dense_src, shape, strides, dst.offset, dst.buf)
