# Planted edge bug: The load guard off by one (`i <= n`): the last block reads x[n], past the
# end, whenever n is not a multiple of TPB.
from numba import cuda, float32

TPB = 128        # the grader launches kernel[ceil(n / TPB), TPB](x, out)
WARPS = TPB // 32
FULL = 0xFFFFFFFF


@cuda.jit
def kernel(x, out):
    """out[b] = sum of x[b*TPB : (b+1)*TPB]. Each warp sums its 32 values with five
    ``shfl_down_sync`` steps (registers, no shared memory, no barrier); lane 0 of each warp
    stores the warp's sum in shared memory; one barrier; warp 0 sums the WARPS partials."""
    partial = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    v = x[i] if i <= x.shape[0] else float32(0)
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
