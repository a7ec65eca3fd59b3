# A correct fix of debug_race written differently: no shared counter at all; the barrier
# itself counts (cuda.syncthreads_count returns how many threads passed a true predicate).
from numba import cuda

TPB = 64


@cuda.jit
def kernel(x, counts):
    i = cuda.blockIdx.x * TPB + cuda.threadIdx.x
    positive = i < x.shape[0] and x[i] > 0
    n = cuda.syncthreads_count(positive)
    if cuda.threadIdx.x == 0:
        counts[cuda.blockIdx.x] = n
