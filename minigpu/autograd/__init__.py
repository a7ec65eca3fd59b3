"""Reverse-mode automatic differentiation.

Every differentiable operation is a :class:`Function`. Calling ``SomeOp.apply(*args)`` runs its
``forward`` and, when gradients are wanted, records the call as a node of the graph: the
function instance itself is the node (``ctx``), holding its inputs, the edges to the nodes
that produced them (``next_functions``, fixed at this moment) and whatever ``forward`` saved
(with the saved tensors' versions). ``Tensor.backward`` walks the nodes in reverse topological
order, runs the tensor hooks registered on each node's outputs, calls each ``backward`` once
with the summed gradients of its outputs, and finally accumulates into ``.grad`` of the leaf
tensors that require it (after their own hooks).

The package, one module a concern: ``grad_mode`` (recording on or off), ``function`` (the node
and what it saves), ``hooks``, ``engine`` (backward, grad, and create_graph through fused ops),
``accumulate`` (a leaf's ``.grad``), ``gradcheck``.
"""
from __future__ import annotations

from .engine import backward, grad, vjp
from .function import (SCALAR_TYPES, Function, TensorBase, observers,
                       once_differentiable)
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .gradcheck import gradcheck
from .hooks import RemovableHandle, _add_hook

__all__ = ["Function", "TensorBase", "RemovableHandle", "SCALAR_TYPES", "Variable", "backward",
           "enable_grad", "grad", "gradcheck", "inference_mode", "is_grad_enabled", "no_grad",
           "observers", "once_differentiable", "set_grad_enabled", "vjp", "_add_hook"]


def Variable(data, requires_grad=False, volatile=False):
    """PyTorch's pre-0.4 wrapper (``torch.autograd.Variable``), kept for old programs: since
    Variables and Tensors merged it gives back the tensor itself, with ``requires_grad`` set
    when asked; ``volatile`` (long deprecated) has no effect."""
    return data.requires_grad_() if requires_grad else data
