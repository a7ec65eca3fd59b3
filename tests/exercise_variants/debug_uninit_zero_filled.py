# A "fix" of debug_uninit that fills the slots past the end with 0: nothing is read
# uninitialised any more, but 0 is not the identity of max. The grader's inputs are all
# negative, so the last block's maximum comes out 0 on every size that is not a whole number
# of blocks.
from numba import cuda, float32

TPB = 64


@cuda.jit
def kernel(x, out):
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    buf[t] = x[i] if i < x.shape[0] else float32(0)
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if t < step:
            buf[t] = max(buf[t], buf[t + step])
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]
