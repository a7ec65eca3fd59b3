# Correct: the naive kernel, every thread reads a row of a and a column of b from global memory.
from numba import cuda, float32

TILE = 16


@cuda.jit
def kernel(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    row = cuda.blockIdx.y * TILE + cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    if row < M and col < N:
        acc = float32(0)
        for k in range(K):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc
