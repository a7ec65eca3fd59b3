"""Tensor: a flat device buffer, a strided layout over it, and an autograd node.

No math happens here, and this module imports only downward (``autograd``, ``backends``): the
op methods and operators (``x.exp()``, ``x + y``, ``x.to(...)``, ``x[i]``) are the op
functions themselves, set on the class where each op is defined (``ops/registry.py``), and the
factories and interop above the ops set theirs (``x.new_zeros``, ``x.data_ptr``, ...) the same
way; ``import minigpu`` imports them all.
"""
from __future__ import annotations

import numbers
import weakref

import numpy as np

from . import autograd, backends, dtypes
from .backends.contract import View, is_contiguous, numel, row_major_strides
from .dtypes import (bool_, float16, float32, float64, int8, int16, int32, int64,  # noqa: F401
                     uint8)

long = int64
_DTYPES = frozenset(dtypes.DTYPES)


class Size(tuple):
    """A tensor's shape: a tuple, like ``torch.Size``."""

    def numel(self) -> int:
        return numel(self)

    def __repr__(self):
        return f"minigpu.Size({list(self)})"


class Device:
    """``device(type='cuda')``; compares equal to its string form. ``index`` as in torch: the
    ordinal when one was given (``'cuda:0'``, ``device('cuda', 0)``), else None."""

    __slots__ = ("type", "index")

    def __init__(self, spec, index=None):
        if isinstance(spec, Device):
            spec = spec.type if spec.index is None else f"{spec.type}:{spec.index}"
        spec = str(spec) if index is None else f"{spec}:{index}"
        kind, _, index = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device "
                               f"string: {spec}")
        if _ and not index.isdigit():
            raise RuntimeError(f"Invalid device string: '{spec}'")
        if _ and int(index) != 0:
            raise RuntimeError(f"CUDA error: invalid device ordinal: '{spec}' (minigpu uses one "
                               f"device of each type: '{kind}' or '{kind}:0')")
        self.type, self.index = kind, int(index) if _ else None

    def __eq__(self, other):
        if type(other) is Device:  # the common case, without parsing a device string
            return self.type == other.type
        try:
            return self.type == Device(other).type
        except (RuntimeError, TypeError):
            return False

    def __hash__(self):
        return hash(self.type)

    def __str__(self):
        return self.type

    def __repr__(self):
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{index})"


def device(spec, index=None) -> Device:
    return Device(spec, index)


class memory_format:
    """PyTorch's memory formats. minigpu tensors are row-major: ``contiguous_format`` and
    ``preserve_format`` are accepted wherever PyTorch takes ``memory_format=``;
    ``channels_last`` (NHWC strides) is refused, naming the feature."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"minigpu.{self.name}"


contiguous_format, preserve_format = memory_format("contiguous_format"), memory_format(
    "preserve_format")
channels_last, channels_last_3d = memory_format("channels_last"), memory_format(
    "channels_last_3d")


def check_memory_format(what, fmt):
    """Refuse a memory format minigpu does not have (``None`` and the row-major ones pass)."""
    if fmt is None or fmt is contiguous_format or fmt is preserve_format:
        return
    if fmt is channels_last or fmt is channels_last_3d:
        raise NotImplementedError(f"{what}: memory_format={fmt!r} (channels-last strides) is not "
                                  f"supported by minigpu: its tensors are row-major; use "
                                  f"minigpu.contiguous_format")
    raise TypeError(f"{what}: memory_format must be a minigpu memory format, got {fmt!r}")


def normalize_dim(dim, ndim):
    """A non-negative dim index, with PyTorch's error for out-of-range values."""
    if type(dim) is not int and not isinstance(dim, (numbers.Integral, np.integer)):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    lo, hi = (-ndim, ndim - 1) if ndim else (-1, 0)
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], "
                         f"but got {dim})")
    return int(dim) % max(ndim, 1)


_check_dtype = dtypes.to_dtype


