"""Elementwise ops: arithmetic with broadcasting, math functions, activations, comparisons.

Broadcasting never copies: both operands become stride-0 views of the output shape and one
``binary`` kernel reads them. Backward undoes the broadcast with ``sum_to``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..autograd import Function
from ..tensor import Tensor, float32, int64
from .shape import broadcast_shapes, expand_view, sum_to


def new(buf, shape, like: Tensor) -> Tensor:
    """A dense tensor on ``like``'s device holding a primitive's output buffer."""
    return Tensor._dense(buf, shape, like.device)


def check_same_device(*tensors):
    devices = {t.device.type for t in tensors if isinstance(t, Tensor)}
    if len(devices) > 1:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                           f"two devices, {' and '.join(sorted(devices))}!")


def promote(a: Tensor, b: Tensor):
    """Cast two tensors to a common dtype the way PyTorch does (float wins, wider wins)."""
    if a.dtype == b.dtype:
        return a, b
    if a.dtype.kind == "f" and b.dtype.kind == "f":
        target = np.promote_types(a.dtype, b.dtype)
    elif a.dtype.kind == "f" or b.dtype.kind == "f":
        target = a.dtype if a.dtype.kind == "f" else b.dtype
    else:
        target = int64
    return a.to(target), b.to(target)


def as_float(x: Tensor) -> Tensor:
    """Integer and bool tensors become float32 before float math (like torch.exp(int))."""
    return x if x.dtype.kind == "f" else x.to(float32)


# --- unary maps -------------------------------------------------------------------------------
class Unary(Function):
    """y = op(x) with scalar parameters alpha/beta; subclasses give the derivative and say in
    ``saves`` which of x and y it reads (only those are saved, so only an in-place change to
    those makes backward refuse, as in PyTorch)."""

    op = None
    saves = "xy"

    def forward(self, x, alpha=0.0, beta=0.0):
        self.alpha, self.beta = alpha, beta
        y = new(x.backend.unary(self.op, x._view(), alpha, beta), x.shape, x)
        self.save_for_backward(x if "x" in self.saves else None, y if "y" in self.saves else None)
        return y

    def map(self, op, t, alpha=0.0, beta=0.0):
        return new(t.backend.unary(op, t._view(), alpha, beta), t.shape, t)

    def fused(self, op, g, t, alpha=0.0, beta=0.0):
        """One fused backward kernel: op(upstream grad, saved tensor)."""
        return new(g.backend.binary(op, g._view(), t._view(), alpha, beta), g.shape, g)


class Neg(Unary):
    op = "neg"
    saves = ""

    def backward(self, g):
        return -g


class Exp(Unary):
    op = "exp"
    saves = "y"

    def backward(self, g):
        return g * self.saved_tensors[1]


class Log(Unary):
    op = "log"
    saves = "x"

    def backward(self, g):
        return g / self.saved_tensors[0]


class Sqrt(Unary):
    op = "sqrt"
    saves = "y"

    def backward(self, g):
        return g / (self.saved_tensors[1] * 2)


class Tanh(Unary):
    op = "tanh"
    saves = "y"

    def backward(self, g):
        return self.fused("tanh_grad", g, self.saved_tensors[1])


class Sigmoid(Unary):
    op = "sigmoid"
    saves = "y"

    def backward(self, g):
        return self.fused("sigmoid_grad", g, self.saved_tensors[1])


class Relu(Unary):
    op = "relu"
    saves = "y"

    def backward(self, g):
        return self.fused("relu_grad", g, self.saved_tensors[1])  # y > 0 where x > 0


class LeakyRelu(Unary):
    op = "leaky_relu"
    saves = "x"

    def backward(self, g):
        return self.fused("leaky_relu_grad", g, self.saved_tensors[0], self.alpha)


class Abs(Unary):
    op = "abs"
    saves = "x"

    def backward(self, g):
        return g * self.map("sign", self.saved_tensors[0])


class Affine(Unary):
    op = "affine"
    saves = ""

    def backward(self, g):
        return g * self.alpha


class RDiv(Unary):
    """alpha / x"""
    op = "rdiv"

    def backward(self, g):
        x, y = self.saved_tensors
        return -g * y / x


class PowScalar(Unary):
    """x ** alpha"""
    op = "pow"
    saves = "x"

    def backward(self, g):
        x = self.saved_tensors[0]
        if self.alpha == 0:
            return g * 0.0
        return g * self.map("pow", x, self.alpha - 1) * self.alpha


class RPow(Unary):
    """alpha ** x"""
    op = "rpow"
    saves = "y"

    def backward(self, g):
        return g * self.saved_tensors[1] * math.log(self.alpha)


class Clamp(Unary):
    op = "clamp"
    saves = "x"

    def backward(self, g):
        return self.fused("clamp_grad", g, self.saved_tensors[0], self.alpha, self.beta)


class Cast(Function):
    def forward(self, x, dtype):
        self.source = x.dtype
        return new(x.backend.cast(x._view(), dtype), x.shape, x)

    def backward(self, g):
        return g.to(self.source), None


# --- binary maps with broadcasting ---------------------------------------------------------------
def broadcast_views(a: Tensor, b: Tensor):
    shape = broadcast_shapes(a.shape, b.shape)
    return shape, expand_view(a, shape), expand_view(b, shape)


class Binary(Function):
    """c = op(a, b) with broadcasting; ``reads_inputs``: backward needs a's and b's values
    (add and sub need only their shapes, so they save nothing, as in PyTorch)."""

    op = None
    reads_inputs = False

    def forward(self, a, b):
        shape, va, vb = broadcast_views(a, b)
        self.shapes = a.shape, b.shape
        if self.reads_inputs:
            self.save_for_backward(a, b)
        return new(a.backend.binary(self.op, va, vb), shape, a)

    def grads(self, g, ga, gb):
        shape_a, shape_b = self.shapes
        return (sum_to(ga, shape_a) if self.needs_input_grad[0] else None,
                sum_to(gb, shape_b) if self.needs_input_grad[1] else None)


class Add(Binary):
    op = "add"

    def backward(self, g):
        return self.grads(g, g, g)


class Sub(Binary):
    op = "sub"

    def backward(self, g):
        return self.grads(g, g, -g)


class Mul(Binary):
    op = "mul"
    reads_inputs = True

    def backward(self, g):
        a, b = self.saved_tensors
        return self.grads(g, g * b if self.needs_input_grad[0] else None,
                          g * a if self.needs_input_grad[1] else None)

    def grads(self, g, ga, gb):
        shape_a, shape_b = self.shapes
        return (sum_to(ga, shape_a) if ga is not None else None,
                sum_to(gb, shape_b) if gb is not None else None)


class Div(Mul):
    op = "div"

    def backward(self, g):
        a, b = self.saved_tensors
        ga = g / b
        return self.grads(g, ga if self.needs_input_grad[0] else None,
                          -ga * a / b if self.needs_input_grad[1] else None)


class Pow(Mul):
    op = "pow"

    def backward(self, g):
        a, b = self.saved_tensors
        ga = g * b * a ** (b - 1) if self.needs_input_grad[0] else None
        gb = g * a ** b * log(a) if self.needs_input_grad[1] else None
        return self.grads(g, ga, gb)


class Maximum(Mul):
    op = "maximum"

    def backward(self, g):
        a, b = self.saved_tensors
        mask = compare("ge", a, b).to(g.dtype)
        return self.grads(g, g * mask, g * (1 - mask))


class Minimum(Mul):
    op = "minimum"

    def backward(self, g):
        a, b = self.saved_tensors
        mask = compare("le", a, b).to(g.dtype)
        return self.grads(g, g * mask, g * (1 - mask))


class Where(Function):
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


# --- user-facing functions --------------------------------------------------------------------------
def _is_scalar(x):
    return isinstance(x, (numbers.Number, np.number, np.bool_)) and not isinstance(x, Tensor)


def tensor_operands(a, b):
    """Two tensors of one dtype on one device; a Python scalar becomes a 0-d tensor."""
    like = a if isinstance(a, Tensor) else b
    if not isinstance(a, Tensor):
        a = _scalar_tensor(a, like)
    if not isinstance(b, Tensor):
        b = _scalar_tensor(b, like)
    check_same_device(a, b)
    return promote(a, b)


def _scalar_tensor(value, like):
    if not _is_scalar(value):
        raise TypeError(f"unsupported operand type for a Tensor operation: {type(value).__name__}")
    dtype = like.dtype
    if isinstance(value, float) and dtype.kind != "f":
        dtype = float32
    return Tensor._full((), value, dtype, like.device)


def _float_scalar_op(x, value):
    """x op python-scalar stays in x's float dtype; integer tensors promote for float scalars."""
    if x.dtype.kind != "f" and isinstance(value, float):
        x = x.to(float32)
    return x


