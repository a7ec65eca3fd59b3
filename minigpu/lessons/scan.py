"""Prefix sums: from one thread per row, through Hillis-Steele, to the work-efficient
Blelloch scan that ``cumsum`` runs (``backends/cuda/scan.py``).

A scan looks sequential (each output needs the one before), but it is a tree in disguise:

1. ``scan_thread_per_row``  one thread walks a whole row with a running sum: O(n) work, but
   only ``rows`` threads run, and the lanes of a warp read addresses a row apart (every load
   is its own memory transaction);
2. ``scan_hillis_steele``   one block per row, one element per thread, tile after tile: in
   round d every element adds the one 2**d to its left (double-buffered shared memory), so a
   tile of B elements is scanned in log2(B) rounds, but with B*log2(B) additions: the work
   grows with the tree's height, and half the threads still do an add in the last rounds;
3. production ``scan``      Blelloch's up-sweep / down-sweep on tiles of 2*B elements: 2n
   combines per tile (work-efficient, like the sequential loop), twice the elements per
   thread, and for few long rows the row is split over many blocks (scan, scan the block
   totals, propagate).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..backends.contract import View
from ..backends.cuda import memory
from ..backends.cuda.blocks import numba_type
from ..backends.cuda.device import current_stream, empty, launch_1d, scalar
from ..backends.cuda.scan import MAX_BLOCK, PRODUCTION_BLOCK, scan
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant


@cuda.jit
def scan_thread_per_row_kernel(x, K, zero, out):
    """out[r, k] = x[r, 0] + ... + x[r, k] for a dense (rows, K) input.

    Thread mapping: one thread per row (grid-stride over rows), a running sum in a register.
    Memory: lane r of a warp reads x[r, k] while lane r+1 reads x[r+1, k], K elements away:
    uncoalesced, one transaction per lane per step. Work-efficient (K adds per row), but the
    parallelism is only ``rows`` threads."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for r in range(start, x.size // K, step):
        acc = zero
        for k in range(K):
            acc += x[r * K + k]
            out[r * K + k] = acc


def scan_thread_per_row(x: View):
    rows, K = x.shape
    out = empty(rows * K, x.dtype)
    grid, block = launch_1d(rows)
    scan_thread_per_row_kernel[grid, block, current_stream()](memory.dense(x), K,
                                                              scalar(0, x.dtype), out)
    return out


@functools.lru_cache(maxsize=None)
def scan_hillis_steele_kernel(dtype, block):
    nbtype = numba_type(dtype)
    SHAPE = (2, block)  # a closure constant: numba needs a literal shape

    @cuda.jit
    def scan_hillis_steele(x, K, zero, out):
        """out[r, k] = x[r, 0] + ... + x[r, k] for a dense (rows, K) input.

        Thread mapping: one block per row, ``block`` threads; the block walks its row in tiles
        of ``block`` elements, one per thread, with a carry between tiles. Per tile, log2(block)
        rounds: thread t sets buf[dst, t] = buf[src, t] + buf[src, t - offset] (t >= offset),
        offset = 1, 2, 4, ...; the two halves of ``buf`` swap roles every round so no thread
        reads a value another thread of the same round is overwriting.
        Memory: coalesced loads and stores; shared accesses are contiguous (no conflicts).
        Why it is slower than Blelloch: block*log2(block) adds per tile instead of ~2 per
        element, and one element per thread (half the work per barrier)."""
        buf = cuda.shared.array(SHAPE, nbtype)
        tid = cuda.threadIdx.x
        base = cuda.blockIdx.x * K
        carry = zero
        for t0 in range(0, K, block):
            p = t0 + tid
            v = x[base + p] if p < K else zero
            cuda.syncthreads()  # everyone is done reading the previous tile
            buf[0, tid] = v
            src = 0
            offset = 1
            while offset < block:
                cuda.syncthreads()
                val = buf[src, tid]
                if tid >= offset:
                    val += buf[src, tid - offset]
                buf[1 - src, tid] = val
                src = 1 - src
                offset *= 2
            cuda.syncthreads()
            if p < K:
                out[base + p] = carry + buf[src, tid]
            carry += buf[src, block - 1]

    return scan_hillis_steele


