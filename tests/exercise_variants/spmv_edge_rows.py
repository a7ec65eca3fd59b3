# Planted edge bug: The row guard off by one (`r > rows`): the warp of row R reads indptr[R +
# 1], past the end, whenever R is not a multiple of WARPS.
from numba import cuda, float32

WARPS = 4           # rows per block; the grader launches kernel[ceil(R / WARPS), 32 * WARPS]
FULL = 0xFFFFFFFF


@cuda.jit
def kernel(indptr, indices, data, x, y):
    """y[r] = sum of data[j] * x[indices[j]] over row r's nonzeros, j = indptr[r] ...
    indptr[r + 1] - 1. Warp w of block b owns row r = b * WARPS + w; lane l takes nonzeros
    indptr[r] + l, + 32, ...: the warp reads 32 consecutive indices and values at a time
    (coalesced; x[indices[j]] is a gather). The lanes' partial sums meet with five
    shfl_down_sync steps and lane 0 writes y[r]: no shared memory, no barrier. With one
    thread per row, neighbouring lanes would read rows far apart (uncoalesced) and a warp
    would wait for its longest row."""
    lane = cuda.threadIdx.x % 32
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    if r > y.shape[0]:
        return                      # the whole warp: r is the same for its 32 lanes
    acc = float32(0)
    for j in range(indptr[r] + lane, indptr[r + 1], 32):
        acc += data[j] * x[indices[j]]
    offset = 16
    while offset > 0:
        acc += cuda.shfl_down_sync(FULL, acc, offset)
        offset //= 2
    if lane == 0:
        y[r] = acc
