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
  DLPack, sharing memory both ways.

See ``docs/custom_kernels.md``.
"""
from __future__ import annotations

import numpy as np

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
    if t.device.type == "cpu" or _simulator():
        return _host_array(t).ctypes.data if t.numel() else 0
    base = t._buf.device_ctypes_pointer.value or 0
    return base + t._offset * t.dtype.itemsize if t.numel() else 0


def _simulator() -> bool:
    from .backends.cuda import device
    return device.SIMULATOR


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
        from .backends.cuda import device
        stream = int(device.current_stream())
    return {"shape": tuple(t.shape),
            "strides": None if t.is_contiguous() else tuple(s * item for s in t._strides),
            "typestr": t.dtype.str, "data": (data_ptr(t), False), "version": 3,
            "stream": stream}


def dlpack_device(t: Tensor) -> tuple:
    return (KDL_CPU, 0) if t.device.type == "cpu" else (KDL_CUDA, 0)


def dlpack(t: Tensor, stream=None, max_version=None, dl_device=None, copy=None):
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
    raise BufferError(
        "DLPack export of cuda tensors is not implemented yet: pass the tensor itself to "
        "Numba, CuPy or PyTorch, which read its __cuda_array_interface__ (zero-copy), e.g. "
        "torch.as_tensor(t, device='cuda'), cupy.asarray(t), numba.cuda.as_cuda_array(t)")


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
    span = 1 + sum((n - 1) * s // item for n, s in zip(a.shape, a.strides))
    flat = np.lib.stride_tricks.as_strided(a, shape=(span,), strides=(item,))
    return Tensor(flat, a.shape, tuple(s // item for s in a.strides), 0, "cpu")


def _wrap_cuda(ext) -> Tensor:
    from numba import cuda
    arr = cuda.as_cuda_array(ext)
    _check_dtype(arr.dtype)
    if not arr.is_c_contiguous():
        raise BufferError("from_dlpack: only C-contiguous cuda arrays can be shared; call "
                          ".contiguous() (or the library's equivalent) first")
    return Tensor._dense(arr.reshape(arr.size), arr.shape, "cuda")
