"""Tensor factories: from data, constants, ranges and random numbers."""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from . import backends
from .random import default_generator
from .ops.inplace import copy_
from .ops.registry import method
from .tensor import _DTYPES, Device, Tensor, _check_dtype, float32, int64


def _shape(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(shape)}")
    return shape


_CPU = Device("cpu")


def _device(device):
    return _CPU if device is None else device if type(device) is Device else Device(device)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor copying ``data`` (nested lists, numbers, NumPy arrays or a Tensor)."""
    if isinstance(data, Tensor):
        data = data.detach().numpy()
    array = np.asarray(data)
    if dtype is None and not isinstance(data, (np.ndarray, np.generic)):
        # Python data: floats are float32 (the default dtype) and ints int64, as in PyTorch;
        # NumPy arrays and scalars keep their dtype.
        if array.dtype.kind == "f":
            dtype = float32
        elif array.dtype.kind in "iu":
            dtype = int64
    if array.dtype.kind not in "fiub":
        raise TypeError(f"can't convert data of type {array.dtype} to a tensor")
    return Tensor._from_array(array, _device(device), dtype, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """``data`` itself when it already is a tensor of that dtype and device; a cpu tensor
    sharing a NumPy array's memory when no conversion is asked for (as ``torch.as_tensor``);
    otherwise a copy."""
    dtype = _check_dtype(dtype)
    if isinstance(data, Tensor) and (dtype is None or dtype == data.dtype) and (
            device is None or Device(device) == data.device):
        return data
    if (isinstance(data, np.ndarray) and (dtype is None or dtype == data.dtype)
            and data.dtype in _DTYPES and (device is None or Device(device).type == "cpu")):
        return from_numpy(data)
    return tensor(data, dtype, device)


_NUMPY_KINDS = "float64, float32, float16, int64, int32, int16, int8, uint8, and bool"


def from_numpy(array):
    """A cpu tensor on ``array``'s memory, as ``torch.from_numpy``: a write through either is
    seen by the other (a write through NumPy is invisible to autograd, as in PyTorch), and of
    its dtype."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    if array.dtype not in _DTYPES:
        raise TypeError(f"can't convert np.ndarray of type numpy.{array.dtype.type.__name__}. "
                        f"The only supported types are: {_NUMPY_KINDS}.")
    if any(s < 0 for s in array.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and "
                         "tensors with negative strides are not currently supported. (You can "
                         "probably work around this by making a copy of your array with "
                         "array.copy().)")
    if not array.flags.writeable or any(s % array.itemsize for s in array.strides):
        if not array.flags.writeable:
            warnings.warn("The given NumPy array is not writable, and minigpu does not support "
                          "non-writable tensors: the tensor is a copy of it.", UserWarning,
                          stacklevel=2)
        return Tensor._from_array(array, "cpu")
    return Tensor._sharing(array)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    shape = _shape((size,) if isinstance(size, numbers.Integral) else (tuple(size),))
    if dtype is None:
        dtype = (np.bool_ if isinstance(fill_value, bool) else
                 int64 if isinstance(fill_value, numbers.Integral) else float32)
    t = Tensor._full(shape, fill_value, _check_dtype(dtype), _device(device))
    return t.requires_grad_(requires_grad) if requires_grad else t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return full(_shape(size), 0.0, dtype or float32, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return full(_shape(size), 1.0, dtype or float32, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    shape = _shape(size)
    dev = _device(device)
    buf = backends.get(dev.type).empty(int(np.prod(shape)), _check_dtype(dtype) or float32)
    t = Tensor._dense(buf, shape, dev)
    return t.requires_grad_(requires_grad) if requires_grad else t


def _like(x, dtype, device):
    return dict(dtype=dtype or x.dtype, device=device or x.device)


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    return full(x.shape, 0, **_like(x, dtype, device), requires_grad=requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    return full(x.shape, 1, **_like(x, dtype, device), requires_grad=requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False):
    return full(x.shape, fill_value, **_like(x, dtype, device), requires_grad=requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False):
    return empty(*x.shape, **_like(x, dtype, device), requires_grad=requires_grad)


def _random(kind, size, dtype, device, requires_grad, generator):
    shape = _shape(size)
    dtype = _check_dtype(dtype) or float32
    if dtype.kind != "f":
        raise TypeError(f"{kind} expects a floating point dtype, got {dtype}")
    dev = _device(device)
    n = math.prod(shape)
    seed, offset = (generator or default_generator).take(n)
    backend = backends.get(dev.type)
    draw = backend.random_normal if kind == "randn" else backend.random_uniform
    t = Tensor._dense(draw(n, seed, offset, dtype), shape, dev)
    return t.requires_grad_(requires_grad) if requires_grad else t


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Standard normal samples; the same seed gives the same numbers on cpu and cuda."""
    return _random("randn", size, dtype, device, requires_grad, generator)


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """Uniform samples in [0, 1)."""
    return _random("rand", size, dtype, device, requires_grad, generator)


def randn_like(x, dtype=None, device=None):
    return randn(*x.shape, **_like(x, dtype, device))


def rand_like(x, dtype=None, device=None):
    return rand(*x.shape, **_like(x, dtype, device))


def randint(low, high=None, size=(), dtype=None, device=None, generator=None):
    """Integers in [low, high); ``randint(high, size)`` as in PyTorch."""
    if high is None or isinstance(high, (tuple, list)):
        low, high, size = 0, low, size if high is None else high
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    u = rand(*_shape((tuple(size),)), dtype=np.float64, device=device, generator=generator)
    return (u * (high - low)).to(_check_dtype(dtype) or int64) + low


def randperm(n, device=None, generator=None):
    perm = (generator or default_generator).numpy_rng().permutation(int(n))
    return Tensor._from_array(perm.astype(np.int64), _device(device))


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    values = np.arange(start, end, step)
    if dtype is None:
        dtype = int64 if all(isinstance(v, numbers.Integral) for v in (start, end, step)) \
            else float32
    return Tensor._from_array(values, _device(device), dtype, requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    return Tensor._from_array(np.linspace(start, end, int(steps)), _device(device),
                              dtype or float32, requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    return Tensor._from_array(np.eye(n, m), _device(device), dtype or float32, requires_grad)


# --- Tensor methods that build with the factories (torch's Tensor.new_*, uniform_, normal_) --
def _new_like(x, dtype, device):
    return (x.dtype if dtype is None else dtype, x.device if device is None else device)


def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return tensor(data, *_new_like(self, dtype, device), requires_grad)


def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
    dtype, device = _new_like(self, dtype, device)
    return full(size, fill_value, dtype=dtype, device=device, requires_grad=requires_grad)


def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
    return new_full(self, _shape(size), 0, dtype=dtype, device=device,
                    requires_grad=requires_grad)


def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
    return new_full(self, _shape(size), 1, dtype=dtype, device=device,
                    requires_grad=requires_grad)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    dtype, device = _new_like(self, dtype, device)
    return empty(*size, dtype=dtype, device=device, requires_grad=requires_grad)


def uniform_(x, a=0.0, b=1.0, generator=None):
    """Fill x in place with samples of U(a, b)."""
    return copy_(x, rand(*x.shape, dtype=x.dtype, device=x.device, generator=generator)
                 * (b - a) + a)


def normal_(x, mean=0.0, std=1.0, generator=None):
    """Fill x in place with samples of N(mean, std**2)."""
    return copy_(x, randn(*x.shape, dtype=x.dtype, device=x.device, generator=generator)
                 * std + mean)


for _fn in (new_tensor, new_full, new_zeros, new_ones, new_empty, uniform_, normal_):
    method(_fn, _fn.__name__)
