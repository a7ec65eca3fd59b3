# Correct, written differently from the reference: the tile holds the block's elements only;
# threads at the block's edges read their outside neighbour from global memory.
from numba import cuda, float32

TPB = 32


@cuda.jit
def kernel(x, out):
    tile = cuda.shared.array(TPB, float32)
    n = x.shape[0]
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    tile[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    if i < n:
        left = tile[t - 1] if t > 0 else (x[i - 1] if i > 0 else float32(0))
        right = tile[t + 1] if t + 1 < TPB else (x[i + 1] if i + 1 < n else float32(0))
        out[i] = left + tile[t] + right
