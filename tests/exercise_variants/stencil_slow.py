# Correct but reads every input three times from global memory (no shared tile).
from numba import cuda, float32

TPB = 32


@cuda.jit
def kernel(x, out):
    n = x.shape[0]
    i = cuda.blockIdx.x * TPB + cuda.threadIdx.x
    if i < n:
        acc = x[i]
        if i > 0:
            acc += x[i - 1]
        if i + 1 < n:
            acc += x[i + 1]
        out[i] = acc
