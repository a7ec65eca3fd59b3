"""cuda ``softmax`` / ``softmax_backward`` (block-per-row and warp-per-row kernels) against the
NumPy reference.

Tolerances (float32): rtol=1e-5, atol=1e-6 for softmax probabilities and gradients; log-softmax
values are large negative numbers for large-magnitude inputs, so they are compared with
rtol=1e-5 and atol=1e-4 (one float32 ulp of 1e3 is 6e-5). ``exp``/``log`` differ from NumPy's
in the last bit, and the row sums are added in a different order.
"""
import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import contract
from strategies import ViewSpec, views

cpu = backends.get("cpu")
cuda = backends.get("cuda")
S = importlib.import_module("minigpu.backends.cuda.softmax")
R = importlib.import_module("minigpu.backends.cuda.reduce")

needs_shuffle = pytest.mark.skipif(
    not R.WARP_SHUFFLE, reason="needs simulator warp intrinsics (simulator.py)")

TOL = {False: dict(rtol=1e-5, atol=1e-6), True: dict(rtol=1e-5, atol=1e-4)}

# {} = production (warp-per-row when shuffles exist); the others force one kernel each.
BLOCK_TREE = dict(kernel="block", shuffle=False, max_block=8)
BLOCK_SHUFFLE = dict(kernel="block", shuffle=True, max_block=64)
WARP = dict(kernel="warp", warp_rows=2)


def configs():
    return st.sampled_from([{}, BLOCK_TREE] + ([WARP] if R.WARP_SHUFFLE else []))


def host(buf, shape):
    return cuda.to_numpy(contract.dense(buf, shape))


def matrices(lo=-4.0, hi=4.0, max_side=6):
    shape = st.tuples(st.integers(1, max_side), st.integers(1, 40))
    return shape.flatmap(lambda s: views(shape=s, lo=lo, hi=hi))


def check_forward(spec, log, **config):
    got = host(S.softmax(spec.on(cuda), log, **config), spec.shape)
    want = cpu.softmax(spec.on(cpu), log).reshape(spec.shape)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, **TOL[log])


def check_backward(x, g, log, **config):
    """y is the forward output of x (as in autograd), g the upstream gradient."""
    y = cpu.softmax(x.on(cpu), log).reshape(x.shape)
    ys = ViewSpec(y.reshape(-1), y.shape, contract.contiguous_strides(y.shape), 0)
    got = host(S.softmax_backward(ys.on(cuda), g.on(cuda), log, **config), x.shape)
    want = cpu.softmax_backward(ys.on(cpu), g.on(cpu), log).reshape(x.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@given(matrices(), st.booleans(), configs())
def test_softmax_matches_numpy(spec, log, config):
    check_forward(spec, log, **config)


@given(matrices(lo=-3e4, hi=3e4), st.booleans(), configs())
def test_softmax_stable_for_large_inputs(spec, log, config):
    """|x| up to 3e4: exp(x) alone overflows float32 beyond 88, so this needs the max shift."""
    check_forward(spec, log, **config)


@pytest.mark.parametrize("config", [{}, BLOCK_TREE, pytest.param(WARP, marks=needs_shuffle),
                                    pytest.param(BLOCK_SHUFFLE, marks=needs_shuffle)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_extreme_rows(log, config):
    """Huge magnitudes, a dominant entry, -inf entries, and a row longer than the block."""
    x = np.zeros((4, 70), dtype=np.float32)
    x[0] = np.linspace(-1e30, 1e30, 70)
    x[1, 7] = 1e4
    x[2] = np.linspace(-50, 50, 70)
    x[2, ::3] = -np.inf
    x[3] = np.random.default_rng(0).uniform(-4, 4, 70)
    spec = ViewSpec(x.reshape(-1), x.shape, (70, 1), 0)
    got = host(S.softmax(spec.on(cuda), log, **config), x.shape)
    want = cpu.softmax(spec.on(cpu), log).reshape(x.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@given(st.data(), matrices(), st.booleans(), configs())
def test_softmax_backward_matches_numpy(data, x, log, config):
    g = data.draw(views(shape=x.shape))
    check_backward(x, g, log, **config)


def test_production_configuration():
    """GPU launch shapes: 4 warps (rows) per block, and a 256-thread block for long rows
    (one row: the simulator spends about a millisecond per CUDA thread)."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-20, 20, (5, 300)).astype(np.float32)
    g = rng.uniform(-1, 1, (5, 300)).astype(np.float32)
    for rows, config in [(1, dict(kernel="block", shuffle=False, max_block=256)),
                         (1, dict(kernel="block", shuffle=True, max_block=256)),
                         (5, dict(kernel="warp", warp_rows=4))]:
        if config.get("shuffle", True) and not R.WARP_SHUFFLE:
            continue
        xs = ViewSpec(x[:rows].reshape(-1), (rows, 300), (300, 1), 0)
        gs = ViewSpec(g[:rows].reshape(-1), (rows, 300), (300, 1), 0)
        for log in (False, True):
            check_forward(xs, log, **config)
            check_backward(xs, gs, log, **config)


def test_long_rows_take_the_block_kernel():
    assert S._mapping(3, S.WARP_MAX_COLS + 1, shuffle=True)[0] == "block"
    assert S._mapping(3, S.WARP_MAX_COLS, shuffle=True)[0] == "warp"
    assert S._mapping(3, 10, shuffle=False)[0] == "block"
    x = np.random.default_rng(2).uniform(-4, 4, (1, S.WARP_MAX_COLS + 5)).astype(np.float32)
    check_forward(ViewSpec(x.reshape(-1), x.shape, (x.shape[1], 1), 0), True)


@given(views(shape=(3, 7), dtype=np.float64), st.booleans())
def test_softmax_float64(spec, log):
    got = host(S.softmax(spec.on(cuda), log), spec.shape)
    want = cpu.softmax(spec.on(cpu), log).reshape(spec.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
