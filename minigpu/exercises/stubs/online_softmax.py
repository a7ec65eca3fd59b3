"""Exercise ``online_softmax`` (chapter 12: online softmax, docs/course/12-online-softmax.md).

out[r] = softmax(x[r]) for every row of x (R, C), float32, reading x twice, not three times:
one pass for the statistics (a running max m and a running sum s of exp(x - m), rescaled
whenever m grows), one to write. The grader launches ``kernel[ceil(R / WARPS), 32 * WARPS](x,
out)``: one warp per row. Rows may be shorter than a warp, and their values large.

Budgets: global load sectors per element at most 1.1 x the reference's (two passes), coalesced
loads, no barrier. Check it: python -m minigpu.exercises check online_softmax this_file.py
"""
import math

from numba import cuda, float32

WARPS = 4
FULL = 0xFFFFFFFF
NEG_INF = float32(-math.inf)


@cuda.jit(device=True)
def combine(m1, s1, m2, s2):
    # TODO 1: the (max, sum) of two parts: m = max(m1, m2), s = s1 * exp(m1 - m) +
    #         s2 * exp(m2 - m). Careful when both parts are empty (m1 = m2 = -inf).
    return m1, s1


@cuda.jit
def kernel(x, out):
    R, C = x.shape
    lane = cuda.threadIdx.x % 32
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    m = NEG_INF
    s = float32(0)
    # TODO 2: warps past the last row return.
    # TODO 3: for the lane's columns c = lane, lane + 32, ...: (m, s) = combine(m, s, x, 1).
    # TODO 4: five shfl_xor_sync steps (16, 8, 4, 2, 1) combine the lanes' (m, s).
    # TODO 5: out[r, c] = exp(x[r, c] - m) / s for the lane's columns.
