"""Scaled-dot-product attention over (B, L, E) batches: a naive path and flash attention.

For each batch b (batch and heads flattened), query row i and key row j::

    s[i, j] = scale * q[i] . k[j] + mask[i, j]      (-inf where causal and j > i)
    lse[i]  = log sum_j exp(s[i, j])                p[i, j] = exp(s[i, j] - lse[i])
    out[i]  = sum_j p[i, j] * v[j]

**Naive** (``attention_naive``, three kernels): scores -> global (B, L, S) buffer, row softmax
-> a second (B, L, S) buffer, weighted sum. Every score crosses global memory three times and
the peak memory grows with L * S: at L = S = 32k one head's score matrix alone is 4 GiB.

**Flash attention** (``attention``, the production forward): one block per (batch, query tile
of BQ rows). The Q tile sits in shared memory; K and V are streamed through shared memory BK
rows at a time; each query row keeps a running max ``m``, a running sum ``l`` and its output
accumulator in registers, rescaled whenever the max grows (the online softmax of course
chapter 12)::

    m' = max(m, max_j s[i, j])     l = l * exp(m - m') + sum_j exp(s[i, j] - m')
    acc = acc * exp(m - m') + sum_j exp(s[i, j] - m') * v[j]

and the output ``acc / l`` is written once, with ``lse = m + log(l)`` kept for the backward.
No score ever reaches global memory: the extra memory is O(L) (the lse), not O(L * S).
With ``causal``, key tiles entirely right of the diagonal are never loaded.

**Backward**, fused too: ``delta[i] = sum_d g[i, d] * out[i, d]`` (one warp per row), then
two kernels that *recompute* ``p = exp(s - lse)`` from Q, K and the saved lse instead of
storing it: one block per key tile accumulates dK and dV over the query tiles, one block per
query tile accumulates dQ over the key tiles (no atomics, deterministic)::

    dv[j] = sum_i p[i, j] g[i]       dp[i, j] = g[i] . v[j]      ds = p * (dp - delta[i])
    dk[j] = scale * sum_i ds[i, j] q[i]                          dq[i] = scale * sum_j ds[i, j] k[j]

Thread mapping of the fused kernels: a (TD, rows) block; thread (tx, ty) owns row ty of its
tile and the head-dim columns tx, tx + TD, ... (DMAX / TD accumulators in registers). Shared
rows are padded to DMAX + 1 words, so the threads of a warp that read different rows at the
same column hit different banks. Tile sizes and DMAX (the head dim rounded up to a power of
two, at most ``MAX_HEAD_DIM``) are kernel-factory parameters; ``PRODUCTION`` is sized to
the 48 KiB of static shared memory a block may have (checked by ``python -m
minigpu.tools.kernel_report``).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from ..contract import View
from .blocks import launch, numba_type, pow2_at_least, warp_allreduce
from .device import SIMULATOR, WARP_SIZE, current_stream, empty, scalar
from .kernelspec import KernelSpec, reported
from .memory import dense, full

MAX_HEAD_DIM = 128
MIN_HEAD_DIM = 16
# Per dtype: forward (BQ query rows, BK key rows per streamed tile) and backward (BQ, BK), TD
# threads across the head dim. At DMAX = 128, float32: forward shared memory 16*129 (Q)
# + 2*32*129 (K, V) + 2*16*32 (scores, probabilities) words = 45.3 KiB, 256 threads; backward
# 4*16*129 + 2*16*16 words = 34.3 KiB. float64 halves the rows to stay under 48 KiB.
PRODUCTION = {np.dtype(np.float32): dict(fwd=(16, 32), bwd=(16, 16), TD=16),
              np.dtype(np.float64): dict(fwd=(8, 16), bwd=(8, 8), TD=16)}
# The simulator interprets every CUDA thread: small tiles (tests also run PRODUCTION).
SIMULATOR_TILES = dict(fwd=(4, 8), bwd=(4, 4), TD=4)


def tiles_for(dtype, tiles=None):
    """The tile configuration of a launch: ``tiles`` if given, else the default here."""
    if tiles is not None:
        return tiles
    return SIMULATOR_TILES if SIMULATOR else PRODUCTION[np.dtype(dtype)]


# --- naive: three kernels, the (B, L, S) matrices in global memory ---------------------------
@reported(lambda k, x: [KernelSpec("naive_scores", k(x.f32, True, False),
                                   (x.f, x.f, x.f, 0, 0, 0, 0, 1, 1, 1, x.s, x.f), x.block)])
@functools.lru_cache(maxsize=None)
def naive_scores_kernel(dtype, has_mask, causal):
    neg_inf = numba_type(dtype)(-np.inf)
    zero = numba_type(dtype)(0)

    @cuda.jit
    def naive_scores(q, k, mask, m_off, m_sb, m_si, m_sj, L, S, E, scale, scores):
        """scores[b, i, j] = scale * q[b, i] . k[b, j] + mask (or -inf), one thread per score.

        1-D grid-stride over the B*L*S scores, j fastest. Each thread reads a whole q row (the
        same one as its warp neighbours: a broadcast) and a whole k row: neighbouring threads
        read rows E apart, so every k load of a warp touches up to 32 sectors. The baseline:
        every score is written to global memory, to be read back by the softmax."""
        start, step = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, scores.size, step):
            b = t // (L * S)
            i = (t // S) % L
            j = t % S
            s = neg_inf
            if not causal or j <= i:
                s = zero
                for c in range(E):
                    s += q[(b * L + i) * E + c] * k[(b * S + j) * E + c]
                s *= scale
                if has_mask:
                    s += mask[m_off + b * m_sb + i * m_si + j * m_sj]
            scores[t] = s

    return naive_scores


@reported(lambda k, x: [KernelSpec("naive_softmax", k(x.f32), (x.f, 1, x.f, x.f), x.block)])
@functools.lru_cache(maxsize=None)
def naive_softmax_kernel(dtype):
    neg_inf = numba_type(dtype)(-np.inf)
    zero = numba_type(dtype)(0)

    @cuda.jit
    def naive_softmax(scores, S, p, lse):
        """p[r, :] = softmax(scores[r, :]) and lse[r], one thread per (b, i) row.

        1-D grid-stride over the B*L rows; three passes over the row (max, sum, write), each a
        load of S values from global memory by one thread: neighbouring threads read rows S
        apart (uncoalesced). A row of only -inf gives p = 0 and lse = -inf."""
        start, step = cuda.grid(1), cuda.gridsize(1)
        for r in range(start, lse.size, step):
            m = neg_inf
            for j in range(S):
                m = max(m, scores[r * S + j])
            total = zero
            if m != neg_inf:
                for j in range(S):
                    total += math.exp(scores[r * S + j] - m)
            for j in range(S):
                p[r * S + j] = math.exp(scores[r * S + j] - m) / total if m != neg_inf else zero
            lse[r] = m + math.log(total) if m != neg_inf else neg_inf

    return naive_softmax


@reported(lambda k, x: [KernelSpec("naive_weighted_sum", k(x.f32), (x.f, x.f, 1, 1, 1, x.f),
                                   x.block)])
@functools.lru_cache(maxsize=None)
def naive_weighted_sum_kernel(dtype):
    zero = numba_type(dtype)(0)

    @cuda.jit
    def naive_weighted_sum(p, v, L, S, EV, out):
        """out[b, i, d] = sum_j p[b, i, j] * v[b, j, d], one thread per output element.

        1-D grid-stride, d fastest: a warp reads one p value (broadcast) and EV consecutive
        v values (coalesced) per j, but the whole (L, S) probability matrix is read from global
        memory EV times over."""
        start, step = cuda.grid(1), cuda.gridsize(1)
        for t in range(start, out.size, step):
            d = t % EV
            row = t // EV
            b = row // L
            acc = zero
            for j in range(S):
                acc += p[row * S + j] * v[(b * S + j) * EV + d]
            out[t] = acc

    return naive_weighted_sum


# --- flash attention: forward ---------------------------------------------------------------
def _production_specs(name, kernel_of, x, direction, args, threads_of):
    """KernelSpecs of the float32 production tiles at head dims 64 and 128 (causal, masked)."""
    prod = PRODUCTION[np.dtype(np.float32)]
    rows, cols = prod[direction]
    return [KernelSpec(f"{name}[{rows}x{cols},d{dmax}]",
                       kernel_of(x.f32, rows, cols, prod["TD"], dmax, True, True), args,
                       threads_of(rows, cols, prod["TD"]))
            for dmax in (64, MAX_HEAD_DIM)]


@cuda.jit(device=True, inline=True)
def load_tile(src, base, row0, nrows, width, dst, tid, threads, zero):
    """dst[r, c] = src[base + (row0 + r) * width + c] for every r < dst rows, c < width (zero
    for rows past nrows). Thread ``tid`` of ``threads`` copies elements tid, tid + threads, ...
    of the tile: consecutive threads read consecutive addresses (coalesced)."""
    rows = dst.shape[0]
    for t in range(tid, rows * width, threads):
        r = t // width
        c = t - r * width
        dst[r, c] = src[base + (row0 + r) * width + c] if row0 + r < nrows else zero


@reported(lambda k, x: _production_specs(
    "flash_forward", k, x, "fwd", (x.f, x.f, x.f, x.f, 0, 0, 0, 0, 1, 1, 1, 1, x.s, x.f, x.f),
    lambda rows, cols, td: rows * td))
@functools.lru_cache(maxsize=None)
def flash_forward_kernel(dtype, BQ, BK, TD, DMAX, has_mask, causal):
    nbtype = numba_type(dtype)
    zero, one, neg_inf = nbtype(0), nbtype(1), nbtype(-np.inf)
    DP = DMAX + 1                       # padded shared row: no bank conflicts across rows
    NR = DMAX // TD                     # output columns per thread
    THREADS = BQ * TD

    @cuda.jit
    def flash_forward(q, k, v, mask, m_off, m_sb, m_si, m_sj, L, S, E, EV, scale, out, lse):
        """out[b, i] and lse[b, i] for the BQ query rows of one tile, scores never stored.

        Block (TD, BQ), grid (ceil(L / BQ), B). Thread (tx, ty) owns query row ty: its running
        max and sum, and output columns tx, tx + TD, ... in registers. Per key tile of BK rows:
        K and V tiles are loaded into shared memory (coalesced), thread (tx, ty) computes the
        scores of row ty against keys tx, tx + TD, ... (Q and K from shared), the row's max
        over the tile (read back from shared), then the probabilities, and every thread
        rescales its accumulators and adds p @ V. Q, K and V are each read from global memory
        once per (query tile, key tile) pair and the output written once: no (L, S) traffic,
        which is why it beats the naive path's three passes over the score matrix."""
        Qs = cuda.shared.array((BQ, DP), nbtype)
        Ks = cuda.shared.array((BK, DP), nbtype)
        Vs = cuda.shared.array((BK, DP), nbtype)
        Ss = cuda.shared.array((BQ, BK), nbtype)   # the tile's scores
        Ps = cuda.shared.array((BQ, BK), nbtype)   # exp(score - new running max)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * TD + tx
        b, q0 = cuda.blockIdx.y, cuda.blockIdx.x * BQ
        i = q0 + ty
        load_tile(q, b * L * E, q0, L, E, Qs, tid, THREADS, zero)
        acc = cuda.local.array(NR, nbtype)
        for r in range(NR):
            acc[r] = zero
        m, l = neg_inf, zero
        end = min(S, q0 + BQ) if causal else S   # causal: tiles right of the diagonal skipped
        for k0 in range(0, end, BK):
            cuda.syncthreads()                   # Q loaded; the last tile's readers are done
            load_tile(k, b * S * E, k0, S, E, Ks, tid, THREADS, zero)
            load_tile(v, b * S * EV, k0, S, EV, Vs, tid, THREADS, zero)
            cuda.syncthreads()
            for jj in range(tx, BK, TD):
                j = k0 + jj
                s = neg_inf
                if i < L and j < S and (not causal or j <= i):
                    s = zero
                    for c in range(E):
                        s += Qs[ty, c] * Ks[jj, c]
                    s *= scale
                    if has_mask:
                        s += mask[m_off + b * m_sb + i * m_si + j * m_sj]
                Ss[ty, jj] = s
            cuda.syncthreads()
            m_new = m
            for jj in range(BK):
                m_new = max(m_new, Ss[ty, jj])
            for jj in range(tx, BK, TD):
                Ps[ty, jj] = math.exp(Ss[ty, jj] - m_new) if m_new != neg_inf else zero
            alpha = math.exp(m - m_new) if m_new != neg_inf else one
            cuda.syncthreads()
            row_sum = zero
            for jj in range(BK):
                row_sum += Ps[ty, jj]
            l = l * alpha + row_sum
            for r in range(NR):
                d = tx + r * TD
                a = acc[r] * alpha
                if d < EV:
                    for jj in range(BK):
                        a += Ps[ty, jj] * Vs[jj, d]
                acc[r] = a
            m = m_new
        if i < L:
            for r in range(NR):
                d = tx + r * TD
                if d < EV:
                    out[(b * L + i) * EV + d] = acc[r] / l if l > zero else zero
            if tx == 0:
                lse[b * L + i] = m + math.log(l) if l > zero else neg_inf

    return flash_forward


