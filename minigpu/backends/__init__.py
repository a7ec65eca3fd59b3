"""Backends: one module per device type, each implementing every primitive of ``contract.py``."""
from __future__ import annotations

import importlib

_BACKENDS = {"cpu": "minigpu.backends.cpu", "cuda": "minigpu.backends.cuda"}


def get(device_type: str):
    """The backend module for ``"cpu"`` or ``"cuda"`` (cuda is imported on first use)."""
    try:
        return importlib.import_module(_BACKENDS[device_type])
    except KeyError:
        raise RuntimeError(f"unknown device type {device_type!r}; expected 'cpu' or 'cuda'") from None
