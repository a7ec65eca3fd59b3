# A "fix" of debug_bounds that silences the sanitizer without understanding the shapes: both
# indices are kept under the smaller extent. No access is out of bounds any more, but the
# elements past it are never written (the grader's outputs start as NaN).
from numba import cuda

BX = 32
BY = 4


@cuda.jit
def kernel(x, scale, out):
    width, height = x.shape
    c = cuda.blockIdx.x * BX + cuda.threadIdx.x
    r = cuda.blockIdx.y * BY + cuda.threadIdx.y
    smaller = min(width, height)
    if r < smaller and c < smaller:
        out[r, c] = x[r, c] * scale[r]
