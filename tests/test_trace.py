"""``minigpu.cuda.trace``: which lane touched which element, grouped into requests exactly as
the counters group them; the drawing views draw from it (``minigpu/lessons/draw.py``)."""
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

import minigpu
from minigpu.simulator.counters import counters


@cuda.jit
def copy_rows_and_columns(a, rows, cols):
    """Lane i copies a[0, i] (a row: coalesced) and a[i, 0] (a column: one sector each)."""
    i = cuda.grid(1)
    if i < rows.shape[0]:
        rows[i] = a[0, i]
        cols[i] = a[i, 0]


@cuda.jit
def tree_sum(x, out):
    """A shared-memory tree over one block of 16: thread t < s adds buf[t + s]."""
    buf = cuda.shared.array(16, np.float32)
    t = cuda.threadIdx.x
    buf[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    s = 8
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


@cuda.jit
def column_of_tile(out, pad):
    """Warp 0 fills a 32 x 33 tile, then reads column 0 (pad 1: conflict-free), or with pad 0
    the words 32 apart, as an unpadded tile's column would be (all in bank 0)."""
    tile = cuda.shared.array((32, 33), np.float32)
    t = cuda.threadIdx.x
    for r in range(32):
        tile[r, t] = r
        if t == 0:
            tile[r, 32] = r
    cuda.syncthreads()
    out[t] = tile[t, 0] if pad else tile[(t * 32) // 33, (t * 32) % 33]


def test_requests_and_sectors_match_the_counters():
    a = cuda.to_device(np.arange(64 * 64, dtype=np.float32).reshape(64, 64))
    rows, cols = cuda.to_device(np.zeros(64, np.float32)), cuda.to_device(np.zeros(64, np.float32))
    with counters() as launches, minigpu.cuda.trace(block=None) as tr:
        copy_rows_and_columns[2, 32](a, rows, cols)
    loads = tr.requests(kind="load")
    assert len(loads) == launches[0]["global_load_requests"] == 4
    assert sum(len(r.sectors()) for r in loads) == launches[0]["global_load_sectors"]
    by_site = sorted(len(r.sectors()) for r in loads)
    assert by_site == [4, 4, 32, 32]                       # two row loads, two column loads
    assert all(r.mask == 0xFFFFFFFF for r in loads)
    assert tr.shape("a") == (64, 64) and tr.launches[0].grid == (2, 1, 1)
    assert sorted({t.index for t in tr.select(array="cols", kind="store")}) == list(range(64))


def test_block_and_warp_filters_and_phases():
    x = cuda.to_device(np.ones(32, np.float32))
    out = cuda.to_device(np.zeros(2, np.float32))
    with minigpu.cuda.trace(block=1, warp=0) as tr:
        tree_sum[2, 16](x, out)
    assert {t.block for t in tr.touches} == {(1, 0, 0)}
    stores = tr.select(space="shared", kind="store")
    # phase 0: the load of x; phases 1 ... 4: 8, 4, 2, 1 threads add
    per_phase = {}
    for t in stores:
        per_phase.setdefault(t.phase, set()).add(t.tid)
    assert [len(per_phase[p]) for p in sorted(per_phase)] == [16, 8, 4, 2, 1]
    assert out.copy_to_host().tolist() == [16.0, 16.0]


@pytest.mark.parametrize("pad,wavefronts", [(1, 1), (0, 32)])
def test_bank_wavefronts_match_the_counters(pad, wavefronts):
    """pad 0 reads words 32 apart (all in bank 0) from the same 32 x 33 tile: 32 wavefronts."""
    out = cuda.to_device(np.zeros(32, np.float32))
    with counters() as launches, minigpu.cuda.trace(block=0) as tr:
        column_of_tile[1, 32](out, pad)
    (load,) = tr.requests(space="shared", kind="load")
    assert load.wavefronts() == wavefronts == launches[0]["shared_load_wavefronts"]
    assert tr.shape("tile") == (32, 33)


def test_trace_needs_the_simulator():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    r = subprocess.run([sys.executable, "-c", "import minigpu\nwith minigpu.cuda.trace(): pass"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1 and "NUMBA_ENABLE_CUDASIM=1" in r.stderr


def test_views_draw_from_a_trace(tmp_path):
    """Every drawing view renders from a real trace into a non-empty PNG."""
    pytest.importorskip("matplotlib")
    from minigpu.lessons import draw
    a = cuda.to_device(np.arange(64 * 64, dtype=np.float32).reshape(64, 64))
    rows, cols = cuda.to_device(np.zeros(64, np.float32)), cuda.to_device(np.zeros(64, np.float32))
    copy = draw.traced(lambda: copy_rows_and_columns[2, 32](a, rows, cols), block=None)
    x, out = cuda.to_device(np.ones(32, np.float32)), cuda.to_device(np.zeros(2, np.float32))
    tree = draw.traced(lambda: tree_sum[2, 16](x, out))
    tile = draw.traced(lambda: column_of_tile[1, 32](cuda.to_device(np.zeros(32, np.float32)), 0))
    picture = draw.Picture("views", "every view", (
        draw.panel("lanes", draw.lanes, copy, kind="load", array="a", request=1),
        draw.panel("banks", draw.banks, tile, kind="load"),
        draw.panel("masks", draw.masks, tree, space="shared", kind="store"),
        draw.panel("tree", draw.tree, tree, array="buf", n=16),
        draw.panel("network", draw.network, tree, array="buf", n=16),
        draw.panel("heat", draw.heat, copy, arrays=("a", "a")),
        draw.panel("threads", draw.threads, copy, array="rows", n=64),
        draw.panel("counts", draw.counts, copy, array="rows", n=64, kind="store"),
        draw.panel("sweeps", draw.sweeps, copy, array="a", cols=64),
        draw.panel("traffic", draw.traffic, copy)))
    path = draw.render(picture, tmp_path / "views.png")
    assert path.stat().st_size > 50_000
