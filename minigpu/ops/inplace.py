"""In-place operations: ``add_`` ... ``copy_``, ``+=`` and ``t[idx] = v``, with PyTorch's rules.

Every in-place op is one recipe: compute the new values out of place with the ordinary
(differentiable) op, then write them through the tensor's view with the backend's strided
``assign_`` (so a write through a transposed or sliced view lands in the right elements on
every device) and bump the tensor's version counter, which its views share.

Autograd follows PyTorch:

* a leaf that requires grad (or a view of one) may only be modified under ``no_grad`` —
  that is how optimizers and ``with no_grad(): w -= lr * w.grad`` update weights;
* any other tensor may be modified while recording; it then gets a new ``grad_fn``. When the
  op needs the old values for its gradient (``mul_``), it reads them from a snapshot taken
  before the write. A write through a view re-bases the view's base on a ``CopySlices`` node
  (the base with the window replaced), and the view becomes a window of the new base.
* tensors saved for backward remember their version; ``backward`` raises PyTorch's error if an
  in-place op changed one of them since (see ``Function.saved_tensors``).

A view whose buffer was written since its ``grad_fn`` was set is re-derived from its base's
current node when an op next uses it (PyTorch does the same), so a view taken before a write
through another view sees the written values in its gradient too.
"""
from __future__ import annotations

import numpy as np

from ..autograd import SCALAR_TYPES, Function, is_grad_enabled, no_grad
from ..backends.contract import View, contiguous_strides
from ..tensor import Tensor, owns_dense_buffer
from . import elementwise as ew
from .common import filled
from .elementwise import where
from .registry import divisors, method, op
from .shape import broadcast_shapes, expand_view, sum_to, zeros_with_window


# --- autograd nodes of in-place writes --------------------------------------------------------
def _window_of(view: Tensor, base: Tensor):
    """(shape, strides, offset) of ``view`` inside a dense row-major copy of ``base``."""
    if tuple(base._strides) != contiguous_strides(base.shape):
        raise RuntimeError("minigpu: autograd through an in-place write to a view of a "
                           "non-contiguous tensor is not supported; clone() the base first")
    return tuple(view.shape), tuple(view._strides), view._offset - base._offset


def _dense_copy(t: Tensor) -> Tensor:
    return Tensor._dense(t.backend.contiguous(t._view()), t.shape, t.device)


def _window_positions(base, window):
    """The flat positions in dense ``base`` of a window (shape, strides, offset): an int64
    tensor of the window's shape."""
    shape, strides, offset = window
    pos = np.full(shape, offset, np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        ramp = [1] * len(shape)
        ramp[d] = n
        pos = pos + np.arange(n, dtype=np.int64).reshape(ramp) * s
    return Tensor._from_array(pos, base.device)


class CopySlices(Function):
    """The base of a view after a write through it: ``base`` with ``window`` holding ``values``.
    The values are already in the buffer; this node only routes gradients: the window's part
    of the gradient goes to ``values``, the rest to the old base."""

    def forward(self, base, values, window):
        self.window, self.values_shape = window, values.shape
        return base._alias()

    def name(self):
        return "CopySlices"  # PyTorch's name for this node

    def backward(self, g):
        shape, strides, offset = self.window
        g_base = _dense_copy(g)
        region = View(g_base._buf, shape, strides, offset)
        g_values = None
        if self.needs_input_grad[1]:
            g_values = sum_to(Tensor._dense(g.backend.contiguous(region), shape, g.device),
                              self.values_shape)
        g.backend.assign_(region, expand_view(Tensor._full((), 0, g.dtype, g.device), shape))
        return g_base, g_values, None

    def unfused(self, base, values, window):
        """The unfused form: ``base`` with its window holding ``values`` (a write
        through a view): the values scattered to the window's flat positions, chosen there by a
        mask (``where``, so an inf outside the window stays inf)."""
        pos = _window_positions(base, window).reshape(-1)
        flat = base.reshape(-1)
        placed = filled(flat, flat.shape, 0.0).scatter_add(
            0, pos, values.expand(*window[0]).reshape(-1))
        inside = filled(pos, flat.shape, 0).scatter_add(0, pos, filled(pos, pos.shape, 1)) > 0
        return where(inside, placed, flat).reshape(base.shape)


class ViewOf(Function):
    """A window (shape, strides, offset) of a dense base, as a view: the grad_fn a view gets
    after a write through it re-based its base."""

    def forward(self, base, window):
        self.window, self.base_shape = window, base.shape
        shape, strides, offset = window
        return base._make_view(shape, strides, base._offset + offset)

    def backward(self, g):
        return zeros_with_window(g, self.base_shape, self.window), None

    def name(self):
        return "AsStridedBackward"

    def unfused(self, base, window):
        """The unfused form: the window of ``base`` (its elements picked by flat
        position)."""
        pos = _window_positions(base, window)
        return base.reshape(-1).index_select(0, pos.reshape(-1)).reshape(pos.shape)


# --- the recipe ---------------------------------------------------------------------------------
def check_inplace(t: Tensor):
    """PyTorch's refusals: leaves that require grad (and their views) while recording, and
    tensors whose elements overlap (an expanded view)."""
    if is_grad_enabled():
        if t.requires_grad and t.grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        base = t._base
        if base is not None and base.requires_grad and base.grad_fn is None:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in "
                               "an in-place operation.")
    for size, stride in zip(t.shape, t._strides):
        if stride == 0 and size > 1:
            raise RuntimeError("unsupported operation: more than one element of the written-to "
                               "tensor refers to a single memory location. Please clone() the "
                               "tensor before performing the operation.")


