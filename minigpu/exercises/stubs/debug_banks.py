"""Exercise ``debug_banks`` (chapter 14: debugging, docs/course/14-debugging.md).

out[r] = the sum of row r of x, (R, C) float32. A block of TILE threads owns TILE rows and
walks across them a TILE x TILE shared tile at a time. The grader launches
``kernel[ceil(R / TILE), TILE](x, out)``.

This kernel is correct but fails its budget. TODO: run the grader on it, compare its shared
load wavefronts per request with the reference's, and fix the cause (keep the shared tile:
reading x straight from global memory fails the coalescing budget).
Check it: python -m minigpu.exercises check debug_banks this_file.py
"""
from numba import cuda, float32

TILE = 32


@cuda.jit
def kernel(x, out):
    tile = cuda.shared.array((TILE, TILE), float32)
    R, C = x.shape
    t = cuda.threadIdx.x
    r0 = cuda.blockIdx.x * TILE
    acc = float32(0)
    for c0 in range(0, C, TILE):
        for j in range(TILE):
            r, c = r0 + j, c0 + t
            tile[j, t] = x[r, c] if r < R and c < C else float32(0)
        cuda.syncthreads()
        for j in range(TILE):
            acc += tile[t, j]
        cuda.syncthreads()
    if r0 + t < R:
        out[r0 + t] = acc
