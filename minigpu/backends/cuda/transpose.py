"""Batched 2-D transpose: making a transposed view dense (``memory.contiguous`` routes here).

The source is a batch of matrices ``A[b]`` (R rows, C columns, row stride ``ld`` >= C, element
stride 1); the output is the dense ``(B, C, R)`` buffer of their transposes. Reading A along a
row and writing the output along a row cannot both be done by consecutive threads on consecutive
addresses, and that is the whole difficulty. Three kernels, in the order a course teaches them:

1. ``transpose_naive`` (lesson: coalescing). One thread per element, consecutive threads on
   consecutive columns of A: the reads are coalesced, the writes land R elements apart, so each
   warp's store is split into 32 separate 32-byte sectors (8x the traffic for float32).
   ``memory.gather_strided_kernel`` is the mirror image: coalesced writes, scattered reads.
2. ``transpose_tiled_naive`` (lesson: shared-memory tiling). A block stages a TILE x TILE tile
   in shared memory: it reads the tile row by row (coalesced), synchronises, then writes the
   transposed tile row by row (coalesced), reading the shared tile *by column*. Global traffic is
   now minimal, but with a TILE x TILE array the column read puts all 32 lanes of a warp on
   addresses 32 words apart, i.e. in the same shared-memory bank: a 32-way bank conflict, the
   read is replayed 32 times.
3. ``transpose_tiled_padded`` (lesson: padding against bank conflicts). The same kernel with a
   TILE x (TILE + 1) array: one unused column shifts row k by k banks, so a column's 32 words
   fall in 32 different banks and the read is a single transaction. Production path.

Tile size and rows per thread are kernel-factory parameters (closure constants fix the shared
array's shape at compile time). Production: TILE=32 (a warp's width), BLOCK_ROWS=8 (a 32x8
block, each thread moves TILE/BLOCK_ROWS = 4 elements: fewer, busier threads amortise the index
math and the barrier). Tests use small tiles under the simulator.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple

import numba
import numpy as np
from numba import cuda

from ..contract import View
from .device import SIMULATOR, current_stream, grid_1d

PRODUCTION_TILE, PRODUCTION_BLOCK_ROWS = 32, 8
TILE, BLOCK_ROWS = (8, 2) if SIMULATOR else (PRODUCTION_TILE, PRODUCTION_BLOCK_ROWS)
"""The configuration ``transpose_copy`` uses. Under the simulator each CUDA thread is an OS
thread, so the default there is a small tile; tests run the production one explicitly."""

MAX_BLOCKS = 8 if SIMULATOR else 65535
NAIVE_BLOCK = 32 if SIMULATOR else 256


class BatchedTranspose(NamedTuple):
    """A view that is the last-two-dims transpose of a batch of row-major matrices.

    Source element (b, r, c) lives at ``buf[offset + b*batch_stride + r*ld + c]``, for
    b < batch, r < rows, c < cols; the view (and the output) is (batch, cols, rows).
    """

    buf: Any
    offset: int
    batch: int
    batch_stride: int
    rows: int
    cols: int
    ld: int

    @property
    def numel(self):
        return self.batch * self.rows * self.cols


def as_batched_transpose(v: View):
    """The :class:`BatchedTranspose` that ``v`` is, or None.

    Recognised: shape ``(..., C, R)`` with strides ``(..., 1, ld)``, ``ld >= C`` and C, R > 1
    (a transpose of the last two dims of an (..., R, C) tensor, possibly a column slice of a
    wider one), whose batch dimensions collapse into one (batch, batch_stride): dense batches,
    a step-sliced or a broadcast (stride 0) batch all qualify.
    """
    if len(v.shape) < 2:
        return None
    cols, rows = int(v.shape[-2]), int(v.shape[-1])
    col_stride, ld = int(v.strides[-2]), int(v.strides[-1])
    if col_stride != 1 or cols < 2 or rows < 2 or ld < cols:
        return None
    batch, batch_stride = 1, 0
    for extent, stride in zip(reversed(v.shape[:-2]), reversed(v.strides[:-2])):
        extent, stride = int(extent), int(stride)
        if extent == 1:
            continue
        if batch == 1:
            batch, batch_stride = extent, stride
        elif stride == batch_stride * batch:
            batch *= extent
        else:
            return None
    return BatchedTranspose(v.buf, int(v.offset), batch, batch_stride, rows, cols, ld)


# --- 1. coalesced reads, strided writes --------------------------------------------------------
@cuda.jit
def transpose_naive(src, offset, batch, batch_stride, rows, cols, ld, out):
    """out[b, c, r] = A[b, r, c], no shared memory.

    Thread mapping: grid-stride over source elements in (b, r, c) order, c fastest.
    Block/grid: 1-D, ``naive_launch_config``.
    Memory: a warp reads 32 consecutive elements of a row of A (coalesced) and writes them to
    32 different output rows, ``rows`` elements apart (uncoalesced: one sector per lane).
    The baseline the tiled kernels beat.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    plane = rows * cols
    for i in range(start, batch * plane, step):
        c = i % cols
        r = (i // cols) % rows
        b = i // plane
        out[b * plane + c * rows + r] = src[offset + b * batch_stride + r * ld + c]


def naive_launch_config(spec: BatchedTranspose) -> tuple[int, int]:
    return grid_1d(spec.numel, NAIVE_BLOCK, MAX_BLOCKS), NAIVE_BLOCK


# --- 2. and 3. shared-memory tiles ---------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _tiled(tile: int, block_rows: int, pad: int, dtype):
    """Build the tiled transpose kernel for a (tile, block_rows) block and a tile x (tile + pad)
    shared array of ``dtype``; pad 0 is ``transpose_tiled_naive``, pad 1 the padded one."""
    assert tile % block_rows == 0, "each thread moves tile // block_rows elements"
    width = tile + pad
    element = numba.from_dtype(np.dtype(dtype))

    @cuda.jit
    def transpose_tiled(src, offset, batch, batch_stride, rows, cols, ld, out):
        """out[b, c, r] = A[b, r, c] through a shared-memory tile.

        Thread mapping: block (TILE, BLOCK_ROWS) owns one TILE x TILE tile at a time (rows
        r0.., columns c0.. of one matrix); thread (tx, ty) moves elements ty, ty + BLOCK_ROWS,
        ... of column tx. Tiles are numbered (b, tile row, tile column), tile column fastest,
        and blocks stride over them (grid-stride), so any batch size and matrix fits one grid.
        Block/grid: (TILE, BLOCK_ROWS) threads, 1-D grid ``tiled_launch_config``.
        Memory: read tile row (r0 + ty + k) at column (c0 + tx): a warp reads consecutive
        columns of A, coalesced. After the barrier, write output row (c0 + ty + k) at column
        (r0 + tx): consecutive output addresses, coalesced; the value comes from the shared
        tile's *column* ``tile[tx, ty + k]``. Without padding those 32 lanes hit one bank
        (32-way conflict); with TILE + 1 columns, 32 different banks (for 8-byte elements,
        2 per lane in half-warp phases, also conflict-free). Out-of-range lanes skip the
        global access but still reach both barriers.
        Faster than ``transpose_naive``: every global access coalesced (the shuffle happens
        in shared memory, ~100x the bandwidth of DRAM), each element read and written once.
        """
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tile_rows = (rows + tile - 1) // tile
        tile_cols = (cols + tile - 1) // tile
        per_matrix = tile_rows * tile_cols
        buf = cuda.shared.array((tile, width), element)
        for t in range(cuda.blockIdx.x, batch * per_matrix, cuda.gridDim.x):
            b = t // per_matrix
            r0 = ((t % per_matrix) // tile_cols) * tile
            c0 = (t % tile_cols) * tile
            base = offset + b * batch_stride
            c = c0 + tx
            for k in range(0, tile, block_rows):
                r = r0 + ty + k
                if r < rows and c < cols:
                    buf[ty + k, tx] = src[base + r * ld + c]
            cuda.syncthreads()
            r = r0 + tx
            dst = b * rows * cols
            for k in range(0, tile, block_rows):
                c = c0 + ty + k
                if c < cols and r < rows:
                    out[dst + c * rows + r] = buf[tx, ty + k]
            cuda.syncthreads()  # the next tile may not overwrite buf before all have read it

    return transpose_tiled


def transpose_tiled_naive(tile: int, block_rows: int, dtype):
    """The tiled kernel over a TILE x TILE shared array: coalesced global traffic, but the
    column read of the tile is a TILE-way bank conflict (lesson 2)."""
    return _tiled(tile, block_rows, 0, np.dtype(dtype))


def transpose_tiled_padded(tile: int, block_rows: int, dtype):
    """The tiled kernel over a TILE x (TILE + 1) shared array: the padding column spreads a
    tile column over all banks, so the column read is conflict-free (lesson 3; production)."""
    return _tiled(tile, block_rows, 1, np.dtype(dtype))


def tiled_launch_config(spec: BatchedTranspose, tile: int, block_rows: int):
    """(grid, block): one block per tile up to MAX_BLOCKS, blocks (tile, block_rows)."""
    tiles = spec.batch * -(-spec.rows // tile) * -(-spec.cols // tile)
    return max(1, min(tiles, MAX_BLOCKS)), (tile, block_rows)


def transpose_copy(spec: BatchedTranspose, out, variant: str = "padded", tile: int = TILE,
                   block_rows: int = BLOCK_ROWS):
    """Write the dense (batch, cols, rows) transpose of ``spec`` into ``out``; returns ``out``.

    ``variant`` picks the lesson kernel: 'padded' (production), 'tiled_naive' or 'naive'.
    """
    args = (spec.buf, spec.offset, spec.batch, spec.batch_stride, spec.rows, spec.cols,
            spec.ld, out)
    if spec.numel == 0:
        return out
    if variant == "naive":
        grid, block = naive_launch_config(spec)
        transpose_naive[grid, block, current_stream()](*args)
        return out
    factory = {"padded": transpose_tiled_padded, "tiled_naive": transpose_tiled_naive}[variant]
    kernel = factory(tile, block_rows, out.dtype)
    grid, block = tiled_launch_config(spec, tile, block_rows)
    kernel[grid, block, current_stream()](*args)
    return out
