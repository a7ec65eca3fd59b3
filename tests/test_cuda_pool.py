"""cuda max/avg pooling, forward and backward, against the NumPy reference.

Tolerances: maxpool forward (values and argmax) is a selection, so exact; avgpool backward
sums the same shares in the same (ki, kj) order as ``cpu.avgpool2d_backward``, so exact.
avgpool forward sums a window in an order NumPy does not promise: float32 rtol=1e-6,
atol=1e-6 (<= 9 terms in [-4, 4]). maxpool backward adds overlapping windows with atomics in
thread order: rtol=1e-6, atol=1e-6.
"""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import contract
from minigpu.backends.cuda import device, pool
from strategies import arrays, views

cpu = backends.get("cpu")
cuda = backends.get("cuda")

SMALL = dict(block=32, max_blocks=2)
PRODUCTION = dict(block=device.BLOCK, max_blocks=device.MAX_BLOCKS)
TOL = dict(rtol=1e-6, atol=1e-6)


@st.composite
def pool_geometry(draw):
    """(x_shape, kernel, stride, padding) with padding <= kernel // 2, as PyTorch requires."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple(draw(st.integers(0, min(1, k // 2))) for k in kernel)
    sides = tuple(draw(st.integers(max(1, k - 2 * p), 6)) for k, p in zip(kernel, padding))
    x_shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) + sides
    return x_shape, kernel, stride, padding


def out_shape(x_shape, kernel, stride, padding):
    n, c, h, w = x_shape
    return (n, c) + tuple((s + 2 * p - k) // st_ + 1
                          for s, k, st_, p in zip((h, w), kernel, stride, padding))


def host(buf, shape):
    return cuda.to_numpy(contract.dense(buf, shape))


# Small integers make ties common, which pins down the argmax convention (first maximum).
tie_values = st.sampled_from(["floats", "ties"])


@given(st.data())
def test_maxpool2d_matches_cpu_exactly(data):
    x_shape, kernel, stride, padding = data.draw(pool_geometry())
    lo, hi = (-2, 2) if data.draw(tie_values) == "ties" else (-4, 4)
    spec = data.draw(views(x_shape, lo=lo, hi=hi))
    if lo == -2:
        spec.base = np.round(spec.base)
    ref_v, ref_i = cpu.maxpool2d(spec.on(cpu), kernel, stride, padding)
    got_v, got_i = pool.maxpool2d(spec.on(cuda), kernel, stride, padding, **SMALL)
    shape = out_shape(x_shape, kernel, stride, padding)
    assert got_i.dtype == np.int64
    np.testing.assert_array_equal(host(got_v, shape), ref_v.reshape(shape))
    np.testing.assert_array_equal(host(got_i, shape), ref_i.reshape(shape))


def test_maxpool2d_ties_and_all_padding_windows_follow_numpy_argmax():
    """Constant input: every window's argmax is its first in-bounds pixel; a window of -inf
    only points at its first (padding) position, like np.argmax over the padded window."""
    x = np.ones((1, 1, 3, 4), np.float32)
    x[0, 0, 0, :] = -np.inf
    for b, kw in ((cpu, {}), (pool, SMALL)):
        v, i = b.maxpool2d(contract.dense(cuda.from_numpy(x) if b is pool else x.reshape(-1),
                                          x.shape), (2, 2), (1, 2), (1, 1), **kw)
        if b is cpu:
            ref_v, ref_i = v, i
        else:
            np.testing.assert_array_equal(v.copy_to_host(), ref_v)
            np.testing.assert_array_equal(i.copy_to_host(), ref_i)


@given(st.data())
def test_maxpool2d_backward_matches_cpu(data):
    x_shape, kernel, stride, padding = data.draw(pool_geometry())
    x = data.draw(arrays(x_shape))
    _, argmax = cpu.maxpool2d(contract.dense(x.reshape(-1), x_shape), kernel, stride, padding)
    shape = out_shape(x_shape, kernel, stride, padding)
    g = data.draw(views(shape))
    am = contract.dense(argmax, shape)
    ref = cpu.maxpool2d_backward(g.on(cpu), am, x_shape)
    got = pool.maxpool2d_backward(g.on(cuda), contract.dense(cuda.from_numpy(argmax), shape),
                                  x_shape, **SMALL)
    np.testing.assert_allclose(got.copy_to_host(), ref, **TOL)


def test_maxpool2d_backward_sums_overlapping_windows():
    """3x3 stride 1 on a peak: the centre is every window's max, so it receives all grads."""
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1] = 5
    _, argmax = pool.maxpool2d(contract.dense(cuda.from_numpy(x), x.shape), (3, 3), (1, 1),
                               (1, 1), **SMALL)
    g = np.arange(1, 17, dtype=np.float32)
    got = pool.maxpool2d_backward(contract.dense(cuda.from_numpy(g), (1, 1, 4, 4)),
                                  contract.dense(argmax, (1, 1, 4, 4)), x.shape, **SMALL)
    ref = cpu.maxpool2d_backward(contract.dense(g, (1, 1, 4, 4)),
                                 contract.dense(argmax.copy_to_host(), (1, 1, 4, 4)), x.shape)
    np.testing.assert_allclose(got.copy_to_host(), ref, rtol=1e-6)
    assert got.copy_to_host()[5] == 1 + 2 + 3 + 5 + 6 + 7 + 9 + 10 + 11


