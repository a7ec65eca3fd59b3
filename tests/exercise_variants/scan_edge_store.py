# Planted edge bug: The store guard off by one (`i < n - 1`): the last element is never written.
from numba import cuda, float32

TPB = 64   # the grader launches kernel[ceil(n / TPB), TPB](x, out)


@cuda.jit
def kernel(x, out):
    """out[i] = x[s] + ... + x[i], s = the first index of i's block. One thread per element;
    log2(TPB) steps, in each thread t adds buf[t - d] (d = 1, 2, 4, ...): read, barrier, write,
    barrier (the barriers keep a step's reads before its writes)."""
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    n = x.shape[0]
    buf[t] = x[i] if i < n else float32(0)
    cuda.syncthreads()
    d = 1
    while d < TPB:
        v = buf[t - d] if t >= d else float32(0)
        cuda.syncthreads()
        buf[t] += v
        cuda.syncthreads()
        d *= 2
    if i < n - 1:
        out[i] = buf[t]
