# Correct: one warp per row, but lane 0 walks the row alone (one lane per request).
from numba import cuda, float32

WARPS = 4


@cuda.jit
def kernel(indptr, indices, data, x, y):
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    if r < y.shape[0] and cuda.threadIdx.x % 32 == 0:
        acc = float32(0)
        for j in range(indptr[r], indptr[r + 1]):
            acc += data[j] * x[indices[j]]
        y[r] = acc
