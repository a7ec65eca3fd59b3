"""The reduction ladder: six ways to sum a vector, each fixing the bottleneck of the one before
(after M. Harris, "Optimizing Parallel Reduction in CUDA"). The last rung is the production
``reduce`` (``backends/cuda/reduce.py``).

(a) ``interleaved``   shared-memory tree, ``tid % (2*s)`` picks the active threads: divergent
                      warps (no bank conflicts: the counters show 1 wavefront per shared
                      request; Harris's conflicted rung, strided indices, is skipped).
(b) ``sequential``    active threads are ``tid < s``: whole warps retire together, and the
                      accesses are contiguous.
(c) ``first_add``     each thread adds two elements while loading: half the blocks, and no
                      thread idles in the first tree step.
(d) ``shuffle_tail``  the last 32 partial sums are combined with ``shfl_down_sync`` inside
                      one warp: no shared memory and no barriers for the last 5 steps.
(e) ``warp_shuffle``  every thread first accumulates many elements in a register (grid-stride
                      loop), every warp reduces with shuffles, and one barrier joins the
                      per-warp partials: O(1) barriers per block. The design of the production
                      row kernel.
(f) ``grid_two_pass`` the production path, ``reduce``: (e)'s block reduction on a grid sized
                      to one full wave of the GPU (each block one contiguous chunk), then one
                      block over the partials: two launches for any n (one when n is too
                      short to split), and the same path serves every few-long-rows reduction.

Rungs (d) and (e) need warp intrinsics; under a simulator without them they are left out.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..backends.contract import View
from ..backends.cuda import memory
from ..backends.cuda.blocks import FULL_MASK, WARP_SHUFFLE, block_allreduce, numba_type
from ..backends.cuda.device import WARP_SIZE, current_stream, empty, scalar
from ..backends.cuda.reduce import MAX_BLOCK, PRODUCTION_BLOCK, reduce
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant

LADDER_MAX_GRID = 1024   # blocks of the grid-stride rung (e)


@functools.lru_cache(maxsize=None)
def sum_interleaved_kernel(dtype, block):
    nbtype = numba_type(dtype)

    @cuda.jit
    def sum_interleaved(x, n, zero, out):
        """(a) out[b] = sum of x[b*block : (b+1)*block].

        One thread per element, 1-D blocks of ``block``; each thread stores its element in
        shared memory, then the tree doubles the stride s: threads with tid % (2s) == 0 add
        sdata[tid + s]. The modulo keeps only every 2s-th thread active, so every warp
        diverges at every step (and ``%`` is slow). The active lanes of a warp touch distinct
        banks (addresses 2s apart, at most 16 of them): no bank conflict, 1 wavefront per
        shared request."""
        sdata = cuda.shared.array(block, nbtype)
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * block + tid
        sdata[tid] = x[i] if i < n else zero
        cuda.syncthreads()
        s = 1
        while s < block:
            if tid % (2 * s) == 0:
                sdata[tid] += sdata[tid + s]
            cuda.syncthreads()
            s *= 2
        if tid == 0:
            out[cuda.blockIdx.x] = sdata[0]

    return sum_interleaved


@functools.lru_cache(maxsize=None)
def sum_sequential_kernel(dtype, block):
    nbtype = numba_type(dtype)
    tree = block_allreduce("sum", block, False)

    @cuda.jit
    def sum_sequential(x, n, zero, out):
        """(b) out[b] = sum of x[b*block : (b+1)*block].

        Same mapping as (a); the tree (``block_allreduce(shuffle=False)``) halves s from
        block/2 and threads tid < s add sdata[tid + s]. Active threads are contiguous: whole
        warps are either all active or all idle (no divergence until s < 32), and a warp reads
        32 consecutive words (no bank conflicts). Still, half the threads idle from the first
        step on."""
        sdata = cuda.shared.array(block, nbtype)
        i = cuda.blockIdx.x * block + cuda.threadIdx.x
        total = tree(x[i] if i < n else zero, sdata, zero)
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = total

    return sum_sequential


@functools.lru_cache(maxsize=None)
def sum_first_add_kernel(dtype, block):
    nbtype = numba_type(dtype)
    tree = block_allreduce("sum", block, False)

    @cuda.jit
    def sum_first_add(x, n, zero, out):
        """(c) out[b] = sum of x[2*b*block : 2*(b+1)*block].

        Each thread loads two elements block apart (both loads coalesced) and stores their
        sum: the grid halves and no thread is idle in what was the first tree step. Tree as
        in (b)."""
        sdata = cuda.shared.array(block, nbtype)
        i = cuda.blockIdx.x * (2 * block) + cuda.threadIdx.x
        acc = x[i] if i < n else zero
        if i + block < n:
            acc += x[i + block]
        total = tree(acc, sdata, zero)
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = total

    return sum_first_add


@functools.lru_cache(maxsize=None)
def sum_shuffle_tail_kernel(dtype, block):
    nbtype = numba_type(dtype)

    @cuda.jit
    def sum_shuffle_tail(x, n, zero, out):
        """(d) as (c), but the tree stops at 32 partials; warp 0 finishes them with
        ``shfl_down_sync`` (offsets 16..1): lanes exchange registers directly, so the last five
        steps need neither shared memory nor barriers (the classic "unroll the last warp",
        without relying on implicit warp synchrony)."""
        sdata = cuda.shared.array(block, nbtype)
        tid = cuda.threadIdx.x
        i = cuda.blockIdx.x * (2 * block) + tid
        acc = x[i] if i < n else zero
        if i + block < n:
            acc += x[i + block]
        if block > WARP_SIZE:
            sdata[tid] = acc
            cuda.syncthreads()
            s = block // 2
            while s >= WARP_SIZE:
                if tid < s:
                    sdata[tid] += sdata[tid + s]
                cuda.syncthreads()
                s //= 2
            acc = sdata[tid] if tid < WARP_SIZE else zero
        if tid < WARP_SIZE:
            offset = 16
            while offset > 0:
                acc += cuda.shfl_down_sync(FULL_MASK, acc, offset)
                offset //= 2
            if tid == 0:
                out[cuda.blockIdx.x] = acc

    return sum_shuffle_tail


@functools.lru_cache(maxsize=None)
def sum_warp_shuffle_kernel(dtype, block):
    nbtype = numba_type(dtype)
    allreduce = block_allreduce("sum", block, True)

    @cuda.jit
    def sum_warp_shuffle(x, n, zero, out):
        """(e) out[b] = sum of x[b*block + t + k*gridsize] over t, k: a grid-stride loop.

        Each thread accumulates many elements in a register (coalesced loads, no
        synchronisation), then ``block_allreduce``: shuffles inside every warp, one barrier,
        shuffles over the per-warp partials. The grid is capped (``LADDER_MAX_GRID``), so a
        second launch of one block finishes any n. This is the design of the production row
        kernel."""
        scratch = cuda.shared.array(block, nbtype)
        acc = zero
        for i in range(cuda.grid(1), n, cuda.gridsize(1)):
            acc += x[i]
        acc = allreduce(acc, scratch, zero)
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = acc

    return sum_warp_shuffle


def ladder_run(factory, per_thread, max_grid, v: View, block):
    """Launch one rung pass after pass on the per-block partials until one value is left."""
    dtype = np.dtype(v.dtype)
    n = v.numel
    if n == 0:
        return memory.full(1, 0, dtype)
    buf = v.buf[v.offset:v.offset + n] if v.is_contiguous() else memory.contiguous(v)
    kernel = factory(dtype, block)
    zero = scalar(0, dtype)
    while True:
        grid = min(-(-n // (block * per_thread)), max_grid)
        out = empty(grid, dtype)
        kernel[grid, block, current_stream()](buf, n, zero, out)
        if grid == 1:
            return out
        buf, n = out, grid


def sum_interleaved(x: View, block=MAX_BLOCK):
    return ladder_run(sum_interleaved_kernel, 1, 2 ** 31 - 1, x, block)


def sum_sequential(x: View, block=MAX_BLOCK):
    return ladder_run(sum_sequential_kernel, 1, 2 ** 31 - 1, x, block)


def sum_first_add(x: View, block=MAX_BLOCK):
    return ladder_run(sum_first_add_kernel, 2, 2 ** 31 - 1, x, block)


def sum_shuffle_tail(x: View, block=MAX_BLOCK):
    return ladder_run(sum_shuffle_tail_kernel, 2, 2 ** 31 - 1, x, block)


def sum_warp_shuffle(x: View, block=MAX_BLOCK, max_grid=LADDER_MAX_GRID):
    return ladder_run(sum_warp_shuffle_kernel, 1, max_grid, x, block)


def sum_grid_two_pass(x: View, block=MAX_BLOCK, splits=None):
    """(f) The production ``reduce("sum")`` of the whole vector: a 1-D vector is one row, so
    ``row_plan`` splits it over one wave of blocks (``row_reduce`` on a (1, splits) grid,
    each block one contiguous, block-aligned chunk, (e)'s register loop and shuffle
    reduction), then one more ``row_reduce`` block reduces the ``splits`` partials. Versus
    (e): the grid comes from the device (SMs x resident blocks per SM, so every SM is busy
    and no tail wave is left) instead of a fixed cap, and the same two-pass path serves any
    (rows, K) reduction whose rows are too few to fill the GPU, not only a vector. A vector
    too short to split (n < 2 x block x ``MIN_SPLIT_WORK``) takes one pass. ``splits``
    forces the number of chunks."""
    if x.numel == 0:
        return memory.full(1, 0, x.dtype)
    return reduce("sum", x, tuple(range(len(x.shape))), max_block=block, row_split=splits)


LADDER = {
    "interleaved": sum_interleaved,
    "sequential": sum_sequential,
    "first_add": sum_first_add,
    "shuffle_tail": sum_shuffle_tail,
    "warp_shuffle": sum_warp_shuffle,
    "grid_two_pass": sum_grid_two_pass,
}
SHUFFLE_RUNGS = ("shuffle_tail", "warp_shuffle")
"""Rungs that need warp intrinsics (left out under a simulator without them)."""


def _build(inputs):
    n = inputs.size(1 << 26, 300)
    x = inputs.view(inputs.upload(inputs.rng.random(n)), (n,))
    return Problem(f"sum of {n} float32", n * 4, x=x)


def _rung(name, fn):
    source = reduce if name == "grid_two_pass" else fn
    return Variant(name, f"{MAX_BLOCK} threads per block", lambda p: fn(p.x), source)


def _kernels():
    f32 = np.dtype(np.float32)
    f, s, rb = np.zeros(1, f32), np.float32(0), PRODUCTION_BLOCK
    factories = (("interleaved", sum_interleaved_kernel), ("sequential", sum_sequential_kernel),
                 ("first_add", sum_first_add_kernel), ("shuffle_tail", sum_shuffle_tail_kernel),
                 ("warp_shuffle", sum_warp_shuffle_kernel))
    return [KernelSpec(f"reduction.{rung}[{rb}]", factory(f32, rb), (f, 1, s, f), rb)
            for rung, factory in factories]



def _pictures():
    inputs = Inputs(small=True)
    x16 = inputs.view(inputs.upload(inputs.rng.random(16)), (16,))
    x128 = inputs.view(inputs.upload(inputs.rng.random(128)), (128,))
    tree = {name: draw.traced(lambda fn=LADDER[name]: fn(x16, 16))
            for name in ("interleaved", "sequential")}
    masks = {name: draw.traced(lambda fn=LADDER[name]: fn(x128, 64))
             for name in ("interleaved", "sequential")}
    return [
        draw.Picture(
            "reduction_tree",
            "One block of 16 threads sums 16 values in shared memory, one level per barrier "
            "interval; a red arrow is one add. Interleaved: thread t adds sdata[t + s] when t % "
            "2s == 0 (s = 1, 2, 4, ...). Sequential: threads t < s add sdata[t + s] (s = 8, 4, "
            "...). Same adds, different threads doing them.",
            (draw.panel("before: interleaved (tid % 2s == 0)", draw.tree, tree["interleaved"],
                        array="sdata", n=16),
             draw.panel("after: sequential (tid < s)", draw.tree, tree["sequential"],
                        array="sdata", n=16))),
        draw.Picture(
            "reduction_divergence",
            "Which of the 64 threads of a block store a partial sum at each step. Interleaved: "
            "the working threads are scattered, so both warps issue every step with most lanes "
            "idle (pink). Sequential: they are packed at the front, so from step 1 on warp 1 "
            "has no work and skips the step (grey).",
            (draw.panel("before: interleaved", draw.masks, masks["interleaved"],
                        space="shared", kind="store", array="sdata"),
             draw.panel("after: sequential", draw.masks, masks["sequential"],
                        space="shared", kind="store", array="sdata"))),
    ]


LESSON = Lesson(
    "reduction", "The reduction ladder",
    "six ways to sum a vector, from a divergent shared-memory tree to warp shuffles on a "
    "grid sized to the GPU",
    (Experiment("reduction", _build,
                tuple(_rung(name, fn) for name, fn in LADDER.items()
                      if WARP_SHUFFLE or name not in SHUFFLE_RUNGS),
                tol=dict(rtol=1e-4, atol=1e-3),
                look_for="barriers fall down the ladder (the shuffle rungs replace the last "
                         "tree steps; the grid rungs need one per block); warp_efficiency of "
                         "interleaved is about half of sequential's (its active threads are "
                         "scattered over every warp); shared_load_requests fall once the "
                         "first add happens while loading."),),
    _kernels, _pictures)
