"""The Tensor API on both devices: creation, dtypes, views, indexing, transfer and errors."""
import numpy as np
import pytest

import minigpu as mg

DEVICES = ["cpu", "cuda"]


@pytest.mark.parametrize("device", DEVICES)
def test_creation_and_properties(device):
    x = mg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)
    assert x.shape == (2, 3) and isinstance(x.shape, mg.Size) and x.shape.numel() == 6
    assert x.dtype == mg.float32 and x.device == device and x.device.type == device
    assert mg.tensor([1, 2]).dtype == mg.int64
    assert mg.tensor(np.zeros(2)).dtype == mg.float64
    assert mg.zeros(2, 3, device=device).numpy().sum() == 0
    np.testing.assert_array_equal(mg.ones((2,), device=device).numpy(), [1, 1])
    np.testing.assert_array_equal(mg.full((2, 2), 7.0, device=device).numpy(), np.full((2, 2), 7))
    np.testing.assert_array_equal(mg.arange(1, 7, 2, device=device).numpy(), [1, 3, 5])
    np.testing.assert_array_equal(mg.zeros_like(x).numpy(), np.zeros((2, 3)))
    assert mg.ones_like(x).device == device
    assert mg.eye(3, device=device).numpy().trace() == 3
    assert x.item if x.numel() == 6 else False
    assert mg.tensor(3.5, device=device).item() == 3.5


def test_random_is_seeded_and_identical_across_devices():
    mg.manual_seed(7)
    a = mg.randn(5, 4).numpy()
    u = mg.rand(100).numpy()
    mg.manual_seed(7)
    b = mg.randn(5, 4, device="cuda").numpy()
    v = mg.rand(100, device="cuda").numpy()
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(u, v)
    assert 0.0 <= u.min() and u.max() < 1.0
    mg.manual_seed(8)
    assert not np.allclose(mg.randn(5, 4).numpy(), a)


@pytest.mark.parametrize("device", DEVICES)
def test_views_share_memory_and_index_like_numpy(device):
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = mg.tensor(base, device=device)
    cases = {
        "T": (x.T, base.T),
        "permute": (x.permute(1, 2, 0), base.transpose(1, 2, 0)),
        "transpose": (x.transpose(0, 2), base.swapaxes(0, 2)),
        "slice": (x[1, ::2, 1:], base[1, ::2, 1:]),
        "none_ellipsis": (x[..., None, 2], base[..., None, 2]),
        "negative": (x[-1, -2], base[-1, -2]),
        "reshape": (x.reshape(4, -1), base.reshape(4, -1)),
        "view": (x.view(6, 4), base.reshape(6, 4)),
        "flatten": (x.flatten(1), base.reshape(2, 12)),
        "squeeze": (x[:, :1].squeeze(1), base[:, 0]),
        "unsqueeze": (x.unsqueeze(-1), base[..., None]),
        "expand": (x[:, :1, :].expand(2, 3, 4), np.broadcast_to(base[:, :1], (2, 3, 4))),
        "noncontig_reshape": (x.T.reshape(-1), base.T.reshape(-1)),
        "contiguous": (x.permute(2, 0, 1).contiguous(), base.transpose(2, 0, 1)),
        "index_tensor": (x[mg.tensor([1, 0, 1], device=device)], base[[1, 0, 1]]),
    }
    for name, (got, want) in cases.items():
        assert tuple(got.shape) == want.shape, name
        np.testing.assert_array_equal(got.numpy(), want, err_msg=name)
    assert x.T._buf is x._buf and x[1]._buf is x._buf


