# Planted edge bug: The write guard off by one (`r <= cols`): the last tile writes row `cols` of
# out, past the end, whenever cols is not a multiple of TILE.
from numba import cuda, float32

TILE = 32   # the grader launches kernel[(ceil(cols / TILE), ceil(rows / TILE)), (TILE, ROWS)]
ROWS = 8    # each thread moves TILE // ROWS elements
PADDED = TILE + 1   # shape arguments of cuda.shared.array must be module constants


@cuda.jit
def kernel(a, out):
    """out[j, i] = a[i, j]. A (TILE, ROWS) block moves one TILE x TILE tile: it reads rows of
    ``a`` (consecutive lanes, consecutive columns: coalesced), writes them into a shared tile,
    and after a barrier writes rows of ``out`` by reading the tile down its columns. The tile
    is TILE+1 wide, so a column of the tile spans all 32 banks (no bank conflicts)."""
    tile = cuda.shared.array((TILE, PADDED), float32)
    rows, cols = a.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    for k in range(0, TILE, ROWS):
        r, c = by + ty + k, bx + tx
        if r < rows and c < cols:
            tile[ty + k, tx] = a[r, c]
    cuda.syncthreads()
    for k in range(0, TILE, ROWS):
        r, c = bx + ty + k, by + tx          # out is (cols, rows)
        if r <= cols and c < rows:
            out[r, c] = tile[tx, ty + k]
