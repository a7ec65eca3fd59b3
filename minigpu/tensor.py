"""Tensor: a flat device buffer, a strided layout over it, and an autograd node.

Methods and operators only forward to ``ops``; no math happens here.
"""
from __future__ import annotations

import weakref

import numpy as np

from . import autograd, backends
from .backends.contract import View, is_contiguous, numel, row_major_strides
from .tensor_methods import TensorMethods

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)
long = int64
_DTYPES = {np.dtype(d) for d in (np.float32, np.float64, np.int64, np.bool_)}


class Size(tuple):
    """A tensor's shape: a tuple, like ``torch.Size``."""

    def numel(self) -> int:
        return numel(self)

    def __repr__(self):
        return f"minigpu.Size({list(self)})"


class Device:
    """``device(type='cuda')``; compares equal to its string form."""

    __slots__ = ("type",)

    def __init__(self, spec):
        spec = spec.type if isinstance(spec, Device) else str(spec)
        kind, _, index = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise RuntimeError(f"Expected one of cpu, cuda device type at start of device "
                               f"string: {spec}")
        if _ and not index.isdigit():
            raise RuntimeError(f"Invalid device string: '{spec}'")
        if _ and int(index) != 0:
            raise RuntimeError(f"CUDA error: invalid device ordinal: '{spec}' (minigpu uses one "
                               f"device of each type: '{kind}' or '{kind}:0')")
        self.type = kind

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
        return f"device(type='{self.type}')"


def device(spec) -> Device:
    return Device(spec)


def _check_dtype(dtype):
    if dtype is None:
        return None
    if dtype is bool:
        return bool_
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    d = np.dtype(dtype)
    if d not in _DTYPES:
        raise TypeError(f"minigpu supports float32, float64, int64 and bool tensors, not {d}")
    return d


