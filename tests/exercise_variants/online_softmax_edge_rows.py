# Planted edge bug: The row guard off by one (`r > R`): the warp of row R runs, past the end,
# whenever R is not a multiple of WARPS.
import math

from numba import cuda, float32

WARPS = 4           # rows per block; the grader launches kernel[ceil(R / WARPS), 32 * WARPS]
FULL = 0xFFFFFFFF
NEG_INF = float32(-math.inf)


@cuda.jit(device=True)
def combine(m1, s1, m2, s2):
    """The (max, sum of exp(x - max)) of two parts from theirs: rescale each sum to the
    larger max. Two empty parts (max -inf) stay empty instead of giving exp(-inf + inf)."""
    m = max(m1, m2)
    if m == NEG_INF:
        return m, s1 + s2
    return m, s1 * math.exp(m1 - m) + s2 * math.exp(m2 - m)


@cuda.jit
def kernel(x, out):
    """out[r] = softmax(x[r]). Warp w of block b owns row b * WARPS + w; lane l takes
    columns l, l + 32, ... (coalesced). One pass keeps a running max m and a running sum s
    of exp(x - m), rescaled whenever m grows; shfl_xor_sync combines the lanes' (m, s) so
    every lane has the row's; a second pass writes exp(x - m) / s. x is read twice instead
    of three times (max, sum, write), and the statistics never need the whole row at once:
    the core of flash attention, which folds the second pass into the next matmul."""
    R, C = x.shape
    lane = cuda.threadIdx.x % 32
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    if r > R:
        return
    m = NEG_INF
    s = float32(0)
    for c in range(lane, C, 32):
        m, s = combine(m, s, x[r, c], float32(1))
    offset = 16
    while offset > 0:
        m, s = combine(m, s, cuda.shfl_xor_sync(FULL, m, offset),
                       cuda.shfl_xor_sync(FULL, s, offset))
        offset //= 2
    for c in range(lane, C, 32):
        out[r, c] = math.exp(x[r, c] - m) / s
