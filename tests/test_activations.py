"""The newer elementwise ops and activations: what their declarations do not say — softplus's
threshold, rounding halves to even, Python's // and % sign rules, modules and errors.

(Each op is tested from its declaration: cuda against cpu, float64 gradcheck, against torch on
drawn and edge values in ``test_registered_ops.py``; every table map on the edge values, cuda
against cpu, and every derivative in ``test_optable.py``; the maps drawn by hypothesis in
``test_cuda_elementwise.py``.)
"""
import math

import numpy as np
import pytest

import minigpu as mg
import minigpu.nn as nn
import minigpu.nn.functional as F

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICES = ("cpu", "cuda")
"""The simulator returns inf/nan where Python's math raises (sin(inf), expm1(1e30))."""

def sigmoid_ref(x):
    return 1 / (1 + np.exp(-x))


def test_softplus_gradient_is_the_sigmoid_below_the_threshold_and_one_above():
    t = mg.tensor([-3.0, 0.0, 1.0, 2.0], dtype=mg.float64, requires_grad=True)
    F.softplus(t, beta=2.0, threshold=3.0).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), [*sigmoid_ref(2 * np.array([-3.0, 0.0, 1.0])),
                                                1.0])


@pytest.mark.parametrize("device", DEVICES)
def test_rounding_ops_halves_to_even_and_zero_gradient(device):
    x = np.array([-2.5, -1.5, -0.5, -0.3, 0.5, 1.5, 2.5, 2.7, -2.7], np.float32)
    t = mg.tensor(x, device=device, requires_grad=True)
    for name, ref in (("floor", np.floor), ("ceil", np.ceil), ("round", np.round),
                      ("trunc", np.trunc), ("sign", np.sign)):
        y = getattr(t, name)()
        np.testing.assert_array_equal(y.detach().numpy(), ref(x), err_msg=name)
        t.grad = None
        y.sum().backward()
        np.testing.assert_array_equal(t.grad.numpy(), np.zeros_like(x), err_msg=name)
    r = mg.round(t).detach().numpy()
    np.testing.assert_array_equal(r, [-2, -2, -0, -0, 0, 2, 2, 3, -3])
    assert np.signbit(r[2]) and np.signbit(mg.ceil(t).detach().numpy()[3])


@pytest.mark.parametrize("device", DEVICES)
def test_floor_divide_and_remainder_follow_python(device):
    pairs = [(a, b) for a in (-7, -6, -1, 0, 1, 5, 7) for b in (-3, -2, 2, 3)]
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    ti, bi = mg.tensor(a, device=device), mg.tensor(b, device=device)
    assert (ti // bi).dtype == mg.int64 and (ti % bi).dtype == mg.int64
    assert (ti // bi).tolist() == [x // y for x, y in pairs]
    assert (ti % bi).tolist() == [x % y for x, y in pairs]
    tf, bf = ti.to(mg.float32) + 0.5, bi.to(mg.float32)
    assert (tf // bf).tolist() == [(x + 0.5) // y for x, y in pairs]
    assert (tf % bf).tolist() == [(x + 0.5) % y for x, y in pairs]
    # scalar and reverse forms
    assert (ti // 2).tolist() == [x // 2 for x in a]
    assert (ti % -3).tolist() == [x % -3 for x in a]
    assert (7 // bi).tolist() == [7 // y for y in b]
    assert (-7 % bi).tolist() == [-7 % y for y in b]
    assert (tf // 2.0).dtype == mg.float32 and (ti // 2.5).dtype == mg.float32
    assert mg.floor_divide(ti, bi).tolist() == ti.floor_divide(bi).tolist()
    assert mg.remainder(tf, 2).tolist() == tf.remainder(2).tolist()


def test_remainder_gradients_and_floor_divide_zero_gradient():
    rng = np.random.default_rng(5)
    a = mg.tensor(rng.uniform(0.6, 5.0, (3, 4)), dtype=mg.float64, requires_grad=True)
    b = mg.tensor(rng.uniform(0.7, 1.9, (1, 4)), dtype=mg.float64, requires_grad=True)
    assert mg.autograd.gradcheck(lambda x, y: x % y, (a, b))
    assert mg.autograd.gradcheck(lambda x: 5.0 % x, (b,))
    a.grad = b.grad = None
    (a // b).sum().backward()
    assert not a.grad.numpy().any() and not b.grad.numpy().any() and b.grad.shape == (1, 4)


@pytest.mark.parametrize("device", DEVICES)
def test_isnan_isinf(device):
    x = mg.tensor([1.0, math.nan, math.inf, -math.inf, -0.0], device=device)
    assert x.isnan().dtype == mg.bool
    assert x.isnan().tolist() == [False, True, False, False, False]
    assert mg.isinf(x).tolist() == [False, False, True, True, False]
    assert mg.isnan(mg.tensor([1, 2], device=device)).tolist() == [False, False]
    assert not x.isnan().requires_grad


def test_modules_reprs_state_and_errors():
    assert repr(nn.GELU()) == "GELU(approximate='none')"
    assert repr(nn.GELU(approximate="tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.SiLU()) == "SiLU()"
    assert repr(nn.Softplus(beta=2, threshold=5)) == "Softplus(beta=2, threshold=5)"
    assert repr(nn.ELU(alpha=0.5)) == "ELU(alpha=0.5)"
    for m in (nn.GELU(), nn.SiLU(), nn.Softplus(), nn.ELU()):
        assert m.state_dict() == {} and list(m.parameters()) == []
    with pytest.raises(RuntimeError, match="approximate argument must be either none or tanh"):
        nn.GELU(approximate="erf")(mg.zeros(2))
    x = mg.tensor([-1.0, 2.0])
    np.testing.assert_allclose(nn.ELU(0.5)(x).numpy(), F.elu(x, 0.5).numpy())
    assert F.gelu(mg.tensor([1, 2])).dtype == mg.float32  # integers become float
