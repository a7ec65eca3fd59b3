"""Scans and what is built on them: ``cumsum``, ``cumprod``, ``prod``, and boolean-mask
indexing (``x[mask]``, ``x[mask] = v``, ``masked_select``) by stream compaction.

All of them call the backend's ``scan`` (a work-efficient block scan on cuda) or its two
compaction primitives ``masked_select`` / ``masked_scatter``; the gradients are scans too:

* cumsum: the gradient of element k is the sum of the upstream gradients at positions >= k,
  a reversed cumsum;
* cumprod: ``d y_k / d x_i = prod_{j <= k, j != i} x_j``. Before the first zero of a row that
  is ``y_k / x_i``, so the gradient is ``revcumsum(g * y) / x``; at the first zero z it is
  ``prod_{j<z} x_j * sum_{k>=z} g_k prod_{z<j<=k} x_j`` (two more scans); after it, 0 (every
  product through it contains the zero). That is PyTorch's result, zeros included;
* prod: ``d/dx_i = prod_{j<i} x_j * prod_{j>i} x_j``, an exclusive scan from each end: exact
  with zeros, no division.
"""
from __future__ import annotations

import numpy as np

from ..autograd import Function, no_grad
from ..tensor import Tensor, int64
from .common import check_same_device
from .elementwise import where
from .indexing import scatter_add
from .inplace import apply_
from .registry import op
from .shape import broadcast_shapes, cat, expand, normalize_dim, reshape, stack
from .sort import sort


def _scan(x: Tensor, op, dim, exclusive=False, reverse=False) -> Tensor:
    """The backend scan as a dense tensor of x's shape (no autograd)."""
    out = x.backend.scan(op, x._view(), dim, exclusive, reverse)
    return Tensor._dense(out, x.shape, x.device)


def _running(x, dim, combine):
    """The inclusive scan of ``x`` along ``dim`` as a chain of ``combine`` calls (what a
    gradient of any order differentiates exactly, zeros of a product included)."""
    total = x.narrow(dim, 0, 1)
    parts = [total]
    for k in range(1, x.shape[dim]):
        total = combine(total, x.narrow(dim, k, 1))
        parts.append(total)
    return parts


class Scan(Function):
    def forward(self, x, op, dim):
        self.op, self.dim = op, dim
        y = _scan(x, op, dim)
        if op == "prod":
            self.save_for_backward(x, y)
        return y

    def backward(self, g):
        if self.op == "sum":
            return _scan(g, "sum", self.dim, reverse=True), None, None
        x, y = self.saved_tensors
        return cumprod_grad(x, y, g, self.dim), None, None

    def unfused(self, x, op, dim):
        """The unfused form: cumsum or cumprod along ``dim``."""
        parts = _running(x, dim, (lambda a, b: a + b) if op == "sum" else (lambda a, b: a * b))
        return cat(parts, dim)


def cumprod_grad(x, y, g, dim):
    """PyTorch's gradient of ``y = cumprod(x, dim)``, zeros included (module docstring)."""
    zero = (x == 0).long()
    zeros_so_far = _scan(zero, "sum", dim)   # inclusive count of zeros
    before = zeros_so_far == 0               # before the first zero
    first = zeros_so_far * zero == 1         # the first zero
    after = zeros_so_far >= 1                # the first zero and everything after it
    beyond = zeros_so_far - zero >= 1        # strictly after the first zero
    one = Tensor._full((), 1, x.dtype, x.device)
    nil = Tensor._full((), 0, x.dtype, x.device)
    at_before = _scan(g * y, "sum", dim, reverse=True) / where(zero == 1, one, x)
    tail = _scan(where(beyond, x, one), "prod", dim)   # prod_{z<j<=k} x_j
    at_first = _scan(x, "prod", dim, exclusive=True) * _scan(where(after, g * tail, nil), "sum",
                                                             dim, reverse=True)
    return where(before, at_before, where(first, at_first, nil))


