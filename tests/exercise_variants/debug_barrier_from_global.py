# A "fix" of debug_barrier that hides the race by dropping the shared chunk: every thread
# reads x[k] from global memory itself. Correct and race-free, and it issues a load request
# per warp for every k besides the matrix's: over the budget on load requests per output.
from numba import cuda, float32

TPB = 32


@cuda.jit
def kernel(at, x, y):
    K, R = at.shape
    r = cuda.blockIdx.x * TPB + cuda.threadIdx.x
    if r < R:
        acc = float32(0)
        for k in range(K):
            acc += at[k, r] * x[k]
        y[r] = acc