def add(a, b, alpha=1):
    if alpha != 1:
        b = b * alpha
    if isinstance(a, Tensor) and _is_scalar(b) and a.dtype.kind == "f":
        return Affine.apply(a, alpha=1.0, beta=float(b))
    if isinstance(b, Tensor) and _is_scalar(a) and b.dtype.kind == "f":
        return Affine.apply(b, alpha=1.0, beta=float(a))
    return Add.apply(*tensor_operands(a, b))


def sub(a, b, alpha=1):
    if alpha != 1:
        b = b * alpha
    if isinstance(a, Tensor) and _is_scalar(b) and a.dtype.kind == "f":
        return Affine.apply(a, alpha=1.0, beta=-float(b))
    return Sub.apply(*tensor_operands(a, b))


def rsub(a, b):
    """b - a for a scalar b."""
    if a.dtype.kind == "f" and _is_scalar(b):
        return Affine.apply(a, alpha=-1.0, beta=float(b))
    return sub(*reversed(tensor_operands(a, b)))


def mul(a, b):
    if isinstance(a, Tensor) and _is_scalar(b) and a.dtype.kind == "f":
        return Affine.apply(a, alpha=float(b), beta=0.0)
    if isinstance(b, Tensor) and _is_scalar(a) and b.dtype.kind == "f":
        return Affine.apply(b, alpha=float(a), beta=0.0)
    return Mul.apply(*tensor_operands(a, b))


