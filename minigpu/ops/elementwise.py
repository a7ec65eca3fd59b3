"""Elementwise ops: arithmetic with broadcasting, math functions, activations, comparisons.

Every map comes from the op table (``backends/optable.py``): each op with a derivative is one
``Function`` class here, named after it (``relu`` -> ``Relu``: ``Unary`` with the entry and its
derivative formula compiled, :func:`derivative`), and each op marked ``method=True`` is one
public function (``exp``, ``relu``, ``maximum``, ...). The functions below add what the table
does not say: Python-scalar fast paths (``x + 3`` is one ``affine`` map), dtype promotion,
``where`` and comparisons.

Broadcasting never copies: both operands become stride-0 views of the output shape and one
``binary`` kernel reads them. Backward undoes the broadcast with ``sum_to``.
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from .. import dtypes
from ..autograd import Function, is_grad_enabled
from ..backends import optable
from ..backends.optable import (  # noqa: F401 (names the derivative formulas use)
    GELU_CUBIC, INV_SQRT_2PI, SQRT1_2, SQRT_2_OVER_PI, TWO_OVER_SQRT_PI)
from ..backends.contract import View
from ..tensor import Device, Tensor, _check_dtype, check_memory_format, float32
from .common import as_float, check_same_device, new, promote
from .registry import OPS, Unlike, divisors, method, op
from .shape import ToDevice, broadcast_shapes, clone, expand_strides, expand_view, sum_to


# --- the maps of the op table: one Function per differentiable op -------------------------
def derivative(formula, names):
    """A table op's derivative formula (``backends/optable.py``) as a function of ``names``
    (``"g, x, y, a, b"``). The formula is evaluated in this module, so its names are the
    public functions of the table ops (``exp``, ``sign``, ...), ``where`` and ``clamp``; lines
    ``t = ...`` before the last name parts the last line uses twice."""
    *parts, result = [line.strip() for line in formula.strip().splitlines()]
    source = "\n    ".join([f"def derivative({names}):", *parts, f"return {result}"])
    scope = {}
    exec(compile(source, f"<derivative: {formula}>", "exec"), globals(), scope)
    return scope["derivative"]


def _full(value, shape, like):
    """A derivative's result as a tensor of ``shape`` (a formula's constant ``0`` included)."""
    return value if isinstance(value, Tensor) else Tensor._full(shape, value, like.dtype,
                                                                like.device)


class Unary(Function):
    """y = op(x, alpha, beta); the derivative is the op's formula in ``backends/optable.py``,
    or, with ``fused=``, that one backward map (the formula then serves create_graph)."""

    entry: optable.Op
    derivative: staticmethod  # the entry's formula, compiled: (g, x, y, a, b) -> dx
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
        return self.gradient(g, x, y, self.alpha, self.beta)

    @classmethod
    def gradient(cls, g, x, y, alpha, beta):
        """The op's derivative times ``g``: the fused map when nothing records (one kernel
        instead of a mask and a multiply, which would record no graph), else the formula."""
        fused = cls.entry.fused
        if fused:
            saved = x if cls.entry.saves == "x" else y
            if not (is_grad_enabled() and (g.requires_grad or saved.requires_grad)):
                out = g.backend.binary(fused, g._view(), saved._view(), alpha, beta)
                return Tensor._result(out, g.shape, g.device)
        return _full(cls.derivative(g, x, y, alpha, beta), g.shape, g)


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
    derivatives: tuple  # the entry's two formulas, compiled: (g, x, y) -> dx, -> dy
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, a, b):
        shape, va, vb = broadcast_views(a, b)
        self.shapes = a.shape, b.shape
        if self.entry.saves:
            self.save_for_backward(a, b)
        return Tensor._result(a.backend.binary(self.entry.name, va, vb), shape, a.device)

    def backward(self, g):
        a, b = self.saved_tensors if self.entry.saves else (None, None)
        dx, dy = self.derivatives
        shape_a, shape_b = self.shapes
        return (sum_to(_full(dx(g, a, b), g.shape, g), shape_a) if self.needs_input_grad[0]
                else None,
                sum_to(_full(dy(g, a, b), g.shape, g), shape_b) if self.needs_input_grad[1]
                else None)


def _function(base, entry, suffix=""):
    """The Function class of a table op, named after it (``relu`` -> ``Relu``, the scalar form
    of a binary op ``pow`` -> ``PowScalar``): made from the entry, so that a table op stays one
    entry, and bound in this module under its name (``ops.elementwise.Relu``; a node's
    ``grad_fn`` shows ``ReluBackward``)."""
    name = "".join(part.title() for part in entry.name.split("_")) + suffix
    compiled = ({"derivative": staticmethod(derivative(entry.grad, "g, x, y, a, b"))}
                if base is Unary else
                {"derivatives": tuple(derivative(d, "g, x, y") for d in entry.grad)})
    return type(name, (base,), {"entry": entry, "__doc__": f"{entry.name}: {entry.formula}",
                                "__module__": __name__, **compiled})


UNARY_FUNCTIONS = {op.name: _function(Unary, op, "Scalar" if op.name in optable.BINARY_BY_NAME
                                      else "") for op in optable.UNARY if op.grad}
BINARY_FUNCTIONS = {op.name: _function(Binary, op) for op in optable.BINARY if op.grad}
globals().update({cls.__name__: cls for cls in (*UNARY_FUNCTIONS.values(),
                                                *BINARY_FUNCTIONS.values())})
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
def table_example(entry, binary):
    """The sample arguments of a table op's test contract: (3, 5) arrays of uniform values in
    [-4, 4] (in [0.5, 4] for a positive domain; integers for the bitwise ops; divisors of
    ``floor_divide``/``remainder`` away from 0), and a (5,) second operand that broadcasts."""
    def example(rng):
        if entry.domain is None:
            return rng.integers(-8, 8, (3, 5)), rng.integers(0, 4, (5,))
        low = 0.5 if entry.domain == "positive" else -4.0
        x = rng.uniform(low, 4.0, (3, 5))
        if not binary:
            return (x,)
        y = rng.uniform(low, 4.0, (5,))
        return x, np.where(np.abs(y) < 0.5, 1.5, y)
    return example


for _name, (_entry, _binary) in _PUBLIC.items():
    op(TABLE_FUNCTIONS[_name], method=_entry.method, mg=_entry.method, F=_entry.F,
       module=_entry.module, example=table_example(_entry, _binary), domain=_entry.domain,
       tol=(1e-5, 1e-6) if not _entry.approx else (2e-5, 1e-6),
       grad=_entry.grad is not None and not _entry.bool_result,
       signed_zeros=_entry.signed_zeros, out=_entry.out)
globals().update(TABLE_FUNCTIONS)
method(TABLE_FUNCTIONS["neg"], "__neg__")
method(TABLE_FUNCTIONS["floor_divide"], "__floordiv__")
method(TABLE_FUNCTIONS["remainder"], "__mod__")


@op(method="__rfloordiv__", torch="Tensor.__rfloordiv__",
    example=lambda r: (divisors(r, (3, 5)), r.standard_normal(5)))
def rfloor_divide(a, b):
    """b // a (``3 // x``)."""
    return TABLE_FUNCTIONS["floor_divide"](b, a)


