"""Memory shared where PyTorch shares it (``from_numpy``, ``as_tensor``, ``Tensor.numpy()`` on
cpu), PyTorch's errors for arrays it refuses, and integer division by zero raising on cpu —
each checked against torch itself where the parity extra is installed."""
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigpu as mg

torch = pytest.importorskip("torch")


def test_the_issue_snippet_prints_torchs_answers():
    results = {}
    for lib in (mg, torch):
        a = np.zeros(3, np.float32)
        t = lib.from_numpy(a)
        a[0] = 5
        u = lib.zeros(3)
        u.numpy()[0] = 7
        results[lib.__name__] = (t[0].item(), u[0].item())
    assert results["minigpu"] == results["torch"] == (5.0, 7.0)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 6), row_step=st.integers(1, 3),
       col_step=st.integers(1, 3), transpose=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float64, np.int64, np.bool_]))
def test_from_numpy_shares_any_positively_strided_array(rows, cols, row_step, col_step,
                                                        transpose, dtype):
    base = (np.arange(rows * cols * row_step * col_step) % 7).astype(dtype)
    positions = np.arange(base.size)

    def strided(a):
        v = a.reshape(rows * row_step, cols * col_step)[::row_step, ::col_step]
        return v.T if transpose else v

    view = strided(base)
    t = mg.from_numpy(view)
    ref = torch.from_numpy(view)
    assert t.shape == tuple(ref.shape) and t.stride() == ref.stride()
    assert t.dtype == view.dtype
    np.testing.assert_array_equal(t.numpy(), view)
    view[0, -1] = 1                      # NumPy -> tensor
    assert t[0, -1].item() == ref[0, -1].item() == 1
    if dtype != np.bool_:                # tensor -> NumPy, and the gaps between rows stay
        before, expected = base.copy(), view * 2
        t.mul_(2)
        np.testing.assert_array_equal(view, expected)
        untouched = np.setdiff1d(positions, strided(positions).ravel())
        np.testing.assert_array_equal(base[untouched], before[untouched])


def test_from_numpy_of_a_flat_array_with_a_stride_0_size_1_dim():
    """A transform's ``image[:, :, None].transpose(2, 0, 1)`` made contiguous: NumPy gives the
    size-1 dim stride 0; the tensor shares the memory and keeps the strides, as PyTorch's."""
    image = np.ascontiguousarray((np.arange(12) % 5).astype(np.uint8).reshape(3, 4)[:, :, None]
                                 .transpose(2, 0, 1))
    assert image.strides[0] == 0 and image.flags.c_contiguous
    t, ref = mg.from_numpy(image), torch.from_numpy(image)
    assert t.stride() == ref.stride() and t.is_contiguous() == ref.is_contiguous()
    image[0, 2, 3] = 9
    assert t[0, 2, 3].item() == 9
    np.testing.assert_array_equal(t.float().numpy(), ref.float().numpy())


def test_numpy_of_a_cpu_tensor_and_its_views_share_memory():
    t = mg.arange(12.0).reshape(3, 4)
    col = t[:, 1]
    arr = col.numpy()
    arr[:] = -1
    assert t[:, 1].tolist() == [-1.0, -1.0, -1.0]
    t.add_(1)
    np.testing.assert_array_equal(arr, [0.0, 0.0, 0.0])
    # As in torch, a write through NumPy is invisible to autograd (no version bump).
    version = t._version
    t.numpy()[0, 0] = 3
    assert t._version == version


def test_as_tensor_shares_unless_a_conversion_is_asked():
    a = np.ones(4, np.float32)
    assert mg.as_tensor(a).data_ptr() == a.ctypes.data
    assert mg.as_tensor(a, dtype=mg.float32).data_ptr() == a.ctypes.data
    copied = mg.as_tensor(a, dtype=mg.float64)
    a[0] = 9
    assert copied[0].item() == 1.0
    assert mg.as_tensor(a, device="cuda")[0].item() == 9.0  # a copy onto the device


def test_array_protocol_copies_only_when_asked():
    t = mg.zeros(3)
    np.asarray(t)[0] = 2
    assert t[0].item() == 2.0
    np.array(t, copy=True)[1] = 5
    assert t[1].item() == 0.0
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


def test_numpy_force_detaches_and_grad_tensors_otherwise_refuse():
    x = mg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Use tensor.detach\(\).numpy\(\) instead"):
        x.numpy()
    np.testing.assert_array_equal(x.numpy(force=True), [1.0, 1.0])


def test_cuda_numpy_is_a_host_copy():
    t = mg.zeros(3, device="cuda")
    t.numpy()[0] = 4
    assert t[0].item() == 0.0


@pytest.mark.parametrize("bad, error", [
    (np.zeros(3)[::-1], ValueError),
    (np.zeros(3, dtype=object), TypeError),
    ([1.0, 2.0], TypeError),
])
def test_from_numpy_refuses_what_torch_refuses(bad, error):
    with pytest.raises(error) as ours:
        mg.from_numpy(bad)
    with pytest.raises(error) as theirs:
        torch.from_numpy(bad)
    assert str(ours.value).split(".")[0] == str(theirs.value).split(".")[0]


def test_a_read_only_array_warns_as_torch_does():
    a = np.zeros(3)
    a.flags.writeable = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = mg.from_numpy(a)
    assert [w.category for w in caught] == [UserWarning]
    assert "not writable" in str(caught[0].message)
    t.add_(1)  # minigpu copies the read-only array, so in-place ops still work
    assert t.tolist() == [1.0, 1.0, 1.0] and a.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("op", ["floor_divide", "remainder"])
def test_integer_division_by_zero_raises_on_cpu_as_torch(op):
    for lib in (mg, torch):
        x, y = lib.tensor([3, -4]), lib.tensor([1, 0])
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            getattr(lib, op)(x, y)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            getattr(lib, op)(x, 0)
    # Floats divide by zero into inf / nan, as in torch.
    ours = getattr(mg, op)(mg.tensor([3.0, -4.0]), mg.tensor([0.0, 0.0]))
    theirs = getattr(torch, op)(torch.tensor([3.0, -4.0]), torch.tensor([0.0, 0.0]))
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_as_tensor_of_a_tensor_converts_when_asked():
    t = mg.ones(2)
    assert mg.as_tensor(t) is t
    assert mg.as_tensor(t, dtype=mg.float64).dtype == mg.float64
    assert mg.as_tensor(t, dtype=float) is t
