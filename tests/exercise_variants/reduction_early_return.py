# Planted bug: threads past the end return before the block's barrier (strict mode's SyncError:
# on Volta+ the barrier completes without them, the CUDA guide calls it undefined).
from numba import cuda, float32

TPB = 128
WARPS = TPB // 32
FULL = 0xFFFFFFFF


@cuda.jit
def kernel(x, out):
    partial = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    if i >= x.shape[0]:
        return
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if t % 32 == 0:
        partial[t // 32] = v
    cuda.syncthreads()
    if t < 32:
        v = partial[t] if t < WARPS else float32(0)
        offset = 16
        while offset > 0:
            v += cuda.shfl_down_sync(FULL, v, offset)
            offset //= 2
        if t == 0:
            out[cuda.blockIdx.x] = v
