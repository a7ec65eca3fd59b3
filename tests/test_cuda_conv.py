"""cuda im2col / col2im / direct convolution against the NumPy reference.

Tolerances: im2col is a pure copy and col2im sums in the same (ki, kj) order as ``cpu.col2im``,
so both must match *exactly*. The direct convolutions sum in a different order from the
im2col+GEMM reference: float32 rtol=1e-5, atol=1e-5 (values in [-4, 4], <= 27 terms);
float64 rtol=1e-12.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import contract
from minigpu.backends.cuda import conv, device
from minigpu.lessons import constant_memory
from strategies import arrays, views

cpu = backends.get("cpu")
cuda = backends.get("cuda")

SMALL = dict(block=32, max_blocks=2)
PRODUCTION = dict(block=device.BLOCK, max_blocks=device.MAX_BLOCKS)
"""Simulator-friendly launch: 64 threads, each looping over several elements."""


def out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


@st.composite
def conv_geometry(draw, max_n=2, max_c=2):
    """(x_shape, kernel, stride, padding, dilation) with at least one output pixel."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    sides = []
    for k, p, d in zip(kernel, padding, dilation):
        smallest = max(1, d * (k - 1) + 1 - 2 * p)
        sides.append(draw(st.integers(smallest, smallest + 4)))
    x_shape = (draw(st.integers(1, max_n)), draw(st.integers(1, max_c))) + tuple(sides)
    return x_shape, kernel, stride, padding, dilation


def host(backend, buf, shape):
    return backend.to_numpy(contract.dense(buf, shape))


@given(st.data())
def test_im2col_matches_cpu_exactly(data):
    x_shape, kernel, stride, padding, dilation = data.draw(conv_geometry())
    spec = data.draw(views(x_shape))  # permuted / sliced / broadcast layouts too
    ref = cpu.im2col(spec.on(cpu), kernel, stride, padding, dilation)
    got = conv.im2col(spec.on(cuda), kernel, stride, padding, dilation, **SMALL)
    np.testing.assert_array_equal(host(cuda, got, ref.shape), ref)


@given(st.data())
def test_col2im_matches_cpu_exactly(data):
    x_shape, kernel, stride, padding, dilation = data.draw(conv_geometry())
    n, c, h, w = x_shape
    oh = out_size(h, kernel[0], stride[0], padding[0], dilation[0])
    ow = out_size(w, kernel[1], stride[1], padding[1], dilation[1])
    cols_shape = (n, c * kernel[0] * kernel[1], oh * ow)
    spec = data.draw(views(cols_shape))
    ref = cpu.col2im(spec.on(cpu), x_shape, kernel, stride, padding, dilation)
    got = conv.col2im(spec.on(cuda), x_shape, kernel, stride, padding, dilation, **SMALL)
    np.testing.assert_array_equal(host(cuda, got, ref.shape), ref)