class Tensor(TensorMethods):
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

    # --- construction helpers used by ops and factories ----------------------------------
    @classmethod
    def _dense(cls, buf, shape, device):
        """A dense tensor of ``shape`` (any sequence of ints) on ``buf`` (what every primitive
        returns); ``device`` may be a string."""
        return cls._result(buf, shape if type(shape) is Size else Size(map(int, shape)),
                           device if type(device) is Device else Device(device))

    @classmethod
    def _result(cls, buf, shape, device):
        """``_dense`` for an op's output, without ``__init__``'s conversions: ops pass a tuple
        of ints and a Device (this runs once per op)."""
        t = object.__new__(cls)
        t._buf = buf
        t.shape = shape if type(shape) is Size else Size(shape)
        t._strides = row_major_strides(shape)
        t.device = device
        t.dtype = buf.dtype  # backends' buffers carry a NumPy dtype
        t._version_counter = [0]  # shared with every view of the same buffer
        return t

    @classmethod
    def _from_array(cls, array, device, dtype=None, requires_grad=False):
        a = np.asarray(array, dtype=_check_dtype(dtype))
        if a.dtype not in _DTYPES:
            a = a.astype(float32 if a.dtype.kind == "f" else int64)
        dev = Device(device)
        t = cls._dense(backends.get(dev.type).from_numpy(a), a.shape, dev)
        return t.requires_grad_(requires_grad) if requires_grad else t

    @classmethod
    def _full(cls, shape, value, dtype, device):
        dev = device if type(device) is Device else Device(device)  # ops pass a Device
        return cls._dense(backends.get(dev.type).full(numel(shape), value, dtype), shape, dev)

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
        return self.shape[ops.shape.normalize_dim(dim, self.ndim)]

    def numel(self):
        return numel(self.shape)

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
            raise RuntimeError("Only Tensors of floating point dtype can require gradients")
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

    def backward(self, gradient=None, retain_graph=False):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad``."""
        autograd.backward(self, gradient, retain_graph)

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
    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)`` or ``to(device, dtype)``; a no-op returns self (a copy
        with ``copy=True``). ``non_blocking`` and row-major ``memory_format``s are accepted."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)  # device work is queued on the current stream anyway
        copy = kwargs.pop("copy", False)
        if "memory_format" in kwargs:
            from .tensor_types import check_memory_format
            check_memory_format("to", kwargs.pop("memory_format"))
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, (str, Device)):
                device = a
            else:
                dtype = a
        out = self
        if dtype is not None and _check_dtype(dtype) != self.dtype:
            out = ops.elementwise.Cast.apply(out, _check_dtype(dtype))
        if device is not None and Device(device) != self.device:
            out = ops.shape.ToDevice.apply(out, Device(device))
        return ops.clone(out) if copy and out is self else out

    def cuda(self):
        return self.to("cuda")

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(float32)

    def double(self):
        return self.to(float64)

    def long(self):
        return self.to(int64)

    def bool(self):
        return self.to(bool_)

    def type_as(self, other):
        return self.to(other.dtype)

    def type(self, dtype=None, non_blocking=False):
        """``x.type()``: the type string (``"minigpu.FloatTensor"``, ``"minigpu.cuda.
        LongTensor"``); ``x.type(t)``: ``x`` converted to ``t``, a dtype, a legacy type
        (``mg.LongTensor``) or a type string (``"torch.cuda.FloatTensor"`` too)."""
        from . import tensor_types
        if dtype is None:
            return tensor_types.type_name(self)
        dtype, device = tensor_types.parse(dtype)
        return self.to(dtype) if device is None else self.to(device, dtype)

    # --- new tensors with this tensor's dtype and device (torch's Tensor.new_*) --------------
    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return _creation().tensor(data, *self._like(dtype, device), requires_grad)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_full(_creation()._shape(size), 0, dtype=dtype, device=device,
                             requires_grad=requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return self.new_full(_creation()._shape(size), 1, dtype=dtype, device=device,
                             requires_grad=requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        dtype, device = self._like(dtype, device)
        return _creation().empty(*size, dtype=dtype, device=device, requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        dtype, device = self._like(dtype, device)
        return _creation().full(size, fill_value, dtype=dtype, device=device,
                                requires_grad=requires_grad)

    def _like(self, dtype, device):
        return (self.dtype if dtype is None else dtype,
                self.device if device is None else device)

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

    # --- interop: DLPack, __cuda_array_interface__, data_ptr (see interop.py) ---------------
    def data_ptr(self) -> int:
        """Address of the first element of this view (host address of the simulated buffer
        under the simulator)."""
        return _interop().data_ptr(self)

    @property
    def __cuda_array_interface__(self) -> dict:
        """CUDA Array Interface v3 of this view (cuda tensors only): Numba kernels, CuPy and
        PyTorch read and write the tensor's memory through it."""
        return _interop().cuda_array_interface(self)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _interop().dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple:
        return _interop().dlpack_device(self)
    # --- end of interop ------------------------------------------------------------------

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

    # --- arithmetic: forwarded to ops --------------------------------------------------------
    def __add__(self, other):
        return ops.add(self, other)

    def __radd__(self, other):
        return ops.add(self, other)

    def __sub__(self, other):
        return ops.sub(self, other)

    def __rsub__(self, other):
        return ops.rsub(self, other)

    def __mul__(self, other):
        return ops.mul(self, other)

    def __rmul__(self, other):
        return ops.mul(self, other)

    def __truediv__(self, other):
        return ops.div(self, other)

    def __rtruediv__(self, other):
        return ops.rdiv(self, other)

    def __pow__(self, other):
        return ops.pow(self, other)

    def __rpow__(self, other):
        return ops.rpow(self, other)

    def __neg__(self):
        return ops.neg(self)

    def __floordiv__(self, other):
        return ops.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return ops.floor_divide(other, self)

    def __mod__(self, other):
        return ops.remainder(self, other)

    def __rmod__(self, other):
        return ops.remainder(other, self)

    def __matmul__(self, other):
        return ops.matmul(self, other)

    @property
    def T(self):
        """The tensor with its dimensions reversed (a view, no copy)."""
        return ops.permute(self, *reversed(range(self.ndim)))

    @property
    def mT(self):
        """The last two dimensions swapped (a view, no copy)."""
        return ops.transpose(self, -2, -1)

    def __rmatmul__(self, other):
        return ops.matmul(other, self)

    def __gt__(self, other):
        return ops.compare("gt", self, other)

    def __ge__(self, other):
        return ops.compare("ge", self, other)

    def __lt__(self, other):
        return ops.compare("lt", self, other)

    def __le__(self, other):
        return ops.compare("le", self, other)

    def __eq__(self, other):
        return ops.compare("eq", self, other)

    def __ne__(self, other):
        return ops.compare("ne", self, other)

    def __getitem__(self, index):
        return ops.getitem(self, index)

    # --- in-place ops (minigpu/ops/inplace.py): write through the view, bump _version ------
    @property
    def _version(self):
        """How many in-place writes this tensor's buffer has seen (shared by its views)."""
        return self._version_counter[0]

    def _refresh_view(self):
        """(grad_fn, output index) of a view whose base was written in place since its
        grad_fn was set: the view is re-derived from the base's current node."""
        return ops.refresh_view(self)

    def __setitem__(self, index, value):
        ops.setitem_(self, index, value)

    def add_(self, other, alpha=1):
        return ops.add_(self, other, alpha)

    def sub_(self, other, alpha=1):
        return ops.sub_(self, other, alpha)

    def mul_(self, other):
        return ops.mul_(self, other)

    def div_(self, other):
        return ops.div_(self, other)

    def pow_(self, exponent):
        return ops.pow_(self, exponent)

    def clamp_(self, min=None, max=None):
        return ops.clamp_(self, min, max)

    clip_ = clamp_

    def addcmul_(self, tensor1, tensor2, value=1):
        return ops.addcmul_(self, tensor1, tensor2, value)

    def addcdiv_(self, tensor1, tensor2, value=1):
        return ops.addcdiv_(self, tensor1, tensor2, value)

    def sqrt_(self):
        return ops.sqrt_(self)

    def masked_fill_(self, mask, value):
        return ops.masked_fill_(self, mask, value)

    def fill_(self, value):
        return ops.fill_(self, value)

    def zero_(self):
        return ops.zero_(self)

    def copy_(self, src, non_blocking=False):
        """Copy src into self (any dtype, any device; ``non_blocking`` is accepted: device work
        is queued on the current stream anyway)."""
        return ops.copy_(self, src)

    def uniform_(self, a=0.0, b=1.0, generator=None):
        return ops.uniform_(self, a, b, generator)

    def normal_(self, mean=0.0, std=1.0, generator=None):
        return ops.normal_(self, mean, std, generator)

    def __iadd__(self, other):
        return ops.add_(self, other)

    def __isub__(self, other):
        return ops.sub_(self, other)

    def __imul__(self, other):
        return ops.mul_(self, other)

    def __itruediv__(self, other):
        return ops.div_(self, other)

    def __ipow__(self, other):
        return ops.pow_(self, other)
    # --- end of in-place ops -----------------------------------------------------------------


def _interop():
    from . import interop
    return interop


def _creation():
    from . import creation
    return creation


autograd.Tensor = Tensor  # what Function.apply checks its arguments against

# The operators above call ``ops``, whose modules import Tensor from here: imported last, once
# Tensor exists (a plain module attribute then, not an import per operator call).
from . import ops  # noqa: E402
