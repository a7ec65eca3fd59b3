# Missing barrier: threads read neighbours before they are written (racecheck / wrong result).
from numba import cuda, float32

TPB = 32
TILE = TPB + 2


@cuda.jit
def kernel(x, out):
    tile = cuda.shared.array(TILE, float32)
    n = x.shape[0]
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    tile[t + 1] = x[i] if i < n else float32(0)
    if t == 0:
        tile[0] = x[i - 1] if 0 < i < n + 1 else float32(0)
    if t == TPB - 1:
        tile[TPB + 1] = x[i + 1] if i + 1 < n else float32(0)
    if i < n:
        out[i] = tile[t] + tile[t + 1] + tile[t + 2]
