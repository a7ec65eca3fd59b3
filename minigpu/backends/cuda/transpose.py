"""Batched 2-D transpose: making a transposed view dense (``memory.contiguous`` routes here).

The source is a batch of matrices ``A[b]`` (R rows, C columns, row stride ``ld`` >= C, element
stride 1); the output is the dense ``(B, C, R)`` buffer of their transposes. Reading A along a
row and writing the output along a row cannot both be done by consecutive threads on consecutive
addresses, and that is the whole difficulty.

The production kernel stages a TILE x TILE tile in shared memory: it reads the tile row by row
(coalesced), synchronises, then writes the transposed tile row by row (coalesced), reading the
shared tile *by column*. With a TILE x TILE array that column read would put all 32 lanes
of a warp in one shared-memory bank (a 32-way conflict); one padding column (TILE x (TILE + 1))
shifts row k by k banks and makes it a single transaction. The kernels before it, the naive
transpose (coalesced reads, strided writes) and the unpadded tile, are the coalescing and
bank-conflict lessons (``minigpu/lessons/``); ``pad`` is a factory parameter for the latter.

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
from .device import SIMULATOR, current_stream
from .kernelspec import KernelSpec, reported

PRODUCTION_TILE, PRODUCTION_BLOCK_ROWS = 32, 8
TILE, BLOCK_ROWS = (8, 2) if SIMULATOR else (PRODUCTION_TILE, PRODUCTION_BLOCK_ROWS)
"""The configuration ``transpose_copy`` uses. Under the simulator each CUDA thread is an OS
thread, so the default there is a small tile; tests run the production one explicitly."""

MAX_BLOCKS = 8 if SIMULATOR else 65535


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


# --- the shared-memory tile ------------------------------------------------------------------
@reported(lambda k, x: [KernelSpec(
    f"tiled_padded[{PRODUCTION_TILE}x{PRODUCTION_BLOCK_ROWS}]",
    k(PRODUCTION_TILE, PRODUCTION_BLOCK_ROWS, 1, x.f32), (x.f, 0, 1, 0, 1, 1, 1, x.f),
    PRODUCTION_TILE * PRODUCTION_BLOCK_ROWS)])
@functools.lru_cache(maxsize=None)
def tiled_kernel(tile: int, block_rows: int, pad: int, dtype):
    """Build the tiled transpose kernel for a (tile, block_rows) block and a tile x (tile + pad)
    shared array of ``dtype``; production pads by 1 (pad 0 is the bank-conflict lesson's)."""
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
        Faster than the naive transpose: every global access coalesced (the shuffle happens
        in shared memory: ~7x DRAM's bandwidth on an H200, ~33 vs 4.8 TB/s, and far lower latency), each element read and written once.
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


def tiled_launch_config(spec: BatchedTranspose, tile: int, block_rows: int):
    """(grid, block): one block per tile up to MAX_BLOCKS, blocks (tile, block_rows)."""
    tiles = spec.batch * -(-spec.rows // tile) * -(-spec.cols // tile)
    return max(1, min(tiles, MAX_BLOCKS)), (tile, block_rows)


def transpose_copy(spec: BatchedTranspose, out, tile: int = TILE, block_rows: int = BLOCK_ROWS,
                   pad: int = 1):
    """Write the dense (batch, cols, rows) transpose of ``spec`` into ``out``; returns ``out``.
    ``pad`` is the shared tile's padding (1: conflict-free, production)."""
    if spec.numel == 0:
        return out
    kernel = tiled_kernel(tile, block_rows, pad, np.dtype(out.dtype))
    grid, block = tiled_launch_config(spec, tile, block_rows)
    kernel[grid, block, current_stream()](spec.buf, spec.offset, spec.batch, spec.batch_stride,
                                          spec.rows, spec.cols, spec.ld, out)
    return out
