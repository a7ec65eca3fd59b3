"""Shape ops: views that only rewrite (shape, strides, offset), and the few that copy.

``permute``, ``transpose``, ``expand``, ``squeeze``/``unsqueeze``, slicing and ``reshape`` of a
contiguous tensor share the input's buffer. ``contiguous``, ``cat`` and ``reshape`` of a
non-contiguous tensor copy through the backend.
"""
from __future__ import annotations

import functools
import numbers

import numpy as np

from ..autograd import Function
from ..backends.contract import View, contiguous_strides, numel, row_major_strides
from ..dtypes import result_type
from ..tensor import Device, Tensor, check_memory_format, normalize_dim
from .common import check_same_device
from .registry import op


def normalize_dims(dims, ndim):
    """A sorted tuple of distinct dims; None means all dims."""
    if dims is None:
        return tuple(range(ndim))
    if isinstance(dims, (numbers.Integral, np.integer)):
        dims = (dims,)
    out = sorted(normalize_dim(d, ndim) for d in dims)
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {out} appears multiple times in the list of dims")
    return tuple(out)


def broadcast_shapes(*shapes):
    """The shape that ``shapes`` broadcast to (PyTorch's error if they cannot)."""
    return _broadcast_shapes(tuple(map(tuple, shapes)))


@functools.lru_cache(maxsize=1024)
def _broadcast_shapes(shapes):
    """``broadcast_shapes``, cached: the same shapes meet at every training step."""
    ndim = max(len(s) for s in shapes)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    out = []
    for i in range(ndim):
        sizes = [s[i] for s in padded if s[i] != 1]
        if len(set(sizes)) > 1:
            names = " and ".join(str(tuple(s)) for s in shapes)
            raise RuntimeError(f"The size of tensor a ({sizes[0]}) must match the size of tensor "
                               f"b ({sizes[1]}) at non-singleton dimension {i} (shapes {names})")
        out.append(sizes[0] if sizes else 1)
    return tuple(out)


def expand_view(t: Tensor, shape) -> View:
    """A stride-0 view of ``t`` broadcast to ``shape`` (no copy)."""
    shape = tuple(shape)
    return View(t._buf, shape, expand_strides(t.shape, t._strides, shape), t._offset)


def expand_strides(shape, strides, target) -> tuple:
    """The strides of a (shape, strides) layout broadcast to ``target``: 0 along the new
    leading dims and the size-1 dims that grow."""
    lead = len(target) - len(shape)
    out = [0] * lead
    for size, stride, n in zip(shape, strides, target[lead:]):
        if size == n:
            out.append(stride)
        elif size == 1:
            out.append(0)
        else:
            raise RuntimeError(f"The expanded size of the tensor ({n}) must match the "
                               f"existing size ({size}) at non-singleton dimension. Target "
                               f"sizes: {list(target)}.  Tensor sizes: {list(shape)}")
    return tuple(out)


def sum_to(g: Tensor, shape) -> Tensor:
    """Undo broadcasting: sum g over the dims along which ``shape`` was expanded (``g.sum``: the
    reductions sit above this module, their backward expands with it)."""
    if g.shape == shape:  # the common case: nothing was broadcast
        return g
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(
        lead + i for i, s in enumerate(shape) if s == 1 and g.shape[lead + i] != 1)
    return g.sum(dims).reshape(shape) if dims else g.reshape(shape)


def _strided(t: Tensor, shape, strides, offset) -> Tensor:
    return t._make_view(shape, strides, offset)


class _DenseLayout:
    """The layout of a dense row-major tensor of ``shape`` (what index arithmetic reads)."""

    def __init__(self, shape):
        self.shape, self.ndim = tuple(shape), len(shape)
        self._strides, self._offset = contiguous_strides(shape), 0


def zeros_with_window(g: Tensor, shape, window) -> Tensor:
    """A zero tensor of ``shape`` whose (shape, strides, offset) ``window`` holds ``g``: the
    gradient of a view with respect to its base."""
    full = Tensor._full(shape, 0, g.dtype, g.device)
    w_shape, w_strides, w_offset = window
    g.backend.assign_(View(full._buf, w_shape, w_strides, w_offset), g._view())
    return full


