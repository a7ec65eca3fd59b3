"""Exercise ``stencil`` (chapter 2: shared memory and barriers, docs/course/02-shared-memory.md).

out[i] = x[i-1] + x[i] + x[i+1], with x[-1] = x[n] = 0. float32, 1-D.
The grader launches ``kernel[ceil(n / TPB), TPB](x, out)`` on sizes drawn from your TPB (you
may change it): several blocks, the last one ragged, or exactly full.

Budget: each block reads its elements from global memory once (global load sectors per output
at most 1.25 x the reference's): load its TPB elements plus one halo element on each side into
a shared array, wait at a barrier, then read the neighbours from shared memory.
Check it: python -m minigpu.exercises check stencil this_file.py
"""
from numba import cuda, float32

TPB = 32   # threads per block
TILE = TPB + 2   # with the halo (shape arguments of cuda.shared.array must be constants)


@cuda.jit
def kernel(x, out):
    tile = cuda.shared.array(TILE, float32)   # tile[1 + t] holds x[block start + t]
    n = x.shape[0]
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    # TODO 1: every thread stores its element (or 0 past the end) at tile[t + 1].
    # TODO 2: thread 0 stores the left halo tile[0], thread TPB-1 the right halo tile[TPB + 1]
    #         (0 outside the array).
    # TODO 3: a barrier, so that every element is in the tile before anyone reads it.
    # TODO 4: threads with i < n write out[i] from three tile elements.
