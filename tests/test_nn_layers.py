"""Layers of ``minigpu.nn``: forward against NumPy transcriptions of PyTorch's definitions,
every gradient by ``gradcheck`` (float64, cpu), cuda against cpu (float32, under the simulator
when NUMBA_ENABLE_CUDASIM=1), initialisation, and the errors users see.

Tolerances: float64 forward checks 1e-10; cuda vs cpu float32 rtol 1e-4, atol 1e-5 (the two
backends sum in different orders).
"""
import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn.functional as F
from minigpu import nn
from minigpu.autograd import gradcheck
from minigpu.nn import init

RTOL32, ATOL32 = 1e-4, 1e-5


def t64(a, requires_grad=False):
    return mg.tensor(np.asarray(a, dtype=np.float64), dtype=mg.float64,
                     requires_grad=requires_grad)


def module_gradcheck(module, *inputs, **kwargs):
    """gradcheck of ``module(*inputs)`` with respect to the inputs that require grad and to
    every parameter of the module (swapped in as plain float64 leaves)."""
    module.double()
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().requires_grad_() for _, p in module.named_parameters()]
    slots = []
    for name in names:
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            owner = owner._modules[part]
        slots.append((owner, leaf))
    saved = [owner._parameters[leaf] for owner, leaf in slots]

    def fn(*args):
        xs, ps = args[:len(inputs)], args[len(inputs):]
        for (owner, leaf), p in zip(slots, ps):
            owner._parameters[leaf] = p
        try:
            return module(*xs)
        finally:
            for (owner, leaf), p in zip(slots, saved):
                owner._parameters[leaf] = p

    return gradcheck(fn, [*inputs, *params], **kwargs)


def cuda_matches_cpu(make, x, train=True, seed=0):
    """The same module (weights copied through state_dict) on cpu and on cuda: outputs, input
    gradient, parameter gradients and buffers agree in float32."""
    mg.manual_seed(seed)
    m_cpu = make()
    m_cuda = make()
    m_cuda.load_state_dict(m_cpu.state_dict())
    m_cuda.to("cuda")
    rng = np.random.default_rng(seed)
    results = {}
    v = None
    for device, m in (("cpu", m_cpu), ("cuda", m_cuda)):
        m.train(train)
        xt = mg.tensor(x, device=device, requires_grad=True)
        mg.manual_seed(seed + 1)  # dropout draws the same mask on both devices
        y = m(xt)
        if v is None:
            v = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        (y * mg.tensor(v, device=device)).sum().backward()
        results[device] = ([y.detach().numpy(), xt.grad.numpy()] +
                           [p.grad.numpy() for p in m.parameters()] +
                           [b.numpy() for b in m.buffers()])
    assert len(results["cpu"]) == len(results["cuda"])
    for a, b in zip(results["cpu"], results["cuda"]):
        np.testing.assert_allclose(b, a, rtol=RTOL32, atol=ATOL32)


# --- NumPy references (PyTorch's definitions) ------------------------------------------------
def np_conv2d(x, w, b, stride, padding, dilation):
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, oc, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                       j * dw:j * dw + sw * (ow - 1) + 1:sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out if b is None else out + b[None, :, None, None]


