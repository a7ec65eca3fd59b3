# No barrier between the warp sums and warp 0's read of them (racecheck).
from numba import cuda, float32

TPB = 128
WARPS = TPB // 32
FULL = 0xFFFFFFFF


@cuda.jit
def kernel(x, out):
    partial = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    v = x[i] if i < x.shape[0] else float32(0)
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if t % 32 == 0:
        partial[t // 32] = v
    if t == 0:
        acc = float32(0)
        for w in range(WARPS):
            acc += partial[w]
        out[cuda.blockIdx.x] = acc
