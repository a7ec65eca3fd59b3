"""Streams, events, and overlapping host→device copies with compute — a lesson.

What one stream does
--------------------
A *stream* is a queue of device work: kernel launches and copies, executed in the order they
were queued, each one starting after the previous one finished. Queuing returns at once (the
host runs ahead of the GPU); only a synchronisation makes the host wait. minigpu puts every
launch on one stream, ``device.current_stream()``, so consecutive primitives never need a
barrier between them: the stream already orders them. (That ordering is also what makes the
caching allocator safe: a block freed by Python and reused by the next kernel *on the same
stream* is only touched after the previous kernel finished — see ``allocator.py``.)

Two streams, two engines
------------------------
A GPU has separate *copy engines* (DMA) next to the SMs. Work on one stream is serial, so
"copy batch k, compute batch k, copy batch k+1, ..." leaves the copy engine idle while kernels
run and the SMs idle while the copy runs: :func:`copy_then_compute`. Put the copies on a second
stream and the hardware can run the copy of batch k+1 *while* batch k computes:
:func:`overlapped_copy_compute`. With copy time ≈ compute time that halves the wall time.

Two conditions, both easy to miss:

1. **The host memory must be pinned** (page-locked, ``cuda.pinned_array`` /
   ``allocator.pinned_empty``). From ordinary pageable memory the driver first copies into
   its own pinned staging buffer, synchronously, and nothing overlaps.
2. **Events order work across streams.** Streams know nothing about each other. An *event*
   is a marker queued on a stream (``event.record(stream)``); ``event.wait(other)`` makes
   ``other`` hold its later work until everything before the marker has finished — a
   GPU-side dependency, the host does not wait. Here they are needed twice:

   - *copied[k]*: compute of batch k waits until its copy has landed (read-after-write);
   - *computed[k]*: with double buffering (two device buffers, batch k in buffer k % 2),
     the copy of batch k+2 must wait until compute of batch k stopped reading the buffer it
     overwrites (write-after-read).

   ``event.synchronize()`` instead makes the *host* wait, and two events recorded on one
   stream time the work between them (``start.elapsed_time(end)``, in ms, measured by the
   GPU's clock — host timers only see how long *queuing* took).

``utils.data.CudaPrefetcher`` applies the same pattern to a ``DataLoader``.

Under the simulator streams and events exist but do nothing: work runs synchronously, in
queue order, so every program here gives the same results and the timings mean nothing.
``python -m minigpu.backends.cuda.streams`` runs :func:`benchmark_overlap` (on a GPU: about
2x from overlap when copy and compute take equally long).
"""
from __future__ import annotations

import time

import numpy as np
from numba import cuda, float32

from . import allocator
from .device import SIMULATOR, current_stream, empty, launch_1d, synchronize

# --- the three moves --------------------------------------------------------------------

def new_stream():
    """A new stream (``cuda.stream()``): its own in-order queue, concurrent with the others."""
    return cuda.stream()


def record_event(stream):
    """Queue a marker on ``stream``; it completes when all work queued before it has."""
    event = cuda.event()
    event.record(stream)
    return event


def wait_event(stream, event):
    """Make ``stream`` wait (on the GPU, not the host) until ``event`` has completed."""
    event.wait(stream)


def copy_to_device_async(host: np.ndarray, stream, out=None):
    """Queue a host→device copy of ``host`` (1-D, contiguous) on ``stream``; returns the
    device buffer (new from the caching allocator unless ``out`` is given). The copy only
    overlaps other work when ``host`` is pinned; ``host`` must stay untouched until the copy
    completed (record an event after it and synchronise on that before reusing ``host``)."""
    if out is None:
        out = empty(host.size, host.dtype)
    if host.size:
        out.copy_to_device(host, stream=stream)
    return out


# --- a stand-in for "the model's compute" -----------------------------------------------

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
    """Device time of the work queued on ``stream`` inside the ``with`` block: CUDA events on a
    GPU; on the simulator, host wall time around a synchronised block (meaningless there)."""

    def __init__(self, stream):
        self.stream, self.ms = stream, None

    def __enter__(self):
        synchronize()
        if SIMULATOR:
            self._t0 = time.perf_counter()
        else:
            self._start = record_event(self.stream)
        return self

    def __exit__(self, *exc):
        if SIMULATOR:
            self.ms = (time.perf_counter() - self._t0) * 1e3
        else:
            end = record_event(self.stream)
            end.synchronize()
            self.ms = self._start.elapsed_time(end)
        return False


def benchmark_overlap(n_batches=None, batch_mib=None, iters=None, repeats=3) -> dict:
    """Time :func:`copy_then_compute` against :func:`overlapped_copy_compute` (best of
    ``repeats``), in ms of device time.

    On a GPU: ``n_batches`` batches of ``batch_mib`` MiB in pinned host memory (default 8 x
    32 MiB); ``iters`` (default: calibrated) makes one compute about as long as one copy, where
    overlap helps most: n x (copy + compute) against about (n + 1) x copy, a speedup of
    2n/(n+1) (1.8 for n = 8). Under the simulator the sizes are tiny and the result only shows
    that both programs run; ``timer`` says which clock was used.
    """
    if SIMULATOR:
        n_batches, elems, repeats = n_batches or 3, 64, 1
        iters = iters or 2
    else:
        n_batches = n_batches or 8
        elems = int((batch_mib or 32) * 2**20) // 4
    hosts = []
    for k in range(n_batches):
        h = allocator.pinned_empty(elems, np.float32)
        h[:] = k
        hosts.append(h)
    compute_stream, copy_stream = current_stream(), new_stream()

    with _Timer(compute_stream) as copy_t:
        probe = copy_to_device_async(hosts[0], compute_stream)
    spin(probe, 1, compute_stream)  # compile and warm up
    if iters is None:  # calibrate: one compute about as long as one copy
        with _Timer(compute_stream) as t64:
            spin(probe, 64, compute_stream)
        iters = max(1, round(64 * copy_t.ms / max(t64.ms, 1e-3)))

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
        "timer": "perf_counter (simulator: sequential, not a measurement)" if SIMULATOR
                 else "cuda events (device time)",
    }


if __name__ == "__main__":
    for key, value in benchmark_overlap().items():
        print(f"{key:22s} {value:.3f}" if isinstance(value, float) else f"{key:22s} {value}")