@pytest.mark.parametrize("device", DEVICES)
def test_cat_stack_split(device):
    a = mg.tensor([[1.0, 2.0]], device=device)
    b = mg.tensor([[3.0, 4.0], [5.0, 6.0]], device=device)
    np.testing.assert_array_equal(mg.cat([a, b]).numpy(), [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(mg.stack([b, b], 1).numpy(), np.stack([b.numpy()] * 2, 1))
    first, second = mg.cat([a, b]).split([1, 2])
    np.testing.assert_array_equal(second.numpy(), b.numpy())
    with pytest.raises(RuntimeError, match="Sizes of tensors must match except in dimension 0"):
        mg.cat([a, mg.zeros(1, 3, device=device)])


@pytest.mark.parametrize("device", DEVICES)
def test_stack_promotes_views_and_empty_parts(device):
    ints = mg.tensor([[1, 2, 3], [4, 5, 6]], device=device)
    floats = mg.tensor([[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]], device=device).T  # strided
    out = mg.stack([ints, floats], -1)  # int64 with float32: float32, as torch.stack
    assert out.dtype == mg.float32 and tuple(out.shape) == (2, 3, 2)
    np.testing.assert_array_equal(out.numpy(), np.stack([ints.numpy(), floats.numpy()], -1))
    empty = mg.stack([mg.zeros(0, 3, device=device)] * 4, 1)
    assert tuple(empty.shape) == (0, 4, 3)
    a = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    (mg.stack([a, a * 3], 0) * mg.tensor([[1.0, 2.0], [3.0, 4.0]], device=device)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1 + 9, 2 + 12])


@pytest.mark.parametrize("device", DEVICES)
def test_setitem_and_fill(device):
    x = mg.zeros(3, 4, device=device)
    x[1] = 5.0
    x[:, ::2] = mg.tensor([1.0, 2.0], device=device)
    want = np.zeros((3, 4), dtype=np.float32)
    want[1] = 5
    want[:, ::2] = [1, 2]
    np.testing.assert_array_equal(x.numpy(), want)
    x.zero_()
    assert x.numpy().sum() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_reductions_and_comparisons(device):
    base = np.array([[3.0, -1.0, 3.0], [0.5, 2.0, -4.0]], dtype=np.float32)
    x = mg.tensor(base, device=device)
    values, indices = x.max(1)
    np.testing.assert_array_equal(values.numpy(), [3.0, 2.0])
    np.testing.assert_array_equal(indices.numpy(), [0, 1])  # ties: first index
    assert indices.dtype == mg.int64
    np.testing.assert_array_equal(x.argmin(0).numpy(), [1, 0, 1])
    assert x.argmax().item() == 0
    np.testing.assert_allclose(x.mean((0, 1)).item(), base.mean(), rtol=1e-6)
    np.testing.assert_array_equal((x > 0).numpy(), base > 0)
    assert (x > 0).dtype == mg.bool
    np.testing.assert_array_equal((x == x).numpy(), np.ones_like(base, bool))
    np.testing.assert_array_equal(mg.where(x > 0, x, 0.0).numpy(), np.where(base > 0, base, 0))
    assert bool((x > -10).all()) and not bool((x > 10).any())


@pytest.mark.parametrize("device", DEVICES)
def test_transfer_round_trip(device):
    x = mg.randn(3, 2)
    y = x.to(device)
    assert y.device == device
    np.testing.assert_array_equal(y.cpu().numpy(), x.numpy())
    assert y.double().dtype == mg.float64 and y.to(mg.float64).device == device
    assert x.to("cpu") is x


def test_shape_errors_name_both_shapes():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"):
        mg.zeros(2, 3) @ mg.zeros(4, 5)
    with pytest.raises(RuntimeError, match=r"\(2, 3\) and \(4,\)"):
        mg.zeros(2, 3) + mg.zeros(4)
    with pytest.raises(RuntimeError, match="shape '\\[4, 4\\]' is invalid for input of size 6"):
        mg.zeros(2, 3).reshape(4, 4)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        mg.zeros(2, 3).T.view(6)


def test_device_and_dtype_errors():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*cpu and cuda"):
        mg.zeros(2) + mg.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        mg.zeros(2, device="tpu")
    with pytest.raises(TypeError, match="no tensors of dtype complex64 \\(supported: bool, uint8"):
        mg.zeros(2, dtype=np.complex64)
    with pytest.raises(RuntimeError, match="same dtype"):
        mg.zeros(2, 2) @ mg.zeros(2, 2, dtype=mg.float64)


def test_dim_errors_are_caught_before_any_kernel():
    x = mg.zeros(2, 3, device="cuda")
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        x.sum(2)
    with pytest.raises(IndexError, match="out of range"):
        x.softmax(-3)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[0, 3]
    with pytest.raises(IndexError, match="out of bounds"):
        x.index_select(0, mg.tensor([5], device="cuda"))


def test_item_and_numpy_errors():
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        mg.zeros(2).item()
    with pytest.raises(RuntimeError, match="detach"):
        mg.zeros(2, requires_grad=True).numpy()


def test_repr_mentions_device_and_grad():
    x = mg.ones(2, device="cuda", requires_grad=True)
    assert "device='cuda'" in repr(x) and "requires_grad=True" in repr(x)
    assert "grad_fn" in repr(x * 2)
