"""Reference fix: debug_banks, row sums through a shared tile (chapter 14)."""
from numba import cuda, float32

TILE = 32   # the grader launches kernel[ceil(R / TILE), TILE]: one thread per row
PADDED = TILE + 1   # shape arguments of cuda.shared.array must be module constants


@cuda.jit
def kernel(x, out):
    """out[r] = sum of row r of x. A block of TILE threads owns TILE rows and walks across them
    a TILE x TILE tile at a time: lane t copies column t of each of the tile's rows (consecutive
    lanes, consecutive addresses: coalesced), then, after a barrier, adds up row t of the tile.
    The fix: the tile is TILE + 1 wide, so the words of a column (one per lane) fall in
    different banks; at width TILE, row t starts at word t * 32, in bank 0 for every lane."""
    tile = cuda.shared.array((TILE, PADDED), float32)
    R, C = x.shape
    t = cuda.threadIdx.x
    r0 = cuda.blockIdx.x * TILE
    acc = float32(0)
    for c0 in range(0, C, TILE):
        for j in range(TILE):
            r, c = r0 + j, c0 + t
            tile[j, t] = x[r, c] if r < R and c < C else float32(0)
        cuda.syncthreads()
        for j in range(TILE):
            acc += tile[t, j]
        cuda.syncthreads()
    if r0 + t < R:
        out[r0 + t] = acc
