"""LayerNorm: the fused cuda kernels (``backends/cuda/layernorm.py``) against the NumPy
reference on hypothesis-drawn shapes and layouts, the production launch, Welford's accuracy,
float64 gradcheck of ``F.layer_norm``, and ``nn.LayerNorm`` against PyTorch's formula (biased
variance), state_dict keys and errors.

Tolerances: cuda vs cpu float32 rtol 1e-5, atol 1e-5 (sums in a different order; y and dx are
O(1)); float64 rtol 1e-10, atol 1e-12; atol is multiplied by max(1, rstd), which amplifies
rounding differences of near-constant rows. Against a float64 NumPy transcription of PyTorch's
formula: float32 atol 1e-5 (2e-4 for the features at 1e3 of the production test).
"""
import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn.functional as F
from minigpu import backends, nn
from minigpu.autograd import gradcheck
from minigpu.backends import contract
from strategies import views

cpu = backends.get("cpu")
cuda = backends.get("cuda")
LN = importlib.import_module("minigpu.backends.cuda.layernorm")
R_ = importlib.import_module("minigpu.backends.cuda.reduce")
pytestmark = pytest.mark.skipif(not R_.WARP_SHUFFLE, reason="needs the simulator's warp "
                                                            "intrinsics (simulator.py)")


def tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)


def host(backend, buf, shape):
    return backend.to_numpy(contract.dense(buf, shape))


def run(backend, x, w, b, g, eps, launch):
    """Forward then backward of one backend; every output as a host array."""
    up = (lambda spec: None if spec is None else spec.on(backend))
    R, C = x.shape
    y, mean, rstd = backend.layer_norm(up(x), up(w), up(b), eps, **launch.get("fwd", {}))
    dx, dw, db = backend.layer_norm_backward(
        up(g), up(x), contract.dense(mean, (R,)), contract.dense(rstd, (R,)), up(w), True,
        **launch.get("bwd", {}))
    return [host(backend, t, s) for t, s in ((y, (R, C)), (mean, (R,)), (rstd, (R,)),
                                              (dx, (R, C)), (dw, (C,)), (db, (C,)))]


@st.composite
def problems(draw):
    rows, cols = draw(st.integers(1, 6)), draw(st.integers(1, 70))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    x = draw(views(shape=(rows, cols), dtype=dtype))
    g = draw(views(shape=(rows, cols), dtype=dtype))
    w = draw(st.none() | views(shape=(cols,), dtype=dtype))
    b = draw(st.none() | views(shape=(cols,), dtype=dtype))
    return x, w, b, g, draw(st.sampled_from([1e-5, 1e-2])), dtype


@given(problems(), st.sampled_from([{}, {"fwd": {"rows": 1}, "bwd": {"rows": 3,
                                                                        "column_block": 8}}]))
def test_cuda_matches_cpu(problem, launch):
    x, w, b, g, eps, dtype = problem
    got = run(cuda, x, w, b, g, eps, launch)
    want = run(cpu, x, w, b, g, eps, {})
    # A rounding difference in the mean (or in sum(g*w)) reaches y, dx and dw multiplied by
    # rstd, which is up to 1/sqrt(eps) for a near-constant row: scale atol by it.
    scale = max(1.0, float(want[2].max()))
    for a, e in zip(got, want):
        assert a.dtype == dtype
        t = tol(dtype)
        np.testing.assert_allclose(a, e, rtol=t["rtol"], atol=t["atol"] * scale)


