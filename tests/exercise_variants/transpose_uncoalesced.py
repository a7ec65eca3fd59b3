# Correct, no shared memory: reads rows but writes columns of out (32 sectors per store request).
from numba import cuda

TILE = 32
ROWS = 8
PADDED = TILE + 1   # shape arguments of cuda.shared.array must be module constants


@cuda.jit
def kernel(a, out):
    rows, cols = a.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    for k in range(0, TILE, ROWS):
        r, c = by + ty + k, bx + tx
        if r < rows and c < cols:
            out[c, r] = a[r, c]
