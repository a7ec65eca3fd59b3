"""Elementwise ops: arithmetic with broadcasting, math functions, activations, comparisons.

Every map comes from the op table (``backends/optable.py``): each op with a derivative is one
``Function`` class here (``Unary`` or ``Binary`` plus the table entry), and each op marked
``method=True`` is one public function (``exp``, ``relu``, ``maximum``, ...). The functions
below add what the table does not say: Python-scalar fast paths (``x + 3`` is one ``affine``
map), dtype promotion, ``where`` and comparisons.

Broadcasting never copies: both operands become stride-0 views of the output shape and one
``binary`` kernel reads them. Backward undoes the broadcast with ``sum_to``.
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from .. import dtypes
from ..autograd import Function
from ..backends import optable
from ..backends.contract import View
from ..tensor import Device, Tensor, _check_dtype, check_memory_format, float32
from .common import as_float, check_same_device, new, promote
from .registry import method, op
from .shape import ToDevice, broadcast_shapes, clone, expand_strides, expand_view, sum_to


# --- the maps of the op table: one Function per differentiable op -------------------------
class Unary(Function):
    """y = op(x, alpha, beta); the derivative is the op's ``grad`` in ``backends/optable.py``
    (a fused map has a Tensor-op form for create_graph, or raises naming the op)."""

    entry: optable.Op
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, alpha=0.0, beta=0.0):
        self.alpha, self.beta = alpha, beta
        y = Tensor._result(x.backend.unary(self.entry.name, x._view(), alpha, beta), x.shape,
                           x.device)
        saves = self.entry.saves
        self.save_for_backward(x if "x" in saves else None, y if "y" in saves else None)
        return y

    def backward(self, g):
        x, y = self.saved_tensors
        return self.entry.grad(g, x, y, self.alpha, self.beta)


def broadcast_views(a: Tensor, b: Tensor):
    """(output shape, view of a, view of b): both operands as views of the broadcast shape."""
    if a.shape == b.shape:  # the common case: nothing to broadcast
        return a.shape, a._view(), b._view()
    shape, strides_a, strides_b = _broadcast_layout(a.shape, a._strides, b.shape, b._strides)
    return (shape, View(a._buf, shape, strides_a, a._offset),
            View(b._buf, shape, strides_b, b._offset))


@functools.lru_cache(maxsize=1024)
def _broadcast_layout(shape_a, strides_a, shape_b, strides_b):
    """(shape, strides of a, strides of b) of two broadcast operands. Cached: a training step
    broadcasts the same layouts (a bias over a batch, ...) at every step."""
    shape = broadcast_shapes(shape_a, shape_b)
    return (shape, expand_strides(shape_a, strides_a, shape),
            expand_strides(shape_b, strides_b, shape))


class Binary(Function):
    """z = op(x, y) with broadcasting (stride-0 views, no copy). One gradient rule for every
    binary op: each input's derivative from the table, computed only when that input needs
    it, then summed back to the input's shape (``sum_to`` undoes the broadcast). Inputs are
    saved only when the derivatives read them (``add``/``sub`` need only the shapes)."""

    entry: optable.Op
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, a, b):
        shape, va, vb = broadcast_views(a, b)
        self.shapes = a.shape, b.shape
        if self.entry.saves:
            self.save_for_backward(a, b)
        return Tensor._result(a.backend.binary(self.entry.name, va, vb), shape, a.device)

    def backward(self, g):
        a, b = self.saved_tensors if self.entry.saves else (None, None)
        dx, dy = self.entry.grad
        shape_a, shape_b = self.shapes
        return (sum_to(dx(g, a, b), shape_a) if self.needs_input_grad[0] else None,
                sum_to(dy(g, a, b), shape_b) if self.needs_input_grad[1] else None)


def _function(base, entry, suffix=""):
    """The Function class of a table op, named after it (``relu`` -> ``Relu``)."""
    name = "".join(part.title() for part in entry.name.split("_")) + suffix
    return type(name, (base,), {"entry": entry, "__doc__": f"{entry.name}: {entry.formula}",
                                "__module__": __name__})


UNARY_FUNCTIONS = {op.name: _function(Unary, op, "Scalar" if op.name in optable.BINARY_BY_NAME
                                      else "") for op in optable.UNARY if op.grad}
BINARY_FUNCTIONS = {op.name: _function(Binary, op) for op in optable.BINARY if op.grad}
Affine, DivScalar, RDiv, PowScalar, RPow, Clamp, LeakyRelu = (
    UNARY_FUNCTIONS[n] for n in ("affine", "div_scalar", "rdiv", "pow", "rpow", "clamp",
                                 "leaky_relu"))
Add, Sub, Mul, Div, Pow = (BINARY_FUNCTIONS[n] for n in ("add", "sub", "mul", "div", "pow"))


def _table_function(op, binary):
    """``minigpu.<name>`` for a table op with ``method=True`` (``F.<name>`` with ``F=True``)."""
    if binary:
        def fn(a, b):
            return BINARY_FUNCTIONS[op.name].apply(*tensor_operands(a, b))
    elif op.grad is None:
        def fn(x):
            return new(x.backend.unary(op.name, x._view()), x.shape, x)
    else:
        def fn(x):
            return UNARY_FUNCTIONS[op.name].apply(as_float(x) if op.float_input else x)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"Elementwise ``{op.formula}``."
    return fn


_PUBLIC = {entry.name: (entry, binary)
           for entries, binary in ((optable.UNARY, False), (optable.BINARY, True))
           for entry in entries if entry.method or entry.F}
TABLE_FUNCTIONS = {name: _table_function(entry, binary)
                   for name, (entry, binary) in _PUBLIC.items()}
"""The public functions the op table defines (``minigpu.exp``, ``minigpu.maximum``, ...)."""
for _name, (_entry, _) in _PUBLIC.items():
    op(TABLE_FUNCTIONS[_name], method=_entry.method, mg=_entry.method, F=_entry.F,
       module=_entry.module)
globals().update(TABLE_FUNCTIONS)
method(TABLE_FUNCTIONS["neg"], "__neg__")
method(TABLE_FUNCTIONS["floor_divide"], "__floordiv__")
method(TABLE_FUNCTIONS["remainder"], "__mod__")


@op(method="__rfloordiv__")
def rfloor_divide(a, b):
    """b // a (``3 // x``)."""
    return TABLE_FUNCTIONS["floor_divide"](b, a)


