"""Peak memory of a step, for PyTorch and minigpu alike (``cpu_training_step.py``,
``program_steps.py``)."""
import tracemalloc


class PeakMemory:
    """The highest amount allocated between ``start()`` and ``stop()`` above what was allocated
    at ``start()``, in bytes: tracemalloc for minigpu (NumPy reports its buffers to it),
    PyTorch's allocator events from ``torch.profiler`` for torch (tracemalloc cannot see them).
    """

    def __init__(self, library):
        self.library = library

    def start(self):
        if self.library == "torch":
            from torch.profiler import ProfilerActivity, profile
            self.profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self.profiler.__enter__()
        else:
            tracemalloc.start()
            self.base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()

    def stop(self):
        if self.library != "torch":
            peak = tracemalloc.get_traced_memory()[1] - self.base
            tracemalloc.stop()
            return peak
        self.profiler.__exit__(None, None, None)
        events = sorted((e for e in self.profiler.profiler.kineto_results.events()
                         if e.name() == "[memory]"), key=lambda e: e.start_ns())
        now = peak = 0
        for e in events:
            now += e.nbytes()
            peak = max(peak, now)
        return peak


def peak_bytes(library, step):
    meter = PeakMemory(library)
    meter.start()
    try:
        step()
    finally:
        peak = meter.stop()
    return peak
