"""The bias + activation fusion lesson: ``bias_act`` (one fused kernel) vs ``bias_act_unfused``
(broadcast add, then the activation) vs NumPy.

Fused and unfused apply the same device functions to the same float32 (or float64) sum, so
they must agree exactly. Against NumPy: exact for identity/relu/leaky_relu (one rounded add,
then a select, or a multiply by 1 or by alpha that NumPy rounds the same way);
tanh/sigmoid within rtol=atol=1e-5 (float32) / 1e-12 (float64): the device's tanhf/expf are a
few ulp from NumPy's.
"""
import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends.contract import View, dense
from strategies import ViewSpec, views

cuda = backends.get("cuda")
F = importlib.import_module("minigpu.lessons.fusion")

ACTS = sorted(F.ACTIVATIONS)
TOL = {np.dtype(np.float32): dict(rtol=1e-5, atol=1e-5),
       np.dtype(np.float64): dict(rtol=1e-12, atol=1e-12)}


def fetch(buf, shape):
    return cuda.to_numpy(dense(buf, shape))


def check(act, x_spec, b_spec, alpha, **launch):
    x, b = x_spec.on(cuda), b_spec.on(cuda)
    shape = tuple(x_spec.shape)
    fused = fetch(F.bias_act(x, b, act, alpha, **launch), shape)
    unfused = fetch(F.bias_act_unfused(x, b, act, alpha), shape)
    want = F.reference(x_spec.numpy(), b_spec.numpy(), act, alpha)
    assert fused.dtype == unfused.dtype == want.dtype
    np.testing.assert_array_equal(fused, unfused, err_msg=act)
    if act in ("tanh", "sigmoid"):
        np.testing.assert_allclose(fused, want, err_msg=act, **TOL[want.dtype])
    else:
        np.testing.assert_array_equal(fused, want, err_msg=act)


@st.composite
def problems(draw, dtype=np.float32):
    rows, cols = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    x = draw(views(shape=(rows, cols), dtype=dtype))
    b = draw(views(shape=(cols,), dtype=dtype))
    alpha = draw(st.sampled_from([0.0, 0.01, 0.25]))
    return x, b, alpha


@pytest.mark.parametrize("act", ACTS)
@given(problems())
def test_fused_equals_unfused_and_numpy(act, problem):
    """Strided, transposed, offset and broadcast x and bias views, ragged sizes."""
    check(act, *problem[:2], problem[2])


@given(problems(dtype=np.float64), st.sampled_from(ACTS))
def test_float64(problem, act):
    check(act, *problem[:2], problem[2])


def test_several_blocks_and_grid_stride():
    """17 x 13 = 221 elements over 2 blocks of 32: each thread loops 4 times, rows straddle
    warps, so i % C must be right for every position."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, (17, 13)).astype(np.float32)
    b = rng.uniform(-2, 2, 13).astype(np.float32)
    xs = ViewSpec(x.reshape(-1), x.shape, (13, 1), 0)
    bs = ViewSpec(b, b.shape, (1,), 0)
    for act in ACTS:
        check(act, xs, bs, 0.1, block=32, max_blocks=2)


def test_errors():
    x = View(cuda.from_numpy(np.zeros(6, np.float32)), (2, 3), (3, 1), 0)
    bad = View(cuda.from_numpy(np.zeros(2, np.float32)), (2,), (1,), 0)
    with pytest.raises(ValueError, match="bias of shape"):
        F.bias_act(x, bad, "relu")
    good = View(cuda.from_numpy(np.zeros(3, np.float32)), (3,), (1,), 0)
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        F.bias_act(x, good, "gelu")


def test_empty():
    x = View(cuda.from_numpy(np.zeros(0, np.float32)), (0, 3), (3, 1), 0)
    b = View(cuda.from_numpy(np.zeros(3, np.float32)), (3,), (1,), 0)
    assert F.bias_act(x, b, "relu").size == 0
    assert F.bias_act_unfused(x, b, "relu").size == 0
