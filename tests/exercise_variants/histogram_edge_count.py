# Planted edge bug: The count guard off by one (`i <= n`): the last block counts values[n], past
# the end, whenever n is not a multiple of TPB.
from numba import cuda, int32

TPB = 64     # threads per block (the grader launches kernel[ceil(n / TPB), TPB])
NBINS = 16   # values are in [0, NBINS)


@cuda.jit
def kernel(values, hist):
    """hist[v] += number of v in values. One thread per value; each block counts into its own
    NBINS shared counters (shared atomics: fast, contended only within the block), then adds
    each bin to global memory once (NBINS global atomics per block instead of TPB)."""
    local = cuda.shared.array(NBINS, int32)
    t = cuda.threadIdx.x
    if t < NBINS:
        local[t] = 0
    cuda.syncthreads()
    i = cuda.blockIdx.x * TPB + t
    if i <= values.shape[0]:
        cuda.atomic.add(local, values[i], 1)
    cuda.syncthreads()
    if t < NBINS:
        cuda.atomic.add(hist, t, local[t])
