"""Handing tensors to other libraries and to your own kernels, without copying.

- ``Tensor.data_ptr()``: the address of the tensor's first element (its view's, not the
  buffer's). On the simulator the "device" memory is a NumPy array in host memory, so the
  pointer is that array's host address.
- ``Tensor.__cuda_array_interface__`` (version 3) on cuda tensors: what Numba, CuPy and
  ``torch.as_tensor(..., device="cuda")`` read. ``shape`` and byte ``strides`` are the
  view's, ``data`` points at its first element, ``stream`` is the stream minigpu queues work
  on (``None`` on the simulator, where every launch has finished when it returns). So
  ``my_kernel[grid, block](t[:, 1::2])`` writes straight into ``t``.
- ``Tensor.__dlpack__`` / ``__dlpack_device__`` and :func:`from_dlpack`: the DLPack
  exchange (``np.from_dlpack(t)``, ``torch.from_dlpack(t)``). cpu tensors go through NumPy's
  DLPack, sharing memory both ways; cuda tensors on a GPU export a capsule built here with
  ctypes (the same builder is tested on the cpu, where NumPy consumes it). Under the
  simulator cuda tensors do not export DLPack: their memory is host memory.

See ``docs/custom_kernels.md``.
"""
from __future__ import annotations

import ctypes

import numpy as np

from . import backends
from .ops.registry import method
from .tensor import Tensor, _check_dtype

KDL_CPU, KDL_CUDA = 1, 2  # DLPack device types


def _host_array(t: Tensor) -> np.ndarray:
    """A NumPy array aliasing t's view of its host-memory buffer (cpu, or simulated cuda)."""
    flat = t._buf if t.device.type == "cpu" else t._buf._ary
    item = flat.itemsize
    if t.numel() == 0:
        return flat[:0].reshape(t.shape)
    return np.lib.stride_tricks.as_strided(flat[t._offset:], shape=tuple(t.shape),
                                           strides=tuple(s * item for s in t._strides))


def data_ptr(t: Tensor) -> int:
    """Address of the first element of this view (host address of the simulated buffer under
    the simulator)."""
    if t.device.type == "cpu" or _simulator():
        return _host_array(t).ctypes.data if t.numel() else 0
    base = t._buf.device_ctypes_pointer.value or 0
    return base + t._offset * t.dtype.itemsize if t.numel() else 0


def _simulator() -> bool:
    return backends.cuda_module("device").SIMULATOR


def cuda_array_interface(t: Tensor) -> dict:
    if t.device.type != "cuda":
        raise AttributeError(f"Can't get __cuda_array_interface__ on non-CUDA tensor type: "
                             f"{t.device} tensor")
    if t.requires_grad:
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad. "
                           "If gradients aren't required, use var.detach() to get Variable "
                           "that doesn't require grad.")
    item = t.dtype.itemsize
    stream = None
    if not _simulator():
        stream = int(backends.cuda_module("device").current_stream())
    return {"shape": tuple(t.shape),
            "strides": None if t.is_contiguous() else tuple(s * item for s in t._strides),
            "typestr": t.dtype.str, "data": (data_ptr(t), False), "version": 3,
            "stream": stream}


def dlpack_device(t: Tensor) -> tuple:
    return (KDL_CPU, 0) if t.device.type == "cpu" else (KDL_CUDA, 0)


def dlpack(t: Tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    if t.requires_grad:
        raise RuntimeError("Can't export tensors that require gradient, use tensor.detach()")
    if t.device.type == "cpu":
        kwargs = {"stream": stream}
        if max_version is not None:
            kwargs["max_version"] = max_version
        if dl_device is not None:
            kwargs["dl_device"] = dl_device
        if copy is not None:
            kwargs["copy"] = copy
        return _host_array(t).__dlpack__(**kwargs)
    if _simulator():
        raise BufferError(
            "DLPack export of a cuda tensor under the simulator: its 'device' memory is host "
            "memory, which no DLPack consumer may read as CUDA memory. Pass the tensor itself "
            "to your @cuda.jit kernel (it reads __cuda_array_interface__), or use .cpu().")
    if dl_device is not None and tuple(dl_device) != (KDL_CUDA, 0):
        raise BufferError(f"a cuda tensor cannot be exported to DLPack device {dl_device}; "
                          f"call .cpu() first")
    if copy:
        t = t.clone()
    _order_after_minigpu(stream)
    return dlpack_capsule(t, (KDL_CUDA, 0), data_ptr(t))


def _order_after_minigpu(stream):
    """Make the consumer's ``stream`` (DLPack's convention: None or 1 = legacy default stream,
    2 = per-thread default, -1 = no synchronisation, else a handle) wait for the work minigpu
    has queued, without blocking the host: an event on minigpu's stream that it waits on."""
    if stream == -1:
        return
    from numba import cuda

    device = backends.cuda_module("device")
    current = device.current_stream()
    handle = 1 if stream is None else int(stream)
    if handle == int(current):
        return
    event = cuda.event(timing=False)
    event.record(current)
    event.wait(cuda.external_stream(handle))


# --- a DLPack capsule built with ctypes (cuda tensors on a GPU; NumPy exports cpu ones) ------
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DELETER)]
_DL_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLBool
_exported = {}  # address of a DLManagedTensor -> what must stay alive until its deleter runs


