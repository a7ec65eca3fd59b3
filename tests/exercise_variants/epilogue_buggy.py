# Adds bias[r] (a per-row bias) instead of bias[c]: wrong result (and out of bounds when R > C).
from numba import cuda, float32

BX, BY = 32, 8
SLOPE = float32(0.1)


@cuda.jit
def kernel(x, bias, out):
    R, C = x.shape
    c = cuda.blockIdx.x * BX + cuda.threadIdx.x
    r = cuda.blockIdx.y * BY + cuda.threadIdx.y
    if r < R and c < C:
        v = x[r, c] + bias[r % C]
        out[r, c] = v if v > 0 else SLOPE * v