def _scan_dtype(x, dtype):
    if dtype is not None:
        return x.to(dtype)
    return x.to(int64) if x.dtype.kind in "biu" else x  # like PyTorch: integers accumulate in long


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def cumsum(x, dim, dtype=None):
    """Cumulative sum along ``dim``: ``out[..., k, ...] = x[..., :k+1, ...].sum(dim)``."""
    x = _scan_dtype(x, dtype)
    if x.ndim == 0:
        return x + 0
    return Scan.apply(x, "sum", normalize_dim(dim, x.ndim))


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def cumprod(x, dim, dtype=None):
    """Cumulative product along ``dim``; differentiable, zeros included."""
    x = _scan_dtype(x, dtype)
    if x.ndim == 0:
        return x * 1
    return Scan.apply(x, "prod", normalize_dim(dim, x.ndim))


class Prod(Function):
    """prod over one dim (``None``: x was flattened, dim 0)."""

    def forward(self, x, dim, keepdim):
        self.dim, self.keepdim = dim, keepdim
        self.save_for_backward(x)
        out = x.backend.reduce("prod", x._view(), (dim,))
        shape = list(x.shape)
        if keepdim:
            shape[dim] = 1
        else:
            del shape[dim]
        return Tensor._dense(out, tuple(shape), x.device)

    def backward(self, g):
        (x,) = self.saved_tensors
        others = (_scan(x, "prod", self.dim, exclusive=True)
                  * _scan(x, "prod", self.dim, exclusive=True, reverse=True))
        kept = list(x.shape)
        kept[self.dim] = 1
        return expand(reshape(g, *kept), *x.shape) * others, None, None

    def unfused(self, x, dim, keepdim):
        """The unfused form: the product along ``dim`` (the last running product)."""
        total = _running(x, dim, lambda a, b: a * b)[-1]
        return total if keepdim else total.squeeze(dim)


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1))
def prod(x, dim=None, keepdim=False, dtype=None):
    """Product of all elements, or along ``dim`` (``keepdim`` keeps it as size 1)."""
    x = _scan_dtype(x, dtype)
    if dim is None:
        return Prod.apply(reshape(x, x.numel()), 0, False)
    if x.ndim == 0:
        return x * 1
    return Prod.apply(x, normalize_dim(dim, x.ndim), keepdim)


# --- boolean-mask indexing: scan + stream compaction ----------------------------------------
class MaskedSelect(Function):
    """x[mask] for a mask of x's shape: the kept elements, 1-D; backward puts g back."""

    differentiable_backward = True  # MaskedScatter, whose backward selects again

    def forward(self, x, mask):
        self.mask = mask
        return _select(x, mask)

    def backward(self, g):
        return MaskedScatter.apply(self.mask, g), None


def _select(x, mask):
    buf = x.backend.masked_select(x._view(), mask._view())
    return Tensor._dense(buf, (len(buf),), x.device)


class MaskedScatter(Function):
    """A tensor of the mask's shape holding ``src``'s elements at the True positions, in
    order, zeros elsewhere; backward picks g at those positions."""

    differentiable_backward = True  # MaskedSelect, whose backward scatters again

    def forward(self, mask, src):
        self.mask, self.src_shape = mask, src.shape
        out = src.backend.masked_scatter(mask._view(), reshape(src, src.numel())._view())
        return Tensor._dense(out, mask.shape, src.device)

    def backward(self, g):
        return None, reshape(MaskedSelect.apply(g, self.mask), *self.src_shape)


def _full_mask(x, mask):
    """A bool mask over x's leading dims, checked and expanded to x's shape (stride 0)."""
    check_same_device(x, mask)
    if mask.ndim > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    for d, (m, s) in enumerate(zip(mask.shape, x.shape)):
        if m != s:
            raise IndexError(f"The shape of the mask {list(mask.shape)} at index {d} does not "
                             f"match the shape of the indexed tensor {list(x.shape)} at index "
                             f"{d}")
    return expand(reshape(mask, *mask.shape, *[1] * (x.ndim - mask.ndim)), *x.shape)


