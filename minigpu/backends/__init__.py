"""Backends: one module per device type, each implementing every primitive of ``contract.py``.

``cudnn`` and ``mps`` are not backends of minigpu: they hold what ``torch.backends.cudnn`` and
``torch.backends.mps`` answer (flags, ``is_available()``), so that programs which ask run.
"""
from __future__ import annotations

import importlib

from . import cudnn, mps  # noqa: F401  (torch.backends.cudnn.benchmark = True, ...)

_BACKENDS = {"cpu": "minigpu.backends.cpu", "cuda": "minigpu.backends.cuda"}


NO_CUDA = ("device='cuda' needs an NVIDIA GPU and its driver, and found none on this machine "
           "(Numba: CUDA driver library cannot be found, or no device). To run the cuda "
           "device's kernels on the CPU instead, enable Numba's CUDA simulator: set "
           "NUMBA_ENABLE_CUDASIM=1 in the environment before starting Python (e.g. "
           "`NUMBA_ENABLE_CUDASIM=1 python train.py`; slow, but every kernel really runs). "
           "device='cpu' runs everywhere.")


_LOADED = {}
"""Backend modules already imported and checked: ``get`` is one dict read after the first call
(every op asks for its tensors' backend)."""


def cuda_module(name: str):
    """``minigpu.backends.cuda.<name>`` (``"device"``, ``"allocator"``, ...), imported on first
    use: the one way the modules above the backends reach the cuda backend's parts, so that
    ``import minigpu`` never imports Numba's CUDA support for a cpu-only user."""
    return importlib.import_module(f"{__name__}.cuda.{name}")


def loaded() -> tuple:
    """The device types whose backend ``get`` has loaded (``("cpu",)``, ``("cpu", "cuda")``)."""
    return tuple(_LOADED)


def replace(device_type: str, module):
    """Make ``get(device_type)`` answer ``module`` and return what it answered: the one seam
    of the graph layer (``minigpu/graphs``), which, while it captures, puts a recording proxy
    of the backend here so that every op's ``x.backend.<primitive>(...)`` is recorded. Nothing
    in the eager layers calls it."""
    previous = get(device_type)
    _LOADED[device_type] = module
    return previous


def get(device_type: str):
    """The backend module for ``"cpu"`` or ``"cuda"`` (cuda is imported on first use; without
    a GPU or the simulator, a clear error instead of Numba's driver message)."""
    module = _LOADED.get(device_type)
    if module is not None:
        return module
    try:
        module = importlib.import_module(_BACKENDS[device_type])
    except KeyError:
        raise RuntimeError(f"unknown device type {device_type!r}; expected 'cpu' or 'cuda'") from None
    if device_type == "cuda" and not module.is_available():
        raise RuntimeError(NO_CUDA)
    _LOADED[device_type] = module
    return module
