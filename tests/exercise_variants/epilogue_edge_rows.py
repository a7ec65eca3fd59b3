# Planted edge bug: The row guard off by one (`r <= R`): the last block row reads and writes row
# R, past the end, whenever R is not a multiple of BY.
from numba import cuda, float32

BX = 32   # the grader launches kernel[(ceil(C / BX), ceil(R / BY)), (BX, BY)]
BY = 8
SLOPE = float32(0.1)  # a float32 constant: a bare 0.1 would compute in float64


@cuda.jit
def kernel(x, bias, out):
    """out[r, c] = leaky_relu(x[r, c] + bias[c]) in one pass (unfused, x + bias would be
    written to DRAM and read back). threadIdx.x runs along a row: coalesced loads and stores;
    the warp's 32 bias reads are 4 sectors too."""
    R, C = x.shape
    c = cuda.blockIdx.x * BX + cuda.threadIdx.x
    r = cuda.blockIdx.y * BY + cuda.threadIdx.y
    if r <= R and c < C:
        v = x[r, c] + bias[c]
        out[r, c] = v if v > 0 else SLOPE * v