def mask_index(x, mask):
    """``x[mask]``: the selected elements (or sub-tensors, for a mask over the leading dims),
    shape ``(count, *x.shape[mask.ndim:])``."""
    full = _full_mask(x, mask)
    picked = MaskedSelect.apply(x, full)
    return reshape(picked, -1, *x.shape[mask.ndim:])


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), r.random((3, 4)) < 0.5))
def masked_select(x, mask):
    """The elements of x where the (broadcast) mask is True, as a 1-D tensor."""
    if not isinstance(mask, Tensor) or mask.dtype != np.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(x.shape, mask.shape)
    return MaskedSelect.apply(expand(x, *shape), expand(mask, *shape))


def mask_assign_(x, mask, value):
    """``x[mask] = value`` for a tensor value of ``count`` elements (or broadcastable to
    ``(count, *x.shape[mask.ndim:])``): in place, through ``inplace.apply_``."""
    full = _full_mask(x, mask)
    with no_grad():
        count = int(mask.long().sum().item())
    rows = (count, *x.shape[mask.ndim:])
    try:
        src = expand(value.to(x.dtype), *rows)
    except RuntimeError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(value.shape)} cannot "
                           f"be broadcast to indexing result of shape {list(rows)}") from None
    return apply_(x, lambda v: where(full, MaskedScatter.apply(full, src), v), value)


@op(mg=True, grad=False, example=lambda r: (r.integers(-1, 2, (3, 4)).astype(float),))
def nonzero(x, *, as_tuple=False):
    """The indices of the non-zero elements of x, in row-major order: a ``(count, x.ndim)``
    int64 tensor, or with ``as_tuple`` one 1-D tensor per dim. Composed on the device: each
    dim's coordinate grid, masked_select-ed by ``x != 0`` (the count is the one host sync,
    as in PyTorch)."""
    if not x.ndim and not as_tuple:  # torch: (1, 0) or (0, 0)
        count = int((x != 0).item())
        return Tensor._from_array(np.zeros((count, 0), np.int64), x.device)
    shape = tuple(x.shape) or (1,)  # as_tuple treats a 0-d tensor as 1-d
    mask = reshape(x != 0, *shape)
    coords = []
    for d, size in enumerate(shape):
        grid = np.arange(size, dtype=np.int64).reshape([-1 if i == d else 1
                                                        for i in range(len(shape))])
        coords.append(masked_select(expand(Tensor._from_array(grid, x.device), *shape), mask))
    return tuple(coords) if as_tuple else stack(coords, 1)


@op(mg=True, out=False, grad=False, example=lambda r: (r.integers(-2, 3, (3, 4)).astype(float),))
def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values of x (flattened), ascending; with ``return_inverse`` each element's
    index into them (x's shape), with ``return_counts`` how often each occurs. Composed on the
    device: sort, mark each sorted element that differs from its predecessor, masked_select
    the marked values; the inverse is the running count of marks scattered back through the
    sort's permutation, the counts the gaps between marked positions."""
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not supported by minigpu: only the "
                                  "flattened form (dim=None)")
    flat = reshape(x, x.numel())
    values, order = sort(flat)
    n = flat.numel()
    first = Tensor._from_array(np.ones(min(n, 1), dtype=bool), x.device)
    new = cat([first, values[1:] != values[:-1]], 0)
    out = [masked_select(values, new)]
    if return_inverse:
        ranks = cumsum(new.long(), 0) - 1
        zeros = Tensor._from_array(np.zeros(n, np.int64), x.device)
        out.append(reshape(scatter_add(zeros, 0, order, ranks), *x.shape))
    if return_counts:
        starts = nonzero(new, as_tuple=True)[0]
        ends = cat([starts[1:], Tensor._from_array(np.array([n], np.int64), x.device)], 0)
        out.append(ends - starts)
    return out[0] if len(out) == 1 else tuple(out)
