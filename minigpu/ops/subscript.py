"""``x[index]`` and ``x[index] = value``: the subscript forms, dispatched to the families that
implement them (basic indexing: a view, ``shape.Slice``; integer tensors: a view and
``indexing``'s row lookup; a boolean mask: ``scan``'s compaction; writes: ``inplace``). They sit
above those families, so none of them imports another upward."""
from __future__ import annotations

import numpy as np

from ..autograd import is_grad_enabled
from ..backends.contract import row_major_strides
from ..tensor import Tensor
from .indexing import IndexSelect, in_bounds, index_select
from .inplace import ViewOf, _set_node, _window_of, copy_, masked_fill_
from .registry import op
from .scan import mask_assign_, mask_index, nonzero
from .shape import Slice, _basic_index_layout, broadcast_shapes, reshape


_ARRAY_INDEX = (Tensor, list, range, np.ndarray)


def _as_mask_assignment(x, index, value):
    """``x[index] = value`` with integer arrays in ``index`` (PyTorch's advanced indexing:
    ``x[range(n), y] = v``, ``x[:, idx] = v``, ``x[idx2d] = v``) as the equivalent boolean-mask
    assignment: the mask of the selected elements, and the values reordered to the mask's
    row-major order. Which elements are selected is ``x[index]`` of the element numbers, read
    on the host (one sync for a cuda index tensor). An element selected twice gets its last
    value."""
    host = tuple(i.detach().cpu() if isinstance(i, Tensor) else i
                 for i in (index if isinstance(index, tuple) else (index,)))
    numbers = Tensor._from_array(np.arange(x.numel()).reshape(x.shape), "cpu")
    try:
        selected = getitem(numbers, host).numpy()
    except IndexError as e:
        raise IndexError(f"{e} (t[index] = value on a tensor of shape {tuple(x.shape)})"
                         ) from None
    flat = selected.reshape(-1)
    last = len(flat) - 1 - np.unique(flat[::-1], return_index=True)[1]  # sorted positions
    mask = np.zeros(x.numel(), np.bool_)
    mask[flat] = True
    mask = Tensor._from_array(mask.reshape(x.shape), x.device)
    if not isinstance(value, Tensor) or value.numel() == 1:
        return mask, value
    spread = value.expand(*selected.shape).reshape(-1)
    return mask, spread[Tensor._from_array(last.astype(np.int64), value.device)]


def _index_entries(x, index):
    """``index`` as a tuple, with the sequences PyTorch reads as index tensors (a list, a range,
    a NumPy array, a boolean mask inside a tuple: its nonzero coordinates) made int64 tensors
    on x's device. A list holding sequences is a tuple of them, as in PyTorch 2.x."""
    if isinstance(index, list) and any(isinstance(i, (list, tuple, Tensor, slice))
                                       or i is None or i is Ellipsis for i in index):
        index = tuple(index)
    entries = []
    for i in index if isinstance(index, tuple) else (index,):
        if isinstance(i, (list, range, np.ndarray)):
            i = Tensor._from_array(np.asarray(i), x.device)
            if i.dtype.kind == "f" and i.numel() == 0:  # torch.tensor([]) is float
                i = i.long()
        if isinstance(i, Tensor):
            if i.dtype == np.bool_:
                entries.extend(nonzero(i, as_tuple=True))
                continue
            if i.dtype.kind not in "iu":
                raise IndexError("tensors used as indices must be long, int, byte or bool "
                                 f"tensors (got {i.dtype})")
        entries.append(i)
    return tuple(entries)


def _advanced_index(x, entries):
    """``x[entries]`` with integer tensors among them (PyTorch's advanced indexing), composed
    of a view, one ``index_select`` and reshapes: the basic entries (ints, slices, None, ...)
    slice x with each tensor kept as a full dim; those dims, permuted to the front and
    flattened into one, are read at the linear index the broadcast tensors make. The result's
    index dims stand where the tensors stood when they are next to one another (ints and 0-d
    tensors, applied first, do not separate them), else in front, as in PyTorch."""
    specified = sum(1 for i in entries if i is not None and i is not Ellipsis)
    if specified > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    basic, picked, d_out, d_in = [], [], 0, 0  # picked: (dim of the sliced x, tensor, x's dim)
    for i in entries:
        if i is Ellipsis:
            basic.append(i)
            d_out += x.ndim - specified
            d_in += x.ndim - specified
        elif isinstance(i, Tensor):
            basic.append(slice(None))
            picked.append((d_out, i, d_in))
            d_out, d_in = d_out + 1, d_in + 1
        else:
            basic.append(i)
            d_out += i is None or isinstance(i, slice)
            d_in += i is not None
    y = x if all(b == slice(None) for b in basic) else Slice.apply(x, tuple(basic))
    dims = [d for d, _, _ in picked]
    sizes = [y.shape[d] for d in dims]
    try:
        shape = broadcast_shapes(*[i.shape for _, i, _ in picked])
    except RuntimeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                         "with shapes " + ", ".join(str(list(i.shape)) for _, i, _ in picked)
                         ) from None
    linear = None
    for (d, i, d_in), size, step in zip(picked, sizes, row_major_strides(tuple(sizes))):
        i = in_bounds(i.to(x.device).long(), size, d_in)
        linear = i * step if linear is None else linear + i * step
    rest = [d for d in range(y.ndim) if d not in dims]
    rows = y.permute(*dims, *rest).reshape(int(np.prod(sizes)), *[y.shape[d] for d in rest])
    out = IndexSelect.apply(rows, linear.expand(*shape).reshape(-1))
    out = out.reshape(*shape, *rows.shape[1:])
    # a 0-d tensor counts as an int (PyTorch): its dim goes and it separates nothing
    zero_d = [d for d, i, _ in picked if i.ndim == 0]
    kept = [d - sum(z < d for z in zero_d) for d, i, _ in picked if i.ndim > 0]
    if not kept or kept != list(range(kept[0], kept[0] + len(kept))) or kept[0] == 0:
        return out  # separated index tensors: their dims lead (and leading ones stay there)
    lead = list(range(len(shape), len(shape) + kept[0]))  # the rest's dims before the index's
    return out.permute(*lead, *range(len(shape)), *range(len(shape) + kept[0], out.ndim))


@op(method="__getitem__",
    example=lambda r: (r.standard_normal((3, 4)), (slice(None), np.array([[0, 2], [3, 3]]))))
def getitem(x, index):
    if isinstance(index, Tensor):
        if index.dtype == np.bool_:
            return mask_index(x, index)
        if index.dtype.kind in "iu" and index.device == x.device and x.ndim:  # rows of x
            return reshape(index_select(x, 0, reshape(index, -1)), *index.shape, *x.shape[1:])
    if isinstance(index, (Tensor, list, range, np.ndarray)) or (isinstance(index, tuple) and any(
            isinstance(i, _ARRAY_INDEX) for i in index)):
        return _advanced_index(x, _index_entries(x, index))
    return Slice.apply(x, index)


@op(method="__setitem__",
    example=lambda r: (r.standard_normal((3, 4)), (np.array([2, 0]),), r.standard_normal((2, 4))))
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
