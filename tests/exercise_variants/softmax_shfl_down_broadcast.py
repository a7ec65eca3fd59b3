# Correct, written differently from the reference: shfl_down_sync reductions (lane 0 ends with
# the value), then shfl_sync broadcasts lane 0's to every lane.
import math

from numba import cuda, float32

WARPS = 4
FULL = 0xFFFFFFFF


@cuda.jit
def kernel(x, out):
    R, C = x.shape
    lane = cuda.threadIdx.x % 32
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    if r < R:
        m = float32(-math.inf)
        for c in range(lane, C, 32):
            m = max(m, x[r, c])
        for offset in (16, 8, 4, 2, 1):
            m = max(m, cuda.shfl_down_sync(FULL, m, offset))
        m = cuda.shfl_sync(FULL, m, 0)
        s = float32(0)
        for c in range(lane, C, 32):
            s += math.exp(x[r, c] - m)
        for offset in (16, 8, 4, 2, 1):
            s += cuda.shfl_down_sync(FULL, s, offset)
        s = cuda.shfl_sync(FULL, s, 0)
        for c in range(lane, C, 32):
            out[r, c] = math.exp(x[r, c] - m) / s
