# Correct, but consecutive threads run down a column of the block (tid % BY picks the row):
# a warp covers 8 rows x 4 columns, many sectors per load request.
from numba import cuda, float32

BX, BY = 32, 8


def make_kernel(weights):
    K = weights.shape[0]
    R = K // 2

    @cuda.jit
    def kernel(x, out):
        w = cuda.const.array_like(weights)
        H, W = x.shape
        tid = cuda.threadIdx.x + BX * cuda.threadIdx.y
        r = cuda.blockIdx.y * BY + tid % BY
        c = cuda.blockIdx.x * BX + tid // BY
        if r < H and c < W:
            acc = float32(0)
            for i in range(K):
                for j in range(K):
                    rr, cc = r + i - R, c + j - R
                    if 0 <= rr < H and 0 <= cc < W:
                        acc += w[i, j] * x[rr, cc]
            out[r, c] = acc

    return kernel
