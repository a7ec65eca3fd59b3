"""Exercise ``scan`` (chapter 7: scan, docs/course/07-scan.md).

Block-wise inclusive scan: out[i] = x[s] + ... + x[i], where s = (i // TPB) * TPB is the first
index of i's block (a full-array scan then adds each block's total: see the chapter). float32.
The grader launches ``kernel[ceil(n / TPB), TPB](x, out)`` on sizes drawn from your TPB (you
may change it).

Budgets, each at most 1.25 x the reference's with your TPB: global load sectors per output
(read each input once) and barriers per block (2 per step of Hillis-Steele in shared memory),
and no bank conflicts (Blelloch's up-sweep and down-sweep pass too, with TPB a power of two,
if you pad its strided accesses as chapter 3 shows).
Check it: python -m minigpu.exercises check scan this_file.py
"""
from numba import cuda, float32

TPB = 64


@cuda.jit
def kernel(x, out):
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    # TODO 1: buf[t] = x[i] (0 past the end), then a barrier.
    # TODO 2: for d = 1, 2, 4, ... < TPB: read v = buf[t - d] (0 when t < d), barrier,
    #         buf[t] += v, barrier.
    # TODO 3: threads with i < n write out[i] = buf[t].
