"""Reference fix: debug_bounds, a row scale whose guard swapped rows and columns (chapter 14)."""
from numba import cuda

BX = 32   # the grader launches kernel[(ceil(C / BX), ceil(R / BY)), (BX, BY)]
BY = 4


@cuda.jit
def kernel(x, scale, out):
    """out[r, c] = x[r, c] * scale[r]. One thread per element, threadIdx.x along a row
    (coalesced). The fix: the guard compares the row with the number of rows and the column
    with the number of columns (the bug compared each with the other's extent)."""
    rows, cols = x.shape
    c = cuda.blockIdx.x * BX + cuda.threadIdx.x
    r = cuda.blockIdx.y * BY + cuda.threadIdx.y
    if r < rows and c < cols:
        out[r, c] = x[r, c] * scale[r]
