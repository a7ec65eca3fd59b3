"""Lookup by integer index: rows (``x[idx]``, ``index_select``, embeddings) and values along
a dim (``gather``, ``scatter_add``)."""
from __future__ import annotations

import numpy as np

from ..autograd import Function, no_grad
from ..tensor import Tensor
from .common import check_same_device
from .elementwise import where
from .inplace import apply_
from .registry import op
from .shape import contiguous, normalize_dim, reshape, transpose


class IndexSelect(Function):
    """out[n] = x[idx[n]] along dim 0; backward accumulates rows with index_add (atomics)."""

    def forward(self, x, idx):
        self.rows = x.shape[0]
        width = x.numel() // max(self.rows, 1)
        x = contiguous(x)
        table = x._view()._replace(shape=(self.rows, width), strides=(width, 1))
        out = x.backend.index_select(table, contiguous(idx)._view())
        self.save_for_backward(idx)
        return Tensor._dense(out, tuple(idx.shape) + tuple(x.shape[1:]), x.device)

    differentiable_backward = True  # IndexAdd, whose backward is IndexSelect again

    def backward(self, g):
        (idx,) = self.saved_tensors
        return IndexAdd.apply(g, idx, self.rows), None


class IndexAdd(Function):
    """out (rows, ...) = zeros with out[idx[n]] += g[n]: IndexSelect's backward (atomics on
    cuda), a recorded op so that create_graph differentiates it (its backward selects)."""

    differentiable_backward = True

    def forward(self, g, idx, rows):
        n = idx.numel()
        flat = reshape(contiguous(g), n, g.numel() // max(n, 1))
        out = g.backend.index_add(reshape(idx, n)._view(), flat._view(), rows)
        self.save_for_backward(idx)
        return Tensor._dense(out, (rows,) + tuple(g.shape[idx.ndim:]), g.device)

    def backward(self, g):
        (idx,) = self.saved_tensors
        return IndexSelect.apply(g, idx), None, None


def in_bounds(index, size, dim):
    """``index`` (integers) into a dimension ``dim`` of ``size``, negatives counted from the
    end as in Python; an IndexError naming the index out of ``[-size, size)``."""
    if index.numel():
        lo, hi = int(index.min().item()), int(index.max().item())
        if lo < -size or hi >= size:
            raise IndexError(f"index {hi if hi >= size else lo} is out of bounds for dimension "
                             f"{dim} with size {size}")
        if lo < 0:
            index = index + (index < 0).long() * size
    return index


@op(mg=True, example=lambda r: (r.standard_normal((4, 3)), 0, np.array([2, 0, 2])))
def index_select(x, dim, index):
    if not isinstance(index, Tensor) or index.dtype.kind not in "iu" or index.ndim > 1:
        raise IndexError("index_select(): index must be a 0-D or 1-D integer tensor")
    check_same_device(x, index)
    d = normalize_dim(dim, x.ndim)
    index = in_bounds(index, x.shape[d], d)
    if d == 0:
        return IndexSelect.apply(x, index)
    return transpose(IndexSelect.apply(transpose(x, 0, d), index), 0, d)


# --- along a dim: gather and scatter_add (torch.gather / torch.scatter_add) --------------------
def _check_along(name, x, dim, index, src=None):
    """PyTorch's checks of gather/scatter_add: an int64 index of x's rank whose sizes fit,
    entries in range. Returns the normalised dim."""
    check_same_device(x, index, src)
    if not isinstance(index, Tensor) or index.dtype != np.int64:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index")
    d = normalize_dim(dim, max(x.ndim, 1))
    if index.ndim != x.ndim and not (index.ndim <= 1 and x.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as "
                           f"{'input' if src is None else 'self'} tensor")
    for k, (i, s) in enumerate(zip(index.shape, x.shape)):
        if k != d and i > s:
            raise RuntimeError(f"Size does not match at dimension {k} expected index "
                               f"{list(index.shape)} to be no larger than self "
                               f"{list(x.shape)} apart from dimension {d}")
    if src is not None:
        if src.dtype != x.dtype:
            raise RuntimeError(f"{name}(): Expected self.dtype to be equal to src.dtype")
        if any(i > s for i, s in zip(index.shape, src.shape)) or src.ndim != index.ndim:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(index.shape)} to be no larger than src "
                               f"{list(src.shape)}")
    if index.numel():
        size = x.shape[d] if x.ndim else 1
        with no_grad():
            lo, hi = int(index.min().item()), int(index.max().item())
        if lo < 0 or hi >= size:
            raise RuntimeError(f"index {hi if hi >= size else lo} is out of bounds for "
                               f"dimension {d} with size {size}")
    return d


