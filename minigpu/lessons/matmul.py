"""The matmul ladder: four kernels for C[b] = A[b] @ B[b], each fixing what limits the one
before. The last rung is production (``backends/cuda/matmul.py``, register-tiled).

1. ``matmul_naive``          one thread per C element, threadIdx.x along M: a warp of a 16x16
                             block (16 m x 2 n) reads 16 different rows of A (16 sectors for 64
                             useful bytes) and writes C with stride N. Correct, and memory-bound
                             at a fraction of bandwidth.
2. ``matmul_coalesced``      the same work with threadIdx.x along N: a warp (2 m x 16 n) reads
                             two A elements (each a broadcast) and 16 consecutive B elements (2
                             sectors), and writes 16 consecutive C elements per row.
3. ``matmul_tiled``          TILE x TILE tiles of A and B staged in shared memory: every global
                             element is loaded once per tile instead of once per thread,
                             cutting global traffic by TILE.
4. ``matmul_register_tiled`` (production) BM x BK and BK x BN tiles in shared memory, and each
                             thread computes a TM x TN micro-tile of C in registers: per k step
                             it loads TM + TN shared values and does TM*TN FMAs (arithmetic
                             intensity TM*TN/(TM+TN) instead of 1/2).

All four take the same strided operands and share the production host side (shape checks,
empty and K == 0 cases, batch grid).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..backends.contract import View
from ..backends.cuda.blocks import numba_type
from ..backends.cuda.device import current_stream
from ..backends.cuda.matmul import (batch_grid, checked_launch, matmul_register_tiled,
                                    operand_args, register_tiled_config)
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant


# --- 1. naive and 2. coalesced: one thread per C element, two thread mappings ----------------
@functools.lru_cache(maxsize=None)
def matmul_simple_kernel(dtype, warp_along_n: bool):
    """The one-thread-per-element kernel; ``warp_along_n`` picks which index threadIdx.x
    walks: False is rung 1 (naive, along M), True rung 2 (coalesced, along N). That one line is
    the whole difference between the two rungs."""
    zero = numba_type(dtype)(0)

    @cuda.jit
    def matmul_simple(a, a_off, a_sb, a_sm, a_sk, b, b_off, b_sb, b_sk, b_sn, c,
                      nbatch, M, N, K):
        """C[bz, m, n] = sum_k A[bz, m, k] * B[bz, k, n], one thread per C element.

        Thread mapping: x = blockIdx.x*blockDim.x + threadIdx.x, y likewise; (m, n) = (x, y)
        for the naive rung, (y, x) for the coalesced one; grid z over batches.
        Naive: with 16x16 blocks a warp is 16 consecutive m x 2 n, so each k step reads A at
        16 addresses K apart (16 sectors for 64 useful bytes), two B elements (broadcast to 16
        lanes each), and the final store writes C with stride N.
        Coalesced: a warp is 2 m x 16 consecutive n: each k step reads two A elements
        (broadcasts) and 16 consecutive B elements (2 sectors when B is row-major), and the
        store writes 16 consecutive C elements per row. Same arithmetic, several times the
        effective bandwidth.
        Either way every operand element is re-read from global memory by M or N threads."""
        x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        m, n = (y, x) if warp_along_n else (x, y)
        if m < M and n < N:
            for bz in range(cuda.blockIdx.z, nbatch, cuda.gridDim.z):
                pa = a_off + bz * a_sb + m * a_sm
                pb = b_off + bz * b_sb + n * b_sn
                acc = zero
                for k in range(K):
                    acc += a[pa + k * a_sk] * b[pb + k * b_sk]
                c[(bz * M + m) * N + n] = acc

    return matmul_simple


# --- 3. shared-memory tiles -------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def matmul_tiled_kernel(dtype, tile):
    nbtype = numba_type(dtype)
    zero = nbtype(0)
    TILE_SHAPE = (tile, tile)

    @cuda.jit
    def matmul_tiled(a, a_off, a_sb, a_sm, a_sk, b, b_off, b_sb, b_sk, b_sn, c,
                     nbatch, M, N, K):
        """C tile (tile x tile) per block, one C element per thread (tx along N, ty along M).

        Per K step of ``tile``: every thread loads one element of the A tile and one of the
        B tile into shared memory (zero outside the matrices), barrier, then each thread does
        ``tile`` multiply-adds from shared memory, barrier. Each global element is loaded once
        per block instead of once per thread: global traffic drops by a factor ``tile``. The
        inner loop reads As[ty, kk] (broadcast within a warp row) and Bs[kk, tx]
        (consecutive words, conflict-free)."""
        As = cuda.shared.array(TILE_SHAPE, nbtype)
        Bs = cuda.shared.array(TILE_SHAPE, nbtype)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        n = cuda.blockIdx.x * tile + tx
        m = cuda.blockIdx.y * tile + ty
        for bz in range(cuda.blockIdx.z, nbatch, cuda.gridDim.z):
            a_base = a_off + bz * a_sb
            b_base = b_off + bz * b_sb
            acc = zero
            for k0 in range(0, K, tile):
                ka = k0 + tx
                kb = k0 + ty
                As[ty, tx] = a[a_base + m * a_sm + ka * a_sk] if (m < M and ka < K) else zero
                Bs[ty, tx] = b[b_base + kb * b_sk + n * b_sn] if (kb < K and n < N) else zero
                cuda.syncthreads()
                for kk in range(tile):
                    acc += As[ty, kk] * Bs[kk, tx]
                cuda.syncthreads()
            if m < M and n < N:
                c[(bz * M + m) * N + n] = acc

    return matmul_tiled


def _matmul_simple(a: View, b: View, block, warp_along_n):
    pa, pb = operand_args(a, b)

    def launch(c, nbatch, M, N, K):
        kernel = matmul_simple_kernel(np.dtype(a.dtype), warp_along_n)
        nx, ny = (N, M) if warp_along_n else (M, N)
        kernel[batch_grid(nx, ny, block[0], block[1], nbatch), block, current_stream()](
            *pa, *pb, c, nbatch, M, N, K)

    return checked_launch(a, b, launch)


def matmul_naive(a: View, b: View, block=(16, 16)):
    return _matmul_simple(a, b, block, False)


def matmul_coalesced(a: View, b: View, block=(16, 16)):
    return _matmul_simple(a, b, block, True)


def matmul_tiled(a: View, b: View, tile=16):
    pa, pb = operand_args(a, b)

    def launch(c, nbatch, M, N, K):
        kernel = matmul_tiled_kernel(np.dtype(a.dtype), tile)
        kernel[batch_grid(N, M, tile, tile, nbatch), (tile, tile), current_stream()](
            *pa, *pb, c, nbatch, M, N, K)

    return checked_launch(a, b, launch)


LADDER = {
    "naive": matmul_naive,
    "coalesced": matmul_coalesced,
    "tiled": matmul_tiled,
    "register_tiled": matmul_register_tiled,
}


def _build(inputs):
    M, K, N = inputs.size((2048, 2048, 2048), (16, 32, 16))  # small: whole 16x16 tiles
    return Problem(f"{M}x{K} @ {K}x{N} float32", 2 * M * N * K, M=M, N=N, K=K,
                   a=inputs.tensor(1, M, K), b=inputs.tensor(1, K, N))


def _notes():
    cfg, _ = register_tiled_config()
    return {"naive": "16x16, warp along M", "coalesced": "warp along N",
            "tiled": "16x16 shared tiles",
            "register_tiled": "{BM}x{BN}x{BK}, {TM}x{TN} per thread".format(**cfg)}


def _kernels():
    f32 = np.dtype(np.float32)
    f = np.zeros(1, f32)
    margs = (f, 0, 0, 0, 0, f, 0, 0, 0, 0, f, 1, 1, 1, 1)
    return [KernelSpec("matmul.naive[16x16]", matmul_simple_kernel(f32, False), margs, 256),
            KernelSpec("matmul.coalesced[16x16]", matmul_simple_kernel(f32, True), margs, 256),
            KernelSpec("matmul.tiled[16]", matmul_tiled_kernel(f32, 16), margs, 256,
                       ffma_lds="report")]


def _pictures():
    inputs = Inputs(small=True)
    M, K, N = 32, 48, 32
    a, b = inputs.tensor(1, M, K), inputs.tensor(1, K, N)
    tr = {name: draw.traced(lambda fn=LADDER[name]: fn(a, b), block=(1, 1))
          for name in ("coalesced", "tiled")}

    arrays = (("a", (M, K)), ("b", (K, N)))
    return [draw.Picture(
        "matmul_tiles",
        "Global loads of a and b by one 16x16 block (block (1, 1): the tile of c at rows and "
        "columns 16-31). It needs a 16-row strip of a and a 16-column strip of b. Before: each "
        "thread loads its own row and column, so every element of the strips is loaded 16 "
        "times. After: the block stages 16x16 tiles (black lines) in shared memory, one step "
        "along K at a time: each element is loaded once and read 16 times from shared memory.",
        (draw.panel("before: one thread per output, no tiles", draw.heat, tr["coalesced"],
                    arrays=arrays, vmax=16),
         draw.panel("after: 16x16 shared tiles", draw.heat, tr["tiled"], arrays=arrays,
                    vmax=16, tile=16)))]

LESSON = Lesson(
    "matmul", "The matmul ladder",
    "coalesced thread mapping, shared-memory tiles, then register tiles: from memory bound "
    "to FMA bound",
    (Experiment("matmul",
                _build,
                tuple(Variant(name, note, (lambda fn: lambda p: fn(p.a, p.b))(LADDER[name]),
                              LADDER[name]) for name, note in _notes().items()),
                unit="GFLOP/s", memory_bound=False, tol=dict(rtol=1e-4, atol=1e-4 * 2048),
                reference=lambda ref, p: ref.matmul(p.M, p.N, p.K),
                look_for="global_load_requests: the same for naive and coalesced, 16 times "
                         "fewer for tiled (a 16x16 tile loads each element once per block "
                         "instead of once per thread); global_load_sectors of naive several "
                         "times coalesced's (its warps read down columns of a); bytes_moved "
                         "falls at each of the first three rungs."),),
    _kernels, _pictures)
