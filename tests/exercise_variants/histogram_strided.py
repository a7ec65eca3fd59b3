# Correct, but block b takes elements b, b + blocks, b + 2 * blocks, ...: a warp's loads are
# `blocks` elements apart (uncoalesced).
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
    i = t * cuda.gridDim.x + cuda.blockIdx.x
    if i < values.shape[0]:
        cuda.atomic.add(local, values[i], 1)
    cuda.syncthreads()
    if t < NBINS:
        cuda.atomic.add(hist, t, local[t])
