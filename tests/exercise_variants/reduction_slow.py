# Correct: the chapter-4 shared-memory tree, one barrier per step (8 per block).
from numba import cuda, float32

TPB = 128


@cuda.jit
def kernel(x, out):
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    buf[t] = x[i] if i < x.shape[0] else float32(0)
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]