def write_(t: Tensor, values: Tensor):
    """values (same dtype and device, broadcastable to t) into t's elements; bumps the version."""
    if broadcast_shapes(values.shape, t.shape) != tuple(t.shape):
        raise RuntimeError(f"output with shape {list(t.shape)} doesn't match the broadcast "
                           f"shape {list(broadcast_shapes(values.shape, t.shape))}")
    if values._buf is t._buf:  # t[1:] = t[:-1]: read everything before writing
        values = _dense_copy(values)
    t.backend.assign_(t._view(), expand_view(values, t.shape))
    t._version_counter[0] += 1


def _result_dtype(out: Tensor, t: Tensor) -> Tensor:
    if out.dtype != t.dtype:
        if not np.can_cast(out.dtype, t.dtype, "same_kind"):
            raise RuntimeError(f"result type {SCALAR_TYPES[str(out.dtype)]} can't be cast to "
                               f"the desired output type {SCALAR_TYPES[str(t.dtype)]}")
        out = out.to(t.dtype)
    return out


def _set_node(t: Tensor, fn, index):
    t.grad_fn, t._output_index, t.requires_grad = fn, index, True
    t._fn_version = t._version_counter[0]
    if t._retains_grad:
        t.retain_grad()  # PyTorch moves retain_grad to the new grad_fn


def refresh_view(view: Tensor):
    """Re-derive a view's grad_fn from its base after in-place writes to the buffer (as
    PyTorch does when a view's version no longer matches): a window of the base's current node.
    Returns the view's (grad_fn, output index)."""
    base = view._base
    if base.requires_grad and tuple(base._strides) == contiguous_strides(base.shape):
        _set_node(view, ViewOf.apply(base, _window_of(view, base)).grad_fn, 0)
    view._fn_version = view._version_counter[0]
    return view.grad_fn, view._output_index


method(refresh_view, "_refresh_view")


def apply_(t: Tensor, compute, *operands, cast=_result_dtype):
    """``t <- compute(t)`` in place, returning t. ``compute`` builds the new values with
    ordinary ops from the tensor it is given; ``operands`` are the other values it reads
    (tensors among them may require grad)."""
    check_inplace(t)
    recording = is_grad_enabled() and (t.requires_grad or any(
        isinstance(o, Tensor) and o.requires_grad for o in operands))
    if recording and t._base is not None and t._fn_version != t._version_counter[0]:
        refresh_view(t)
    if not recording:
        with no_grad():
            write_(t, cast(compute(t), t))
        return t
    old = _dense_copy(t)  # the values before the write, at t's place in the graph
    old.requires_grad, old.grad_fn, old._output_index = t.requires_grad, t.grad_fn, \
        t._output_index
    out = cast(compute(old), t)
    with no_grad():
        write_(t, out)
    base = t._base
    if base is None and out.grad_fn is not None and out.shape == t.shape:
        _set_node(t, out.grad_fn, out._output_index)
        return t
    target = t if base is None else base
    window = _window_of(t, target)
    _set_node(target, CopySlices.apply(target, out, window).grad_fn, 0)
    if base is not None:
        _set_node(t, ViewOf.apply(base, window).grad_fn, 0)
    return t


