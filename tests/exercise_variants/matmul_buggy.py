# The barrier after the multiply-adds is missing: fast threads overwrite tiles others still read.
from numba import cuda, float32

TILE = 16


@cuda.jit
def kernel(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    M, K = a.shape
    N = b.shape[1]
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0)
    for k0 in range(0, K, TILE):
        sa[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0)
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
    if row < M and col < N:
        c[row, col] = acc
