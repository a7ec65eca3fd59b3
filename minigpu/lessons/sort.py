"""Sorting rows: a naive rank sort vs the bitonic network in shared memory that ``sort`` and
``topk`` run (``backends/cuda/sort.py``).

1. ``rank_sort``  one thread per element counts the elements of its row that sort before it
   (its rank) and writes itself to out[rank]: embarrassingly parallel and branch-light, but
   O(C^2) comparisons per row, every one reading global memory (cached, but C loads per
   element);
2. production ``sort``: the bitonic network, O(C log^2 C) compare-exchanges, each tile of
   2*block elements loaded into shared memory once and sorted there with one barrier per step;
   longer rows add global steps between tiles.

Both use the same order (value, NaN largest, then index), so their results are identical.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..backends.contract import View
from ..backends.cuda import memory
from ..backends.cuda.device import current_stream, empty, launch_1d
from ..backends.cuda.sort import PRODUCTION_BLOCK, before_fn, sort
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant


@functools.lru_cache(maxsize=None)
def rank_sort_kernel(descending):
    before = before_fn(descending)

    @cuda.jit
    def rank_sort(x, C, values, indices):
        """values[r, rank] = x[r, c], indices[r, rank] = c, rank = how many elements of row r
        sort before x[r, c].

        Thread mapping: one thread per element (grid-stride over rows*C). Memory: the thread
        reads its whole row (C loads, the same addresses for every thread of the row, so they
        hit L1/L2) and makes one scattered store. O(C) work per element, O(C^2) per row."""
        start, step = cuda.grid(1), cuda.gridsize(1)
        for q in range(start, x.size, step):
            row = q // C
            c = q - row * C
            base = row * C
            v = x[q]
            rank = 0
            for o in range(C):
                if before(x[base + o], o, v, c, C):
                    rank += 1
            values[base + rank] = v
            indices[base + rank] = c

    return rank_sort


def rank_sort(x: View, descending=False):
    n = x.numel
    C = x.shape[-1]
    values, indices = empty(n, x.dtype), empty(n, np.int64)
    grid, block = launch_1d(n)
    rank_sort_kernel(bool(descending))[grid, block, current_stream()](memory.dense(x), C,
                                                                      values, indices)
    return values


def sort_production(x: View):
    return sort(x)[0]


def _build(inputs):
    rows, C = inputs.size((4096, 1024), (3, 100))
    x = inputs.tensor(rows, C)
    return Problem(f"sort {rows} rows of {C} float32", 2 * rows * C * 4, x=x)


def _kernels():
    f32 = np.dtype(np.float32)
    f, i = np.zeros(1, f32), np.zeros(1, np.int64)
    return [KernelSpec("sort.rank_sort", rank_sort_kernel(False), (f, 1, f, i),
                       PRODUCTION_BLOCK)]


def _pictures():
    x = Inputs(small=True).tensor(1, 16)
    tr = draw.traced(lambda: sort(x, max_block=8)[0])   # one tile of 16
    return [draw.Picture(
        "sort_network",
        "The bitonic network on a 16-element tile in shared memory: at each step every "
        "thread compares (and maybe swaps) the two elements joined by its link, the same "
        "pairs whatever the data, then all wait at a barrier.",
        (draw.panel("production sort: bitonic network of one tile", draw.network, tr,
                    array="sk", n=16),))]


LESSON = Lesson(
    "sort", "Sorting rows: rank sort vs bitonic network in shared memory",
    "a sorting network's steps are data-independent: a block sorts a tile in shared memory "
    "with one barrier per step, O(C log^2 C) work instead of a rank sort's O(C^2)",
    (Experiment("sort", _build, (
        Variant("rank_sort", "one thread per element counts its rank: O(C^2)",
                lambda p: rank_sort(p.x), rank_sort),
        Variant("sort", "production: bitonic network, tiles in shared memory",
                lambda p: sort_production(p.x), sort),
    ), tol=dict(rtol=0, atol=0),
                look_for="global_load_requests of rank_sort are several times the bitonic "
                         "sort's: every thread reads its whole row from global memory, while "
                         "the network loads a tile once and works in shared memory (its "
                         "shared_load_requests and barriers)."),),
    _kernels, _pictures)
