"""Coalesced vs strided global access.

A warp's 32 loads or stores become one 128-byte transaction only when they hit consecutive
addresses. A transpose cannot read *and* write consecutively — one side is always strided —
unless it reshuffles through shared memory. Three ways to make the transpose of a dense
(R, C) matrix dense:

1. ``memory.gather_strided_kernel`` on the transposed view: coalesced writes, reads a source
   row apart;
2. ``transpose.transpose_naive``: coalesced reads, writes R elements apart;
3. ``transpose.transpose_tiled_padded`` (production, ``memory.contiguous`` routes transposes
   here): a tile staged in shared memory, both sides coalesced.

All three are production kernels of ``backends/cuda/`` (the first two serve other views, or
stay as the transpose family's own ladder, documented in ``transpose.py``); this lesson only
sets them side by side on the same matrix.
"""
from __future__ import annotations

from ..backends.cuda import transpose
from ..backends.cuda.blocks import launch
from ..backends.cuda.memory import gather_strided_kernel
from .record import Experiment, Lesson, Problem, Variant


def transpose_problem(inputs):
    """A dense (R, C) float32 matrix, its (C, R) transposed view, the batched-transpose spec
    and an output buffer."""
    R, C = inputs.size((8192, 8192), (24, 40))
    src = inputs.upload(inputs.uniform(R * C))
    view = inputs.view(src, (C, R), (1, C))
    return Problem(f"{R}x{C} float32 transpose", 2 * R * C * 4, src=src, view=view,
                   spec=transpose.as_batched_transpose(view), out=inputs.empty(R * C))


def gather_transpose(view, out):
    """The transposed view made dense by the generic strided gather (one thread per output)."""
    launch(gather_strided_kernel, out.size, view.buf, tuple(view.shape), tuple(view.strides),
           view.offset, out)
    return out


def transpose_variant(kind, note):
    """A variant running ``transpose.transpose_copy`` with one of its kernels."""
    return Variant(f"transpose_{kind}", note,
                   lambda p: transpose.transpose_copy(p.spec, p.out, kind),
                   transpose.transpose_copy)


LESSON = Lesson(
    "coalescing", "Coalesced vs strided global access",
    "a warp's accesses are one transaction only when they hit consecutive addresses",
    (Experiment("coalescing", transpose_problem,
                (Variant("gather_strided", "coalesced writes, strided reads",
                         lambda p: gather_transpose(p.view, p.out), gather_transpose),
                 transpose_variant("naive", "coalesced reads, strided writes"),
                 transpose_variant("padded", "both coalesced, via shared memory")),
                tol=dict(rtol=0, atol=0)),))