@op(method="__rmod__")
def rremainder(a, b):
    """b % a (``3 % x``)."""
    return TABLE_FUNCTIONS["remainder"](b, a)


class Cast(Function):
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, dtype):
        self.source = x.dtype
        return new(x.backend.cast(x._view(), dtype), x.shape, x)

    def backward(self, g):
        return g.to(self.source), None


class Where(Function):
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, cond, a, b):
        shape = broadcast_shapes(broadcast_shapes(cond.shape, a.shape), b.shape)
        self.save_for_backward(cond, a, b)
        out = a.backend.where(expand_view(cond, shape), expand_view(a, shape),
                              expand_view(b, shape))
        return new(out, shape, a)

    def backward(self, g):
        cond, a, b = self.saved_tensors
        zero = Tensor._full((), 0.0, g.dtype, g.device)
        ga = sum_to(where(cond, g, zero), a.shape) if self.needs_input_grad[1] else None
        gb = sum_to(where(cond, zero, g), b.shape) if self.needs_input_grad[2] else None
        return None, ga, gb


# --- user-facing functions ------------------------------------------------------------------
def _is_scalar(x):
    return not isinstance(x, Tensor) and isinstance(x, (numbers.Number, np.number, np.bool_))


def tensor_operands(a, b):
    """Two tensors of one dtype on one device; a Python scalar becomes a 0-d tensor."""
    if (isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype == b.dtype
            and a.device.type == b.device.type):
        return a, b  # the common case: nothing to convert, promote or check
    like = a if isinstance(a, Tensor) else b
    if not isinstance(a, Tensor):
        a = _scalar_tensor(a, like)
    if not isinstance(b, Tensor):
        b = _scalar_tensor(b, like)
    check_same_device(a, b)
    return promote(a, b)


def _scalar_tensor(value, like):
    """A Python scalar as a 0-d tensor of the dtype it promotes to with ``like`` (``int8 + 300``
    stays int8 and wraps around, ``bool + 3`` is int64, ``int + 2.5`` float32: PyTorch's rules)."""
    if not _is_scalar(value):
        raise TypeError(f"unsupported operand type for a Tensor operation: {type(value).__name__}")
    dtype = dtypes.result_type(like, value)
    if dtype.kind in "iu":
        value = np.asarray(value).astype(dtype).item()  # wraps around, as the integer op will
    return Tensor._full((), value, dtype, like.device)


def _scalar_promoted(x, *values):
    """``x`` cast to the dtype of ``x op values`` (Python scalars, None ignored), PyTorch's
    rule: a float tensor keeps its dtype, an integer one meets a float scalar as float32, a
    bool one meets an int scalar as int64."""
    target = dtypes.result_type(x, *[v for v in values if v is not None])
    return x if x.dtype == target else x.to(target)


