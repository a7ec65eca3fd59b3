"""Softmax and log-softmax over the rows of an (R, C) matrix, forward and backward, each one
fused kernel: every row is read from global memory a few times but never written in between,
and no intermediate (row max, exponentials, row sum) ever leaves the chip.

Forward, per row (three passes inside one launch, numerically stable):

1. m = max_c x[c]                        (block- or warp-wide max)
2. s = sum_c exp(x[c] - m)               (block- or warp-wide sum; every term <= 1, s >= 1)
3. softmax: exp(x[c] - m) / s            log_softmax: (x[c] - m) - log(s)

Backward (one reduction + one write pass):

    softmax:      dx = y * (g - sum(g * y))
    log_softmax:  dx = g - exp(y) * sum(g)

Two mappings:

* ``*_block`` kernels: one block per row, threads stride over the columns (coalesced), and
  ``reduce.block_allreduce`` combines the block (warp shuffles + one barrier, or the shared
  tree when the intrinsics are missing). Right for long rows.
* ``*_warp`` kernels: one *warp* per row (a block holds ``blockDim.y`` rows); the reductions are
  pure register butterflies (``reduce.warp_allreduce``, ``shfl_xor_sync``): no shared memory,
  no barrier at all. Right for the usual classifier row (C up to ~1k): four rows per block keep
  the SM busy where a 256-thread block per 10-class row would idle 246 threads.

The production entry points pick the warp kernels when ``reduce.WARP_SHUFFLE`` says the
intrinsics exist (always on a GPU) and the row is at most ``WARP_MAX_COLS`` long.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from ..contract import View
from . import memory
from .blocks import WARP_SHUFFLE, block_allreduce, max_nan, numba_type, warp_allreduce
from .device import SIMULATOR, WARP_SIZE, current_stream, empty, scalar
from .kernelspec import KernelSpec, reported
from .reduce import MAX_BLOCK, PRODUCTION_BLOCK, row_block

WARP_MAX_COLS = 1024            # rows up to this long go one-warp-per-row
PRODUCTION_WARP_ROWS = 4           # rows (warps) per block of the warp kernels on a GPU
WARP_ROWS = 2 if SIMULATOR else PRODUCTION_WARP_ROWS


# --- forward ---------------------------------------------------------------------------------
@reported(lambda k, x: [
    KernelSpec(f"{'log_softmax' if log else 'softmax'}_block[{PRODUCTION_BLOCK}]",
               k(x.f32, PRODUCTION_BLOCK, True, log), (x.f, 1, x.s, x.s, x.f), PRODUCTION_BLOCK)
    for log in (False, True)])
@functools.lru_cache(maxsize=None)
def softmax_block_kernel(dtype, block, shuffle, log):
    nbtype = numba_type(dtype)
    row_max = block_allreduce("max", block, shuffle)
    row_sum = block_allreduce("sum", block, shuffle)

    @cuda.jit
    def softmax_block(x, C, neg_inf, zero, out):
        """out[r, :] = (log-)softmax(x[r, :]) for a dense (R, C) input.

        Thread mapping: one block per row (grid = R, 1-D block of ``block`` threads); thread t
        handles columns t, t+block, ... in each of the three passes (max, sum of exp, write),
        so every global load and store of a warp is coalesced. Each reduction has its own
        shared scratch array (no barrier needed between them). Faster than three separate
        kernels (max, exp-sum, normalise): the row is read 3 times and written once, with no
        intermediate arrays in global memory and one launch instead of three or more."""
        smax = cuda.shared.array(block, nbtype)
        ssum = cuda.shared.array(block, nbtype)
        base = cuda.blockIdx.x * C
        tid = cuda.threadIdx.x
        m = neg_inf
        for c in range(tid, C, block):
            m = max_nan(m, x[base + c])
        m = row_max(m, smax, neg_inf)
        s = zero
        for c in range(tid, C, block):
            s += math.exp(x[base + c] - m)
        s = row_sum(s, ssum, zero)
        if log:
            lse = math.log(s)
            for c in range(tid, C, block):
                out[base + c] = (x[base + c] - m) - lse
        else:
            for c in range(tid, C, block):
                out[base + c] = math.exp(x[base + c] - m) / s

    return softmax_block


@reported(lambda k, x: [
    KernelSpec(f"{'log_softmax' if log else 'softmax'}_warp", k(x.f32, log),
               (x.f, 1, 1, x.s, x.s, x.f), WARP_SIZE * PRODUCTION_WARP_ROWS)
    for log in (False, True)])
@functools.lru_cache(maxsize=None)
def softmax_warp_kernel(dtype, log):
    warp_max = warp_allreduce("max")
    warp_sum = warp_allreduce("sum")

    @cuda.jit
    def softmax_warp(x, R, C, neg_inf, zero, out):
        """out[r, :] = (log-)softmax(x[r, :]) for a dense (R, C) input, one warp per row.

        Thread mapping: block (32, rows_per_block); warp y of block b owns row
        b*blockDim.y + y; lane l handles columns l, l+32, ... (coalesced). Max and sum are
        ``shfl_xor_sync`` butterflies, so every lane ends with the row's value: no shared
        memory and no ``syncthreads``. The branch on ``row < R`` is uniform per warp, so the
        shuffles always see all 32 lanes. Faster than the block kernel for short rows: no
        barrier, no shared traffic, and no idle threads beyond the last partial warp pass."""
        row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        lane = cuda.threadIdx.x
        if row < R:
            base = row * C
            m = neg_inf
            for c in range(lane, C, WARP_SIZE):
                m = max_nan(m, x[base + c])
            m = warp_max(m)
            s = zero
            for c in range(lane, C, WARP_SIZE):
                s += math.exp(x[base + c] - m)
            s = warp_sum(s)
            if log:
                lse = math.log(s)
                for c in range(lane, C, WARP_SIZE):
                    out[base + c] = (x[base + c] - m) - lse
            else:
                for c in range(lane, C, WARP_SIZE):
                    out[base + c] = math.exp(x[base + c] - m) / s

    return softmax_warp


# --- backward --------------------------------------------------------------------------------
@reported(lambda k, x: [KernelSpec(
    f"backward_block[{PRODUCTION_BLOCK}]", k(x.f32, PRODUCTION_BLOCK, True, False),
    (x.f, x.f, 1, x.s, x.f), PRODUCTION_BLOCK)])
@functools.lru_cache(maxsize=None)
def softmax_backward_block_kernel(dtype, block, shuffle, log):
    nbtype = numba_type(dtype)
    row_sum = block_allreduce("sum", block, shuffle)

    @cuda.jit
    def softmax_backward_block(y, g, C, zero, out):
        """dx[r, :] from the forward output y and the upstream gradient g (dense (R, C)).

        Mapping as ``softmax_block``: one block per row, threads stride over columns
        (coalesced). Pass 1 reduces s = sum(g*y) (softmax) or sum(g) (log_softmax) with one
        block reduction; pass 2 writes y*(g - s) or g - exp(y)*s. One launch, no temporary
        (R, C) product array."""
        ssum = cuda.shared.array(block, nbtype)
        base = cuda.blockIdx.x * C
        tid = cuda.threadIdx.x
        s = zero
        for c in range(tid, C, block):
            if log:
                s += g[base + c]
            else:
                s += g[base + c] * y[base + c]
        s = row_sum(s, ssum, zero)
        for c in range(tid, C, block):
            if log:
                out[base + c] = g[base + c] - math.exp(y[base + c]) * s
            else:
                out[base + c] = y[base + c] * (g[base + c] - s)

    return softmax_backward_block


@reported(lambda k, x: [KernelSpec("backward_warp", k(x.f32, False), (x.f, x.f, 1, 1, x.s, x.f),
                                   WARP_SIZE * PRODUCTION_WARP_ROWS)])
@functools.lru_cache(maxsize=None)
def softmax_backward_warp_kernel(dtype, log):
    warp_sum = warp_allreduce("sum")

    @cuda.jit
    def softmax_backward_warp(y, g, R, C, zero, out):
        """As ``softmax_backward_block`` with one warp per row (block (32, rows_per_block)):
        the row sum is a ``shfl_xor_sync`` butterfly, no shared memory, no barrier."""
        row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        lane = cuda.threadIdx.x
        if row < R:
            base = row * C
            s = zero
            for c in range(lane, C, WARP_SIZE):
                if log:
                    s += g[base + c]
                else:
                    s += g[base + c] * y[base + c]
            s = warp_sum(s)
            for c in range(lane, C, WARP_SIZE):
                if log:
                    out[base + c] = g[base + c] - math.exp(y[base + c]) * s
                else:
                    out[base + c] = y[base + c] * (g[base + c] - s)

    return softmax_backward_warp


# --- host side -------------------------------------------------------------------------------
def _mapping(R, C, kernel=None, max_block=None, shuffle=None, warp_rows=None):
    """The launch for an (R, C) problem: ("warp", (grid, (32, rows))) or
    ("block", (grid, threads, use_shuffles)). ``kernel`` forces "warp" or "block"."""
    max_block = MAX_BLOCK if max_block is None else max_block
    shuffle = WARP_SHUFFLE if shuffle is None else shuffle
    if kernel is None:
        kernel = "warp" if shuffle and C <= WARP_MAX_COLS else "block"
    if kernel == "warp":
        rows = min(WARP_ROWS if warp_rows is None else warp_rows, R)
        return "warp", ((R + rows - 1) // rows, (WARP_SIZE, rows))
    block = row_block(C, max_block)
    return "block", (R, block, shuffle and block % WARP_SIZE == 0)


def softmax(x: View, log, **launch):
    """Contract ``softmax``: (log-)softmax of each row of an (R, C) view. Keyword-only
    overrides for tests and benchmarks (``kernel="warp"|"block"``, ``max_block``, ``shuffle``,
    ``warp_rows``; see ``_mapping``); none given means production."""
    R, C = x.shape
    dtype = np.dtype(x.dtype)
    out = empty(R * C, dtype)
    if R * C == 0:
        return out
    src = memory.dense(x)
    neg_inf, zero = scalar(-np.inf, dtype), scalar(0, dtype)
    kind, cfg = _mapping(R, C, **launch)
    stream = current_stream()
    if kind == "warp":
        grid, block = cfg
        softmax_warp_kernel(dtype, bool(log))[grid, block, stream](src, R, C, neg_inf, zero, out)
    else:
        grid, block, use_shfl = cfg
        softmax_block_kernel(dtype, block, use_shfl, bool(log))[grid, block, stream](
            src, C, neg_inf, zero, out)
    return out


def softmax_backward(y: View, g: View, log, **launch):
    """Contract ``softmax_backward``: the input gradient from the forward output ``y`` and the
    upstream gradient ``g`` (both (R, C)); ``launch`` as for ``softmax``."""
    R, C = y.shape
    dtype = np.dtype(y.dtype)
    out = empty(R * C, dtype)
    if R * C == 0:
        return out
    ys, gs = memory.dense(y), memory.dense(g)
    zero = scalar(0, dtype)
    kind, cfg = _mapping(R, C, **launch)
    stream = current_stream()
    if kind == "warp":
        grid, block = cfg
        softmax_backward_warp_kernel(dtype, bool(log))[grid, block, stream](
            ys, gs, R, C, zero, out)
    else:
        grid, block, use_shfl = cfg
        softmax_backward_block_kernel(dtype, block, use_shfl, bool(log))[grid, block, stream](
            ys, gs, C, zero, out)
    return out