# --- views ------------------------------------------------------------------------------------
class Permute(Function):
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, dims):
        self.dims = dims
        return _strided(x, tuple([x.shape[d] for d in dims]), tuple([x._strides[d] for d in dims]),
                        x._offset)

    def backward(self, g):
        return permute(g, *np.argsort(self.dims)), None


class Expand(Function):
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, shape):
        self.source = x.shape
        v = expand_view(x, shape)
        return _strided(x, v.shape, v.strides, v.offset)

    def backward(self, g):
        return sum_to(g, self.source), None


def view_strides(t: Tensor, shape):
    """The strides of ``t`` seen in ``shape`` without a copy, or None when no strides can
    express it (PyTorch's rule, ``at::detail::computeStride``)."""
    if t._strides == row_major_strides(tuple(t.shape)):  # the common case: dense row-major
        return row_major_strides(shape)
    return _view_strides(tuple(t.shape), t._strides, shape)


@functools.lru_cache(maxsize=1024)
def _view_strides(old_shape, old_strides, shape):
    """``view_strides`` of a (shape, strides) layout. The old dims fall into chunks, runs of
    dims that are contiguous with one another in memory (a size-1 dim joins any run); a new
    shape is a view when its dims, read from the last, fill each chunk exactly, each new dim
    striding over the chunk's base stride times the elements of the new dims after it."""
    if not old_shape:
        return (1,) * len(shape)
    if numel(old_shape) == 0:
        return old_strides if old_shape == shape else row_major_strides(shape)
    out = [0] * len(shape)
    view_d = len(shape) - 1
    base = old_strides[-1]  # the stride of the chunk's innermost element
    chunk_numel = view_numel = 1
    for d in range(len(old_shape) - 1, -1, -1):
        chunk_numel *= old_shape[d]
        if d == 0 or (old_shape[d - 1] != 1 and old_strides[d - 1] != chunk_numel * base):
            while view_d >= 0 and (view_numel < chunk_numel or shape[view_d] == 1):
                out[view_d] = view_numel * base
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != chunk_numel:
                return None
            if d > 0:
                base, chunk_numel, view_numel = old_strides[d - 1], 1, 1
    return tuple(out) if view_d == -1 else None


class Reshape(Function):
    """A view when strides over the input can express the new shape (``view_strides``), else
    a row-major copy."""
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, shape, strides):
        """``strides``: the view's (``view_strides``), None for a copy."""
        self.source = x.shape
        if strides is not None:
            return _strided(x, shape, strides, x._offset)
        return Tensor._dense(x.backend.contiguous(x._view()), shape, x.device)

    def backward(self, g):
        return g.reshape(self.source), None, None


class Slice(Function):
    """A basic-indexing view: ints, slices (step > 0), None and Ellipsis."""
    differentiable_backward = True  # its backward is IntoWindow, whose backward is Slice

    def forward(self, x, index):
        self.source_shape, self.index = x.shape, index
        _, shape, strides, offset = _basic_index_layout(x, index)
        return _strided(x, shape, strides, offset)

    def backward(self, g):
        return IntoWindow.apply(g, self.source_shape, self.index), None


class IntoWindow(Function):
    """Slice's backward: g placed in the window ``index`` of a zero tensor of ``shape``. Its
    own backward slices that window out again, so ``create_graph`` differentiates a slice
    twice."""
    differentiable_backward = True

    def forward(self, g, shape, index):
        self.index = index
        _, *window = _basic_index_layout(_DenseLayout(shape), index)
        return zeros_with_window(g, shape, window)

    def backward(self, gg):
        return Slice.apply(gg, self.index), None, None


class Clone(Function):
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x):
        return Tensor._dense(x.backend.contiguous(x._view()), x.shape, x.device)

    def backward(self, g):
        return g


class ToDevice(Function):
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, device: Device):
        self.source = x.device
        host = x.backend.to_numpy(x._view())
        return Tensor._from_array(host, device)

    def backward(self, g):
        return g.to(self.source), None


