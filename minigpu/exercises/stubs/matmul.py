"""Exercise ``matmul`` (chapter 8: tiled matmul, docs/course/08-matmul.md).

c = a @ b; a is (M, K), b is (K, N), float32. The grader launches
``kernel[(ceil(N / TILE), ceil(M / TILE)), (TILE, TILE)](a, b, c)`` on shapes drawn from your
TILE (you may change it), ragged in every dimension.

Budgets, each at most 1.25 x the reference's with your TILE: global load requests per warp
(one request of a and one of b per tile step: stage TILE x TILE tiles of a and b in shared
memory) and global load sectors per request (coalesced tile loads).
Check it: python -m minigpu.exercises check matmul this_file.py
"""
from numba import cuda, float32

TILE = 16


@cuda.jit
def kernel(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    M, K = a.shape
    N = b.shape[1]
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0)
    # TODO 1: for k0 in range(0, K, TILE): sa[ty, tx] = a[row, k0 + tx] and
    #         sb[ty, tx] = b[k0 + ty, col] (0 outside the matrices), then a barrier.
    # TODO 2: acc += sa[ty, k] * sb[k, tx] for k in range(TILE), then a barrier before the
    #         next step overwrites the tiles.
    # TODO 3: threads inside c write c[row, col] = acc.