def _scaled_add_(x: Tensor, other, alpha) -> bool:
    """``x += alpha * other`` in one pass over x, when nothing records it and both are dense
    float tensors of one shape, dtype and device, each its own buffer: the update of a
    hand-written SGD loop, ``p.data.add_(p.grad, alpha=-lr)``. It is the backends' fused SGD
    step without momentum (``p -= lr * d``, lr = -alpha: the same rounding as the composed
    ``x + other * alpha``), where the recipe would make ``other * alpha`` and the sum, then
    copy the sum into x. False (nothing done) where it does not apply."""
    if not (isinstance(other, Tensor) and isinstance(alpha, (int, float))
            and not isinstance(alpha, bool) and x.dtype.kind == "f" and x.dtype.itemsize >= 4
            and other.dtype == x.dtype and other.shape == x.shape and other.device == x.device
            and other._buf is not x._buf and owns_dense_buffer(x) and owns_dense_buffer(other)
            and not (is_grad_enabled() and (x.requires_grad or other.requires_grad))):
        return False
    check_inplace(x)
    x.backend.sgd_step_(x._buf, other._buf, None, -alpha, 0, 0, 0, False, False)
    x._version_counter[0] += 1
    return True


# --- the ops --------------------------------------------------------------------------------------
@op(method=("add_", "__iadd__"),
    example=lambda r: (r.standard_normal((3, 4)), r.standard_normal(4), {'alpha': 2}))
def add_(x, other, alpha=1):
    if _scaled_add_(x, other, alpha):
        return x
    return apply_(x, lambda v: ew.add(v, other, alpha=alpha), other)


@op(method=("sub_", "__isub__"),
    example=lambda r: (r.standard_normal((3, 4)), r.standard_normal(4), {'alpha': 2}))
def sub_(x, other, alpha=1):
    if isinstance(alpha, (int, float)) and _scaled_add_(x, other, -alpha):
        return x
    return apply_(x, lambda v: ew.sub(v, other, alpha=alpha), other)


@op(method=("mul_", "__imul__"),
    example=lambda r: (r.standard_normal((3, 4)), r.standard_normal(4)))
def mul_(x, other):
    return apply_(x, lambda v: ew.mul(v, other), other)


@op(method=("div_", "__itruediv__"),
    example=lambda r: (r.standard_normal((3, 4)), divisors(r, (4,))))
def div_(x, other):
    return apply_(x, lambda v: ew.div(v, other), other)


@op(method=("pow_", "__ipow__"), domain="positive",
    example=lambda r: (r.uniform(0.5, 2, (3, 4)), 2.5))
def pow_(x, exponent):
    return apply_(x, lambda v: ew.pow(v, exponent), exponent)


@op(method=("clamp_", "clip_"), example=lambda r: (r.standard_normal((3, 4)), -0.5, 0.5))
def clamp_(x, min=None, max=None):
    return apply_(x, lambda v: ew.clamp(v, min, max), min, max)


@op(example=lambda r: (r.standard_normal((3, 4)),))
def nan_to_num_(x, nan=0.0, posinf=None, neginf=None):
    return apply_(x, lambda v: ew.nan_to_num(v, nan, posinf, neginf))


@op(example=lambda r: (r.standard_normal((3, 4)), r.random(4) < 0.5, 2.5))
def masked_fill_(x, mask, value):
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
        return apply_(x, lambda v: ew.where(mask, value.to(v.dtype), v), value)
    return apply_(x, lambda v: ew.masked_fill(v, mask, value), value)


def _copy_cast(out, t):
    return out.to(t.device).to(t.dtype)  # copy_ converts any dtype, across devices


@op(example=lambda r: (r.standard_normal((3, 4)), r.standard_normal(4)))
def copy_(x, src, non_blocking=False):
    """Copy src's values (broadcast, cast, from any device) into x (``non_blocking`` is
    accepted: device work is queued on the current stream anyway)."""
    if not isinstance(src, Tensor):
        src = Tensor._full((), src, x.dtype, x.device)
    return apply_(x, lambda v: src, src, cast=_copy_cast)


@op(example=lambda r: (r.standard_normal((3, 4)), 1.5))
def fill_(x, value):
    return copy_(x, value)