def np_pool2d(x, kernel, stride, padding, kind, count_include_pad=True):
    """(values, flat argmax h*W + w) for max; values for avg."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    out = np.zeros((n, c, oh, ow))
    arg = np.zeros((n, c, oh, ow), dtype=np.int64)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - ph, j * sw - pw
            rows = [r for r in range(r0, r0 + kh) if 0 <= r < h]
            cols = [q for q in range(c0, c0 + kw) if 0 <= q < w]
            win = x[:, :, rows][:, :, :, cols].reshape(n, c, -1)
            if kind == "max":
                k = win.argmax(-1)
                out[:, :, i, j] = win.max(-1)
                arg[:, :, i, j] = np.array(rows)[k // len(cols)] * w + np.array(cols)[k % len(cols)]
            else:
                div = kh * kw if count_include_pad else len(rows) * len(cols)
                out[:, :, i, j] = win.sum(-1) / div
    return (out, arg) if kind == "max" else out


def np_adaptive_avg(x, oh, ow):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        r0, r1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            c0, c1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
    return out


# --- Linear ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (4,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward_and_gradients(shape, bias):
    rng = np.random.default_rng(0)
    m = nn.Linear(4, 3, bias=bias).double()
    x = rng.standard_normal(shape)
    w = m.weight.detach().numpy()
    expected = x @ w.T + (m.bias.detach().numpy() if bias else 0)
    np.testing.assert_allclose(m(t64(x)).detach().numpy(), expected, rtol=1e-12)
    assert module_gradcheck(m, t64(x, True))


def test_linear_default_init_matches_pytorch_bounds():
    mg.manual_seed(0)
    m = nn.Linear(50, 20)
    bound = 1 / math.sqrt(50)  # kaiming_uniform_(a=sqrt(5)) => 1/sqrt(fan_in); bias the same
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.1 * bound
    assert m.weight.requires_grad and isinstance(m.weight, nn.Parameter)
    assert m.weight.dtype == mg.float32


# --- Conv2d ---------------------------------------------------------------------------------------
@st.composite
def conv_geometry(draw):
    n, c, oc = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    assume(h + 2 * padding[0] >= dilation[0] * (kh - 1) + 1)
    assume(w + 2 * padding[1] >= dilation[1] * (kw - 1) + 1)
    return (n, c, h, w), (oc, c, kh, kw), stride, padding, dilation


@given(conv_geometry(), st.booleans(), st.integers(0, 2 ** 16))
def test_conv2d_matches_numpy_reference(geometry, bias, seed):
    x_shape, w_shape, stride, padding, dilation = geometry
    rng = np.random.default_rng(seed)
    x, w, b = (rng.standard_normal(x_shape), rng.standard_normal(w_shape),
               rng.standard_normal(w_shape[0]) if bias else None)
    got = F.conv2d(t64(x), t64(w), None if b is None else t64(b), stride, padding, dilation)
    np.testing.assert_allclose(got.numpy(), np_conv2d(x, w, b, stride, padding, dilation),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kwargs", [
    dict(stride=1, padding=0),
    dict(stride=2, padding=1),
    dict(stride=(1, 2), padding=(2, 0), dilation=(2, 1)),
    dict(stride=1, padding="same", bias=False),
])
def test_conv2d_gradcheck(kwargs):
    rng = np.random.default_rng(1)
    m = nn.Conv2d(2, 3, (3, 2) if kwargs.get("dilation") else 3, **kwargs)
    x = t64(rng.standard_normal((2, 2, 5, 5)), True)
    assert module_gradcheck(m, x)


def test_conv2d_unbatched_input():
    rng = np.random.default_rng(2)
    m = nn.Conv2d(2, 3, 3, padding=1).double()
    x = rng.standard_normal((2, 4, 4))
    got = m(t64(x)).detach().numpy()
    expected = np_conv2d(x[None], m.weight.detach().numpy(), m.bias.detach().numpy(),
                         (1, 1), (1, 1), (1, 1))[0]
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_conv2d_default_init_bounds():
    mg.manual_seed(3)
    m = nn.Conv2d(3, 8, 5)
    bound = 1 / math.sqrt(3 * 5 * 5)
    assert tuple(m.weight.shape) == (8, 3, 5, 5) and tuple(m.bias.shape) == (8,)
    assert np.abs(m.weight.detach().numpy()).max() <= bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound


# --- pooling -------------------------------------------------------------------------------------
@st.composite
def pool_geometry(draw):
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2)))
    h, w = draw(st.integers(kh, 7)), draw(st.integers(kw, 7))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 2)), h, w), (kh, kw), stride, padding


@given(pool_geometry(), st.integers(0, 2 ** 16))
def test_max_pool2d_values_and_indices_match_numpy(geometry, seed):
    shape, kernel, stride, padding = geometry
    x = np.random.default_rng(seed).standard_normal(shape)
    out, idx = F.max_pool2d(t64(x), kernel, stride, padding, return_indices=True)
    ref, ref_idx = np_pool2d(x, kernel, stride, padding, "max")
    np.testing.assert_array_equal(out.numpy(), ref)
    np.testing.assert_array_equal(idx.numpy(), ref_idx)
    assert idx.dtype == mg.int64


@given(pool_geometry(), st.booleans(), st.integers(0, 2 ** 16))
def test_avg_pool2d_matches_numpy(geometry, count_include_pad, seed):
    shape, kernel, stride, padding = geometry
    x = np.random.default_rng(seed).standard_normal(shape)
    out = F.avg_pool2d(t64(x), kernel, stride, padding, count_include_pad=count_include_pad)
    np.testing.assert_allclose(out.numpy(),
                               np_pool2d(x, kernel, stride, padding, "avg", count_include_pad),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: nn.MaxPool2d(2),
    lambda: nn.MaxPool2d(3, stride=2, padding=1),
    lambda: nn.AvgPool2d(2),
    lambda: nn.AvgPool2d((3, 2), stride=(2, 1), padding=1, count_include_pad=False),
    lambda: nn.AvgPool2d(2, divisor_override=3),
    lambda: nn.AdaptiveAvgPool2d((2, 3)),      # divisible: an avg_pool
    lambda: nn.AdaptiveAvgPool2d((3, 2)),      # uneven windows: the matmul composition
    lambda: nn.AdaptiveAvgPool2d(1),
], ids=["max2", "max3s2p1", "avg2", "avg_nopad", "avg_div", "adapt_div", "adapt_odd",
        "adapt_1"])
def test_pool_gradcheck(make):
    x = t64(np.random.default_rng(4).standard_normal((2, 2, 4, 6)), True)
    assert module_gradcheck(make(), x)


@pytest.mark.parametrize("out", [(1, 1), (2, 3), (3, 4), (4, 6), (5, 7), (None, 2)])
def test_adaptive_avg_pool2d_matches_pytorch_windows(out):
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 6))
    oh = 4 if out[0] is None else out[0]
    np.testing.assert_allclose(F.adaptive_avg_pool2d(t64(x), out).numpy(),
                               np_adaptive_avg(x, oh, out[1]), rtol=1e-12, atol=1e-12)


def test_pool_unbatched_and_errors():
    x = t64(np.arange(16.0).reshape(1, 4, 4))
    assert tuple(nn.MaxPool2d(2)(x).shape) == (1, 2, 2)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.avg_pool2d(x, 5)
    with pytest.raises(RuntimeError, match="3D or 4D"):
        F.max_pool2d(t64(np.zeros((4, 4))), 2)
    with pytest.raises(RuntimeError, match=r"AvgPool2d expected 3D \(unbatched\) or 4D "
                                           r"\(batched\) input, got input of shape \(4, 4\)"):
        nn.AvgPool2d(2)(t64(np.zeros((4, 4))))


# --- BatchNorm ------------------------------------------------------------------------------------
def np_batch_norm_train(x, w, b, eps=1e-5):
    dims = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mean, var = x.mean(dims), x.var(dims)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return y * w.reshape(shape) + b.reshape(shape), mean, x.var(dims, ddof=1)


@pytest.mark.parametrize("layer,shape", [(nn.BatchNorm1d, (4, 3)), (nn.BatchNorm1d, (3, 3, 2)),
                                         (nn.BatchNorm2d, (2, 3, 2, 2))])
def test_batch_norm_training_forward_and_running_stats(layer, shape):
    rng = np.random.default_rng(6)
    m = layer(3, momentum=0.3).double()
    init.normal_(m.weight)
    init.normal_(m.bias)
    x1, x2 = rng.standard_normal(shape), rng.standard_normal(shape) * 2 + 1
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    rm, rv = np.zeros(3), np.ones(3)
    for x in (x1, x2):
        y = m(t64(x))
        ref, mean, unbiased = np_batch_norm_train(x, w, b)
        np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-10, atol=1e-10)
        rm, rv = 0.7 * rm + 0.3 * mean, 0.7 * rv + 0.3 * unbiased
    np.testing.assert_allclose(m.running_mean.numpy(), rm, rtol=1e-10)
    np.testing.assert_allclose(m.running_var.numpy(), rv, rtol=1e-10)
    assert m.num_batches_tracked.item() == 2 and m.num_batches_tracked.dtype == mg.int64
    m.eval()  # evaluation: the running statistics, not the batch's
    shape_c = (1, 3) + (1,) * (len(shape) - 2)
    expected = ((x1 - rm.reshape(shape_c)) / np.sqrt(rv.reshape(shape_c) + 1e-5) *
                w.reshape(shape_c) + b.reshape(shape_c))
    np.testing.assert_allclose(m(t64(x1)).detach().numpy(), expected, rtol=1e-10)
    assert m.num_batches_tracked.item() == 2


def test_batch_norm_cumulative_average_when_momentum_is_none():
    rng = np.random.default_rng(7)
    m = nn.BatchNorm1d(2, momentum=None).double()
    xs = [rng.standard_normal((4, 2)) for _ in range(3)]
    for x in xs:
        m(t64(x))
    np.testing.assert_allclose(m.running_mean.numpy(), np.mean([x.mean(0) for x in xs], 0),
                               rtol=1e-10)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("kwargs", [{}, dict(affine=False), dict(bias=False),
                                    dict(track_running_stats=False)])
def test_batch_norm2d_gradcheck(train, kwargs):
    rng = np.random.default_rng(8)
    m = nn.BatchNorm2d(2, **kwargs)
    if m.running_mean is not None:
        m.running_mean.copy_(mg.tensor([0.3, -0.2]))
        m.running_var.copy_(mg.tensor([0.5, 2.0]))
    if m.weight is not None:
        init.uniform_(m.weight, 0.5, 1.5)
    m.train(train)
    x = t64(rng.standard_normal((3, 2, 2, 2)), True)
    assert module_gradcheck(m, x)


def test_batch_norm1d_gradcheck_3d_input():
    m = nn.BatchNorm1d(3)
    assert module_gradcheck(m, t64(np.random.default_rng(9).standard_normal((2, 3, 2)), True))


def test_batch_norm_errors():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input \(got 3D input\)"):
        nn.BatchNorm2d(3)(mg.zeros(2, 3, 4))
    with pytest.raises(ValueError, match="BatchNorm1d: expected 2D or 3D input"):
        nn.BatchNorm1d(3)(mg.zeros(2, 3, 4, 4))
    with pytest.raises(ValueError, match="BatchNorm2d expected input with 16 channels, got 8"):
        nn.BatchNorm2d(16)(mg.zeros(2, 8, 2, 2))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        nn.BatchNorm1d(3)(mg.zeros(1, 3))


# --- Dropout --------------------------------------------------------------------------------------
def test_dropout_train_eval_and_scaling():
    mg.manual_seed(0)
    m = nn.Dropout(0.25)
    x = mg.ones(4000)
    y = m(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.03
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    m.eval()
    assert m(x) is x
    assert nn.Dropout(0.0)(x) is x
    assert not nn.Dropout(1.0)(x).numpy().any()
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout(1.5)


def test_dropout_gradient_uses_the_same_mask():
    x = t64(np.random.default_rng(10).standard_normal((3, 4)), True)

    def fn(x):
        mg.manual_seed(5)  # the same mask on every evaluation
        return F.dropout(x, 0.4)

    assert gradcheck(fn, [x])
    mg.manual_seed(5)
    y = F.dropout(x, 0.4)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (y.detach().numpy() != 0) / 0.6)


def test_dropout_mask_is_the_same_on_cpu_and_cuda():
    masks = []
    for device in ("cpu", "cuda"):
        mg.manual_seed(11)
        masks.append(F.dropout(mg.ones(64, device=device), 0.5).numpy())
    np.testing.assert_array_equal(masks[0], masks[1])


# --- activations and shape layers -----------------------------------------------------------------
def _np_softmax(x, dim):
    e = np.exp(x - x.max(dim, keepdims=True))
    return e / e.sum(dim, keepdims=True)


ACTIVATIONS = [
    (nn.ReLU(), lambda x: np.maximum(x, 0)),
    (nn.LeakyReLU(0.2), lambda x: np.where(x > 0, x, 0.2 * x)),
    (nn.LeakyReLU(), lambda x: np.where(x > 0, x, 0.01 * x)),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
    (nn.Softmax(dim=1), lambda x: _np_softmax(x, 1)),
    (nn.Softmax(dim=0), lambda x: _np_softmax(x, 0)),
    (nn.LogSoftmax(dim=1), lambda x: np.log(_np_softmax(x, 1))),
    (nn.Flatten(), lambda x: x.reshape(x.shape[0], -1)),
    (nn.Flatten(0, 1), lambda x: x.reshape(-1, *x.shape[2:])),
    (nn.Identity(3, unused=True), lambda x: x),
]


@pytest.mark.parametrize("module,reference", ACTIVATIONS,
                         ids=[repr(m) for m, _ in ACTIVATIONS])
def test_activation_forward_and_gradcheck(module, reference):
    x = np.random.default_rng(12).standard_normal((3, 2, 2))
    x[np.abs(x) < 1e-3] = 0.5  # keep relu kinks away from the finite-difference step
    np.testing.assert_allclose(module(t64(x)).detach().numpy(), reference(x), rtol=1e-12,
                               atol=1e-14)
    assert gradcheck(module, [t64(x, True)])


# --- cuda against cpu -----------------------------------------------------------------------------
CUDA_LAYERS = [
    ("Linear", lambda: nn.Linear(5, 3), (2, 5), True),
    ("Conv2d", lambda: nn.Conv2d(2, 3, 3, stride=1, padding=1), (2, 2, 4, 4), True),
    ("Conv2d_strided", lambda: nn.Conv2d(1, 2, (2, 3), stride=2, dilation=(1, 2), bias=False),
     (1, 1, 5, 6), True),
    ("MaxPool2d", lambda: nn.MaxPool2d(3, 2, 1), (1, 2, 5, 4), True),
    ("AvgPool2d", lambda: nn.AvgPool2d(2, padding=1, count_include_pad=False), (1, 2, 4, 3),
     True),
    ("AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d((2, 3)), (1, 2, 3, 4), True),
    ("BatchNorm1d", lambda: nn.BatchNorm1d(3), (4, 3), True),
    ("BatchNorm2d_train", lambda: nn.BatchNorm2d(2), (2, 2, 3, 3), True),
    ("BatchNorm2d_eval", lambda: nn.BatchNorm2d(2), (2, 2, 3, 3), False),
    ("Dropout", lambda: nn.Dropout(0.3), (4, 5), True),
    ("activations", lambda: nn.Sequential(nn.LeakyReLU(0.2), nn.Tanh(), nn.Sigmoid(),
                                          nn.ReLU(), nn.LogSoftmax(1), nn.Softmax(0),
                                          nn.Identity(), nn.Flatten()), (3, 4, 2), True),
]


@pytest.mark.parametrize("name,make,shape,train", CUDA_LAYERS, ids=[c[0] for c in CUDA_LAYERS])
def test_layer_cuda_matches_cpu(name, make, shape, train):
    x = np.random.default_rng(13).standard_normal(shape).astype(np.float32)
    cuda_matches_cpu(make, x, train=train)


# --- errors that name the layer and the shapes ----------------------------------------------------
def test_conv2d_errors():
    m = nn.Conv2d(3, 6, 5)
    with pytest.raises(RuntimeError, match=r"Conv2d expected input with 3 channels, got 4 "
                                           r"\(input shape \(1, 4, 32, 32\), weight shape "
                                           r"\(6, 3, 5, 5\)\)"):
        m(mg.zeros(1, 4, 32, 32))
    with pytest.raises(RuntimeError, match=r"Conv2d expected 3D \(unbatched\) or 4D"):
        m(mg.zeros(3, 32))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater than actual input"):
        m(mg.zeros(1, 3, 4, 4))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(4, 4, 3, groups=3)
    with pytest.raises(RuntimeError, match="conv2d expected input with 3 channels, got 2"):
        F.conv2d(mg.zeros(1, 2, 5, 5), mg.zeros(1, 3, 3, 3))
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv2d(mg.zeros(1, 3, 5, 5), mg.zeros(1, 3, 3, 3), stride=2, padding="same")


def test_linear_error_names_both_shapes():
    m = nn.Linear(784, 256)
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                                           r"\(4x100 and 784x256\).*in_features=784.*"
                                           r"\(4, 100\).*\(256, 784\)"):
        m(mg.zeros(4, 100))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied"):
        F.linear(mg.zeros(4, 100), mg.zeros(256, 784))


# --- init -----------------------------------------------------------------------------------------
def test_init_functions_fill_in_place_with_pytorch_formulas():
    mg.manual_seed(0)
    w = nn.Parameter(mg.empty(200, 300))
    fan_in, fan_out = 300, 200
    assert init._calculate_fan_in_and_fan_out(w) == (fan_in, fan_out)
    assert init._calculate_fan_in_and_fan_out(mg.empty(6, 3, 5, 5)) == (75, 150)
    checks = [
        (lambda t: init.uniform_(t, -2, 3), 0.5, 5 / math.sqrt(12), (-2, 3)),
        (lambda t: init.normal_(t, 1.0, 0.5), 1.0, 0.5, None),
        (lambda t: init.kaiming_uniform_(t, a=math.sqrt(5)), 0, 1 / math.sqrt(3 * fan_in),
         (-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))),
        (lambda t: init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"), 0,
         math.sqrt(2 / fan_out), (-math.sqrt(6 / fan_out), math.sqrt(6 / fan_out))),
        (lambda t: init.kaiming_normal_(t, nonlinearity="relu"), 0, math.sqrt(2 / fan_in), None),
        (lambda t: init.xavier_uniform_(t, gain=2.0), 0, 2 * math.sqrt(2 / (fan_in + fan_out)),
         (-2 * math.sqrt(6 / (fan_in + fan_out)), 2 * math.sqrt(6 / (fan_in + fan_out)))),
        (lambda t: init.xavier_normal_(t), 0, math.sqrt(2 / (fan_in + fan_out)), None),
    ]
    for fill, mean, std, bounds in checks:
        assert fill(w) is w
        a = w.detach().numpy()
        assert abs(a.mean() - mean) < 0.02 * max(std, 1) + 4 * std / math.sqrt(a.size)
        assert abs(a.std() - std) < 0.02 * std
        if bounds:
            assert bounds[0] <= a.min() and a.max() <= bounds[1]
        assert w.requires_grad and w.dtype == mg.float32
    for fill, value in ((init.zeros_, 0), (init.ones_, 1), (lambda t: init.constant_(t, 2.5),
                                                             2.5)):
        fill(w)
        assert (w.detach().numpy() == value).all()
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(mg.empty(5))
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    assert init.calculate_gain("tanh") == 5 / 3 and init.calculate_gain("conv2d") == 1


def test_same_seed_gives_same_weights_on_cpu_and_cuda():
    weights = []
    for device in ("cpu", "cuda"):
        mg.manual_seed(42)
        m = nn.Linear(6, 4, device=device)
        c = nn.Conv2d(2, 3, 3, device=device)
        assert m.weight.device == device and c.bias.device == device
        weights.append([t.numpy() for t in (m.weight.detach(), m.bias.detach(),
                                             c.weight.detach(), c.bias.detach())])
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_dropout2d_zeroes_whole_channels():
    x = mg.ones(4, 6, 3, 3)
    out = mg.nn.Dropout2d(0.5)(x).numpy()
    per_channel = out.reshape(4, 6, 9)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(axis=2) == per_channel.max(axis=2)).all()  # a channel is all or none
    unbatched = mg.nn.Dropout2d(0.5)(mg.ones(6, 3, 3)).numpy().reshape(6, 9)
    assert (unbatched.min(axis=1) == unbatched.max(axis=1)).all()
    layer = mg.nn.Dropout2d(0.5).eval()
    assert layer(x) is x
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        rows = mg.nn.Dropout2d(0.5)(mg.ones(8, 5)).numpy()
    assert (rows.min(axis=1) == rows.max(axis=1)).all()  # as torch: each row is a channel
    assert not mg.nn.Dropout2d(1.0)(x).numpy().any()


def test_dropout2d_gradient_is_the_mask():
    x = mg.randn(2, 3, 2, 2, requires_grad=True)
    mg.manual_seed(0)
    out = mg.nn.Dropout2d(0.25)(x)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), (out / x).detach().numpy(), rtol=1e-6)