@given(st.data())
def test_col2im_is_the_adjoint_of_im2col(data):
    """<im2col(x), y> == <x, col2im(y)> in float64 (what makes col2im the conv backward)."""
    x_shape, kernel, stride, padding, dilation = data.draw(conv_geometry(max_n=1))
    x = data.draw(arrays(x_shape, np.float64))
    cols = conv.im2col(contract.dense(cuda.from_numpy(x), x_shape), kernel, stride, padding,
                       dilation, **SMALL)
    y = data.draw(arrays(cols.size, np.float64))
    n, c = x_shape[:2]
    k = c * kernel[0] * kernel[1]
    y_view = contract.dense(cuda.from_numpy(y), (n, k, cols.size // (n * k)))
    back = conv.col2im(y_view, x_shape, kernel, stride, padding, dilation, **SMALL)
    lhs = float(np.dot(cols.copy_to_host(), y))
    rhs = float(np.dot(x.reshape(-1), back.copy_to_host()))
    assert lhs == pytest.approx(rhs, rel=1e-12, abs=1e-12)


def test_im2col_col2im_production_launch():
    """The GPU launch configuration (device.BLOCK = 256 threads), on a shape that needs more than one block."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    args = ((3, 3), (1, 1), (1, 1), (1, 1))
    ref = cpu.im2col(contract.dense(x.reshape(-1), x.shape), *args)
    cols = conv.im2col(contract.dense(cuda.from_numpy(x), x.shape), *args, **PRODUCTION)
    np.testing.assert_array_equal(cols.copy_to_host(), ref)
    cols_view = contract.dense(cuda.from_numpy(ref), (2, 27, 42))
    back = conv.col2im(cols_view, x.shape, *args, **PRODUCTION)
    np.testing.assert_array_equal(back.copy_to_host(),
                                  cpu.col2im(contract.dense(ref, (2, 27, 42)), x.shape, *args))


def reference_conv(x, weight, bias, padding):
    """Stride-1 convolution as im2col + GEMM in NumPy."""
    n = x.shape[0]
    oc, c, kh, kw = weight.shape
    cols = cpu.im2col(contract.dense(x.reshape(-1), x.shape), (kh, kw), (1, 1), padding)
    oh = out_size(x.shape[2], kh, 1, padding[0], 1)
    ow = out_size(x.shape[3], kw, 1, padding[1], 1)
    out = weight.reshape(oc, -1) @ cols.reshape(n, c * kh * kw, oh * ow)
    if bias is not None:
        out = out + bias[:, None]
    return out.reshape(n, oc, oh, ow)


@given(st.data())
def test_direct_convolutions_match_im2col_gemm(data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    padding = (data.draw(st.integers(0, kh // 2)), data.draw(st.integers(0, kw // 2)))
    oc, c = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
    h = data.draw(st.integers(max(1, kh - 2 * padding[0]), 5))
    w = data.draw(st.integers(max(1, kw - 2 * padding[1]), 5))
    x_shape = (data.draw(st.integers(1, 2)), c, h, w)
    spec = data.draw(views(x_shape, dtype=dtype))
    weight = data.draw(arrays((oc, c, kh, kw), dtype))
    bias = data.draw(st.none() | arrays((oc,), dtype))
    ref = reference_conv(spec.numpy(), weight, bias, padding)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for fn in (constant_memory.conv2d_direct_constmem, constant_memory.conv2d_direct_global):
        got = fn(spec.on(cuda), weight, bias, padding, **SMALL)
        assert got.dtype == dtype
        np.testing.assert_allclose(host(cuda, got, ref.shape), ref, **tol)


def test_constmem_kernel_is_compiled_once_per_filter():
    x = np.arange(2 * 1 * 4 * 4, dtype=np.float32).reshape(2, 1, 4, 4)
    view = contract.dense(cuda.from_numpy(x), x.shape)
    sobel = np.array([[[[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]]], dtype=np.float32)
    constant_memory.conv2d_direct_constmem(view, sobel, None, 1, **SMALL)
    cache = constant_memory._CONST_KERNELS
    first = cache[next(reversed(cache))]
    out = constant_memory.conv2d_direct_constmem(view, sobel.copy(), None, 1, **SMALL)
    assert cache[next(reversed(cache))] is first
    np.testing.assert_allclose(host(cuda, out, (2, 1, 4, 4)),
                               reference_conv(x, sobel, None, (1, 1)), rtol=1e-6)
    constant_memory.conv2d_direct_constmem(view, sobel.transpose(0, 1, 3, 2), None, 1, **SMALL)
    assert cache[next(reversed(cache))] is not first


def test_constmem_rejects_a_filter_larger_than_constant_memory():
    x = contract.dense(cuda.from_numpy(np.zeros((1, 64, 3, 3), np.float32)), (1, 64, 3, 3))
    weight = np.zeros((128, 64, 3, 3), np.float32)  # 288 KiB
    with pytest.raises(ValueError, match="constant memory"):
        constant_memory.conv2d_direct_constmem(x, weight, None, 1)


def test_direct_conv_production_launch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    weight = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    ref = reference_conv(x, weight, bias, (1, 1))
    view = contract.dense(cuda.from_numpy(x), x.shape)
    for fn in (constant_memory.conv2d_direct_constmem, constant_memory.conv2d_direct_global):
        np.testing.assert_allclose(host(cuda, fn(view, weight, bias, (1, 1)), ref.shape), ref,
                                   rtol=1e-5, atol=1e-5)
