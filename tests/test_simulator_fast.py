"""The compiled path (``minigpu.simulator.fast``, ``MINIGPU_SIM_FAST=always``) against the
checked interpreter: the same results on correct kernels, and on buggy ones the checked path's
verdict (the compiled path only suspects, then falls back)."""
import math

import numpy as np
import pytest
from numba import cuda, float32

from minigpu.simulator import config, fast
from minigpu.simulator.errors import OutOfBoundsError, RaceError, UninitializedReadError

pytestmark = pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="simulator only")

TILE = 8


@cuda.jit
def tile_reverse(x, out):
    """Each block reverses its TILE elements through shared memory (one barrier)."""
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TILE + t
    if i < x.size:
        s[t] = x[i]
    cuda.syncthreads()
    j = cuda.blockIdx.x * TILE + TILE - 1 - t
    if i < x.size and j < x.size:
        out[i] = s[TILE - 1 - t] * 2


@cuda.jit
def tile_reverse_racy(x, out):
    """tile_reverse without its barrier: a shared-memory race."""
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.blockIdx.x * TILE + t]
    out[cuda.blockIdx.x * TILE + t] = s[TILE - 1 - t]


@cuda.jit
def shift_right(x, out):
    """out[i + 1] = x[i] for every i: the last thread writes past the end."""
    i = cuda.grid(1)
    if i < x.size:
        out[i + 1] = x[i]


@cuda.jit
def add_one(x, out):
    """out[i] = x[i] + 1 (launched only by the ``auto`` test: never compiled before it)."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + float32(1)


@cuda.jit
def reads_unwritten(out):
    """Every thread reads shared memory nobody wrote."""
    s = cuda.shared.array(TILE, float32)
    out[cuda.threadIdx.x] = s[cuda.threadIdx.x] + 1


@cuda.jit
def rounding(x, out):
    """out[3i..3i+2] = floor, ceil, trunc of x[i] (a float on the GPU, never an int)."""
    i = cuda.grid(1)
    if i < x.size:
        out[3 * i] = math.floor(x[i])
        out[3 * i + 1] = math.ceil(x[i])
        out[3 * i + 2] = math.trunc(x[i])


@pytest.fixture
def compiled(monkeypatch):
    monkeypatch.setattr(config, "FAST", "always")
    fast.STATS.clear()
    return fast.STATS


def test_barrier_kernel_matches_checked_path(compiled, monkeypatch):
    x = np.random.default_rng(0).standard_normal(8 * TILE).astype(np.float32)
    out = np.zeros_like(x)
    tile_reverse[8, TILE](x, out)
    assert compiled["tile_reverse"]["fast"] == 1
    monkeypatch.setattr(config, "FAST", "0")
    ref = np.zeros_like(x)
    tile_reverse[8, TILE](x, ref)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out, (x.reshape(8, TILE)[:, ::-1] * 2).ravel())


def test_engine_ops_on_the_compiled_path(compiled):
    import minigpu as mg
    rng = np.random.default_rng(1)
    a = rng.standard_normal(300).astype(np.float32)
    got = mg.tensor(a, device="cuda").relu().numpy()
    np.testing.assert_array_equal(got, np.maximum(a, 0))
    assert any(c["fast"] for c in compiled.values())


def test_rounding_keeps_nan_inf_and_negative_zero(compiled, monkeypatch):
    """Numba's CPU target makes math.floor an int64 (nan -> -9.2e18); the compiled path must
    give the GPU's float result, as the checked path does."""
    x = np.array([np.nan, np.inf, -np.inf, -0.0, -0.5, 0.5, -2.5, 1e30], np.float32)
    out = np.zeros(3 * x.size, np.float32)
    rounding[1, 32](x, out)
    assert compiled["rounding"]["fast"] == 1
    monkeypatch.setattr(config, "FAST", "0")
    ref = np.zeros_like(out)
    rounding[1, 32](x, ref)
    want = np.stack([np.floor(x), np.ceil(x), np.trunc(x)], 1).ravel()
    np.testing.assert_array_equal(ref, want)
    np.testing.assert_array_equal(out, want)
    assert np.array_equal(np.signbit(out), np.signbit(want))


@pytest.mark.parametrize("kernel, launch, error", [
    (tile_reverse_racy, lambda k: k[2, TILE](np.ones(2 * TILE, np.float32),
                                             np.zeros(2 * TILE, np.float32)), RaceError),
    (shift_right, lambda k: k[1, 32](np.ones(32, np.float32), np.zeros(32, np.float32)),
     OutOfBoundsError),
    (reads_unwritten, lambda k: k[1, TILE](np.zeros(TILE, np.float32)),
     UninitializedReadError),
])
def test_bugs_fall_back_to_the_checked_verdict(compiled, kernel, launch, error):
    with pytest.raises(error):
        launch(kernel)
    name = kernel.py_func.__qualname__
    assert any(k.startswith("fallback") for k in compiled[name]), dict(compiled[name])


def test_auto_keeps_cheap_launches_on_the_checked_path(monkeypatch):
    """``auto`` compiles only once a kernel's checked launches cost about a compile: the
    suite's small launches never pay for one."""
    monkeypatch.setattr(config, "FAST", "auto")
    fast.STATS.clear()
    x = np.arange(2 * TILE, dtype=np.float32)
    out = np.zeros_like(x)
    for _ in range(2):
        add_one[2, TILE](x, out)
    assert dict(fast.STATS["add_one"]) == {"checked": 2}
    assert not any(key[0] is add_one for key in fast._COMPILED)
    np.testing.assert_array_equal(out, x + 1)