def scan_hillis_steele(x: View, block=MAX_BLOCK):
    rows, K = x.shape
    out = empty(rows * K, x.dtype)
    scan_hillis_steele_kernel(np.dtype(x.dtype), block)[rows, block, current_stream()](
        memory.dense(x), K, scalar(0, x.dtype), out)
    return out


def scan_production(x: View):
    """The production ``scan('sum')`` along the rows (``cumsum(dim=1)``)."""
    return scan("sum", x, 1)


def _build(inputs):
    rows, K = inputs.size((64, 1 << 18), (3, 300))
    x = inputs.tensor(rows, K)
    return Problem(f"cumsum of {rows}x{K} float32", 2 * rows * K * 4, x=x)


def _kernels():
    f32 = np.dtype(np.float32)
    f, s, b = np.zeros(1, f32), np.float32(0), PRODUCTION_BLOCK
    return [KernelSpec("scan.thread_per_row", scan_thread_per_row_kernel, (f, 1, s, f), b),
            KernelSpec(f"scan.hillis_steele[{b}]", scan_hillis_steele_kernel(f32, b),
                       (f, 1, s, f), b)]


def _pictures():
    inputs = Inputs(small=True)
    x = inputs.tensor(1, 16)
    hillis = draw.traced(lambda: scan_hillis_steele(x, block=16))
    blelloch = draw.traced(lambda: scan("sum", x, 1, max_block=8))  # a tile of 16
    return [draw.Picture(
        "scan_trees",
        "Who reads what at each level of a 16-element inclusive scan (red arrows: the values "
        "a thread adds). Hillis-Steele: every element adds the one 1, 2, 4, 8 places back: "
        "4 levels, 49 adds. Blelloch (the production kernel, one 16-element tile): an up-sweep "
        "builds partial sums up a tree, then the down-sweep passes the prefixes back down "
        "(each X: a swap and an add): more levels, fewer adds.",
        (draw.panel("Hillis-Steele (double buffer)", draw.tree, hillis, array="buf", n=16,
                    index=lambda i: i % 16),
         draw.panel("production: Blelloch up-sweep and down-sweep", draw.tree, blelloch,
                    array="temp", n=16, index=_unpad, carry=False)))]


def _unpad(i):
    """The element of the production scan's padded shared index (one pad slot per 32)."""
    return i - i // 33


LESSON = Lesson(
    "scan", "Scan: Hillis-Steele vs work-efficient Blelloch",
    "a prefix sum is a tree: Blelloch's up-sweep/down-sweep does O(n) work where Hillis-Steele "
    "does O(n log n), and splitting long rows over blocks keeps the GPU full",
    (Experiment("scan", _build, (
        Variant("thread_per_row", "one thread per row: uncoalesced, few threads",
                lambda p: scan_thread_per_row(p.x), scan_thread_per_row),
        Variant("hillis_steele", "block per row, log2(B) rounds of B adds per tile",
                lambda p: scan_hillis_steele(p.x), scan_hillis_steele),
        Variant("scan", "production: Blelloch tiles of 2B, rows split over blocks",
                lambda p: scan_production(p.x), scan),
    ), tol=dict(rtol=1e-4, atol=1e-3),
                look_for="thread_per_row: global_load_sectors / global_load_requests equals "
                         "the number of rows (each lane reads its own row) and "
                         "sector_efficiency is low; hillis_steele reads and writes coalesced "
                         "rows. The production scan splits these long rows over blocks, so it "
                         "moves more bytes at this small size in exchange for more "
                         "parallelism."),),
    _kernels, _pictures)
