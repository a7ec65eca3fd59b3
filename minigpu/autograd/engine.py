"""The backward engine: ``backward`` and ``grad`` walk the graph from an output in reverse
topological order, run the hooks on each node's outputs, call each node's ``backward`` once
with its summed output gradients, and hand the leaves their gradients. Under
``create_graph=True`` the walk itself is recorded; a node whose backward calls fused
primitives is differentiated through its Function's ``unfused`` form instead (the second
section: ``vjp`` and ``grad`` call each other, so both live here)."""
from __future__ import annotations

import numpy as np

from .accumulate import _accumulate_leaf, _owned, _stealable
from .function import Function, TensorBase, _observed, observers
from .grad_mode import enable_grad, set_grad_enabled
from .hooks import _run_grad_hooks


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
        for edge in getattr(node, "next_functions", None) or ():
            if edge is not None and edge[0] is not None and id(edge[0]) not in visited:
                stack.append((edge[0], False))
    return list(reversed(order))


def backward(tensor, gradient=None, retain_graph=None, create_graph=False):
    """Backpropagate from ``tensor``; see :meth:`Tensor.backward`. ``create_graph=True``
    records the backward itself, so the accumulated ``.grad`` can be differentiated again."""
    gradient = _initial_gradient(tensor, gradient)
    retain_graph = create_graph if retain_graph is None else retain_graph
    with set_grad_enabled(create_graph):
        if tensor.grad_fn is None:
            _accumulate_leaf(tensor, gradient, create_graph)
            return
        for entry in _walk(tensor, gradient, retain_graph, None, create_graph).values():
            leaf, box = entry[0], [entry.pop()]  # the gradient held by the box alone
            if not create_graph and leaf.grad is None and _stealable(box, leaf):
                leaf.grad = box.pop()
            else:
                _accumulate_leaf(leaf, box.pop(), create_graph)


def _initial_gradient(tensor, gradient):
    if not tensor.requires_grad:
        raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        gradient = tensor._full(tensor.shape, 1.0, tensor.dtype, tensor.device)
    elif not isinstance(gradient, TensorBase):
        gradient = tensor._from_array(np.asarray(gradient, dtype=tensor.dtype), tensor.device)
    if tuple(gradient.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of "
                           f"{tuple(gradient.shape)} and output[0] has a shape of "
                           f"{tuple(tensor.shape)}.")
    return gradient


