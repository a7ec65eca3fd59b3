# Planted edge bug: The right halo guard off by one (`i + 1 < n - 1`): the last block's halo is
# 0 instead of x[n - 1] when n is one more than a multiple of TPB.
from numba import cuda, float32

TPB = 32   # threads per block (the grader launches kernel[ceil(n / TPB), TPB])
TILE = TPB + 2   # with the halo (shape arguments of cuda.shared.array must be constants)


@cuda.jit
def kernel(x, out):
    """out[i] = x[i-1] + x[i] + x[i+1] (0 outside the array). One thread per output; each block
    loads its TPB elements plus one halo element on each side into shared memory once, then
    every thread reads its three neighbours from shared memory."""
    tile = cuda.shared.array(TILE, float32)
    n = x.shape[0]
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    tile[t + 1] = x[i] if i < n else float32(0)
    if t == 0:
        tile[0] = x[i - 1] if 0 < i < n + 1 else float32(0)
    if t == TPB - 1:
        tile[TPB + 1] = x[i + 1] if i + 1 < n - 1 else float32(0)
    cuda.syncthreads()
    if i < n:
        out[i] = tile[t] + tile[t + 1] + tile[t + 2]