@op(method="__rmod__", torch="Tensor.__rmod__",
    example=lambda r: (divisors(r, (3, 5)), r.standard_normal(5)))
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


class ClampBetween(Function):
    """``clamp`` with tensor bounds (either may be None): ``minimum(maximum(x, lo), hi)``,
    NaN-propagating as PyTorch. The gradient (PyTorch's): to x where lo <= x <= hi, to lo
    where x < lo (and lo < hi), to hi where x > hi (or hi < lo, where hi wins)."""
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, lo, hi):
        self.save_for_backward(x, lo, hi)
        out = x if lo is None else TABLE_FUNCTIONS["maximum"](x, lo)
        return out if hi is None else TABLE_FUNCTIONS["minimum"](out, hi)

    def backward(self, g):
        x, lo, hi = self.saved_tensors
        zero = Tensor._full((), 0.0, g.dtype, g.device)
        inside = ((x >= lo) if lo is not None else x == x) & (
            (x <= hi) if hi is not None else x == x)
        grads = [sum_to(where(inside, g, zero), x.shape) if self.needs_input_grad[0] else None]
        if lo is not None and self.needs_input_grad[1]:
            below = (x < lo) & (lo < hi) if hi is not None else x < lo
            grads.append(sum_to(where(below, g, zero), lo.shape))
        else:
            grads.append(None)
        if hi is not None and self.needs_input_grad[2]:
            above = (x > hi) | (hi < lo) if lo is not None else x > hi
            grads.append(sum_to(where(above, g, zero), hi.shape))
        else:
            grads.append(None)
        return tuple(grads)


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