class Tensor(autograd.TensorBase):
    """An n-dimensional array on ``cpu`` or ``cuda`` that can record gradients."""

    __array_priority__ = 1000  # numpy scalars defer to Tensor operators
    # What a new tensor starts with. Class attributes, so that creating a tensor (once per
    # op) sets only what differs; assigning one on an instance shadows the default.
    grad = None
    grad_fn = None
    requires_grad = False
    _output_index = 0  # which output of grad_fn this tensor is
    _retains_grad = False
    _base = None  # the tensor whose buffer a view looks into (None: not a view)
    _grad_hooks = None  # {handle id: hook} of a leaf, from register_hook
    _fn_version = 0  # the version at which grad_fn was set (a view's goes stale after writes)
    _offset = 0  # where the tensor starts in its buffer, in elements
    _layout = None  # the View the backends see, made on first use (see _view)

    def __init__(self, buf, shape, strides, offset, device, requires_grad=False):
        self._buf = buf
        # Ops pass a Size (or a tuple) of ints and a Device: kept as they are (one type check
        # each); anything else is converted.
        self.shape = shape if type(shape) is Size else Size(map(int, shape))
        self._strides = strides if type(strides) is tuple else tuple(map(int, strides))
        self._offset = int(offset)
        self.device = device if type(device) is Device else Device(device)
        self.dtype = np.dtype(buf.dtype)
        self._version_counter = [0]  # shared with every view of the same buffer
        if requires_grad:
            self.requires_grad_(True)

    # --- construction helpers used by ops, factories and the backward engine ----------------
    # Static: they always build a Tensor (never a Parameter), also when called through an
    # instance, as the backward engine (``autograd/``, a floor below) does.
    @staticmethod
    def _dense(buf, shape, device):
        """A dense tensor of ``shape`` (any sequence of ints) on ``buf`` (what every primitive
        returns); ``device`` may be a string."""
        return Tensor._result(buf, shape if type(shape) is Size else Size(map(int, shape)),
                              device if type(device) is Device else Device(device))

    @staticmethod
    def _result(buf, shape, device):
        """``_dense`` for an op's output, without ``__init__``'s conversions: ops pass a tuple
        of ints and a Device (this runs once per op)."""
        t = object.__new__(Tensor)
        t._buf = buf
        t.shape = shape if type(shape) is Size else Size(shape)
        t._strides = row_major_strides(shape)
        t.device = device
        t.dtype = buf.dtype  # backends' buffers carry a NumPy dtype
        t._version_counter = [0]  # shared with every view of the same buffer
        return t

    @staticmethod
    def _sharing(array):
        """A cpu tensor on ``array``'s memory (no copy): its strides, non-negative and in whole
        elements, become the tensor's (``from_numpy``, ``from_dlpack``)."""
        item = array.itemsize
        strides = tuple(s // item for s in array.strides)
        if strides == row_major_strides(array.shape):  # the common case: a flat view
            return Tensor._dense(array.reshape(-1), array.shape, Device("cpu"))
        if array.flags.c_contiguous:  # a flat view too, whose size-1 dims have other strides
            return Tensor(array.reshape(-1), array.shape, strides, 0, "cpu")  # (kept, as PyTorch)
        span = 1 + sum((n - 1) * s for n, s in zip(array.shape, strides)) if array.size else 0
        buf = np.lib.stride_tricks.as_strided(array, shape=(span,), strides=(item,))
        return Tensor(buf, array.shape, strides, 0, "cpu")

    @staticmethod
    def _from_array(array, device, dtype=None, requires_grad=False):
        a = np.asarray(array, dtype=_check_dtype(dtype))
        if a.dtype not in _DTYPES:
            _check_dtype(a.dtype)  # raises, naming the dtypes minigpu has
        dev = device if type(device) is Device else Device(device)
        t = Tensor._dense(backends.get(dev.type).from_numpy(a), a.shape, dev)
        return t.requires_grad_(requires_grad) if requires_grad else t

    @staticmethod
    def _full(shape, value, dtype, device):
        dev = device if type(device) is Device else Device(device)  # ops pass a Device
        return Tensor._dense(backends.get(dev.type).full(numel(shape), value, dtype), shape, dev)

    def _make_view(self, shape, strides, offset):
        """A view of this tensor's buffer: it shares the version counter and the base."""
        view = Tensor(self._buf, shape, strides, offset, self.device)
        view._version_counter = self._version_counter
        view._base = self if self._base is None else self._base
        return view

    def _alias(self):
        return self._make_view(self.shape, self._strides, self._offset)

    @property
    def backend(self):
        """The backend module of this tensor's device (``backends.cpu`` or ``backends.cuda``)."""
        return backends.get(self.device.type)

    def _view(self) -> View:
        """This tensor as the backends see it (buffer, shape, strides, offset), made once: an
        operand is viewed by every op that reads it."""
        layout = self._layout
        if layout is None:
            layout = self._layout = View(self._buf, tuple(self.shape), self._strides,
                                         self._offset)
        return layout

    # --- properties ----------------------------------------------------------------------
    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    def size(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[normalize_dim(dim, self.ndim)]

    def numel(self):
        return numel(self.shape)

    nelement = numel  # torch's older name

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def is_contiguous(self):
        return is_contiguous(self.shape, self._strides)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_xpu(self):
        return False  # minigpu's devices are cpu and cuda

    @property
    def is_mps(self):
        return False

    @property
    def is_leaf(self):
        return self.grad_fn is None

    def is_floating_point(self):
        return self.dtype.kind == "f"

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # --- autograd ------------------------------------------------------------------------
    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.dtype.kind != "f":
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward."""
        if self.grad_fn is None:
            if not self.requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return self
        self._retains_grad = True
        node = self.grad_fn
        if node._retained is None:
            node._retained = {}
        node._retained[self._output_index] = weakref.ref(self)
        return self

    def register_hook(self, hook):
        """``hook(grad)`` runs when this tensor's gradient has been computed; if it returns a
        tensor, that replaces the gradient. Returns a handle whose ``remove()`` unregisters it."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is None:
            return autograd._add_hook(self, "_grad_hooks", hook)
        node = self.grad_fn
        if node._output_hooks is None:
            node._output_hooks = {}
        hooks = node._output_hooks.setdefault(self._output_index, {})
        handle = autograd.RemovableHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def backward(self, gradient=None, retain_graph=None, create_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``; ``create_graph=True`` records
        the backward too (the ``.grad`` can then be differentiated again)."""
        autograd.backward(self, gradient, retain_graph, create_graph)

    def detach(self):
        """The same data, cut from the graph (shares the buffer and the version counter)."""
        out = Tensor(self._buf, self.shape, self._strides, self._offset, self.device)
        out._version_counter = self._version_counter
        return out

    @property
    def data(self):
        """The values without autograd history, with a version counter of their own (changes
        through ``.data`` are invisible to autograd, as in PyTorch); assigning replaces them
        (the tensor object, and so every optimizer that holds it, stays the same)."""
        return Tensor(self._buf, self.shape, self._strides, self._offset, self.device)

    @data.setter
    def data(self, other):
        if tuple(other.shape) != tuple(self.shape) and self.grad_fn is not None:
            raise RuntimeError("data set to a tensor of a different shape")
        self._buf, self.shape, self._strides = other._buf, other.shape, other._strides
        self._offset, self.device, self.dtype = other._offset, other.device, other.dtype
        self._layout = None

    def detach_(self):
        self.grad_fn = None
        self.requires_grad = False
        return self

    # --- transfer ------------------------------------------------------------------------
    def cuda(self):
        return self.to("cuda")

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(float32)

    def double(self):
        return self.to(float64)

    def half(self):
        return self.to(float16)

    def long(self):
        return self.to(int64)

    def int(self):
        return self.to(int32)

    def short(self):
        return self.to(int16)

    def char(self):
        return self.to(int8)

    def byte(self):
        return self.to(uint8)

    def bool(self):
        return self.to(bool_)

    def type_as(self, other):
        return self.to(other.dtype)

    def numpy(self, *, force=False) -> np.ndarray:
        """The tensor as a NumPy array: on cpu, a view of the tensor's memory (writes are seen
        both ways, as in PyTorch); on cuda, a host copy (waits for queued device work).
        ``force=True`` also detaches."""
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        if self.device.type == "cpu":
            return backends.get("cpu").array(self._view())
        return self.backend.to_numpy(self._view())

    def tolist(self):
        return self.detach().numpy().tolist()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted "
                               f"to Scalar")
        return self.detach().numpy().reshape(()).item()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        """``classes[label]`` with a 0-d integer tensor, as in PyTorch."""
        if self.dtype.kind not in "iub" or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an "
                            "index")
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with {self.numel()} elements is "
                               f"ambiguous")
        return bool(self.item())

    def __array__(self, dtype=None, copy=None):
        a = self.detach().numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def __repr__(self):
        body = np.array2string(self.detach().numpy(), separator=", ", precision=4,
                               prefix="tensor(")
        extras = []
        if self.device.type != "cpu":
            extras.append(f"device='{self.device}'")
        if self.dtype not in (float32, int64, bool_):
            extras.append(f"dtype=minigpu.{self.dtype}")
        if self.grad_fn is not None:
            extras.append(f"grad_fn={self.grad_fn!r}")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extras) + ")"

    def __format__(self, format_spec):
        """``f"{loss:.4f}"``: a 0-d tensor formats as its Python number, as in PyTorch (any
        other tensor accepts only the empty format)."""
        if not self.shape:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def __hash__(self):
        return id(self)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def T(self):
        """The tensor with its dimensions reversed (a view, no copy)."""
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        """The last two dimensions swapped (a view, no copy)."""
        return self.transpose(-2, -1)

    @property
    def _version(self):
        """How many in-place writes this tensor's buffer has seen (shared by its views)."""
        return self._version_counter[0]


def owns_dense_buffer(t: Tensor) -> bool:
    """True when t is its whole buffer, in row-major order: what the fused optimizer steps and
    the in-place fast paths update through the flat buffer."""
    return t._offset == 0 and t._buf.size == t.numel() and t.is_contiguous()
