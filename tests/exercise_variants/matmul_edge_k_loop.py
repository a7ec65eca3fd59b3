# Planted edge bug: The K loop stops one short (`range(0, K - 1, TILE)`): the last tile of K is
# skipped when K is one more than a multiple of TILE.
from numba import cuda, float32

TILE = 16   # the grader launches kernel[(ceil(N / TILE), ceil(M / TILE)), (TILE, TILE)]


@cuda.jit
def kernel(a, b, c):
    """c = a @ b, a (M, K), b (K, N). One thread per output c[row, col] (row from threadIdx.y,
    col from threadIdx.x: a warp covers 2 rows x 16 columns). For each TILE-wide step of K,
    the block loads a TILE x TILE tile of a and of b into shared memory (each thread one
    element of each, 0 outside), a barrier, TILE multiply-adds from shared memory, a barrier.
    Each element of a and b is read from global memory ceil(N/TILE) or ceil(M/TILE) times
    instead of N or M times."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    M, K = a.shape
    N = b.shape[1]
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0)
    for k0 in range(0, K - 1, TILE):
        sa[ty, tx] = a[row, k0 + tx] if row < M and k0 + tx < K else float32(0)
        sb[ty, tx] = b[k0 + ty, col] if k0 + ty < K and col < N else float32(0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        c[row, col] = acc
