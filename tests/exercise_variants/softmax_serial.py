# Correct, no barrier, coalescing not at issue: lane 0 of each warp does the whole row alone
# while 31 lanes idle (one lane per request: 32 times the reference's load requests per row).
import math

from numba import cuda, float32

WARPS = 4


@cuda.jit
def kernel(x, out):
    R, C = x.shape
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    if r < R and cuda.threadIdx.x % 32 == 0:
        m = float32(-math.inf)
        for c in range(C):
            m = max(m, x[r, c])
        s = float32(0)
        for c in range(C):
            s += math.exp(x[r, c] - m)
        for c in range(C):
            out[r, c] = math.exp(x[r, c] - m) / s
