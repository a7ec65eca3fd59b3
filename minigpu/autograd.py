"""Reverse-mode automatic differentiation.

Every differentiable operation is a :class:`Function`. Calling ``SomeOp.apply(*args)`` runs its
``forward`` and, when gradients are wanted, records the call as a node of the graph: the
function instance itself is the node (``ctx``), holding its inputs, the edges to the nodes
that produced them (``next_functions``, fixed at this moment) and whatever ``forward`` saved
(with the saved tensors' versions). ``Tensor.backward`` walks the nodes in reverse topological
order, runs the tensor hooks registered on each node's outputs, calls each ``backward`` once
with the summed gradients of its outputs, and finally accumulates into ``.grad`` of the leaf
tensors that require it (after their own hooks).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import sys as _sys
import threading
import types as _types
from typing import NamedTuple

import numpy as np

class _GradMode(threading.local):
    """Whether operations record the graph, per thread (on by default in every thread)."""

    enabled = True


_grad_mode = _GradMode()


class TensorBase:
    """The base of ``minigpu.Tensor`` (``tensor.py``, a floor above): what ``Function.apply``
    and the backward engine check their arguments against. The engine builds the tensors it
    needs (seed and zero gradients, dense copies) through the static constructors of a tensor
    it holds (``t._full``, ``t._dense``, ``t._from_array``), so it never imports the class."""

    __slots__ = ()


observers = []
"""Hooks for tools such as ``minigpu.profiler``. Each observer is called as
``observer(phase, node, args)`` — ``phase`` is ``"forward"`` or ``"backward"``, ``node`` the
Function instance, ``args`` the positional arguments (inputs, or output gradients) — just
before that method runs, and returns a callable that is called (with no arguments) when it
has returned. Empty by default, which costs one check per call."""


def _observed(phase, node, method, *args, **kwargs):
    """``method(node, *args, **kwargs)``, announced to every observer (the callers check that
    there is one first: without observers, the method is called directly)."""
    ends = [observe(phase, node, args) for observe in list(observers)]
    try:
        return method(node, *args, **kwargs)
    finally:
        for end in reversed(ends):
            end()


def is_grad_enabled() -> bool:
    return _grad_mode.enabled


class set_grad_enabled(contextlib.ContextDecorator):
    """Context manager / decorator that turns graph recording on or off."""

    def __init__(self, mode: bool):
        self.mode = bool(mode)

    def __enter__(self):
        self.previous = is_grad_enabled()
        _grad_mode.enabled = self.mode

    def __exit__(self, *exc):
        _grad_mode.enabled = self.previous
        return False


class no_grad(set_grad_enabled):
    """``with no_grad():`` runs operations without recording them for backward."""

    def __init__(self):
        super().__init__(False)


class enable_grad(set_grad_enabled):
    def __init__(self):
        super().__init__(True)


class inference_mode(set_grad_enabled):
    """``with inference_mode():`` is ``no_grad()`` in minigpu (PyTorch also skips version
    counting there; minigpu has no separate inference tensors); ``inference_mode(False)``
    leaves recording as it is."""

    def __init__(self, mode=True):
        super().__init__(False)
        self.inference = bool(mode)

    def __enter__(self):
        self.previous = is_grad_enabled()
        if self.inference:
            _grad_mode.enabled = False


class _InputShape(NamedTuple):
    """What the backward walk keeps of an input that is not a leaf: its shape."""
    shape: tuple


class Function:
    """Base class of differentiable operations, in PyTorch's form.

    A subclass defines ``forward(ctx, *args)`` returning a Tensor (or a tuple of Tensors) and
    ``backward(ctx, *grad_outputs)`` returning one gradient (or None) per positional
    ``forward`` argument; users call ``Fn.apply(*args)``. ``ctx`` is the graph node: an
    instance of the subclass, created per call, on which ``forward`` stores what ``backward``
    needs (``ctx.save_for_backward(*tensors)`` for tensors, so that their versions are checked;
    plain attributes for anything else). ``grad_outputs`` holds one entry per output; an output
    that received no gradient gets None. Keyword arguments of ``apply`` are settings, not
    inputs: they get no gradient.

    Both methods may be written as ``@staticmethod``s taking ``ctx`` (as in PyTorch) or as plain
    methods whose ``self`` is the ctx (as minigpu's own ops are): ``apply`` calls
    ``Fn.forward(ctx, *args)`` either way. ``forward`` runs with gradient recording off.

    ``differentiable_backward``: whether ``backward``, run with recording on, builds a graph
    of its own, so that ``create_graph=True`` can differentiate it again. True for Functions
    in PyTorch's form (unless ``@once_differentiable``) and for the engine's ops whose
    backward is made of differentiable Tensor ops; False for those that call fused backend
    primitives, through which ``create_graph=True`` raises an error naming the op.
    """

    _saved = ()
    _saved_meta = ()
    needs_input_grad = ()  # set by apply before forward runs
    _dirty = ()
    non_differentiable = ()
    _output_hooks = None  # {output index: {handle id: hook}}, from Tensor.register_hook
    _retained = None  # {output index: weakref to the tensor}, from Tensor.retain_grad
    materialize_grads = False  # True for Functions in PyTorch's form: see set_materialize_grads
    differentiable_backward = False
    composite = None  # the same map in differentiable Tensor ops (ops/composite.py), if any

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if isinstance(inspect.getattr_static(cls, "backward"), staticmethod):
            cls.materialize_grads = True
            cls.differentiable_backward = not getattr(cls.backward, "once_differentiable", False)

    def save_for_backward(self, *tensors):
        """Keep tensors for backward; each remembers its version, and ``saved_tensors`` raises
        PyTorch's error if an in-place operation has changed it since. (When no input needs a
        gradient, this call is not recorded and no backward will read them: no versions.)"""
        self._saved = tensors
        if True not in self.needs_input_grad:
            return
        self._saved_meta = [(t._version_counter, t._version_counter[0], t.grad_fn,
                             t._output_index) if hasattr(t, "_version_counter") else None
                            for t in tensors]

    @property
    def saved_tensors(self):
        saved = self._saved
        if saved is None:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Saved intermediate values of the "
                "graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or "
                "if you need to access saved tensors after calling backward.")
        for t, meta in zip(saved, self._saved_meta):
            if meta is not None and meta[0][0] != meta[1]:
                raise _modified_error(self, t, meta)
        if _grad_mode.enabled:  # create_graph: a saved output must lead back to this node
            saved = tuple([self._linked_output(t, meta[3]) if meta is not None
                           and meta[2] is OWN_OUTPUT else t
                           for t, meta in zip(saved, self._saved_meta)])
        return saved

    def _linked_output(self, t, index):
        """The saved (detached) output ``index`` as a tensor whose grad_fn is this node again:
        a backward that reads it (tanh's ``1 - y*y``) is then differentiated through it."""
        out = t._alias()
        out.requires_grad, out.grad_fn, out._output_index = True, self, index
        out._fn_version = out._version_counter[0]
        return out

    def mark_non_differentiable(self, *tensors):
        self.non_differentiable = {id(t) for t in tensors}

    def set_materialize_grads(self, value):
        """Whether outputs that received no gradient reach ``backward`` as zero tensors (the
        default for Functions whose backward is a staticmethod, as in PyTorch) or as None (the
        engine's own ops, and after ``ctx.set_materialize_grads(False)``)."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors):
        """Declare inputs that ``forward`` modified in place (and returns as outputs)."""
        self._dirty = {id(t) for t in tensors}

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = cls()
        recording = _grad_mode.enabled
        if recording:
            needs = tuple([isinstance(a, TensorBase) and a.requires_grad for a in args])
            _grad_mode.enabled = False  # forward runs with recording off
        else:  # as in PyTorch, nothing needs a gradient while recording is off
            needs = (False,) * len(args)
        ctx.needs_input_grad = needs
        try:
            if observers:
                outputs = _observed("forward", ctx, cls.forward, *args, **kwargs)
            else:
                outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            if recording:
                _grad_mode.enabled = True
        if ctx._dirty:
            _check_dirty(ctx, args)
        if True not in needs:  # no input needs a gradient: no node to record (the fast path)
            return outputs
        # The graph edges are fixed now: an input later modified in place (and given a new
        # grad_fn) does not change what this node feeds its gradients to.
        # The walk needs an input itself only where it is a leaf (its gradient accumulates
        # there), elsewhere its shape; holding every input would keep each intermediate
        # activation alive until backward. A node with a composite form keeps them all: under
        # create_graph its composite recomputes from them.
        keep_all = cls.composite is not None
        edges, kept = [], []
        for a, need in zip(args, needs):
            if not need:
                edges.append(None)
                kept.append(None)
                continue
            edge = ((a.grad_fn, a._output_index) if a._base is None
                    or a._fn_version == a._version_counter[0] else a._refresh_view())
            edges.append(edge)
            kept.append(a if edge[0] is None else _InputShape(a.shape))
        ctx.next_functions = tuple(edges)
        ctx.inputs = args if keep_all else tuple(kept)
        single = not isinstance(outputs, tuple)
        results = (outputs,) if single else outputs
        ctx.num_outputs = len(results)
        if ctx.materialize_grads:
            ctx.output_meta = [(o.shape, o.dtype, o.device) if isinstance(o, TensorBase) else None
                               for o in results]
        for index, out in enumerate(results):
            if not isinstance(out, TensorBase) or id(out) in ctx.non_differentiable:
                continue
            for a in args:
                if out is a and id(out) not in ctx._dirty:
                    out = out._alias()  # forward returned an input: the output is new
                    results = results[:index] + (out,) + results[index + 1:]
                    break
            out.requires_grad = True
            out.grad_fn = ctx
            out._output_index = index
            out._fn_version = out._version_counter[0]
        # A saved output is kept as a detached alias (same buffer, same version counter) and
        # its node as a marker: a node holding its own output (output -> node -> output) is a
        # reference cycle, which keeps the output's memory until the garbage collector runs
        # whenever backward never does (a forward outside no_grad that is only evaluated).
        for i, meta in enumerate(ctx._saved_meta):
            if meta is not None and meta[2] is None:
                for k, out in enumerate(results):
                    if out is ctx._saved[i]:
                        ctx._saved_meta[i] = (meta[0], meta[1], OWN_OUTPUT, k)
                        ctx._saved = ctx._saved[:i] + (out.detach(),) + ctx._saved[i + 1:]
        return results[0] if single else results

    def forward(ctx, *args, **kwargs):
        raise NotImplementedError(f"You must implement the forward function for custom "
                                  f"autograd.Function ({type(ctx).__name__}).")

    def backward(ctx, *grad_outputs):
        raise NotImplementedError(f"You must implement either the backward or vjp method for "
                                  f"your custom autograd.Function ({type(ctx).__name__}) to "
                                  f"use it with backward mode AD.")

    def name(self):
        return f"{type(self).__name__}Backward"

    def __repr__(self):
        return f"<{self.name()}>"


def _check_dirty(ctx, args):
    """Inputs that forward modified in place (their in-place op already bumped the version;
    they get this node as grad_fn): PyTorch refuses leaves that require grad."""
    for a in args:
        if id(a) in ctx._dirty and a.requires_grad and a.grad_fn is None and is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place "
                               "operation.")


SCALAR_TYPES = {"float32": "Float", "float64": "Double", "int64": "Long", "bool": "Bool"}
"""PyTorch's names of the dtypes, as its error messages spell them."""


def _tensor_type(t):
    prefix = "minigpu.cuda." if t.device.type == "cuda" else "minigpu."
    return f"{prefix}{SCALAR_TYPES[str(t.dtype)]}Tensor {list(t.shape)}"


OWN_OUTPUT = "own output"
"""The node recorded in the version metadata of a saved tensor that the node itself made."""


def _modified_error(node, t, meta):
    counter, version, fn, index = meta
    fn = node if fn is OWN_OUTPUT else fn
    where = f", which is output {index} of {fn.name()}," if fn is not None else ""
    return RuntimeError(
        f"one of the variables needed for gradient computation has been modified by an inplace "
        f"operation: [{_tensor_type(t)}]{where} is at version {counter[0]}; expected version "
        f"{version} instead. Hint: {node.name()} saved it in forward to compute its gradient; "
        f"modify a clone() instead, or call backward before the in-place operation.")


# --- hooks ----------------------------------------------------------------------------------------
class RemovableHandle:
    """What ``register_*hook`` returns: ``handle.remove()`` unregisters the hook."""

    _next_id = 0

    def __init__(self, hooks: dict):
        self._hooks = hooks
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def _add_hook(owner, attr, hook):
    """Register ``hook`` in the ordered dict ``owner.<attr>`` (created on first use)."""
    hooks = owner.__dict__.get(attr)
    if hooks is None:
        hooks = {}
        setattr(owner, attr, hooks)
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


def _run_grad_hooks(hooks, grad):
    """A gradient after ``register_hook`` hooks (each may return a replacement)."""
    for hook in list(hooks.values()):
        result = hook(grad)
        if result is not None:
            grad = result
    return grad


# --- the backward engine --------------------------------------------------------------------------
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
        if recomposed and getattr(node, "composite", None) is None:
            raise RuntimeError(
                f"minigpu: create_graph=True through {node.name()} is not supported: its "
                f"backward calls fused primitives that record no graph, so a gradient of its "
                f"gradient would be silently wrong. Higher-order gradients work through "
                f"elementwise ops, matmul/linear, sum/mean, norm, view ops and the ops with a "
                f"composite form (convolutions, pooling, normalisation, softmax).")
        if captured:
            for index, g in enumerate(grads_out):
                if (id(node), index) in captured and g is not None:
                    captured[id(node), index] = g
        if recomposed:
            grads_in = _composite_backward(node, grads_out)
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


# --- create_graph through fused ops: the composite form ---------------------------------------
# A node whose backward calls fused primitives records no graph. When it has a ``composite``
# (the same map written in differentiable Tensor ops: ``composite(*inputs)`` with the inputs
# ``apply`` got, returning its outputs), ``create_graph=True`` differentiates that instead:
# the fused path stays the fast one, and the composite is only run for higher-order gradients.


def _composite_backward(node, grads_out):
    """The node's input gradients as recorded functions of its inputs and ``grads_out``: the
    vector-Jacobian product of its composite, as one node of the graph being built."""
    args = node.inputs
    at = [i for i, (a, need) in enumerate(zip(args, node.needs_input_grad))
          if need and isinstance(a, TensorBase)]
    live = [k for k, g in enumerate(grads_out) if g is not None]

    def outputs_of(*tensors):
        full = list(args)
        for i, t in zip(at, tensors):
            full[i] = t
        outs = node.composite(*full)
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


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0):
    """Check ``fn``'s analytical gradients against central differences, in float64 on cpu.

    Projects the output on a random vector ``v`` (as PyTorch's fast mode does): the gradient
    of ``sum(fn(x) * v)`` from backward must equal its numerical derivative with respect to
    every element of every input that requires grad. Returns True or raises AssertionError
    naming the input and the element that disagree.
    """
    rng = np.random.default_rng(seed)
    hosts = [t.detach().cpu().numpy().astype(np.float64) if isinstance(t, TensorBase) else t
             for t in inputs]
    wants = [isinstance(t, TensorBase) and t.requires_grad for t in inputs]
    if True not in wants:
        raise AssertionError("gradcheck: no output requires grad")
    like = inputs[wants.index(True)]  # builds the float64 cpu inputs (Tensor._from_array)

    def build(values):
        return [like._from_array(v, "cpu", requires_grad=w) if w else
                (like._from_array(v, "cpu") if isinstance(v, np.ndarray) else v)
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
        term = (o * like._from_array(v, "cpu")).sum()
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



def once_differentiable(backward):
    """``torch.autograd.function.once_differentiable``: marks a ``backward`` that is not itself
    differentiable. It runs without recording, and ``create_graph=True`` through it raises."""
    @functools.wraps(backward)
    def run(*args):
        with no_grad():
            return backward(*args)
    run.once_differentiable = True
    return run


# ``from torch.autograd.function import Function, once_differentiable``: PyTorch's module path
function = _types.ModuleType(__name__ + ".function", "torch.autograd.function's names")
function.Function, function.once_differentiable = Function, once_differentiable
_sys.modules[function.__name__] = function


def Variable(data, requires_grad=False, volatile=False):
    """PyTorch's pre-0.4 wrapper (``torch.autograd.Variable``), kept for old programs: since
    Variables and Tensors merged it gives back the tensor itself, with ``requires_grad`` set
    when asked; ``volatile`` (long deprecated) has no effect."""
    return data.requires_grad_() if requires_grad else data
