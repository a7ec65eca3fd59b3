"""Shared-memory bank conflicts: a tile without vs with +1 padding.

Shared memory has 32 banks of 4 bytes; a warp reading a tile *column* of a 32x32 float array
hits one bank 32 times (a 32-way conflict, replayed 32 times). One unused column (32x33)
shifts row k by k banks and makes the column read conflict-free.

``transpose.transpose_tiled_naive`` (before) and ``transpose.transpose_tiled_padded`` (after,
production) come from one factory, ``transpose._tiled``, whose only difference is
``width = tile + pad``. Bank conflicts are a run-time property: the static report shows the two
kernels identical but for 128 more bytes of shared memory, which is the point of timing them.
"""
from __future__ import annotations

from ..backends.cuda.transpose import TILE
from .coalescing import transpose_problem, transpose_variant
from .record import Experiment, Lesson

LESSON = Lesson(
    "bank_conflicts", "Shared-memory bank conflicts",
    "a shared tile read by column conflicts in one bank unless a padding column shifts its rows",
    (Experiment("bank_conflicts", transpose_problem,
                (transpose_variant("tiled_naive", f"{TILE}x{TILE} tile: {TILE}-way conflicts"),
                 transpose_variant("padded", f"{TILE}x{TILE + 1} tile: conflict-free")),
                tol=dict(rtol=0, atol=0)),))
