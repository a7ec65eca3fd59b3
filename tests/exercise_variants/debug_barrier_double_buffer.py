# A correct fix of debug_barrier written differently: two chunk buffers used in turn, so the
# chunk loaded in the next iteration goes into the other buffer, and one barrier per chunk
# suffices (the buffer written in iteration k + 2 was last read before iteration k + 1's).
from numba import cuda, float32

TPB = 32


@cuda.jit
def kernel(at, x, y):
    xs = cuda.shared.array((2, TPB), float32)
    K, R = at.shape
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x * TPB + t
    acc = float32(0)
    for k0 in range(0, K, TPB):
        b = (k0 // TPB) % 2
        xs[b, t] = x[k0 + t] if k0 + t < K else float32(0)
        cuda.syncthreads()
        if r < R:
            for j in range(min(TPB, K - k0)):
                acc += at[k0 + j, r] * xs[b, j]
    if r < R:
        y[r] = acc
