# Correct: one thread per row, so a warp's lanes read 32 different rows (uncoalesced).
import math

from numba import cuda, float32

WARPS = 4


@cuda.jit
def kernel(x, out):
    R, C = x.shape
    r = cuda.grid(1)
    if r < R:
        m = float32(-math.inf)
        for c in range(C):
            m = max(m, x[r, c])
        s = float32(0)
        for c in range(C):
            s += math.exp(x[r, c] - m)
        for c in range(C):
            out[r, c] = math.exp(x[r, c] - m) / s