class Cat(Function):
    """``cat`` along ``dim``: one new buffer, each input copied into its window of it (a view
    of the output's buffer, made here as a View: no Tensor, no node per window)."""
    differentiable_backward = True  # narrow views of g: Slice
    stacked = False  # Stack: each input fills one index of a new dim

    def forward(self, dim, *tensors):
        first = tensors[0]
        self.dim = dim
        shape = list(first.shape)
        if self.stacked:
            self.sizes = [1] * len(tensors)
            shape.insert(dim, len(tensors))
        else:
            self.sizes = [t.shape[dim] for t in tensors]
            shape[dim] = sum(self.sizes)
        shape = tuple(shape)
        assign_ = first.backend.assign_
        buf = first.backend.empty(numel(shape), first.dtype)
        strides = contiguous_strides(shape)
        if buf.size:  # else every window is empty (and may start past the end)
            window, start = list(shape), 0
            for t, size in zip(tensors, self.sizes):
                window[dim] = size
                source = t._view()
                if self.stacked:  # the input seen with the new dim, of size 1
                    source = View(source.buf, tuple(window), source.strides[:dim] + (0,)
                                  + source.strides[dim:], source.offset)
                if size:
                    assign_(View(buf, tuple(window), strides, start * strides[dim]), source)
                start += size
        return Tensor._result(buf, shape, first.device)

    def backward(self, g):
        if self.stacked:
            return (None, *unbind(g, self.dim))
        grads, start = [], 0
        for size in self.sizes:
            grads.append(narrow(g, self.dim, start, size))
            start += size
        return (None, *grads)


class Stack(Cat):
    stacked = True


def _of_one_dtype(tensors):
    """The tensors cast to the dtype they promote to together (``dtypes.result_type``,
    PyTorch's rule: int64 with float32 is float32, where NumPy says float64)."""
    dtype = tensors[0].dtype
    if any(t.dtype != dtype for t in tensors):
        dtype = result_type(*tensors)
        return [t.to(dtype) for t in tensors]
    return tensors


# --- user-facing functions ----------------------------------------------------------------------
@op(mg=True, out=False, torch="Tensor.permute", example=lambda r: (r.standard_normal((2, 3, 4)), 2, 0, 1))
def permute(x, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = tuple(normalize_dim(d, x.ndim) for d in dims)
    if sorted(dims) != list(range(x.ndim)):
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {x.ndim} is not equal to len(dims) = {len(dims)}"
                           if len(dims) != x.ndim else f"permute(): dims {dims} repeat a dim")
    return Permute.apply(x, dims)


@op(mg=True, out=False, example=lambda r: (r.standard_normal((2, 3, 4)), 0, 2))
def transpose(x, dim0, dim1):
    if type(dim0) is not int or type(dim1) is not int:  # other types are checked uncached
        dim0, dim1 = normalize_dim(dim0, x.ndim), normalize_dim(dim1, x.ndim)
    return Permute.apply(x, _swapped_dims(x.ndim, dim0, dim1))


@functools.lru_cache(maxsize=256)
def _swapped_dims(ndim, dim0, dim1):
    """The permutation of ``ndim`` dims that swaps dim0 and dim1. Cached: ``W.mT`` runs at
    every forward and backward of a Linear."""
    dims = list(range(ndim))
    a, b = normalize_dim(dim0, ndim), normalize_dim(dim1, ndim)
    dims[a], dims[b] = dims[b], dims[a]
    return tuple(dims)


@op(example=lambda r: (r.standard_normal((3, 4)),))
def t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return transpose(x, 0, 1) if x.ndim == 2 else x


def _infer_shape(shape, n):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    if -1 not in shape and numel(shape) == n and all(type(s) is int and s >= 0 for s in shape):
        return tuple(shape)  # the common case: a full shape of plain ints
    shape = [int(s) for s in shape]
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = numel([s for s in shape if s != -1])
    if -1 in shape:
        if known == 0 or n % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
        shape[shape.index(-1)] = n // known
    if numel(shape) != n:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {n}")
    return tuple(shape)


@op(mg=True, out=False, torch="Tensor.reshape", example=lambda r: (r.standard_normal((2, 3, 4)), 4, -1))
def reshape(x, *shape):
    shape = _infer_shape(shape, x.numel())
    strides = view_strides(x, shape)
    if strides == x._strides and shape == tuple(x.shape):
        return x
    return Reshape.apply(x, shape, strides)


