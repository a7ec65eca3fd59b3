"""Layer normalisation over the rows of an (R, C) matrix: a fused forward row kernel (Welford
statistics in one pass, warp shuffles, no shared memory) and a fused backward.

Forward, per row r (``C`` features, PyTorch's biased variance)::

    mean_r = sum_c x[r, c] / C            var_r = sum_c (x[r, c] - mean_r)**2 / C
    rstd_r = 1 / sqrt(var_r + eps)
    y[r, c] = (x[r, c] - mean_r) * rstd_r * w[c] + b[c]

Composed from existing primitives this is five launches and four (R, C) temporaries
(mean, x - mean, its square and mean, the normalised x, the affine). The fused kernel reads
each row twice (statistics, then output) and writes it once, and ``mean``/``rstd`` (R floats
each) are saved for the backward.

**Welford in one pass.** The textbook ``var = E[x^2] - E[x]^2`` is one pass too, but it
cancels catastrophically when ``|mean| >> std`` (float32 features around 1e3 with unit spread
lose every significant digit). Welford's update keeps a running ``(count, mean, M2)`` per lane
(``M2`` = sum of squared deviations from the running mean), which is exact enough in float32;
the 32 lanes' partials are then merged with Chan et al.'s pairwise rule::

    n = na + nb;  d = mean_b - mean_a;  mean = mean_a + d * nb / n;
    M2 = M2a + M2b + d*d * na * nb / n

in a ``shfl_xor_sync`` butterfly (offsets 16, 8, 4, 2, 1). The merge is not commutative in
floating point, so each pair of partners orders the operands by lane (the lower lane's partial
is ``a``): both lanes compute bit-identical results and every lane of the warp ends with the
same statistics.

Backward, per row, with ``xhat = (x - mean) * rstd`` and ``gw = g * w``::

    dx[r, c] = rstd_r * (gw[c] - sum_c(gw)/C - xhat[c] * sum_c(gw * xhat)/C)
    dw[c] = sum_r g[r, c] * xhat[r, c]          db[c] = sum_r g[r, c]

``dx`` is one warp-per-row kernel (two warp sums, then one write pass); ``dw``/``db`` are one
column kernel (a thread per feature walks down the rows, so a warp reads 32 neighbouring
features of one row: coalesced) that recomputes ``xhat`` from x and the saved statistics
instead of storing an (R, C) temporary.

Mapping: one warp per row, ``rows`` warps per block (block (32, rows)); rows of any length
(each lane strides over the columns). The warp kernels need the warp intrinsics: always there
on a GPU and under minigpu's simulator (``blocks.WARP_SHUFFLE``).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from ..contract import View
from .device import SIMULATOR, WARP_SIZE, current_stream, empty, grid_1d, scalar
from .kernelspec import KernelSpec, reported
from .blocks import FULL_MASK, WARP_SHUFFLE, warp_allreduce
from .memory import dense, full

PRODUCTION_WARP_ROWS = 4           # rows (warps) per block of the row kernels on a GPU
WARP_ROWS = 2 if SIMULATOR else PRODUCTION_WARP_ROWS
COLUMN_BLOCK = 32 if SIMULATOR else 256  # threads per block of the dw/db column kernel


@cuda.jit(device=True)
def welford_merge(na, ma, m2a, nb, mb, m2b):
    """Chan et al.'s merge of two (count, mean, M2) partials; an empty side leaves the other
    unchanged (no division by zero)."""
    n = na + nb
    if nb == 0:
        return na, ma, m2a
    if na == 0:
        return nb, mb, m2b
    d = mb - ma
    return n, ma + d * (nb / n), m2a + m2b + d * d * (na * nb / n)


@reported(lambda k, x: [KernelSpec("forward", k(True, True),
                                   (x.f, x.f, x.f, 1, 1, x.s, x.s, x.s, x.s, x.f, x.f, x.f),
                                   WARP_SIZE * PRODUCTION_WARP_ROWS)])
@functools.lru_cache(maxsize=None)
def layer_norm_kernel(has_weight, has_bias):
    @cuda.jit
    def layer_norm(x, w, b, R, C, zero, one, inv_c, eps, y, mean_out, rstd_out):
        """y[r, :] = (x[r, :] - mean_r) * rstd_r * w + b for a dense (R, C) x; saves mean, rstd.

        Thread mapping: block (32, rows); warp y of block k owns row k*rows + y, lane l the
        columns l, l+32, ... (every warp load is coalesced). Pass 1: each lane runs Welford
        over its columns, then a 5-step ``shfl_xor_sync`` butterfly merges the 32 partials
        (ordered by lane, so all lanes agree bit for bit). Pass 2 re-reads the row and writes
        y. Registers only: no shared memory, no barrier; the ``row < R`` branch is uniform per
        warp, so the shuffles always see all 32 lanes. Faster than the composed version: one
        launch instead of five, the row read twice and written once, no (R, C) temporaries,
        and the statistics in one pass without the cancellation of E[x^2] - E[x]^2."""
        row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        lane = cuda.threadIdx.x
        if row < R:
            base = row * C
            n = zero
            m = zero
            m2 = zero
            for c in range(lane, C, WARP_SIZE):
                v = x[base + c]
                n += one
                d = v - m
                m += d / n
                m2 += d * (v - m)
            offset = 16
            while offset > 0:
                nb = cuda.shfl_xor_sync(FULL_MASK, n, offset)
                mb = cuda.shfl_xor_sync(FULL_MASK, m, offset)
                m2b = cuda.shfl_xor_sync(FULL_MASK, m2, offset)
                if lane & offset:   # the partner has the lower lane: its partial goes first
                    n, m, m2 = welford_merge(nb, mb, m2b, n, m, m2)
                else:
                    n, m, m2 = welford_merge(n, m, m2, nb, mb, m2b)
                offset //= 2
            rstd = one / math.sqrt(m2 * inv_c + eps)
            if lane == 0:
                mean_out[row] = m
                rstd_out[row] = rstd
            for c in range(lane, C, WARP_SIZE):
                v = (x[base + c] - m) * rstd
                if has_weight:
                    v = v * w[c]
                if has_bias:
                    v = v + b[c]
                y[base + c] = v

    return layer_norm


@reported(lambda k, x: [KernelSpec("backward", k(True),
                                   (x.f, x.f, x.f, x.f, x.f, 1, 1, x.s, x.s, x.f),
                                   WARP_SIZE * PRODUCTION_WARP_ROWS)])
@functools.lru_cache(maxsize=None)
def layer_norm_backward_kernel(has_weight):
    warp_sum = warp_allreduce("sum")

    @cuda.jit
    def layer_norm_backward(g, x, w, mean, rstd, R, C, zero, inv_c, dx):
        """dx[r, :] = rstd_r * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w.

        Mapping as ``layer_norm``: one warp per row (block (32, rows)), lanes stride over the
        columns (coalesced). Pass 1 accumulates sum(gw) and sum(gw * xhat) in registers and
        reduces each with a shuffle butterfly; pass 2 re-reads g and x and writes dx. One
        launch, no (R, C) temporaries (xhat is recomputed from x and the saved statistics)."""
        row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        lane = cuda.threadIdx.x
        if row < R:
            base = row * C
            m = mean[row]
            s = rstd[row]
            sum_gw = zero
            sum_gwx = zero
            for c in range(lane, C, WARP_SIZE):
                gw = g[base + c]
                if has_weight:
                    gw = gw * w[c]
                sum_gw += gw
                sum_gwx += gw * ((x[base + c] - m) * s)
            a = warp_sum(sum_gw) * inv_c
            bb = warp_sum(sum_gwx) * inv_c
            for c in range(lane, C, WARP_SIZE):
                gw = g[base + c]
                if has_weight:
                    gw = gw * w[c]
                dx[base + c] = s * (gw - a - (x[base + c] - m) * s * bb)

    return layer_norm_backward


@reported(lambda k, x: [KernelSpec("param_grad", k, (x.f, x.f, x.f, x.f, 1, 1, x.s, x.f, x.f),
                                   x.block)])
@cuda.jit
def layer_norm_param_grad_kernel(g, x, mean, rstd, R, C, zero, dw, db):
    """dw[c] = sum_r g[r, c] * xhat[r, c] and db[c] = sum_r g[r, c].

    Thread mapping: one thread per feature column c (1-D grid-stride over C), walking down the
    R rows; block ``COLUMN_BLOCK`` threads. A warp reads 32 neighbouring columns of one row per
    step: coalesced, and the row statistics it needs are one broadcast load each. Both sums
    in registers, each written once: no atomics, deterministic, and no (R, C) xhat temporary.
    (Few, very long columns would want a split over R too; LayerNorm's C is the feature width
    and R the tokens, so C is usually large enough to fill the GPU.)"""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for c in range(start, C, step):
        sw = zero
        sb = zero
        for r in range(R):
            gv = g[r * C + c]
            sw += gv * ((x[r * C + c] - mean[r]) * rstd[r])
            sb += gv
        dw[c] = sw
        db[c] = sb


def _check_shuffle():
    if not WARP_SHUFFLE:
        raise RuntimeError("layer_norm's cuda kernels need the warp intrinsics (shfl_xor_sync): "
                           "unset MINIGPU_STOCK_SIMULATOR to use minigpu's simulator")


def _row_launch(R, rows):
    rows = min(WARP_ROWS if rows is None else rows, R)
    return (R + rows - 1) // rows, (WARP_SIZE, rows)


def layer_norm(x: View, weight, bias, eps, *, rows=None):
    """Contract ``layer_norm``: (y, mean, rstd) buffers for an (R, C) view; ``weight`` and
    ``bias`` are (C,) views or None. ``rows`` (warps per block) overrides the launch."""
    _check_shuffle()
    R, C = x.shape
    dtype = np.dtype(x.dtype)
    y = empty(R * C, dtype)
    if R * C == 0:  # no rows, or rows of no features (whose mean is NaN, as NumPy's)
        return y, full(R, np.nan, dtype), full(R, np.nan, dtype)
    mean, rstd = empty(R, dtype), empty(R, dtype)
    src = dense(x)
    w = src if weight is None else dense(weight)  # a placeholder the kernel never reads
    b = src if bias is None else dense(bias)
    grid, block = _row_launch(R, rows)
    layer_norm_kernel(weight is not None, bias is not None)[grid, block, current_stream()](
        src, w, b, R, C, scalar(0, dtype), scalar(1, dtype), scalar(1.0 / C, dtype),
        scalar(eps, dtype), y, mean, rstd)
    return y, mean, rstd


def layer_norm_backward(g: View, x: View, mean: View, rstd: View, weight, param_grads, *,
                        rows=None, column_block=None):
    """Contract ``layer_norm_backward``: (dx, dweight, dbias) buffers; the last two are None
    unless ``param_grads``. ``rows`` and ``column_block`` override the launches."""
    _check_shuffle()
    R, C = x.shape
    dtype = np.dtype(x.dtype)
    dx = empty(R * C, dtype)
    dw = db = None
    if param_grads:
        dw, db = empty(C, dtype), empty(C, dtype)
    zero = scalar(0, dtype)
    if R * C == 0:
        if param_grads:
            dw, db = full(C, 0, dtype), full(C, 0, dtype)
        return dx, dw, db
    gs, xs, ms, rs = dense(g), dense(x), dense(mean), dense(rstd)
    w = xs if weight is None else dense(weight)
    stream = current_stream()
    grid, block = _row_launch(R, rows)
    layer_norm_backward_kernel(weight is not None)[grid, block, stream](
        gs, xs, w, ms, rs, R, C, zero, scalar(1.0 / C, dtype), dx)
    if param_grads:
        cb = COLUMN_BLOCK if column_block is None else column_block
        layer_norm_param_grad_kernel[grid_1d(C, cb), cb, stream](gs, xs, ms, rs, R, C, zero,
                                                                 dw, db)
    return dx, dw, db
