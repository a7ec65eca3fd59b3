# Correct, one global atomic per bin per block, but thread 0 counts its whole block alone:
# one lane per load request (31 lanes of every warp idle).
from numba import cuda, int32

TPB = 64
NBINS = 16


@cuda.jit
def kernel(values, hist):
    local = cuda.shared.array(NBINS, int32)
    t = cuda.threadIdx.x
    if t < NBINS:
        local[t] = 0
    cuda.syncthreads()
    if t == 0:
        start = cuda.blockIdx.x * TPB
        for i in range(start, min(start + TPB, values.shape[0])):
            local[values[i]] += 1
    cuda.syncthreads()
    if t < NBINS:
        cuda.atomic.add(hist, t, local[t])
