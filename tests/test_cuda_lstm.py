"""cuda lstm_cell / lstm_cell_backward (fused) and lstm_cell_unfused against the NumPy reference.

Tolerances: the kernels do the same float operations in the same order as
``backends/cpu/lstm.py``; only exp/tanh differ by an ulp or two between libm and CUDA, so
float32 rtol=1e-5, atol=1e-6 (values of order 1); float64 rtol=1e-12. Operands are drawn as
arbitrary strided views (permuted, sliced, offset, broadcast) because the recurrent layers pass per-timestep slices
and stride-0 zero states straight to the kernels.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import contract
from minigpu.backends.cuda import device, lstm
from minigpu.lessons.fusion import lstm_cell_unfused
from strategies import views

cpu = backends.get("cpu")
cuda = backends.get("cuda")

SMALL = dict(block=32, max_blocks=2)
"""Simulator-friendly launch: 64 threads, each looping over several elements."""
dtypes = st.sampled_from([np.float32, np.float64])


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


def host(buf, shape):
    return cuda.to_numpy(contract.dense(buf, shape))


@st.composite
def cell_inputs(draw, backward=False):
    n, hs = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    dtype = draw(dtypes)
    gates = draw(views((n, 4 * hs), dtype=dtype))
    c_prev = draw(views((n, hs), dtype=dtype))
    extra = [draw(views((n, hs), dtype=dtype)) for _ in range(2)] if backward else []
    return n, hs, dtype, gates, c_prev, extra


@given(cell_inputs())
def test_lstm_cell_fused_and_unfused_match_cpu(args):
    n, hs, dtype, gates, c_prev, _ = args
    ref = cpu.lstm_cell(gates.on(cpu), c_prev.on(cpu))
    fused = lstm.lstm_cell(gates.on(cuda), c_prev.on(cuda), **SMALL)
    unfused = lstm_cell_unfused(gates.on(cuda), c_prev.on(cuda))
    for r, f, u, shape in zip(ref, fused, unfused, [(n, hs), (n, hs), (n, 4 * hs)]):
        assert f.dtype == dtype and u.dtype == dtype
        np.testing.assert_allclose(host(f, shape), r.reshape(shape), **tol(dtype))
        np.testing.assert_allclose(host(u, shape), r.reshape(shape), **tol(dtype))
        np.testing.assert_allclose(host(u, shape), host(f, shape), **tol(dtype))


@given(cell_inputs(backward=True))
def test_lstm_cell_backward_matches_cpu(args):
    n, hs, dtype, gates, c_prev, (grad_h, grad_c) = args
    # act and c come from a real forward, so they are consistent (act in (0, 1) / (-1, 1)).
    h, c, act = cpu.lstm_cell(gates.on(cpu), c_prev.on(cpu))
    act_v = contract.dense(act, (n, 4 * hs))
    c_v = contract.dense(c, (n, hs))
    ref = cpu.lstm_cell_backward(act_v, c_prev.on(cpu), c_v, grad_h.on(cpu), grad_c.on(cpu))
    dev = lambda v: contract.dense(cuda.from_numpy(v.buf), v.shape)  # noqa: E731
    got = lstm.lstm_cell_backward(dev(act_v), c_prev.on(cuda), dev(c_v), grad_h.on(cuda),
                                  grad_c.on(cuda), **SMALL)
    for r, g, shape in zip(ref, got, [(n, 4 * hs), (n, hs)]):
        assert g.dtype == dtype
        np.testing.assert_allclose(host(g, shape), r.reshape(shape), **tol(dtype))


def test_lstm_cell_backward_is_the_derivative():
    """The NumPy reference backward against central differences of the forward (float64)."""
    rng = np.random.default_rng(0)
    n, hs = 2, 3
    gates, c0 = rng.standard_normal((n, 4 * hs)) * 2, rng.standard_normal((n, hs))
    wh, wc = rng.standard_normal((n, hs)), rng.standard_normal((n, hs))
    d = lambda a: contract.dense(np.ascontiguousarray(a).reshape(-1), a.shape)  # noqa: E731

    def loss(g, c):
        h, cn, _ = cpu.lstm_cell(d(g), d(c))
        return (h.reshape(n, hs) * wh).sum() + (cn.reshape(n, hs) * wc).sum()

    h, c, act = cpu.lstm_cell(d(gates), d(c0))
    dg, dc = cpu.lstm_cell_backward(d(act.reshape(n, 4 * hs)), d(c0), d(c.reshape(n, hs)),
                                    d(wh), d(wc))
    for x, analytic in ((gates, dg), (c0, dc)):
        numeric = np.zeros(x.size)
        for k in range(x.size):
            e = np.zeros(x.size)
            e[k] = 1e-6
            e = e.reshape(x.shape)
            plus = loss(gates + e, c0) if x is gates else loss(gates, c0 + e)
            minus = loss(gates - e, c0) if x is gates else loss(gates, c0 - e)
            numeric[k] = (plus - minus) / 2e-6
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


def test_production_launch_configuration():
    """The default (production, 256-thread) block on a shape spanning several warps."""
    rng = np.random.default_rng(1)
    n, hs = 3, 13
    gates = rng.standard_normal((n, 4 * hs)).astype(np.float32) * 3
    c0 = rng.standard_normal((n, hs)).astype(np.float32)
    ref = cpu.lstm_cell(contract.dense(gates.reshape(-1), gates.shape),
                        contract.dense(c0.reshape(-1), c0.shape))
    got = lstm.lstm_cell(contract.dense(cuda.from_numpy(gates), gates.shape),
                         contract.dense(cuda.from_numpy(c0), c0.shape),
                         block=device.BLOCK, max_blocks=device.MAX_BLOCKS)
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g.copy_to_host(), r, rtol=1e-5, atol=1e-6)


def test_saturated_gates_stay_finite():
    """|pre-activation| of 100: sigmoid never overflows, tanh saturates to exactly +-1."""
    gates = np.array([[100, -100, 100, -100, -100, 100, -100, 100]], np.float32)
    c0 = np.array([[1.0, -2.0]], np.float32)
    views_ = lambda b: (contract.dense(b.from_numpy(gates), gates.shape),  # noqa: E731
                        contract.dense(b.from_numpy(c0), c0.shape))
    ref = cpu.lstm_cell(*views_(cpu))
    got = lstm.lstm_cell(*views_(cuda), **SMALL)
    for r, g in zip(ref, got):
        assert np.all(np.isfinite(g.copy_to_host()))
        np.testing.assert_allclose(g.copy_to_host(), r, rtol=1e-6, atol=1e-7)


def test_shape_errors():
    g = contract.dense(cuda.full(2 * 8, 0.0, np.float32), (2, 8))
    with pytest.raises(ValueError, match=r"c_prev: expected shape \(2, 2\), got \(2, 3\)"):
        lstm.lstm_cell(g, contract.dense(cuda.full(6, 0.0, np.float32), (2, 3)))
    with pytest.raises(ValueError, match="4\\*hidden_size columns, got 7"):
        lstm.lstm_cell(contract.dense(cuda.full(14, 0.0, np.float32), (2, 7)),
                       contract.dense(cuda.full(2, 0.0, np.float32), (2, 1)))


def test_lstm_cell_distinct_gates():
    """Each gate block (i, f, g, o) holds its own values, so reading one gate in place of
    another changes the result in the forward and in the backward. Drawn gate views are often
    broadcast or constant, where a swap is invisible."""
    n, hs = 2, 3
    rng = np.random.default_rng(5)
    gates = np.concatenate([rng.uniform(-3, 3, (n, hs)) + 0.7 * k for k in range(4)], axis=1)
    cols = [contract.dense(cpu.from_numpy(a), a.shape) for a in
            (gates, rng.uniform(-2, 2, (n, hs)))]
    ref = cpu.lstm_cell(*cols)
    dev = lambda v: contract.dense(cuda.from_numpy(v.buf), v.shape)  # noqa: E731
    got = lstm.lstm_cell(*map(dev, cols), **SMALL)
    for r, g, shape in zip(ref, got, [(n, hs), (n, hs), (n, 4 * hs)]):
        np.testing.assert_allclose(host(g, shape), r.reshape(shape), **tol(np.float64))
    h, c, act = ref
    act_v, c_v = contract.dense(act, (n, 4 * hs)), contract.dense(c, (n, hs))
    grads = [contract.dense(cpu.from_numpy(rng.uniform(-1, 1, (n, hs))), (n, hs))
             for _ in range(2)]
    bwd_cpu = cpu.lstm_cell_backward(act_v, cols[1], c_v, *grads)
    bwd = lstm.lstm_cell_backward(dev(act_v), dev(cols[1]), dev(c_v), *map(dev, grads), **SMALL)
    for r, g, shape in zip(bwd_cpu, bwd, [(n, 4 * hs), (n, hs)]):
        np.testing.assert_allclose(host(g, shape), r.reshape(shape), **tol(np.float64))
