"""t[integer arrays] = value (advanced-index assignment, as ``x_[range(n), y] = v`` in the
forward-forward example) on both devices, against PyTorch, with gradients."""
import numpy as np
import pytest

import minigpu as mg

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not mg.cuda.is_available(), reason="no cuda device"))]


def _both(index_of, value_shape, device):
    """Assign a value tensor (requiring grad) into y = x * 1 at index_of(lib) in minigpu and
    in PyTorch; the results and both gradients."""
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    v = np.linspace(-1, 1, int(np.prod(value_shape)), dtype=np.float32).reshape(value_shape)
    out = []
    for lib, dev in ((mg, device), (torch, "cpu")):
        x = lib.tensor(a, device=dev, requires_grad=True)
        w = lib.tensor(v, device=dev, requires_grad=True)
        y = x * 1
        y[index_of(lib, dev)] = w * 3
        (y * y).sum().backward()
        out.append([t.detach().cpu().numpy() for t in (y, x.grad, w.grad)])
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("index_of,value_shape", [
    (lambda lib, dev: (range(4), lib.tensor([5, 0, 3, 1], device=dev)), (4,)),
    (lambda lib, dev: (slice(None), [4, 0, 2]), (4, 3)),
    (lambda lib, dev: (slice(None), [4, 0, 2]), (3,)),           # broadcast over rows
    (lambda lib, dev: ([0, 3], slice(1, 3)), (2, 2)),
    (lambda lib, dev: lib.tensor([2, 0], device=dev), (6,)),     # whole rows
], ids=["range-tensor", "slice-list", "broadcast", "list-slice", "rows"])
def test_integer_array_assignment_matches_torch(index_of, value_shape, device):
    (ours, theirs) = _both(index_of, value_shape, device)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o, t, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_scalar_value_and_repeated_positions(device):
    x = mg.zeros(3, 4, device=device)
    x[range(3), mg.tensor([1, 0, 3], device=device)] = x.max() + 2
    expected = np.zeros((3, 4), np.float32)
    expected[range(3), [1, 0, 3]] = 2
    np.testing.assert_array_equal(x.numpy(), expected)
    y = mg.zeros(5, device=device)
    y[[1, 3, 1]] = mg.tensor([1.0, 2.0, 3.0], device=device)  # the last write wins, as NumPy
    np.testing.assert_array_equal(y.numpy(), [0, 3, 0, 2, 0])


def test_an_index_out_of_range_names_the_shape():
    x = mg.zeros(2, 3)
    with pytest.raises(IndexError, match=r"shape \(2, 3\)"):
        x[[0, 1], [1, 5]] = 1.0
