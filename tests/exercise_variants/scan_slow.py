# Correct, but each thread re-reads its block's prefix from global memory (O(TPB) loads each).
from numba import cuda, float32

TPB = 64


@cuda.jit
def kernel(x, out):
    t = cuda.threadIdx.x
    start = cuda.blockIdx.x * TPB
    i = start + t
    if i < x.shape[0]:
        acc = float32(0)
        for j in range(start, i + 1):
            acc += x[j]
        out[i] = acc
