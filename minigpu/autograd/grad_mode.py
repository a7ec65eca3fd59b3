"""Grad mode: whether operations record the graph (``no_grad``, ``enable_grad``,
``set_grad_enabled``, ``inference_mode``), per thread."""
from __future__ import annotations

import contextlib
import threading


class _GradMode(threading.local):
    """Whether operations record the graph, per thread (on by default in every thread)."""

    enabled = True


_grad_mode = _GradMode()


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
