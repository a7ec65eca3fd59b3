"""Indexing by integer tensors: gather/scatter (class targets) and index_select/index_add
(embeddings).

``gather``/``scatter`` pick one column per row: the forward and backward of
``x[arange(R), idx]`` (cross-entropy picks each row's target log-probability this way).
``index_select``/``index_add`` pick whole rows: the forward and backward of an embedding
lookup ``w[idx]``.

The lesson is in the two backward kernels. ``scatter_kernel`` needs no atomics: each output
row has exactly one source, so one thread per *output* element decides "is this my row's
index?" and writes every element (zeros included) exactly once, coalesced, with no separate
zero-fill pass. ``index_add_kernel`` cannot do that: the same embedding row may be looked up
many times in a batch (repeated indices must accumulate), and which source rows land on an
output row is only known at run time. So it scatters with ``cuda.atomic.add`` into a zeroed
buffer; float64 atomics need compute capability >= 6.0 (every GPU this project targets).

Indices are int64 as in the contract and are trusted to be in range (the op layer checks
them); writes through an out-of-range index are dropped rather than corrupting memory.
"""
from __future__ import annotations

from numba import cuda, float32

from ..contract import View, contiguous_strides, numel
from .device import current_stream, empty, launch_1d
from .kernelspec import KernelSpec, reported
from .memory import contiguous, full





