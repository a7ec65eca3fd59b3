"""Reference fix: debug_race, counting the positive elements of each block (chapter 14)."""
from numba import cuda, int32

TPB = 64   # the grader launches kernel[ceil(n / TPB), TPB]


@cuda.jit
def kernel(x, counts):
    """counts[b] = how many elements of block b's range of x are > 0. One thread per element;
    the block's threads add to one counter in shared memory. The fix: the increment is an
    atomic (a read, an add and a write no other thread can come between); the bug's
    ``count[0] += 1`` let two threads read the same old value and lose an increment."""
    count = cuda.shared.array(1, int32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    if t == 0:
        count[0] = 0
    cuda.syncthreads()
    if i < x.shape[0] and x[i] > 0:
        cuda.atomic.add(count, 0, 1)
    cuda.syncthreads()
    if t == 0:
        counts[cuda.blockIdx.x] = count[0]