def np_layer_norm(x, w, b, eps):
    """PyTorch's documented formula, in float64: biased variance, eps inside the root."""
    x = x.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def test_production_launch_and_welford_accuracy():
    """Production launch (4 warps per block, 256-thread column blocks) on rows longer than a
    warp's stride and a grid of several column blocks. The features sit at 1e3 with unit
    spread, where E[x^2] - E[x]^2 in float32 loses most digits of the variance (x^2 ~ 1e6,
    ulp 0.06); Welford keeps y within 2e-4 of the float64 formula."""
    rng = np.random.default_rng(0)
    rows, cols = 9, 300
    x = (1000 + rng.standard_normal((rows, cols))).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    g = rng.standard_normal((rows, cols)).astype(np.float32)
    arrays_ = dict(x=x, w=w, b=b, g=g)
    spec = {k: contract.dense(cuda.from_numpy(v), v.shape) for k, v in arrays_.items()}
    y, mean, rstd = LN.layer_norm(spec["x"], spec["w"], spec["b"], 1e-5, rows=4)
    dx, dw, db = LN.layer_norm_backward(spec["g"], spec["x"], contract.dense(mean, (rows,)),
                                        contract.dense(rstd, (rows,)), spec["w"], True, rows=4,
                                        column_block=256)
    got_y = host(cuda, y, (rows, cols))
    np.testing.assert_allclose(got_y, np_layer_norm(x, w, b, 1e-5), atol=2e-4)
    cpu_specs = {k: contract.dense(cpu.from_numpy(v), v.shape) for k, v in arrays_.items()}
    cy, cm, cr = cpu.layer_norm(cpu_specs["x"], cpu_specs["w"], cpu_specs["b"], 1e-5)
    cdx, cdw, cdb = cpu.layer_norm_backward(cpu_specs["g"], cpu_specs["x"],
                                            contract.dense(cm, (rows,)),
                                            contract.dense(cr, (rows,)), cpu_specs["w"], True)
    np.testing.assert_allclose(host(cuda, mean, (rows,)), cm, rtol=1e-6)
    np.testing.assert_allclose(host(cuda, rstd, (rows,)), cr, rtol=1e-4)
    np.testing.assert_allclose(host(cuda, dx, (rows, cols)), cdx.reshape(rows, cols),
                               rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(host(cuda, dw, (cols,)), cdw, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(host(cuda, db, (cols,)), cdb, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,normalized,affine,bias", [
    ((2, 3, 4), (4,), True, True),
    ((2, 3, 4), (3, 4), True, True),
    ((3, 5), 5, True, False),
    ((2, 1, 6), (6,), False, False),
])
def test_gradcheck(shape, normalized, affine, bias):
    rng = np.random.default_rng(1)
    norm = (normalized,) if isinstance(normalized, int) else normalized

    def t(s):
        return mg.tensor(rng.standard_normal(s), dtype=mg.float64, requires_grad=True)

    inputs = [t(shape), t(norm) if affine else None, t(norm) if bias else None]
    assert gradcheck(lambda x, w, b: F.layer_norm(x, normalized, w, b, eps=1e-3), inputs)
    # A non-contiguous input (the primitive gets one dense copy).
    assert gradcheck(lambda x: F.layer_norm(x.transpose(0, -1), shape[0]), [t(shape)])


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_module_matches_pytorch_formula(device):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 3, 10)) * 3 + 2).astype(np.float32)
    ln = nn.LayerNorm(10, eps=1e-3).to(device)
    assert list(ln.state_dict()) == ["weight", "bias"]
    assert tuple(ln.weight.shape) == (10,) and ln.weight.detach().numpy().tolist() == [1.0] * 10
    w, b = rng.standard_normal(10).astype(np.float32), rng.standard_normal(10).astype(np.float32)
    ln.load_state_dict({"weight": mg.tensor(w), "bias": mg.tensor(b)})
    xt = mg.tensor(x, device=device, requires_grad=True)
    y = ln(xt)
    assert y.device == device and tuple(y.shape) == (4, 3, 10)
    np.testing.assert_allclose(y.detach().numpy(), np_layer_norm(x, w, b, 1e-3), atol=1e-5)
    g = rng.standard_normal((4, 3, 10)).astype(np.float32)
    (y * mg.tensor(g, device=device)).sum().backward()
    xhat = np_layer_norm(x, 1.0, 0.0, 1e-3)
    np.testing.assert_allclose(ln.bias.grad.numpy(), g.sum((0, 1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ln.weight.grad.numpy(), (g * xhat).sum((0, 1)), rtol=1e-4,
                               atol=1e-5)
    assert xt.grad is not None and tuple(xt.grad.shape) == (4, 3, 10)


def test_module_options_repr_and_errors():
    assert repr(nn.LayerNorm((2, 3))) == ("LayerNorm((2, 3), eps=1e-05, elementwise_affine=True, "
                                          "bias=True)")
    assert repr(nn.LayerNorm(4, elementwise_affine=False)).endswith("affine=False, bias=False)")
    plain = nn.LayerNorm(4, elementwise_affine=False)
    assert plain.weight is None and plain.bias is None and plain.state_dict() == {}
    assert list(nn.LayerNorm(4, bias=False).state_dict()) == ["weight"]
    y = plain(mg.tensor([[1.0, 2.0, 3.0, 4.0]])).numpy()
    np.testing.assert_allclose(y, [(np.arange(1, 5) - 2.5) / np.sqrt(1.25 + 1e-5)], rtol=1e-6)
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with "
                                           r"shape \[\*, 4\], but got input of size\[2, 3\]"):
        nn.LayerNorm(4)(mg.zeros(2, 3))
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape as "
                                           "normalized_shape"):
        F.layer_norm(mg.zeros(2, 3), (3,), weight=mg.ones(2))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        nn.LayerNorm(3)(mg.zeros(2, 3, device="cuda"))
    with pytest.raises(RuntimeError, match="expected a floating point input"):
        F.layer_norm(mg.zeros(2, 3, dtype=mg.int64), 3)


def test_empty_batch():
    for device in ("cpu", "cuda"):
        x = mg.zeros(0, 5, device=device, requires_grad=True)
        ln = nn.LayerNorm(5).to(device)
        y = ln(x)
        y.sum().backward()
        assert tuple(y.shape) == (0, 5) and ln.weight.grad.numpy().tolist() == [0.0] * 5
