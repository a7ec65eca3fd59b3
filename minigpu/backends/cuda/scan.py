"""Scans (prefix sums and products) and stream compaction built on them.

``scan(op, x, axis)`` is ``cumsum`` / ``cumprod`` along one axis (optionally exclusive and/or
from the end). Like a reduction it is first made a dense ``(outer, K, inner)`` problem (a
dense input costs no copy) and two kernels cover its two shapes:

* ``inner == 1`` -> **row kernel** (``scan_row_kernel``): one block per row walks it in tiles
  of ``2*block`` elements; each tile is scanned in shared memory with Blelloch's
  work-efficient algorithm (an up-sweep that builds a tree of partial sums, a down-sweep that
  turns it into exclusive prefixes: ``2n`` combines and ``2 log2(n)`` barriers per tile), and
  a register *carry* chains the tiles. **Long rows, few of them** (``scan_plan``): a single
  block per row would leave the GPU idle (``x.cumsum(0)`` of a vector is one row), so the row
  is cut into ``splits`` chunks scanned by separate blocks (*scan*), the chunk totals are
  scanned by the same kernel (one short row each), and a third launch adds each chunk's
  exclusive prefix to its elements (*propagate*): scan-then-propagate, three launches that
  all read and write coalesced.
* ``inner > 1`` -> **column kernel** (``scan_column_kernel``): one thread per column walks
  down ``K`` sequentially; neighbouring threads own neighbouring columns, so every step is one
  coalesced load and store per warp, and the work is ``n`` combines (no tree needed: the
  parallelism is across columns).

Summation order: the tree adds in a different order from NumPy's sequential ``cumsum``, so
float results agree to rounding (the tests state the tolerance), integers exactly.

Stream compaction (``masked_select``, boolean-mask indexing ``x[mask]``) is a scan in
disguise: the inclusive prefix sum of the mask gives every kept element its output slot,
``pos - 1``, and the last prefix is the output's length; one more kernel moves the kept
elements (``compact_kernel``) or, for the backward and ``x[mask] = v``, brings them back
(``expand_kernel``). The length is read back to the host (a sync) because the output's shape
depends on it, as in PyTorch.

The lesson that leads to the row kernel (naive Hillis-Steele vs work-efficient Blelloch) is
``minigpu/lessons/scan.py``.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numba import cuda

from ..contract import View, numel
from . import memory
from .blocks import COMBINE, identity, launch, numba_type, pow2_at_least
from .device import SIMULATOR, WARP_SIZE, current_stream, empty
from .kernelspec import KernelSpec, reported
from .reduce import BLOCKS_PER_SM, MAX_GRID_Y, THREADS_PER_SM, sm_count

PRODUCTION_BLOCK = 256   # threads per block of the row kernel on a GPU: tiles of 512 elements
MAX_BLOCK = 32 if SIMULATOR else PRODUCTION_BLOCK
MIN_SPLIT_TILES = 4      # tiles per chunk, at least, before a row is split over blocks
SCAN_OPS = ("sum", "prod")


BANKS = 32               # shared-memory banks (4-byte words) on every CUDA GPU


# --- kernels ------------------------------------------------------------------------------------
@cuda.jit(device=True, inline=True)
def conflict_free(i):
    """Where element i of a Blelloch tile lives in shared memory: one padding slot after every
    ``BANKS`` elements, so the tree's power-of-two strides spread over all banks."""
    return i + i // BANKS


@reported(lambda k, x: [
    KernelSpec(f"row_blelloch[sum,{PRODUCTION_BLOCK}]",
               k("sum", x.f32, PRODUCTION_BLOCK, False, False), (x.f, 1, 1, x.s, x.f, x.f),
               PRODUCTION_BLOCK),
    KernelSpec(f"row_blelloch[prod,exclusive,reverse,{PRODUCTION_BLOCK}]",
               k("prod", x.f32, PRODUCTION_BLOCK, True, True), (x.f, 1, 1, x.s, x.f, x.f),
               PRODUCTION_BLOCK)])
