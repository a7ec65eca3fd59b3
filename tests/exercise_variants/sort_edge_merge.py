# Planted edge bug: The merge guard off by one (`i > n`): the thread of index n reads src[n],
# past the end, whenever n is not a multiple of TPB.
import math

from numba import cuda, float32

TPB = 64    # a power of two
INF = float32(math.inf)


@cuda.jit
def sort_blocks(x, out):
    """Each block sorts its TPB elements (one per thread) in shared memory with the bitonic
    network: for k = 2, 4, ... TPB and j = k/2 ... 1, thread t compares buf[t] with
    buf[t ^ j] (if that is above it) and swaps them into ascending order when t & k == 0,
    descending otherwise; a barrier before every step. log2(TPB) (log2(TPB) + 1) / 2 steps,
    the same pairs whatever the data. The ragged last block pads with +inf, which sorts to
    its end and is never written back. One coalesced load and store per element."""
    buf = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TPB + t
    n = x.shape[0]
    buf[t] = x[i] if i < n else INF
    k = 2
    while k <= TPB:
        j = k // 2
        while j > 0:
            cuda.syncthreads()
            p = t ^ j
            if p > t:
                a, b = buf[t], buf[p]
                if (a > b) == ((t & k) == 0):
                    buf[t], buf[p] = b, a
            j //= 2
        k *= 2
    cuda.syncthreads()
    if i < n:
        out[i] = buf[t]


@cuda.jit
def merge(src, dst, width):
    """dst = src with each pair of neighbouring sorted runs of ``width`` merged into one.
    One thread per element: its place in the merged run is its index in its own run plus
    the number of elements of the other run that go before it, found by a binary search of
    log2(width) loads (an element of the left run goes before equal ones of the right run:
    a stable merge, every place taken once). No shared memory, no barrier."""
    i = cuda.grid(1)
    n = src.shape[0]
    if i > n:
        return
    v = src[i]
    run = i // width
    start = (run - run % 2) * width            # first element of the pair of runs
    left = run % 2 == 0
    if left:
        lo, hi = start + width, min(start + 2 * width, n)
        own = i - start
    else:
        lo, hi = start, start + width
        own = i - start - width
    a, b = lo, hi
    while a < b:                               # the first element that goes after v
        m = (a + b) // 2
        w = src[m]
        if w < v or (w == v and not left):
            a = m + 1
        else:
            b = m
    dst[start + own + a - lo] = v
