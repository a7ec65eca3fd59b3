"""The same composite expressions on cpu and on cuda give the same values and gradients.

Inputs are drawn by hypothesis; tolerance 1e-4 relative (float32, different summation orders).
"""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import minigpu as mg
from strategies import arrays, broadcastable_shapes, shapes

RTOL, ATOL = 1e-4, 1e-5


def run(fn, arrays_, device):
    inputs = [mg.tensor(a, device=device, requires_grad=True) for a in arrays_]
    out = fn(*inputs)
    out.sum().backward() if out.numel() > 1 else out.backward()
    return out.detach().numpy(), [t.grad.numpy() if t.grad is not None else None for t in inputs]


def assert_same_on_both_devices(fn, *arrays_):
    out_cpu, grads_cpu = run(fn, arrays_, "cpu")
    out_cuda, grads_cuda = run(fn, arrays_, "cuda")
    np.testing.assert_allclose(out_cuda, out_cpu, rtol=RTOL, atol=ATOL)
    for g_cuda, g_cpu in zip(grads_cuda, grads_cpu):
        np.testing.assert_allclose(g_cuda, g_cpu, rtol=RTOL, atol=ATOL)


@given(st.data(), broadcastable_shapes())
def test_broadcast_arithmetic(data, shapes_):
    a = data.draw(arrays(shapes_.input_shapes[0]))
    b = data.draw(arrays(shapes_.input_shapes[1], lo=0.5, hi=3.0))
    assert_same_on_both_devices(lambda x, y: (x * y - x / y + 2.0) ** 2 - y.sqrt(), a, b)


@given(st.data(), shapes(min_dims=1, max_dims=3))
def test_unary_chain(data, shape):
    a = data.draw(arrays(shape))
    assert_same_on_both_devices(
        lambda x: x.tanh() + x.sigmoid() * x.relu() - x.abs().clamp(0.1, 2.0).log() + x.exp() / 10
        + mg.nn.functional.leaky_relu(x, 0.1), a)


@given(st.data(), shapes(min_dims=2, max_dims=3), st.booleans())
def test_reductions_over_dims(data, shape, keepdim):
    a = data.draw(arrays(shape))
    dims = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    d = dims[0]
    assert_same_on_both_devices(
        lambda x: x.sum(dims, keepdim=keepdim).sum() + x.mean(d).sum() + x.max(d).values.sum()
        + x.min(-1, keepdim=keepdim)[0].sum() + x.max(), a)


@given(st.data(), st.integers(1, 3), st.integers(1, 5), st.integers(1, 5), st.integers(1, 5))
def test_batched_matmul_with_broadcast_and_transpose(data, batch, m, k, n):
    a = data.draw(arrays((batch, m, k)))
    b = data.draw(arrays((n, k)))
    c = data.draw(arrays((k,)))
    assert_same_on_both_devices(lambda x, w, v: (x @ w.T).sum() + (x @ v).sum(), a, b, c)


@given(st.data(), st.integers(1, 5), st.integers(1, 5), st.integers(1, 5), st.booleans())
def test_linear_with_bias_matches_across_devices(data, m, k, n, transposed):
    """F.linear of a matrix with a bias (one Addmm node) on plain and transposed operands;
    the output is weighted so each element's gradient differs."""
    x = data.draw(arrays((k, m) if transposed else (m, k)))
    w = data.draw(arrays((k, n) if transposed else (n, k)))
    b = data.draw(arrays((n,)))
    weights = data.draw(arrays((m, n)))

    def fn(x_, w_, b_):
        if transposed:
            x_, w_ = x_.T, w_.T
        out = mg.nn.functional.linear(x_, w_, b_)
        assert out.grad_fn.name() == "AddmmBackward"
        return out * mg.tensor(weights, device=out.device)
    assert_same_on_both_devices(fn, x, w, b)


@given(st.data(), shapes(min_dims=1, max_dims=3))
def test_softmax_and_log_softmax(data, shape):
    a = data.draw(arrays(shape, lo=-30, hi=30))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    weights = data.draw(arrays(shape))
    assert_same_on_both_devices(
        lambda x, w: (x.softmax(dim) * w).sum() + (x.log_softmax(dim) * w).sum(), a, weights)


@given(st.data(), shapes(min_dims=2, max_dims=3, min_side=2))
def test_views_slicing_cat_stack(data, shape):
    a = data.draw(arrays(shape))
    b = data.draw(arrays(shape))

    def fn(x, y):
        sliced = x[1:, ::2] * y[:-1, ::2]
        joined = mg.cat([x.transpose(0, 1), y.transpose(0, 1)], 0)
        stacked = mg.stack([x, y], -1)
        return sliced.sum() + (joined ** 2).sum() + stacked.transpose(0, -1).reshape(-1)[::3].sum()

    assert_same_on_both_devices(fn, a, b)


@given(st.data(), shapes(min_dims=1, max_dims=2))
def test_reused_nodes_and_where(data, shape):
    a = data.draw(arrays(shape))

    def fn(x):
        y = x * 2.0
        return (y * y + mg.where(x > 0, y, x * x) + y.exp() * 0.01).sum()

    assert_same_on_both_devices(fn, a)


def test_int_and_bool_tensors_on_cuda():
    x = mg.tensor([3, -1, 2], device="cuda")
    np.testing.assert_array_equal((x * 2 + 1).numpy(), [7, -1, 5])
    np.testing.assert_array_equal((x > 0).float().numpy(), [1.0, 0.0, 1.0])
    assert x.sum().item() == 4
