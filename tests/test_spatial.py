"""interpolate / Upsample, pad and one_hot against NumPy transcriptions of PyTorch's kernels,
on cpu and cuda, with float64 gradcheck, reprs and errors."""
import math

import numpy as np
import pytest

import minigpu as mg
import minigpu.nn as nn
import minigpu.nn.functional as F

DEVICES = ("cpu", "cuda")


def src_index(scale, dst, align_corners):
    """PyTorch's area_pixel_compute_source_index for linear modes."""
    if align_corners:
        return scale * dst
    return max(scale * (dst + 0.5) - 0.5, 0.0)


def scale_of(n_in, n_out, align_corners, factor=None):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / factor if factor else n_in / n_out


def bilinear_ref(x, oh, ow, align_corners, factors=(None, None)):
    """A loop transcription of upsample_bilinear2d's cpu kernel."""
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    sh = scale_of(h, oh, align_corners, factors[0])
    sw = scale_of(w, ow, align_corners, factors[1])
    for i in range(oh):
        r = src_index(sh, i, align_corners)
        h0 = int(r)
        h1 = h0 + (1 if h0 < h - 1 else 0)
        l1 = r - h0
        for j in range(ow):
            s = src_index(sw, j, align_corners)
            w0 = int(s)
            w1 = w0 + (1 if w0 < w - 1 else 0)
            m1 = s - w0
            out[:, :, i, j] = ((1 - l1) * ((1 - m1) * x[:, :, h0, w0] + m1 * x[:, :, h0, w1])
                               + l1 * ((1 - m1) * x[:, :, h1, w0] + m1 * x[:, :, h1, w1]))
    return out


def nearest_ref(x, oh, ow, factors=(None, None)):
    h, w = x.shape[2:]
    sh, sw = scale_of(h, oh, False, factors[0]), scale_of(w, ow, False, factors[1])
    rows = [min(int(math.floor(i * sh)), h - 1) for i in range(oh)]
    cols = [min(int(math.floor(j * sw)), w - 1) for j in range(ow)]
    return x[:, :, rows][:, :, :, cols]