# --- flash attention: backward --------------------------------------------------------------
DELTA_ROWS = 4                          # rows (warps) per block of the delta kernel


@reported(lambda k, x: [KernelSpec("delta", k(x.f32), (x.f, x.f, 1, 1, x.f),
                                   WARP_SIZE * DELTA_ROWS)])
@functools.lru_cache(maxsize=None)
def delta_kernel(dtype):
    warp_sum = warp_allreduce("sum")
    zero = numba_type(dtype)(0)

    @cuda.jit
    def delta(g, out, R, EV, result):
        """result[r] = sum_d g[r, d] * out[r, d], one warp per row.

        Block (32, DELTA_ROWS), warp y of block x owns row x * DELTA_ROWS + y; lane l reads
        columns l, l + 32, ... (coalesced) and a ``shfl_xor_sync`` butterfly sums the lanes.
        The branch on ``row < R`` is uniform per warp. The backward kernels read these R
        numbers instead of a dot product over the whole row per (query, key) pair."""
        row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        lane = cuda.threadIdx.x
        if row < R:
            acc = zero
            for d in range(lane, EV, WARP_SIZE):
                acc += g[row * EV + d] * out[row * EV + d]
            acc = warp_sum(acc)
            if lane == 0:
                result[row] = acc

    return delta


