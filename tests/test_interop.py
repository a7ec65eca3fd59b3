"""Interop: DLPack both ways (zero-copy on cpu), __cuda_array_interface__ of views, data_ptr,
and a cuda tensor view passed straight to a user's @cuda.jit kernel."""
import numpy as np
import pytest
from numba import cuda

import minigpu as mg


def _aliasing_host_array(cai):
    """A NumPy array over the memory a __cuda_array_interface__ describes. Under the simulator
    "device" memory is host memory, so this is what a kernel argument made from it sees."""
    class Holder:
        __array_interface__ = dict(cai, version=3)
    return np.asarray(Holder())


@pytest.mark.parametrize("dtype", [mg.float32, mg.float64, mg.int64, mg.bool])
def test_numpy_from_dlpack_shares_memory_of_views(dtype):
    t = mg.arange(12).reshape(3, 4).to(dtype)
    assert t.__dlpack_device__() == (1, 0)
    for view in (t, t[:, 1::2], t.T, t[1], t[2, 3]):
        a = np.from_dlpack(view)
        assert a.dtype == dtype and a.shape == tuple(view.shape)
        np.testing.assert_array_equal(a, view.numpy())
        assert a.ctypes.data == view.data_ptr()
    a = np.from_dlpack(t[:, 1::2])
    a[...] = 0 if dtype == mg.bool else 7
    expected = np.arange(12).reshape(3, 4).astype(dtype)
    expected[:, 1::2] = a
    np.testing.assert_array_equal(t.numpy(), expected)


def test_from_dlpack_round_trip_is_zero_copy():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)[1:, ::3]  # strided NumPy view
    t = mg.from_dlpack(a)
    assert tuple(t.shape) == (3, 2) and t.stride() == (6, 3) and t.data_ptr() == a.ctypes.data
    a[0, 0] = -1
    assert t[0, 0].item() == -1
    back = np.from_dlpack(t)
    back[2, 1] = 99
    assert a[2, 1] == 99 and t[2, 1].item() == 99
    assert (t * 2).numpy()[2, 1] == 198  # ops read the shared view
    u = mg.from_dlpack(t)  # a minigpu tensor: the same memory, detached
    assert u.data_ptr() == t.data_ptr()
    assert mg.from_dlpack(np.zeros((0, 3))).shape == (0, 3)
    assert mg.from_dlpack(np.zeros(3, np.int32)).dtype == mg.int32
    with pytest.raises(TypeError, match="no tensors of dtype uint16"):
        mg.from_dlpack(np.zeros(3, np.uint16))


def test_export_refuses_tensors_that_require_grad():
    w = mg.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't export tensors that require gradient"):
        np.from_dlpack(w)
    np.from_dlpack(w.detach())
    with pytest.raises(RuntimeError, match="__cuda_array_interface__ on Variable that requires"):
        mg.ones(2, device="cuda", requires_grad=True).__cuda_array_interface__


def test_cuda_array_interface_describes_the_view():
    t = mg.arange(24, dtype=mg.float32, device="cuda").reshape(4, 6)
    assert not hasattr(mg.ones(2), "__cuda_array_interface__")  # cpu: AttributeError
    cai = t.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (4, 6) and cai["strides"] is None
    assert cai["typestr"] == "<f4" and cai["data"] == (t.data_ptr(), False)
    assert cai["stream"] is None  # simulator: every launch has finished when it returns
    view = t[1:, 1::2]
    vcai = view.__cuda_array_interface__
    assert vcai["shape"] == (3, 3) and vcai["strides"] == (24, 8)
    assert vcai["data"][0] == t.data_ptr() + (6 + 1) * 4 == view.data_ptr()
    host = _aliasing_host_array(vcai)  # writes through the interface land in the tensor
    np.testing.assert_array_equal(host, view.numpy())
    host[...] = -1
    expected = np.arange(24, dtype=np.float32).reshape(4, 6)
    expected[1:, 1::2] = -1
    np.testing.assert_array_equal(t.numpy(), expected)
    assert t.T.__cuda_array_interface__["strides"] == (4, 24)
    assert mg.zeros(3, dtype=mg.int64, device="cuda").__cuda_array_interface__["typestr"] == "<i8"
    assert t.__dlpack_device__() == (2, 0)


@cuda.jit
def _scale_rows(a, factor):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] = a[i, j] * factor + j


def test_user_kernel_writes_through_view():
    t = mg.arange(24, dtype=mg.float32, device="cuda").reshape(4, 6)
    view = t[:, 1::2]
    _scale_rows[(1, 1), (4, 4), mg.cuda.current_stream()](view, np.float32(10))
    expected = np.arange(24, dtype=np.float32).reshape(4, 6)
    expected[:, 1::2] = expected[:, 1::2] * 10 + np.arange(3)
    np.testing.assert_array_equal(t.numpy(), expected)


class _CpuCapsule:
    """Serves the ctypes DLPack capsule (what a cuda tensor exports on a GPU) for a cpu view,
    so that real consumers check its layout here: NumPy and cuda.core (Numba's kernel-argument
    path on a GPU)."""

    def __init__(self, view):
        self.view = view

    def __dlpack__(self, **kwargs):
        from minigpu import interop
        return interop.dlpack_capsule(self.view, (1, 0), self.view.data_ptr())

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("dtype", [mg.float32, mg.float64, mg.int64, mg.bool])
def test_ctypes_dlpack_capsule_is_read_by_numpy_and_cuda_core(dtype):
    import gc

    from minigpu import interop
    t = mg.arange(24).reshape(4, 6).to(dtype)
    for view in (t, t[1:, 1::2], t.T, t[2, 3]):
        a = np.from_dlpack(_CpuCapsule(view))
        assert a.dtype == dtype and a.shape == tuple(view.shape)
        assert a.ctypes.data == view.data_ptr()
        np.testing.assert_array_equal(a, view.numpy())
        assert len(interop._exported) == 1  # kept alive while NumPy holds it
        del a
        gc.collect()
        assert not interop._exported  # the consumer called the deleter
    interop.dlpack_capsule(t, (1, 0), t.data_ptr())  # never consumed: the capsule frees it
    gc.collect()
    assert not interop._exported

    utils = pytest.importorskip("cuda.core.utils")
    view = t[1:, 1::2]
    smv = utils.StridedMemoryView.from_dlpack(_CpuCapsule(view), stream_ptr=-1)
    assert smv.ptr == view.data_ptr() and smv.shape == (3, 3)
    assert smv.strides == (6, 2) and smv.dtype == dtype


def test_cuda_dlpack_under_the_simulator_points_to_the_interface():
    t = mg.ones(3, device="cuda")
    if not mg.cuda.is_simulator():
        pytest.skip("on a GPU cuda tensors export DLPack")
    with pytest.raises(BufferError, match="under the simulator.*__cuda_array_interface__"):
        t.__dlpack__()
    assert mg.from_dlpack(t).data_ptr() == t.data_ptr()


@pytest.mark.gpu
def test_cuda_tensor_exports_dlpack_on_a_gpu():
    utils = pytest.importorskip("cuda.core.utils")
    t = mg.arange(24, dtype=mg.float32, device="cuda").reshape(4, 6)
    view = t[1:, 1::2]
    smv = utils.StridedMemoryView.from_dlpack(view, stream_ptr=int(mg.cuda.current_stream()))
    assert smv.is_device_accessible and smv.ptr == view.data_ptr()
    assert smv.shape == (3, 3) and smv.strides == (6, 2)
    assert view.__cuda_array_interface__["stream"] == int(mg.cuda.current_stream())
