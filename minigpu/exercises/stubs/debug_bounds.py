"""Exercise ``debug_bounds`` (chapter 14: debugging, docs/course/14-debugging.md).

out[r, c] = x[r, c] * scale[r]; x and out are (R, C) float32, scale is (R,).
The grader launches ``kernel[(ceil(C / BX), ceil(R / BY)), (BX, BY)](x, scale, out)``.

This kernel has a bug. TODO: run the grader on it, read the sanitizer's message (which
array, which index, which shape), find the line and fix it without dropping any element.
Check it: python -m minigpu.exercises check debug_bounds this_file.py
"""
from numba import cuda

BX = 32
BY = 4


@cuda.jit
def kernel(x, scale, out):
    width, height = x.shape
    c = cuda.blockIdx.x * BX + cuda.threadIdx.x
    r = cuda.blockIdx.y * BY + cuda.threadIdx.y
    if r < height and c < width:
        out[r, c] = x[r, c] * scale[r]
