"""Exercise ``transpose`` (chapter 1: coalescing, chapter 3: bank conflicts;
docs/course/01-coalescing.md, docs/course/03-bank-conflicts.md).

out[j, i] = a[i, j]; a is (rows, cols) float32, out is (cols, rows).
The grader launches ``kernel[(ceil(cols / TILE), ceil(rows / TILE)), (TILE, ROWS)](a, out)``
on shapes drawn from your TILE (you may change TILE and ROWS; TILE a multiple of ROWS).

Budgets, each at most 1.25 x the reference's with your TILE and ROWS: global load *and* store
sectors per request (a warp touches one row segment: coalesced both ways) and shared load
wavefronts per request (no bank conflicts: pad the tile).
Check it: python -m minigpu.exercises check transpose this_file.py
"""
from numba import cuda, float32

TILE = 32
ROWS = 8
PADDED = TILE + 1   # shape arguments of cuda.shared.array must be module constants


@cuda.jit
def kernel(a, out):
    tile = cuda.shared.array((TILE, TILE), float32)   # TODO 4: is this the right width?
    rows, cols = a.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    # TODO 1: for k in 0, ROWS, 2*ROWS, ...: copy a[by + ty + k, bx + tx] into the tile
    #         (skip elements outside a).
    # TODO 2: a barrier.
    # TODO 3: for each k: write out[bx + ty + k, by + tx] from the tile, so that consecutive
    #         lanes (tx) write consecutive addresses of out.
