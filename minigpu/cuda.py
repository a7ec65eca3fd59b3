"""``minigpu.cuda``: device queries and synchronisation, shaped like ``torch.cuda``."""
from __future__ import annotations


def _device():
    from .backends.cuda import device
    return device


def is_available() -> bool:
    """True when the cuda device can run kernels: a real GPU or Numba's CUDA simulator."""
    try:
        return _device().is_available()
    except Exception:  # numba-cuda missing or no driver: the cuda device is not usable
        return False


def is_simulator() -> bool:
    """True when ``NUMBA_ENABLE_CUDASIM=1``: kernels run on the CPU simulator (slowly)."""
    return bool(_device().SIMULATOR)


def has_gpu() -> bool:
    """True only for real hardware (what ``--device auto`` picks)."""
    return is_available() and not is_simulator()


def synchronize():
    """Wait until all queued kernels and copies on the current stream have finished."""
    _device().synchronize()


def current_stream():
    return _device().current_stream()


def stream(s):
    """``with minigpu.cuda.stream(s):`` queues work inside the block on stream s."""
    return _device().use_stream(s)
