"""Grouped transposed convolutions (``ConvTranspose2d(groups > 1)``, issue #26), with stride,
padding, output_padding and dilation, and ``forward(input, output_size)``: forward and the
input, weight and bias gradients against torch on both devices, float64 gradcheck, torch's
errors."""
import re

import numpy as np
import pytest

import minigpu as mg
from minigpu.autograd import gradcheck

torch = pytest.importorskip("torch")


CASES = [
    dict(c=4, oc=6, groups=2, k=3, stride=1, padding=0, output_padding=0, dilation=1),
    dict(c=4, oc=4, groups=4, k=4, stride=2, padding=1, output_padding=0, dilation=1),  # depthwise
    dict(c=6, oc=3, groups=3, k=3, stride=2, padding=1, output_padding=1, dilation=1),
    dict(c=4, oc=8, groups=2, k=(2, 3), stride=(2, 3), padding=(0, 1), output_padding=(1, 2),
         dilation=(1, 2)),
    dict(c=3, oc=2, groups=1, k=3, stride=3, padding=2, output_padding=2, dilation=2),
]


def _kwargs(case):
    return {k: case[k] for k in ("stride", "padding", "output_padding", "groups", "dilation")}


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose2d_matches_torch_forward_and_backward(device, case, bias):
    c, oc, groups = case["c"], case["oc"], case["groups"]
    k = case["k"] if isinstance(case["k"], tuple) else (case["k"], case["k"])
    rng = np.random.default_rng(c * 10 + oc)
    x = rng.standard_normal((2, c, 4, 5)).astype(np.float32)
    w = rng.standard_normal((c, oc // groups) + k).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32) if bias else None
    ref = [torch.tensor(a, requires_grad=True) if a is not None else None for a in (x, w, b)]
    want = torch.nn.functional.conv_transpose2d(*ref, **_kwargs(case))
    g = rng.standard_normal(tuple(want.shape)).astype(np.float32)
    want.backward(torch.tensor(g))
    mine = [mg.tensor(a, device=device, requires_grad=True) if a is not None else None
            for a in (x, w, b)]
    got = mg.nn.functional.conv_transpose2d(*mine, **_kwargs(case))
    got.backward(mg.tensor(g, device=device))
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-4,
                               atol=1e-4)
    for m, r in zip(mine, ref):
        if m is not None:
            np.testing.assert_allclose(m.grad.cpu().numpy(), r.grad.numpy(), rtol=1e-4,
                                       atol=1e-4)


@pytest.mark.parametrize("case", CASES[:4])
def test_grouped_conv_transpose2d_gradcheck(case):
    c, oc, groups = case["c"], case["oc"], case["groups"]
    k = case["k"] if isinstance(case["k"], tuple) else (case["k"], case["k"])
    rng = np.random.default_rng(7)
    x = mg.tensor(rng.standard_normal((1, c, 3, 3)), requires_grad=True)
    w = mg.tensor(rng.standard_normal((c, oc // groups) + k), requires_grad=True)
    b = mg.tensor(rng.standard_normal(oc), requires_grad=True)
    assert gradcheck(lambda x, w, b: mg.nn.functional.conv_transpose2d(x, w, b, **_kwargs(case)),
                     (x, w, b))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_grouped_conv_transpose_layer_loads_torch_weights_and_matches(device):
    ref = torch.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
    mine = mg.nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, groups=2)
    assert repr(mine) == repr(ref)
    assert mine.weight.shape == tuple(ref.weight.shape) == (6, 2, 3, 3)
    mine.load_state_dict({k: mg.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    mine = mine.to(device)
    x = np.random.default_rng(1).standard_normal((2, 6, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(mine(mg.tensor(x, device=device)).detach().cpu().numpy(),
                               ref(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    # unbatched input
    np.testing.assert_allclose(mine(mg.tensor(x[0], device=device)).detach().cpu().numpy(),
                               ref(torch.tensor(x[0])).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_conv_transpose_output_size_picks_torchs_output_padding():
    ref = torch.nn.ConvTranspose2d(6, 4, 3, stride=2, groups=2)
    mine = mg.nn.ConvTranspose2d(6, 4, 3, stride=2, groups=2)
    mine.load_state_dict({k: mg.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    x = np.random.default_rng(2).standard_normal((1, 6, 5, 5)).astype(np.float32)
    for size in ([12, 12], [11, 12], (1, 4, 12, 11)):
        want = ref(torch.tensor(x), output_size=size)
        got = mine(mg.tensor(x), output_size=size)
        assert got.shape == tuple(want.shape)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
    with pytest.raises(ValueError, match=re.escape("requested an output size of [14, 12], but "
                                                   "valid sizes range from [11, 11] to [12, 12]")):
        mine(mg.tensor(x), output_size=[14, 12])
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        mine(mg.tensor(x), output_size=[12])


def test_grouped_conv_transpose_errors_are_torchs():
    F = mg.nn.functional
    x = mg.zeros(1, 6, 5, 5)
    with pytest.raises(RuntimeError, match=re.escape(
            "Given transposed=1, weight of size [4, 3, 3, 3], expected input[1, 6, 5, 5] to have "
            "4 channels, but got 6 channels instead")):
        F.conv_transpose2d(x, mg.zeros(4, 3, 3, 3), groups=2)
    with pytest.raises(RuntimeError, match="Given groups=4, expected weight to be divisible by 4 "
                                           "at dimension 0"):
        F.conv_transpose2d(x, mg.zeros(6, 3, 3, 3), groups=4)
    with pytest.raises(RuntimeError, match="non-positive groups is not supported"):
        F.conv_transpose2d(x, mg.zeros(6, 3, 3, 3), groups=0)
    with pytest.raises(RuntimeError, match=re.escape(
            "expected bias to be 1-dimensional with 6 elements, but got bias of size [5]")):
        F.conv_transpose2d(x, mg.zeros(6, 3, 3, 3), mg.zeros(5), groups=2)
    with pytest.raises(ValueError, match="divisible by groups"):
        mg.nn.ConvTranspose2d(6, 5, 3, groups=2)
