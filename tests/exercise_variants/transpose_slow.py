# Correct and coalesced, but the tile is not padded: reading a tile column is a 32-way
# bank conflict (32 wavefronts per request).
from numba import cuda, float32

TILE = 32
ROWS = 8
PADDED = TILE + 1   # shape arguments of cuda.shared.array must be module constants


@cuda.jit
def kernel(a, out):
    tile = cuda.shared.array((TILE, TILE), float32)
    rows, cols = a.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    for k in range(0, TILE, ROWS):
        r, c = by + ty + k, bx + tx
        if r < rows and c < cols:
            tile[ty + k, tx] = a[r, c]
    cuda.syncthreads()
    for k in range(0, TILE, ROWS):
        r, c = bx + ty + k, by + tx
        if r < cols and c < rows:
            out[r, c] = tile[tx, ty + k]
