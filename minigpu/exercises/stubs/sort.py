"""Exercise ``sort`` (chapter 11: sorting, docs/course/11-sorting.md).

out = sorted(x), ascending, float32, n spanning several blocks. With ``blocks = ceil(n /
TPB)`` and a second buffer, the grader runs::

    sort_blocks[blocks, TPB](x, a)            # every run of TPB elements of a is sorted
    width = TPB
    while width < n:                          # merge runs pairwise, a -> b, b -> a, ...
        merge[blocks, TPB](a, b, width)
        a, b, width = b, a, 2 * width

TPB must be a power of two (you may change it). Budgets, each at most 1.25 x the reference's
with your TPB: barriers per block of sort_blocks (a bitonic network), load requests per
element of merge (a binary search), coalesced loads in sort_blocks.
Check it: python -m minigpu.exercises check sort this_file.py
"""
import math

from numba import cuda, float32

TPB = 64
INF = float32(math.inf)


@cuda.jit
def sort_blocks(x, out):
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    n = x.shape[0]
    # TODO 1: buf[t] = x[i], or +inf past the end (it sorts last).
    # TODO 2: for k = 2, 4, ... TPB and j = k // 2, k // 4, ... 1: a barrier, then thread t
    #         with partner p = t ^ j > t compares buf[t] and buf[p] and swaps them when they
    #         are out of order: ascending if t & k == 0, descending otherwise.
    # TODO 3: a barrier, then out[i] = buf[t] for i < n.


@cuda.jit
def merge(src, dst, width):
    i = cuda.grid(1)
    # TODO 4: v = src[i] is in run i // width; its pair of runs starts at
    #         start = (run - run % 2) * width. Its place in the merged pair is its index in
    #         its own run plus how many elements of the other run go before it (binary
    #         search; ties: the left run's elements go first). Write dst[start + place] = v.
    #         Mind the last, shorter runs (n = src.shape[0]).