@op(mg=True, method=("add", "__add__", "__radd__"), inplace="add_",
    example=(lambda r: (r.standard_normal((3, 5)), r.standard_normal(5), {'alpha': 2}),
             lambda r: (r.standard_normal((3, 5)), 1.5)))
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


@op(mg=True, method=("sub", "__sub__"), inplace="sub_",
    example=(lambda r: (r.standard_normal((3, 5)), r.standard_normal(5), {'alpha': 2}),
             lambda r: (r.standard_normal((3, 5)), 1.5)))
def sub(a, b, alpha=1):
    if alpha != 1:
        b = b * alpha
    if isinstance(a, Tensor) and _is_scalar(b) and a.dtype.kind == "f":
        return Affine.apply(a, alpha=1.0, beta=-float(b))
    return Sub.apply(*tensor_operands(a, b))


@op(method="__rsub__", example=lambda r: (r.standard_normal((3, 5)), r.standard_normal(5)))
def rsub(a, b):
    """b - a for a scalar b."""
    if a.dtype.kind == "f" and _is_scalar(b):
        return Affine.apply(a, alpha=-1.0, beta=float(b))
    return sub(*reversed(tensor_operands(a, b)))


@op(mg=True, method=("mul", "__mul__", "__rmul__"), inplace="mul_",
    example=(lambda r: (r.standard_normal((3, 5)), r.standard_normal(5)),
             lambda r: (r.standard_normal((3, 5)), 2.5)))
def mul(a, b):
    if isinstance(b, Tensor) and isinstance(a, Tensor):  # two tensors: no scalar path to try
        return Mul.apply(*tensor_operands(a, b))
    # a * x + (-0.0): adding -0.0 changes nothing, where + 0.0 would turn -0.0 into +0.0
    if isinstance(a, Tensor) and _is_scalar(b) and a.dtype.kind == "f":
        return Affine.apply(a, alpha=float(b), beta=-0.0)
    if isinstance(b, Tensor) and _is_scalar(a) and b.dtype.kind == "f":
        return Affine.apply(b, alpha=float(a), beta=-0.0)
    return Mul.apply(*tensor_operands(a, b))


@op(mg=True, method=("div", "__truediv__"), inplace="div_",
    example=(lambda r: (r.standard_normal((3, 5)), divisors(r, (5,))),
             lambda r: (r.standard_normal((3, 5)), 3.0)))
def div(a, b):
    if isinstance(a, Tensor) and _is_scalar(b) and b != 0:
        return DivScalar.apply(as_float(a), alpha=float(b))
    a, b = tensor_operands(a, b)
    return Div.apply(as_float(a), as_float(b))


@op(method="__rtruediv__", torch="Tensor.__rtruediv__",
    example=lambda r: (divisors(r, (3, 5)), 1.5))
def rdiv(a, b):
    """b / a for a scalar b."""
    return RDiv.apply(as_float(a), alpha=float(b))


_POW_AS = {0.5: TABLE_FUNCTIONS["sqrt"], -0.5: TABLE_FUNCTIONS["rsqrt"],
           2.0: TABLE_FUNCTIONS["square"], -1.0: lambda x: RDiv.apply(x, alpha=1.0)}
"""The exponents PyTorch computes with another function (``pow_tensor_scalar``)."""


@op(mg=True, method=("pow", "__pow__"), inplace="pow_", domain="positive",
    example=(lambda r: (r.uniform(0.5, 2, (3, 5)), r.standard_normal(5)),
             *(lambda r, e=e: (r.uniform(0.5, 2, (3, 5)), e) for e in (0.5, -0.5, 2, -1, 3))))
def pow(a, b):
    """``a ** b``. A float tensor to the power 0.5, -0.5, 2 or -1 is ``sqrt``, ``rsqrt``,
    ``square`` or ``reciprocal``, as in PyTorch (so ``(-inf) ** 0.5`` is NaN, not C's inf)."""
    if isinstance(a, Tensor) and _is_scalar(b):
        x = _scalar_promoted(a, b)
        special = _POW_AS.get(float(b)) if x.dtype.kind == "f" else None
        return special(x) if special else PowScalar.apply(x, alpha=float(b))
    return Pow.apply(*tensor_operands(a, b))


