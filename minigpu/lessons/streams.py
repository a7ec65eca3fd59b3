"""Streams and pinned memory: overlapping host→device copies with compute.

A stream is an in-order queue; copies on a second stream, ordered against the compute by
events, let the copy engine and the SMs work at the same time (pinned host memory required:
from pageable memory the driver stages the copy synchronously and nothing overlaps). The
moves themselves (``new_stream``, ``record_event``, ``wait_event``, ``copy_to_device_async``)
are production code in ``backends/cuda/streams.py``, used by ``utils.data.CudaPrefetcher``;
this lesson sets two programs over the same pinned batches side by side:

* :func:`copy_then_compute`: one stream, copy k, compute k, copy k+1, ... nothing overlaps;
* :func:`overlapped_copy_compute`: copies on a second stream, two device buffers, events for
  read-after-write (``copied``) and write-after-read (``computed``).

``spin_kernel`` stands in for the model's compute, calibrated to last about as long as one
batch's copy, where overlap pays most: by the model, n x (copy + compute) against about
(n + 1) x copy. On a GPU, ``python -m minigpu.lessons.streams`` (or
``python -m minigpu.tools.bench --lesson streams``) times both with CUDA events; expect the
overlapped program to be the faster one. Under the simulator streams and events do nothing:
the programs give the same results, and nothing is timed.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32

from ..backends.cuda import allocator
from ..backends.cuda.device import (SIMULATOR, current_stream, empty, launch_1d,
                                    synchronize)
from ..backends.cuda.streams import copy_to_device_async, new_stream, record_event, wait_event
from .record import Experiment, KernelSpec, Lesson, Problem, Variant


@cuda.jit
def spin_kernel(x, iters):
    """One thread per element (grid-stride): ``iters`` dependent multiply-adds on x[i], written
    back. Pure arithmetic with one coalesced load and store per element, so its run time
    scales with ``iters`` and it never competes with the copy engine for memory bandwidth."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, x.size, step):
        v = x[i]
        for _ in range(iters):
            v = v * float32(0.999) + float32(0.001)
        x[i] = v


def spin(buf, iters, stream):
    """Launch :func:`spin_kernel` over ``buf`` on ``stream``."""
    grid, block = launch_1d(buf.size)
    spin_kernel[grid, block, stream](buf, np.int32(iters))


# --- the lesson pair ------------------------------------------------------------------------

def copy_then_compute(host_batches, compute, stream):
    """One stream: copy k, compute k, copy k+1, compute k+1, ... — nothing overlaps.
    ``compute(buf, stream)`` queues the work on one batch. Returns the device buffer."""
    buf = empty(host_batches[0].size, host_batches[0].dtype)
    for host in host_batches:
        copy_to_device_async(host, stream, out=buf)
        compute(buf, stream)  # same stream: starts after the copy, and the next copy after it
    return buf


def overlapped_copy_compute(host_batches, compute, compute_stream, copy_stream):
    """Copies on ``copy_stream``, compute on ``compute_stream``, two device buffers.

    The copy of batch k+1 is queued *before* the compute of batch k, so the GPU can run them
    at the same time. ``copied[slot]`` guards read-after-write (compute waits for its data),
    ``computed[slot]`` write-after-read (a copy does not overwrite a buffer still being read).
    """
    bufs = [empty(h.size, h.dtype) for h in host_batches[:2]]
    copied, computed = [None, None], [None, None]

    def issue_copy(k):
        slot = k % 2
        if computed[slot] is not None:
            wait_event(copy_stream, computed[slot])  # compute k-2 is done with this buffer
        copy_to_device_async(host_batches[k], copy_stream, out=bufs[slot])
        copied[slot] = record_event(copy_stream)

    issue_copy(0)
    for k in range(len(host_batches)):
        if k + 1 < len(host_batches):
            issue_copy(k + 1)                            # runs during compute k
        wait_event(compute_stream, copied[k % 2])        # batch k has landed
        compute(bufs[k % 2], compute_stream)
        computed[k % 2] = record_event(compute_stream)
    return bufs[(len(host_batches) - 1) % 2]


class _Timer:
    """Device time of the work queued on ``stream`` inside the ``with`` block (CUDA events;
    on a GPU only)."""

    def __init__(self, stream):
        self.stream, self.ms = stream, None

    def __enter__(self):
        synchronize()
        self._start = record_event(self.stream)
        return self

    def __exit__(self, *exc):
        end = record_event(self.stream)
        end.synchronize()
        self.ms = self._start.elapsed_time(end)
        return False


