# Planted edge bug: The column halo guard off by one (`cc <= W`): outputs in the last column
# read x[rr, W], past the end.
from numba import cuda, float32

BX = 32
BY = 8


def make_kernel(weights):
    """The kernel for one filter: ``cuda.const.array_like`` compiles the filter into the
    kernel's constant memory (one kernel per filter, as in lessons/constant_memory.py)."""
    K = weights.shape[0]
    R = K // 2

    @cuda.jit
    def kernel(x, out):
        """out[r, c] = sum over i, j < K of w[i, j] * x[r + i - R, c + j - R], 0 outside x
        (zero padding: the output has x's shape). One thread per output; threadIdx.x runs
        along a row, so a warp's loads of x are consecutive (coalesced) for every (i, j).
        Every lane of a warp reads the same w[i, j] at the same time: one broadcast from the
        constant cache, no global traffic for the filter."""
        w = cuda.const.array_like(weights)
        H, W = x.shape
        c = cuda.blockIdx.x * BX + cuda.threadIdx.x
        r = cuda.blockIdx.y * BY + cuda.threadIdx.y
        if r < H and c < W:
            acc = float32(0)
            for i in range(K):
                rr = r + i - R
                if 0 <= rr < H:
                    for j in range(K):
                        cc = c + j - R
                        if 0 <= cc <= W:
                            acc += w[i, j] * x[rr, cc]
            out[r, c] = acc

    return kernel
