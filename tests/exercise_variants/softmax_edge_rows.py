# Planted edge bug: The row guard off by one (`r > R`): the warp of row R runs, past the end,
# whenever R is not a multiple of WARPS.
import math

from numba import cuda, float32

WARPS = 4           # rows per block; the grader launches kernel[ceil(R / WARPS), 32 * WARPS]
FULL = 0xFFFFFFFF


@cuda.jit
def kernel(x, out):
    """out[r] = exp(x[r] - max(x[r])) / sum(exp(x[r] - max(x[r]))). Warp w of block b owns row
    b * WARPS + w; lane l handles columns l, l + 32, ...: a warp reads 32 consecutive floats
    (coalesced). The row's max and sum are combined across lanes with ``shfl_xor_sync`` (every
    lane ends with the total): no shared memory, no barrier."""
    R, C = x.shape
    lane = cuda.threadIdx.x % 32
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    if r > R:
        return
    m = float32(-math.inf)
    for c in range(lane, C, 32):
        m = max(m, x[r, c])
    off = 16
    while off > 0:
        m = max(m, cuda.shfl_xor_sync(FULL, m, off))
        off //= 2
    s = float32(0)
    for c in range(lane, C, 32):
        s += math.exp(x[r, c] - m)
    off = 16
    while off > 0:
        s += cuda.shfl_xor_sync(FULL, s, off)
        off //= 2
    for c in range(lane, C, 32):
        out[r, c] = math.exp(x[r, c] - m) / s
