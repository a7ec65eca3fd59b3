"""Streams and events: the moves that overlap host→device copies with compute.

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
run and the SMs idle while the copy runs. Put the copies on a second stream and the hardware
can run the copy of batch k+1 *while* batch k computes. With copy time ≈ compute time that
halves the wall time. The streams lesson (``minigpu/lessons/streams.py``) times both programs.

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

``utils.data.CudaPrefetcher`` applies the pattern to a ``DataLoader``.

Under the simulator streams and events exist but do nothing: work runs synchronously, in
queue order, so every program gives the same results.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from .device import empty

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