@given(st.data(), st.booleans())
def test_avgpool2d_matches_cpu(data, count_include_pad):
    x_shape, kernel, stride, padding = data.draw(pool_geometry())
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    spec = data.draw(views(x_shape, dtype=dtype))
    ref = cpu.avgpool2d(spec.on(cpu), kernel, stride, padding, count_include_pad)
    got = pool.avgpool2d(spec.on(cuda), kernel, stride, padding, count_include_pad, **SMALL)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.copy_to_host(), ref, **TOL)


@given(st.data(), st.booleans())
def test_avgpool2d_backward_matches_cpu_exactly(data, count_include_pad):
    x_shape, kernel, stride, padding = data.draw(pool_geometry())
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    g = data.draw(views(out_shape(x_shape, kernel, stride, padding), dtype=dtype))
    ref = cpu.avgpool2d_backward(g.on(cpu), x_shape, kernel, stride, padding, count_include_pad)
    got = pool.avgpool2d_backward(g.on(cuda), x_shape, kernel, stride, padding,
                                  count_include_pad, **SMALL)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.copy_to_host(), ref)


def test_pooling_production_launch():
    """The GPU launch configuration (device.BLOCK = 256 threads): 3x3 stride 2 pad 1 (overlapping), both divisor conventions."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 9, 8)).astype(np.float32)
    geom = ((3, 3), (2, 2), (1, 1))
    xc, xg = contract.dense(x.reshape(-1), x.shape), contract.dense(cuda.from_numpy(x), x.shape)
    ref_v, ref_i = cpu.maxpool2d(xc, *geom)
    got_v, got_i = pool.maxpool2d(xg, *geom, **PRODUCTION)
    np.testing.assert_array_equal(got_v.copy_to_host(), ref_v)
    np.testing.assert_array_equal(got_i.copy_to_host(), ref_i)
    shape = (2, 2, 5, 4)
    g = rng.standard_normal(shape).astype(np.float32)
    gc, gg = contract.dense(g.reshape(-1), shape), contract.dense(cuda.from_numpy(g), shape)
    np.testing.assert_allclose(
        pool.maxpool2d_backward(gg, contract.dense(got_i, shape), x.shape, **PRODUCTION).copy_to_host(),
        cpu.maxpool2d_backward(gc, contract.dense(ref_i, shape), x.shape), **TOL)
    for include in (True, False):
        np.testing.assert_allclose(pool.avgpool2d(xg, *geom, include, **PRODUCTION).copy_to_host(),
                                   cpu.avgpool2d(xc, *geom, include), **TOL)
        np.testing.assert_array_equal(
            pool.avgpool2d_backward(gg, x.shape, *geom, include, **PRODUCTION).copy_to_host(),
            cpu.avgpool2d_backward(gc, x.shape, *geom, include))
