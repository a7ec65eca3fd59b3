"""Exercise ``debug_race`` (chapter 14: debugging, docs/course/14-debugging.md).

counts[b] = how many of the elements i of block b (i = b * TPB + threadIdx.x < n) have
x[i] > 0; x is float32, counts int32. The grader launches ``kernel[ceil(n / TPB), TPB]``.

This kernel has a bug. TODO: run the grader on it, read the sanitizer's message, and fix it
so that every thread still counts its own element.
Check it: python -m minigpu.exercises check debug_race this_file.py
"""
from numba import cuda, int32

TPB = 64


@cuda.jit
def kernel(x, counts):
    count = cuda.shared.array(1, int32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.shape[0] and x[i] > 0:
        count[0] += 1
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]
