"""Sorting rows: ``sort`` along the last axis (values and int64 indices), which ``topk`` uses.

**Bitonic sort.** A sorting *network*: the sequence of compare-exchanges is fixed in advance
(it does not depend on the data), so every thread of a block knows its pair at every step and
no thread ever waits on a data-dependent branch. For ``P = 2**m`` elements there are
``m(m+1)/2`` steps; at step (k, j) element i is compared with element ``i ^ j``, in ascending
order when ``i & k == 0`` and descending otherwise (stage k merges bitonic runs of length k).
Each step is ``P/2`` independent compare-exchanges: one per thread.

**The order.** Elements are (value, original index) pairs compared by value, NaN counting as
larger than every number (PyTorch's rule), ties broken by the smaller index. That is a strict
total order, so the network's result is unique: the sort is *stable* (equal values keep their
input order, also when ``descending``, as PyTorch's ``stable=True``), and cuda agrees with the
NumPy reference element for element. Rows are padded to a power of two with elements that
compare after everything (index >= C).

**Where the steps run.** A row of ``P <= tile`` (``tile = 2*block``: 512 elements with the
production block of 256) is sorted entirely in shared memory by one block
(``bitonic_tile_kernel``): one global read and one global write per element, ``m(m+1)/2``
barriers. Longer rows (any length) use the classic split: the tile kernel sorts every tile
(stages k <= tile), then each later stage k runs its long-distance steps (j >= tile) as global
launches of ``bitonic_step_kernel`` (one thread per pair, coalesced: partners are ``j`` apart)
and its short steps (j < tile) back in shared memory, one tile per block. Work is
``O(P log^2 P)`` compare-exchanges, more than a merge sort's ``O(P log P)``, but they are all
parallel, branch-free and local; the lesson ``minigpu/lessons/sort.py`` compares it with a
naive rank sort.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..contract import View
from . import memory
from .blocks import launch, numba_type
from .device import SIMULATOR, current_stream, empty
from .kernelspec import KernelSpec, reported

PRODUCTION_BLOCK = 256   # threads per block on a GPU: tiles of 512 (value, index) pairs
MAX_BLOCK = 16 if SIMULATOR else PRODUCTION_BLOCK


@functools.lru_cache(maxsize=None)
def before_fn(descending):
    """Device function ``(va, ia, vb, ib, C) -> True when (va, ia) sorts before (vb, ib)``."""

    @cuda.jit(device=True, inline=True)
    def before(va, ia, vb, ib, C):
        if ia >= C:            # padding sorts after everything
            return False
        if ib >= C:
            return True
        a_nan = va != va
        b_nan = vb != vb
        if a_nan or b_nan:     # NaN is the largest value
            if a_nan and b_nan:
                return ia < ib
            return a_nan if descending else b_nan
        if va == vb:
            return ia < ib     # stable: the earlier element first
        return (va > vb) if descending else (va < vb)

    return before


@reported(lambda k, x: [KernelSpec(f"bitonic_tile[{PRODUCTION_BLOCK}]",
                                   k(x.f32, PRODUCTION_BLOCK, False), (x.f, x.i64, 1, 1, 1, 1),
                                   PRODUCTION_BLOCK)])
@functools.lru_cache(maxsize=None)
def bitonic_tile_kernel(dtype, block, descending):
    before = before_fn(descending)
    tile = 2 * block
    nbtype = numba_type(dtype)
    i64 = numba_type(np.int64)

    @cuda.jit
    def bitonic_tile(keys, idx, P, C, k_lo, k_hi):
        """Stages k = k_lo, 2*k_lo, ..., k_hi of the bitonic network, steps j < tile, on one
        tile of ``2*block`` consecutive (key, index) pairs of a padded row of length P.

        Thread mapping: grid (rows, P/tile); block of ``block`` threads, thread t owning
        pair t of each step (positions i and i + j, i = 2j*(t // j) + t % j); the direction
        comes from the *global* position (i & k), so a tile can be one piece of a longer
        merge. Memory: one coalesced load and store of the tile (keys and indices) between
        global and shared memory; every step in between reads and writes shared memory only,
        with one barrier per step. Why: a sorting network's steps are data-independent, so
        the whole tile's log-squared steps cost no global traffic at all."""
        sk = cuda.shared.array(tile, nbtype)
        si = cuda.shared.array(tile, i64)
        t = cuda.threadIdx.x
        base = cuda.blockIdx.x * P + cuda.blockIdx.y * tile
        g0 = cuda.blockIdx.y * tile   # the tile's first position in its row
        sk[t] = keys[base + t]
        si[t] = idx[base + t]
        sk[t + block] = keys[base + t + block]
        si[t + block] = idx[base + t + block]
        k = k_lo
        while k <= k_hi:
            j = min(k // 2, block)
            while j > 0:
                cuda.syncthreads()
                i = 2 * j * (t // j) + t % j
                l = i + j
                va, ia, vb, ib = sk[i], si[i], sk[l], si[l]
                ascending = ((g0 + i) & k) == 0
                if before(vb, ib, va, ia, C) == ascending:
                    sk[i], si[i], sk[l], si[l] = vb, ib, va, ia
                j //= 2
            k *= 2
        cuda.syncthreads()
        keys[base + t] = sk[t]
        idx[base + t] = si[t]
        keys[base + t + block] = sk[t + block]
        idx[base + t + block] = si[t + block]

    return bitonic_tile


@reported(lambda k, x: [KernelSpec("bitonic_step", k(False), (x.f, x.i64, 1, 1, 1, 1), x.block)])
@functools.lru_cache(maxsize=None)
def bitonic_step_kernel(descending):
    before = before_fn(descending)

    @cuda.jit
    def bitonic_step(keys, idx, P, C, k, j):
        """One long-distance step (k, j >= tile) of the network over every padded row.

        Thread mapping: one thread per compare-exchange pair (grid-stride over rows*P/2).
        Memory: a warp's pairs are consecutive positions i and i + j, so both loads and both
        stores coalesce."""
        half = P // 2
        start, step = cuda.grid(1), cuda.gridsize(1)
        for p in range(start, (keys.size // P) * half, step):
            row = p // half
            t = p - row * half
            i = 2 * j * (t // j) + t % j
            a = row * P + i
            b = a + j
            va, ia, vb, ib = keys[a], idx[a], keys[b], idx[b]
            if before(vb, ib, va, ia, C) == ((i & k) == 0):
                keys[a], idx[a], keys[b], idx[b] = vb, ib, va, ia

    return bitonic_step


@reported(lambda k, x: [KernelSpec("pad_rows", k, (x.f, 1, 1, x.f, x.i64), x.block)])
@cuda.jit
def pad_rows_kernel(x, C, P, keys, idx):
    """keys[r, p] = x[r, p] and idx[r, p] = p for p < C; the padding (p >= C) gets index p,
    which sorts last. One thread per padded element, grid-stride; coalesced."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for q in range(start, keys.size, step):
        row = q // P
        p = q - row * P
        idx[q] = p
        keys[q] = x[row * C + p] if p < C else x[row * C]


def sort(x: View, descending=False, *, max_block=None):
    """Contract ``sort``: rows of the last axis, padded to a power of two and run through the
    bitonic network (``max_block`` caps the block: tile = 2*block)."""
    max_block = MAX_BLOCK if max_block is None else max_block
    n = x.numel
    C = x.shape[-1] if x.shape else 1
    if n == 0 or C == 1:
        return memory.contiguous(x), memory.full(n, 0, np.int64)
    rows = n // C
    P = 1 << (C - 1).bit_length()
    block = min(max_block, P // 2)
    tile = 2 * block
    keys, idx = empty(rows * P, x.dtype), empty(rows * P, np.int64)
    stream = current_stream()
    launch(pad_rows_kernel, rows * P, memory.dense(x), C, P, keys, idx)
    local = bitonic_tile_kernel(np.dtype(x.dtype), block, descending)[(rows, P // tile), block,
                                                                      stream]
    local(keys, idx, P, C, 2, tile)
    k = 2 * tile
    while k <= P:
        j = k // 2
        while j >= tile:
            launch(bitonic_step_kernel(descending), rows * P // 2, keys, idx, P, C, k, j)
            j //= 2
        local(keys, idx, P, C, k, k)
        k *= 2
    if P == C:
        return keys, idx
    window = (rows, C), (P, 1), 0
    return (memory.contiguous(View(keys, *window)), memory.contiguous(View(idx, *window)))

