"""Half precision: storing float16 halves the bytes every memory-bound kernel moves.

An elementwise map reads and writes each element once, so it is bound by memory traffic: a
warp's 32 float32 loads fill 4 sectors (128 bytes), 32 float16 loads fill 2. Storing tensors
in float16 halves the sectors, hence (on a GPU, once the tensor is large enough to be
bandwidth bound) the time. The arithmetic need not be half: minigpu's maps widen each float16
element to float32 in a register, compute, and round once on the store (PyTorch's "opmath"),
so the accuracy lost is the storage's alone.

A GEMM is compute bound at large sizes, but its tiles still come through global and shared
memory: with half operands the same tiles are half the bytes (the production GEMM's shared
tiles shrink from 8448 to 4224 bytes, ``python -m minigpu.tools.kernel_report --kernel
register_tiled``) while the products are summed in float32 registers, as cuBLAS does. Its
global sectors fall by less than 2x, though: a sector is the unit of transfer, and a tile row
narrower than a sector costs one sector in either precision.

Both experiments run the production kernels twice, on float32 and on float16 buffers:

1. ``backends/cuda/elementwise.unary`` (an ``affine`` map, ``2x + 1``);
2. ``backends/cuda/matmul.matmul_register_tiled`` (the GEMM; its default tiles, the same on
   the simulator for every shape, so the two precisions are counted on one tiling).

This is what ``mg.autocast`` buys a training step: matmuls, convolutions and their
activations in float16 (``GradScaler`` keeps small gradients from flushing to zero).
"""
from __future__ import annotations

import numpy as np

from ..backends.cuda.elementwise import unary
from ..backends.cuda.matmul import matmul_register_tiled
from . import draw
from .record import Experiment, Inputs, Lesson, Problem, Variant


def _map_problem(inputs):
    n = inputs.size(1 << 26, 4096)
    host = inputs.uniform(n)
    return Problem(f"{n} elements, affine map", 2 * n * 4,
                   x32=inputs.view(inputs.memory.from_numpy(host), (n,)),
                   x16=inputs.view(inputs.memory.from_numpy(host.astype(np.float16)), (n,)))


def _affine(x):
    return unary("affine", x, 2.0, 1.0)


def _gemm_problem(inputs):
    m, k, n = inputs.size((8192, 8192, 8192), (32, 48, 32))
    a, b = inputs.uniform(m * k), inputs.uniform(k * n)
    views = {}
    for name, dtype in (("32", np.float32), ("16", np.float16)):
        views["a" + name] = inputs.view(inputs.memory.from_numpy(a.astype(dtype)), (1, m, k))
        views["b" + name] = inputs.view(inputs.memory.from_numpy(b.astype(dtype)), (1, k, n))
    return Problem(f"{m}x{k} @ {k}x{n}", 2 * m * k * n, **views)


def _pictures():
    exp = LESSON.experiments[0]
    p = exp.build(Inputs(small=True))
    tr = {name: draw.variant_trace(exp, name, p, block=0, warp=0)
          for name in ("map_float32", "map_float16")}
    return [draw.Picture(
        "half_precision_loads",
        "One warp's load of 32 consecutive elements: 4 sectors in float32, 2 in float16. "
        "Every memory-bound kernel moves half the bytes.",
        (draw.panel("before: float32 storage", draw.lanes, tr["map_float32"], kind="load",
                    array="x"),
         draw.panel("after: float16 storage (float32 arithmetic)", draw.lanes,
                    tr["map_float16"], kind="load", array="x")))]


LESSON = Lesson(
    "half_precision", "Half precision: half the bytes",
    "float16 storage halves the bytes memory-bound kernels move; arithmetic stays float32 in "
    "registers, so accuracy is lost only in storage",
    (Experiment("half_precision_map", _map_problem,
                (Variant("map_float32", "float32 in, float32 out", lambda p: _affine(p.x32),
                         unary),
                 Variant("map_float16", "float16 in and out, float32 in registers",
                         lambda p: _affine(p.x16), unary)),
                tol=dict(rtol=1e-3, atol=1e-3),
                look_for="global_load_sectors and global_store_sectors of map_float16 are half "
                         "of map_float32's for the same number of requests: each warp's 32 "
                         "elements fill 2 sectors instead of 4."),
     Experiment("half_precision_gemm", _gemm_problem,
                (Variant("gemm_float32", "float32 tiles and registers",
                         lambda p: matmul_register_tiled(p.a32, p.b32), matmul_register_tiled),
                 Variant("gemm_float16", "float16 tiles, float32 registers",
                         lambda p: matmul_register_tiled(p.a16, p.b16), matmul_register_tiled)),
                unit="GFLOP/s", memory_bound=False, tol=dict(rtol=2e-2, atol=2e-2),
                look_for="bytes_moved of gemm_float16 is lower and its shared stores take fewer "
                         "wavefronts, but global_load_sectors fall by less than 2x: a tile row is "
                         "BK elements, 16 B in float32 and 8 B in float16 at the simulator's "
                         "BK=4, one sector either way (the map above is the pure case). The "
                         "results agree to float16's rounding: products are summed in float32.")),
    list, _pictures)