@op(example=lambda r: (r.standard_normal((2, 3, 4)), 6, 4))
def view(x, *shape):
    """``x`` seen in ``shape`` over its own buffer: PyTorch's rule (``view_strides``), which
    includes non-contiguous tensors whose dims split or merge within contiguous chunks."""
    if len(shape) == 1 and not isinstance(shape[0], (tuple, list, numbers.Integral)):
        raise TypeError(f"view(): argument 'size' must be a tuple of ints, not "
                        f"{type(shape[0]).__name__} (view(dtype) is not supported)")
    shape = _infer_shape(shape, x.numel())
    strides = view_strides(x, shape)
    if strides is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride "
                           "(at least one dimension spans across two contiguous subspaces). "
                           "Use .reshape(...) instead.")
    if strides == x._strides and shape == tuple(x.shape):
        return x
    return Reshape.apply(x, shape, strides)


@op(example=lambda r: (r.standard_normal((2, 3, 4)), r.standard_normal((6, 4))))
def view_as(x, other):
    return view(x, *other.shape)


@op(example=lambda r: (r.standard_normal((2, 3, 4)), r.standard_normal((4, 6))))
def reshape_as(x, other):
    return reshape(x, *other.shape)


@op(mg=True, out=False, example=lambda r: (r.standard_normal((2, 3, 4)), 1))
def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, 1)
    s, e = normalize_dim(start_dim, x.ndim), normalize_dim(end_dim, x.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    return reshape(x, *x.shape[:s], numel(x.shape[s:e + 1]), *x.shape[e + 1:])


@op(mg=True, out=False, example=lambda r: (r.standard_normal((2, 1, 3, 1)), 1))
def squeeze(x, dim=None):
    """A view without the size-1 dims (all, or those of ``dim``); the others keep their
    strides."""
    dims = range(x.ndim) if dim is None else normalize_dims(dim, x.ndim)
    kept = [i for i in range(x.ndim) if not (i in dims and x.shape[i] == 1)]
    if len(kept) == x.ndim:
        return x
    return Reshape.apply(x, tuple(x.shape[i] for i in kept), tuple(x._strides[i] for i in kept))


@op(mg=True, out=False, example=lambda r: (r.standard_normal((2, 3)), 1))
def unsqueeze(x, dim):
    """A view with a size-1 dim inserted at ``dim``; its stride is PyTorch's (the size times
    the stride of the dim it comes before, 1 at the end)."""
    d = normalize_dim(dim, x.ndim + 1)
    stride = x.shape[d] * x._strides[d] if d < x.ndim else 1
    return Reshape.apply(x, (*x.shape[:d], 1, *x.shape[d:]),
                         (*x._strides[:d], stride, *x._strides[d:]))


@op(example=lambda r: (r.standard_normal((3, 1)), 2, 3, 4))
def expand(x, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    lead = len(shape) - x.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(shape)}) must be greater "
                           f"or equal to the number of dimensions in the tensor ({x.ndim})")
    shape = tuple(x.shape[i - lead] if s == -1 else int(s) for i, s in enumerate(shape))
    return x if shape == tuple(x.shape) else Expand.apply(x, shape)


@op(example=lambda r: (r.standard_normal((3, 1)), r.standard_normal((3, 4))))
def expand_as(x, other):
    return expand(x, *other.shape)


@op(example=lambda r: (r.standard_normal((2, 3)), 2, 1, 2))
def repeat(x, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    lead = len(sizes) - x.ndim
    x = reshape(x, *([1] * lead), *x.shape)
    inter, final = [], []
    for r, s in zip(sizes, x.shape):
        inter += [1, s]
        final += [r, s]
    tiled = expand(reshape(x, *inter), *final)
    return reshape(tiled, *[r * s for r, s in zip(sizes, x.shape)])


@op(example=lambda r: (r.standard_normal((3, 4)),))
def contiguous(x, memory_format=None):
    """x itself when row-major, else a row-major copy (``memory_format``: PyTorch's argument,
    row-major formats only)."""
    check_memory_format("contiguous", memory_format)
    return x if x.is_contiguous() else Clone.apply(x)


@op(example=lambda r: (r.standard_normal((3, 4)),))
def clone(x, *, memory_format=None):
    """A copy with its own dense buffer (differentiable); always row-major."""
    check_memory_format("clone", memory_format)
    return Clone.apply(x)


@op(example=lambda r: (r.standard_normal((3, 5)), 1, 1, 3))
def narrow(x, dim, start, length):
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, start + length)
    return Slice.apply(x, tuple(index))


