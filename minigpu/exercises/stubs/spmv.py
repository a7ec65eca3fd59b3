"""Exercise ``spmv`` (chapter 5: warp shuffles, docs/course/05-warp-shuffles.md).

y = A @ x for a sparse A (R, C) in CSR form: row r's nonzeros are data[j] at column
indices[j], for j = indptr[r] ... indptr[r + 1] - 1 (a row may be empty). float32 values,
int32 indices. The grader launches ``kernel[ceil(R / WARPS), 32 * WARPS](indptr, indices,
data, x, y)``: one warp per row. You may change WARPS; the sizes are drawn from it.

Budgets: coalesced loads (the warp reads 32 consecutive indices and values at a time), at most
1.25 x the reference's load requests per nonzero, no barrier.
Check it: python -m minigpu.exercises check spmv this_file.py
"""
from numba import cuda, float32

WARPS = 4
FULL = 0xFFFFFFFF


@cuda.jit
def kernel(indptr, indices, data, x, y):
    lane = cuda.threadIdx.x % 32
    r = cuda.blockIdx.x * WARPS + cuda.threadIdx.x // 32
    acc = float32(0)
    # TODO 1: warps past the last row (r >= number of rows) return.
    # TODO 2: lane takes j = indptr[r] + lane, + 32, ... < indptr[r + 1]:
    #         acc += data[j] * x[indices[j]].
    # TODO 3: five shfl_down_sync steps (offsets 16, 8, 4, 2, 1) sum acc into lane 0,
    #         which writes y[r].
