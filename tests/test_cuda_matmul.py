"""cuda ``matmul`` and every rung of the matmul lesson's ``LADDER`` against ``np.matmul``.

Operands come from ``strategies.views``: permuted (transposed), step-sliced, offset and
batch-broadcast (stride 0) layouts, with M, N, K from 1 to 11, so tiles of 4 and 8 always
have ragged edges. Tolerance (float32): rtol=1e-5, atol=1e-4: with |x| <= 4 and K <= 11 the
products' rounding differs from NumPy's (blocked, FMA) order by a few ulps of 16*K.
"""
import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import contract
from counters import kernel_metrics
from strategies import ViewSpec, views

cpu = backends.get("cpu")
cuda = backends.get("cuda")
MM = importlib.import_module("minigpu.backends.cuda.matmul")
from minigpu.lessons.matmul import LADDER  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-4)

# Small launch configurations for the simulator (tiles of 8 and 4: edges at every size).
SMALL = {
    "naive": [dict(block=(8, 8)), dict(block=(4, 2))],
    "coalesced": [dict(block=(8, 8)), dict(block=(4, 2))],
    "tiled": [dict(tile=8), dict(tile=4)],
    "register_tiled": [dict(BM=8, BN=8, BK=4, TM=2, TN=2),      # 16 threads
                       dict(BM=8, BN=4, BK=2, TM=4, TN=1),      # tall micro-tile
                       dict(BM=4, BN=8, BK=8, TM=1, TN=4)],     # wide, deep slice
}


@st.composite
def operands(draw, max_side=11, dtype=np.float32):
    B = draw(st.integers(1, 3))
    M, N, K = (draw(st.integers(1, max_side)) for _ in range(3))
    a = draw(views(shape=(B, M, K), dtype=dtype))
    b = draw(views(shape=(B, K, N), dtype=dtype))
    return a, b


def check(fn, a, b, **config):
    B, M, _ = a.shape
    N = b.shape[2]
    got = cuda.to_numpy(contract.dense(fn(a.on(cuda), b.on(cuda), **config), (B, M, N)))
    want = np.matmul(a.numpy(), b.numpy())
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, **TOL)


@pytest.mark.parametrize("name", list(LADDER))
@given(data=st.data(), ops=operands())
def test_ladder_matches_numpy(name, data, ops):
    config = data.draw(st.sampled_from(SMALL[name]))
    check(LADDER[name], *ops, **config)


@given(operands())
def test_matmul_default_configuration(ops):
    check(MM.matmul, *ops)


@given(operands(max_side=70))
def test_the_simulators_tiles_on_larger_shapes(ops):
    """On the simulator the primitive picks its tiles by shape (``simulator_tiles``): shapes
    up to 70 reach tiles up to 64 wide, deep K slices and several blocks."""
    check(MM.matmul, *ops)


def test_every_simulator_tile_is_a_valid_kernel_and_skinny_products_get_thin_tiles():
    for t in MM.SIMULATOR_TILES:
        MM.matmul_register_tiled_kernel(np.dtype(np.float32), **t)
    BM, BN, BK, TM, TN = MM.simulator_tiles(2, 256, 64)   # a batch-2 layer: BM fits M = 2
    assert BM == 2 and BN * BM // (TM * TN) < 64
    assert MM.simulator_tiles(256, 2, 64)[1] == 2          # and BN fits N = 2


def test_the_compiled_path_picks_its_tiles_from_a_short_menu(monkeypatch):
    """Under ``MINIGPU_SIM_FAST=always`` each tile shape is one more kernel to compile: the
    primitive picks the tiles of every shape from ``COMPILED_TILES`` (the checked path from
    every valid tiling)."""
    chosen = []
    monkeypatch.setattr(MM, "matmul_register_tiled", lambda a, b, *tiles: chosen.append(tiles))
    monkeypatch.setattr(MM.sim_config, "FAST", "always")
    shapes = [(2, 256, 64), (64, 120, 400), (784, 400, 128), (6, 784, 25), (128, 20, 400)]
    for M, N, K in shapes:
        a, b = np.ones((1, M, K), np.float32), np.ones((1, K, N), np.float32)
        MM.matmul(contract.dense(cuda.from_numpy(a), a.shape),
                  contract.dense(cuda.from_numpy(b), b.shape))
    menu = {tuple(t.values()) for t in MM.COMPILED_TILES}
    assert len(chosen) == len(shapes) and set(chosen) <= menu and len(set(chosen)) > 1
    assert not {MM.simulator_tiles(M, N, K) for M, N, K in shapes} <= menu


