"""``x[index]`` and ``x[index] = value``: the subscript forms, dispatched to the families that
implement them (basic indexing: a view, ``shape.Slice``; a 1-D integer tensor:
``indexing.index_select``; a boolean mask: ``scan``'s compaction; writes: ``inplace``). They sit
above those families, so none of them imports another upward."""
from __future__ import annotations

import numpy as np

from ..autograd import is_grad_enabled
from ..tensor import Tensor
from .indexing import index_select
from .inplace import ViewOf, _set_node, _window_of, copy_, masked_fill_
from .registry import op
from .scan import mask_assign_, mask_index
from .shape import Slice, _basic_index_layout


_ARRAY_INDEX = (Tensor, list, range, np.ndarray)


def _as_mask_assignment(x, index, value):
    """``x[index] = value`` with integer arrays in ``index`` (NumPy's advanced indexing rules:
    ``x[range(n), y] = v``, ``x[:, idx] = v``) as the equivalent boolean-mask assignment: the
    mask of the selected elements, and the values reordered to the mask's row-major order.
    An element selected twice gets its last value, as in NumPy. The index arrays are read on
    the host (one sync for a cuda index tensor)."""
    def host(i):
        if isinstance(i, Tensor):
            return i.detach().cpu().numpy()
        return np.asarray(i) if isinstance(i, (list, range)) else i

    index = index if isinstance(index, tuple) else (index,)
    try:
        selected = np.arange(x.numel()).reshape(x.shape)[tuple(host(i) for i in index)]
    except IndexError as e:
        raise IndexError(f"index {e} (t[index] = value on a tensor of shape "
                         f"{tuple(x.shape)})") from None
    flat = selected.reshape(-1)
    last = len(flat) - 1 - np.unique(flat[::-1], return_index=True)[1]  # sorted positions
    mask = np.zeros(x.numel(), np.bool_)
    mask[flat] = True
    mask = Tensor._from_array(mask.reshape(x.shape), x.device)
    if not isinstance(value, Tensor) or value.numel() == 1:
        return mask, value
    spread = value.expand(*selected.shape).reshape(-1)
    return mask, spread[Tensor._from_array(last.astype(np.int64), value.device)]


@op(method="__getitem__")
def getitem(x, index):
    if isinstance(index, Tensor):
        if index.dtype == np.bool_:
            return mask_index(x, index)
        if index.dtype.kind in "iu" and index.ndim <= 1:
            return index_select(x, 0, index)
        raise IndexError("only 1-D integer tensors are supported as tensor indices")
    if isinstance(index, (list, np.ndarray)):
        return getitem(x, Tensor._from_array(np.asarray(index, dtype=np.int64), x.device))
    return Slice.apply(x, index)


@op(method="__setitem__")
def setitem_(x, index, value):
    """``x[index] = value`` (basic indexing, a boolean mask of x's shape, or integer arrays:
    see :func:`_as_mask_assignment`): writes through the view ``x[index]``; value is a scalar
    or a tensor broadcast to the view."""
    if isinstance(index, Tensor) and index.dtype == np.bool_:
        if isinstance(value, Tensor) and value.numel() != 1:
            mask_assign_(x, index, value)  # one value per selected element: compaction
            return
        # a mask over the leading dims selects whole sub-tensors, as in PyTorch
        mask = index.reshape(*index.shape, *[1] * (x.ndim - index.ndim))
        masked_fill_(x, mask, value.reshape(()) if isinstance(value, Tensor) else value)
        return
    if isinstance(index, _ARRAY_INDEX) or (isinstance(index, tuple) and any(
            isinstance(i, _ARRAY_INDEX) for i in index)):
        mask, value = _as_mask_assignment(x, index, value)
        setitem_(x, mask, value)
        return
    recording = is_grad_enabled() and (x.requires_grad or (
        isinstance(value, Tensor) and value.requires_grad))
    if recording:
        copy_(Slice.apply(x, index), value)
        if x._base is not None:  # x is itself a view: it becomes a window of the new base
            _set_node(x, ViewOf.apply(x._base, _window_of(x, x._base)).grad_fn, 0)
        return
    _, shape, strides, offset = _basic_index_layout(x, index)
    copy_(x._make_view(shape, strides, offset), value)