@cuda.jit(device=True, inline=True)
def score_grad(Qs, Gs, Ks, Vs, ii, jj, i, j, L, S, E, EV, lse_i, delta_i, mask, m_off, m_sb,
               m_si, m_sj, b, scale, has_mask, causal, zero, neg_inf):
    """(p, ds) of query row i (tile row ii) against key j (tile row jj), recomputed from the
    shared Q, K, V and upstream-gradient tiles and the row's saved lse; (0, 0) when masked."""
    if i >= L or j >= S or (causal and j > i) or lse_i == neg_inf:
        return zero, zero
    s = zero
    for c in range(E):
        s += Qs[ii, c] * Ks[jj, c]
    s *= scale
    if has_mask:
        s += mask[m_off + b * m_sb + i * m_si + j * m_sj]
    p = math.exp(s - lse_i)
    dp = zero
    for c in range(EV):
        dp += Gs[ii, c] * Vs[jj, c]
    return p, p * (dp - delta_i)


@reported(lambda k, x: _production_specs(
    "flash_backward_kv", k, x, "bwd",
    (x.f, x.f, x.f, x.f, x.f, x.f, x.f, 0, 0, 0, 0, 1, 1, 1, 1, x.s, x.f, x.f),
    lambda rows, cols, td: cols * td))
