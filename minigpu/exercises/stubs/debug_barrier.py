"""Exercise ``debug_barrier`` (chapter 14: debugging, docs/course/14-debugging.md).

y[r] = sum_k at[k, r] * x[k]: a matrix-vector product, the (R, K) matrix stored by columns as
``at`` (K, R), float32. One thread per output; x goes through shared memory a chunk of TPB
elements at a time. The grader launches ``kernel[ceil(R / TPB), TPB](at, x, y)``.

This kernel has a bug. TODO: run the grader on it, read the sanitizer's message (which
thread wrote, which read, between which barriers), and fix it keeping the shared chunk.
Check it: python -m minigpu.exercises check debug_barrier this_file.py
"""
from numba import cuda, float32

TPB = 32


@cuda.jit
def kernel(at, x, y):
    xs = cuda.shared.array(TPB, float32)
    K, R = at.shape
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x * TPB + t
    acc = float32(0)
    for k0 in range(0, K, TPB):
        xs[t] = x[k0 + t] if k0 + t < K else float32(0)
        cuda.syncthreads()
        if r < R:
            for j in range(min(TPB, K - k0)):
                acc += at[k0 + j, r] * xs[j]
    if r < R:
        y[r] = acc
