"""Batched matrix multiply C[b] = A[b] @ B[b]: the register-tiled kernel, the last rung of the
matmul ladder (the first three rungs are the lesson ``minigpu/lessons/matmul.py``).

Operands are strided views: A is (B, M, K) and B is (B, K, N) with *any* strides, so a
transposed operand (``x @ W.T``: B's k stride is 1) and a broadcast batch (batch stride 0)
cost no copy. C is a new dense (B, M, N) buffer.

The kernel: BM x BK and BK x BN tiles in shared memory, and each thread computes a TM x TN
micro-tile of C in registers: per k step it loads TM + TN shared values and does TM*TN FMAs, so
shared-memory bandwidth stops being the limit (arithmetic intensity TM*TN/(TM+TN) instead of
the 1/2 of one C element per thread). The rungs before it (naive, coalesced, shared tiles) and
what each fixes are the matmul lesson's.

Edge tiles: loads outside the matrix store 0 into the shared tile (the additive identity),
so any M, N, K works (1 included) and no thread ever reads shared memory it did not fill;
stores outside C are skipped. Tile sizes are kernel-factory parameters: tests run small tiles,
the production configuration is ``PRODUCTION``.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ...simulator import config as sim_config
from ..contract import View
from . import memory
from .blocks import numba_type
from .device import SIMULATOR, current_stream, empty
from .kernelspec import KernelSpec, reported

MAX_GRID_Z = 65535  # gridDim.z limit; larger batches loop inside the kernel

# 128x128 C tile per block, 8-deep K slices, 8x8 per thread: 256 threads, 4 loads of A and 4 of
# B per thread per slice, shared tiles 2 * 8 * (128 + 4) floats = 8.25 KiB (fp32). An 8x8
# micro-tile is the smallest square one with 4 FMAs per shared load (TM*TN/(TM+TN)); 4x4 gives 2.
# Its price is registers: 164 per thread (ptxas, sm_90), so one 256-thread block per SM (12.5 %
# occupancy, ``python -m minigpu.tools.kernel_report``): the 64 independent accumulators per
# thread supply the parallelism that the missing warps would. Untimed on a GPU so far; the previous
# configuration, dict(BM=64, BN=64, BK=8, TM=4, TN=4) (80 registers, 37.5 %, 2 FMAs per load),
# is the one to compare against (``python -m minigpu.tools.bench --suite ops``).
PRODUCTION = dict(BM=128, BN=128, BK=8, TM=8, TN=8)
# The simulator interprets every CUDA thread: same kernel, 64-thread blocks when no tile
# is given (the lesson's variant); the primitive ``matmul`` picks its tiles by shape there
# (``simulator_tiles``, below). Tests run PRODUCTION explicitly.
SIMULATOR_DEFAULT = dict(BM=16, BN=16, BK=4, TM=2, TN=2)
DEFAULT = SIMULATOR_DEFAULT if SIMULATOR else PRODUCTION
PAD = 4  # shared-tile row padding (words): transposed-operand tile stores hit distinct banks


def tile_problem(BM, BN, BK, TM, TN):
    """Why (BM, BN, BK, TM, TN) is no tiling of the register-tiled kernel, or None."""
    if BM % TM or BN % TN:
        return "the micro-tile must divide the block tile"
    threads = (BM // TM) * (BN // TN)
    if (BM * BK) % threads or (BK * BN) % threads:
        return "each thread must load a whole number of tile elements"
    return None


# --- 4. register tiles ------------------------------------------------------------------------
@reported(lambda k, x: [KernelSpec(  # the production GEMM (the other rungs are the lesson's)
    "register_tiled[{BM}x{BN}x{BK},{TM}x{TN}]".format(**PRODUCTION), k(x.f32, **PRODUCTION),
    (x.f, 0, 0, 0, 0, True, x.f, 0, 0, 0, 0, True, x.f, 1, 1, 1, 1),
    (PRODUCTION["BM"] // PRODUCTION["TM"]) * (PRODUCTION["BN"] // PRODUCTION["TN"]),
    ffma_lds="goal"), KernelSpec(  # half storage, float32 accumulation
    "register_tiled_f16[{BM}x{BN}x{BK},{TM}x{TN}]".format(**PRODUCTION),
    k(np.dtype(np.float16), **PRODUCTION),
    (x.h, 0, 0, 0, 0, True, x.h, 0, 0, 0, 0, True, x.h, 1, 1, 1, 1),
    (PRODUCTION["BM"] // PRODUCTION["TM"]) * (PRODUCTION["BN"] // PRODUCTION["TN"]),
    dtype="float16")])
@functools.lru_cache(maxsize=None)
def matmul_register_tiled_kernel(dtype, BM, BN, BK, TM, TN):
    nbtype = numba_type(dtype)
    # float16 operands are stored (global and shared) in half, but multiplied and summed in
    # float32 registers, as cuBLAS does: half the bytes moved, float32 accuracy in the sum.
    # (A captured float16 constant is invalid NVVM IR in numba-cuda 0.30, so the zero that
    # pads the tiles is the accumulator's, converted on the store into the half tile.)
    acctype = numba_type(np.float32) if np.dtype(dtype) == np.float16 else nbtype
    zero = acctype(0)
    TY, TX = BM // TM, BN // TN         # threads along M and along N
    THREADS = TX * TY
    problem = tile_problem(BM, BN, BK, TM, TN)
    assert problem is None, problem
    A_LOADS = BM * BK // THREADS
    B_LOADS = BK * BN // THREADS
    # Shapes are computed here: numba needs literal (compile-time) shared/local array shapes,
    # and an expression like ``BM + PAD`` inside the kernel is a runtime int64.
    AS_SHAPE, BS_SHAPE, ACC_SHAPE = (BK, BM + PAD), (BK, BN + PAD), (TM, TN)

    @cuda.jit
    def matmul_register_tiled(a, a_off, a_sb, a_sm, a_sk, a_kfast,
                              b, b_off, b_sb, b_sk, b_sn, b_nfast, c, nbatch, M, N, K):
        """C tile BM x BN per block; each thread owns a TM x TN micro-tile held in registers.

        Thread mapping: 1-D block of (BM/TM)*(BN/TN) threads, tx = t % (BN/TN),
        ty = t // (BN/TN); thread (ty, tx) owns rows ty + i*(BM/TM) and columns tx + j*(BN/TN)
        of the block tile (strided, not contiguous, micro-tile: the lanes of a warp then read
        consecutive shared words and store consecutive C elements). Grid (N/BN, M/BM, batches).
        Per K slice of BK: all threads cooperatively copy the BM x BK slice of A and the
        BK x BN slice of B into shared memory (zeros outside), A stored k-major (As[k, m]) so
        the inner loop reads rows of both tiles. The load order follows the operand's unit
        stride (``a_kfast``/``b_nfast``: k-fast for row-major A or a transposed B), so global
        loads are coalesced for plain and transposed operands alike; rows are padded by PAD
        words so the transposing stores do not collide in one bank. Then for each of the BK
        steps a thread loads TM values of A and TN of B into registers and does TM*TN FMAs:
        TM*TN/(TM+TN) FMAs per shared load (4 for 8x8, 2 for 4x4) against 1/2 in
        ``matmul_tiled``. The TM/TN loops have constant trip counts, so they unroll and the
        accumulators live in registers (ptxas, sm_90, fp32, PRODUCTION: 164 registers, no
        spills, no local memory, 8448 B shared; the BK loop stays a loop of 64 FFMAs and 16
        LDS in the SASS). Numba types all integer arithmetic as int64
        (int32 operands are promoted), so the index math is 64-bit."""
        As = cuda.shared.array(AS_SHAPE, nbtype)
        Bs = cuda.shared.array(BS_SHAPE, nbtype)
        acc = cuda.local.array(ACC_SHAPE, acctype)
        ra = cuda.local.array(TM, acctype)
        rb = cuda.local.array(TN, acctype)
        tid = cuda.threadIdx.x
        tx = tid % TX
        ty = tid // TX
        m0 = cuda.blockIdx.y * BM
        n0 = cuda.blockIdx.x * BN
        for bz in range(cuda.blockIdx.z, nbatch, cuda.gridDim.z):
            a_base = a_off + bz * a_sb
            b_base = b_off + bz * b_sb
            for i in range(TM):
                for j in range(TN):
                    acc[i, j] = zero
            for k0 in range(0, K, BK):
                for load in range(A_LOADS):
                    e = tid + load * THREADS
                    if a_kfast:
                        mm = e // BK
                        kk = e - mm * BK
                    else:
                        kk = e // BM
                        mm = e - kk * BM
                    gm = m0 + mm
                    gk = k0 + kk
                    v = zero
                    if gm < M and gk < K:
                        v = a[a_base + gm * a_sm + gk * a_sk]
                    As[kk, mm] = v
                for load in range(B_LOADS):
                    e = tid + load * THREADS
                    if b_nfast:
                        kk = e // BN
                        nn = e - kk * BN
                    else:
                        nn = e // BK
                        kk = e - nn * BK
                    gk = k0 + kk
                    gn = n0 + nn
                    v = zero
                    if gk < K and gn < N:
                        v = b[b_base + gk * b_sk + gn * b_sn]
                    Bs[kk, nn] = v
                cuda.syncthreads()
                for kk in range(BK):
                    for i in range(TM):
                        ra[i] = As[kk, ty + i * TY]
                    for j in range(TN):
                        rb[j] = Bs[kk, tx + j * TX]
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += ra[i] * rb[j]
                cuda.syncthreads()
            c_base = bz * M * N
            for i in range(TM):
                gm = m0 + ty + i * TY
                if gm < M:
                    for j in range(TN):
                        gn = n0 + tx + j * TX
                        if gn < N:
                            c[c_base + gm * N + gn] = acc[i, j]

    return matmul_register_tiled


# --- host side --------------------------------------------------------------------------------
def _check(a: View, b: View):
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"matmul expects (B, M, K) and (B, K, N) operands, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    (ba, m, k), (bb, k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})")
    if ba != bb:
        raise ValueError(f"matmul batch sizes differ ({ba} and {bb}); broadcast them first")
    if a.dtype != b.dtype:
        raise ValueError(f"matmul operands must have the same dtype, got {a.dtype} and {b.dtype}")
    return ba, m, n, k


def operand_args(a: View, b: View):
    """Kernel arguments describing the strided operands: buffer, offset, 3 strides each."""
    return ((a.buf, a.offset, a.strides[0], a.strides[1], a.strides[2]),
            (b.buf, b.offset, b.strides[0], b.strides[1], b.strides[2]))


def checked_launch(a: View, b: View, launch):
    """Shape checks and the trivial cases, then ``launch(c, nbatch, M, N, K)`` fills C."""
    nbatch, M, N, K = _check(a, b)
    dtype = np.dtype(a.dtype)
    if nbatch * M * N == 0:
        return empty(nbatch * M * N, dtype)
    if K == 0:
        return memory.full(nbatch * M * N, 0, dtype)
    c = empty(nbatch * M * N, dtype)
    launch(c, nbatch, M, N, K)
    return c


def batch_grid(nx, ny, bx, by, nbatch):
    """Blocks covering nx (grid x) by ny (grid y), and the batch on grid z (capped)."""
    return ((nx + bx - 1) // bx, (ny + by - 1) // by, min(nbatch, MAX_GRID_Z))


def register_tiled_config(BM=None, BN=None, BK=None, TM=None, TN=None):
    """``DEFAULT`` with the given entries replaced; returns (config dict, threads per block)."""
    cfg = dict(DEFAULT)
    cfg.update({k: v for k, v in dict(BM=BM, BN=BN, BK=BK, TM=TM, TN=TN).items()
                if v is not None})
    return cfg, (cfg["BM"] // cfg["TM"]) * (cfg["BN"] // cfg["TN"])


def matmul_register_tiled(a: View, b: View, BM=None, BN=None, BK=None, TM=None, TN=None):
    cfg, threads = register_tiled_config(BM, BN, BK, TM, TN)
    pa, pb = operand_args(a, b)
    # Tile-load order per operand: along whichever of its two matrix strides is 1.
    a_kfast = a.strides[2] == 1 or a.strides[1] != 1
    b_nfast = b.strides[2] == 1 or b.strides[1] != 1

    def launch(c, nbatch, M, N, K):
        kernel = matmul_register_tiled_kernel(np.dtype(a.dtype), cfg["BM"], cfg["BN"],
                                              cfg["BK"], cfg["TM"], cfg["TN"])
        kernel[batch_grid(N, M, cfg["BN"], cfg["BM"], nbatch), threads, current_stream()](
            *pa, a_kfast, *pb, b_nfast, c, nbatch, M, N, K)

    return checked_launch(a, b, launch)


# --- the simulator's tiles ---------------------------------------------------------------------
SIMULATOR_COST = dict(block=1.4e-3, thread=1.7e-4, thread_slice=2.5e-4, access=2.5e-6)
"""Seconds the checked simulator spends per block, per thread, per thread and K slice (its two
barriers: each switches every thread of the block out and in) and per element access of the
register-tiled kernel: a least-squares fit to timed launches (6 shapes x 6 tile shapes) on
the project's 2-core machine; ``python benchmarks/simulator_matmul_tiles.py`` measures them
again and prints the fit."""


def simulator_counts(M, N, K, nbatch, BM, BN, BK, TM, TN) -> dict:
    """What :data:`SIMULATOR_COST` prices in one launch: blocks, threads, thread-slices and
    element accesses."""
    threads = (BM // TM) * (BN // TN)
    blocks = -(-M // BM) * -(-N // BN) * nbatch
    slices = -(-K // BK)
    per_slice = BM * BK // threads + BK * BN // threads + BK * (TM + TN + 4 * TM * TN)
    return dict(block=blocks, thread=blocks * threads, thread_slice=blocks * threads * slices,
                access=blocks * threads * (slices * per_slice + TM * TN))


def simulator_cost(M, N, K, nbatch, BM, BN, BK, TM, TN):
    """Predicted checked-simulator seconds of one launch (:data:`SIMULATOR_COST`)."""
    counts = simulator_counts(M, N, K, nbatch, BM, BN, BK, TM, TN)
    return sum(counts[k] * seconds for k, seconds in SIMULATOR_COST.items())


SIMULATOR_TILES = [dict(BM=bm, BN=bn, BK=bk, TM=tm, TN=tn)
                   for bm in (1, 2, 4, 8, 16, 32, 64) for bn in (1, 2, 4, 8, 16, 32, 64)
                   for bk in (4, 8, 16, 32) for tm in (1, 2, 4) for tn in (1, 2, 4)
                   if tile_problem(bm, bn, bk, tm, tn) is None
                   and (bm // tm) * (bn // tn) <= 256]
"""The tile shapes the simulator chooses from: every valid tiling of at most 256 threads."""


COMPILED_TILES = [dict(BM=8, BN=16, BK=16, TM=4, TN=4), dict(BM=16, BN=16, BK=32, TM=4, TN=4),
                  dict(BM=64, BN=16, BK=32, TM=4, TN=4)]
"""The tile shapes the simulator's compiled path (``MINIGPU_SIM_FAST=always``, the demos'
training runs) chooses from. There each tile shape is one more kernel to compile (10-15 s on 2
cores), and a training step's products come in many shapes: a LeNet step and a VAE step need
17 tile shapes of :data:`SIMULATOR_TILES`, and by :data:`SIMULATOR_COST` these three cost their
22 products 4 % more than each product's own best tile. Measured from an empty cache on 2
cores (``docs/simulator.md``): the LeNet step's first call 260 s -> 111 s, the VAE step's
151 s -> 100 s, each step after it no slower."""


@functools.lru_cache(maxsize=4096)
def simulator_tiles(M, N, K, nbatch=1, compiled=False) -> tuple:
    """The tile shape the simulator runs an (M x K) @ (K x N) product with, as ``(BM, BN, BK,
    TM, TN)``: the one of :data:`SIMULATOR_TILES` (``compiled``: of :data:`COMPILED_TILES`)
    with the least predicted cost.

    On a GPU a thread that only pads an edge tile is nearly free and PRODUCTION's 128 x 128
    tile is right; on the simulator every CUDA thread is interpreted and costs the same
    whether it works or pads, so the tile must fit the matrix: a (2 x 64) @ (64 x 256) layer
    of batch 2 runs as 2 x 64 tiles of 16 threads instead of 16 x 16 tiles of 64 threads, 8
    times fewer simulated threads and a tenth of the time. Same kernel, same checks."""
    menu = COMPILED_TILES if compiled else SIMULATOR_TILES
    best = min(menu, key=lambda t: simulator_cost(M, N, K, nbatch, **t))
    return tuple(best.values())


def matmul(a: View, b: View):
    """Contract ``matmul``: (B, M, K) @ (B, K, N) -> dense (B, M, N), register-tiled
    (PRODUCTION tiles on a GPU, :func:`simulator_tiles` on the simulator)."""
    if not SIMULATOR:
        return matmul_register_tiled(a, b)
    (nbatch, M, K), N = a.shape, b.shape[-1]
    BM, BN, BK, TM, TN = simulator_tiles(M, N, max(K, 1), min(nbatch, MAX_GRID_Z),
                                         sim_config.FAST == "always")
    return matmul_register_tiled(a, b, BM, BN, BK, TM, TN)