@reported(lambda k, x: [KernelSpec("gather", k, (x.f, x.t2, 0, x.i64, 1, 0, x.f), x.block)])
@cuda.jit
def gather_kernel(x, xs, xoff, idx, istride, ioff, out):
    """``out[r] = x[r, idx[r]]``.

    Thread mapping: one thread per row ``r`` (grid-stride over ``R``).
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(R/BLOCK)`` blocks (capped).
    Memory: coalesced index reads and output writes; the ``x`` reads are one element per row,
    inherently scattered (one 32-byte sector per thread), which is why the op is cheap only
    because ``R`` is small next to ``R*C``.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for r in range(start, out.size, step):
        out[r] = x[xoff + r * xs[0] + idx[ioff + r * istride] * xs[1]]


def gather(x: View, idx: View, *, block=None, max_blocks=None):
    """(R, C), (R,) int64 -> (R,): ``x[r, idx[r]]``."""
    rows = x.shape[0]
    out = empty(rows, x.dtype)
    if rows == 0:
        return out
    grid, blk = launch_1d(rows, block, max_blocks)
    gather_kernel[grid, blk, current_stream()](x.buf, tuple(x.strides), x.offset, idx.buf,
                                               idx.strides[0], idx.offset, out)
    return out


@reported(lambda k, x: [KernelSpec("scatter", k, (x.i64, 1, 0, x.f, 1, 0, x.f2), x.block)])
@cuda.jit
def scatter_kernel(idx, istride, ioff, src, sstride, soff, out):
    """``out[r, c] = src[r] if c == idx[r] else 0`` for an ``(R, C)`` output.

    Thread mapping: one thread per *output* element (grid-stride over ``R*C``, ``c`` fastest).
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(R*C/BLOCK)`` blocks (capped).
    Memory: every output element written once, coalesced; the per-row ``idx``/``src`` reads
    are broadcast within a warp (same address) and cached.
    Why not "zero-fill, then one thread per row writes its element": that is two launches and
    a second, scattered pass over the output; the write-everything gather is one coalesced pass.
    """
    c_ = out.shape[1]
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        r = i // c_
        c = i % c_
        if idx[ioff + r * istride] == c:
            out[r, c] = src[soff + r * sstride]
        else:
            out[r, c] = float32(0)


def scatter(idx: View, src: View, c, *, block=None, max_blocks=None):
    """(R,) int64, (R,) -> (R, C): zeros except ``out[r, idx[r]] = src[r]``."""
    rows, cols = idx.shape[0], int(c)
    out = empty(rows * cols, src.dtype)
    if out.size == 0:
        return out
    grid, blk = launch_1d(out.size, block, max_blocks)
    scatter_kernel[grid, blk, current_stream()](idx.buf, idx.strides[0], idx.offset, src.buf,
                                                src.strides[0], src.offset,
                                                out.reshape(rows, cols))
    return out


@reported(lambda k, x: [KernelSpec("index_select", k, (x.f, x.t2, 0, x.i64, 1, 0, x.f2), x.block)])
@cuda.jit
def index_select_kernel(w, ws, woff, idx, istride, ioff, out):
    """``out[n, d] = w[idx[n], d]`` for an ``(N, D)`` output (an embedding lookup).

    Thread mapping: one thread per output element (grid-stride over ``N*D``, ``d`` fastest).
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(N*D/BLOCK)`` blocks (capped).
    Memory: output writes coalesced; a warp reads consecutive ``d`` of one table row
    (coalesced when the row is contiguous); the index read is a warp-wide broadcast.
    """
    d_ = out.shape[1]
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        n = i // d_
        d = i % d_
        out[n, d] = w[woff + idx[ioff + n * istride] * ws[0] + d * ws[1]]


def index_select(w: View, idx: View, *, block=None, max_blocks=None):
    """(V, D), (N,) int64 -> (N, D): rows ``idx`` of ``w``."""
    n, d = idx.shape[0], w.shape[1]
    out = empty(n * d, w.dtype)
    if out.size == 0:
        return out
    grid, blk = launch_1d(out.size, block, max_blocks)
    index_select_kernel[grid, blk, current_stream()](w.buf, tuple(w.strides), w.offset, idx.buf,
                                                     idx.strides[0], idx.offset,
                                                     out.reshape(n, d))
    return out


@reported(lambda k, x: [KernelSpec("index_add", k, (x.i64, 1, 0, 1, x.f, x.t2, 0, x.f2), x.block)])
@cuda.jit
def index_add_kernel(idx, istride, ioff, rows, src, ss, soff, out):
    """``out[idx[n], d] += src[n, d]`` for ``n < rows``, into a zeroed ``(V, D)`` output.

    Thread mapping: one thread per *source* element (grid-stride over ``N*D``, ``d`` fastest).
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(N*D/BLOCK)`` blocks (capped).
    Memory: coalesced source reads; ``cuda.atomic.add`` into the output, resolved in L2.
    A warp covers consecutive ``d`` of one row, so its atomics hit distinct consecutive
    addresses; threads collide only when two source rows share an index (a frequent token),
    and the L2 serialises just those. Summation order among colliding rows depends on timing.
    Why atomics: repeated indices must accumulate and the collisions are data-dependent; a
    deterministic alternative sorts the indices first (segmented reduction), which costs a
    sort per step.
    """
    v_, d_ = out.shape
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, rows * d_, step):
        n = i // d_
        d = i % d_
        row = idx[ioff + n * istride]
        if 0 <= row < v_:
            cuda.atomic.add(out, (row, d), src[soff + n * ss[0] + d * ss[1]])


def index_add(idx: View, src: View, v, *, block=None, max_blocks=None):
    """(N,) int64, (N, D) -> (V, D): ``out[idx[n]] += src[n]``, repeated indices accumulate.

    A source of another rank is flattened to (N, D) with D the product of its trailing dims
    (the output then has shape (V,) + src.shape[1:])."""
    rows, v = idx.shape[0], int(v)
    d = numel(src.shape[1:])
    out = full(v * d, 0, src.dtype)
    if rows * d == 0 or out.size == 0:
        return out
    if src.ndim == 2:
        buf, strides, offset = src.buf, tuple(src.strides), src.offset
    else:
        buf, strides, offset = contiguous(src), (d, 1), 0
    grid, blk = launch_1d(rows * d, block, max_blocks)
    index_add_kernel[grid, blk, current_stream()](idx.buf, idx.strides[0], idx.offset, rows,
                                                  buf, strides, offset, out.reshape(v, d))
    return out


# --- along a dim: torch.gather and torch.scatter_add ----------------------------------------
@reported(lambda k, x: [KernelSpec("gather_dim", k, (x.f, x.t2, 0, 1, x.i64, x.t2, x.t2, 0, x.f),
                                   x.block)])
@cuda.jit
def gather_dim_kernel(x, xs, xoff, dim, idx, ishape, istrides, ioff, out):
    """``out[c] = x[c with coordinate dim replaced by idx[c]]`` for every coordinate ``c`` of
    the (any-rank) index; ``out`` is dense in the index's shape.

    Thread mapping: one thread per index/output element (grid-stride, 1-D); the coordinates
    are peeled from the linear index, the last dimension fastest.
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(n/BLOCK)`` blocks (capped).
    Memory: index reads and output writes coalesced; ``x`` reads coalesce when ``dim`` is not
    the innermost dimension (neighbouring threads differ in the innermost coordinate, which
    they take from their own position), and are one gather per thread along it.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        ipos = ioff
        xpos = xoff
        rest = i
        for d in range(len(ishape) - 1, -1, -1):
            c = rest % ishape[d]
            rest //= ishape[d]
            ipos += c * istrides[d]
            if d != dim:
                xpos += c * xs[d]
        out[i] = x[xpos + idx[ipos] * xs[dim]]


