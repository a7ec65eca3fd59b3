"""save/load of state dicts as ``.npz``: plain arrays, never pickle.

A file is written to a temporary name in the same folder and renamed into place, so an
interrupted save never leaves a truncated checkpoint.
"""
from __future__ import annotations

import os
import tempfile
from collections import OrderedDict

import numpy as np

from .tensor import Tensor


def save(state, path):
    """Save a dict of tensors / arrays / numbers (e.g. ``model.state_dict()``) to ``path``."""
    if not isinstance(state, dict):
        raise TypeError(f"minigpu.save expects a dict of tensors (a state_dict), got "
                        f"{type(state).__name__}")
    arrays = {}
    for key, value in state.items():
        if not isinstance(key, str):
            raise TypeError(f"state_dict keys must be strings, got {key!r}")
        array = value.detach().numpy() if isinstance(value, Tensor) else np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"cannot save {key!r}: {type(value).__name__} is not a tensor, array "
                            f"or number (checkpoints never use pickle)")
        arrays[key] = array
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(path, map_location=None):
    """Load a state dict saved by :func:`save`; tensors go to ``map_location`` (default cpu)."""
    with np.load(os.fspath(path), allow_pickle=False) as data:
        return OrderedDict((k, Tensor._from_array(data[k], map_location or "cpu"))
                           for k in data.files)
