"""The graph's node: :class:`Function` (PyTorch's form, ``ctx.save_for_backward``) and what
``apply`` records: the inputs, the edges to the nodes that made them, the saved tensors and
their versions (an in-place change to one makes backward refuse, naming it). Also
``torch.autograd.function``'s path: ``from minigpu.autograd.function import Function,
once_differentiable``."""
from __future__ import annotations

import functools
import inspect
from typing import NamedTuple

from .grad_mode import _grad_mode, is_grad_enabled, no_grad


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
    unfused = None  # a fused op's map again in differentiable Tensor ops, beside its forward

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
        # activation alive until backward. A node with an unfused form keeps them all: under
        # create_graph its unfused form recomputes from them.
        keep_all = cls.unfused is not None
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


def once_differentiable(backward):
    """``torch.autograd.function.once_differentiable``: marks a ``backward`` that is not itself
    differentiable. It runs without recording, and ``create_graph=True`` through it raises."""
    @functools.wraps(backward)
    def run(*args):
        with no_grad():
            return backward(*args)
    run.once_differentiable = True
    return run
