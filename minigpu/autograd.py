"""Reverse-mode automatic differentiation.

Every differentiable operation is a :class:`Function`. Calling ``SomeOp.apply(*args)`` runs its
``forward`` and, when gradients are wanted, records the call as a node of the graph: the
function instance itself is the node (``ctx``), holding its inputs and whatever ``forward``
saved. ``Tensor.backward`` walks the nodes in reverse topological order, calls each
``backward`` once with the summed gradients of its outputs, and accumulates into ``.grad`` of
leaf tensors that require it.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

_state = threading.local()

observers = []
"""Hooks for tools such as ``minigpu.profiler``. Each observer is called as
``observer(phase, node, args)`` — ``phase`` is ``"forward"`` or ``"backward"``, ``node`` the
Function instance, ``args`` the positional arguments (inputs, or output gradients) — just
before that method runs, and returns a callable that is called (with no arguments) when it
has returned. Empty by default, which costs one check per call."""


def _observed(phase, node, method, *args, **kwargs):
    """``method(*args, **kwargs)``, announced to every observer."""
    if not observers:
        return method(*args, **kwargs)
    ends = [observe(phase, node, args) for observe in list(observers)]
    try:
        return method(*args, **kwargs)
    finally:
        for end in reversed(ends):
            end()


def is_grad_enabled() -> bool:
    return getattr(_state, "enabled", True)


class set_grad_enabled(contextlib.ContextDecorator):
    """Context manager / decorator that turns graph recording on or off."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        self.previous = is_grad_enabled()
        _state.enabled = self.mode

    def __exit__(self, *exc):
        _state.enabled = self.previous
        return False


