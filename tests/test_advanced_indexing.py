"""Indexing with integer tensors of any rank (``logits[idx]``, ``x[:, i, j]``, ...) as PyTorch's
advanced indexing, against torch on drawn shapes and indices, on both devices; the gradient
(gradcheck, and cuda against cpu); ``x[index] = v`` through the same path."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigpu as mg

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "cuda"]


@st.composite
def indexings(draw):
    """(x's shape, an index: per dim a slice, an int or an integer array; the arrays' shapes
    broadcast together; maybe a None or an Ellipsis in between)."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    index_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    used = draw(st.integers(1, len(shape)))
    ellipsis = draw(st.integers(0, used)) if used < len(shape) and draw(st.booleans()) else None
    dims = list(range(used)) if ellipsis is None else (
        list(range(ellipsis)) + list(range(len(shape) - used + ellipsis, len(shape))))
    entries, arrays = [], 0
    for k, d in enumerate(dims):
        kind = draw(st.sampled_from(["array", "array", "slice", "int"]))
        if kind == "array" or (k == used - 1 and not arrays):
            own = tuple(draw(st.sampled_from([n, 1])) for n in index_shape)  # broadcasts
            own = own[draw(st.integers(0, len(own))):]
            entries.append(np.array(draw(st.lists(st.integers(-shape[d], shape[d] - 1),
                                                  min_size=int(np.prod(own)),
                                                  max_size=int(np.prod(own))))
                                    ).reshape(own).astype(np.int64))
            arrays += 1
        elif kind == "slice":
            entries.append(slice(draw(st.integers(0, shape[d] - 1)), None,
                                 draw(st.integers(1, 2))))
        else:
            entries.append(draw(st.integers(-shape[d], shape[d] - 1)))
    if ellipsis is not None:
        entries.insert(ellipsis, Ellipsis)
    if draw(st.booleans()):
        entries.insert(draw(st.integers(0, len(entries))), None)
    return shape, tuple(entries)


def _on(index, convert):
    return tuple(convert(i) if isinstance(i, np.ndarray) else i for i in index)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=30)
@given(case=indexings())
def test_integer_tensor_indexing_matches_torch(device, case):
    shape, index = case
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    want = torch.from_numpy(data)[_on(index, torch.from_numpy)]
    got = mg.tensor(data, device=device)[_on(index, lambda a: mg.tensor(a, device=device))]
    assert tuple(got.shape) == tuple(want.shape) and got.device == device
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@settings(max_examples=10)
@given(case=indexings())
def test_integer_tensor_indexing_gradient(case):
    """float64 gradcheck on cpu; the cuda gradient (index_add with atomics) equals cpu's."""
    shape, index = case
    data = np.random.default_rng(0).normal(size=shape)
    x = mg.tensor(data, dtype=mg.float64, requires_grad=True)
    index_cpu = _on(index, mg.tensor)
    assert mg.autograd.gradcheck(lambda a: a[index_cpu] * 1.5, [x])
    grads = []
    for device in DEVICES:
        x = mg.tensor(data, dtype=mg.float32, device=device, requires_grad=True)
        out = x[_on(index, lambda a: mg.tensor(a, device=device))]
        (out * mg.arange(out.numel(), device=device).reshape(out.shape)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=15)
@given(case=indexings())
def test_integer_tensor_assignment_matches_torch(device, case):
    shape, index = case
    want = torch.zeros(shape)
    selected = want[_on(index, torch.from_numpy)]
    values = np.arange(1, selected.numel() + 1, dtype=np.float32).reshape(selected.shape)
    want[_on(index, torch.from_numpy)] = torch.from_numpy(values)
    got = mg.zeros(*shape, device=device)
    got[_on(index, lambda a: mg.tensor(a, device=device))] = mg.tensor(values, device=device)
    # an element selected twice: torch keeps one of its values (which is unspecified)
    numbers = torch.arange(int(np.prod(shape))).reshape(shape)[_on(index, torch.from_numpy)]
    unique = np.bincount(numbers.reshape(-1).numpy(), minlength=int(np.prod(shape))) <= 1
    np.testing.assert_array_equal(got.numpy().reshape(-1)[unique],
                                  want.numpy().reshape(-1)[unique])


@pytest.mark.parametrize("device", DEVICES)
def test_embedding_lookup_by_hand(device):
    """``logits = table[idx]`` with a 2-d idx (a bigram model written by hand)."""
    table = mg.tensor(np.arange(12.0).reshape(4, 3), device=device, requires_grad=True)
    idx = mg.tensor([[0, 3], [3, 3]], device=device)
    logits = table[idx]
    assert logits.shape == (2, 2, 3)
    np.testing.assert_array_equal(logits.detach().numpy()[1, 0], [9, 10, 11])
    logits.sum().backward()
    np.testing.assert_array_equal(table.grad.numpy()[:, 0], [1, 0, 0, 3])


@pytest.mark.parametrize("device", DEVICES)
def test_bad_indices_raise_like_torch(device):
    x = mg.zeros(2, 3, 4, device=device)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 1 with size 3"):
        x[:, mg.tensor([[5]], device=device)]
    with pytest.raises(IndexError, match=r"could not be broadcast together with shapes \[2\], "
                                         r"\[3\]"):
        x[mg.tensor([0, 1], device=device), mg.tensor([0, 1, 2], device=device)]
    with pytest.raises(IndexError, match="too many indices"):
        x[mg.tensor([0], device=device), 0, 0, 0]
    with pytest.raises(IndexError, match="tensors used as indices must be long"):
        x[mg.tensor([0.0], device=device)]