@op(mg=True, method=("add", "__add__", "__radd__"), inplace="add_")
def add(a, b, alpha=1):
    if alpha != 1:
        b = b * alpha
    if isinstance(b, Tensor) and isinstance(a, Tensor):  # two tensors: no scalar path to try
        return Add.apply(*tensor_operands(a, b))
    if isinstance(a, Tensor) and _is_scalar(b) and a.dtype.kind == "f":
        return Affine.apply(a, alpha=1.0, beta=float(b))
    if isinstance(b, Tensor) and _is_scalar(a) and b.dtype.kind == "f":
        return Affine.apply(b, alpha=1.0, beta=float(a))
    return Add.apply(*tensor_operands(a, b))


@op(mg=True, method=("sub", "__sub__"), inplace="sub_")
def sub(a, b, alpha=1):
    if alpha != 1:
        b = b * alpha
    if isinstance(a, Tensor) and _is_scalar(b) and a.dtype.kind == "f":
        return Affine.apply(a, alpha=1.0, beta=-float(b))
    return Sub.apply(*tensor_operands(a, b))


@op(method="__rsub__")
def rsub(a, b):
    """b - a for a scalar b."""
    if a.dtype.kind == "f" and _is_scalar(b):
        return Affine.apply(a, alpha=-1.0, beta=float(b))
    return sub(*reversed(tensor_operands(a, b)))


@op(mg=True, method=("mul", "__mul__", "__rmul__"), inplace="mul_")
def mul(a, b):
    if isinstance(b, Tensor) and isinstance(a, Tensor):  # two tensors: no scalar path to try
        return Mul.apply(*tensor_operands(a, b))
    if isinstance(a, Tensor) and _is_scalar(b) and a.dtype.kind == "f":
        return Affine.apply(a, alpha=float(b), beta=0.0)
    if isinstance(b, Tensor) and _is_scalar(a) and b.dtype.kind == "f":
        return Affine.apply(b, alpha=float(a), beta=0.0)
    return Mul.apply(*tensor_operands(a, b))


@op(mg=True, method=("div", "__truediv__"), inplace="div_")
def div(a, b):
    if isinstance(a, Tensor) and _is_scalar(b) and b != 0:
        return DivScalar.apply(as_float(a), alpha=float(b))
    a, b = tensor_operands(a, b)
    return Div.apply(as_float(a), as_float(b))


@op(method="__rtruediv__")
def rdiv(a, b):
    """b / a for a scalar b."""
    return RDiv.apply(as_float(a), alpha=float(b))


@op(mg=True, method=("pow", "__pow__"), inplace="pow_")
def pow(a, b):
    if isinstance(a, Tensor) and _is_scalar(b):
        return PowScalar.apply(_scalar_promoted(a, b), alpha=float(b))
    return Pow.apply(*tensor_operands(a, b))


@op(method="__rpow__")
def rpow(a, b):
    """b ** a for a scalar b."""
    return RPow.apply(as_float(a), alpha=float(b))


@op(method=False)
def compare(op, a, b):
    """Elementwise comparison; the result is a bool tensor and carries no gradient."""
    if isinstance(a, Tensor) and _is_scalar(b):
        return new(a.backend.unary(op, a._view(), b), a.shape, a)
    a, b = tensor_operands(a, b)
    shape, va, vb = broadcast_views(a, b)
    return new(a.backend.binary(op, va, vb), shape, a)


@op(mg=True, method=("eq", "__eq__"))
def eq(a, b):
    return compare("eq", a, b)


@op(mg=True, method=("ne", "__ne__"))
def ne(a, b):
    return compare("ne", a, b)


@op(mg=True, method=("gt", "__gt__"))
def gt(a, b):
    return compare("gt", a, b)


@op(mg=True, method=("lt", "__lt__"))
def lt(a, b):
    return compare("lt", a, b)


@op(mg=True, method=("ge", "__ge__"))
def ge(a, b):
    return compare("ge", a, b)


@op(mg=True, method=("le", "__le__"))
def le(a, b):
    return compare("le", a, b)


@op(mg=True)
def rsqrt(x):
    return PowScalar.apply(as_float(x), alpha=-0.5)


@op
def reciprocal(x):
    return RDiv.apply(as_float(x), alpha=1.0)


@op(module="LeakyReLU")
def leaky_relu(x, negative_slope=0.01):
    return LeakyRelu.apply(x, alpha=float(negative_slope))


