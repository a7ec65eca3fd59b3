"""``minigpu.compile``: ``torch.compile``'s shape over capture and replay.

The compiled callable captures its function (forward, and the backward when an argument or a
parameter needs a gradient: ``make_graphed_callables``) on the first call for each *guard key*
and replays it on the later calls with that key. The key holds what a captured graph depends
on: every tensor argument's shape, dtype, device and ``requires_grad``, every other argument's
value, ``module.training``, whether grad mode is on, and the parameters' ``requires_grad``. A
new key recaptures (up to ``cache_size_limit`` keys; after that, eager). Work that cannot be
captured is a *graph break*: with ``fullgraph=False`` that key runs eagerly from then on (the
whole call: minigpu does not split a graph in two as torch does); with ``fullgraph=True`` the
:class:`CaptureError` naming the op is raised.
"""
from __future__ import annotations

import functools

from ..autograd import TensorBase, is_grad_enabled
from .capture import CaptureError
from .cuda_graph import _Graphed, parameters_of

CACHE_SIZE_LIMIT = 8
"""Guard keys one compiled callable captures before it runs new ones eagerly (torch's
``torch._dynamo.config.cache_size_limit``)."""

MODES = {None: False, "default": False, "reduce-overhead": False, "max-autotune": True,
         "max-autotune-no-cudagraphs": True}
"""``mode`` -> whether the captured graphs are fused."""

_OVER_LIMIT = CaptureError(f"more than {CACHE_SIZE_LIMIT} guard keys: run eagerly")


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None,
            options=None, disable=False):
    """``torch.compile``: a callable (for a module, a wrapper module) that captures ``model``
    on the first call per guard key and replays it afterwards. ``mode`` and ``backend`` choose
    nothing in minigpu (every mode captures and replays, without fusion) except
    ``backend="eager"``, and ``disable=True``, which return ``model`` to run eagerly;
    ``dynamic`` is accepted: every new shape recaptures. Used bare or as
    ``@minigpu.compile(fullgraph=True)``."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic,
                                 backend=backend, mode=mode, options=options, disable=disable)
    if mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode!r}, should be one of: "
                           f"{', '.join(m for m in MODES if m)}")
    if disable or backend == "eager":
        return model
    return Compiled(model, fullgraph, MODES[mode])


class Compiled:
    """What ``compile`` returns: call it like the model; other attributes are the model's
    (``parameters()``, ``train()``, ``state_dict()``; the model itself is ``_orig_mod``).
    ``graphs`` maps each guard key seen to its graphed callable, or to the
    :class:`CaptureError` that made it run eagerly (``graph_breaks()``)."""

    def __init__(self, model, fullgraph, fuse=False):
        self.__dict__.update(_orig_mod=model, fullgraph=fullgraph, fuse=fuse, graphs={})

    def __getattr__(self, name):
        return getattr(self._orig_mod, name)

    def __call__(self, *args, **kwargs):
        if kwargs:
            args = args + tuple(kwargs.values())
            call = functools.partial(_with_keywords, self._orig_mod, tuple(kwargs))
        else:
            call = self._orig_mod
        key = self.guard_key(args)
        found = self.graphs.get(key)
        if found is None:
            found = self.capture(call, args, key)
        if isinstance(found, CaptureError) or found.backward_pending():
            # a graph break: this key runs eagerly; or an earlier call's backward still
            # needs the graph's buffers: this call runs eagerly and leaves them alone
            return call(*args)
        outs = found.call(*(a for a in args if isinstance(a, TensorBase)))
        # fresh outputs, as torch.compile's: the next replay rewrites the static ones
        return outs.clone() if found.single else tuple(o.clone() for o in outs)

    def guard_key(self, args) -> tuple:
        """What the captured graph for these arguments depends on (see the module's doc)."""
        model = self._orig_mod
        return (tuple((tuple(a.shape), a.dtype, a.device.type, a.requires_grad)
                      if isinstance(a, TensorBase) else ("value", a) for a in args),
                getattr(model, "training", None), is_grad_enabled(),
                tuple(p.requires_grad for p in parameters_of(model)))

    def capture(self, call, args, key):
        if len(self.graphs) >= CACHE_SIZE_LIMIT:
            self.graphs[key] = _OVER_LIMIT
            return _OVER_LIMIT
        tensors = [a for a in args if isinstance(a, TensorBase)]
        if len(tensors) != len(args):  # other arguments are constants of this key
            call = functools.partial(_with_constants, call, args)
        try:
            found = _Graphed(call, tuple(tensors), 0, parameters_of(self._orig_mod),
                             self.fuse)
        except CaptureError as error:
            if self.fullgraph:
                raise
            found = error
        self.graphs[key] = found
        return found

    def graph_breaks(self) -> list:
        """The :class:`CaptureError` of each guard key that runs eagerly (why it broke)."""
        return [v for v in self.graphs.values() if isinstance(v, CaptureError)]

    def kernels(self) -> list:
        """The fused kernels of the captured graphs (``mode="max-autotune"``), each a
        ``fused_kernels.Fused`` whose ``str`` is its generated source; ``[]`` unfused."""
        return [k for found in self.graphs.values() if not isinstance(found, CaptureError)
                for g in (found.forward_graph, found.backward_graph)
                if g is not None for k in g.fused or ()]


def _with_keywords(fn, names, *args):
    n = len(args) - len(names)
    return fn(*args[:n], **dict(zip(names, args[n:])))


def _with_constants(fn, template, *tensors):
    """``fn`` on ``template``'s arguments with its tensors replaced by ``tensors``, in order."""
    given = iter(tensors)
    return fn(*(next(given) if isinstance(a, TensorBase) else a for a in template))
