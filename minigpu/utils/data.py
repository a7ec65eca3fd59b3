"""Datasets and batching (``minigpu.utils.data`` ~ ``torch.utils.data``).

Feeding a GPU, as in PyTorch::

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

import itertools
import math
import numbers
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from ..random import default_generator
from ..tensor import Tensor


class Dataset:
    """Anything with ``__getitem__(i)`` and ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError


class TensorDataset(Dataset):
    """Samples are the i-th rows of tensors that share their first dimension."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        sizes = {t.shape[0] for t in tensors}
        if len(sizes) != 1:
            raise ValueError(f"Size mismatch between tensors: first dimensions "
                             f"{[t.shape[0] for t in tensors]}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


def default_collate(samples):
    """Collate a list of samples into a batch, as PyTorch's ``default_collate`` does, nested:
    tensors, NumPy arrays and numbers are stacked into one tensor (bools stay bool, integers
    become int64, float64 and Python floats stay float64, other floats become float32); a dict
    becomes a dict of collated values, a namedtuple the same namedtuple, a list or tuple a
    *list* of collated positions (PyTorch's behaviour for tuples too); strings stay a list."""
    first = samples[0]
    if isinstance(first, Tensor):
        from ..ops import stack
        return stack(samples)
    if isinstance(first, (str, bytes)):
        return list(samples)
    if isinstance(first, Mapping):
        batch = {key: default_collate([s[key] for s in samples]) for key in first}
        try:
            return type(first)(batch)
        except TypeError:  # a mapping type that cannot be built from a dict
            return batch
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # namedtuple
        return type(first)(*(default_collate(list(field)) for field in zip(*samples)))
    if isinstance(first, Sequence):
        if any(len(s) != len(first) for s in samples):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(position)) for position in zip(*samples)]
    array = np.stack([np.asarray(s) for s in samples])
    if array.dtype.kind not in "biuf":
        raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                        f"dicts or lists; found {type(first)}")
    if array.dtype.kind == "b":
        pass
    elif isinstance(first, numbers.Integral) or array.dtype.kind in "iu":
        array = array.astype(np.int64)
    elif array.dtype.kind == "f" and array.dtype != np.float64:
        array = array.astype(np.float32)
    return Tensor._from_array(array, "cpu")


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=default_generator):
    """Split ``dataset`` into non-overlapping random :class:`Subset` s of the given lengths.

    ``lengths`` are sizes summing to ``len(dataset)``, or fractions summing to 1: then each
    split gets ``floor(len * fraction)`` samples and the remainder is dealt out one by one,
    round-robin from the first split (PyTorch's rule). The permutation comes from
    ``generator`` (e.g. ``minigpu.Generator().manual_seed(42)`` for a fixed split)."""
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, fraction in enumerate(lengths):
            if fraction < 0 or fraction > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(int(math.floor(n * fraction)))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an "
                              f"empty dataset.", stacklevel=2)
        lengths = sizes
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = generator.numpy_rng().permutation(n).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, order[end - size:end]) for end, size in zip(ends, lengths)]


class DataLoader:
    """Iterate over a dataset in batches.

    ``shuffle`` draws a permutation per epoch from ``generator`` (default: minigpu's global
    generator, so ``manual_seed`` makes epochs reproducible). A :class:`TensorDataset` is
    batched with one ``index_select`` per tensor instead of one lookup per sample (the batch
    is a list of tensors, as PyTorch's collate makes it).
    ``pin_memory=True`` returns the cpu tensors of each batch in pinned host memory (see
    :func:`pin_memory`; cuda tensors are left alone); without a cuda device it warns and does
    nothing, as PyTorch does.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False,
                 collate_fn=None, generator=None, pin_memory=False, num_workers=0):
        if not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if num_workers:
            raise ValueError("minigpu's DataLoader loads in the main process (num_workers=0)")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last = shuffle, drop_last
        self.collate_fn = collate_fn or default_collate
        self.generator = generator or default_generator
        self.pin_memory = bool(pin_memory)
        if self.pin_memory and not _cuda_available():
            warnings.warn("'pin_memory' argument is set as true but no cuda device is "
                          "available, so pinned memory won't be used.", stacklevel=2)
            self.pin_memory = False

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _batches(self):
        n = len(self.dataset)
        order = self.generator.numpy_rng().permutation(n) if self.shuffle else np.arange(n)
        for start in range(0, n, self.batch_size):
            chunk = order[start:start + self.batch_size]
            if len(chunk) < self.batch_size and self.drop_last:
                return
            yield chunk

    def __iter__(self):
        for chunk in self._batches():
            if isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate:
                yield [_take_rows(t, chunk, self.pin_memory) for t in self.dataset.tensors]
            else:
                batch = self.collate_fn([self.dataset[int(i)] for i in chunk])
                yield pin_memory(batch) if self.pin_memory else batch


def _cuda_available():
    from .. import cuda
    return cuda.is_available()


def _take_rows(t: Tensor, rows: np.ndarray, pinned=False) -> Tensor:
    """t[rows] for a host index array: a host-side gather on cpu (straight into a pinned
    buffer when ``pinned``), index_select on cuda."""
    if t.device.type != "cpu":
        return t[Tensor._from_array(rows.astype(np.int64), t.device)]
    from ..backends import cpu
    source = cpu.array(t._view())  # a NumPy view of the dataset: no copy
    shape = (len(rows),) + tuple(t.shape[1:])
    n = int(np.prod(shape, dtype=np.int64))
    out = _pinned_empty(n, t.dtype) if pinned else np.empty(n, t.dtype)
    np.take(source, rows, axis=0, out=out.reshape(shape))
    return Tensor._dense(out, shape, "cpu")


def _pinned_empty(n, dtype):
    from ..backends.cuda import allocator
    return allocator.pinned_empty(n, dtype)


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
    from ..backends.cuda import allocator
    return allocator.is_pinned(t._buf)


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
        from ..tensor import Device
        if Device(device).type != "cuda":
            raise ValueError(f"CudaPrefetcher copies to a cuda device, got {device!r}")
        self.loader, self.device = loader, Device(device)
        self.copy_stream = None

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        from ..backends.cuda import device, streams
        compute = device.current_stream()
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
        from ..backends.cuda import streams
        try:
            host = next(batches)
        except StopIteration:
            return None
        streams.wait_event(self.copy_stream, streams.record_event(compute))
        on_device = self._to_device(host)
        return on_device, streams.record_event(self.copy_stream), host

    def _to_device(self, batch):
        from ..backends.cuda import streams

        def copy(t):
            if t.device.type != "cpu":
                return t
            host = t._buf if (is_pinned(t) and t.is_contiguous() and t._offset == 0
                              and t._buf.size == t.numel()) \
                else np.ascontiguousarray(t.detach().numpy()).reshape(-1)
            buf = streams.copy_to_device_async(host, self.copy_stream)
            return Tensor._dense(buf, t.shape, self.device)

        return map_tensors(copy, batch)
