"""The batched transpose kernels (the coalescing lesson's naive one, the tiled one unpadded and
padded) against NumPy's transpose, and ``memory.contiguous`` routing transposed views to the
tiled kernel. Exact comparisons: a
transpose only moves elements."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends.contract import View, contiguous_strides
from minigpu.backends.cuda import memory, transpose
from minigpu.lessons.coalescing import transpose_naive
from counters import kernel_metrics

cuda = backends.get("cuda")
VARIANTS = {
    "naive": lambda spec, out, tile, rows: transpose_naive(spec, out),
    "tiled_unpadded": lambda spec, out, tile, rows: transpose.transpose_copy(spec, out, tile,
                                                                             rows, pad=0),
    "padded": lambda spec, out, tile, rows: transpose.transpose_copy(spec, out, tile, rows),
}


@st.composite
def transposed_views(draw, max_side=9):
    """A host array (..., R, C) laid out with row stride ld >= C and a batch that is dense,
    step-sliced or broadcast; returns (host base, the transposed View's layout, expected)."""
    batch_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    rows, cols = draw(st.integers(2, max_side)), draw(st.integers(2, max_side))
    ld = cols + draw(st.integers(0, 2))
    batch_kind = draw(st.sampled_from(["dense", "step", "broadcast"]))
    offset = draw(st.integers(0, 3))
    batch = int(np.prod(batch_shape))
    plane = rows * ld
    count = {"dense": batch, "step": 2 * batch, "broadcast": 1}[batch_kind]
    base = np.arange(offset + count * plane, dtype=np.float32) * np.float32(0.5) - 7
    if batch_kind == "broadcast":
        bstrides = (0,) * len(batch_shape)
    else:
        bstrides = tuple(s * plane * (2 if batch_kind == "step" else 1)
                         for s in contiguous_strides(batch_shape))
    shape = batch_shape + (cols, rows)
    strides = bstrides + (1, ld)
    item = base.itemsize
    expected = np.lib.stride_tricks.as_strided(
        base[offset:], shape, tuple(s * item for s in strides)).copy()
    return base, shape, strides, offset, expected


@pytest.mark.parametrize("variant", VARIANTS)
@given(case=transposed_views(), tile=st.sampled_from([(2, 1), (4, 2), (4, 4)]))
def test_variants_match_numpy(variant, case, tile):
    base, shape, strides, offset, expected = case
    v = View(cuda.from_numpy(base), shape, strides, offset)
    spec = transpose.as_batched_transpose(v)
    assert spec is not None
    out = cuda.empty(v.numel, base.dtype)
    VARIANTS[variant](spec, out, *tile)
    np.testing.assert_array_equal(out.copy_to_host().reshape(shape), expected)


@pytest.mark.parametrize("variant", ["tiled_unpadded", "padded"])
def test_production_tile_configuration(variant):
    """TILE=32, BLOCK_ROWS=8 (a 32x8 block): a 40x33 matrix, so edge tiles are partial."""
    a = np.arange(40 * 33, dtype=np.float32).reshape(40, 33)
    v = View(cuda.from_numpy(a.reshape(-1)), (33, 40), (1, 33), 0)
    spec = transpose.as_batched_transpose(v)
    out = cuda.empty(a.size, np.float32)
    VARIANTS[variant](spec, out, transpose.PRODUCTION_TILE, transpose.PRODUCTION_BLOCK_ROWS)
    np.testing.assert_array_equal(out.copy_to_host().reshape(33, 40), a.T)


def test_more_tiles_than_blocks():
    """Blocks stride over tiles: 3 matrices of 9x9 in 4x4 tiles are 27 tiles > MAX_BLOCKS."""
    a = np.arange(3 * 9 * 9, dtype=np.float64).reshape(3, 9, 9)
    v = View(cuda.from_numpy(a.reshape(-1)), (3, 9, 9), (81, 1, 9), 0)
    spec = transpose.as_batched_transpose(v)
    assert transpose.tiled_launch_config(spec, 4, 2)[0] < 27
    out = cuda.empty(a.size, np.float64)
    transpose.transpose_copy(spec, out, 4, 2)
    np.testing.assert_array_equal(out.copy_to_host().reshape(3, 9, 9), a.transpose(0, 2, 1))


def test_as_batched_transpose_recognises_only_transposes():
    buf = cuda.from_numpy(np.zeros(200, np.float32))
    spec = transpose.as_batched_transpose(View(buf, (2, 3, 5, 4), (60, 20, 1, 5), 7))
    assert spec[1:] == (7, 6, 20, 4, 5, 5)  # offset, batch, batch stride, rows, cols, ld
    assert transpose.as_batched_transpose(View(buf, (1, 5, 4), (99, 1, 6), 0))[1:] == (
        0, 1, 0, 4, 5, 6)
    for shape, strides in [((4, 5), (5, 1)),          # dense, not a transpose
                           ((5,), (1,)),              # 1-D
                           ((5, 4), (2, 10)),         # stepped columns: not stride 1
                           ((5, 1), (1, 5)),          # a single row
                           ((5, 4), (1, 3)),          # ld < cols: overlapping rows
                           ((2, 3, 5, 4), (3, 20, 1, 5)),  # batch dims not collapsible
                           ((5, 4), (1, 0))]:         # broadcast rows
        assert transpose.as_batched_transpose(View(buf, shape, strides, 0)) is None, shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
def test_contiguous_routes_transposes_to_tiled_kernel(monkeypatch, dtype):
    calls = []
    real = transpose.transpose_copy
    monkeypatch.setattr(transpose, "transpose_copy",
                        lambda spec, out, *a, **k: calls.append(spec) or real(spec, out, *a, **k))
    a = (np.arange(2 * 6 * 7) % 5).astype(dtype).reshape(2, 6, 7)
    buf = cuda.from_numpy(a.reshape(-1))
    got = cuda.to_numpy(View(buf, (2, 7, 6), (42, 1, 7), 0))
    np.testing.assert_array_equal(got, a.transpose(0, 2, 1))
    assert len(calls) == 1 and calls[0].batch == 2
    got = cuda.to_numpy(View(buf, (6, 2, 7), (7, 42, 1), 0))  # permuted, not a transpose
    np.testing.assert_array_equal(got, a.transpose(1, 0, 2))
    assert len(calls) == 1
    assert memory.contiguous(View(buf, (0, 3), (1, 0), 0)).size == 0


@pytest.mark.parametrize("pad", [0, None])
def test_production_tile_is_conflict_free(pad):
    """The padded production tile reads its columns with one shared wavefront per request;
    without the padding column every column read is a 32-way bank conflict. The output is the
    same either way, so only the counters see a lost padding."""
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    spec = transpose.as_batched_transpose(View(cuda.from_numpy(a.reshape(-1)), (64, 64),
                                               (1, 64), 0))
    out = cuda.empty(a.size, np.float32)
    tiles = (transpose.PRODUCTION_TILE, transpose.PRODUCTION_BLOCK_ROWS)
    args = (spec, out, *tiles) + (() if pad is None else (pad,))   # None: the default padding
    m = kernel_metrics(lambda: transpose.transpose_copy(*args), "transpose_tiled")
    np.testing.assert_array_equal(out.copy_to_host().reshape(64, 64), a.T)
    assert m["shared_load_requests"] > 0
    if pad is None:
        assert m["shared_load_wavefronts"] == m["shared_load_requests"]
    else:
        assert m["shared_load_wavefronts"] == 32 * m["shared_load_requests"]
