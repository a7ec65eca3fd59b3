# The shared bins are never zeroed (initcheck: reads uninitialised shared memory).
from numba import cuda, int32

TPB = 64
NBINS = 16


@cuda.jit
def kernel(values, hist):
    local = cuda.shared.array(NBINS, int32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    if i < values.shape[0]:
        cuda.atomic.add(local, values[i], 1)
    cuda.syncthreads()
    if t < NBINS:
        cuda.atomic.add(hist, t, local[t])
