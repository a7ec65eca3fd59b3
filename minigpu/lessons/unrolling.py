"""Loop unrolling: independent accumulators hide the latency of a dependent chain.

In the grid-stride loop of the reduction ladder's rung (e), every ``acc += x[i]`` waits for
the previous add (a float add takes about 4 cycles on sm_90) and each load is issued only when
the loop gets to it. Unrolling the loop by four with four *independent* accumulators puts four
loads in flight per iteration and four add chains side by side, so the scheduler always has
work while a load or an add is pending: instruction-level parallelism inside one thread, on
top of the warp-level parallelism of occupancy. (The compiler cannot do this for you: it would
reorder float additions, which changes the rounding.)

1. ``sum_one_chain``   rung (e) of the reduction ladder: one accumulator per thread;
2. ``sum_four_chains`` the same, unrolled by four with four accumulators, combined at the end;
3. production ``reduce("sum")``: the grid-stride loop of the row kernel, on a grid sized to
   the GPU (two passes).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..backends.contract import View
from ..backends.cuda.blocks import WARP_SHUFFLE, block_allreduce, numba_type
from ..backends.cuda.reduce import MAX_BLOCK, PRODUCTION_BLOCK, reduce
from .record import Experiment, KernelSpec, Lesson, Problem, Variant
from .reduction import LADDER_MAX_GRID, ladder_run, sum_warp_shuffle

UNROLL = 4


@functools.lru_cache(maxsize=None)
def sum_four_chains_kernel(dtype, block):
    nbtype = numba_type(dtype)
    allreduce = block_allreduce("sum", block, WARP_SHUFFLE)

    @cuda.jit
    def sum_four_chains(x, n, zero, out):
        """out[b] = this block's share of sum(x): grid-stride loop unrolled by four.

        Thread mapping: thread t of the grid reads x[t + k*stride] for k = 0, 1, 2, ...; each
        iteration issues four independent loads (all coalesced across the warp) into four
        accumulators, then a tail loop of one. Block/grid: 1-D, ``block`` threads, grid capped
        at ``LADDER_MAX_GRID``. Faster than ``sum_one_chain``: four loads in flight and four
        add chains per thread instead of one."""
        scratch = cuda.shared.array(block, nbtype)
        step = cuda.gridsize(1)
        i = cuda.grid(1)
        a0 = a1 = a2 = a3 = zero
        while i + 3 * step < n:
            a0 += x[i]
            a1 += x[i + step]
            a2 += x[i + 2 * step]
            a3 += x[i + 3 * step]
            i += 4 * step
        while i < n:
            a0 += x[i]
            i += step
        acc = allreduce((a0 + a1) + (a2 + a3), scratch, zero)
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = acc

    return sum_four_chains


def sum_four_chains(x: View, block=MAX_BLOCK, max_grid=LADDER_MAX_GRID):
    return ladder_run(sum_four_chains_kernel, UNROLL, max_grid, x, block)


def sum_production(x: View):
    """The production ``reduce("sum")`` of the whole vector."""
    return reduce("sum", x, tuple(range(len(x.shape))))


def _build(inputs):
    n = inputs.size(1 << 26, 1000)
    x = inputs.view(inputs.upload(inputs.rng.random(n)), (n,))
    return Problem(f"sum of {n} float32", n * 4, x=x)


def _kernels():
    f32 = np.dtype(np.float32)
    f, s, rb = np.zeros(1, f32), np.float32(0), PRODUCTION_BLOCK
    return [KernelSpec(f"unrolling.four_chains[{rb}]", sum_four_chains_kernel(f32, rb),
                       (f, 1, s, f), rb)]


VARIANTS = (
    Variant("sum_one_chain", "one accumulator (reduction rung e)",
            lambda p: sum_warp_shuffle(p.x), sum_warp_shuffle),
    Variant("sum_four_chains", "unrolled by 4, four accumulators",
            lambda p: sum_four_chains(p.x), sum_four_chains),
    Variant("reduce", "production reduce('sum')", lambda p: sum_production(p.x), reduce),
)

LESSON = Lesson(
    "unrolling", "Loop unrolling",
    "several independent accumulators per thread keep several loads and adds in flight",
    (Experiment("unrolling", _build,
                # rung (e) needs warp shuffles; a simulator without them leaves it out
                tuple(v for v in VARIANTS if WARP_SHUFFLE or v.name != "sum_one_chain"),
                tol=dict(rtol=1e-4, atol=1e-3),
                look_for="barriers fall from one chain to four and again for the production "
                         "reduction, global_store_requests from one chain to four (fewer "
                         "partial sums), and warp_efficiency rises in the same order. The "
                         "independent add chains themselves are instruction-level "
                         "parallelism, which the counters do not see."),),
    _kernels)