@op(method="__rpow__", torch="Tensor.__rpow__", example=lambda r: (r.standard_normal((3, 5)), 1.5))
def rpow(a, b):
    """b ** a for a scalar b."""
    return RPow.apply(as_float(a), alpha=float(b))


@op(method=False, grad=False,
    torch=Unlike("the dispatcher of the six comparisons, each tested as itself"),
    example=lambda r: ("lt", r.standard_normal((3, 5)), r.standard_normal(5)))
def compare(op, a, b):
    """Elementwise comparison; the result is a bool tensor and carries no gradient."""
    if isinstance(a, Tensor) and _is_scalar(b):
        return new(a.backend.unary(op, a._view(), b), a.shape, a)
    a, b = tensor_operands(a, b)
    shape, va, vb = broadcast_views(a, b)
    return new(a.backend.binary(op, va, vb), shape, a)


@op(mg=True, method=("eq", "__eq__"), grad=False,
    example=lambda r: (r.integers(-2, 3, (3, 5)).astype(float),
                       r.integers(-2, 3, (5,)).astype(float)))
def eq(a, b):
    return compare("eq", a, b)


@op(mg=True, method=("ne", "__ne__"), grad=False,
    example=lambda r: (r.integers(-2, 3, (3, 5)).astype(float),
                       r.integers(-2, 3, (5,)).astype(float)))
def ne(a, b):
    return compare("ne", a, b)


@op(mg=True, method=("gt", "__gt__"), grad=False,
    example=lambda r: (r.integers(-2, 3, (3, 5)).astype(float),
                       r.integers(-2, 3, (5,)).astype(float)))
def gt(a, b):
    return compare("gt", a, b)


@op(mg=True, method=("lt", "__lt__"), grad=False,
    example=lambda r: (r.integers(-2, 3, (3, 5)).astype(float),
                       r.integers(-2, 3, (5,)).astype(float)))
def lt(a, b):
    return compare("lt", a, b)


@op(mg=True, method=("ge", "__ge__"), grad=False,
    example=lambda r: (r.integers(-2, 3, (3, 5)).astype(float),
                       r.integers(-2, 3, (5,)).astype(float)))
def ge(a, b):
    return compare("ge", a, b)


@op(mg=True, method=("le", "__le__"), grad=False,
    example=lambda r: (r.integers(-2, 3, (3, 5)).astype(float),
                       r.integers(-2, 3, (5,)).astype(float)))
def le(a, b):
    return compare("le", a, b)


@op(example=lambda r: (divisors(r, (3, 5)),))
def reciprocal(x):
    return RDiv.apply(as_float(x), alpha=1.0)


@op(module="LeakyReLU", torch="F.leaky_relu", example=lambda r: (r.standard_normal((3, 5)), 0.1))
def leaky_relu(x, negative_slope=0.01):
    return LeakyRelu.apply(x, alpha=float(negative_slope))


@op(mg=True, inplace="clamp_",
    example=(lambda r: (r.standard_normal((3, 5)), r.uniform(-2, -0.3, (5,)),
                        r.uniform(0.3, 2, (3, 5))),
             lambda r: (r.standard_normal((3, 5)), -0.5, 0.5),
             lambda r: (r.standard_normal((3, 5)), {"min": 0.0})))
def clamp(x, min=None, max=None):
    """``min(max(x, min), max)``. Scalar bounds: one ``clamp`` map. Tensor bounds broadcast
    with x (composed of ``where``): the gradient flows to x where it lies within the bounds,
    to a bound where it clamps x; a NaN bound gives NaN, as in PyTorch."""
    if min is None and max is None:
        raise RuntimeError("At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        operands = [x] + [b if isinstance(b, Tensor) else _scalar_tensor(b, x)
                          for b in (min, max) if b is not None]
        check_same_device(*operands)
        target = dtypes.result_type(*operands)
        x, *bounds = [t if t.dtype == target else t.to(target) for t in operands]
        return ClampBetween.apply(x, bounds[0] if min is not None else None,
                                  bounds[-1] if max is not None else None)
    lo = -math.inf if min is None else float(min)
    hi = math.inf if max is None else float(max)
    return Clamp.apply(_scalar_promoted(x, min, max), alpha=lo, beta=hi)


