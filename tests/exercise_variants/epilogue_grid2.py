# Correct, written differently from the reference: cuda.grid(2) for the indices.
from numba import cuda, float32

BX, BY = 32, 8
SLOPE = float32(0.1)


@cuda.jit
def kernel(x, bias, out):
    c, r = cuda.grid(2)
    if r < x.shape[0] and c < x.shape[1]:
        v = x[r, c] + bias[c]
        out[r, c] = v if v > 0 else SLOPE * v
