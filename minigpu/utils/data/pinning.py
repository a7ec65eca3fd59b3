"""Pinned host memory and the GPU prefetcher: feeding a GPU, as in PyTorch::

    loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)
    for x, y in CudaPrefetcher(loader):      # x, y already on cuda
        loss = loss_fn(model(x), y)
        ...

``pin_memory=True`` makes the loader assemble every batch in page-locked host memory (from a
cache of pinned buffers, ``backends/cuda/allocator.py``), which the GPU's copy engine reads
directly: the host→device copy can then run asynchronously. :class:`CudaPrefetcher` (PyTorch
has no built-in one; this is the usual "data prefetcher" of training scripts) copies batch k+1
on its own copy stream while the model computes on batch k, with CUDA events so that compute
never reads a batch before its copy finished — the pattern of ``backends/cuda/streams.py``.
"""
from __future__ import annotations

import numpy as np

from ... import backends
from ...tensor import Device, Tensor


def _pinned_empty(n, dtype):
    return backends.cuda_module("allocator").pinned_empty(n, dtype)


def pin_memory(batch):
    """The batch with every cpu tensor copied into page-locked host memory (cached blocks from
    ``allocator.pinned_empty``). Tuples, lists and dicts are walked; cuda tensors and other
    objects are returned as they are."""
    def pin(t):
        if t.device.type != "cpu" or is_pinned(t):
            return t
        out = _pinned_empty(t.numel(), t.dtype)
        out[...] = t.detach().numpy().reshape(-1)
        return Tensor._dense(out, t.shape, "cpu")

    return map_tensors(pin, batch)


def map_tensors(fn, batch):
    """``batch`` with ``fn`` applied to every Tensor in it (tuples, lists and dicts are walked;
    other objects are returned as they are)."""
    if isinstance(batch, Tensor):
        return fn(batch)
    if isinstance(batch, dict):
        return {k: map_tensors(fn, v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(map_tensors(fn, v) for v in batch)
    return batch


def is_pinned(t: Tensor) -> bool:
    """True when a cpu tensor's buffer is page-locked memory from :func:`pin_memory`."""
    if t.device.type != "cpu":
        return False
    return backends.cuda_module("allocator").is_pinned(t._buf)


class CudaPrefetcher:
    """Iterate over ``loader`` with every batch already on the GPU, the copy of the next batch
    overlapping the compute on this one.

    Each cpu tensor of a batch is copied host→device on a separate *copy stream* (one stream
    per prefetcher); an event recorded after the copies is waited on by the compute stream
    (``minigpu.cuda.current_stream()``) before the batch is handed out, so kernels on it never
    read a half-copied batch, yet the host does not wait for the copy (it only waits, before
    a pinned buffer is recycled, for a copy queued two batches earlier). Batch k+1 is queued
    for copying *before* batch k is returned, so the copy runs while batch k computes. Before
    queuing a copy, the copy stream waits on an event of the compute stream: the caching
    allocator may hand it a block that compute-stream kernels were still reading.

    The overlap needs pinned batches (``DataLoader(..., pin_memory=True)``); with pageable
    ones the copies are correct but synchronous. Tensors already on cuda and non-tensor items
    pass through unchanged; ``requires_grad`` is dropped (batches are data). Under the
    simulator streams and events are no-ops and the batches are identical to plain iteration.
    """

    def __init__(self, loader, device="cuda"):
        if Device(device).type != "cuda":
            raise ValueError(f"CudaPrefetcher copies to a cuda device, got {device!r}")
        self.loader, self.device = loader, Device(device)
        self.copy_stream = None

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        streams = backends.cuda_module("streams")
        compute = backends.cuda_module("device").current_stream()
        if self.copy_stream is None:
            self.copy_stream = streams.new_stream()
        batches = iter(self.loader)
        pending = self._preload(batches, compute)
        retired = None  # (copied event, host batch) of the previous batch
        try:
            while pending is not None:
                on_device, copied, host = pending
                streams.wait_event(compute, copied)       # batch k has landed (GPU-side wait)
                if retired is not None:
                    # Its pinned buffers go back to the cache now, and may be refilled by the
                    # loader below: the copy out of them must be over (it was queued two
                    # batches ago, so this wait is practically free).
                    retired[0].synchronize()
                retired = (copied, host)
                pending = self._preload(batches, compute)  # batch k+1 copies during compute k
                yield on_device
        finally:  # also when the loop stopped early: let in-flight copies finish before
            for item in (retired, pending):  # their host and device buffers are recycled
                if item is not None:
                    item[-2].synchronize()

    def _preload(self, batches, compute):
        """Queue the copy of the next batch; (device batch, copied event, host batch)."""
        streams = backends.cuda_module("streams")
        try:
            host = next(batches)
        except StopIteration:
            return None
        streams.wait_event(self.copy_stream, streams.record_event(compute))
        on_device = self._to_device(host)
        return on_device, streams.record_event(self.copy_stream), host

    def _to_device(self, batch):
        streams = backends.cuda_module("streams")

        def copy(t):
            if t.device.type != "cpu":
                return t
            host = t._buf if (is_pinned(t) and t.is_contiguous() and t._offset == 0
                              and t._buf.size == t.numel()) \
                else np.ascontiguousarray(t.detach().numpy()).reshape(-1)
            buf = streams.copy_to_device_async(host, self.copy_stream)
            return Tensor._dense(buf, t.shape, self.device)

        return map_tensors(copy, batch)
