"""Conv1d and ConvTranspose2d: values against direct NumPy loops on cpu and cuda, float64
gradcheck, PyTorch's parameter layout, state_dict keys, repr and errors."""
import numpy as np
import pytest

import minigpu as mg
import minigpu.nn as nn
import minigpu.nn.functional as F

DEVICES = ("cpu", "cuda")


def conv_transpose2d_ref(x, w, b, stride, padding, output_padding, dilation):
    """The definition: every input pixel scatters weight * value into the output."""
    n, cin, h, wd = x.shape
    _, cout, kh, kw = w.shape
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    full = np.zeros((n, cout, oh + 2 * ph + sh + dh * kh, ow + 2 * pw + sw + dw * kw))
    for i in range(h):
        for j in range(wd):
            for ki in range(kh):
                for kj in range(kw):
                    full[:, :, i * sh + ki * dh, j * sw + kj * dw] += \
                        x[:, :, i, j] @ w[:, :, ki, kj]
    out = full[:, :, ph:ph + oh, pw:pw + ow]
    return out + (0 if b is None else b[None, :, None, None])


def conv1d_ref(x, w, b, stride, padding, dilation):
    n, c, length = x.shape
    oc, _, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
    ol = (length + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, oc, ol))
    for o in range(ol):
        window = xp[:, :, o * stride: o * stride + dilation * (k - 1) + 1: dilation]
        out[:, :, o] = np.einsum("nck,ock->no", window, w)
    return out + (0 if b is None else b[None, :, None])


TRANSPOSED = [  # (stride, padding, output_padding, dilation, kernel)
    ((1, 1), (0, 0), (0, 0), (1, 1), (3, 3)),
    ((2, 2), (1, 1), (0, 0), (1, 1), (4, 4)),   # the DCGAN upsampling block
    ((2, 3), (1, 0), (1, 2), (1, 1), (3, 2)),
    ((2, 1), (0, 1), (1, 0), (2, 2), (2, 3)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cfg", TRANSPOSED, ids=str)
def test_conv_transpose2d_matches_the_definition(cfg, device):
    stride, padding, output_padding, dilation, kernel = cfg
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 3, 4, 5))
    w = rng.normal(size=(3, 2, *kernel))
    b = rng.normal(size=2)
    want = conv_transpose2d_ref(x, w, b, stride, padding, output_padding, dilation)
    for dtype, tol in ((mg.float64, 1e-10), (mg.float32, 1e-4)):
        got = F.conv_transpose2d(mg.tensor(x, dtype=dtype, device=device),
                                 mg.tensor(w, dtype=dtype, device=device),
                                 mg.tensor(b, dtype=dtype, device=device), stride, padding,
                                 output_padding, 1, dilation)
        assert got.device.type == device and got.dtype == dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("cfg", TRANSPOSED, ids=str)
def test_conv_transpose2d_gradcheck(cfg):
    stride, padding, output_padding, dilation, kernel = cfg
    rng = np.random.default_rng(1)
    x = mg.tensor(rng.normal(size=(2, 2, 3, 3)), dtype=mg.float64, requires_grad=True)
    w = mg.tensor(rng.normal(size=(2, 3, *kernel)), dtype=mg.float64, requires_grad=True)
    b = mg.tensor(rng.normal(size=3), dtype=mg.float64, requires_grad=True)
    assert mg.autograd.gradcheck(
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride, padding, output_padding, 1,
                                           dilation), (x, w, b))


def test_conv_transpose2d_cuda_gradients_match_cpu():
    rng = np.random.default_rng(2)
    host = [rng.normal(size=(2, 3, 4, 4)), rng.normal(size=(3, 2, 4, 4)), rng.normal(size=2)]
    grads = []
    for device in DEVICES:
        ts = [mg.tensor(h, dtype=mg.float32, device=device, requires_grad=True) for h in host]
        out = F.conv_transpose2d(*ts, stride=2, padding=1)
        (out * out).sum().backward()
        grads.append([t.grad.numpy() for t in ts])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv_transpose2d_is_the_adjoint_of_conv2d():
    """<conv2d(y, W), x> == <y, conv_transpose2d(x, W)>: the transpose, as its name says."""
    rng = np.random.default_rng(3)
    w = mg.tensor(rng.normal(size=(3, 2, 3, 3)), dtype=mg.float64)   # conv2d: 2 -> 3 channels
    y = mg.tensor(rng.normal(size=(1, 2, 7, 7)), dtype=mg.float64)
    x = mg.tensor(rng.normal(size=(1, 3, 4, 4)), dtype=mg.float64)
    lhs = (F.conv2d(y, w, stride=2, padding=1) * x).sum().item()
    rhs = (y * F.conv_transpose2d(x, w, stride=2, padding=1)).sum().item()
    assert abs(lhs - rhs) < 1e-9


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("stride,padding,dilation", [(1, 0, 1), (2, 1, 1), (1, 2, 2), (3, 0, 2)])
def test_conv1d_matches_the_definition(stride, padding, dilation, device):
    rng = np.random.default_rng(4)
    x, w, b = rng.normal(size=(2, 3, 11)), rng.normal(size=(4, 3, 3)), rng.normal(size=4)
    got = F.conv1d(*(mg.tensor(a, dtype=mg.float64, device=device) for a in (x, w, b)),
                   stride=stride, padding=padding, dilation=dilation)
    np.testing.assert_allclose(got.numpy(), conv1d_ref(x, w, b, stride, padding, dilation),
                               rtol=1e-10, atol=1e-10)


