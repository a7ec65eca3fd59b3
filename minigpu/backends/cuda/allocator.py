"""A caching device allocator: why a training step must not call ``cuMemAlloc`` per tensor.

The problem
-----------
Every primitive returns a new buffer, so one training step of even a small model allocates
hundreds of device arrays and frees them again a few microseconds later. ``cuMemAlloc`` and
``cuMemFree`` are slow driver calls (tens of microseconds up to milliseconds), and
``cuMemFree`` waits for the whole device to go idle: freeing per tensor would serialise the
host with the GPU and throw away the asynchrony that streams buy us.

The fix (what PyTorch's CUDACachingAllocator does, simplified)
--------------------------------------------------------------
Never give memory back. A freed block goes onto a *free list* keyed by its size class; the
next request of that class pops it (a *cache hit*: no driver call at all). A training step
allocates the same sizes in the same order every iteration, so after the first step or two
every request is a hit and the device memory in use stays flat.

- **Size classes.** Requests are rounded up so that nearby sizes share a list: to a multiple
  of 512 bytes up to 1 MiB, and above that to one of four steps per power of two (1 MiB,
  1.25, 1.5, 1.75, 2, 2.5, ... MiB), which wastes at most 25 %. PyTorch additionally *splits*
  large cached blocks and merges neighbours; we only reuse exact classes, which keeps the
  bookkeeping a page long.
- **Stream order makes reuse safe.** A block returns to the cache as soon as Python drops the
  last array that uses it, even though kernels queued on the stream may still read it. That is
  fine as long as the block's next user is queued on the *same* stream: the stream runs the
  old kernel first. Every minigpu launch goes on ``device.current_stream()``; the one place
  that uses a second stream (``utils.data.CudaPrefetcher``'s copy stream) first makes that
  stream wait on an event of the compute stream (see ``streams.py``).
- **Out of memory.** When ``cuMemAlloc`` fails, the cache is emptied (``cuMemFree`` of every
  cached block) and the allocation is retried once.
- **Frees are deferred.** A block is returned by a ``weakref`` finaliser, which may run in the
  middle of another allocation (the garbage collector runs whenever it likes). So a finaliser
  only appends to a queue; the pool drains the queue under a lock at its next call.

Where it plugs in
-----------------
- **Real GPU.** :class:`CachingMemoryManager` is a Numba *External Memory Management* (EMM)
  plugin: ``cuda.set_memory_manager`` (called by :func:`install` when ``device.py`` is first
  imported, before any CUDA context exists) makes every device allocation Numba makes —
  ``cuda.device_array``, ``cuda.to_device``, ``device_array_like``, ... — go through
  :meth:`CachingMemoryManager.memalloc`. Set ``MINIGPU_CUDA_ALLOCATOR=native`` (before
  importing minigpu) to get Numba's allocate-and-free-per-array manager for comparison.
- **Simulator.** There is no device memory, but :func:`device_array` routes ``device.empty``
  through the same :class:`CachingPool` with NumPy byte blocks, so the bookkeeping — and the
  "memory stays flat over many steps" test — runs on any machine.
- **Pinned host memory.** :func:`pinned_empty` caches page-locked host buffers with the same
  pool class (``cudaHostAlloc`` is even slower than ``cudaMalloc``); the ``DataLoader`` uses it
  for ``pin_memory=True``.

:class:`CachingPool` is plain Python with the raw allocate/free functions passed in, so
``tests/test_allocator.py`` tests its size classes, free lists and counters directly.

``benchmarks/allocator_flat_memory.py`` trains a tiny MLP for 1 000 steps on cuda and prints
the stats: reserved memory stops growing after the second step, and the driver is only called
during the first two (seconds on a GPU, minutes on the simulator).
"""
from __future__ import annotations

import collections
import functools
import os
import threading
import weakref

import numpy as np
from numba import cuda

from ...simulator import fill_poison  # uninitialised simulated memory: initcheck catches a read

KIB, MIB = 1024, 1024 * 1024
GRANULARITY = 512
"""Every block is a multiple of 512 bytes (also keeps every block 512-byte aligned)."""
SMALL_LIMIT = 1 * MIB
"""Up to this size, classes are 512 bytes apart; above it, DIVISIONS per power of two."""
DIVISIONS = 4

SIMULATOR = bool(cuda.config.ENABLE_CUDASIM)
if SIMULATOR:
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
ENABLED = os.environ.get("MINIGPU_CUDA_ALLOCATOR", "caching").lower() != "native"
"""``MINIGPU_CUDA_ALLOCATOR=native`` turns the cache off (read once, at import)."""