@functools.lru_cache(maxsize=None)
def scan_row_kernel(op, dtype, block, exclusive, reverse):
    combine = COMBINE[op]
    nbtype = numba_type(dtype)
    tile = 2 * block
    PADDED = tile + tile // BANKS  # a closure constant: numba needs a literal size
    assert block & (block - 1) == 0, "Blelloch's tree needs a power-of-two block"

    @cuda.jit
    def scan_row(x, K, chunk, ident, out, partials):
        """out[row, p] = op over x[row, :p+1] (``exclusive``: x[row, :p]; ``reverse``: the
        row read from its end) for a dense (rows, K) input, within chunk ``blockIdx.y`` of
        ``chunk`` elements; the chunk's total goes to ``partials[row, part]`` when the row is
        split (gridDim.y > 1).

        Thread mapping: grid (rows, splits), 1-D block of ``block`` threads; the block walks
        its chunk in tiles of ``2*block`` elements, thread t owning tile elements 2t and 2t+1.
        Per tile, in a shared array of ``2*block`` elements: **up-sweep** (level by level,
        half as many threads each time, ``temp[bi] = temp[ai] (+) temp[bi]`` builds partial
        sums of 2, 4, 8, ... elements; the root holds the tile total), the root is replaced by
        the identity, **down-sweep** (back down the tree: each node passes its prefix to its
        left child and prefix (+) left sum to its right child), leaving exclusive prefixes.
        A register ``carry`` (the same in every thread) adds the earlier tiles.
        Memory: loads and stores are one coalesced pair of elements per thread. The tree
        reads shared memory with strides 2, 4, 8, ...: at stride 32 every thread of a warp
        would hit the same bank (a 32-way conflict). Element i therefore lives at
        ``i + i // 32`` (``conflict_free``: one padding word per 32), which spreads any such
        stride over all the banks.
        Why this and not Hillis-Steele (each element adds the one ``2**d`` to its left,
        log2(n) rounds): Blelloch does O(n) combines instead of O(n log n), so it stays
        bandwidth-bound as tiles grow (the scan lesson measures the two)."""
        temp = cuda.shared.array(PADDED, nbtype)
        row = cuda.blockIdx.x
        part = cuda.blockIdx.y
        tid = cuda.threadIdx.x
        base = row * K
        start = part * chunk
        end = min(start + chunk, K)
        carry = ident
        for t0 in range(start, end, tile):
            p0 = t0 + 2 * tid
            a = ident
            b = ident
            if p0 < end:
                a = x[base + (K - 1 - p0 if reverse else p0)]
            if p0 + 1 < end:
                b = x[base + (K - 2 - p0 if reverse else p0 + 1)]
            cuda.syncthreads()  # every thread is done reading the previous tile
            temp[conflict_free(2 * tid)] = a
            temp[conflict_free(2 * tid + 1)] = b
            offset = 1
            d = block
            while d > 0:  # up-sweep
                cuda.syncthreads()
                if tid < d:
                    bi = offset * (2 * tid + 2) - 1
                    ai = conflict_free(bi - offset)
                    bi = conflict_free(bi)
                    temp[bi] = combine(temp[ai], temp[bi])
                offset *= 2
                d //= 2
            cuda.syncthreads()
            total = temp[conflict_free(tile - 1)]
            cuda.syncthreads()  # every thread has the total before the root is cleared
            if tid == 0:
                temp[conflict_free(tile - 1)] = ident
            d = 1
            while d < tile:  # down-sweep
                offset //= 2
                cuda.syncthreads()
                if tid < d:
                    bi = offset * (2 * tid + 2) - 1
                    ai = conflict_free(bi - offset)
                    bi = conflict_free(bi)
                    left = temp[ai]
                    temp[ai] = temp[bi]
                    temp[bi] = combine(temp[bi], left)
                d *= 2
            cuda.syncthreads()
            ea = combine(carry, temp[conflict_free(2 * tid)])
            eb = combine(carry, temp[conflict_free(2 * tid + 1)])
            if not exclusive:
                ea = combine(ea, a)
                eb = combine(eb, b)
            if p0 < end:
                out[base + (K - 1 - p0 if reverse else p0)] = ea
            if p0 + 1 < end:
                out[base + (K - 2 - p0 if reverse else p0 + 1)] = eb
            carry = combine(carry, total)
        if cuda.gridDim.y > 1 and tid == 0:
            partials[row * cuda.gridDim.y + part] = carry

    return scan_row


