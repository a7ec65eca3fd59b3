# Planted edge bug: The padded keys of the last K tile are not masked (`range(BK)`): when S is
# not a multiple of BK, zero keys add exp(0 - m) to the softmax.
import math

from numba import cuda, float32

BQ = 8              # query rows per block; the grader launches kernel[ceil(L / BQ), BQ]
BK = 8              # key rows per shared tile
E = 16              # head dim (the grader's q, k and v have 16 columns)
PADDED = E + 1      # shared rows padded by one word: no bank conflicts
SCALE = float32(1 / math.sqrt(E))
NEG_INF = float32(-math.inf)


@cuda.jit
def kernel(q, k, v, out):
    """out = softmax(q k^T * SCALE) v for q (L, E), k and v (S, E). Thread t of block b owns
    query row i = b * BQ + t: its q row (in the shared Q tile), a running max m, a running
    sum l of exp(s - m) and its output row acc in registers. K and V stream through shared
    tiles of BK rows (coalesced loads); for each key, the online softmax rescales l and acc
    by exp(m - m_new) when the max grows, so the (L, S) scores never exist in memory and
    the output is written once."""
    L, S = q.shape[0], k.shape[0]
    Qs = cuda.shared.array((BQ, PADDED), float32)
    Ks = cuda.shared.array((BK, PADDED), float32)
    Vs = cuda.shared.array((BK, PADDED), float32)
    t = cuda.threadIdx.x
    q0 = cuda.blockIdx.x * BQ
    i = q0 + t
    for e in range(t, BQ * E, BQ):                   # the Q tile, coalesced
        r, c = e // E, e % E
        Qs[r, c] = q[q0 + r, c] if q0 + r < L else float32(0)
    acc = cuda.local.array(E, float32)
    for c in range(E):
        acc[c] = float32(0)
    m = NEG_INF
    l = float32(0)
    for k0 in range(0, S, BK):
        cuda.syncthreads()                           # Q loaded; last tile's readers done
        for e in range(t, BK * E, BQ):               # the K and V tiles, coalesced
            r, c = e // E, e % E
            Ks[r, c] = k[k0 + r, c] if k0 + r < S else float32(0)
            Vs[r, c] = v[k0 + r, c] if k0 + r < S else float32(0)
        cuda.syncthreads()
        for jj in range(BK):
            s = float32(0)
            for c in range(E):
                s += Qs[t, c] * Ks[jj, c]
            s *= SCALE
            m_new = max(m, s)
            alpha = math.exp(m - m_new)              # 0 the first time (m = -inf)
            p = math.exp(s - m_new)
            l = l * alpha + p
            for c in range(E):
                acc[c] = acc[c] * alpha + p * Vs[jj, c]
            m = m_new
    if i < L:
        for c in range(E):
            out[i, c] = acc[c] / l
