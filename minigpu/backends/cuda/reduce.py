"""Reductions: ``sum`` / ``max`` / ``min`` over any set of axes, and ``argmax`` / ``argmin``
along one axis.

Every reduction is first *canonicalised* to a dense ``(outer, K, inner)`` problem: reduce the
middle axis of length ``K``. When the reduced axes are a consecutive run of a dense view this is
free (a reshape); otherwise the view is permuted so that the reduced axes come last and made
dense with one copy (``memory.contiguous``), which gives ``inner == 1``. Two kernels cover the
two shapes of the problem:

* ``inner == 1`` -> **row kernel**: one block per output; its threads stride over the row
  (coalesced), combine in registers, then combine across the block. Rows shorter than a warp
  go to the column kernel instead (one thread per row, ``inner == 1``).
  **Split rows (two passes).** One block per row cannot fill the GPU when the rows are few:
  ``x.sum()`` of a 1-D tensor is ONE row, so one block on one of the H200's 132 SMs would read
  all of it. When the rows are fewer than half of one full wave of blocks (``row_plan``: a
  wave is SMs x resident blocks per SM, 132 x 8 = 1056 blocks of 256 threads) and long enough
  (``MIN_SPLIT_WORK`` elements per thread at least), the same row kernel runs on a 2-D grid
  (rows, splits): block (r, s) reduces the s-th contiguous chunk of row r into a partials
  buffer (rows, splits); a second launch of the row kernel reduces the partials (rows, splits)
  -> (rows,). Every SM streams its share of the input at once; the extra launch and the
  partials cost a few microseconds, nothing next to reading 400 MB. ``argreduce`` does the
  same with (value, index) pairs (pass 2 reads the indices of pass 1, ties -> first index).
* ``inner > 1``  -> **column kernel**: one thread per output column walking down ``K``;
  neighbouring threads read neighbouring columns, so every warp's load is coalesced. When the
  columns are few and ``K`` is long, a second block dimension splits ``K`` too.

bool inputs are reduced as their uint8 bytes (``sum`` of bools is ``any``, i.e. ``max``).
Launch sizes are host-side choices (``row_plan``, ``column_config``) that callers may override
with keyword-only arguments (``max_block``, ``split``, ``row_split``, ``shuffle``); under the
simulator the default block cap is 64 threads instead of 256 and the heuristic assumes
``SIM_SMS`` SMs (same kernels; ``PRODUCTION_BLOCK`` and the H200 plan are tested explicitly).

The teaching ladder that leads to this design (six ways to sum a vector) is the reduction
lesson, ``minigpu/lessons/reduction.py``. The warp and block reductions themselves are shared
building blocks (``blocks.py``).
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

from ..contract import View, is_contiguous, numel
from . import memory
from .blocks import (BETTER, COMBINE, WARP_SHUFFLE, block_allreduce, block_argreduce,
                     identity, numba_type, pow2_at_least)
from .device import SIMULATOR, WARP_SIZE, current_stream, empty
from .kernelspec import KernelSpec, reported

PRODUCTION_BLOCK = 256   # threads per block on a GPU
# The simulator interprets every CUDA thread: by default it gets smaller blocks (same
# kernels, other factory parameters); tests pass max_block=PRODUCTION_BLOCK to run the real one.
MAX_BLOCK = 64 if SIMULATOR else PRODUCTION_BLOCK
COLUMN_SPLIT = 8         # K-split (block y) of the column kernel for few, long columns
# Row split (grid y of the row kernel) for few, long rows; see ``row_plan``.
H200_SMS = 132           # streaming multiprocessors of an H200 (the production target)
SIM_SMS = 2              # what ``sm_count`` pretends under the simulator (keeps its grids small)
THREADS_PER_SM = 2048    # resident threads per sm_90 SM (occupancy.H200.max_threads_per_sm)
BLOCKS_PER_SM = 32       # resident blocks per sm_90 SM, at most
MIN_SPLIT_WORK = 16      # elements per thread in a split block, at least (else one pass)
MAX_GRID_Y = 65535       # CUDA's limit on gridDim.y (the splits of a row)
NO_INDEX = 2 ** 62       # argreduce's "no element yet": loses every tie to a real index


# --- production kernels ----------------------------------------------------------------------
@reported(lambda k, x: [  # a (rows, splits) grid: one launch covers both passes of a split row
    KernelSpec(f"row[{op},{PRODUCTION_BLOCK}]", k(op, x.f32, PRODUCTION_BLOCK, True),
               (x.f, 1, 1, x.s, x.f), PRODUCTION_BLOCK) for op in ("sum", "max")])
@functools.lru_cache(maxsize=None)
def row_reduce_kernel(op, dtype, block, shuffle):
    combine = COMBINE[op]
    allreduce = block_allreduce(op, block, shuffle)
    nbtype = numba_type(dtype)

    @cuda.jit
    def row_reduce(x, K, chunk, ident, out):
        """out[row, part] = op over x[row, part*chunk : (part+1)*chunk] for a dense (rows, K)
        input; out is (rows, splits) with splits = gridDim.y.

        Thread mapping: grid (rows, splits), 1-D block of ``block`` threads; block (row, part)
        owns one contiguous chunk of its row (``chunk`` = K and one split: the whole row, the
        plain one-block-per-row launch). Thread t combines chunk elements t, t+block, ... in a
        register (the "first add during load", generalised to any length), then the block
        combines the ``block`` partials (``block_allreduce``: warp shuffles + one barrier, or
        the shared tree without them).
        Memory: each step of the strided loop is one coalesced load per warp (chunks are
        multiples of ``block``, so every block starts aligned); shared memory holds only the
        per-warp (or per-thread) partials. Faster than the ladder's rungs because each thread
        does O(chunk/block) work in registers before any synchronisation.
        Split rows (splits > 1; ``row_plan``): when the rows are too few to fill the GPU (one
        row for ``x.sum()``), the row is cut into ``splits`` chunks so that one wave of blocks
        keeps every SM streaming; this launch writes the (rows, splits) partials and a second
        launch of this kernel (splits = 1, K = splits) reduces them."""
        scratch = cuda.shared.array(block, nbtype)
        row = cuda.blockIdx.x
        part = cuda.blockIdx.y
        tid = cuda.threadIdx.x
        start = part * chunk
        end = min(start + chunk, K)
        base = row * K
        acc = ident
        for k in range(start + tid, end, block):
            acc = combine(acc, x[base + k])
        total = allreduce(acc, scratch, ident)
        if tid == 0:
            out[row * cuda.gridDim.y + part] = total

    return row_reduce


@reported(lambda k, x: [
    KernelSpec(f"column[sum,{PRODUCTION_BLOCK // split}x{split}]",
               k("sum", x.f32, PRODUCTION_BLOCK // split, split), (x.f, 1, 1, 1, x.s, x.f),
               PRODUCTION_BLOCK) for split in (COLUMN_SPLIT, 1)])
@functools.lru_cache(maxsize=None)
def column_reduce_kernel(op, dtype, bx, by):
    combine = COMBINE[op]
    nbtype = numba_type(dtype)
    SCRATCH_SHAPE = (by, bx)  # a closure constant: numba needs a literal shape

    @cuda.jit
    def column_reduce(x, K, inner, ncols, ident, out):
        """out[o, i] = op over x[o, :, i] for a dense (outer, K, inner) input.

        Thread mapping: 2-D block (bx, by); column c = blockIdx.x*bx + threadIdx.x is one
        output (o, i); threadIdx.y = ty walks k = ty, ty+by, ... down that column in a
        register. by == 1 is the plain "one thread per output" kernel; by > 1 splits long
        columns over by threads, whose partials meet in a (by, bx) shared tile (tree over y,
        sequential addressing). Memory: lanes of a warp read x[o, k, i..i+31], neighbouring
        addresses, so each load is coalesced without any transpose. Also used with inner == 1
        for rows shorter than a warp (thread per row: a block per row would idle most lanes;
        the rows a warp reads share cache lines, so each line is still fetched once)."""
        scratch = cuda.shared.array(SCRATCH_SHAPE, nbtype)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        col = cuda.blockIdx.x * bx + tx
        acc = ident
        if col < ncols:
            o = col // inner
            i = col - o * inner
            base = o * K * inner + i
            for k in range(ty, K, by):
                acc = combine(acc, x[base + k * inner])
        if by > 1:
            scratch[ty, tx] = acc
            cuda.syncthreads()
            s = by // 2
            while s > 0:
                if ty < s:
                    scratch[ty, tx] = combine(scratch[ty, tx], scratch[ty + s, tx])
                cuda.syncthreads()
                s //= 2
            acc = scratch[0, tx]
        if ty == 0 and col < ncols:
            out[col] = acc

    return column_reduce


@reported(lambda k, x: [  # pairs: pass 2 of a split row, on (value, index) partials
    KernelSpec(f"{name}[max,{PRODUCTION_BLOCK}]", k("max", x.f32, PRODUCTION_BLOCK, True, pairs),
               (x.f, x.i64, 1, 1, x.s, x.f, x.i64), PRODUCTION_BLOCK)
    for name, pairs in (("row_arg", False), ("row_arg_pairs", True))])
@functools.lru_cache(maxsize=None)
def row_argreduce_kernel(op, dtype, block, shuffle, indexed=False):
    better = BETTER[op]
    argreduce_block = block_argreduce(op, block, shuffle)
    nbtype = numba_type(dtype)

    @cuda.jit
    def row_argreduce(x, xi, K, chunk, ident, values, indices):
        """(values[row, part], indices[row, part]) = best (x[row, k], index of k) over the
        chunk k in [part*chunk, (part+1)*chunk) of a dense (rows, K) input.

        Same mapping as ``row_reduce`` (grid (rows, splits), strided coalesced loads, register
        accumulation, one chunk per block), carrying an int64 index beside each value: k itself,
        or with ``indexed`` (a factory constant) the index read from ``xi[row, k]`` -- the
        second pass of a split row, whose input is the (value, index) pairs of the first (with
        ``indexed`` False, ``xi`` is not read). A thread sees its k in increasing order and
        every tie-break compares indices, so equal values resolve to the first index, across
        threads and across chunks."""
        sv = cuda.shared.array(block, nbtype)
        si = cuda.shared.array(block, numba.int64)
        row = cuda.blockIdx.x
        part = cuda.blockIdx.y
        tid = cuda.threadIdx.x
        start = part * chunk
        end = min(start + chunk, K)
        base = row * K
        best_v = ident
        best_i = NO_INDEX
        for k in range(start + tid, end, block):
            v = x[base + k]
            i = xi[base + k] if indexed else k
            if better(v, i, best_v, best_i):
                best_v = v
                best_i = i
        best_v, best_i = argreduce_block(best_v, best_i, sv, si, ident, NO_INDEX)
        if tid == 0:
            slot = row * cuda.gridDim.y + part
            values[slot] = best_v
            indices[slot] = best_i

    return row_argreduce


@reported(lambda k, x: [KernelSpec("column_arg[max]", k("max", x.f32),
                                   (x.f, 1, 1, 1, x.f, x.i64), PRODUCTION_BLOCK)])
@functools.lru_cache(maxsize=None)
def column_argreduce_kernel(op, dtype):
    better = BETTER[op]

    @cuda.jit
    def column_argreduce(x, K, inner, ncols, values, indices):
        """Best (x[o, k, i], k) down each column of a dense (outer, K, inner) input.

        One thread per output column (grid-stride, 1-D blocks); neighbouring threads read
        neighbouring columns (coalesced); k increases, so ties keep the first index. Also
        serves rows shorter than a warp (inner == 1), as ``column_reduce`` does."""
        start = cuda.grid(1)
        step = cuda.gridsize(1)
        for col in range(start, ncols, step):
            o = col // inner
            i = col - o * inner
            base = o * K * inner + i
            best_v = x[base]
            best_i = 0
            for k in range(1, K):
                v = x[base + k * inner]
                if better(v, k, best_v, best_i):
                    best_v = v
                    best_i = k
            values[col] = best_v
            indices[col] = best_i

    return column_argreduce


# --- host side: canonical form and launch configuration ---------------------------------------
def _dense_slice(buf, offset, n):
    return buf[offset:offset + n]


def canonical(v: View, axes):
    """(dense buffer, outer, K, inner) with the reduction = reduce the middle axis of
    (outer, K, inner). Size-1 dims are dropped (they move no data); a dense view whose reduced
    axes are one consecutive run needs no copy; otherwise kept axes then reduced axes, made
    dense (no copy either when that permutation happens to be dense, e.g. a transpose)."""
    red = set(axes)
    dims = [d for d in range(len(v.shape)) if v.shape[d] != 1]
    kept = [d for d in dims if d not in red]
    reduced = [d for d in dims if d in red]
    n = v.numel
    K = numel([v.shape[d] for d in reduced])
    if reduced and is_contiguous(v.shape, v.strides):
        first = dims.index(reduced[0])
        if dims[first:first + len(reduced)] == reduced:
            outer = numel([v.shape[d] for d in dims[:first]])
            return _dense_slice(v.buf, v.offset, n), outer, K, n // (outer * K)
    order = kept + reduced
    pv = View(v.buf, tuple(v.shape[d] for d in order), tuple(v.strides[d] for d in order),
              v.offset)
    if is_contiguous(pv.shape, pv.strides):
        buf = _dense_slice(v.buf, v.offset, n)
    else:
        buf = memory.contiguous(pv)
    return buf, n // K, K, 1


def row_block(K, max_block=MAX_BLOCK):
    """Threads per row: the smallest power of two >= K, from one warp up to ``max_block``
    (no idle warps on short rows; long rows loop)."""
    return pow2_at_least(K, WARP_SIZE, max_block)


@functools.lru_cache(maxsize=None)
def sm_count():
    """Streaming multiprocessors of the current GPU (the driver's MULTIPROCESSOR_COUNT, read
    once); ``SIM_SMS`` under the simulator."""
    if SIMULATOR:
        return SIM_SMS
    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


class RowPlan(NamedTuple):
    """How the row kernel covers (rows, K): ``splits`` blocks per row of ``block`` threads,
    each over ``chunk`` consecutive elements (splits == 1: one pass, chunk == K)."""

    block: int
    splits: int
    chunk: int


def row_plan(rows, K, max_block=MAX_BLOCK, row_split=None, sms=None) -> RowPlan:
    """Launch plan of the row kernel. ``row_split`` forces the splits per row (1: one pass);
    None picks them: one wave is ``sms`` x (resident blocks per SM) blocks (1056 of 256
    threads on an H200); when ``rows`` fill less than half of it, each row gets
    ``wave // rows`` splits (the grid stays within one wave: no tail), but never so many that
    a thread gets fewer than ``MIN_SPLIT_WORK`` elements. Chunks are multiples of ``block``
    (aligned, coalesced starts); the splits are then recounted so that none is empty."""
    block = row_block(K, max_block)
    if row_split is None:
        sms = sm_count() if sms is None else sms
        wave = sms * min(BLOCKS_PER_SM, max(1, THREADS_PER_SM // block))
        splits = min(wave // rows, K // (block * MIN_SPLIT_WORK))
    else:
        splits = row_split
    splits = max(1, min(splits, MAX_GRID_Y, -(-K // block)))
    if splits == 1:
        return RowPlan(block, 1, K)
    chunk = -(-K // splits)
    chunk = -(-chunk // block) * block
    return RowPlan(block, -(-K // chunk), chunk)


def _use_shuffle(shuffle, block, dtype):
    """Shuffles need whole warps and move 32/64-bit registers (no 1-byte bool/uint8 lanes:
    those take the shared-memory tree)."""
    return bool(shuffle) and block % WARP_SIZE == 0 and np.dtype(dtype).itemsize >= 4


def _short_rows(K, max_block):
    """Rows shorter than a warp (or than the block cap) go to one thread per row."""
    return K < min(WARP_SIZE, max_block)


def column_config(K, ncols, split=COLUMN_SPLIT, max_block=MAX_BLOCK):
    """(bx, by) for the column kernel: split K over ``split`` threads only when columns are
    too few to fill the GPU (< 8192) and long enough (K >= 64) to be worth a shared step."""
    if split > 1 and K >= 64 and ncols < 8192:
        return max(max_block // split, 1), split
    return pow2_at_least(ncols, WARP_SIZE, max_block), 1


def _as_numeric(v: View):
    """bool reductions run on the same bytes as uint8 (sum of bools -> any = max)."""
    if v.dtype == np.bool_:
        return v._replace(buf=v.buf.view(np.uint8)), True
    return v, False


def reduce(op, x: View, axes, *, max_block=None, split=None, row_split=None, shuffle=None):
    """Contract ``reduce``. The keyword-only arguments override the launch configuration
    (tests run small blocks; benchmarks compare variants); None means production:
    ``max_block`` threads per block at most, ``split`` the column kernel's K-split,
    ``row_split`` the blocks per row of the row kernel (``row_plan``), ``shuffle`` warp
    shuffles or the shared-memory tree."""
    axes = tuple(axes)
    max_block = MAX_BLOCK if max_block is None else max_block
    split = COLUMN_SPLIT if split is None else split
    shuffle = WARP_SHUFFLE if shuffle is None else shuffle
    out_shape = [s for d, s in enumerate(x.shape) if d not in axes]
    n_out = numel(out_shape)
    v, is_bool = _as_numeric(x)
    if is_bool and op in ("sum", "prod"):
        op = "max" if op == "sum" else "min"  # any / all
    dtype = np.dtype(v.dtype)
    if n_out == 0 or x.numel == 0:  # an empty sum is 0 (max/min of nothing: ops raise first)
        out = memory.full(n_out, identity(op, dtype), dtype)
    else:
        buf, outer, K, inner = canonical(v, axes)
        out = _launch_reduce(op, buf, outer, K, inner, dtype, max_block, split, row_split,
                             shuffle)
    return out.view(np.bool_) if is_bool else out


def _launch_reduce(op, buf, outer, K, inner, dtype, max_block, split, row_split, shuffle):
    out = empty(outer * inner, dtype)
    ident = identity(op, dtype)
    stream = current_stream()
    if inner == 1 and not _short_rows(K, max_block):
        plan = row_plan(outer, K, max_block, row_split)

        def row_pass(src, length, chunk, splits, dst, block):
            kernel = row_reduce_kernel(op, dtype, block, _use_shuffle(shuffle, block, dtype))
            kernel[(outer, splits), block, stream](src, length, chunk, ident, dst)

        if plan.splits == 1:
            row_pass(buf, K, K, 1, out, plan.block)
        else:  # pass 1: (outer, splits) partials; pass 2: reduce each row of partials
            partials = empty(outer * plan.splits, dtype)
            row_pass(buf, K, plan.chunk, plan.splits, partials, plan.block)
            row_pass(partials, plan.splits, plan.splits, 1, out,
                     row_block(plan.splits, max_block))
    else:
        ncols = outer * inner
        bx, by = column_config(K, ncols, split, max_block)
        kernel = column_reduce_kernel(op, dtype, bx, by)
        kernel[(ncols + bx - 1) // bx, (bx, by), stream](buf, K, inner, ncols, ident, out)
    return out


def argreduce(op, x: View, axis, *, max_block=None, row_split=None, shuffle=None):
    """Contract ``argreduce``: (values, int64 indices) of the max/min along ``axis``. Keywords
    as for ``reduce``; a split row's second pass reduces the first pass's (value, index)
    pairs."""
    max_block = MAX_BLOCK if max_block is None else max_block
    shuffle = WARP_SHUFFLE if shuffle is None else shuffle
    v, is_bool = _as_numeric(x)
    dtype = np.dtype(v.dtype)
    n_out = x.numel // x.shape[axis] if x.shape[axis] else 0
    values = empty(n_out, dtype)
    indices = empty(n_out, np.int64)
    if n_out:
        buf, outer, K, inner = canonical(v, (axis,))
        stream = current_stream()
        if inner == 1 and not _short_rows(K, max_block):
            plan = row_plan(outer, K, max_block, row_split)
            ident = identity(op, dtype)

            def row_pass(src, src_i, length, chunk, splits, dst, dst_i, block, indexed):
                kernel = row_argreduce_kernel(op, dtype, block,
                                              _use_shuffle(shuffle, block, dtype), indexed)
                kernel[(outer, splits), block, stream](src, src_i, length, chunk, ident, dst,
                                                       dst_i)

            if plan.splits == 1:  # (indices stands in for the unread index input)
                row_pass(buf, indices, K, K, 1, values, indices, plan.block, False)
            else:
                pv = empty(outer * plan.splits, dtype)
                pi = empty(outer * plan.splits, np.int64)
                row_pass(buf, pi, K, plan.chunk, plan.splits, pv, pi, plan.block, False)
                row_pass(pv, pi, plan.splits, plan.splits, 1, values, indices,
                         row_block(plan.splits, max_block), True)
        else:
            ncols = outer * inner
            block = pow2_at_least(ncols, WARP_SIZE, max_block)
            grid = min((ncols + block - 1) // block, 65535)
            column_argreduce_kernel(op, dtype)[grid, block, stream](
                buf, K, inner, ncols, values, indices)
    return (values.view(np.bool_) if is_bool else values), indices
