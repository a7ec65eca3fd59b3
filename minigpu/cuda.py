"""``minigpu.cuda``: device queries and synchronisation, shaped like ``torch.cuda``."""
from __future__ import annotations

from . import amp  # noqa: F401  (torch.cuda.amp.GradScaler, the older spelling)
from .simulator.errors import (LaunchConfigError, OutOfBoundsError, RaceError,  # noqa: F401
                               SimulatorError, SyncError, UninitializedReadError)

from . import backends, random as _random, simulator
from .graphs import (CaptureError, CUDAGraph, graph, graph_pool_handle,  # noqa: F401
                     make_graphed_callables)
from .graphs.capture import refuse as _refuse_in_capture
from .simulator import access_trace as _access_trace, counters as _counters


def _device():
    return backends.cuda_module("device")


def is_available() -> bool:
    """True when the cuda device can run kernels: a real GPU or Numba's CUDA simulator."""
    try:
        return _device().is_available()
    except Exception:  # numba-cuda missing or no driver: the cuda device is not usable
        return False


def device_count() -> int:
    """How many cuda devices minigpu can use: 1 when ``is_available()``, else 0 (minigpu uses
    one device; ``"cuda:0"`` is the only index)."""
    return 1 if is_available() else 0


def manual_seed(seed) -> None:
    """Seed the random numbers drawn on cuda. minigpu has one generator for every device (the
    same numbers on cpu and cuda, ``random.py``), so this seeds it, as ``minigpu.manual_seed``."""
    _random.manual_seed(seed)


def manual_seed_all(seed) -> None:
    """Seed the random numbers of every cuda device: minigpu's one generator."""
    _random.manual_seed(seed)


def is_simulator() -> bool:
    """True when ``NUMBA_ENABLE_CUDASIM=1``: kernels run on the CPU simulator (slowly)."""
    return bool(_device().SIMULATOR)


def has_gpu() -> bool:
    """True only for real hardware (what ``--device auto`` picks)."""
    return is_available() and not is_simulator()


def counters():
    """``with minigpu.cuda.counters() as launches:`` records every kernel launch inside the
    block as an entry with ``.name``, ``.grid``, ``.block`` and ``.metrics`` (global load/store
    requests and sectors, shared requests and wavefronts, barriers, atomics, warp efficiency,
    bytes moved, sector efficiency, an H200 time estimate); ``print(launches)`` is a table.
    Needs the simulator (``NUMBA_ENABLE_CUDASIM=1``): see ``minigpu/simulator/counters.py``."""
    if not simulator.is_installed():
        raise RuntimeError("minigpu.cuda.counters() counts on the CUDA simulator: set "
                           "NUMBA_ENABLE_CUDASIM=1 before importing minigpu (on a GPU, use "
                           "Nsight Compute)")
    return _counters.counters()


def trace(block=0, warp=None):
    """``with minigpu.cuda.trace(block=0) as tr:`` records which thread touched which element
    of which global or shared array, for block ``block`` (``None``: every block; ``warp``:
    one warp of it) of every launch inside the ``with``: ``tr.touches``, grouped into
    warp-level requests by ``tr.requests()`` (their sectors, banks and active-lane masks).
    ``minigpu.lessons.draw`` draws them. Needs the simulator: see
    ``minigpu/simulator/access_trace.py``."""
    if not simulator.is_installed():
        raise RuntimeError("minigpu.cuda.trace() records on the CUDA simulator: set "
                           "NUMBA_ENABLE_CUDASIM=1 before importing minigpu")
    return _access_trace.trace(block, warp)


def synchronize():
    """Wait until all queued kernels and copies on the current stream have finished."""
    _refuse_in_capture("minigpu.cuda.synchronize()", "it waits for the device (a host sync)")
    _device().synchronize()


def current_stream():
    return _device().current_stream()


def stream(s):
    """``with minigpu.cuda.stream(s):`` queues work inside the block on stream s."""
    return _device().use_stream(s)


# --- memory (the caching allocator, ``backends/cuda/allocator.py``) -----------------------

def _allocator():
    _device()  # importing device.py installs the allocator plugin
    return backends.cuda_module("allocator")


_EMPTY_STATS = dict.fromkeys((
    "allocated_bytes", "requested_bytes", "cached_bytes", "reserved_bytes",
    "peak_allocated_bytes", "peak_reserved_bytes", "active_blocks", "cached_blocks",
    "num_allocs", "num_frees", "num_cache_hits", "num_device_allocs", "num_device_frees",
    "num_oom_retries"), 0)


def memory_stats() -> dict:
    """Counters of the caching device allocator, like ``torch.cuda.memory_stats()``.

    Bytes: ``allocated_bytes`` (blocks in use, rounded to their size class),
    ``requested_bytes`` (what was asked for), ``cached_bytes`` (freed blocks kept for reuse),
    ``reserved_bytes`` (allocated + cached: what the device has given us) and their peaks
    (``peak_allocated_bytes``, ``peak_reserved_bytes``).
    Calls: ``num_allocs``/``num_frees`` (requests and returns), ``num_cache_hits`` (requests
    served from the cache), ``num_device_allocs``/``num_device_frees`` (real ``cuMemAlloc``/
    ``cuMemFree``). ``allocator`` says where the numbers come from: ``"caching"`` (GPU),
    ``"caching (simulator)"`` (the same pool logic over host memory) or ``"native"`` (cache
    off, or a CUDA context existed before minigpu; all counters 0) or ``"unavailable"`` (no
    cuda device). Pending frees are counted
    first, so a tensor dropped just before the call no longer counts as allocated.
    """
    if not is_available():
        return {**_EMPTY_STATS, "allocator": "unavailable"}
    allocator = _allocator()
    pool = allocator.device_pool()
    if pool is None:
        return {**_EMPTY_STATS, "allocator": "native"}
    return {**pool.stats(), "allocator": "caching (simulator)" if allocator.SIMULATOR
            else "caching"}


def pinned_memory_stats() -> dict:
    """The same counters for the cache of page-locked host buffers (``pin_memory=True``)."""
    if not is_available():
        return dict(_EMPTY_STATS)
    return _allocator().pinned_pool().stats()


def memory_allocated() -> int:
    """Bytes of device memory held by live tensors (rounded to allocator size classes)."""
    return memory_stats()["allocated_bytes"]


def memory_reserved() -> int:
    """Bytes of device memory taken from the driver: in use plus cached."""
    return memory_stats()["reserved_bytes"]


def max_memory_allocated() -> int:
    return memory_stats()["peak_allocated_bytes"]


def reset_peak_memory_stats():
    pool = _allocator().device_pool()
    if pool is not None:
        pool.reset_peak_stats()


def empty_cache():
    """Give every cached (unused) device and pinned-host block back to the driver. Memory
    held by live tensors stays; useful before handing the GPU to another process, never
    needed for correctness. Waits for queued work first (``cuMemFree`` would anyway)."""
    if not is_available():
        return
    allocator = _allocator()
    synchronize()
    pool = allocator.device_pool()
    if pool is not None:
        pool.empty_cache()
    allocator.pinned_pool().empty_cache()
