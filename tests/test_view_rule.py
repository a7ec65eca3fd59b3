"""``view`` and ``reshape`` by PyTorch's stride rule, against torch on drawn layouts: the same
success or failure, the same strides, the same values, storage shared (a write through the
view shows in the base), and the gradient through a view of a non-contiguous tensor."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigpu as mg

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "cuda"]


def _factors(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def layouts(draw):
    """(base shape, the steps that make a non-contiguous tensor of it, a target shape). The
    steps are permute, step slices, narrow, expand (stride 0) and unsqueeze (size-1 dims); the
    target groups the layout's prime factors in order, with 1s put in, so that it splits and
    merges dims, sometimes across chunks (no view then)."""
    base = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    steps, shape = [], list(base)
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["permute", "slice", "narrow", "expand", "unsqueeze"]))
        d = draw(st.integers(0, len(shape) - 1))
        if kind == "permute":
            perm = tuple(draw(st.permutations(range(len(shape)))))
            shape = [shape[p] for p in perm]
            steps.append((kind, perm))
        elif kind == "slice" and shape[d] > 1:
            start, step = draw(st.integers(0, shape[d] - 1)), draw(st.integers(1, 3))
            shape[d] = len(range(start, shape[d], step))
            steps.append((kind, d, start, step))
        elif kind == "narrow" and shape[d] > 1:
            length = draw(st.integers(1, shape[d] - 1))
            start = draw(st.integers(0, shape[d] - length))
            shape[d] = length
            steps.append((kind, d, start, length))
        elif kind == "expand" and shape[d] == 1:
            shape[d] = draw(st.integers(2, 3))
            steps.append((kind, tuple(shape)))
        elif kind == "unsqueeze":
            shape.insert(d, 1)
            steps.append((kind, d))
    factors = [f for s in shape for f in _factors(s)]
    target, i = [], 0
    while i < len(factors):
        take = draw(st.integers(1, max(1, len(factors) - i)))
        target.append(int(np.prod(factors[i:i + take])))
        i += take
        if draw(st.booleans()):
            target.append(1)
    if 0 in shape:
        target = [0]
    return base, steps, tuple(target) or ()


def _apply(x, steps):
    for step in steps:
        kind, *args = step
        if kind == "permute":
            x = x.permute(*args[0])
        elif kind == "slice":
            d, start, stride = args
            x = x[(slice(None),) * d + (slice(start, None, stride),)]
        elif kind == "narrow":
            x = x.narrow(*args)
        elif kind == "expand":
            x = x.expand(*args[0])
        else:
            x = x.unsqueeze(args[0])
    return x


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=40)
@given(layout=layouts())
def test_view_follows_torch_stride_rule(device, layout):
    base, steps, target = layout
    data = np.arange(int(np.prod(base)), dtype=np.float32).reshape(base)
    want = _apply(torch.from_numpy(data.copy()), steps)
    x = _apply(mg.tensor(data, device=device), steps)
    assert tuple(x.stride()) == want.stride()
    try:
        expected = want.view(target)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match="view size is not compatible") as got:
            x.view(*target)
        assert str(got.value) == str(e)
        copied = x.reshape(*target)  # reshape copies where view cannot
        assert copied.is_contiguous()
        np.testing.assert_array_equal(copied.numpy(), want.reshape(target).numpy())
        return
    for y in (x.view(*target), x.reshape(*target)):
        assert tuple(y.shape) == tuple(expected.shape)
        assert tuple(y.stride()) == expected.stride() or expected.numel() == 0
        np.testing.assert_array_equal(y.numpy(), expected.numpy())
    if expected.numel() and 0 not in expected.stride():  # writes through the view show in x
        y = x.view(*target)
        y.fill_(-1.0)
        assert (x.numpy() == -1).all()


@pytest.mark.parametrize("device", DEVICES)
def test_split_and_step_slice_view(device):
    """The two forms programs use: a view of a split (GPT's q, k, v) and of a step slice."""
    B, T, C, nh = 2, 3, 12, 2
    t = torch.arange(B * T * 3 * C, dtype=torch.float32).reshape(B, T, 3 * C)
    x = mg.tensor(t.numpy(), device=device)
    for got, want in zip(x.split(C, dim=2), t.split(C, dim=2)):
        k = got.view(B, T, nh, C // nh)
        assert k.stride() == want.view(B, T, nh, C // nh).stride()
        np.testing.assert_array_equal(k.transpose(1, 2).numpy(),
                                      want.view(B, T, nh, C // nh).transpose(1, 2).numpy())
    stepped = x[:, :, ::2].view(B, T, 3, C // 2)
    assert stepped.stride() == t[:, :, ::2].view(B, T, 3, C // 2).stride()
    stepped[0, 0, 0, 1] = 1000.0
    assert x[0, 0, 2].item() == 1000.0


def test_gradient_through_view_of_non_contiguous():
    x = mg.tensor(np.random.default_rng(0).normal(size=(2, 3, 8)), dtype=mg.float64,
                  requires_grad=True)
    assert mg.autograd.gradcheck(lambda a: a.split(4, dim=2)[1].view(2, 3, 2, 2) * 2.0, [x])
    assert mg.autograd.gradcheck(lambda a: a[:, :, ::2].view(6, 4).sin(), [x])
    assert mg.autograd.gradcheck(lambda a: a.transpose(0, 1).reshape(3, 16), [x])
