"""Hooks on gradients: ``Tensor.register_hook`` (a leaf's, run before accumulation; a
non-leaf's, run on its summed gradient) and the handle that removes one."""
from __future__ import annotations


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
