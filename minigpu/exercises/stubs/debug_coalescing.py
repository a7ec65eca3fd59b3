"""Exercise ``debug_coalescing`` (chapter 14: debugging, docs/course/14-debugging.md).

out[i] = 2 x[i] + y[i], float32, 1-D; each thread computes ITEMS elements.
The grader launches ``kernel[ceil(n / (TPB * ITEMS)), TPB](x, y, out)``.

This kernel is correct but fails its budget. TODO: run the grader on it, compare its global
sectors per request with the reference's, and change which elements each thread takes (not
how many: ITEMS stays at least 2) until a warp's load touches consecutive addresses.
Check it: python -m minigpu.exercises check debug_coalescing this_file.py
"""
from numba import cuda, float32

TPB = 64
ITEMS = 4
TWO = float32(2)


@cuda.jit
def kernel(x, y, out):
    n = x.shape[0]
    start = (cuda.blockIdx.x * TPB + cuda.threadIdx.x) * ITEMS
    for k in range(ITEMS):
        i = start + k
        if i < n:
            out[i] = TWO * x[i] + y[i]
