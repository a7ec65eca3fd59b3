# The bounds checks are missing: ragged shapes read and write outside the arrays (memcheck).
from numba import cuda, float32

TILE = 32
ROWS = 8
PADDED = TILE + 1   # shape arguments of cuda.shared.array must be module constants


@cuda.jit
def kernel(a, out):
    tile = cuda.shared.array((TILE, PADDED), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    for k in range(0, TILE, ROWS):
        tile[ty + k, tx] = a[by + ty + k, bx + tx]
    cuda.syncthreads()
    for k in range(0, TILE, ROWS):
        out[bx + ty + k, by + tx] = tile[tx, ty + k]
