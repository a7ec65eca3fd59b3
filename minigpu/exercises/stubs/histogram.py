"""Exercise ``histogram`` (chapter 6: atomics, docs/course/06-atomics.md).

hist[v] = number of elements of ``values`` equal to v, for v in [0, NBINS). int32.
The grader zeroes ``hist`` and launches ``kernel[ceil(n / TPB), TPB](values, hist)`` on sizes
drawn from your TPB (you may change TPB and NBINS, NBINS <= TPB).

Budget: at most one global atomic per bin per block. Count into a shared array first
(``cuda.atomic.add`` works on shared arrays too), then add each bin to ``hist`` once.
Check it: python -m minigpu.exercises check histogram this_file.py
"""
from numba import cuda, int32

TPB = 64
NBINS = 16


@cuda.jit
def kernel(values, hist):
    local = cuda.shared.array(NBINS, int32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    # TODO 1: zero the shared bins (threads t < NBINS), then a barrier.
    # TODO 2: threads with i < n add 1 to local[values[i]] with an atomic.
    # TODO 3: a barrier, then threads t < NBINS add local[t] to hist[t] with an atomic.