def _as1d(t):
    return reshape(t, 1) if t.ndim == 0 else t


class Gather(Function):
    """out = x gathered along dim at index; backward scatter-adds g into zeros (atomics)."""

    differentiable_backward = True  # ScatterAdd, whose backward gathers again

    def forward(self, x, dim, index):
        self.dim, self.shape = dim, x.shape
        self.save_for_backward(index)
        return Tensor._dense(x.backend.gather_dim(x._view(), dim, index._view()), index.shape,
                             x.device)

    def backward(self, g):
        (index,) = self.saved_tensors
        zeros = Tensor._full(self.shape, 0, g.dtype, g.device)
        return ScatterAdd.apply(zeros, self.dim, index, g), None, None


class ScatterAdd(Function):
    """out = x + src scattered along dim at index; the gradients: g for x, g gathered at
    index for src."""

    differentiable_backward = True  # g itself, and Gather

    def forward(self, x, dim, index, src):
        self.dim = dim
        self.save_for_backward(index)
        return Tensor._dense(x.backend.scatter_add_dim(x._view(), dim, index._view(),
                                                       src._view()), x.shape, x.device)

    def backward(self, g):
        (index,) = self.saved_tensors
        g_src = None
        if self.needs_input_grad[3]:
            g_src = Gather.apply(g, self.dim, index)
        return g, None, None, g_src


@op(mg=True, example=lambda r: (r.standard_normal((3, 4)), 1, r.integers(0, 4, (3, 2))))
def gather(x, dim, index):
    """``out[i][j][k] = x[index[i][j][k]][j][k]`` for dim 0 (and so on): values of x picked
    along ``dim`` at ``index``, in index's shape."""
    d = _check_along("gather", x, dim, index)
    out = Gather.apply(_as1d(x), d, _as1d(index))
    return reshape(out, *index.shape)


@op(mg=True, inplace="scatter_add_",
    example=lambda r: (r.standard_normal((3, 4)), 1, r.integers(0, 4, (3, 2)),
                       r.standard_normal((3, 2))))
def scatter_add(x, dim, index, src):
    """A copy of x with ``src[i][j][k]`` added at ``[index[i][j][k]][j][k]`` for dim 0 (and so
    on); repeated indices accumulate. Only src's window of index's shape is read."""
    d = _check_along("scatter_add", x, dim, index, src)
    if tuple(src.shape) != tuple(index.shape):  # the window of src that index covers
        src = src[tuple(slice(0, n) for n in index.shape)]
    out = ScatterAdd.apply(_as1d(x), d, _as1d(index), _as1d(src))
    return reshape(out, *x.shape)


@op(example=lambda r: (r.standard_normal((3, 4)), 1, r.integers(0, 4, (3, 2)),
                       r.standard_normal((3, 2))))
def scatter_add_(x, dim, index, src):
    """In-place ``scatter_add``."""
    return apply_(x, lambda v: scatter_add(v, dim, index, src), src)


@op(mg=True, out=False, example=lambda r: (r.standard_normal((3, 4)), (0, 1)))
def flip(x, dims):
    """A copy of ``x`` with the order of its elements reversed along ``dims`` (an int or a
    sequence): one ``index_select`` with a reversed index per dim."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    seen = [normalize_dim(d, x.ndim) for d in dims]
    if len(set(seen)) != len(seen):
        raise RuntimeError(f"dims has duplicates, original flip dims size={len(dims)}, but "
                           f"unique flip dims size={len(set(seen))}")
    out = x
    for d in seen:
        reverse = np.arange(x.shape[d] - 1, -1, -1, dtype=np.int64)
        out = index_select(out, d, Tensor._from_array(reverse, x.device))
    return out if seen else out.clone()


def _triangle(x, diagonal, lower, name):
    if x.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    rows, cols = x.shape[-2:]
    keep = np.tri(rows, cols, diagonal if lower else diagonal - 1, dtype=bool)
    mask = Tensor._from_array(keep if lower else ~keep, x.device)
    return where(mask, x, x.new_zeros(()))


@op(mg=True, example=lambda r: (r.standard_normal((4, 4)), -1))
def tril(x, diagonal=0):
    """The lower triangle of the last two dims (elements on and below the ``diagonal``-th
    diagonal), the rest zero."""
    return _triangle(x, diagonal, True, "tril")


@op(mg=True, example=lambda r: (r.standard_normal((4, 4)), 1))
def triu(x, diagonal=0):
    """The upper triangle of the last two dims (on and above the ``diagonal``-th diagonal)."""
    return _triangle(x, diagonal, False, "triu")
