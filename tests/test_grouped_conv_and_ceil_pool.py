"""Grouped and depthwise convolutions (``groups`` > 1), ``MaxPool2d(ceil_mode=True)`` and
``AvgPool2d(ceil_mode=True)``, gaps the PyTorch-program corpus and issue #26 found: against
torch on copied weights, on both devices, with float64 gradcheck."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigpu as mg
from minigpu.autograd import gradcheck

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("case", [
    dict(c=4, oc=6, groups=2, k=3, padding=1, stride=1),
    dict(c=3, oc=3, groups=3, k=3, padding="same", stride=1),   # depthwise
    dict(c=4, oc=8, groups=4, k=2, padding=0, stride=2),        # depthwise multiplier 2
])
def test_grouped_conv2d_matches_torch(device, case):
    c, oc, groups, k = case["c"], case["oc"], case["groups"], case["k"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, c, 5, 5)).astype(np.float32)
    w = rng.standard_normal((oc, c // groups, k, k)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    kw = dict(stride=case["stride"], padding=case["padding"], groups=groups)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), **kw)
    got = mg.nn.functional.conv2d(mg.tensor(x, device=device), mg.tensor(w, device=device),
                                  mg.tensor(b, device=device), **kw)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_grouped_conv_layers_load_torch_weights_and_match(device):
    for make in (lambda L: L.nn.Conv2d(4, 6, 3, padding=1, groups=2),
                 lambda L: L.nn.Conv1d(6, 6, 3, groups=6, bias=False)):
        ref = make(torch)
        mine = make(mg)
        mine.load_state_dict({k: mg.tensor(v.detach().numpy()) for k, v in
                              ref.state_dict().items()})
        mine = mine.to(device)
        assert repr(mine) == repr(ref).replace("torch.", "")
        x = np.random.default_rng(1).standard_normal(
            (2, ref.in_channels, 6, 6) if isinstance(ref, torch.nn.Conv2d)
            else (2, ref.in_channels, 7)).astype(np.float32)
        np.testing.assert_allclose(mine(mg.tensor(x, device=device)).detach().cpu().numpy(),
                                   ref(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_grouped_conv_gradcheck():
    rng = np.random.default_rng(2)
    x = mg.tensor(rng.standard_normal((1, 4, 4, 4)), requires_grad=True)
    w = mg.tensor(rng.standard_normal((4, 2, 2, 2)), requires_grad=True)
    b = mg.tensor(rng.standard_normal(4), requires_grad=True)
    assert gradcheck(lambda x, w, b: mg.nn.functional.conv2d(x, w, b, groups=2), (x, w, b))


def test_bad_groups_raise_torchs_errors():
    x, w = mg.zeros(1, 4, 5, 5), mg.zeros(6, 2, 3, 3)
    with pytest.raises(RuntimeError, match=r"expected input\[1, 4, 5, 5\] to have 6 channels"):
        mg.nn.functional.conv2d(x, w, groups=3)
    with pytest.raises(ValueError, match="divisible by groups"):
        mg.nn.Conv2d(4, 6, 3, groups=4)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("h, w, k, s, p", [(5, 5, 2, 2, 0), (7, 6, 3, 2, 1), (4, 9, 3, 3, 0),
                                           (5, 5, 2, 1, 0), (6, 6, 3, 2, 1),
                                           (2, 2, 3, 2, 0)])
def test_max_pool_ceil_mode_matches_torch(device, h, w, k, s, p):
    """ceil_mode=True: the partial windows at the edges; values, indices and gradients as
    torch's."""
    rng = np.random.default_rng(h * 100 + w)
    x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    ref = torch.tensor(x, requires_grad=True)
    want, want_idx = torch.nn.functional.max_pool2d(ref, k, s, p, ceil_mode=True,
                                                    return_indices=True)
    (want * want).sum().backward()
    mine = mg.tensor(x, device=device, requires_grad=True)
    got, idx = mg.nn.functional.max_pool2d(mine, k, s, p, ceil_mode=True, return_indices=True)
    (got * got).sum().backward()
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.detach().cpu().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(idx.cpu().numpy(), want_idx.numpy())
    np.testing.assert_allclose(mine.grad.cpu().numpy(), ref.grad.numpy(), rtol=1e-6)
    layer = mg.nn.MaxPool2d(k, s, p, ceil_mode=True)
    assert layer(mg.tensor(x)).shape == tuple(want.shape)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_max_pool_argmax_is_torchs_with_padding_infinities_and_nan(device, data):
    """Which pixel a window picks where the choice is not obvious, as torch picks it: a window
    of -inf beside -inf padding points at its first pixel inside the image (never at the
    padding: its gradient must land in the image), ties take the first, a NaN wins (the last
    NaN of the window). Values, indices and the gradient routed by them."""
    k = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    s = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)))
    p = tuple(data.draw(st.integers(0, kk // 2)) for kk in k)
    h, w = (data.draw(st.integers(max(1, kk - 2 * pp), 6)) for kk, pp in zip(k, p))
    x = np.array(data.draw(st.lists(st.sampled_from([-np.inf, np.nan, 0.0, 1.0, np.inf]),
                                    min_size=2 * h * w, max_size=2 * h * w)),
                 np.float32).reshape(1, 2, h, w)
    ref = torch.tensor(x, requires_grad=True)
    want, want_idx = torch.nn.functional.max_pool2d(ref, k, s, p, return_indices=True)
    weights = np.arange(1, want.numel() + 1, dtype=np.float32).reshape(want.shape)
    (want * torch.tensor(weights)).sum().backward()
    mine = mg.tensor(x, device=device, requires_grad=True)
    got, idx = mg.nn.functional.max_pool2d(mine, k, s, p, return_indices=True)
    (got * mg.tensor(weights, device=device)).sum().backward()
    np.testing.assert_array_equal(got.detach().cpu().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(idx.cpu().numpy(), want_idx.numpy())
    np.testing.assert_array_equal(mine.grad.cpu().numpy(), ref.grad.numpy())


AVG_CEIL_CASES = [(h, w, k, s, p) for h in (4, 5, 7) for w in (3, 6) for k in (1, 2, 3, 4)
                  for s in (1, 2, 3) for p in range(k // 2 + 1)]


@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("h, w, k, s, p", AVG_CEIL_CASES)
def test_avg_pool_ceil_mode_matches_torch(h, w, k, s, p, include_pad):
    """ceil_mode=True on many shapes (cpu): the partial windows' divisors count the padding
    (count_include_pad=True) but never the cells beyond it; a last window starting in the
    right padding is dropped. Values and gradients as torch's."""
    rng = np.random.default_rng(h * 1000 + w * 100 + k * 10 + s)
    x = rng.standard_normal((1, 2, h, w))
    kw = dict(ceil_mode=True, count_include_pad=include_pad)
    try:
        want = torch.nn.functional.avg_pool2d(torch.tensor(x, requires_grad=True), k, s, p, **kw)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e))):
            mg.nn.functional.avg_pool2d(mg.tensor(x), k, s, p, **kw)
        return
    ref = torch.tensor(x, requires_grad=True)
    want = torch.nn.functional.avg_pool2d(ref, k, s, p, **kw)
    g = rng.standard_normal(tuple(want.shape))
    want.backward(torch.tensor(g))
    mine = mg.tensor(x, requires_grad=True)
    got = mg.nn.functional.avg_pool2d(mine, k, s, p, **kw)
    got.backward(mg.tensor(g))
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("h, w, k, s, p, include_pad, divisor", [
    (5, 5, 2, 2, 0, True, None), (7, 6, 3, 2, 1, True, None), (7, 6, 3, 2, 1, False, None),
    (4, 9, 3, 3, 0, False, None), (6, 6, 3, 2, 1, True, 5), (5, 7, 3, 2, 1, False, 2),
    (6, 6, 2, 2, 1, True, None)])
def test_avg_pool_ceil_mode_layer_float32(device, h, w, k, s, p, include_pad, divisor):
    """nn.AvgPool2d(ceil_mode=True) on both devices, float32, with and without
    divisor_override; forward and input gradient as torch's."""
    rng = np.random.default_rng(h * 10 + w)
    x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    args = (k, s, p, True, include_pad, divisor)
    ref = torch.tensor(x, requires_grad=True)
    want = torch.nn.AvgPool2d(*args)(ref)
    (want * want).sum().backward()
    mine = mg.tensor(x, device=device, requires_grad=True)
    got = mg.nn.AvgPool2d(*args)(mine)
    (got * got).sum().backward()
    assert got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(mine.grad.cpu().numpy(), ref.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_avg_pool_ceil_mode_gradcheck_and_errors():
    x = mg.tensor(np.random.default_rng(3).standard_normal((1, 2, 5, 6)), requires_grad=True)
    for include_pad in (True, False):
        assert gradcheck(lambda x: mg.nn.functional.avg_pool2d(
            x, 3, 2, 1, ceil_mode=True, count_include_pad=include_pad), (x,))
    assert gradcheck(lambda x: mg.nn.functional.avg_pool2d(
        x, 2, 2, ceil_mode=True, divisor_override=3), (x,))
    # the window count rounds up: a 2x2 input gives one 3x3 window at stride 2, none at 1
    assert mg.nn.functional.avg_pool2d(mg.ones(1, 1, 2, 2), 3, 2, ceil_mode=True).shape == \
        (1, 1, 1, 1)
    with pytest.raises(RuntimeError, match=r"Given input size: \(1x2x2\). Calculated output "
                                           r"size: \(1x0x0\). Output size is too small"):
        mg.nn.functional.avg_pool2d(mg.ones(1, 1, 2, 2), 3, 1, ceil_mode=True)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        mg.nn.functional.avg_pool2d(mg.ones(1, 1, 4, 4), 2, ceil_mode=True, divisor_override=0)