CASES = [  # (input hw, kwargs, output hw, factors)
    ((3, 4), dict(scale_factor=2), (6, 8), (2, 2)),
    ((4, 5), dict(size=(7, 3)), (7, 3), (None, None)),
    ((5, 5), dict(scale_factor=(1.5, 0.6)), (7, 3), (1.5, 0.6)),
    ((1, 3), dict(size=(4, 1)), (4, 1), (None, None)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_interpolate_matches_pytorchs_kernels(case, device):
    (h, w), kwargs, (oh, ow), factors = case
    x = np.random.default_rng(0).normal(size=(2, 3, h, w))
    t = mg.tensor(x, dtype=mg.float64, device=device)
    got = F.interpolate(t, **kwargs)
    assert got.shape == (2, 3, oh, ow) and got.device.type == device
    np.testing.assert_array_equal(got.numpy(), nearest_ref(x, oh, ow, factors))
    for ac in (False, True):
        got = F.interpolate(t, mode="bilinear", align_corners=ac, **kwargs)
        np.testing.assert_allclose(got.numpy(), bilinear_ref(x, oh, ow, ac, factors),
                                   rtol=1e-12, atol=1e-12, err_msg=f"align_corners={ac}")
    f32 = F.interpolate(t.to(mg.float32), mode="bilinear", **kwargs)
    assert f32.dtype == mg.float32
    np.testing.assert_allclose(f32.numpy(), bilinear_ref(x, oh, ow, False, factors),
                               rtol=1e-5, atol=1e-5)


def test_linear_mode_is_bilinear_on_one_axis():
    x = np.random.default_rng(1).normal(size=(2, 3, 5))
    got = F.interpolate(mg.tensor(x, dtype=mg.float64), size=8, mode="linear")
    want = bilinear_ref(x[:, :, None, :], 1, 8, False)[:, :, 0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    assert F.interpolate(mg.tensor(x), scale_factor=2).shape == (2, 3, 10)


@pytest.mark.parametrize("mode,ac", [("nearest", None), ("bilinear", False), ("bilinear", True)])
def test_interpolate_gradcheck_and_cuda_backward(mode, ac):
    rng = np.random.default_rng(2)
    x = mg.tensor(rng.normal(size=(1, 2, 3, 4)), dtype=mg.float64, requires_grad=True)
    fn = lambda t: F.interpolate(t, size=(5, 7), mode=mode, align_corners=ac)  # noqa: E731
    assert mg.autograd.gradcheck(fn, (x,))
    g = rng.normal(size=(1, 2, 5, 7))
    grads = []
    for device in DEVICES:
        t = mg.tensor(x.detach().numpy(), device=device, requires_grad=True)
        fn(t).backward(mg.tensor(g, dtype=mg.float32, device=device))
        grads.append(t.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-5)


def test_upsample_module_and_errors():
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    assert repr(up) == "Upsample(scale_factor=2.0, mode='bilinear')"
    assert repr(nn.Upsample(size=(4, 4))) == "Upsample(size=(4, 4), mode='nearest')"
    assert up.state_dict() == {}
    assert up(mg.randn(1, 2, 3, 3)).shape == (1, 2, 6, 6)
    x = mg.randn(1, 1, 2, 2)
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="either size or scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="align_corners option can only be set"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(NotImplementedError, match="Got 3D input, but bilinear mode needs 4D"):
        F.interpolate(mg.randn(1, 2, 3), scale_factor=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="bicubic"):
        F.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(ValueError, match="same number of spatial dimensions"):
        F.interpolate(x, size=(2, 3, 4))


def pad_ref(x, pad, mode, value=0.0):
    width = [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        width[x.ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    mode = {"replicate": "edge", "circular": "wrap"}.get(mode, mode)
    kw = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x, width, mode=mode, **kw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("mode", ["constant", "replicate", "reflect", "circular"])
def test_pad_modes(mode, device):
    x = np.random.default_rng(3).normal(size=(2, 3, 4, 5))
    t = mg.tensor(x, dtype=mg.float64, device=device)
    for pad in [(1, 2), (2, 0, 1, 3), (0, 1, 3, 2, 1, 1)]:
        if mode != "constant" and len(pad) == 6:
            continue
        np.testing.assert_array_equal(F.pad(t, pad, mode=mode).numpy(), pad_ref(x, pad, mode))
    if mode == "constant":
        np.testing.assert_array_equal(F.pad(t, (1, 1), value=-2.5).numpy(),
                                      pad_ref(x, (1, 1), mode, -2.5))
        np.testing.assert_array_equal(F.pad(t, (-1, 2, 1, -2)).numpy(),
                                      np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2)))[:, :, :-2, 1:])


@pytest.mark.parametrize("mode", ["constant", "replicate", "reflect", "circular"])
def test_pad_gradcheck(mode):
    x = mg.tensor(np.random.default_rng(4).normal(size=(1, 2, 3, 4)), dtype=mg.float64,
                  requires_grad=True)
    assert mg.autograd.gradcheck(lambda t: F.pad(t, (2, 1, 1, 2), mode=mode), (x,))


def test_pad_errors():
    x = mg.randn(1, 2, 3)
    with pytest.raises(RuntimeError, match="divisible by 2"):
        F.pad(x, (1, 2, 3))
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        F.pad(x, (3, 3), mode="reflect")
    with pytest.raises(RuntimeError, match="doesn't take in value argument"):
        F.pad(x, (1, 1), mode="replicate", value=1.0)
    with pytest.raises(NotImplementedError, match="Unrecognised padding mode"):
        F.pad(x, (1, 1), mode="mirror")


@pytest.mark.parametrize("device", DEVICES)
def test_one_hot(device):
    idx = mg.tensor([[0, 3], [2, 1]], device=device)
    got = F.one_hot(idx)
    assert got.dtype == mg.int64 and got.shape == (2, 2, 4) and got.device.type == device
    np.testing.assert_array_equal(got.numpy(), np.eye(4, dtype=np.int64)[idx.numpy()])
    assert F.one_hot(mg.tensor([1]), num_classes=3).tolist() == [[0, 1, 0]]
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        F.one_hot(mg.tensor([3]), 3)
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        F.one_hot(mg.tensor([-1]))
    with pytest.raises(RuntimeError, match="only applicable to index tensor of type LongTensor"):
        F.one_hot(mg.tensor([1.0]))


@pytest.mark.parametrize("device", DEVICES)
def test_functional_dropout(device):
    x = mg.ones(2000, device=device)
    mg.manual_seed(0)
    y = F.dropout(x, p=0.25)
    kept = y.numpy() != 0
    assert 0.7 < kept.mean() < 0.8
    np.testing.assert_allclose(y.numpy()[kept], 1 / 0.75, rtol=1e-6)
    assert F.dropout(x, p=0.25, training=False) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout(x, p=1.5)