@op(mg=True, inplace="clamp_")
def clamp(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("At least one of 'min' or 'max' must not be None")
    lo = -math.inf if min is None else float(min)
    hi = math.inf if max is None else float(max)
    return Clamp.apply(_scalar_promoted(x, min, max), alpha=lo, beta=hi)


clip = op(clamp, name="clip", mg=True)


@op(method=False, mg=True)
def where(cond, a, b):
    if not isinstance(cond, Tensor) or cond.dtype != np.bool_:
        raise TypeError("where expected condition to be a boolean tensor")
    if _is_scalar(a) and _is_scalar(b):
        raise TypeError("where needs at least one tensor among x and y")
    a, b = tensor_operands(a, b)
    check_same_device(cond, a)
    return Where.apply(cond, a, b)


@op(mg=True, inplace="nan_to_num_", example=lambda rng: (rng.standard_normal((3, 4)),))
def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN -> ``nan``, +inf -> ``posinf``, -inf -> ``neginf`` (by default the dtype's largest
    and smallest finite values). The gradient passes where ``x`` is finite, 0 elsewhere."""
    if x.dtype.kind != "f":
        return x.clone()
    info = np.finfo(x.dtype)
    out = where(x.isnan(), float(nan), x)
    out = where(x == math.inf, float(info.max if posinf is None else posinf), out)
    return where(x == -math.inf, float(info.min if neginf is None else neginf), out)


@op(mg=True, inplace="masked_fill_")
def masked_fill(x, mask, value):
    return where(mask, Tensor._full((), value, x.dtype, x.device), x)


@op
def all(x):
    """A 0-d bool tensor: True when every element is non-zero."""
    return compare("ne", x, 0).to(float32).min() > 0.5


@op
def any(x):
    """A 0-d bool tensor: True when some element is non-zero."""
    return compare("ne", x, 0).to(float32).max() > 0.5


@op
def to(self, *args, **kwargs):
    """``to(device)``, ``to(dtype)`` or ``to(device, dtype)``; a no-op returns self (a copy
    with ``copy=True``). ``non_blocking`` and row-major ``memory_format``s are accepted."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)  # device work is queued on the current stream anyway
    copy = kwargs.pop("copy", False)
    if "memory_format" in kwargs:
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
        out = Cast.apply(out, _check_dtype(dtype))
    if device is not None and Device(device) != self.device:
        out = ToDevice.apply(out, Device(device))
    return clone(out) if copy and out is self else out


# --- bitwise ops: integers and bool, as PyTorch (the maps are table entries) ---------------
def _bitwise(name, a, b, refuses_bool=False):
    a, b = tensor_operands(a, b)
    if a.dtype.kind == "f" or (refuses_bool and a.dtype.kind == "b"):
        kernel = {"bitwise_left_shift": "lshift", "bitwise_right_shift": "rshift"}.get(name, name)
        raise RuntimeError(f'"{kernel}_cpu" not implemented for '
                           f"'{dtypes.SCALAR_NAMES[a.dtype]}'")
    shape, va, vb = broadcast_views(a, b)
    return new(a.backend.binary(name, va, vb), shape, a)


@op(mg=True, method=("bitwise_and", "__and__", "__rand__"))
def bitwise_and(a, b):
    return _bitwise("bitwise_and", a, b)


@op(mg=True, method=("bitwise_or", "__or__", "__ror__"))
def bitwise_or(a, b):
    return _bitwise("bitwise_or", a, b)


@op(mg=True, method=("bitwise_xor", "__xor__", "__rxor__"))
def bitwise_xor(a, b):
    return _bitwise("bitwise_xor", a, b)


@op(mg=True, method=("bitwise_left_shift", "__lshift__"))
def bitwise_left_shift(a, b):
    return _bitwise("bitwise_left_shift", a, b, refuses_bool=True)


@op(mg=True, method=("bitwise_right_shift", "__rshift__"))
def bitwise_right_shift(a, b):
    return _bitwise("bitwise_right_shift", a, b, refuses_bool=True)


@op(mg=True, method=("bitwise_not", "__invert__"))
def bitwise_not(x):
    """~x: the complement of each bit (x ^ -1), logical not for bool (x ^ True)."""
    if x.dtype.kind == "f":
        raise RuntimeError(f"\"bitwise_not_cpu\" not implemented for "
                           f"'{dtypes.SCALAR_NAMES[x.dtype]}'")
    return _bitwise("bitwise_xor", x, True if x.dtype.kind == "b" else -1)


@op(mg=True)
def logical_not(x):
    return x == 0


@op(mg=True)
def logical_and(a, b):
    return bitwise_and(a != 0, b != 0)


@op(mg=True)
def logical_or(a, b):
    return bitwise_or(a != 0, b != 0)


@op(mg=True)
def logical_xor(a, b):
    return bitwise_xor(a != 0, b != 0)
