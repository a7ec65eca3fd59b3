"""The newer elementwise ops and activations: values against NumPy/math formulas on cpu and
cuda, float64 gradcheck, Python's // and % sign rules, IEEE edge values, modules and errors.

(The maps themselves are also drawn by hypothesis in ``test_cuda_elementwise.py``, cuda vs
cpu, forward and fused backward, and every derivative is gradchecked in ``test_optable.py``.)
"""
import math

import numpy as np
import pytest

import minigpu as mg
import minigpu.nn as nn
import minigpu.nn.functional as F
from minigpu.backends import contract, cpu, get

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DEVICES = ("cpu", "cuda")
"""The simulator returns inf/nan where Python's math raises (sin(inf), expm1(1e30))."""

ERF = np.vectorize(math.erf)


def gelu_ref(x):
    return 0.5 * x * (1 + ERF(x / math.sqrt(2)))


def gelu_tanh_ref(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def sigmoid_ref(x):
    return 1 / (1 + np.exp(-x))


REFERENCES = [
    (lambda t: F.gelu(t), gelu_ref),
    (lambda t: F.gelu(t, approximate="tanh"), gelu_tanh_ref),
    (lambda t: F.silu(t), lambda x: x * sigmoid_ref(x)),
    (lambda t: F.softplus(t), lambda x: np.where(x > 20, x, np.log1p(np.exp(x)))),
    (lambda t: F.softplus(t, beta=2.0, threshold=3.0),
     lambda x: np.where(2 * x > 3, x, np.log1p(np.exp(2 * x)) / 2)),
    (lambda t: F.elu(t), lambda x: np.where(x > 0, x, np.expm1(x))),
    (lambda t: F.elu(t, alpha=0.3), lambda x: np.where(x > 0, x, 0.3 * np.expm1(x))),
    (lambda t: t.sin(), np.sin), (lambda t: t.cos(), np.cos),
    (lambda t: t.log1p(), lambda x: np.log1p(np.abs(x))),
    (lambda t: t.expm1(), np.expm1),
]
IDS = ["gelu", "gelu_tanh", "silu", "softplus", "softplus_b2_t3", "elu", "elu_a03", "sin",
       "cos", "log1p", "expm1"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn,ref", REFERENCES, ids=IDS)
def test_values_against_the_formula(fn, ref, device):
    x = np.linspace(-6, 6, 49)
    for dtype, tol in ((mg.float64, 1e-12), (mg.float32, 2e-6)):
        arg = np.abs(x) if ref is REFERENCES[9][1] else x
        t = mg.tensor(arg, dtype=dtype, device=device)
        got = fn(t)
        assert got.dtype == dtype and got.device.type == device
        want = ref(x)
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("fn", [r[0] for r in REFERENCES], ids=IDS)
def test_gradcheck(fn):
    rng = np.random.default_rng(3)
    # away from the kinks (elu at 0, softplus's threshold) and inside log1p's domain
    x = rng.uniform(0.2, 1.2, (3, 4)) * rng.choice([-1.0, 1.0], (3, 4))
    t = mg.tensor(x, dtype=mg.float64, requires_grad=True)
    assert mg.autograd.gradcheck(fn, (t.abs().detach().requires_grad_()
                                      if fn is REFERENCES[9][0] else t,))


@pytest.mark.parametrize("fn", [r[0] for r in REFERENCES], ids=IDS)
def test_cuda_backward_matches_cpu(fn):
    rng = np.random.default_rng(4)
    x = rng.uniform(0.1, 3.0, (5, 7)) * (rng.choice([-1.0, 1.0], (5, 7)) if fn is not
                                         REFERENCES[9][0] else 1)
    g = rng.normal(size=(5, 7))
    grads = []
    for device in DEVICES:
        t = mg.tensor(x, dtype=mg.float32, device=device, requires_grad=True)
        fn(t).backward(mg.tensor(g, dtype=mg.float32, device=device))
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


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


EDGES = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1e30, -1e30, 88.0, -88.0, 1e-30,
                  -1e-30, 0.5, -0.5, 2.5, -2.5, 1e4, -1e4], np.float64)
EDGE_OPS = ["sin", "cos", "log1p", "expm1", "floor", "ceil", "round", "trunc", "isnan",
            "isinf", "sign", "gelu", "gelu_tanh", "silu", "softplus", "elu"]
GRAD_OPS = ["gelu_grad", "gelu_tanh_grad", "silu_grad", "softplus_grad", "elu_grad"]


def _compare(op, got, want):
    assert got.dtype == want.dtype, op
    if want.dtype.kind == "b" or op in ("floor", "ceil", "round", "trunc", "sign"):
        np.testing.assert_array_equal(got, want, err_msg=op)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=op)
    else:
        tol = 1e-6 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=op)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", EDGE_OPS)
def test_edge_values_cuda_matches_cpu(op, dtype):
    cuda = get("cuda")
    x = EDGES.astype(dtype)
    a, b = (1.0, 20.0) if op == "softplus" else (1.0, 0.0)
    want = cpu.unary(op, contract.dense(x, x.shape), a, b)
    buf = cuda.unary(op, contract.dense(cuda.from_numpy(x), x.shape), a, b)
    _compare(op, cuda.to_numpy(contract.dense(buf, x.shape)), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", GRAD_OPS + ["floor_divide", "remainder"])
def test_edge_values_binary_cuda_matches_cpu(op, dtype):
    cuda = get("cuda")
    x = EDGES.astype(dtype)
    y = np.roll(EDGES, 3).astype(dtype) if op in ("floor_divide", "remainder") else x[::-1].copy()
    g = np.ones_like(x) if op not in ("floor_divide", "remainder") else x
    want = cpu.binary(op, contract.dense(g, x.shape), contract.dense(y, x.shape), 1.0, 20.0)
    buf = cuda.binary(op, contract.dense(cuda.from_numpy(g), x.shape),
                      contract.dense(cuda.from_numpy(y), x.shape), 1.0, 20.0)
    _compare(op, cuda.to_numpy(contract.dense(buf, x.shape)), want)


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