@reported(lambda k, x: [KernelSpec(
    "scatter_add_dim", k, (x.f, x.t2, 0, 1, x.i64, x.t2, x.t2, 0, x.t2, x.f), x.block)])
@cuda.jit
def scatter_add_dim_kernel(src, ss, soff, dim, idx, ishape, istrides, ioff, os_, out):
    """``out[c with coordinate dim replaced by idx[c]] += src[c]`` for every coordinate ``c``
    of the index, into ``out`` (a dense copy of the base, strides ``os_``).

    Thread mapping: one thread per index element (grid-stride, 1-D, last dimension fastest).
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(n/BLOCK)`` blocks (capped).
    Memory: coalesced index and source reads; ``cuda.atomic.add`` into ``out`` because any
    number of index elements may name the same target (collisions are data-dependent, as in
    ``index_add_kernel``); the order of colliding float adds depends on timing.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    n = 1
    for d in range(len(ishape)):
        n *= ishape[d]
    for i in range(start, n, step):
        ipos = ioff
        spos = soff
        opos = 0
        rest = i
        for d in range(len(ishape) - 1, -1, -1):
            c = rest % ishape[d]
            rest //= ishape[d]
            ipos += c * istrides[d]
            spos += c * ss[d]
            if d != dim:
                opos += c * os_[d]
        cuda.atomic.add(out, opos + idx[ipos] * os_[dim], src[spos])


def gather_dim(x: View, dim, idx: View, *, block=None, max_blocks=None):
    """Contract ``gather_dim`` (torch.gather): out has idx's shape."""
    n = idx.numel
    out = empty(n, x.dtype)
    if n == 0:
        return out
    grid, blk = launch_1d(n, block, max_blocks)
    gather_dim_kernel[grid, blk, current_stream()](x.buf, tuple(x.strides), x.offset, dim,
                                                   idx.buf, tuple(idx.shape),
                                                   tuple(idx.strides), idx.offset, out)
    return out


def scatter_add_dim(base: View, dim, idx: View, src: View, *, block=None, max_blocks=None):
    """Contract ``scatter_add_dim`` (torch.scatter_add): a copy of base plus the scattered
    src; only src's leading window of idx's shape is read."""
    out = contiguous(base)
    n = idx.numel
    if n == 0:
        return out
    grid, blk = launch_1d(n, block, max_blocks)
    scatter_add_dim_kernel[grid, blk, current_stream()](
        src.buf, tuple(src.strides), src.offset, dim, idx.buf, tuple(idx.shape),
        tuple(idx.strides), idx.offset, contiguous_strides(base.shape), out)
    return out
