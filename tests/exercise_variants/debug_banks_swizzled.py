# A correct fix of debug_banks written differently: no padding; the tile is swizzled (row j's
# column t is stored at column t ^ j), so lane t reading row t, column j touches column
# j ^ t: 32 lanes, 32 different banks. TILE must be a power of two for the XOR to stay inside
# the row.
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
            tile[j, t ^ j] = x[r, c] if r < R and c < C else float32(0)
        cuda.syncthreads()
        for j in range(TILE):
            acc += tile[t, j ^ t]
        cuda.syncthreads()
    if r0 + t < R:
        out[r0 + t] = acc
