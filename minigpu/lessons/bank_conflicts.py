"""Shared-memory bank conflicts: a tile without vs with +1 padding.

Shared memory has 32 banks of 4 bytes; a warp reading a tile *column* of a 32x32 float array
hits one bank 32 times (a 32-way conflict, replayed 32 times). One unused column (32x33)
shifts row k by k banks and makes the column read conflict-free.

Both variants are the production tiled transpose (``transpose.tiled_kernel``), built with
``pad=0`` (before) and ``pad=1`` (after, production): the only difference is
``width = tile + pad``. Bank conflicts are a run-time property: the static report shows the two
kernels identical but for 128 more bytes of shared memory, which is the point of timing them.
"""
from __future__ import annotations

import numpy as np

from ..backends.cuda import transpose
from .coalescing import tiled_variant, transpose_problem
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson

TILE = transpose.PRODUCTION_TILE


def _kernels():
    f = np.zeros(1, np.float32)
    tile, rows = transpose.PRODUCTION_TILE, transpose.PRODUCTION_BLOCK_ROWS
    return [KernelSpec(f"bank_conflicts.tiled_unpadded[{tile}x{rows}]",
                       transpose.tiled_kernel(tile, rows, 0, np.dtype(np.float32)),
                       (f, 0, 1, 0, 1, 1, 1, f), tile * rows)]


def _pictures():
    exp = LESSON.experiments[0]
    p = exp.build(Inputs(small=True))
    naive = draw.variant_trace(exp, "transpose_tiled_naive", p, block=0, warp=0)
    padded = draw.variant_trace(exp, "transpose_tiled_padded", p, block=0, warp=0)
    return [draw.Picture(
        "bank_conflicts",
        "Warp 0 reads one column of the tile (marked). Unpadded, every word of a column is in "
        "bank 0: 32 words for one bank, 32 wavefronts. One padding column shifts row k by k "
        "banks: the column spans all 32 banks, 1 wavefront.",
        (draw.panel(f"before: {TILE}x{TILE} tile, a column read", draw.banks, naive,
                    shape=(TILE, TILE), kind="load"),
         draw.panel(f"after: {TILE}x{TILE + 1} tile (one padding column)", draw.banks, padded,
                    shape=(TILE, TILE + 1), kind="load")))]


LESSON = Lesson(
    "bank_conflicts", "Shared-memory bank conflicts",
    "a shared tile read by column conflicts in one bank unless a padding column shifts its rows",
    (Experiment("bank_conflicts", transpose_problem,
                (tiled_variant(0, f"{TILE}x{TILE} tile: {TILE}-way conflicts"),
                 tiled_variant(1, f"{TILE}x{TILE + 1} tile: conflict-free")),
                tol=dict(rtol=0, atol=0),
                look_for="shared_load_wavefronts / shared_load_requests: 32 for the unpadded "
                         "tile (every lane of a warp reads the same bank), 1 for the padded "
                         "one. Every other counter is the same: the padding changes where the "
                         "words sit, not what the kernel moves."),),
    _kernels, _pictures)
