# The barrier between a step's reads and its writes is missing (racecheck).
from numba import cuda, float32

TPB = 64


@cuda.jit
def kernel(x, out):
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    n = x.shape[0]
    buf[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    d = 1
    while d < TPB:
        if t >= d:
            buf[t] += buf[t - d]
        cuda.syncthreads()
        d *= 2
    if i < n:
        out[i] = buf[t]
