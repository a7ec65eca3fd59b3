"""How the benchmark times a call: CUDA events on minigpu's stream around ``repeat`` calls after
a warm-up, the median reported; every timed call reuses the output buffers the first call
allocated (:class:`ReplayAllocations`). Under the simulator events carry no time, so the wall
clock stands in (and the numbers mean nothing).
"""
from __future__ import annotations

import contextlib
import statistics
import sys
import time

from .. import backends
from ..simulator.counters import counters

class ReplayAllocations:
    """While timing, ``device.empty`` in every kernel module hands out the buffers the first
    call allocated, in the same order: no timed call allocates, whatever the allocator, and
    every call works on the same addresses. A call that asks for a different size or dtype
    than recorded gets a fresh buffer, so results stay correct."""

    def __init__(self):
        self.device = backends.cuda_module("device")
        self.real = self.device.empty
        self.buffers, self.index, self.recording = [], 0, True

    def __call__(self, *args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        if self.recording:
            buf = self.real(*args, **kwargs)
            self.buffers.append((key, buf))
            return buf
        if self.index < len(self.buffers) and self.buffers[self.index][0] == key:
            buf = self.buffers[self.index][1]
            self.index += 1
            return buf
        self.index = len(self.buffers)  # out of step: allocate from here on
        return self.real(*args, **kwargs)

    def rewind(self):
        self.recording, self.index = False, 0

    @contextlib.contextmanager
    def installed(self):
        patched = []
        for name, mod in list(sys.modules.items()):
            if name.startswith("minigpu.backends.cuda") and getattr(mod, "empty", None) is \
                    self.real:
                patched.append(mod)
                mod.empty = self
        try:
            yield self
        finally:
            for mod in patched:
                mod.empty = self.real


class Timer:
    def __init__(self, ctx, warmup: int, repeat: int):
        self.ctx, self.warmup, self.repeat = ctx, max(warmup, 1), max(repeat, 1)
        from numba import cuda

        self.nbcuda = cuda

    def measure(self, fn):
        """(median ms, last result): first call records allocations, then warm-up, then
        ``repeat`` timed calls."""
        device, stream = self.ctx.device, self.ctx.stream
        replay = ReplayAllocations()
        with replay.installed():
            result = fn()
            for _ in range(self.warmup - 1):
                replay.rewind()
                result = fn()
            device.synchronize()
            times = []
            for _ in range(self.repeat):
                replay.rewind()
                if device.SIMULATOR:  # events carry no time there: wall clock, meaningless
                    t0 = time.perf_counter()
                    result = fn()
                    device.synchronize()
                    times.append(1e3 * (time.perf_counter() - t0))
                    continue
                start, end = self.nbcuda.event(), self.nbcuda.event()
                start.record(stream)
                result = fn()
                end.record(stream)
                end.synchronize()
                times.append(self.nbcuda.event_elapsed_time(start, end))
        return statistics.median(times), result

    def count(self, fn):
        """On the simulator, instead of a time: (the launches of one call with their counters
        (:func:`minigpu.cuda.counters`), its result)."""
        with counters() as launches:
            result = fn()
        return launches, result


def copy_bandwidth(ctx, timer):
    """GB/s of a device-to-device copy (``cudaMemcpyAsync``) of 256 MiB (read + write)."""
    n = ctx.size(1 << 26, 1024)
    src, dst = ctx.upload(ctx.np.zeros(n)), ctx.empty(n)
    ms, _ = timer.measure(lambda: dst.copy_to_device(src, stream=ctx.stream))
    return 2 * n * 4 / (ms * 1e-3) / 1e9, ms
