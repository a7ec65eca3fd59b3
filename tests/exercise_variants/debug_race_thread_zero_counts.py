# A "fix" of debug_race that hides the race by doing the block's work in one thread: thread 0
# reads every element of its block itself. Correct, race-free, and 64 times the load
# requests: it fails the budget on global load requests per input element.
from numba import cuda, int32

TPB = 64


@cuda.jit
def kernel(x, counts):
    if cuda.threadIdx.x == 0:
        start = cuda.blockIdx.x * TPB
        count = int32(0)
        for i in range(start, min(start + TPB, x.shape[0])):
            if x[i] > 0:
                count += 1
        counts[cuda.blockIdx.x] = count
