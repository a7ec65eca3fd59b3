# A correct fix of debug_coalescing written differently: a grid-stride loop (chapter 0).
# Thread g of the grid takes elements g, g + stride, g + 2 stride, ... (stride = every thread
# of the grid): consecutive lanes, consecutive addresses, and still ITEMS elements each.
from numba import cuda, float32

TPB = 64
ITEMS = 4
TWO = float32(2)


@cuda.jit
def kernel(x, y, out):
    stride = cuda.gridsize(1)
    for i in range(cuda.grid(1), x.shape[0], stride):
        out[i] = TWO * x[i] + y[i]