def test_conv1d_gradcheck_and_same_padding():
    rng = np.random.default_rng(5)
    x = mg.tensor(rng.normal(size=(2, 2, 6)), dtype=mg.float64, requires_grad=True)
    w = mg.tensor(rng.normal(size=(3, 2, 3)), dtype=mg.float64, requires_grad=True)
    b = mg.tensor(rng.normal(size=3), dtype=mg.float64, requires_grad=True)
    assert mg.autograd.gradcheck(lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
                                 (x, w, b))
    assert F.conv1d(x, w, padding="same").shape == (2, 3, 6)
    assert F.conv1d(x[0], w).shape == (3, 4)  # unbatched


def test_layers_layout_state_dict_repr_and_init():
    c1 = nn.Conv1d(3, 4, 5, stride=2, padding=1)
    assert c1.weight.shape == (4, 3, 5) and c1.bias.shape == (4,)
    assert list(c1.state_dict()) == ["weight", "bias"]
    assert repr(c1) == "Conv1d(3, 4, kernel_size=(5,), stride=(2,), padding=(1,))"
    assert nn.Conv1d(3, 4, 5)(mg.randn(2, 3, 9)).shape == (2, 4, 5)
    t = nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1, output_padding=1, bias=False)
    assert t.weight.shape == (4, 2, 4, 4) and t.bias is None
    assert list(t.state_dict()) == ["weight"]
    assert repr(t) == ("ConvTranspose2d(4, 2, kernel_size=(4, 4), stride=(2, 2), "
                       "padding=(1, 1), output_padding=(1, 1), bias=False)")
    assert t(mg.randn(1, 4, 3, 3)).shape == (1, 2, 7, 7)
    assert t(mg.randn(4, 3, 3)).shape == (2, 7, 7)
    # PyTorch's init: fan_in of a transposed weight is out_channels * kH * kW (dim 1)
    big = nn.ConvTranspose2d(2, 8, 3)
    assert np.abs(big.bias.detach().numpy()).max() <= 1 / np.sqrt(8 * 9)
    assert repr(nn.Conv2d(1, 2, 3)) == "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1))"


def test_errors():
    with pytest.raises(RuntimeError, match="expected input with 4 channels, got 3"):
        nn.ConvTranspose2d(4, 2, 3)(mg.randn(1, 3, 5, 5))
    with pytest.raises(RuntimeError, match="output padding must be smaller than either stride"):
        nn.ConvTranspose2d(4, 2, 3, output_padding=1)(mg.randn(1, 4, 5, 5))
    with pytest.raises(RuntimeError, match="expected 3D .unbatched. or 4D"):
        nn.ConvTranspose2d(4, 2, 3)(mg.randn(4, 5))
    with pytest.raises(ValueError, match="valid sizes range from"):
        nn.ConvTranspose2d(4, 2, 3)(mg.randn(1, 4, 5, 5), output_size=(8, 7))
    with pytest.raises(RuntimeError, match="expected 2D .unbatched. or 3D"):
        nn.Conv1d(3, 4, 3)(mg.randn(1, 3, 5, 5))
    with pytest.raises(RuntimeError, match="expected input with 3 channels, got 2"):
        nn.Conv1d(3, 4, 3)(mg.randn(1, 2, 5))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        nn.Conv1d(3, 4, 7)(mg.randn(1, 3, 5))
    with pytest.raises(RuntimeError, match="single integer value or a list of 1"):
        F.conv1d(mg.randn(1, 3, 5), mg.randn(4, 3, 3), stride=(1, 2))