def dense(a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    return ViewSpec(a.reshape(-1), a.shape, contract.contiguous_strides(a.shape), 0)


def transposed(a):
    """A (B, R, C) view with unit stride along R: the layout of ``W.T`` for a dense W."""
    t = np.ascontiguousarray(np.swapaxes(a, 1, 2), dtype=np.float32)
    B, R, C = a.shape
    return ViewSpec(t.reshape(-1), (B, R, C), (R * C, 1, R), 0)


def broadcast(a):
    """One (1, R, C) matrix seen as a batch of ``B`` (batch stride 0)."""
    return lambda B: ViewSpec(np.ascontiguousarray(a, dtype=np.float32).reshape(-1),
                              (B,) + a.shape, (0,) + contract.contiguous_strides(a.shape), 0)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt", "broadcast_b", "broadcast_a"])
@pytest.mark.parametrize("name", list(LADDER))
def test_transposed_and_broadcast_operands(name, layout):
    """x @ W.T (no copy), A.T @ B, and a weight shared by every batch (stride 0)."""
    rng = np.random.default_rng(7)
    B, M, K, N = 2, 9, 7, 10
    a = rng.uniform(-4, 4, (B, M, K))
    b = rng.uniform(-4, 4, (B, K, N))
    if layout == "broadcast_b":
        a, b = dense(a), broadcast(b[0])(B)
    elif layout == "broadcast_a":
        a, b = broadcast(a[0])(B), dense(b)
    else:
        a = transposed(a) if layout[0] == "t" else dense(a)
        b = transposed(b) if layout[1] == "t" else dense(b)
    check(LADDER[name], a, b, **SMALL[name][0])


@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (1, 9, 1), (9, 1, 9), (1, 5, 17), (17, 3, 1)])
def test_degenerate_sizes(M, K, N):
    rng = np.random.default_rng(8)
    a, b = rng.uniform(-4, 4, (1, M, K)), rng.uniform(-4, 4, (1, K, N))
    for name, fn in LADDER.items():
        check(fn, dense(a), dense(b), **SMALL[name][0])


def test_empty_operands():
    a, b = dense(np.zeros((2, 3, 0))), dense(np.zeros((2, 0, 4)))
    out = cuda.to_numpy(contract.dense(MM.matmul(a.on(cuda), b.on(cuda)), (2, 3, 4)))
    np.testing.assert_array_equal(out, np.zeros((2, 3, 4), np.float32))
    a, b = dense(np.zeros((2, 0, 3))), dense(np.zeros((2, 3, 4)))
    assert MM.matmul(a.on(cuda), b.on(cuda)).size == 0


def test_shape_mismatch_message():
    a, b = dense(np.zeros((1, 2, 3))), dense(np.zeros((1, 4, 5)))
    message = r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"
    with pytest.raises(ValueError, match=message):
        MM.matmul(a.on(cuda), b.on(cuda))


@given(operands(max_side=6, dtype=np.float64))
def test_float64(ops):
    a, b = ops
    got = cuda.to_numpy(contract.dense(MM.matmul(a.on(cuda), b.on(cuda)),
                                       (a.shape[0], a.shape[1], b.shape[2])))
    np.testing.assert_allclose(got, np.matmul(a.numpy(), b.numpy()), rtol=1e-12, atol=1e-12)


# Small configurations that reach every code path of the production one (TM = TN = 8): an
# 8-wide micro-tile in N, then in M, each with 4 threads.
MICRO_TILES = [dict(BM=4, BN=16, BK=4, TM=2, TN=8), dict(BM=16, BN=4, BK=4, TM=8, TN=2)]


@pytest.mark.parametrize("name,config", [(n, c) for n in LADDER for c in SMALL[n]]
                         + [("register_tiled", c) for c in MICRO_TILES])
@pytest.mark.parametrize("layout", ["nn", "nt"])
def test_every_small_config_fixed(name, config, layout):
    """Every launch configuration as a parameter (not a draw), on fixed operands with ragged
    edges in M, N and K, K longer than one k-slice, and a batch of 2."""
    rng = np.random.default_rng(11)
    a = dense(rng.uniform(-4, 4, (2, 11, 9)))
    b = rng.uniform(-4, 4, (2, 9, 19))
    b = dense(b) if layout == "nn" else transposed(b)
    check(LADDER[name], a, b, **config)


def test_production_configuration():
    """``MM.PRODUCTION``: BM=BN=128, BK=8, TM=TN=8 (16x16 = 256 threads, 8x8 outputs per
    thread): one full 128x128 tile plus ragged edges in M, N and K (M=140 and N=133 give a
    2x2 grid whose last blocks are mostly outside C; K=13 leaves a partial slice), with a
    transposed B as in ``x @ W.T``."""
    cfg = MM.PRODUCTION
    assert (cfg["BM"], cfg["BN"], cfg["BK"], cfg["TM"], cfg["TN"]) == (128, 128, 8, 8, 8)
    M, K, N = 140, 13, 133
    assert M > cfg["BM"] and N > cfg["BN"] and K % cfg["BK"]   # more than one block in M, N
    rng = np.random.default_rng(9)
    a = dense(rng.uniform(-4, 4, (1, M, K)))
    b = transposed(rng.uniform(-4, 4, (1, K, N)))
    check(MM.matmul_register_tiled, a, b, **cfg)


@pytest.mark.parametrize("layout", ["nn", "tn"])
def test_tile_loads_are_coalesced(layout):
    """A 32x32x8 tile (64 threads, the production k-slice), A dense (K fastest) or transposed
    (M fastest): each warp's tile load reads consecutive addresses of whichever dimension is
    fast, so a load request touches at most 4 sectors (32 lanes x 4 bytes). Loading a tile
    in the other order gives the same C but up to 32 sectors per request: only the counters
    see it."""
    rng = np.random.default_rng(12)
    a = rng.uniform(-4, 4, (1, 32, 32))
    a = dense(a) if layout == "nn" else transposed(a)
    b = dense(rng.uniform(-4, 4, (1, 32, 32)))
    config = dict(BM=32, BN=32, BK=MM.PRODUCTION["BK"], TM=4, TN=4)
    m = kernel_metrics(lambda: check(MM.matmul_register_tiled, a, b, **config),
                       "matmul_register_tiled")
    assert 0 < m["global_load_sectors"] <= 4 * m["global_load_requests"]
