"""Row lookup by integer index (``x[idx]``, ``index_select``, embeddings)."""
from __future__ import annotations

from ..autograd import Function
from ..tensor import Tensor
from .common import check_same_device
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

    def backward(self, g):
        (idx,) = self.saved_tensors
        n = idx.numel()
        rows = reshape(contiguous(g), n, g.numel() // max(n, 1))
        out = g.backend.index_add(reshape(idx, n)._view(), rows._view(), self.rows)
        return Tensor._dense(out, (self.rows,) + tuple(g.shape[idx.ndim:]), g.device), None


def index_select(x, dim, index):
    if not isinstance(index, Tensor) or index.dtype.kind not in "iu" or index.ndim > 1:
        raise IndexError("index_select(): index must be a 0-D or 1-D integer tensor")
    check_same_device(x, index)
    d = normalize_dim(dim, x.ndim)
    size = x.shape[d]
    if index.numel():
        lo, hi = int(index.min().item()), int(index.max().item())
        if lo < -size or hi >= size:
            raise IndexError(f"index {hi if hi >= size else lo} is out of bounds for dimension "
                             f"{d} with size {size}")
        if lo < 0:
            index = index + (index < 0).long() * size
    if d == 0:
        return IndexSelect.apply(x, index)
    return transpose(IndexSelect.apply(transpose(x, 0, d), index), 0, d)