@functools.lru_cache(maxsize=None)
def flash_backward_kv_kernel(dtype, BQ, BK, TD, DMAX, has_mask, causal):
    nbtype = numba_type(dtype)
    zero, neg_inf = nbtype(0), nbtype(-np.inf)
    DP = DMAX + 1
    NR = DMAX // TD
    THREADS = BK * TD

    @cuda.jit
    def flash_backward_kv(q, k, v, g, lse, delta, mask, m_off, m_sb, m_si, m_sj, L, S, E, EV,
                          scale, dk, dv):
        """dk[b, j] and dv[b, j] for the BK key rows of one tile, p recomputed, never stored.

        Block (TD, BK), grid (ceil(S / BK), B). Thread (tx, ty) owns key row ty and its dk, dv
        columns tx, tx + TD, ... in registers. K and V stay in shared memory; per query tile
        of BQ rows, Q, the upstream gradient g, lse and delta are loaded into shared memory
        (coalesced), thread (tx, ty) recomputes p and ds of key ty against queries tx,
        tx + TD, ... into shared (BK, BQ) tiles, and every thread adds its columns of p^T g
        and ds^T q. With ``causal``, query tiles entirely above the diagonal are skipped.
        Against storing p in the forward: O(L * S) less memory and traffic, for one more
        pass of the score arithmetic."""
        Ks = cuda.shared.array((BK, DP), nbtype)
        Vs = cuda.shared.array((BK, DP), nbtype)
        Qs = cuda.shared.array((BQ, DP), nbtype)
        Gs = cuda.shared.array((BQ, DP), nbtype)
        Ps = cuda.shared.array((BK, BQ), nbtype)    # p transposed: row = key
        Ds = cuda.shared.array((BK, BQ), nbtype)    # ds transposed
        lse_s = cuda.shared.array(BQ, nbtype)
        delta_s = cuda.shared.array(BQ, nbtype)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * TD + tx
        b, k0 = cuda.blockIdx.y, cuda.blockIdx.x * BK
        j = k0 + ty
        load_tile(k, b * S * E, k0, S, E, Ks, tid, THREADS, zero)
        load_tile(v, b * S * EV, k0, S, EV, Vs, tid, THREADS, zero)
        dk_acc = cuda.local.array(NR, nbtype)
        dv_acc = cuda.local.array(NR, nbtype)
        for r in range(NR):
            dk_acc[r] = zero
            dv_acc[r] = zero
        start = (k0 // BQ) * BQ if causal else 0  # queries i < k0 see none of these keys
        for q0 in range(start, L, BQ):
            cuda.syncthreads()                   # K, V loaded; the last tile's readers done
            load_tile(q, b * L * E, q0, L, E, Qs, tid, THREADS, zero)
            load_tile(g, b * L * EV, q0, L, EV, Gs, tid, THREADS, zero)
            for t in range(tid, BQ, THREADS):
                inside = q0 + t < L
                lse_s[t] = lse[b * L + q0 + t] if inside else neg_inf
                delta_s[t] = delta[b * L + q0 + t] if inside else zero
            cuda.syncthreads()
            for ii in range(tx, BQ, TD):
                p, ds = score_grad(Qs, Gs, Ks, Vs, ii, ty, q0 + ii, j, L, S, E, EV,
                                   lse_s[ii], delta_s[ii], mask, m_off, m_sb, m_si, m_sj, b,
                                   scale, has_mask, causal, zero, neg_inf)
                Ps[ty, ii] = p
                Ds[ty, ii] = ds
            cuda.syncthreads()
            for r in range(NR):
                d = tx + r * TD
                if d < EV:
                    a = dv_acc[r]
                    for ii in range(BQ):
                        a += Ps[ty, ii] * Gs[ii, d]
                    dv_acc[r] = a
                if d < E:
                    a = dk_acc[r]
                    for ii in range(BQ):
                        a += Ds[ty, ii] * Qs[ii, d]
                    dk_acc[r] = a
        if j < S:
            for r in range(NR):
                d = tx + r * TD
                if d < E:
                    dk[(b * S + j) * E + d] = dk_acc[r] * scale
                if d < EV:
                    dv[(b * S + j) * EV + d] = dv_acc[r]

    return flash_backward_kv


@reported(lambda k, x: _production_specs(
    "flash_backward_q", k, x, "bwd",
    (x.f, x.f, x.f, x.f, x.f, x.f, x.f, 0, 0, 0, 0, 1, 1, 1, 1, x.s, x.f),
    lambda rows, cols, td: rows * td))
@functools.lru_cache(maxsize=None)
def flash_backward_q_kernel(dtype, BQ, BK, TD, DMAX, has_mask, causal):
    nbtype = numba_type(dtype)
    zero, neg_inf = nbtype(0), nbtype(-np.inf)
    DP = DMAX + 1
    NR = DMAX // TD
    THREADS = BQ * TD

    @cuda.jit
    def flash_backward_q(q, k, v, g, lse, delta, mask, m_off, m_sb, m_si, m_sj, L, S, E, EV,
                         scale, dq):
        """dq[b, i] for the BQ query rows of one tile, p recomputed, never stored.

        Block (TD, BQ), grid (ceil(L / BQ), B). Thread (tx, ty) owns query row ty (its lse and
        delta in registers) and dq columns tx, tx + TD, ...; Q and g stay in shared memory,
        K and V tiles stream through it (coalesced loads) as in the forward; ds of row ty
        against keys tx, tx + TD, ... goes to a shared (BQ, BK) tile and each thread adds its
        columns of ds @ K. A second kernel rather than atomics on dq from the key-tile
        blocks: deterministic sums, and no read-modify-write traffic on global memory."""
        Qs = cuda.shared.array((BQ, DP), nbtype)
        Gs = cuda.shared.array((BQ, DP), nbtype)
        Ks = cuda.shared.array((BK, DP), nbtype)
        Vs = cuda.shared.array((BK, DP), nbtype)
        Ds = cuda.shared.array((BQ, BK), nbtype)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        tid = ty * TD + tx
        b, q0 = cuda.blockIdx.y, cuda.blockIdx.x * BQ
        i = q0 + ty
        load_tile(q, b * L * E, q0, L, E, Qs, tid, THREADS, zero)
        load_tile(g, b * L * EV, q0, L, EV, Gs, tid, THREADS, zero)
        lse_i = lse[b * L + i] if i < L else neg_inf
        delta_i = delta[b * L + i] if i < L else zero
        dq_acc = cuda.local.array(NR, nbtype)
        for r in range(NR):
            dq_acc[r] = zero
        end = min(S, q0 + BQ) if causal else S
        for k0 in range(0, end, BK):
            cuda.syncthreads()
            load_tile(k, b * S * E, k0, S, E, Ks, tid, THREADS, zero)
            load_tile(v, b * S * EV, k0, S, EV, Vs, tid, THREADS, zero)
            cuda.syncthreads()
            for jj in range(tx, BK, TD):
                p, ds = score_grad(Qs, Gs, Ks, Vs, ty, jj, i, k0 + jj, L, S, E, EV, lse_i,
                                   delta_i, mask, m_off, m_sb, m_si, m_sj, b, scale, has_mask,
                                   causal, zero, neg_inf)
                Ds[ty, jj] = ds
            cuda.syncthreads()
            for r in range(NR):
                d = tx + r * TD
                if d < E:
                    a = dq_acc[r]
                    for jj in range(BK):
                        a += Ds[ty, jj] * Ks[jj, d]
                    dq_acc[r] = a
        if i < L:
            for r in range(NR):
                d = tx + r * TD
                if d < E:
                    dq[(b * L + i) * E + d] = dq_acc[r] * scale

    return flash_backward_q


# --- host side ------------------------------------------------------------------------------
def _check(q: View, k: View, v: View, mask):
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(f"attention expects (B, L, E) query, (B, S, E) key and (B, S, Ev) "
                         f"value, got {tuple(q.shape)}, {tuple(k.shape)} and {tuple(v.shape)}")
    B, L, E = q.shape
    S, EV = k.shape[1], v.shape[2]
    if k.shape != (B, S, E) or v.shape[:2] != (B, S):
        raise ValueError(f"attention: shapes do not match: query {tuple(q.shape)}, key "
                         f"{tuple(k.shape)}, value {tuple(v.shape)}")
    if max(E, EV) > MAX_HEAD_DIM:
        raise ValueError(f"attention: head dims up to {MAX_HEAD_DIM} are supported, got "
                         f"E={E}, Ev={EV}")
    if mask is not None and tuple(mask.shape) != (B, L, S):
        raise ValueError(f"attention: expected a mask of shape {(B, L, S)}, got "
                         f"{tuple(mask.shape)}")
    return B, L, S, E, EV


def _mask_args(mask, q_buf):
    """(has_mask, buffer, offset, strides...) of an optional (B, L, S) mask view; without one,
    a placeholder the kernels never read."""
    if mask is None:
        return False, (q_buf, 0, 0, 0, 0)
    return True, (mask.buf, mask.offset, *mask.strides)


def _dmax(E, EV, TD):
    return pow2_at_least(max(E, EV), max(MIN_HEAD_DIM, TD), MAX_HEAD_DIM)


def attention_naive(q: View, k: View, v: View, mask, causal, scale):
    """``attention`` the naive way: three kernels, the (B, L, S) scores and probabilities in
    global memory. Same results as the fused path (up to summation order)."""
    B, L, S, E, EV = _check(q, k, v, mask)
    dtype = np.dtype(q.dtype)
    qb, kb, vb = dense(q), dense(k), dense(v)
    has_mask, margs = _mask_args(mask, qb)
    scores, p = empty(B * L * S, dtype), empty(B * L * S, dtype)
    out, lse = empty(B * L * EV, dtype), empty(B * L, dtype)
    if B * L * S:
        launch(naive_scores_kernel(dtype, has_mask, bool(causal)), B * L * S,
               qb, kb, *margs, L, S, E, scalar(scale, dtype), scores)
    if B * L:
        launch(naive_softmax_kernel(dtype), B * L, scores, S, p, lse)
    if B * L * EV:
        launch(naive_weighted_sum_kernel(dtype), B * L * EV, p, vb, L, S, EV, out)
    return out, lse


def attention(q: View, k: View, v: View, mask, causal, scale, *, tiles=None):
    """Contract ``attention``: the flash-attention forward -> (out (B, L, Ev), lse (B, L)).
    ``tiles`` overrides the tile configuration (``dict(fwd=(BQ, BK), bwd=(BQ, BK), TD=...)``;
    see ``PRODUCTION``) for tests and benchmarks."""
    B, L, S, E, EV = _check(q, k, v, mask)
    dtype = np.dtype(q.dtype)
    cfg = tiles_for(dtype, tiles)
    (BQ, BK), TD = cfg["fwd"], cfg["TD"]
    out, lse = empty(B * L * EV, dtype), empty(B * L, dtype)
    if B * L == 0:
        return out, lse
    qb, kb, vb = dense(q), dense(k), dense(v)
    has_mask, margs = _mask_args(mask, qb)
    kernel = flash_forward_kernel(dtype, BQ, BK, TD, _dmax(E, EV, TD), has_mask, bool(causal))
    kernel[((L + BQ - 1) // BQ, B), (TD, BQ), current_stream()](
        qb, kb, vb, *margs, L, S, E, EV, scalar(scale, dtype), out, lse)
    return out, lse


def attention_backward(q: View, k: View, v: View, out: View, lse: View, g: View, mask, causal,
                       scale, *, tiles=None):
    """Contract ``attention_backward`` -> (dq, dk, dv): delta, then the fused dK/dV and dQ
    kernels, which recompute the probabilities from Q, K and the saved lse."""
    B, L, S, E, EV = _check(q, k, v, mask)
    dtype = np.dtype(q.dtype)
    cfg = tiles_for(dtype, tiles)
    (BQ, BK), TD = cfg["bwd"], cfg["TD"]
    if B * L == 0 or S == 0:                 # no score at all: every gradient is zero
        return tuple(full(n, 0, dtype) for n in (B * L * E, B * S * E, B * S * EV))
    qb, kb, vb, ob, lb, gb = (dense(t) for t in (q, k, v, out, lse, g))
    has_mask, margs = _mask_args(mask, qb)
    stream = current_stream()
    dq, dk, dv = empty(B * L * E, dtype), empty(B * S * E, dtype), empty(B * S * EV, dtype)
    delta = empty(B * L, dtype)
    delta_kernel(dtype)[((B * L + DELTA_ROWS - 1) // DELTA_ROWS, 1), (WARP_SIZE, DELTA_ROWS),
                        stream](gb, ob, B * L, EV, delta)
    dmax, causal = _dmax(E, EV, TD), bool(causal)
    args = (qb, kb, vb, gb, lb, delta, *margs, L, S, E, EV, scalar(scale, dtype))
    flash_backward_kv_kernel(dtype, BQ, BK, TD, dmax, has_mask, causal)[
        ((S + BK - 1) // BK, B), (TD, BK), stream](*args, dk, dv)
    flash_backward_q_kernel(dtype, BQ, BK, TD, dmax, has_mask, causal)[
        ((L + BQ - 1) // BQ, B), (TD, BQ), stream](*args, dq)
    return dq, dk, dv
