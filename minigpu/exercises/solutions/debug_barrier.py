"""Reference fix: debug_barrier, a matrix-vector product through a shared chunk of x (chapter 14)."""
from numba import cuda, float32

TPB = 32   # the grader launches kernel[ceil(R / TPB), TPB]


@cuda.jit
def kernel(at, x, y):
    """y[r] = sum_k at[k, r] * x[k] (``at`` is the matrix stored by columns, (K, R)). One thread
    per output r; lanes read consecutive r of one row of ``at`` (coalesced). x is staged in
    shared memory a chunk of TPB at a time, so each element of x is loaded once per block and
    then read by every thread (a broadcast). The fix: the second barrier, so that no thread
    overwrites the chunk while another still reads it."""
    xs = cuda.shared.array(TPB, float32)
    K, R = at.shape
    t = cuda.threadIdx.x
    r = cuda.blockIdx.x * TPB + t
    acc = float32(0)
    for k0 in range(0, K, TPB):
        xs[t] = x[k0 + t] if k0 + t < K else float32(0)
        cuda.syncthreads()                    # the chunk is loaded
        if r < R:
            for j in range(min(TPB, K - k0)):
                acc += at[k0 + j, r] * xs[j]
        cuda.syncthreads()                    # everyone has read it: the fix
    if r < R:
        y[r] = acc
