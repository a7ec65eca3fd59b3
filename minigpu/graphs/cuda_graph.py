"""``CUDAGraph``, ``graph`` and ``make_graphed_callables``: PyTorch's capture-and-replay API.

A capture (``with graph(g): ...``) records the backend work of the Python code inside it
(``capture.py``); ``g.replay()`` runs that work again on the same buffers, with no op dispatch,
no autograd and no allocation. As in PyTorch, tensors used inside are *static*: copy new data
into the input tensors (``static_x.copy_(x)``) and read the outputs after ``replay()``. Unlike
PyTorch, the capture works on both devices: on cpu it records the NumPy backend's calls.
"""
from __future__ import annotations

import weakref

from ..autograd import Function, grad as autograd_grad
from ..backends.cpu.memory import quietly
from ..creation import ones_like
from ..random import default_generator
from . import fusion
from .capture import Capture


class CUDAGraph:
    """A captured step: ``capture_begin``/``capture_end`` (or ``with graph(g):``), then
    ``replay()`` as often as wanted; ``reset()`` drops it (and its memory). ``keep_graph`` is
    accepted for PyTorch's signature (there is no separate instantiation step here)."""

    def __init__(self, keep_graph=False):
        self._capture = None   # open while capturing
        self._steps = None     # the recorded steps, once captured
        self._recorded = None  # the closed Capture (its pool and counts)
        self.fused = None      # fusion.fuse's kernels, once it ran on this graph

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if self._steps is not None or self._capture is not None:
            raise RuntimeError("CUDAGraph: this graph is already captured; call reset() "
                               "before capturing into it again")
        capture = Capture()
        capture.open()
        self._capture = capture

    def capture_end(self):
        capture, self._capture = self._capture, None
        if capture is None:
            raise RuntimeError("CUDAGraph.capture_end: no capture is open")
        capture.close()
        self._recorded, self._steps = capture, tuple(capture.steps)

    def _abort(self):
        capture, self._capture = self._capture, None
        if capture is not None:
            capture.close(keep=False)

    def replay(self):
        """Run the captured work again. Random ops draw at the generator's current offset,
        which then advances by what the captured step drew (as an eager step would)."""
        steps = self._steps
        if steps is None:
            raise RuntimeError("CUDAGraph.replay: nothing has been captured into this graph")
        recorded = self._recorded
        if recorded.draws:
            generator = default_generator
            recorded.rng[0], recorded.rng[1] = generator.initial_seed(), generator.offset
            generator.offset += recorded.draws
        quietly(_run, steps)  # NumPy's warnings off: inf and nan are results, as in the maps

    def reset(self):
        """Forget the captured work; its buffers are freed when no tensor holds them."""
        self._abort()
        self._steps = self._recorded = self.fused = None

    def pool(self):
        """A handle to this graph's memory, accepted (and ignored) by ``graph(pool=...)``:
        minigpu's graphs do not share pools; each keeps the buffers its capture made."""
        return id(self)

    def num_steps(self) -> int:
        """How many recorded steps a replay runs (backend calls on cpu; launches and copies
        on cuda)."""
        return len(self._steps or ())

    def num_launches(self) -> int:
        """How many kernel launches a replay makes on the cuda device."""
        return self._recorded.launches if self._recorded is not None else 0

    def fuse(self) -> list:
        """Fuse this graph's chains of elementwise maps into generated kernels
        (``fusion.py``; not in PyTorch's API): the list of them, each printable. A fused
        replay gives eager's values within the bound of ``docs/graphs.md``."""
        return fusion.fuse(self)

    def pool_buffers(self) -> list:
        """The buffers the capture made (the graph's private pool)."""
        return list(self._recorded.pool) if self._recorded is not None else []


def _run(steps):
    for step in steps:
        step()


class graph:
    """``with minigpu.cuda.graph(g):`` captures the work inside into ``g`` (PyTorch's
    ``torch.cuda.graph``; ``pool``, ``stream`` and ``capture_error_mode`` are accepted for
    compatibility: every graph keeps its own buffers and minigpu has one stream of work)."""

    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.cuda_graph = cuda_graph

    def __enter__(self):
        self.cuda_graph.capture_begin()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.cuda_graph._abort()
            return False
        self.cuda_graph.capture_end()
        return False


def graph_pool_handle():
    """PyTorch's shared-pool handle: accepted by ``graph(pool=...)`` and ignored."""
    return object()


def _static_copy(t):
    out = t.detach().clone()
    return out.requires_grad_(t.requires_grad)


def _leaves(outputs):
    """The leaf tensors the outputs' autograd graph accumulates gradients into."""
    found, seen = {}, set()
    nodes = [o.grad_fn for o in outputs if o.grad_fn is not None]
    while nodes:
        node = nodes.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for edge, kept in zip(node.next_functions, node.inputs):
            if edge is not None and edge[0] is None:
                found[id(kept)] = kept
            elif edge is not None:
                nodes.append(edge[0])
    return list(found.values())


def _signature(t):
    return tuple(t.shape), str(t.dtype), str(t.device), t.requires_grad


def parameters_of(fn):
    """A module's parameters; none for a plain function."""
    return tuple(fn.parameters()) if hasattr(fn, "parameters") else ()