def _walk(tensor, gradient, retain_graph, captured=None, create_graph=False):
    """Run the graph of ``tensor`` (a non-leaf) backward from ``gradient``; returns
    ``{id: [leaf, summed gradient]}`` for the leaves reached. ``captured`` maps
    ``(id(node), output index)`` of non-leaf tensors to the gradient arriving there (filled
    in; :func:`grad` asks for them). ``create_graph``: the caller has turned recording on, so
    every backward and every sum of gradients is recorded; a node whose backward records no
    graph is refused."""
    root = tensor.grad_fn
    pending = {id(root): [None] * root.num_outputs}
    pending[id(root)][tensor._output_index] = gradient
    leaves = {}  # id -> [leaf, summed gradient]: accumulated once, after the walk
    for node in _topological_order(root):
        grads_out = pending.pop(id(node), None)
        if grads_out is None:  # no gradient reached this node (a node in pending has one)
            continue
        if getattr(node, "inputs", None) is None:
            raise RuntimeError("Trying to backward through the graph a second time; "
                               "pass retain_graph=True to the first backward call.")
        if node.materialize_grads and any(g is None for g in grads_out):
            grads_out = [gradient._full(meta[0], 0, meta[1], meta[2]) if g is None and meta
                         else g for g, meta in zip(grads_out, node.output_meta)]
        if node._output_hooks or node._retained:
            _output_hooks(node, grads_out)
        recomposed = create_graph and not node.differentiable_backward
        if recomposed and getattr(node, "unfused", None) is None:
            raise RuntimeError(
                f"minigpu: create_graph=True through {node.name()} is not supported: its "
                f"backward calls fused primitives that record no graph, so a gradient of its "
                f"gradient would be silently wrong. Higher-order gradients work through "
                f"elementwise ops, matmul/linear, sum/mean, norm, view ops and the ops with a "
                f"unfused form (convolutions, pooling, normalisation, softmax).")
        if captured:
            for index, g in enumerate(grads_out):
                if (id(node), index) in captured and g is not None:
                    captured[id(node), index] = g
        if recomposed:
            grads_in = _unfused_backward(node, grads_out)
        elif observers:
            grads_in = _observed("backward", node, type(node).backward, *grads_out)
        else:
            grads_in = type(node).backward(node, *grads_out)
        if not isinstance(grads_in, tuple):
            grads_in = (grads_in,)
        if len(grads_in) != len(node.inputs):
            grads_in = _check_arity(node, grads_in)
        for i, (inp, edge, g) in enumerate(zip(node.inputs, node.next_functions, grads_in)):
            if edge is None or g is None:
                continue
            if g.shape != inp.shape:
                raise RuntimeError(f"Function {node.name()} returned an invalid gradient at "
                                   f"index {i} - got {list(g.shape)} but expected shape "
                                   f"compatible with {list(inp.shape)}")
            fn, k = edge
            if fn is None:
                entry = leaves.get(id(inp))
                if entry is None:
                    leaves[id(inp)] = [inp, g]
                else:
                    entry[1] = entry[1] + g
                continue
            slots = pending.get(id(fn))
            if slots is None:
                slots = pending[id(fn)] = [None] * fn.num_outputs
            slots[k] = g if slots[k] is None else slots[k] + g
        if not retain_graph:
            node.inputs = None
            node._saved = None
    return leaves


# --- create_graph through fused ops: the unfused form -----------------------------------------
# A node whose backward calls fused primitives records no graph. When its Function has an
# ``unfused`` method (the same map written in differentiable Tensor ops, beside ``forward``:
# ``unfused(*inputs)`` with the inputs ``apply`` got, returning its outputs),
# ``create_graph=True`` differentiates that instead: the fused path stays the fast one, and
# the unfused form is only run for higher-order gradients.


def _unfused_backward(node, grads_out):
    """The node's input gradients as recorded functions of its inputs and ``grads_out``: the
    vector-Jacobian product of its unfused form, as one node of the graph being built."""
    args = node.inputs
    at = [i for i, (a, need) in enumerate(zip(args, node.needs_input_grad))
          if need and isinstance(a, TensorBase)]
    live = [k for k, g in enumerate(grads_out) if g is not None]

    def outputs_of(*tensors):
        full = list(args)
        for i, t in zip(at, tensors):
            full[i] = t
        outs = node.unfused(*full)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return tuple(outs[k] for k in live)

    grads = vjp(outputs_of, [args[i] for i in at], [grads_out[k] for k in live])
    result = [None] * len(args)
    for i, g in zip(at, grads):
        result[i] = g
    return tuple(result)


def vjp(fn, inputs, cotangents):
    """``grad(fn(*inputs), inputs, cotangents)`` as recorded functions of ``inputs`` and
    ``cotangents``, differentiable again to any order (each order recomputes ``fn``)."""
    def product(*tensors):
        xs, cs = tensors[:len(inputs)], tensors[len(inputs):]
        pairs = [(o, c) for o, c in zip(fn(*xs), cs) if o.requires_grad]  # not constants
        return grad([o for o, _ in pairs], xs, [c for _, c in pairs], create_graph=True,
                    materialize_grads=True)
    return _Recomputed.apply(*inputs, *cotangents, fn=product)


