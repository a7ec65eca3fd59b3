"""Exercise ``debug_uninit`` (chapter 14: debugging, docs/course/14-debugging.md).

out[b] = the maximum of block b's elements of x (i = b * TPB + threadIdx.x < n), float32.
The grader launches ``kernel[ceil(n / TPB), TPB](x, out)``; TPB is a power of two.

This kernel has a bug. TODO: run the grader on it, read the sanitizer's message (which
shared word, read before anything wrote it), and fix it.
Check it: python -m minigpu.exercises check debug_uninit this_file.py
"""
import math

from numba import cuda, float32

TPB = 64
NEG_INF = float32(-math.inf)


@cuda.jit
def kernel(x, out):
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    if i < x.shape[0]:
        buf[t] = x[i]
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            buf[t] = max(buf[t], buf[t + step])
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]
