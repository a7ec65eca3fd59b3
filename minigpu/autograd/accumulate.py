"""Accumulating into a leaf's ``.grad``: a copy the first time, unless nothing else holds the
gradient backward made (then it becomes ``.grad`` as it is, counted by reference counts:
:func:`_stealable`)."""
from __future__ import annotations

import sys as _sys

import numpy as np

from .hooks import _run_grad_hooks


def _owned(grad):
    """A dense copy: a gradient handed to ``.grad`` must not share a buffer that another
    tensor's ``.grad`` (or the graph) also holds, since ``.grad`` may now be changed in place."""
    return grad._dense(grad.backend.contiguous(grad._view()), grad.shape, grad.device)


def _references(x):
    """How many references hold ``x``, as ``sys.getrefcount`` counts them from this call."""
    return _sys.getrefcount(x)


class _Holder:
    """Calibration of :func:`_stealable`'s counts on the running interpreter."""


def _alone_counts():
    """The counts of :func:`_references` for an object held by one list item, for an array
    held by one attribute, and for an array held as another array's base only."""
    box, holder = [object()], _Holder()
    holder.buf = np.empty(2)
    view = np.empty(2).reshape(1, 2)
    return _references(box[0]), _references(holder.buf), _references(view.base)


_ALONE_IN_BOX, _ALONE_IN_ATTRIBUTE, _ALONE_AS_BASE = _alone_counts()


def _stealable(box, leaf):
    """True when ``box[0]``, a gradient that backward made for ``leaf``, can become
    ``leaf.grad`` as it is, without :func:`_owned`'s copy. PyTorch does the same when nothing
    else uses the gradient: it saves a copy of every parameter's gradient at the step's peak.
    Here "nothing else" is counted: the tensor object held by the box alone (not returned to
    two leaves, kept by a hook, or the caller's ``gradient``), its NumPy buffer held by the
    tensor alone (and by its cached View), each array under it only as the base of the one
    above, and a dense tensor of the leaf's dtype and device, no view, no graph; a leaf with
    hooks runs them in :func:`_accumulate_leaf` instead. (The cuda
    device's buffers may share device memory without one Python object knowing the other:
    they are always copied.)"""
    if _references(box[0]) != _ALONE_IN_BOX:
        return False
    grad = box[0]
    if (grad._base is not None or grad.requires_grad or grad.grad_fn is not None
            or type(grad._buf) is not np.ndarray or grad.dtype != leaf.dtype
            or grad.device != leaf.device or grad._offset != 0 or not grad.is_contiguous()
            or grad._buf.size != grad.numel() or leaf._grad_hooks):
        return False
    layout = grad._layout
    expected = _ALONE_IN_ATTRIBUTE + (layout is not None and layout.buf is grad._buf)
    if _references(grad._buf) != expected:
        return False
    base = grad._buf.base
    while base is not None:
        if type(base) is not np.ndarray or _references(base) != _ALONE_AS_BASE + 1:
            return False  # + 1: the local name ``base``
        base = base.base
    return True


def _accumulate_leaf(tensor, grad, create_graph=False):
    """``tensor.grad += grad`` (a copy the first time; with create_graph the gradient itself,
    its graph kept, as PyTorch's)."""
    if tensor._grad_hooks:
        grad = _run_grad_hooks(tensor._grad_hooks, grad)
    if grad.dtype != tensor.dtype:
        grad = grad.to(tensor.dtype)
    if tensor.grad is None:
        tensor.grad = grad if create_graph else _owned(grad)
    else:
        tensor.grad = tensor.grad + grad