def make_graphed_callables(callables, sample_args, num_warmup_iters=3,
                           allow_unused_input=False, pool=None):
    """PyTorch's ``make_graphed_callables``: ``callables`` (a module or function, or a tuple
    of them with a tuple of sample-argument tuples) becomes a callable that replays a captured
    forward and, when the output is differentiated, a captured backward. The arguments must
    have the shapes, dtypes and ``requires_grad`` of the samples; the parameters' gradients
    accumulate into ``.grad`` as in eager mode."""
    if isinstance(callables, tuple):
        return tuple(make_graphed_callables(c, a, num_warmup_iters) for c, a in
                     zip(callables, sample_args))
    return _Graphed(callables, tuple(sample_args), num_warmup_iters).callable


class _Graphed:
    """One graphed callable: a forward graph and a backward graph over static buffers."""

    def __init__(self, fn, sample_args, warmup, params=None, fuse=False):
        self.params = parameters_of(fn) if params is None else params
        self.inputs = tuple(_static_copy(a) for a in sample_args)
        differentiable = [t for t in self.inputs + self.params if t.requires_grad]
        for _ in range(warmup):  # as PyTorch: lazy state (caches, buffers) made before capture
            outs = self._outputs(fn(*self.inputs))
            if differentiable:
                live = [o for o in outs if o.requires_grad]
                autograd_grad(live, differentiable, [ones_like(o) for o in live],
                              allow_unused=True)
        self.forward_graph = CUDAGraph()
        with graph(self.forward_graph):
            outputs = fn(*self.inputs)
        self.single = not isinstance(outputs, tuple)
        self.outputs = self._outputs(outputs)
        if fuse:  # now, while the autograd graph holds what the backward will read
            fusion.fuse(self.forward_graph)
        known = {id(t) for t in differentiable}
        others = tuple(t for t in _leaves(self.outputs) if id(t) not in known)
        self.params += others  # tensors the function reaches by itself (a closure's weight)
        differentiable += others
        self.differentiable = differentiable
        self.backward_graph = None
        live = [o for o in self.outputs if o.requires_grad]
        if differentiable and live:
            self.grad_outputs = tuple(o.detach().clone() for o in live)
            self.backward_graph = CUDAGraph()
            with graph(self.backward_graph):
                grads = autograd_grad(live, differentiable, self.grad_outputs,
                                      allow_unused=True)
            self.grads = tuple(grads)
            if fuse:
                fusion.fuse(self.backward_graph)
        self.pending = None  # the node of the last call whose backward has not run yet
        self.callable = self.call

    def backward_pending(self) -> bool:
        """True while the node of an earlier call is alive and its backward has not run:
        its backward reads the static buffers a new forward replay would overwrite."""
        return self.pending is not None and self.pending() is not None

    @staticmethod
    def _outputs(out):
        return out if isinstance(out, tuple) else (out,)

    def call(self, *args):
        """The graphed callable: the arguments must be like the samples it was captured
        with (their data is copied into the static inputs)."""
        if len(args) != len(self.inputs):
            raise TypeError(f"graphed callable takes {len(self.inputs)} arguments "
                            f"({len(args)} given)")
        for static, a in zip(self.inputs, args):
            if _signature(a) != _signature(static):
                raise RuntimeError(f"graphed callable: an argument of shape, dtype, device "
                                   f"and requires_grad {_signature(a)} does not match the "
                                   f"sample it was captured with, {_signature(static)}")
        if self.backward_pending():
            raise RuntimeError("graphed callable called again before the backward of its "
                               "previous call ran: that backward reads the static buffers "
                               "this call would overwrite (as in PyTorch, run backward "
                               "first, or drop the previous outputs)")
        outs = _Replay.apply(self, *args, *self.params)
        return outs[0] if self.single else outs


class _Replay(Function):
    """The autograd node of a graphed callable: forward copies the arguments into the static
    inputs and replays the forward graph; backward copies the upstream gradients into the
    static ones and replays the backward graph."""

    @staticmethod
    def forward(ctx, graphed, *args):
        ctx.graphed = graphed
        n = len(graphed.inputs)
        for static, a in zip(graphed.inputs, args[:n]):
            static.detach().copy_(a)
        graphed.forward_graph.replay()
        if graphed.backward_graph is not None:
            graphed.pending = weakref.ref(ctx)
        return tuple(o.detach() for o in graphed.outputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        graphed = ctx.graphed
        if graphed.backward_graph is None:
            return (None,) * (1 + len(graphed.inputs) + len(graphed.params))
        graphed.pending = None
        live = [g for g, o in zip(grad_outputs, graphed.outputs) if o.requires_grad]
        for static, g in zip(graphed.grad_outputs, live):
            if g is None:
                static.zero_()
            else:
                static.copy_(g)
        graphed.backward_graph.replay()
        by_tensor = {id(t): g for t, g in zip(graphed.differentiable, graphed.grads)}
        grads = [by_tensor.get(id(t)) if t.requires_grad else None
                 for t in graphed.inputs + graphed.params]
        return (None, *(g.detach().clone() if g is not None else None for g in grads))
