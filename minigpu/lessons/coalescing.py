"""Coalesced vs strided global access.

Global memory moves 32-byte sectors: a warp's 32 float32 loads or stores touch 4 sectors (128
useful bytes) only when they hit consecutive addresses (one element misaligned: 5; strided: 32,
see tests/test_counters.py). A transpose cannot read *and* write consecutively — one side is always strided —
unless it reshuffles through shared memory. Three ways to make the transpose of a dense
(R, C) matrix dense:

1. ``memory.gather_strided_kernel`` (production, the generic strided copy) on the transposed
   view: coalesced writes, reads a source row apart;
2. ``transpose_naive`` (here): coalesced reads, writes R elements apart;
3. ``transpose.transpose_copy`` (production, ``memory.contiguous`` routes transposes there):
   a tile staged in shared memory, both sides coalesced.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ..backends.cuda import transpose
from ..backends.cuda.blocks import launch
from ..backends.cuda.device import SIMULATOR, current_stream, grid_1d
from ..backends.cuda.memory import gather_strided_kernel
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant

NAIVE_BLOCK = 32 if SIMULATOR else 256


@cuda.jit
def transpose_naive_kernel(src, offset, batch, batch_stride, rows, cols, ld, out):
    """out[b, c, r] = A[b, r, c], no shared memory.

    Thread mapping: grid-stride over source elements in (b, r, c) order, c fastest.
    Block/grid: 1-D, ``NAIVE_BLOCK`` threads, up to ``transpose.MAX_BLOCKS`` blocks.
    Memory: a warp reads 32 consecutive elements of a row of A (coalesced) and writes them to
    32 different output rows, ``rows`` elements apart (uncoalesced: one sector per lane).
    The baseline the tiled kernel beats.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    plane = rows * cols
    for i in range(start, batch * plane, step):
        c = i % cols
        r = (i // cols) % rows
        b = i // plane
        out[b * plane + c * rows + r] = src[offset + b * batch_stride + r * ld + c]


def transpose_naive(spec: transpose.BatchedTranspose, out):
    """The dense transpose of ``spec`` into ``out`` with the naive kernel; returns ``out``."""
    if spec.numel:
        grid = grid_1d(spec.numel, NAIVE_BLOCK, transpose.MAX_BLOCKS)
        transpose_naive_kernel[grid, NAIVE_BLOCK, current_stream()](
            spec.buf, spec.offset, spec.batch, spec.batch_stride, spec.rows, spec.cols, spec.ld,
            out)
    return out


def gather_transpose(view, out):
    """The transposed view made dense by the generic strided gather (one thread per output)."""
    launch(gather_strided_kernel, out.size, view.buf, tuple(view.shape), tuple(view.strides),
           view.offset, out)
    return out


def transpose_problem(inputs):
    """A dense (R, C) float32 matrix, its (C, R) transposed view, the batched-transpose spec
    and an output buffer."""
    R, C = inputs.size((8192, 8192), (32, 64))  # small: two whole 32x32 tiles, exact counters
    src = inputs.upload(inputs.uniform(R * C))
    view = inputs.view(src, (C, R), (1, C))
    return Problem(f"{R}x{C} float32 transpose", 2 * R * C * 4, src=src, view=view,
                   spec=transpose.as_batched_transpose(view), out=inputs.empty(R * C))


def tiled_variant(pad, note):
    """``transpose.transpose_copy`` with a shared tile padded by ``pad`` columns, at the
    production tile (32x32, a warp wide: the size at which banks and sectors line up) even
    under the simulator, so the counters show what a GPU would do."""
    name = "transpose_tiled_padded" if pad else "transpose_tiled_naive"
    tile, rows = transpose.PRODUCTION_TILE, transpose.PRODUCTION_BLOCK_ROWS
    return Variant(name, note,
                   lambda p: transpose.transpose_copy(p.spec, p.out, tile, rows, pad=pad),
                   transpose.transpose_copy)


def _kernels():
    f = np.zeros(1, np.float32)
    return [KernelSpec("coalescing.transpose_naive", transpose_naive_kernel,
                       (f, 0, 1, 0, 1, 1, 1, f), 256)]


def _pictures():
    exp = LESSON.experiments[0]
    p = exp.build(Inputs(small=True))
    tr = {name: draw.variant_trace(exp, name, p, block=0, warp=0)
          for name in ("gather_strided", "transpose_naive", "transpose_tiled_padded")}
    return [
        draw.Picture("coalescing_loads",
                     "Each blue bar is one lane's 4-byte load, each shaded band a 32-byte sector "
                     "fetched. Strided: 32 sectors for 128 useful bytes. Coalesced: 4.",
                     (draw.panel("before: gather_strided reads a column (strided)", draw.lanes,
                                 tr["gather_strided"], kind="load", array="src"),
                      draw.panel("after: the tiled transpose reads a row (coalesced)",
                                 draw.lanes, tr["transpose_tiled_padded"], kind="load",
                                 array="src"))),
        draw.Picture("coalescing_stores",
                     "The naive transpose reads rows but writes columns: each lane's store "
                     "lands in its own sector. The tiled one writes a row of out.",
                     (draw.panel("before: transpose_naive writes a column (strided)",
                                 draw.lanes, tr["transpose_naive"], kind="store", array="out"),
                      draw.panel("after: the tiled transpose writes a row (coalesced)",
                                 draw.lanes, tr["transpose_tiled_padded"], kind="store",
                                 array="out"))),
    ]


LESSON = Lesson(
    "coalescing", "Coalesced vs strided global access",
    "a warp's accesses are one transaction only when they hit consecutive addresses",
    (Experiment("coalescing", transpose_problem,
                (Variant("gather_strided", "coalesced writes, strided reads",
                         lambda p: gather_transpose(p.view, p.out), gather_transpose),
                 Variant("transpose_naive", "coalesced reads, strided writes",
                         lambda p: transpose_naive(p.spec, p.out), transpose_naive),
                 tiled_variant(1, "both coalesced, via shared memory")),
                tol=dict(rtol=0, atol=0),
                look_for="global_load_sectors / global_load_requests is 32 for gather_strided "
                         "(it reads a column) and 4 for the others; global_store_sectors / "
                         "global_store_requests is 32 for transpose_naive (it writes a column) "
                         "and 4 for the others. Only the tiled transpose is 4 on both sides, and "
                         "its bytes_moved is 4.5 times smaller."),),
    _kernels, _pictures)