def benchmark_overlap(n_batches=None, batch_mib=None, iters=None, repeats=3) -> dict:
    """Time :func:`copy_then_compute` against :func:`overlapped_copy_compute` (best of
    ``repeats``), in ms of device time, on a GPU.

    ``n_batches`` batches of ``batch_mib`` MiB in pinned host memory (default 8 x 32 MiB);
    ``iters`` (default: calibrated) makes one compute about as long as one copy, where
    overlap helps most (the overlapped program can at best hide every copy but the first).
    Under the simulator nothing is timed (streams run in order there): both programs run
    once on tiny batches, to show they do, and every time and the speed-up are None.
    """
    if SIMULATOR:
        hosts = pinned_batches(n_batches or 3, 64)
        stream = current_stream()

        def compute(buf, s):
            spin(buf, iters or 2, s)

        copy_then_compute(hosts, compute, stream)
        overlapped_copy_compute(hosts, compute, stream, new_stream())
        synchronize()
        return {"n_batches": len(hosts), "batch_bytes": 64 * 4, "iters": iters or 2,
                "copy_ms": None, "compute_ms": None, "copy_then_compute_ms": None,
                "overlapped_ms": None, "speedup": None,
                "timer": "none: the simulator runs streams in order and times nothing; run "
                         "this on a GPU"}
    n_batches = n_batches or 8
    elems = int((batch_mib or 32) * 2**20) // 4
    hosts = pinned_batches(n_batches, elems)
    compute_stream, copy_stream = current_stream(), new_stream()

    with _Timer(compute_stream) as copy_t:
        probe = copy_to_device_async(hosts[0], compute_stream)
    if iters is None:  # one compute about as long as one copy
        iters = calibrate(probe, hosts[0], compute_stream)

    def compute(buf, stream):
        spin(buf, iters, stream)

    with _Timer(compute_stream) as compute_t:
        compute(probe, compute_stream)
    serial = overlapped = float("inf")
    for _ in range(repeats):
        with _Timer(compute_stream) as t:
            copy_then_compute(hosts, compute, compute_stream)
        serial = min(serial, t.ms)
        with _Timer(compute_stream) as t:
            overlapped_copy_compute(hosts, compute, compute_stream, copy_stream)
        overlapped = min(overlapped, t.ms)
    return {
        "n_batches": n_batches, "batch_bytes": elems * 4, "iters": iters,
        "copy_ms": copy_t.ms, "compute_ms": compute_t.ms,
        "copy_then_compute_ms": serial, "overlapped_ms": overlapped,
        "speedup": serial / overlapped if overlapped > 0 else float("nan"),
        "timer": "cuda events (device time)",
    }


def pinned_batches(n_batches, elems):
    """``n_batches`` pinned host arrays of ``elems`` float32, batch k filled with k."""
    hosts = []
    for k in range(n_batches):
        h = allocator.pinned_empty(elems, np.float32)
        h[:] = k
        hosts.append(h)
    return hosts


def calibrate(probe, host, stream):
    """Spin iterations that make one compute last about as long as copying ``host``."""
    with _Timer(stream) as copy_t:
        copy_to_device_async(host, stream, out=probe)
    spin(probe, 1, stream)  # compile and warm up
    with _Timer(stream) as t64:
        spin(probe, 64, stream)
    return max(1, round(64 * copy_t.ms / max(t64.ms, 1e-3)))


def _build(inputs):
    n_batches, elems = inputs.size((8, 8 << 20), (3, 64))      # 8 x 32 MiB on a GPU
    hosts = pinned_batches(n_batches, elems)
    stream = current_stream()
    iters = 2 if inputs.small or SIMULATOR else calibrate(inputs.empty(elems), hosts[0], stream)

    def compute(buf, s):
        spin(buf, iters, s)

    nbytes = elems * 4
    size = f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes} B"
    return Problem(f"{n_batches} pinned batches of {size}, compute {iters} FMA/element",
                   n_batches * nbytes, hosts=hosts, compute=compute, stream=stream,
                   copy_stream=new_stream())


LESSON = Lesson(
    "streams", "Streams and pinned memory: overlapping copies with compute",
    "copies on a second stream, ordered by events, overlap the compute; only from pinned "
    "host memory",
    (Experiment("streams", _build,
                (Variant("copy_then_compute", "one stream: nothing overlaps",
                         lambda p: copy_then_compute(p.hosts, p.compute, p.stream),
                         copy_then_compute),
                 Variant("overlapped_copy_compute", "copy stream + events, 2 buffers",
                         lambda p: overlapped_copy_compute(p.hosts, p.compute, p.stream,
                                                           p.copy_stream),
                         overlapped_copy_compute)),
                memory_bound=False, tol=dict(rtol=1e-6, atol=1e-6),
                no_production="the production overlap is utils.data.CudaPrefetcher, built from "
                              "the same stream moves",
                look_for="identical counters: streams change when work runs, not what it "
                         "touches. On the simulator nothing overlaps; the overlap is time, "
                         "which only a GPU shows (python -m minigpu.tools.bench --lesson "
                         "streams)."),),
    lambda: [KernelSpec("streams.spin", spin_kernel, (np.zeros(1, np.float32), np.int32(1)),
                        256)])


if __name__ == "__main__":
    for key, value in benchmark_overlap().items():
        shown = "not timed" if value is None else f"{value:.3f}" if isinstance(value, float) \
            else value
        print(f"{key:22s} {shown}")