class no_grad(set_grad_enabled):
    """``with no_grad():`` runs operations without recording them for backward."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    def __init__(self):
        super().__init__(True)


class Function:
    """Base class of differentiable operations.

    Subclasses implement ``forward(ctx, *args)`` returning a Tensor (or a tuple of Tensors) and
    ``backward(ctx, *grad_outputs)`` returning one gradient (or None) per ``forward`` argument.
    ``grad_outputs`` holds one entry per output; an output that received no gradient gets None.
    """

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = {id(t) for t in tensors}

    @classmethod
    def apply(cls, *args, **kwargs):
        from .tensor import Tensor

        ctx = cls()
        ctx.non_differentiable = set()
        outputs = _observed("forward", ctx, ctx.forward, *args, **kwargs)
        tracked = is_grad_enabled() and any(
            isinstance(a, Tensor) and a.requires_grad for a in args)
        if not tracked:
            return outputs
        ctx.inputs = args
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        results = outputs if isinstance(outputs, tuple) else (outputs,)
        ctx.num_outputs = len(results)
        for index, out in enumerate(results):
            if id(out) not in ctx.non_differentiable:
                out.requires_grad = True
                out.grad_fn = ctx
                out._output_index = index
        return outputs

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def backward(self, *grad_outputs):
        raise NotImplementedError(f"{type(self).__name__} has no backward")

    def __repr__(self):
        return f"<{type(self).__name__}Backward>"


def _topological_order(root_fn):
    """Nodes reachable from root_fn, each before every node it feeds from (iterative DFS)."""
    order, visited, stack = [], set(), [(root_fn, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        for inp in getattr(node, "inputs", None) or ():
            fn = getattr(inp, "grad_fn", None)
            if fn is not None and id(fn) not in visited:
                stack.append((fn, False))
    return list(reversed(order))


def backward(tensor, gradient=None, retain_graph=False):
    """Backpropagate from ``tensor``; see :meth:`Tensor.backward`."""
    from .tensor import Tensor

    if not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        gradient = Tensor._full(tensor.shape, 1.0, tensor.dtype, tensor.device)
    elif not isinstance(gradient, Tensor):
        gradient = Tensor._from_array(np.asarray(gradient, dtype=tensor.dtype), tensor.device)
    if tuple(gradient.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of "
                           f"{tuple(gradient.shape)} and output[0] has a shape of "
                           f"{tuple(tensor.shape)}.")
    if tensor.grad_fn is None:
        _accumulate_leaf(tensor, gradient)
        return

    with no_grad():
        pending = {id(tensor.grad_fn): [None] * tensor.grad_fn.num_outputs}
        pending[id(tensor.grad_fn)][tensor._output_index] = gradient
        for node in _topological_order(tensor.grad_fn):
            grads_out = pending.pop(id(node), None)
            if grads_out is None or all(g is None for g in grads_out):
                continue
            if getattr(node, "inputs", None) is None:
                raise RuntimeError("Trying to backward through the graph a second time; "
                                   "pass retain_graph=True to the first backward call.")
            grads_in = _observed("backward", node, node.backward, *grads_out)
            if not isinstance(grads_in, tuple):
                grads_in = (grads_in,)
            for inp, needs, g in zip(node.inputs, node.needs_input_grad, grads_in):
                if not needs or g is None:
                    continue
                if tuple(g.shape) != tuple(inp.shape):
                    raise RuntimeError(f"{node!r} returned a gradient of shape {tuple(g.shape)} "
                                       f"for an input of shape {tuple(inp.shape)}")
                if inp.grad_fn is None or inp._retains_grad:
                    _accumulate_leaf(inp, g)
                if inp.grad_fn is not None:
                    slots = pending.setdefault(id(inp.grad_fn), [None] * inp.grad_fn.num_outputs)
                    k = inp._output_index
                    slots[k] = g if slots[k] is None else slots[k] + g
            if not retain_graph:
                node.inputs = None
                node.saved_tensors = ()


def _accumulate_leaf(tensor, grad):
    grad = grad.detach()
    if grad.dtype != tensor.dtype:
        grad = grad.to(tensor.dtype)
    tensor.grad = grad.contiguous() if tensor.grad is None else tensor.grad + grad


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0):
    """Check ``fn``'s analytical gradients against central differences, in float64 on cpu.

    Projects the output on a random vector ``v`` (as PyTorch's fast mode does): the gradient
    of ``sum(fn(x) * v)`` from backward must equal its numerical derivative with respect to
    every element of every input that requires grad. Returns True or raises AssertionError
    naming the input and the element that disagree.
    """
    from .tensor import Tensor

    rng = np.random.default_rng(seed)
    hosts = [t.detach().cpu().numpy().astype(np.float64) if isinstance(t, Tensor) else t
             for t in inputs]
    wants = [isinstance(t, Tensor) and t.requires_grad for t in inputs]

    def build(values):
        return [Tensor._from_array(v, "cpu", requires_grad=w) if w else
                (Tensor._from_array(v, "cpu") if isinstance(v, np.ndarray) else v)
                for v, w in zip(values, wants)]

    def outputs(values):
        out = fn(*build(values))
        return out if isinstance(out, (tuple, list)) else (out,)

    outs = outputs(hosts)
    projections = [rng.standard_normal(tuple(o.shape)) for o in outs]

    def projected(values):
        with no_grad():
            return sum(float((o.detach().numpy().astype(np.float64) * v).sum())
                       for o, v in zip(outputs(values), projections))

    args = build(hosts)
    out = fn(*args)
    out = out if isinstance(out, (tuple, list)) else (out,)
    total = None
    for o, v in zip(out, projections):
        if not o.requires_grad:
            continue
        term = (o * Tensor._from_array(v, "cpu")).sum()
        total = term if total is None else total + term
    if total is None:
        raise AssertionError("gradcheck: no output requires grad")
    total.backward()

    for k, (arg, want) in enumerate(zip(args, wants)):
        if not want:
            continue
        analytical = (np.zeros(hosts[k].shape) if arg.grad is None
                      else arg.grad.numpy().astype(np.float64))
        numerical = np.zeros(hosts[k].shape)
        flat = numerical.reshape(-1)
        for i in range(flat.size):
            shifted = [h.copy() if isinstance(h, np.ndarray) else h for h in hosts]
            shifted[k].reshape(-1)[i] += eps
            plus = projected(shifted)
            shifted[k].reshape(-1)[i] -= 2 * eps
            minus = projected(shifted)
            flat[i] = (plus - minus) / (2 * eps)
        if not np.allclose(analytical, numerical, atol=atol, rtol=rtol):
            worst = np.unravel_index(np.argmax(np.abs(analytical - numerical)), numerical.shape)
            raise AssertionError(
                f"gradcheck: input {k} gradient mismatch at {tuple(int(i) for i in worst)}: "
                f"analytical {analytical[worst]:.6g} vs numerical {numerical[worst]:.6g}\n"
                f"analytical=\n{analytical}\nnumerical=\n{numerical}")
    return True