class _Recomputed(Function):
    """``fn(*inputs)`` evaluated on detached copies of the inputs, whose backward is the
    vector-Jacobian product of ``fn`` (:func:`vjp`), so every order of derivative is a node
    of the graph that asks for it."""

    differentiable_backward = True

    def forward(self, *inputs, fn):
        self.fn = fn
        self.save_for_backward(*inputs)
        leaves = [x.detach().requires_grad_() if x.is_floating_point() else x for x in inputs]
        with enable_grad():
            outs = fn(*leaves)
        return tuple(o.detach() for o in outs)

    def backward(self, *grads):
        inputs = self.saved_tensors
        live = [k for k, g in enumerate(grads) if g is not None]
        fn = self.fn

        def outputs_of(*xs):
            outs = fn(*xs)
            return tuple(outs[k] for k in live)
        return vjp(outputs_of, list(inputs), [grads[k] for k in live])


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """``torch.autograd.grad``: the gradients of ``outputs`` with respect to ``inputs``, returned
    (a tuple) rather than accumulated into ``.grad`` (no tensor's ``.grad`` changes).
    ``create_graph=True`` records the backward, so the gradients can be differentiated again
    (gradient penalties, Hessian-vector products)."""
    if is_grads_batched:
        raise NotImplementedError("autograd.grad(is_grads_batched=True) is not supported by "
                                  "minigpu")
    outputs = [outputs] if isinstance(outputs, TensorBase) else list(outputs)
    single = isinstance(inputs, TensorBase)
    inputs = [inputs] if single else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, TensorBase):
        grad_outputs = [grad_outputs] * len(outputs)
    retain_graph = create_graph if retain_graph is None else retain_graph
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    captured = {(id(t.grad_fn), t._output_index): None for t in inputs if t.grad_fn is not None}
    found = {}
    with set_grad_enabled(create_graph):
        for k, (out, g) in enumerate(zip(outputs, grad_outputs)):
            g = _initial_gradient(out, g)
            if out.grad_fn is None:
                reached = {id(out): [out, g]}
            else:
                reached = _walk(out, g, retain_graph or k < len(outputs) - 1, captured,
                                create_graph)
            for key, (leaf, lg) in reached.items():
                found[key] = [leaf, lg if key not in found else found[key][1] + lg]
    results = []
    for t in inputs:
        if t.grad_fn is None:
            g = found.get(id(t), [None, None])[1]
        else:
            g = captured[id(t.grad_fn), t._output_index]
        if g is None:
            if not (allow_unused or materialize_grads):
                raise RuntimeError("One of the differentiated Tensors appears to not have been "
                                   "used in the graph. Set allow_unused=True if this is the "
                                   "desired behavior.")
            g = t._full(t.shape, 0, t.dtype, t.device) if materialize_grads else None
        elif g.dtype != t.dtype:
            with set_grad_enabled(create_graph):
                g = g.to(t.dtype)
        results.append(g if g is None or create_graph else _owned(g))
    return tuple(results)


def _check_arity(node, grads_in):
    """PyTorch's rule: one gradient per forward argument; extra trailing Nones are dropped."""
    expected = len(node.inputs)
    if len(grads_in) > expected and all(g is None for g in grads_in[expected:]):
        grads_in = grads_in[:expected]
    if len(grads_in) != expected:
        raise RuntimeError(f"function {node.name()} returned an incorrect number of gradients "
                           f"(expected {expected}, got {len(grads_in)})")
    return grads_in


def _output_hooks(node, grads_out):
    """Run the hooks registered on this node's outputs on their summed gradients, then store
    the gradients of outputs that retain_grad (PyTorch runs retain_grad last)."""
    for index, hooks in (node._output_hooks or {}).items():
        if grads_out[index] is not None and hooks:
            grads_out[index] = _run_grad_hooks(hooks, grads_out[index])
    for index, ref in (node._retained or {}).items():
        t, g = ref(), grads_out[index]
        if t is not None and g is not None and t.grad_fn is node:
            t.grad = _owned(g) if t.grad is None else t.grad + g
