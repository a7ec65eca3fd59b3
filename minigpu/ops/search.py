"""Binary search: ``searchsorted`` and ``bucketize`` (the backend's ``searchsorted`` primitive).

The backend searches rows: an (R, S) sequence and (R, V) values. A 1-D sequence is one row
and every value is searched in it (R = 1, V = all values); an N-D one gives one row per
leading index, matching the values' leading dims. The result is an int64 (``out_int32``: int32)
tensor of the values' shape, never part of the graph (positions have no gradient).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from .common import check_same_device
from .indexing import gather
from .registry import op


@op(method=False, mg=True, grad=False,
    example=lambda r: (np.sort(r.standard_normal(6)), r.standard_normal((2, 3))))
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """``torch.searchsorted``: for each value of ``input``, the index of the first element of
    its row of ``sorted_sequence`` that is >= it (``right=True`` or ``side="right"``: > it),
    the row's length when there is none (a NaN value too). ``sorter`` (indices that sort an
    unsorted sequence, as ``argsort`` gives) is applied first."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to "
                               "opposites, got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence
    values = input if isinstance(input, Tensor) else \
        Tensor._full((), input, dtypes.result_type(seq, input), seq.device)
    check_same_device(seq, values, sorter)
    if seq.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive "
                           "dimension, but got 0 dimension")
    if seq.ndim > 1 and (values.ndim != seq.ndim or values.shape[:-1] != seq.shape[:-1]):
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(seq.shape)} and input value tensor {list(values.shape)}")
    if sorter is not None:
        if sorter.shape != seq.shape:
            raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same "
                               f"size, but got boundary tensor {list(seq.shape)}and got sorter "
                               f"tensor {list(sorter.shape)}")
        seq = gather(seq, -1, sorter)
    common = dtypes.promote_types(seq.dtype, values.dtype)
    seq, values = seq.detach().to(common), values.detach().to(common)
    rows = math.prod(seq.shape[:-1])           # 1 for a 1-D sequence
    seq_rows = seq.reshape(rows, seq.shape[-1])
    value_rows = values.reshape(rows, values.numel() // rows if rows else 0)
    buf = seq.backend.searchsorted(seq_rows._view(), value_rows._view(), bool(right))
    out = Tensor._dense(buf, values.shape, seq.device)
    return out.to(dtypes.int32) if out_int32 else out


@op(method=False, mg=True, grad=False,
    example=lambda r: (r.standard_normal((2, 3)), np.sort(r.standard_normal(6))))
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """``torch.bucketize``: the index of the bucket of each value of ``input`` among the 1-D
    ``boundaries`` (``boundaries[i-1] < x <= boundaries[i]``; ``right=True``:
    ``boundaries[i-1] <= x < boundaries[i]``), ``searchsorted(boundaries, input)``."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim"
                           f"({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)