def div(a, b):
    if isinstance(a, Tensor) and _is_scalar(b) and b != 0:
        return Affine.apply(as_float(a), alpha=1.0 / float(b), beta=0.0)
    a, b = tensor_operands(a, b)
    return Div.apply(as_float(a), as_float(b))


def rdiv(a, b):
    """b / a for a scalar b."""
    return RDiv.apply(as_float(a), alpha=float(b))


def pow(a, b):
    if isinstance(a, Tensor) and _is_scalar(b):
        return PowScalar.apply(_float_scalar_op(a, b), alpha=float(b))
    return Pow.apply(*tensor_operands(a, b))


def rpow(a, b):
    """b ** a for a scalar b."""
    return RPow.apply(as_float(a), alpha=float(b))


def neg(x):
    return Neg.apply(x)


def maximum(a, b):
    return Maximum.apply(*tensor_operands(a, b))


def minimum(a, b):
    return Minimum.apply(*tensor_operands(a, b))


def compare(op, a, b):
    """Elementwise comparison; the result is a bool tensor and carries no gradient."""
    if isinstance(a, Tensor) and _is_scalar(b):
        return new(a.backend.unary(op, a._view(), b), a.shape, a)
    a, b = tensor_operands(a, b)
    shape, va, vb = broadcast_views(a, b)
    return new(a.backend.binary(op, va, vb), shape, a)


def eq(a, b):
    return compare("eq", a, b)


def ne(a, b):
    return compare("ne", a, b)


def gt(a, b):
    return compare("gt", a, b)


def lt(a, b):
    return compare("lt", a, b)


def ge(a, b):
    return compare("ge", a, b)


def le(a, b):
    return compare("le", a, b)


def exp(x):
    return Exp.apply(as_float(x))


def log(x):
    return Log.apply(as_float(x))


def sqrt(x):
    return Sqrt.apply(as_float(x))


def rsqrt(x):
    return PowScalar.apply(as_float(x), alpha=-0.5)


def reciprocal(x):
    return RDiv.apply(as_float(x), alpha=1.0)


def square(x):
    return x * x


def tanh(x):
    return Tanh.apply(as_float(x))


def sigmoid(x):
    return Sigmoid.apply(as_float(x))


def relu(x):
    return Relu.apply(x)


def leaky_relu(x, negative_slope=0.01):
    return LeakyRelu.apply(x, alpha=float(negative_slope))


def abs(x):
    return Abs.apply(x)


def sign(x):
    return new(x.backend.unary("sign", x._view()), x.shape, x)


def clamp(x, min=None, max=None):
    if min is None and max is None:
        raise RuntimeError("At least one of 'min' or 'max' must not be None")
    lo = -math.inf if min is None else float(min)
    hi = math.inf if max is None else float(max)
    return Clamp.apply(x, alpha=lo, beta=hi)


clip = clamp


def where(cond, a, b):
    if not isinstance(cond, Tensor) or cond.dtype != np.bool_:
        raise TypeError("where expected condition to be a boolean tensor")
    if _is_scalar(a) and _is_scalar(b):
        raise TypeError("where needs at least one tensor among x and y")
    a, b = tensor_operands(a, b)
    check_same_device(cond, a)
    return Where.apply(cond, a, b)


def masked_fill(x, mask, value):
    return where(mask, Tensor._full((), value, x.dtype, x.device), x)


def all(x):
    """A 0-d bool tensor: True when every element is non-zero."""
    return compare("ne", x, 0).to(float32).min() > 0.5


def any(x):
    """A 0-d bool tensor: True when some element is non-zero."""
    return compare("ne", x, 0).to(float32).max() > 0.5
