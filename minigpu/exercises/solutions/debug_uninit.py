"""Reference fix: debug_uninit, the maximum of each block (chapter 14)."""
import math

from numba import cuda, float32

TPB = 64   # the grader launches kernel[ceil(n / TPB), TPB]; a power of two
NEG_INF = float32(-math.inf)


@cuda.jit
def kernel(x, out):
    """out[b] = max of block b's range of x. One thread per element loads it into shared
    memory, then a tree halves the active threads each step (a barrier between steps). The
    fix: a thread past the end of x writes the identity of max (-inf) into its slot; the bug
    left those slots of the last block unwritten, and the tree read them."""
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    buf[t] = x[i] if i < x.shape[0] else NEG_INF
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            buf[t] = max(buf[t], buf[t + step])
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]
