# Correct, but every thread does its atomic on global memory (TPB global atomics per block).
from numba import cuda

TPB = 64
NBINS = 16


@cuda.jit
def kernel(values, hist):
    i = cuda.blockIdx.x * TPB + cuda.threadIdx.x
    if i < values.shape[0]:
        cuda.atomic.add(hist, values[i], 1)
