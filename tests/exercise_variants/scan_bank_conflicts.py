# Correct, but the scan buffer is laid out two words per element (buf[2 * t]): a warp's shared
# accesses hit 16 banks twice, 2 wavefronts per request.
from numba import cuda, float32

TPB = 64


@cuda.jit
def kernel(x, out):
    buf = cuda.shared.array(2 * TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    n = x.shape[0]
    buf[2 * t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    d = 1
    while d < TPB:
        v = buf[2 * (t - d)] if t >= d else float32(0)
        cuda.syncthreads()
        buf[2 * t] += v
        cuda.syncthreads()
        d *= 2
    if i < n:
        out[i] = buf[2 * t]
