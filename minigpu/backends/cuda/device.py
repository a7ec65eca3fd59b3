"""Where kernels run: simulator detection, the current stream, allocation, launch shapes.

Every kernel in ``backends/cuda`` is launched as ``kernel[grid, block, current_stream()]``, so
queued work never blocks the host; only ``to_numpy`` and ``synchronize`` wait for the device.
Device memory comes from the caching allocator (``allocator.py``): after the first training
step, ``empty`` is a free-list pop, not a ``cuMemAlloc``.
"""
from __future__ import annotations

import contextlib
import functools

import numpy as np
from numba import cuda

from . import allocator

allocator.install()  # before the first CUDA context: Numba's EMM plugin must be set first

SIMULATOR = bool(cuda.config.ENABLE_CUDASIM)
WARP_SIZE = 32

_stream = None


def is_available() -> bool:
    """True when kernels can run: a real CUDA GPU, or the simulator."""
    return SIMULATOR or cuda.is_available()


def current_stream():
    """The stream every minigpu launch and copy goes on (created on first use)."""
    global _stream
    if _stream is None:
        _stream = cuda.stream()
    return _stream


@contextlib.contextmanager
def use_stream(stream):
    """Queue the work inside the ``with`` block on ``stream``."""
    global _stream
    previous, _stream = current_stream(), stream
    try:
        yield stream
    finally:
        _stream = previous


def synchronize():
    current_stream().synchronize()


def empty(n, dtype):
    """n uninitialised elements, served by the caching allocator (``allocator.py``)."""
    return allocator.device_array(int(n), np.dtype(dtype), stream=current_stream())


BLOCK = 256
"""Threads per block of 1-D grid-stride kernels on a GPU: 8 warps, enough to hide memory
latency, small enough that several blocks fit on one SM."""
MAX_BLOCKS = 65535
"""Grid cap: past it, each thread of a grid-stride loop handles several elements."""
SIM_BLOCK, SIM_MAX_BLOCKS = 32, 2
"""Under the simulator every CUDA thread is interpreted Python: one warp per block, two blocks, and
the grid-stride loop covers the rest (same results, far fewer threads to start)."""


def grid_1d(n: int, block: int, max_blocks: int = MAX_BLOCKS) -> int:
    """Blocks for a grid-stride loop over n items: enough to cover n, capped (each thread
    then handles several items, which amortises index math and keeps the grid resident)."""
    return max(1, min((int(n) + block - 1) // block, max_blocks))


@functools.lru_cache(maxsize=4096)
def launch_1d(n: int, block=None, max_blocks=None) -> tuple:
    """(grid, block) of a 1-D grid-stride loop over n items; small by default on the
    simulator. Tests pass explicit sizes to exercise several blocks. Cached: a training step
    launches over the same few sizes again and again."""
    if block is None:
        block = SIM_BLOCK if SIMULATOR else BLOCK
    if max_blocks is None:
        max_blocks = SIM_MAX_BLOCKS if SIMULATOR else MAX_BLOCKS
    return grid_1d(n, block, max_blocks), block


def scalar(value, dtype):
    """A Python number as the kernel's element type, so float32 kernels stay float32."""
    return np.dtype(dtype).type(value)
