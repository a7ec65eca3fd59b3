"""Reductions: sum, mean, max/min (with and without dim), argmax/argmin, var/std."""
from __future__ import annotations

import builtins
import math
from collections import namedtuple

import numpy as np

from ..autograd import SCALAR_TYPES, Function, is_grad_enabled, no_grad
from ..dtypes import SCALAR_NAMES, autocast_cast, float16, int64
from ..tensor import Tensor
from . import elementwise as ew
from .common import filled
from .elementwise import where
from .registry import op
from .shape import normalize_dim, normalize_dims, permute, reshape

MaxMin = namedtuple("MaxMin", ["values", "indices"])


def _kept_shape(shape, dims):
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def _reduced_shape(shape, dims, keepdim):
    if keepdim:
        return _kept_shape(shape, dims)
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def _check_nonempty(x, dims, name):
    if any(x.shape[d] == 0 for d in dims):
        raise IndexError(f"{name}(): Expected reduction dim to have non-zero size.")


class Sum(Function):
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, dims, keepdim):
        self.source, self.dims = x.shape, dims
        out = x.backend.reduce("sum", x._view(), dims)
        return Tensor._dense(out, _reduced_shape(x.shape, dims, keepdim), x.device)

    def backward(self, g):
        if is_grad_enabled():  # create_graph: recorded ops instead of a bare stride-0 view
            kept = reshape(g, *_kept_shape(self.source, self.dims))
            return kept.expand(self.source), None, None
        return _spread(g, self.source, self.dims), None, None


def _spread(g: Tensor, shape, dims) -> Tensor:
    """The gradient of a sum over ``dims`` of a tensor of ``shape``: ``g`` repeated along the
    summed dims, as a view with stride 0 there (no copy, no reshape and expand nodes)."""
    kept = len(g.shape) == len(shape)  # keepdim: g still has the summed dims, of size 1
    strides, k = [], 0
    for i in range(len(shape)):
        if i in dims:
            strides.append(0)
            k += kept
        else:
            strides.append(g._strides[k])
            k += 1
    return g._make_view(shape, tuple(strides), g._offset)


class Extreme(Function):
    """max/min over dims; the gradient is shared equally among tied extreme elements."""

    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, op, dims, keepdim):
        self.dims = dims
        out = x.backend.reduce(op, x._view(), dims)
        y = Tensor._dense(out, _reduced_shape(x.shape, dims, keepdim), x.device)
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        x, y = self.saved_tensors
        kept = _kept_shape(x.shape, self.dims)
        mask = (x == reshape(y, *kept)).to(g.dtype)
        count = sum(mask, self.dims, keepdim=True)
        return reshape(g, *kept) * mask / count, None, None, None


def picked(x, dim, index):
    """``x`` at ``index`` along ``dim`` (``index`` of x's rank, size 1 along ``dim``), summed
    out: a mask (``where``: a product with a one-hot would turn a -inf elsewhere into NaN)."""
    ramp_shape = [1] * x.ndim
    ramp_shape[dim] = x.shape[dim]
    ramp = Tensor._from_array(np.arange(x.shape[dim]).reshape(ramp_shape), x.device)
    return where(ramp == index, x, filled(x, (), 0.0)).sum(dim)


class ArgExtreme(Function):
    """max/min along one dim returning (values, indices); gradient flows to the argmax."""

    def forward(self, x, op, dim, keepdim):
        self.dim, self.source = dim, x.shape
        values, indices = x.backend.argreduce(op, x._view(), dim)
        shape = _reduced_shape(x.shape, (dim,), keepdim)
        self.indices = Tensor._dense(indices, shape, x.device)
        self.mark_non_differentiable(self.indices)
        return Tensor._dense(values, shape, x.device), self.indices

    def backward(self, g, _):
        rows = g.numel()
        size = self.source[self.dim]
        # Scatter g to the argmax positions as (rows, size), then move `dim` back in place.
        order = [d for d in range(len(self.source)) if d != self.dim] + [self.dim]
        flat = g.backend.scatter(reshape(self.indices, rows)._view(),
                                 reshape(g.contiguous(), rows)._view(), size)
        moved = Tensor._dense(flat, [self.source[d] for d in order], g.device)
        inverse = sorted(range(len(order)), key=order.__getitem__)
        return permute(moved, *inverse), None, None, None

    def unfused(self, x, op, dim, keepdim):
        """The unfused form (max or min along ``dim``, with indices): the element
        the forward's index names."""
        values = picked(x, dim, self.indices if keepdim else self.indices.unsqueeze(dim))
        return (values.unsqueeze(dim) if keepdim else values), None


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def sum(x, dim=None, keepdim=False, dtype=None):
    """The sum over ``dim`` (all elements by default). As in PyTorch, bool and integer tensors
    sum in int64, and float16 ones in float32 (one rounding to half at the end)."""
    (x,) = autocast_cast("sum", x)
    if dtype is not None:
        x = x.to(dtype)
    elif x.dtype.kind in "biu" and x.dtype != int64:
        x = x.long()
    if x.dtype == float16:
        return sum(x.float(), dim, keepdim).half()
    dims = normalize_dims(dim, x.ndim)
    if not dims:
        return x if x.ndim else x + 0
    return Sum.apply(x, dims, keepdim)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 0))
