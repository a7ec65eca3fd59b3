"""Occupancy: how many warps an SM keeps resident, and the block-size sweep lesson.

(The calculator is also what the static kernel report uses for every kernel.)

An SM hides the latency of a memory access by switching to another warp that is ready to
run. How many warps it can choose from, its *occupancy*, is set by whichever per-SM resource
runs out first when blocks of a kernel are packed onto it:

* warp slots      2048 threads = 64 warps per SM;
* block slots     32 blocks per SM (so blocks of 32 threads can never fill more than half);
* registers       64 K 32-bit registers per SM, in 4 sub-partitions of 16 K, one per warp
                  scheduler; each warp gets ``regs/thread * 32`` rounded up to 256, inside one
                  sub-partition (so one extra register per thread can cost a whole warp);
* shared memory   228 KiB per SM, at most 227 KiB per block; each block also costs 1 KiB the
                  runtime reserves, and allocations round up to 128 bytes.

:func:`theoretical_occupancy` is that computation, done the way the CUDA runtime's occupancy
calculator (``cuda_occupancy.h``) does it, for the H200 (H100 and H200 share the sm_90 SM).
It is pure Python: ``python -m minigpu.tools.kernel_report`` feeds it the registers and
shared memory that ``ptxas`` reports for every kernel, with no GPU needed.

Lesson: block size and occupancy (``saxpy_kernel`` launched with 32 ... 1024 threads)
    ``saxpy`` is memory bound (12 bytes per 2 flops), so its speed is the bandwidth the SM can
    pull, which needs many loads in flight, which needs many resident warps. With 15 registers
    per thread and no shared memory, the block size alone sets the occupancy:

    ====== ============ =========== ==========================================
    block  blocks/SM    warps/SM    limited by
    ====== ============ =========== ==========================================
    32     32           32 (50 %)   the 32-block limit: half the warp slots idle
    64     32           64 (100 %)  warps and blocks together
    128+   2048/block   64 (100 %)  warp slots
    ====== ============ =========== ==========================================

    On a GPU, expect 32-thread blocks to be slower than 64 and up: past full occupancy, a
    bigger block buys nothing (and 1024-thread blocks make the tail of the grid coarser). High occupancy is a means, not the goal: the register-tiled
    GEMM (``matmul.py``) runs at 12.5 % occupancy on purpose, trading warps for registers that
    each do four FMAs per shared-memory load. ``python -m minigpu.tools.bench --lesson occupancy``
    measures the sweep; ``python -m minigpu.tools.kernel_report`` prints each kernel's occupancy.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import cuda

from ..backends.cuda.device import SIMULATOR, current_stream, empty, synchronize
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant


class SMLimits(NamedTuple):
    """Per-SM and per-block limits of one GPU architecture (``cudaDeviceProp`` names)."""

    name: str
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    regs_per_sm: int = 65536
    regs_per_block: int = 65536
    max_regs_per_thread: int = 255
    reg_alloc_unit: int = 256          # registers, allocated per warp
    sub_partitions: int = 4            # warp schedulers, each with 1/4 of the register file
    smem_per_sm: int = 233472          # 228 KiB (the largest carveout)
    smem_per_block_optin: int = 232448  # 227 KiB (above 48 KiB only as dynamic, opted in)
    smem_reserved_per_block: int = 1024  # the runtime's per-block reservation (sm_80 and up)
    smem_alloc_unit: int = 128


H200 = SMLimits("H200 (sm_90)")
"""The H200's SM (the same sm_90 SM as the H100 SXM): 132 SMs on the chip."""