def round_size(nbytes: int, granularity: int = GRANULARITY, small_limit: int = SMALL_LIMIT,
               divisions: int = DIVISIONS) -> int:
    """The size class of a request: the block size the pool actually hands out.

    >>> round_size(1), round_size(512), round_size(513), round_size(MIB + 1) // KIB
    (512, 512, 1024, 1280)
    """
    nbytes = max(int(nbytes), 1)
    if nbytes <= small_limit:
        return -(-nbytes // granularity) * granularity
    step = (1 << (nbytes.bit_length() - 1)) // divisions  # power of two below, split in 4
    return -(-nbytes // step) * step


class CachingPool:
    """Free lists of blocks by size class, with PyTorch-style counters.

    ``raw_alloc(nbytes) -> block`` gets memory from the system (``cuMemAlloc``, a NumPy buffer,
    ...) and may raise ``MemoryError``; ``raw_free(block)`` gives it back. A block is opaque
    here: the pool only remembers its size class.

    >>> pool = CachingPool(raw_alloc=bytearray, raw_free=lambda block: None)
    >>> block, size = pool.allocate(1000)            # a miss: raw_alloc(1024)
    >>> pool.release(block, size)                    # back on the 1024-byte free list
    >>> pool.allocate(700)[0] is block               # a hit: same class, no raw_alloc
    True
    """

    def __init__(self, raw_alloc, raw_free, round_size=round_size):
        self.raw_alloc, self.raw_free, self.round_size = raw_alloc, raw_free, round_size
        self._free = collections.defaultdict(list)   # size class -> [block, ...]
        self._returned = collections.deque()          # (block, size) from finalisers
        self._lock = threading.Lock()
        self.trace = None
        """Set to a list to record ``("alloc" | "free", requested nbytes, key)`` events
        (``key = id(block)``): the allocation pattern of a step, for replaying in tests."""
        self._reset_counters()

    def _reset_counters(self):
        self.allocated_bytes = self.requested_bytes = self.cached_bytes = 0
        self.peak_allocated_bytes = self.peak_reserved_bytes = 0
        self.active_blocks = 0
        self.num_allocs = self.num_frees = self.num_cache_hits = 0
        self.num_device_allocs = self.num_device_frees = self.num_oom_retries = 0
        self._requested = {}  # id(block) -> requested bytes, while the block is handed out

    # --- the two operations --------------------------------------------------------------
    def allocate(self, nbytes: int):
        """A block of at least ``nbytes``: ``(block, size_class)``. Pass both to ``release``."""
        size = self.round_size(nbytes)
        with self._lock:
            self._drain()
            bucket = self._free.get(size)
            if bucket:
                block = bucket.pop()
                self.cached_bytes -= size
                self.num_cache_hits += 1
            else:
                block = self._raw_alloc(size)
            self.num_allocs += 1
            self.active_blocks += 1
            self.allocated_bytes += size
            self.requested_bytes += int(nbytes)
            self._requested[id(block)] = int(nbytes)
            self.peak_allocated_bytes = max(self.peak_allocated_bytes, self.allocated_bytes)
            self.peak_reserved_bytes = max(self.peak_reserved_bytes, self.reserved_bytes)
        if self.trace is not None:
            self.trace.append(("alloc", int(nbytes), id(block)))
        return block, size

    def release(self, block, size: int):
        """Give a block back (safe from any thread or finaliser: it only enqueues)."""
        if self.trace is not None:
            self.trace.append(("free", int(self._requested.get(id(block), 0)), id(block)))
        self._returned.append((block, size))

    # --- cache control -------------------------------------------------------------------
    def empty_cache(self):
        """``raw_free`` every cached block (blocks in use are untouched)."""
        with self._lock:
            self._drain()
            self._release_cached()

    def forget(self):
        """Drop all bookkeeping without freeing anything (the CUDA context is gone)."""
        with self._lock:
            self._free.clear()
            self._returned.clear()
            self._reset_counters()

    def reset_peak_stats(self):
        with self._lock:
            self._drain()
            self.peak_allocated_bytes = self.allocated_bytes
            self.peak_reserved_bytes = self.reserved_bytes

    @property
    def reserved_bytes(self) -> int:
        """Everything taken from the system: blocks in use plus blocks cached."""
        return self.allocated_bytes + self.cached_bytes

    def stats(self) -> dict:
        """Counters in bytes and calls; ``num_device_allocs`` counts ``raw_alloc`` calls."""
        with self._lock:
            self._drain()
            return {
                "allocated_bytes": self.allocated_bytes,
                "requested_bytes": self.requested_bytes,
                "cached_bytes": self.cached_bytes,
                "reserved_bytes": self.reserved_bytes,
                "peak_allocated_bytes": self.peak_allocated_bytes,
                "peak_reserved_bytes": self.peak_reserved_bytes,
                "active_blocks": self.active_blocks,
                "cached_blocks": sum(len(b) for b in self._free.values()),
                "num_allocs": self.num_allocs,
                "num_frees": self.num_frees,
                "num_cache_hits": self.num_cache_hits,
                "num_device_allocs": self.num_device_allocs,
                "num_device_frees": self.num_device_frees,
                "num_oom_retries": self.num_oom_retries,
            }

    # --- internals (called with the lock held) -------------------------------------------
    def _drain(self):
        while self._returned:
            block, size = self._returned.popleft()
            self._free[size].append(block)
            self.cached_bytes += size
            self.allocated_bytes -= size
            self.requested_bytes -= self._requested.pop(id(block), 0)
            self.active_blocks -= 1
            self.num_frees += 1

    def _raw_alloc(self, size):
        try:
            block = self.raw_alloc(size)
        except MemoryError:
            # Out of memory: give every cached block back and try once more.
            self.num_oom_retries += 1
            self._release_cached()
            block = self.raw_alloc(size)
        self.num_device_allocs += 1
        return block

    def _release_cached(self):
        for bucket in self._free.values():
            while bucket:
                self.raw_free(bucket.pop())
                self.num_device_frees += 1
        self._free.clear()
        self.cached_bytes = 0


# --- handing out NumPy-backed arrays (simulator device memory, pinned host memory) --------

def _array_from_block(pool, block, size, n, dtype):
    """``n`` elements of ``dtype`` at the start of ``block``; the block goes back to ``pool``
    when the last array that views it dies.

    NumPy makes the array's ``base`` a memoryview of the block, and every slice or reshape of
    the array keeps the array (hence that memoryview) alive, so a finaliser on the memoryview
    fires exactly when nothing uses the memory any more.
    """
    array = np.frombuffer(memoryview(block)[:n * dtype.itemsize], dtype=dtype)
    weakref.finalize(array.base, pool.release, block, size)
    return array


def _numpy_block(nbytes):
    return np.empty(nbytes, dtype=np.uint8)


_simulator_pool = None


def simulator_pool() -> CachingPool:
    """The pool behind ``device.empty`` under the simulator (NumPy byte blocks)."""
    global _simulator_pool
    if _simulator_pool is None:
        _simulator_pool = CachingPool(_numpy_block, lambda block: None)
    return _simulator_pool


def device_array(n: int, dtype, stream=0):
    """``n`` uninitialised elements of ``dtype`` in device memory (what ``device.empty`` does).

    On a GPU this is ``cuda.device_array``: the EMM plugin (when installed) serves it from
    the cache. Under the simulator the memory comes from :func:`simulator_pool`, so the same
    counters show up in ``minigpu.cuda.memory_stats()``.
    """
    dtype = np.dtype(dtype)
    if not (SIMULATOR and ENABLED) or n == 0:
        return cuda.device_array(int(n), dtype=dtype, stream=stream)
    pool = simulator_pool()
    block, size = pool.allocate(n * dtype.itemsize)
    array = fill_poison(_array_from_block(pool, block, size, n, dtype))
    return FakeCUDAArray(array, stream=stream)


_pinned_pool = None


def _pinned_block(nbytes):
    try:
        return cuda.pinned_array(nbytes, dtype=np.uint8)  # a plain ndarray on the simulator
    except Exception as exc:  # cuMemHostAlloc failed: out of page-locked memory
        raise MemoryError(str(exc)) from exc


def pinned_pool() -> CachingPool:
    """The cache of page-locked host blocks behind :func:`pinned_empty`."""
    global _pinned_pool
    if _pinned_pool is None:
        # Dropping the last reference to a pinned array frees it (cuMemFreeHost).
        _pinned_pool = CachingPool(_pinned_block, lambda block: None)
    return _pinned_pool


def pinned_empty(n: int, dtype) -> np.ndarray:
    """A NumPy array of ``n`` elements in page-locked (pinned) host memory, from the cache.

    The GPU's copy engine can read pinned memory directly, so a copy from it can be
    asynchronous (``cuMemcpyHtoDAsync`` returns at once and overlaps with kernels); from
    ordinary pageable memory the driver first copies into its own pinned staging buffer and
    the host waits. Under the simulator the array is ordinary memory (same behaviour).
    """
    dtype = np.dtype(dtype)
    if n == 0:
        return np.empty(0, dtype)
    pool = pinned_pool()
    block, size = pool.allocate(n * dtype.itemsize)
    return _array_from_block(pool, block, size, n, dtype)


def is_pinned(array) -> bool:
    """True when ``array`` (or the array it views) was handed out by :func:`pinned_empty`."""
    if _pinned_pool is None:
        return False
    obj = array
    while isinstance(obj, np.ndarray):   # a view -> the array from pinned_empty -> ...
        obj = obj.base
    while isinstance(obj, memoryview):   # ... -> its memoryview(s) -> the pool block
        obj = obj.obj
    return obj is not None and id(obj) in _pinned_pool._requested


# --- the EMM plugin (real GPU) --------------------------------------------------------------

def _make_emm_plugin():
    """Build the plugin class. Numba's simulator has no EMM API, so the class exists only on
    a real-GPU Numba (``numba.cuda.HostOnlyCUDAMemoryManager``)."""
    from numba.cuda import GetIpcHandleMixin, HostOnlyCUDAMemoryManager, MemoryInfo
    from numba.cuda.cudadrv import driver as drv

    class CachingMemoryManager(GetIpcHandleMixin, HostOnlyCUDAMemoryManager):
        """Numba EMM plugin: device allocations come from a :class:`CachingPool`.

        ``memalloc`` mirrors Numba's own manager (an ``AutoFreePointer`` whose reference count
        drops to zero when the last array or view of it dies, registered in
        ``self.allocations`` so views can find their owner) — except that the finaliser puts
        the block back on a free list instead of queuing ``cuMemFree``. Pinned and mapped host
        memory are left to ``HostOnlyCUDAMemoryManager``.
        """

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.pool = CachingPool(self._cu_alloc, self._cu_free)

        @staticmethod
        def _cu_alloc(nbytes):
            try:
                return drv.driver.cuMemAlloc(nbytes)
            except drv.CudaAPIError as exc:
                if exc.code == drv.binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
                    raise MemoryError(f"CUDA out of memory allocating {nbytes} bytes") from exc
                raise

        @staticmethod
        def _cu_free(ptr):
            drv.driver.cuMemFree(ptr)

        def initialize(self):
            # As Numba's manager: size the pending-free queue of host allocations.
            if self.deallocations.memory_capacity == drv._SizeNotSet:
                self.deallocations.memory_capacity = self.get_memory_info().total

        def memalloc(self, size):
            try:
                ptr, rounded = self.pool.allocate(size)
            except MemoryError as exc:
                raise MemoryError(f"{exc}; minigpu.cuda.memory_stats(): "
                                  f"{self.pool.stats()}") from None
            key = int(ptr)
            allocations, release = self.allocations, self.pool.release

            def finalizer():
                allocations.pop(key, None)
                release(ptr, rounded)

            mem = drv.AutoFreePointer(weakref.proxy(self.context), ptr, size,
                                      finalizer=finalizer)
            self.allocations[key] = mem
            return mem.own()

        def get_memory_info(self):
            free, total = drv.driver.cuMemGetInfo()
            return MemoryInfo(free=free, total=total)

        def reset(self):
            super().reset()
            self.pool.forget()  # the context's memory is gone with the context

        @property
        def interface_version(self):
            return 1

    return CachingMemoryManager


_emm_class = None


@functools.cache
def install() -> bool:
    """Make the caching plugin Numba's memory manager (real GPU only; idempotent).

    Must run before the CUDA context is created — ``device.py`` calls it at import. It does
    nothing under the simulator, with ``MINIGPU_CUDA_ALLOCATOR=native``, or when the user chose
    another plugin with ``NUMBA_CUDA_MEMORY_MANAGER``.
    """
    global _emm_class
    if SIMULATOR or not ENABLED:
        return False
    from numba.cuda.core import config
    if getattr(config, "CUDA_MEMORY_MANAGER", "default") != "default":
        return False
    _emm_class = _make_emm_plugin()
    cuda.set_memory_manager(_emm_class)
    return True


def device_pool():
    """The pool serving device allocations, or None when no caching pool is in use (the cache
    is off, or a CUDA context already existed when the plugin was installed)."""
    if SIMULATOR:
        return simulator_pool() if ENABLED else None
    if _emm_class is None:
        return None
    manager = cuda.current_context().memory_manager
    return manager.pool if isinstance(manager, _emm_class) else None
