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

The teaching ladder (``SUM_LADDER``, benchmarked in issue 7) sums a 1-D vector six ways; each
rung fixes the bottleneck of the one before (after M. Harris, "Optimizing Parallel Reduction
in CUDA"):

(a) ``interleaved``   shared-memory tree, ``tid % (2*s)`` picks the active threads: divergent
                      warps and a strided, bank-conflicted access pattern.
(b) ``sequential``    active threads are ``tid < s``: whole warps retire together, and the
                      accesses are contiguous (no bank conflicts).
(c) ``first_add``     each thread adds two elements while loading: half the blocks, and no
                      thread idles in the first tree step.
(d) ``shuffle_tail``  the last 32 partial sums are combined with ``shfl_down_sync`` inside
                      one warp: no shared memory and no barriers for the last 5 steps.
(e) ``warp_shuffle``  (the production block design) every thread first accumulates many
                      elements in a register (grid-stride loop), every warp reduces with
                      shuffles, and one barrier joins the per-warp partials: O(1) barriers per
                      block.
(f) ``grid_two_pass`` the production path, ``reduce``: (e)'s block reduction on a grid sized
                      to one full wave of the GPU (each block one contiguous chunk), then one
                      block over the partials: two launches for any n (one when n is too
                      short to split), and the same path serves every few-long-rows reduction.

Warp intrinsics: on a real GPU they always exist. Numba's stock CUDA simulator lacks them;
``minigpu.simulator`` adds them. ``WARP_SHUFFLE`` records, once at import, whether they can be used,
and the production kernels fall back to the pure shared-memory tree when they cannot.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numba
import numpy as np
from numba import cuda

from ..contract import View, is_contiguous, numel
from . import memory
from .device import SIMULATOR, WARP_SIZE, current_stream, empty, scalar

FULL_MASK = 0xFFFFFFFF
PRODUCTION_BLOCK = 256   # threads per block on a GPU
# The simulator runs one OS thread per CUDA thread: by default it gets smaller blocks (same
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
LADDER_MAX_GRID = 1024   # blocks of the grid-stride ladder rung (e)


def warp_shuffle_available() -> bool:
    """True when ``cuda.shfl_down_sync`` / ``shfl_xor_sync`` can run: always on a GPU; under the
    simulator only once ``simulator.install()`` has added them to its fake ``cuda`` module."""
    if not SIMULATOR:
        return True
    from numba.cuda.simulator import kernel as simkernel

    return all(hasattr(simkernel.FakeCUDAModule, name)
               for name in ("shfl_down_sync", "shfl_xor_sync"))


# Decided once: ``import minigpu`` runs ``minigpu.simulator.install()`` before this module loads.
WARP_SHUFFLE = warp_shuffle_available()


# --- combining two partial results ---------------------------------------------------------
@cuda.jit(device=True)
def _add(a, b):
    return a + b


@cuda.jit(device=True)
def _max(a, b):
    """max that propagates NaN like NumPy (``a != a`` is the NaN test)."""
    return a if (a > b or a != a) else b


@cuda.jit(device=True)
def _min(a, b):
    return a if (a < b or a != a) else b


COMBINE = {"sum": _add, "max": _max, "min": _min}


@cuda.jit(device=True)
def _better_max(va, ia, vb, ib):
    """True when (va, ia) beats (vb, ib) for argmax: larger value, then smaller index; NaN
    beats every number (NumPy's argmax returns the first NaN)."""
    if va != va:
        return not (vb != vb and ib < ia)
    if vb != vb:
        return False
    return va > vb or (va == vb and ia < ib)


@cuda.jit(device=True)
def _better_min(va, ia, vb, ib):
    if va != va:
        return not (vb != vb and ib < ia)
    if vb != vb:
        return False
    return va < vb or (va == vb and ia < ib)


BETTER = {"max": _better_max, "min": _better_min}


def identity(op, dtype):
    """The neutral element of ``op`` as a ``dtype`` scalar: 0, -inf/+inf (or the integer
    extremes), so padded lanes and empty threads never change the result."""
    dtype = np.dtype(dtype)
    if op == "sum":
        value = 0
    elif dtype.kind == "f":
        value = -np.inf if op == "max" else np.inf
    else:
        info = np.iinfo(dtype)
        value = info.min if op == "max" else info.max
    return scalar(value, dtype)


def _nb(dtype):
    return numba.from_dtype(np.dtype(dtype))


def _pow2_at_least(n, lo, hi):
    p = min(lo, hi)
    while p < n and p < hi:
        p *= 2
    return p


# --- block-wide building blocks (shared with softmax.py) -------------------------------------
@functools.lru_cache(maxsize=None)
def warp_allreduce(op):
    """Device function ``(val) -> total over the 32 lanes``, in every lane.

    Butterfly (``shfl_xor_sync`` with offsets 16, 8, 4, 2, 1): after step s each lane holds the
    total of a 2**s-lane group, so after 5 steps all lanes hold the warp total. Registers only:
    no shared memory, no barrier. All 32 lanes must call it together."""
    combine = COMBINE[op]

    @cuda.jit(device=True)
    def allreduce(val):
        offset = 16
        while offset > 0:
            val = combine(val, cuda.shfl_xor_sync(FULL_MASK, val, offset))
            offset //= 2
        return val

    return allreduce


@functools.lru_cache(maxsize=None)
def block_allreduce(op, block, shuffle):
    """Device function ``(val, scratch, identity) -> total over the block``, in every thread.

    ``block`` threads (a power of two, 1-D block); ``scratch`` is a shared array of ``block``
    elements that no other code touches during the call (give each call site its own, or put
    a barrier before reusing it).

    shuffle=True: every warp reduces in registers (``warp_allreduce``), lane 0 of each warp
    writes its partial to ``scratch[warp]``, one barrier, then every warp reduces the
    ``block/32`` partials again with shuffles, so all threads get the total without a second
    barrier. One barrier in all.
    shuffle=False: shared-memory tree with sequential addressing (``tid < s`` halves the active
    threads each step: no divergence inside warps, contiguous addresses, no bank conflicts);
    log2(block) barriers; every thread reads the total from ``scratch[0]``."""
    combine = COMBINE[op]
    nwarps = block // WARP_SIZE

    if shuffle:
        assert block % WARP_SIZE == 0, "the shuffle reduction needs whole warps"
        warp_reduce = warp_allreduce(op)

        @cuda.jit(device=True)
        def allreduce(val, scratch, ident):
            val = warp_reduce(val)
            if nwarps == 1:
                return val
            tid = cuda.threadIdx.x
            lane = tid % WARP_SIZE
            if lane == 0:
                scratch[tid // WARP_SIZE] = val
            cuda.syncthreads()
            partial = scratch[lane] if lane < nwarps else ident
            return warp_reduce(partial)

        return allreduce

    assert block & (block - 1) == 0, "the tree reduction needs a power-of-two block"

    @cuda.jit(device=True)
    def allreduce(val, scratch, ident):
        tid = cuda.threadIdx.x
        scratch[tid] = val
        cuda.syncthreads()
        s = block // 2
        while s > 0:
            if tid < s:
                scratch[tid] = combine(scratch[tid], scratch[tid + s])
            cuda.syncthreads()
            s //= 2
        return scratch[0]

    return allreduce


@functools.lru_cache(maxsize=None)
def block_argreduce(op, block, shuffle):
    """Like ``block_allreduce`` for (value, index) pairs:
    ``(v, i, sv, si, ident, ident_i) -> (v, i)`` with the best pair in every thread; ties keep
    the smaller index, so the identity pair (``ident``, an index past the end) never wins. Two
    scratch arrays (values and int64 indices) of ``block`` elements."""
    better = BETTER[op]
    nwarps = block // WARP_SIZE

    @cuda.jit(device=True)
    def pick(va, ia, vb, ib):
        if better(va, ia, vb, ib):
            return va, ia
        return vb, ib

    if shuffle:
        assert block % WARP_SIZE == 0, "the shuffle reduction needs whole warps"

        @cuda.jit(device=True)
        def warp_pairs(v, i):
            offset = 16
            while offset > 0:
                ov = cuda.shfl_xor_sync(FULL_MASK, v, offset)
                oi = cuda.shfl_xor_sync(FULL_MASK, i, offset)
                v, i = pick(v, i, ov, oi)
                offset //= 2
            return v, i

        @cuda.jit(device=True)
        def argreduce(v, i, sv, si, ident, ident_i):
            v, i = warp_pairs(v, i)
            if nwarps == 1:
                return v, i
            tid = cuda.threadIdx.x
            lane = tid % WARP_SIZE
            if lane == 0:
                sv[tid // WARP_SIZE] = v
                si[tid // WARP_SIZE] = i
            cuda.syncthreads()
            if lane < nwarps:
                v, i = sv[lane], si[lane]
            else:
                v, i = ident, ident_i
            return warp_pairs(v, i)

        return argreduce

    @cuda.jit(device=True)
    def argreduce(v, i, sv, si, ident, ident_i):
        tid = cuda.threadIdx.x
        sv[tid] = v
        si[tid] = i
        cuda.syncthreads()
        s = block // 2
        while s > 0:
            if tid < s:
                bv, bi = pick(sv[tid], si[tid], sv[tid + s], si[tid + s])
                sv[tid] = bv
                si[tid] = bi
            cuda.syncthreads()
            s //= 2
        return sv[0], si[0]

    return argreduce


# --- production kernels ----------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def row_reduce_kernel(op, dtype, block, shuffle):
    combine = COMBINE[op]
    allreduce = block_allreduce(op, block, shuffle)
    nbtype = _nb(dtype)

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


@functools.lru_cache(maxsize=None)
def column_reduce_kernel(op, dtype, bx, by):
    combine = COMBINE[op]
    nbtype = _nb(dtype)
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


@functools.lru_cache(maxsize=None)
def row_argreduce_kernel(op, dtype, block, shuffle, indexed=False):
    better = BETTER[op]
    argreduce_block = block_argreduce(op, block, shuffle)
    nbtype = _nb(dtype)

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
    return _pow2_at_least(K, WARP_SIZE, max_block)


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
    return _pow2_at_least(ncols, WARP_SIZE, max_block), 1


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
    if is_bool and op == "sum":
        op = "max"
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
            block = _pow2_at_least(ncols, WARP_SIZE, max_block)
            grid = min((ncols + block - 1) // block, 65535)
            column_argreduce_kernel(op, dtype)[grid, block, stream](
                buf, K, inner, ncols, values, indices)
    return (values.view(np.bool_) if is_bool else values), indices


# --- the teaching ladder: six ways to sum a vector ---------------------------------------------
@functools.lru_cache(maxsize=None)
def sum_interleaved_kernel(dtype, block):
    nbtype = _nb(dtype)

    @cuda.jit
    def sum_interleaved(x, n, zero, out):
        """(a) out[b] = sum of x[b*block : (b+1)*block].

        One thread per element, 1-D blocks of ``block``; each thread stores its element in
        shared memory, then the tree doubles the stride s: threads with tid % (2s) == 0 add
        sdata[tid + s]. The modulo keeps only every 2s-th thread active, so every warp
        diverges at every step (and ``%`` is slow); the active threads touch addresses 2s apart
        (shared-memory bank conflicts)."""
        sdata = cuda.shared.array(block, nbtype)
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * block + tid
        sdata[tid] = x[i] if i < n else zero
        cuda.syncthreads()
        s = 1
        while s < block:
            if tid % (2 * s) == 0:
                sdata[tid] += sdata[tid + s]
            cuda.syncthreads()
            s *= 2
        if tid == 0:
            out[cuda.blockIdx.x] = sdata[0]

    return sum_interleaved


@functools.lru_cache(maxsize=None)
def sum_sequential_kernel(dtype, block):
    nbtype = _nb(dtype)
    tree = block_allreduce("sum", block, False)

    @cuda.jit
    def sum_sequential(x, n, zero, out):
        """(b) out[b] = sum of x[b*block : (b+1)*block].

        Same mapping as (a); the tree (``block_allreduce(shuffle=False)``) halves s from
        block/2 and threads tid < s add sdata[tid + s]. Active threads are contiguous: whole
        warps are either all active or all idle (no divergence until s < 32), and a warp reads
        32 consecutive words (no bank conflicts). Still, half the threads idle from the first
        step on."""
        sdata = cuda.shared.array(block, nbtype)
        i = cuda.blockIdx.x * block + cuda.threadIdx.x
        total = tree(x[i] if i < n else zero, sdata, zero)
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = total

    return sum_sequential


@functools.lru_cache(maxsize=None)
def sum_first_add_kernel(dtype, block):
    nbtype = _nb(dtype)
    tree = block_allreduce("sum", block, False)

    @cuda.jit
    def sum_first_add(x, n, zero, out):
        """(c) out[b] = sum of x[2*b*block : 2*(b+1)*block].

        Each thread loads two elements block apart (both loads coalesced) and stores their
        sum: the grid halves and no thread is idle in what was the first tree step. Tree as
        in (b)."""
        sdata = cuda.shared.array(block, nbtype)
        i = cuda.blockIdx.x * (2 * block) + cuda.threadIdx.x
        acc = x[i] if i < n else zero
        if i + block < n:
            acc += x[i + block]
        total = tree(acc, sdata, zero)
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = total

    return sum_first_add


@functools.lru_cache(maxsize=None)
def sum_shuffle_tail_kernel(dtype, block):
    nbtype = _nb(dtype)

    @cuda.jit
    def sum_shuffle_tail(x, n, zero, out):
        """(d) as (c), but the tree stops at 32 partials; warp 0 finishes them with
        ``shfl_down_sync`` (offsets 16..1): lanes exchange registers directly, so the last five
        steps need neither shared memory nor barriers (the classic "unroll the last warp",
        without relying on implicit warp synchrony)."""
        sdata = cuda.shared.array(block, nbtype)
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * (2 * block) + tid
        acc = x[i] if i < n else zero
        if i + block < n:
            acc += x[i + block]
        if block > WARP_SIZE:
            sdata[tid] = acc
            cuda.syncthreads()
            s = block // 2
            while s >= WARP_SIZE:
                if tid < s:
                    sdata[tid] += sdata[tid + s]
                cuda.syncthreads()
                s //= 2
            acc = sdata[tid] if tid < WARP_SIZE else zero
        if tid < WARP_SIZE:
            offset = 16
            while offset > 0:
                acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)
                offset //= 2
            if tid == 0:
                out[cuda.blockIdx.x] = acc

    return sum_shuffle_tail


@functools.lru_cache(maxsize=None)
def sum_warp_shuffle_kernel(dtype, block):
    nbtype = _nb(dtype)
    allreduce = block_allreduce("sum", block, True)

    @cuda.jit
    def sum_warp_shuffle(x, n, zero, out):
        """(e) out[b] = sum of x[b*block + t + k*gridsize] over t, k: a grid-stride loop.

        Each thread accumulates many elements in a register (coalesced loads, no
        synchronisation), then ``block_allreduce``: shuffles inside every warp, one barrier,
        shuffles over the per-warp partials. The grid is capped (``LADDER_MAX_GRID``), so a
        second launch of one block finishes any n. This is the design of the production row
        kernel."""
        scratch = cuda.shared.array(block, nbtype)
        acc = zero
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            acc += x[i]
        acc = allreduce(acc, scratch, zero)
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = acc

    return sum_warp_shuffle


def _ladder_run(factory, per_thread, max_grid, v: View, block):
    """Launch one rung pass after pass on the per-block partials until one value is left."""
    dtype = np.dtype(v.dtype)
    n = v.numel
    if n == 0:
        return memory.full(1, 0, dtype)
    buf = _dense_slice(v.buf, v.offset, n) if v.is_contiguous() else memory.contiguous(v)
    kernel = factory(dtype, block)
    zero = scalar(0, dtype)
    while True:
        grid = min(-(-n // (block * per_thread)), max_grid)
        out = empty(grid, dtype)
        kernel[grid, block, current_stream()](buf, n, zero, out)
        if grid == 1:
            return out
        buf, n = out, grid


def sum_interleaved(x: View, block=MAX_BLOCK):
    return _ladder_run(sum_interleaved_kernel, 1, 2 ** 31 - 1, x, block)


def sum_sequential(x: View, block=MAX_BLOCK):
    return _ladder_run(sum_sequential_kernel, 1, 2 ** 31 - 1, x, block)


def sum_first_add(x: View, block=MAX_BLOCK):
    return _ladder_run(sum_first_add_kernel, 2, 2 ** 31 - 1, x, block)


def sum_shuffle_tail(x: View, block=MAX_BLOCK):
    return _ladder_run(sum_shuffle_tail_kernel, 2, 2 ** 31 - 1, x, block)


def sum_warp_shuffle(x: View, block=MAX_BLOCK, max_grid=LADDER_MAX_GRID):
    return _ladder_run(sum_warp_shuffle_kernel, 1, max_grid, x, block)


def sum_grid_two_pass(x: View, block=MAX_BLOCK, splits=None):
    """(f) The production ``reduce("sum")`` of the whole vector: a 1-D vector is one row, so
    ``row_plan`` splits it over one wave of blocks (``row_reduce`` on a (1, splits) grid,
    each block one contiguous, block-aligned chunk, (e)'s register loop and shuffle
    reduction), then one more ``row_reduce`` block reduces the ``splits`` partials. Versus
    (e): the grid comes from the device (SMs x resident blocks per SM, so every SM is busy
    and no tail wave is left) instead of a fixed cap, and the same two-pass path serves any
    (rows, K) reduction whose rows are too few to fill the GPU, not only a vector. A vector
    too short to split (n < 2 x block x ``MIN_SPLIT_WORK``) takes one pass. ``splits``
    forces the number of chunks."""
    if x.numel == 0:
        return memory.full(1, 0, x.dtype)
    return reduce("sum", x, tuple(range(len(x.shape))), max_block=block, row_split=splits)


SUM_LADDER = {
    "interleaved": sum_interleaved,
    "sequential": sum_sequential,
    "first_add": sum_first_add,
    "shuffle_tail": sum_shuffle_tail,
    "warp_shuffle": sum_warp_shuffle,
    "grid_two_pass": sum_grid_two_pass,
}
# Rungs that need warp intrinsics (skipped under a simulator without them).
SHUFFLE_RUNGS = ("shuffle_tail", "warp_shuffle")
