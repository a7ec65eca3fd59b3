# Correct: each block sorts its tile with odd-even transposition (TPB steps, a barrier each)
# instead of the bitonic network (log2(TPB) (log2(TPB) + 1) / 2 steps); the merge is the
# reference's.
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
    buf[t] = x[i] if i < n else INF
    for step in range(TPB):
        cuda.syncthreads()
        if t % 2 == step % 2 and t + 1 < TPB:
            a, b = buf[t], buf[t + 1]
            if a > b:
                buf[t], buf[t + 1] = b, a
    cuda.syncthreads()
    if i < n:
        out[i] = buf[t]


@cuda.jit
def merge(src, dst, width):
    i = cuda.grid(1)
    n = src.shape[0]
    if i >= n:
        return
    v = src[i]
    run = i // width
    start = (run - run % 2) * width
    left = run % 2 == 0
    if left:
        lo, hi = start + width, min(start + 2 * width, n)
        own = i - start
    else:
        lo, hi = start, start + width
        own = i - start - width
    a, b = lo, hi
    while a < b:
        m = (a + b) // 2
        w = src[m]
        if w < v or (w == v and not left):
            a = m + 1
        else:
            b = m
    dst[start + own + a - lo] = v
