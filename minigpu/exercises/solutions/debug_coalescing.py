"""Reference fix: debug_coalescing, several elements per thread, read coalesced (chapter 14)."""
from numba import cuda, float32

TPB = 64     # the grader launches kernel[ceil(n / (TPB * ITEMS)), TPB]
ITEMS = 4    # elements per thread
TWO = float32(2)


@cuda.jit
def kernel(x, y, out):
    """out[i] = 2 x[i] + y[i]; each block handles TPB * ITEMS consecutive elements, each thread
    ITEMS of them. The fix: in step k the block's threads take the k-th TPB-long stretch, so
    consecutive lanes touch consecutive addresses (coalesced); the bug gave each thread ITEMS
    consecutive elements, so the lanes of one load were ITEMS words apart."""
    n = x.shape[0]
    start = cuda.blockIdx.x * TPB * ITEMS + cuda.threadIdx.x
    for k in range(ITEMS):
        i = start + k * TPB
        if i < n:
            out[i] = TWO * x[i] + y[i]
