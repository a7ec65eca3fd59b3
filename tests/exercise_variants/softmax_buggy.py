# shfl_down_sync instead of shfl_xor_sync: only lane 0 ends with the row's max and sum.
import math

from numba import cuda, float32

WARPS = 4
FULL = 0xFFFFFFFF


@cuda.jit
def kernel(x, out):
    R, C = x.shape
    lane = cuda.threadIdx.x % 32
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    if r >= R:
        return
    m = float32(-math.inf)
    for c in range(lane, C, 32):
        m = max(m, x[r, c])
    off = 16
    while off > 0:
        m = max(m, cuda.shfl_down_sync(FULL, m, off))
        off //= 2
    s = float32(0)
    for c in range(lane, C, 32):
        s += math.exp(x[r, c] - m)
    off = 16
    while off > 0:
        s += cuda.shfl_down_sync(FULL, s, off)
        off //= 2
    for c in range(lane, C, 32):
        out[r, c] = math.exp(x[r, c] - m) / s