def mean(x, dim=None, keepdim=False):
    if x.dtype.kind != "f":
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {SCALAR_NAMES[x.dtype]}")
    if x.dtype == float16:  # accumulate and divide in float32, round to half once
        return mean(x.float(), dim, keepdim).half()
    dims = normalize_dims(dim, x.ndim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    return sum(x, dims, keepdim) * (1.0 / count if count else math.nan)


def _extreme(x, op, dim, keepdim):
    if dim is None:
        if x.numel() == 0:
            raise RuntimeError(f"{op}(): Expected reduction dim to be specified for input.numel() "
                               f"== 0. Specify the reduction dim with the 'dim' argument.")
        return Extreme.apply(x, op, tuple(range(x.ndim)), False) if x.ndim else x
    if isinstance(dim, Tensor):
        return (ew.maximum if op == "max" else ew.minimum)(x, dim)
    d = normalize_dim(dim, x.ndim)
    _check_nonempty(x, (d,), op)
    if x.ndim == 0:
        return MaxMin(x, Tensor._full((), 0, "int64", x.device))
    return MaxMin(*ArgExtreme.apply(x, op, d, keepdim))


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def max(x, dim=None, keepdim=False):
    """max() of all elements, max(dim) -> (values, indices), or max(other) elementwise."""
    return _extreme(x, "max", dim, keepdim)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def min(x, dim=None, keepdim=False):
    return _extreme(x, "min", dim, keepdim)


def _arg(x, op, dim, keepdim):
    if dim is None:
        flat = reshape(x, x.numel())
        _, idx = ArgExtreme.apply(flat.detach(), op, 0, False)
        return reshape(idx, *([1] * x.ndim)) if keepdim else idx
    d = normalize_dim(dim, x.ndim)
    _check_nonempty(x, (d,), "arg" + op)
    return ArgExtreme.apply(x.detach(), op, d, keepdim)[1]


@op(mg=True, grad=False, example=lambda r: (r.standard_normal((3, 4)), 1))
def argmax(x, dim=None, keepdim=False):
    return _arg(x, "max", dim, keepdim)


@op(mg=True, grad=False, example=lambda r: (r.standard_normal((3, 4)), 1))
def argmin(x, dim=None, keepdim=False):
    return _arg(x, "min", dim, keepdim)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def var(x, dim=None, correction=1, keepdim=False, unbiased=None):
    if unbiased is not None:
        correction = 1 if unbiased else 0
    dims = normalize_dims(dim, x.ndim)
    count = 1
    for d in dims:
        count *= x.shape[d]
    centred = x - mean(x, dims, keepdim=True)
    return sum(centred * centred, dims, keepdim) / builtins.max(count - correction, 0)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def std(x, dim=None, correction=1, keepdim=False, unbiased=None):
    return ew.sqrt(var(x, dim, correction, keepdim, unbiased))


# --- vector norms and allclose -----------------------------------------------------------------
class NormP(Function):
    """(sum |x|**p)**(1/p) over dims, p > 0 (p = 2: sqrt(sum(x*x))); the gradient
    sign(x) |x|**(p-1) / norm**(p-1), 0 where the norm or x is 0 (PyTorch's subgradient at the
    origin instead of 0/0)."""
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, p, dims, keepdim):
        self.p, self.dims = p, dims
        y = ew.sqrt(sum(x * x, dims, keepdim)) if p == 2 else \
            sum(ew.abs(x) ** p, dims, keepdim) ** (1.0 / p)
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        x, y = self.saved_tensors
        kept = _kept_shape(x.shape, self.dims)
        y, g = reshape(y, *kept), reshape(g, *kept)
        nil = Tensor._full((), 0, y.dtype, y.device)
        if self.p == 2:
            return x * ew.where(y == 0, nil, g / y), None, None, None
        scale = ew.where(y == 0, nil, g / y ** (self.p - 1))
        return (ew.where(x == 0, nil, ew.sign(x) * ew.abs(x) ** (self.p - 1)) * scale, None,
                None, None)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)),))