class Occupancy(NamedTuple):
    blocks_per_sm: int        # resident blocks per SM (0: the launch would fail)
    active_warps: int         # resident warps per SM
    max_warps: int            # warp slots per SM
    occupancy: float          # active_warps / max_warps
    limited_by: str           # 'warps', 'blocks', 'registers' or 'shared memory' (first of ties)
    limits: dict              # blocks per SM allowed by each resource


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def theoretical_occupancy(regs_per_thread: int, smem_per_block: int, block_size: int,
                          limits: SMLimits = H200) -> Occupancy:
    """Resident blocks and warps per SM for a kernel using ``regs_per_thread`` registers and
    ``smem_per_block`` bytes of shared memory (static + dynamic), launched with ``block_size``
    threads per block. Mirrors ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``.

    >>> theoretical_occupancy(32, 0, 256).occupancy       # 8 blocks x 8 warps: full
    1.0
    >>> theoretical_occupancy(64, 0, 256).active_warps    # 2048 regs/warp: 8 warps per quarter
    32
    """
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if block_size > limits.max_threads_per_block:
        raise ValueError(f"block_size {block_size} exceeds {limits.max_threads_per_block} "
                         f"threads per block")
    if regs_per_thread < 0 or smem_per_block < 0:
        raise ValueError("registers and shared memory cannot be negative")
    warps_per_block = -(-block_size // limits.warp_size)
    max_warps = limits.max_threads_per_sm // limits.warp_size

    by_warps = max_warps // warps_per_block
    by_blocks = limits.max_blocks_per_sm

    # Registers: allocated per warp (rounded up to the allocation unit), each warp inside one
    # of the sub-partitions; a block must also fit the per-block register limit.
    regs_per_warp = _round_up(regs_per_thread * limits.warp_size, limits.reg_alloc_unit)
    if regs_per_warp == 0:
        by_regs = by_blocks
    elif (regs_per_thread > limits.max_regs_per_thread
          or regs_per_warp * warps_per_block > limits.regs_per_block
          or regs_per_warp * _round_up(warps_per_block, limits.sub_partitions)
          > limits.regs_per_block):
        by_regs = 0
    else:
        warps_per_partition = (limits.regs_per_sm // limits.sub_partitions) // regs_per_warp
        by_regs = warps_per_partition * limits.sub_partitions // warps_per_block

    # Shared memory: the block's bytes plus the runtime's reservation, rounded up.
    smem = _round_up(smem_per_block + limits.smem_reserved_per_block, limits.smem_alloc_unit)
    if smem > limits.smem_per_block_optin + limits.smem_reserved_per_block:
        by_smem = 0
    else:
        by_smem = limits.smem_per_sm // smem

    per_resource = {"warps": by_warps, "blocks": by_blocks, "registers": by_regs,
                    "shared memory": by_smem}
    blocks = min(per_resource.values())
    limited_by = next(k for k, v in per_resource.items() if v == blocks)
    warps = blocks * warps_per_block
    return Occupancy(blocks, warps, max_warps, warps / max_warps, limited_by, per_resource)


# --- the sweep lesson --------------------------------------------------------------------------
BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)
"""The block sizes the lesson sweeps (one warp up to the 1024-thread maximum)."""


@cuda.jit
def saxpy_kernel(a, x, y, out):
    """out[i] = a * x[i] + y[i].

    Thread mapping: one thread per element, no grid-stride loop, so the grid is exactly
    ``ceil(n / block)`` blocks and the block size is the only thing the sweep changes.
    Block/grid: 1-D, ``block`` threads (the lesson's variable), ``ceil(n / block)`` blocks.
    Memory: two coalesced loads and one coalesced store per element (12 bytes for one FMA):
    memory bound, so its speed follows how many loads the SMs keep in flight, i.e. how many
    warps are resident (see the module docstring).
    """
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def saxpy_launch_config(n: int, block: int) -> tuple[int, int]:
    """(grid, block): one thread per element."""
    return max(1, -(-int(n) // block)), block


def saxpy(a, x, y, block: int = 256, out=None):
    """``a * x + y`` over two equal-length dense device buffers with ``block`` threads per
    block; ``a`` a scalar of the buffers' dtype (``device.scalar``). Returns ``out``."""
    if x.size != y.size or x.dtype != y.dtype:
        raise ValueError(f"saxpy: x and y must match, got {x.size} {x.dtype} and "
                         f"{y.size} {y.dtype}")
    if out is None:
        out = empty(x.size, x.dtype)
    if x.size:
        grid, block = saxpy_launch_config(x.size, block)
        saxpy_kernel[grid, block, current_stream()](a, x, y, out)
    return out


def sweep_table(regs_per_thread: int, smem_per_block: int = 0, block_sizes=BLOCK_SIZES,
                limits: SMLimits = H200) -> list[dict]:
    """Theoretical occupancy of one kernel at each block size (the static half of the lesson;
    the benchmark adds the measured bandwidth beside it)."""
    rows = []
    for block in block_sizes:
        occ = theoretical_occupancy(regs_per_thread, smem_per_block, block, limits)
        rows.append(dict(block=block, blocks_per_sm=occ.blocks_per_sm,
                         warps_per_sm=occ.active_warps, occupancy=occ.occupancy,
                         limited_by=occ.limited_by))
    return rows


def format_percent(fraction: float) -> str:
    return f"{100 * fraction:.1f}%" if math.isfinite(fraction) else "n/a"


STATIC_SAXPY_REGISTERS = 15
"""Registers per thread of ``saxpy_kernel`` as the static report prints it (sm_90 ptxas)."""


def registers(kernel) -> tuple[int, str]:
    """(registers per thread, where the number comes from): the driver's count once the kernel
    ran on a GPU, else the static sm_90 number."""
    if not SIMULATOR:
        try:
            regs = kernel.get_regs_per_thread()
            if isinstance(regs, dict):
                regs = max(regs.values())
            if regs:
                return int(regs), "(driver)"
        except Exception:  # not compiled for this device yet, or an older driver API
            pass
    return STATIC_SAXPY_REGISTERS, "(static, sm_90 ptxas)"


def _build(inputs):
    n = inputs.size(1 << 26, 200)
    x, y = inputs.upload(inputs.uniform(n)), inputs.upload(inputs.uniform(n))
    a, out = np.float32(2), inputs.empty(n)
    if not SIMULATOR:  # compile it, so that the driver can report its registers
        saxpy(a, x, y, 256, out)
        synchronize()
    regs, source = registers(saxpy_kernel)
    notes = {}
    for block in BLOCK_SIZES:
        occ = theoretical_occupancy(regs, 0, block)
        notes[f"block {block}"] = (f"{occ.active_warps}/64 warps ({100 * occ.occupancy:.0f}%, "
                                   f"limited by {occ.limited_by}; {regs} regs {source})")
    return Problem(f"saxpy of {n} float32", 12 * n, notes, a=a, x=x, y=y, out=out)


def _variant(block):
    return Variant(f"block {block}", f"saxpy with {block} threads per block",
                   lambda p: saxpy(p.a, p.x, p.y, block, p.out), saxpy, small=block <= 64)


def occupancy_bars(ax, trace=None, regs=STATIC_SAXPY_REGISTERS):
    """Theoretical occupancy of a kernel with ``regs`` registers at each block size (left) and
    at 256 threads for register counts 16 ... 128 (right). ``trace`` is unused: this picture
    is computed from the occupancy rules, not recorded."""
    ax_b, ax_r = ax
    occ = [theoretical_occupancy(regs, 0, b) for b in BLOCK_SIZES]
    ax_b.bar([str(b) for b in BLOCK_SIZES], [100 * o.occupancy for o in occ],
             color=["#b2182b" if o.occupancy < 1 else "#1a5e20" for o in occ])
    for k, o in enumerate(occ):
        ax_b.text(k, 100 * o.occupancy + 2, o.limited_by, ha="center", fontsize=8)
    ax_b.set_ylim(0, 115)
    ax_b.set_xlabel(f"threads per block ({regs} registers per thread)", fontsize=9)
    ax_b.set_ylabel("occupancy (%)")
    regs_axis = (16, 32, 40, 48, 64, 96, 128)
    occ = [theoretical_occupancy(r, 0, 256) for r in regs_axis]
    ax_r.bar([str(r) for r in regs_axis], [100 * o.occupancy for o in occ], color="#08519c")
    ax_r.set_ylim(0, 115)
    ax_r.set_xlabel("registers per thread (256 threads per block)", fontsize=9)
    ax_r.set_ylabel("occupancy (%)")


occupancy_bars.rows = (1, 1)


def _pictures():
    inputs = Inputs(small=True)
    n = 50
    x, y = inputs.upload(inputs.uniform(n)), inputs.upload(inputs.uniform(n))
    tr = {b: draw.traced(lambda b=b: saxpy(np.float32(2), x, y, b, inputs.empty(n)), block=None)
          for b in (16, 32)}
    return [
        draw.Picture(
            "threads_blocks",
            "saxpy on 50 elements, one thread per element: element i is computed by thread "
            "threadIdx.x of block blockIdx.x, i = blockIdx.x * blockDim.x + threadIdx.x. The "
            "last block is ragged: its threads past the end skip the work (the guard i < n).",
            (draw.panel("16 threads per block", draw.threads, tr[16], array="out", n=n,
                        cols=16),
             draw.panel("32 threads per block", draw.threads, tr[32], array="out", n=n,
                        cols=16))),
        draw.Picture(
            "occupancy",
            "Resident warps per SM out of 64 on an H200, from the occupancy rules (computed, "
            "not simulated). Blocks of 32 threads stop at the 32-blocks-per-SM limit; more "
            "registers per thread leave room for fewer warps.",
            (draw.panel("occupancy of saxpy and of heavier kernels", occupancy_bars, None),)),
    ]


LESSON = Lesson(
    "occupancy", "Block size and occupancy",
    "a memory-bound kernel needs enough resident warps to keep loads in flight; past full "
    "occupancy a bigger block buys nothing",
    (Experiment("occupancy", _build, tuple(_variant(b) for b in BLOCK_SIZES),
                no_production="a sweep of one kernel's block size, not a before and after",
                look_for="the same counters at every block size: occupancy decides how many "
                         "warps an SM keeps resident, not what they access. The difference is "
                         "time, which only a GPU shows (python -m minigpu.tools.bench "
                         "--lesson occupancy)."),),
    lambda: [KernelSpec("occupancy.saxpy", saxpy_kernel,
                        (np.float32(0), *(np.zeros(1, np.float32),) * 3), 256)],
    _pictures)
