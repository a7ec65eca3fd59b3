# Correct, written differently from the reference: Hillis-Steele with two buffers (one barrier
# per step instead of two).
from numba import cuda, float32

TPB = 64


@cuda.jit
def kernel(x, out):
    buf = cuda.shared.array((2, TPB), float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    n = x.shape[0]
    buf[0, t] = x[i] if i < n else float32(0)
    src = 0
    d = 1
    while d < TPB:
        cuda.syncthreads()
        v = buf[src, t]
        if t >= d:
            v += buf[src, t - d]
        buf[1 - src, t] = v
        src = 1 - src
        d *= 2
    if i < n:
        out[i] = buf[src, t]