def norm(x, p="fro", dim=None, keepdim=False, dtype=None):
    """The vector p-norm of x over ``dim`` (all elements when None): p = 2 and 'fro' (the
    default), 1, inf, -inf, 0 (the count of non-zeros) or any other number
    (``sum(|x|**p)**(1/p)``). Differentiable; for p > 0 the gradient at 0 is 0, as in PyTorch."""
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype.kind != "f":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {SCALAR_TYPES[str(x.dtype)]}")
    if isinstance(p, str):
        if p != "fro":
            raise RuntimeError(f"norm(): p={p!r} is not supported (matrix norms other than "
                               f"'fro' are not implemented)")
        p = 2
    if x.ndim == 0:
        x, keepdim = reshape(x, 1), False
    dims = normalize_dims(dim, x.ndim)
    if p == 1:
        return sum(ew.abs(x), dims, keepdim)
    if p in (math.inf, -math.inf):
        _check_nonempty(x, dims, "linalg.vector_norm")
        return Extreme.apply(ew.abs(x), "max" if p > 0 else "min", dims, keepdim)
    if p == 0:
        return sum((x != 0).to(x.dtype), dims, keepdim)
    if p < 0:  # a sum of negative powers: no subgradient question (|x| = 0 gives inf)
        return sum(ew.abs(x) ** p, dims, keepdim) ** (1.0 / p)
    return NormP.apply(x, p, dims, keepdim)


@op(mg=True, out=False, grad=False, example=lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4))))
def allclose(x, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every ``|x - other| <= atol + rtol * |other|`` (broadcast); infinities must
    match exactly; NaNs count as equal only with ``equal_nan``."""
    if x.dtype != other.dtype:
        raise RuntimeError(f"{SCALAR_TYPES[str(x.dtype)]} did not match "
                           f"{SCALAR_TYPES[str(other.dtype)]}")
    with no_grad():
        within = ((ew.abs(x - other) <= atol + rtol * ew.abs(other)).long()
                  * (ew.abs(other) != math.inf))
        close = (x == other).long() + within  # or: > 0
        if equal_nan:
            close = close + (x != x).long() * (other != other).long()
        return bool((close > 0).all().item())


def _extremes(x, op, dim, keepdim):
    dims = tuple(range(x.ndim)) if dim == () else normalize_dims(dim, x.ndim)
    _check_nonempty(x, dims, "a" + op)
    if not x.ndim:
        return x + 0 if x.dtype.kind != "b" else x.clone()
    return Extreme.apply(x, op, dims, keepdim)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def amax(x, dim=(), keepdim=False):
    """The maximum over ``dim`` (an int or a tuple; ``()``: every dim). Unlike ``max(dim)``
    it returns no indices, and its gradient is shared equally among tied maxima."""
    return _extremes(x, "max", dim, keepdim)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def amin(x, dim=(), keepdim=False):
    """The minimum over ``dim`` (an int or a tuple; ``()``: every dim), ties sharing the
    gradient."""
    return _extremes(x, "min", dim, keepdim)


@op(mg=True, example=lambda rng: (rng.standard_normal((3, 4)), 1))
def logsumexp(x, dim, keepdim=False):
    """``log(sum(exp(x), dim))`` computed stably: the maximum is taken out first (and kept
    out of the gradient: d/dx is softmax(x) whatever it is); infinite maxima are left in."""
    if x.dtype.kind != "f":
        x = x.float()  # torch: integer inputs give a float result
    dims = normalize_dims(dim, x.ndim)
    if x.numel() == 0:
        return sum(x.exp(), dims, keepdim).log()
    m = amax(x.detach(), dims, keepdim=True)
    m = ew.where(m.isinf(), m.new_zeros(()), m)
    out = sum((x - m).exp(), dims, keepdim=True).log() + m
    return out if keepdim else reshape(out, *_reduced_shape(x.shape, dims, False))
