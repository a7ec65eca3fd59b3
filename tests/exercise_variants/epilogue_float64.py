# Correct and coalesced, but the bare 0.1 makes the negative branch compute in float64
# (static limit: no float64 instruction).
from numba import cuda

BX, BY = 32, 8


@cuda.jit
def kernel(x, bias, out):
    R, C = x.shape
    c = cuda.blockIdx.x * BX + cuda.threadIdx.x
    r = cuda.blockIdx.y * BY + cuda.threadIdx.y
    if r < R and c < C:
        v = x[r, c] + bias[c]
        out[r, c] = v if v > 0 else 0.1 * v