@reported(lambda k, x: [KernelSpec("propagate[sum]", k("sum"), (x.f, 1, 1, 1, x.f, True), x.block)])
@functools.lru_cache(maxsize=None)
def propagate_kernel(op):
    combine = COMBINE[op]

    @cuda.jit
    def propagate(out, K, chunk, splits, prefix, reverse):
        """Pass 3 of a split scan: out[row, p] = prefix[row, s-1] (+) out[row, p] for every
        element of chunk s >= 1 (``prefix`` is the inclusive scan of the chunk totals).

        Thread mapping: one thread per element (grid-stride, 1-D). Memory: coalesced read and
        write of ``out``; the prefix read is the same address for a whole chunk (cached)."""
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            row = i // K
            k = i - row * K
            p = K - 1 - k if reverse else k
            s = p // chunk
            if s > 0:
                out[i] = combine(prefix[row * splits + s - 1], out[i])

    return propagate


@reported(lambda k, x: [KernelSpec("column[sum]", k("sum", False, False), (x.f, 1, 1, x.s, x.f),
                                   x.block)])
@functools.lru_cache(maxsize=None)
def scan_column_kernel(op, exclusive, reverse):
    combine = COMBINE[op]

    @cuda.jit
    def scan_column(x, K, inner, ident, out):
        """out[o, p, i] = op over x[o, :p+1, i] (``exclusive``/``reverse`` as the row kernel)
        for a dense (outer, K, inner) input.

        Thread mapping: one thread per column (o, i), grid-stride over outer*inner; it walks
        down K in order with a running value in a register. Memory: the lanes of a warp hold
        neighbouring i, so each step is one coalesced load and store per warp. O(n) work."""
        start, step = cuda.grid(1), cuda.gridsize(1)
        for c in range(start, x.size // K, step):
            o = c // inner
            base = o * K * inner + (c - o * inner)
            acc = ident
            for p in range(K):
                k = K - 1 - p if reverse else p
                v = x[base + k * inner]
                if exclusive:
                    out[base + k * inner] = acc
                    acc = combine(acc, v)
                else:
                    acc = combine(acc, v)
                    out[base + k * inner] = acc

    return scan_column


@reported(lambda k, x: [KernelSpec("compact", k, (x.f, x.b8, x.i64, x.f), x.block)])
@cuda.jit
def compact_kernel(x, mask, pos, out):
    """Stream compaction: out[pos[i] - 1] = x[i] wherever mask[i] (pos = inclusive prefix sum
    of the mask, so kept elements land in order, without gaps).

    Thread mapping: one thread per input element (grid-stride, 1-D). Memory: coalesced reads
    of x, mask and pos; the writes of a warp go to consecutive slots (a warp's kept elements
    are consecutive in the output), so they coalesce too."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, x.size, step):
        if mask[i]:
            out[pos[i] - 1] = x[i]


@reported(lambda k, x: [KernelSpec("expand", k, (x.f, x.b8, x.i64, x.s, x.f), x.block)])
@cuda.jit
def expand_kernel(src, mask, pos, zero, out):
    """The inverse of compaction: out[i] = src[pos[i] - 1] where mask[i], else zero (the
    backward of ``x[mask]``; ``x[mask] = v`` uses it to place v).

    Thread mapping: one thread per output element (grid-stride, 1-D); every output element is
    written once, no atomics (each has at most one source). Memory: coalesced."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        if mask[i]:
            out[i] = src[pos[i] - 1]
        else:
            out[i] = zero


# --- host side ----------------------------------------------------------------------------------
class ScanPlan(NamedTuple):
    """How the row kernel covers (rows, K): ``splits`` blocks per row of ``block`` threads,
    each over ``chunk`` consecutive elements (a multiple of the ``2*block`` tile)."""

    block: int
    splits: int
    chunk: int


def scan_plan(rows, K, max_block=MAX_BLOCK, split=None, sms=None) -> ScanPlan:
    """Threads per block: the smallest power of two whose tile (2*block) covers K, from one
    warp up to ``max_block``. ``split`` forces the blocks per row; None picks them: when the
    rows fill less than one wave of blocks (SMs x resident blocks per SM), each row is cut so
    that the grid is about one wave, but every chunk keeps ``MIN_SPLIT_TILES`` tiles."""
    block = pow2_at_least(-(-K // 2), min(WARP_SIZE, max_block), max_block)
    tile = 2 * block
    if split is None:
        sms = sm_count() if sms is None else sms
        wave = sms * min(BLOCKS_PER_SM, max(1, THREADS_PER_SM // block))
        split = min(wave // max(rows, 1), K // (tile * MIN_SPLIT_TILES))
    split = max(1, min(split, MAX_GRID_Y, -(-K // tile)))
    chunk = -(-K // split)
    chunk = -(-chunk // tile) * tile
    return ScanPlan(block, -(-K // chunk), chunk)


def _scan_rows(op, buf, rows, K, out, exclusive, reverse, max_block, split):
    dtype = np.dtype(buf.dtype)
    ident = identity(op, dtype)
    plan = scan_plan(rows, K, max_block, split)
    stream = current_stream()
    partials = empty(rows * plan.splits, dtype)
    scan_row_kernel(op, dtype, plan.block, exclusive, reverse)[
        (rows, plan.splits), plan.block, stream](buf, K, plan.chunk, ident, out, partials)
    if plan.splits > 1:
        prefix = empty(rows * plan.splits, dtype)
        _scan_rows(op, partials, rows, plan.splits, prefix, False, False, max_block, 1)
        launch(propagate_kernel(op), rows * K, out, K, plan.chunk, plan.splits, prefix, reverse)


def scan(op, x: View, axis, exclusive=False, reverse=False, *, max_block=None, split=None):
    """Contract ``scan``. ``max_block`` caps the row kernel's block (tile = 2*block) and
    ``split`` forces its blocks per row (tests run small tiles and several blocks); None means
    production (``scan_plan``)."""
    if op not in SCAN_OPS:
        raise ValueError(f"scan: unknown op {op!r}")
    max_block = MAX_BLOCK if max_block is None else max_block
    n = x.numel
    out = empty(n, x.dtype)
    if n == 0:
        return out
    buf = memory.dense(x)
    K = x.shape[axis]
    inner = numel(x.shape[axis + 1:])
    if inner == 1:
        _scan_rows(op, buf, n // K, K, out, exclusive, reverse, max_block, split)
    else:
        launch(scan_column_kernel(op, exclusive, reverse), n // K,
               buf, K, inner, identity(op, x.dtype), out)
    return out


def _positions(mask: View, max_block):
    """(dense bool mask, inclusive prefix sum of it as int64)."""
    m = memory.dense(mask)
    flags = memory.cast(View(m, (m.size,), (1,), 0), np.int64)
    return m, scan("sum", View(flags, (m.size,), (1,), 0), 0, max_block=max_block)


def masked_select(x: View, mask: View, *, max_block=None):
    """Contract ``masked_select``: scan the mask, read back the count, compact."""
    n = x.numel
    if n == 0:
        return empty(0, x.dtype)
    m, pos = _positions(mask, max_block)
    count = int(memory.to_numpy(View(pos, (1,), (1,), n - 1))[0])  # the sync: shape from data
    out = empty(count, x.dtype)
    if count:
        launch(compact_kernel, n, memory.dense(x), m, pos, out)
    return out


def masked_scatter(mask: View, src: View, *, max_block=None):
    """Contract ``masked_scatter``: the mask's scan gives each True element its source."""
    n = mask.numel
    out = empty(n, src.dtype)
    if n == 0:
        return out
    m, pos = _positions(mask, max_block)
    launch(expand_kernel, n, memory.dense(src), m, pos, identity("sum", src.dtype), out)
    return out