clip = op(clamp, name="clip", mg=True, example=OPS["clamp"].example)


@op(method=False, mg=True,
    example=lambda r: (r.random((3, 5)) < 0.5, r.standard_normal((3, 5)), r.standard_normal(5)))
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


@op(mg=True, out=False, inplace="masked_fill_",
    example=lambda r: (r.standard_normal((3, 5)), r.random(5) < 0.5, 2.5))
def masked_fill(x, mask, value):
    return where(mask, Tensor._full((), value, x.dtype, x.device), x)


@op(grad=False, example=lambda r: (r.integers(0, 3, (3, 4)).astype(float),))
def all(x):
    """A 0-d bool tensor: True when every element is non-zero."""
    return compare("ne", x, 0).to(float32).min() > 0.5


@op(grad=False, example=lambda r: (r.integers(-1, 1, (3, 4)).astype(float),))
def any(x):
    """A 0-d bool tensor: True when some element is non-zero."""
    return compare("ne", x, 0).to(float32).max() > 0.5


@op(example=lambda r: (r.standard_normal((3, 4)), np.dtype(np.float64)))
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


@op(mg=True, method=("bitwise_and", "__and__", "__rand__"), domain=None, grad=False,
    example=lambda r: (r.integers(-8, 8, (3, 5)), r.integers(0, 4, (5,))))
def bitwise_and(a, b):
    return _bitwise("bitwise_and", a, b)


@op(mg=True, method=("bitwise_or", "__or__", "__ror__"), domain=None, grad=False,
    example=lambda r: (r.integers(-8, 8, (3, 5)), r.integers(0, 4, (5,))))
def bitwise_or(a, b):
    return _bitwise("bitwise_or", a, b)


@op(mg=True, method=("bitwise_xor", "__xor__", "__rxor__"), domain=None, grad=False,
    example=lambda r: (r.integers(-8, 8, (3, 5)), r.integers(0, 4, (5,))))
def bitwise_xor(a, b):
    return _bitwise("bitwise_xor", a, b)


@op(mg=True, method=("bitwise_left_shift", "__lshift__"), domain=None, grad=False,
    example=lambda r: (r.integers(-8, 8, (3, 5)), r.integers(0, 4, (5,))))
def bitwise_left_shift(a, b):
    return _bitwise("bitwise_left_shift", a, b, refuses_bool=True)


@op(mg=True, method=("bitwise_right_shift", "__rshift__"), domain=None, grad=False,
    example=lambda r: (r.integers(-8, 8, (3, 5)), r.integers(0, 4, (5,))))
def bitwise_right_shift(a, b):
    return _bitwise("bitwise_right_shift", a, b, refuses_bool=True)


@op(mg=True, method=("bitwise_not", "__invert__"), domain=None, grad=False,
    example=lambda r: (r.integers(-8, 8, (3, 5)),))
def bitwise_not(x):
    """~x: the complement of each bit (x ^ -1), logical not for bool (x ^ True)."""
    if x.dtype.kind == "f":
        raise RuntimeError(f"\"bitwise_not_cpu\" not implemented for "
                           f"'{dtypes.SCALAR_NAMES[x.dtype]}'")
    return _bitwise("bitwise_xor", x, True if x.dtype.kind == "b" else -1)


@op(mg=True, grad=False, example=lambda r: (r.integers(-1, 2, (3, 5)).astype(float),))
def logical_not(x):
    return x == 0


@op(mg=True, grad=False,
    example=lambda r: (r.integers(-1, 2, (3, 5)).astype(float),
                       r.integers(-1, 2, (5,)).astype(float)))
def logical_and(a, b):
    return bitwise_and(a != 0, b != 0)


@op(mg=True, grad=False,
    example=lambda r: (r.integers(-1, 2, (3, 5)).astype(float),
                       r.integers(-1, 2, (5,)).astype(float)))
def logical_or(a, b):
    return bitwise_or(a != 0, b != 0)


@op(mg=True, grad=False,
    example=lambda r: (r.integers(-1, 2, (3, 5)).astype(float),
                       r.integers(-1, 2, (5,)).astype(float)))
def logical_xor(a, b):
    return bitwise_xor(a != 0, b != 0)
