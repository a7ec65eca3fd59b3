"""Sorting: ``sort``, ``argsort`` and ``topk`` (the backend's bitonic row sort).

The backend sorts the rows of the last axis; another ``dim`` is moved last with a transpose
view (the backend makes it dense) and moved back. The order is PyTorch's: NaN counts as the
largest value, and equal values keep their input order (stable, also when descending), so the
result is the same on every device. The gradient of the sorted values goes back to the
positions the indices name (a scatter: the indices are a permutation, nothing collides);
``topk`` is a sort whose first ``k`` values and indices are kept.
"""
from __future__ import annotations

import numbers
from collections import namedtuple

from ..autograd import Function
from ..tensor import Tensor
from .registry import op
from .shape import normalize_dim, transpose

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])


class Sort(Function):
    """(values, indices) of x's rows (last axis) sorted; gradient to the source positions."""

    def forward(self, x, descending):
        values, indices = x.backend.sort(x._view(), descending)
        self.indices = Tensor._dense(indices, x.shape, x.device)
        self.mark_non_differentiable(self.indices)
        return Tensor._dense(values, x.shape, x.device), self.indices

    def backward(self, g, _):
        zeros = Tensor._full(g.shape, 0, g.dtype, g.device)
        out = g.backend.scatter_add_dim(zeros._view(), g.ndim - 1, self.indices._view(),
                                        g._view())
        return Tensor._dense(out, g.shape, g.device), None

    def unfused(self, x, descending):
        """The unfused form: x gathered at the indices the forward found."""
        return x.gather(-1, self.indices), None


def _sorted(x, dim, descending):
    if x.ndim == 0:
        return x.clone(), Tensor._full((), 0, "int64", x.device)
    d = normalize_dim(dim, x.ndim)
    last = x.ndim - 1
    if d == last:
        return Sort.apply(x, bool(descending))
    values, indices = Sort.apply(transpose(x, d, last), bool(descending))
    return transpose(values, d, last), transpose(indices, d, last)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def sort(x, dim=-1, descending=False, stable=False):
    """(values, indices) of x sorted along ``dim``; NaN is the largest value; always stable
    (``stable`` is accepted for PyTorch's signature)."""
    return SortResult(*_sorted(x, dim, descending))


@op(mg=True, out=False, grad=False, example=lambda r: (r.standard_normal((3, 4)), 1))
def argsort(x, dim=-1, descending=False, stable=False):
    """The indices that sort x along ``dim`` (stable)."""
    return _sorted(x.detach(), dim, descending)[1]


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 2))
def topk(x, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim`` and their indices,
    in sorted order (``sorted=False`` is allowed to return any order; this one is sorted)."""
    d = normalize_dim(dim, max(x.ndim, 1))
    size = x.shape[d] if x.ndim else 1
    if not isinstance(k, numbers.Integral) or not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    values, indices = _sorted(x, d, largest)
    if x.ndim == 0:
        return TopkResult(values, indices)
    window = (slice(None),) * d + (slice(0, k),)
    return TopkResult(values[window], indices[window])