def _basic_index_layout(x, index):
    """(result ndim, shape, strides, offset) of ``x[index]`` for basic indexing."""
    if not isinstance(index, tuple):
        index = (index,)
    specified = sum(1 for i in index if i is not None and i is not Ellipsis)
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if specified > x.ndim:
        raise IndexError(f"too many indices for tensor of dimension {x.ndim}")
    expanded = []
    for i in index:
        if i is Ellipsis:
            expanded += [slice(None)] * (x.ndim - specified)
        else:
            expanded.append(i)
    if Ellipsis not in index:
        expanded += [slice(None)] * (x.ndim - specified)
    shape, strides, offset, d = [], [], x._offset, 0
    for i in expanded:
        if i is None:
            shape.append(1)
            strides.append(0)
            continue
        size, stride = x.shape[d], x._strides[d]
        if isinstance(i, (numbers.Integral, np.integer)) and not isinstance(i, bool):
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {size}")
            offset += (int(i) % size) * stride
        elif isinstance(i, slice):
            start, stop, step = i.indices(size)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            length = max(0, (stop - start + step - 1) // step)
            offset += start * stride if length else 0
            shape.append(length)
            strides.append(stride * step)
        else:
            raise IndexError(f"unsupported index of type {type(i).__name__}; use ints, slices, "
                             f"None, ... or a 1-D integer tensor")
        d += 1
    return len(shape), tuple(shape), tuple(strides), offset


@op(method=False, mg=True,
    example=lambda r: ([r.standard_normal((2, 3)), r.standard_normal((4, 3))], 0))
def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of Tensors")
    check_same_device(*tensors)
    first = tensors[0]
    d = normalize_dim(dim, first.ndim)
    for i, t in enumerate(tensors):
        if t.ndim != first.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape))
                                       if k != d):
            raise RuntimeError(f"Sizes of tensors must match except in dimension {d}. Expected "
                               f"size {list(first.shape)} but got size {list(t.shape)} for "
                               f"tensor number {i} in the list.")
    return Cat.apply(d, *_of_one_dtype(tensors))


@op(method=False, mg=True,
    example=lambda r: ([r.standard_normal((2, 3)), r.standard_normal((2, 3))], 1))
def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, t in enumerate(tensors):
        if t.shape != tensors[0].shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(tensors[0].shape)} at entry 0 and {list(t.shape)} at "
                               f"entry {i}")
    check_same_device(*tensors)
    return Stack.apply(normalize_dim(dim, tensors[0].ndim + 1), *_of_one_dtype(tensors))


@op(mg=True, out=False, example=lambda r: (r.standard_normal((5, 3)), 2))
def split(x, split_size, dim=0):
    d = normalize_dim(dim, x.ndim)
    size = x.shape[d]
    sizes = ([split_size] * (size // split_size) + ([size % split_size] if size % split_size
                                                     else [])
             if isinstance(split_size, numbers.Integral) else list(split_size))
    if sum(sizes) != size:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} "
                           f"(input tensor's size at dimension {d}), but got split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


@op(mg=True, out=False, example=lambda r: (r.standard_normal((5, 3)), 2, 0))
def chunk(x, chunks, dim=0):
    size = x.shape[normalize_dim(dim, x.ndim)]
    return split(x, max(1, -(-size // chunks)), dim)


@op(example=lambda r: (r.standard_normal((3, 4)), 1))
def unbind(x, dim=0):
    d = normalize_dim(dim, x.ndim)
    return tuple(Slice.apply(x, (slice(None),) * d + (i,)) for i in range(x.shape[d]))


@op(mg=True, out=False, example=lambda rng: (rng.standard_normal((3, 4)), (1, -2), (0, 1)))
def roll(x, shifts, dims=None):
    """``x`` with its elements shifted by ``shifts`` along ``dims`` (the flattened tensor
    when ``dims`` is None), wrapping around: per dim, the last ``shift`` elements (``narrow``)
    concatenated in front of the others."""
    shifts = (shifts,) if isinstance(shifts, numbers.Integral) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               f"dims:0")
        return reshape(roll(flatten(x), shifts, 0), *x.shape)
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    out = x
    for shift, dim in zip(shifts, dims):
        d = normalize_dim(dim, x.ndim)
        size = x.shape[d]
        shift = shift % size if size else 0
        if shift:
            out = cat([narrow(out, d, size - shift, shift), narrow(out, d, 0, size - shift)], d)
    return out if out is not x else clone(x)

