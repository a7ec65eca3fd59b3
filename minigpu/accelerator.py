"""``minigpu.accelerator``: the device-agnostic queries of ``torch.accelerator``.

minigpu has one accelerator type, ``cuda`` (a real GPU, or Numba's CUDA simulator when
``NUMBA_ENABLE_CUDASIM=1``), and one device of it: so ``current_accelerator()`` is
``device(type='cuda')`` exactly when ``minigpu.cuda.is_available()``, and ``None`` otherwise.
"""
from __future__ import annotations

from . import cuda
from .tensor import Device


def is_available() -> bool:
    """True when an accelerator can run kernels (``minigpu.cuda.is_available()``)."""
    return cuda.is_available()


def current_accelerator(check_available: bool = False):
    """``device(type='cuda')`` when the cuda device is usable, else ``None`` (torch returns the
    build's accelerator type even when no device is present unless ``check_available``; minigpu
    has no separate build, so both forms answer whether one can run)."""
    return Device("cuda") if cuda.is_available() else None


def device_count() -> int:
    """How many accelerator devices there are: 1 or 0 (minigpu is single-device)."""
    return cuda.device_count()


def current_device_index() -> int:
    """The index of the current accelerator device: 0 (minigpu's only one)."""
    if not cuda.is_available():
        raise RuntimeError("current_device_index: no accelerator is available")
    return 0


def synchronize(device=None):
    """Wait for the queued work of the accelerator (``minigpu.cuda.synchronize()``)."""
    cuda.synchronize()
