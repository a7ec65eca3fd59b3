# Correct: one thread per row (the launch's extra threads idle), so neighbouring lanes read
# rows far apart: uncoalesced loads of indices and data.
from numba import cuda, float32

WARPS = 4


@cuda.jit
def kernel(indptr, indices, data, x, y):
    r = cuda.grid(1)
    if r < y.shape[0]:
        acc = float32(0)
        for j in range(indptr[r], indptr[r + 1]):
            acc += data[j] * x[indices[j]]
        y[r] = acc