@_DELETER
def _delete_managed(managed):
    _exported.pop(ctypes.addressof(managed.contents), None)


_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [
    ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype, _capsule_is_valid.argtypes = ctypes.c_int, [ctypes.c_void_p,
                                                                        ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.c_void_p,
                                                                         ctypes.c_char_p]


@_CAPSULE_DESTRUCTOR
def _destroy_capsule(capsule):
    """A capsule never consumed (still named "dltensor") frees its tensor; a consumer renames
    it "used_dltensor" and calls the deleter itself when done."""
    if _capsule_is_valid(capsule, b"dltensor"):
        managed = ctypes.cast(_capsule_pointer(capsule, b"dltensor"),
                              ctypes.POINTER(_DLManagedTensor))
        managed.contents.deleter(managed)


def dlpack_capsule(t: Tensor, dl_device, pointer):
    """A legacy ("dltensor") DLPack capsule for t's view at ``pointer`` on ``dl_device``; it
    keeps t's buffer alive until the consumer calls the deleter."""
    shape = (ctypes.c_int64 * max(t.ndim, 1))(*t.shape)
    strides = (ctypes.c_int64 * max(t.ndim, 1))(*t._strides)
    managed = _DLManagedTensor()
    managed.dl_tensor = _DLTensor(
        ctypes.c_void_p(pointer), _DLDevice(*dl_device), t.ndim,
        _DLDataType(_DL_CODES[t.dtype.kind], t.dtype.itemsize * 8, 1),
        ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
        ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)), 0)
    managed.deleter = _delete_managed
    _exported[ctypes.addressof(managed)] = (managed, shape, strides, t._buf)
    return _capsule_new(ctypes.addressof(managed), b"dltensor", _destroy_capsule)


def from_dlpack(ext) -> Tensor:
    """A tensor sharing memory with ``ext`` (anything with ``__dlpack__``: a NumPy array, a
    PyTorch cpu tensor, ...), or with the cuda object behind a ``__cuda_array_interface__``.
    Writes through either one are seen by the other."""
    if isinstance(ext, Tensor):
        return ext.detach()
    kind = ext.__dlpack_device__()[0] if hasattr(ext, "__dlpack_device__") else None
    if kind == KDL_CPU:
        return _wrap_host(np.from_dlpack(ext))
    if hasattr(ext, "__cuda_array_interface__"):
        return _wrap_cuda(ext)
    raise BufferError(f"from_dlpack: cannot read a {type(ext).__name__} on DLPack device type "
                      f"{kind} (minigpu reads cpu DLPack tensors and cuda objects with a "
                      f"__cuda_array_interface__)")


def _wrap_host(a: np.ndarray) -> Tensor:
    _check_dtype(a.dtype)
    item = a.itemsize
    if a.size == 0:  # no memory to share
        return Tensor._from_array(a, "cpu")
    if any(s < 0 or s % item for s in a.strides):
        raise BufferError(f"from_dlpack: cannot share memory with an array of strides "
                          f"{a.strides} (bytes) and itemsize {item}")
    return Tensor._sharing(a)


def _wrap_cuda(ext) -> Tensor:
    from numba import cuda
    arr = cuda.as_cuda_array(ext)
    _check_dtype(arr.dtype)
    if not arr.is_c_contiguous():
        raise BufferError("from_dlpack: only C-contiguous cuda arrays can be shared; call "
                          ".contiguous() (or the library's equivalent) first")
    return Tensor._dense(arr.reshape(arr.size), arr.shape, "cuda")


method(data_ptr, "data_ptr")
method(property(cuda_array_interface, doc=cuda_array_interface.__doc__),
       "__cuda_array_interface__")
method(dlpack, "__dlpack__")
method(dlpack_device, "__dlpack_device__")