@op(example=lambda r: (r.standard_normal((3, 4)),))
def zero_(x):
    return fill_(x, 0)


@op(example=lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4)), r.standard_normal(4),
                       {'value': 0.5}))
def addcmul_(x, tensor1, tensor2, value=1):
    """``x += value * tensor1 * tensor2`` in place."""
    return apply_(x, lambda v: ew.add(v, ew.mul(tensor1, tensor2), alpha=value), tensor1,
                  tensor2)


@op(signed_zeros=False,
    example=lambda r: (r.standard_normal((3, 4)), r.standard_normal((3, 4)), divisors(r, (4,)),
                       {'value': 0.5}))
def addcdiv_(x, tensor1, tensor2, value=1):
    """``x += value * tensor1 / tensor2`` in place."""
    return apply_(x, lambda v: ew.add(v, ew.div(tensor1, tensor2), alpha=value), tensor1,
                  tensor2)


@op(domain="positive", example=lambda r: (r.uniform(0.5, 2, (3, 4)),))
def sqrt_(x):
    """``x = sqrt(x)`` in place."""
    return apply_(x, ew.sqrt)


# --- in-place activations: the result saved in the input's place -------------------------------
class ActivationInPlace(Function):
    """``relu_`` / ``leaky_relu_`` (``F.relu(x, inplace=True)``, ``nn.ReLU(True)``) on a
    tensor that is not a view: the result is written over the input's buffer, which the node
    then saves as its output. Their gradient needs only where the result is positive (the
    input's sign, for a slope >= 0), so a Conv -> BatchNorm -> ReLU(inplace) keeps one
    activation where the out-of-place form keeps two (PyTorch's memory saving, and its rule)."""
    differentiable_backward = True  # Tensor ops: create_graph differentiates them again

    def forward(self, x, name, slope):
        self.function, self.slope = ew.UNARY_FUNCTIONS[name], slope
        _map_in_blocks_(x, name, slope)
        self.mark_dirty(x)
        self.save_for_backward(x.detach())  # a detached alias: no output -> node -> output cycle
        return x

    def backward(self, g):
        y, = self.saved_tensors
        return self.function.gradient(g, y, y, self.slope, 0.0), None, None

    def name(self):
        return f"{self.function.__name__}Backward"  # ReluBackward


ACTIVATION_BLOCK = 1 << 20
"""Elements an in-place activation maps at a time (see :func:`_map_in_blocks_`)."""


def _map_in_blocks_(x, name, slope):
    """x = name(x) in place, a block of a dense x at a time: the map's result (and the
    temporaries NumPy makes inside it: leaky_relu's mask and product) is one block, not a
    second activation. Any other layout in one piece. Bumps the version."""
    be = x.backend
    if not owns_dense_buffer(x):
        write_(x, Tensor._result(be.unary(name, x._view(), slope, 0.0), x.shape, x.device))
        return
    n = x.numel()
    for start in range(0, n, ACTIVATION_BLOCK):
        count = min(ACTIVATION_BLOCK, n - start)
        block = View(x._buf, (count,), (1,), start)
        be.assign_(block, View(be.unary(name, block, slope, 0.0), (count,), (1,), 0))
    x._version_counter[0] += 1


def _activation_(x, name, slope=0.0):
    check_inplace(x)
    if not (is_grad_enabled() and x.requires_grad):
        _map_in_blocks_(x, name, slope)
        return x
    if x._base is None and slope >= 0 and x.dtype.kind == "f":
        return ActivationInPlace.apply(x, name, slope)
    # a view (its base is re-based by the recipe) or a negative slope (the sign of the result
    # no longer tells where the input was positive): the general recipe, out of place first
    return apply_(x, lambda v: ew.UNARY_FUNCTIONS[name].apply(v, alpha=slope))


@op(mg=True, out=False, F=True, example=lambda r: (r.standard_normal((3, 4)),))
def relu_(x):
    """``x = max(x, 0)`` in place."""
    return _activation_(x, "relu")


@op(F=True, torch="F.leaky_relu_", example=lambda r: (r.standard_normal((3, 4)), 0.1))
def leaky_relu_(x, negative_slope=0.01):
    """``x = x if x > 0 else negative_slope * x`` in place."""
    return _activation_(x, "leaky_relu", float(negative_slope))
