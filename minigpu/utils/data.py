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

from .. import backends, cuda
from ..backends import cpu
from ..ops import stack
from ..random import default_generator, manual_seed
from ..tensor import Device, Tensor


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
                 collate_fn=None, generator=None, pin_memory=False, num_workers=0,
                 timeout=0, worker_init_fn=None, multiprocessing_context=None, *,
                 prefetch_factor=None, persistent_workers=False):
        if not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing. let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last = shuffle, drop_last
        self.collate_fn = collate_fn or default_collate
        self.generator = generator or default_generator
        self.num_workers, self.timeout = int(num_workers), timeout
        self.worker_init_fn, self.multiprocessing_context = worker_init_fn, multiprocessing_context
        self.prefetch_factor = 2 if num_workers and prefetch_factor is None else prefetch_factor
        self.persistent_workers = persistent_workers
        self._workers = None  # the live _WorkerPool when persistent_workers
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

    def __getstate__(self):  # a spawned worker gets the loader without the pool itself
        return dict(vars(self), _workers=None)

    def _fetch(self, chunk, pinned=False):
        """The collated batch of the samples at ``chunk`` (in the calling process)."""
        if isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate:
            return [_take_rows(t, chunk, pinned) for t in self.dataset.tensors]
        batch = self.collate_fn([self.dataset[int(i)] for i in chunk])
        return pin_memory(batch) if pinned else batch

    def __iter__(self):
        # As in PyTorch, every new iterator first draws the workers' base seed from the
        # loader's generator (with or without workers), then the epoch's order.
        if self.num_workers and self.persistent_workers and self._workers is not None \
                and self._workers.alive():
            return self._workers.epoch(self._batches())
        base_seed = int(self.generator.numpy_rng().integers(0, 2 ** 63 - 1))
        if self.num_workers == 0:
            return (self._fetch(chunk, self.pin_memory) for chunk in self._batches())
        pool = _WorkerPool(self, base_seed)
        if self.persistent_workers:
            self._workers = pool
        return pool.epoch(self._batches(), last=not self.persistent_workers)


class WorkerInfo:
    """What :func:`get_worker_info` tells the code running in a worker process: its ``id`` (0 ..
    ``num_workers`` - 1), ``num_workers``, the ``seed`` its generators were seeded with, and its
    copy of the ``dataset``."""

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={self.dataset!r})")


_worker_info = None


def get_worker_info():
    """In a DataLoader worker process, its :class:`WorkerInfo`; in the main process, None."""
    return _worker_info


class _WorkerFailure:
    """An exception raised in a worker, carried to the main process as text."""

    def __init__(self, worker_id, exc):
        import traceback
        self.worker_id, self.type = worker_id, type(exc)
        self.text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))

    def reraise(self):
        message = (f"Caught {self.type.__name__} in DataLoader worker process "
                   f"{self.worker_id}.\nOriginal {self.text}")
        try:
            error = self.type(message)
        except Exception:  # an exception class whose constructor takes other arguments
            error = RuntimeError(message)
        raise error


def _ship(batch):
    """The batch with its tensors as NumPy arrays, to cross the process boundary (and back)."""
    return map_tensors(lambda t: _Shipped(t.detach().numpy()), batch)


class _Shipped:
    def __init__(self, array):
        self.array = array


def _unship(batch):
    if isinstance(batch, _Shipped):
        return Tensor._from_array(batch.array, "cpu")
    if isinstance(batch, dict):
        return {k: _unship(v) for k, v in batch.items()}
    if isinstance(batch, (tuple, list)):
        return type(batch)(_unship(v) for v in batch)
    return batch


def _worker_loop(loader, worker_id, seed, tasks, results, parent):
    """One worker process: seed its generators, run ``worker_init_fn``, then turn batches of
    indices from ``tasks`` into collated batches on ``results`` until told to stop (None) or
    until the main process is gone."""
    global _worker_info
    import os
    import queue
    import random

    try:
        random.seed(seed)
        manual_seed(seed)
        np.random.seed(np.random.SeedSequence([seed % 2 ** 63, worker_id]).generate_state(1))
        _worker_info = WorkerInfo(worker_id, loader.num_workers, seed, loader.dataset)
        failure = None
        if loader.worker_init_fn is not None:
            try:
                loader.worker_init_fn(worker_id)
            except Exception as exc:  # reported with the first batch asked of this worker
                failure = _WorkerFailure(worker_id, exc)
        while True:
            try:
                task = tasks.get(timeout=1.0)
            except queue.Empty:
                if os.getppid() != parent:  # the main process died: nobody will ask again
                    return
                continue
            if task is None:
                return
            epoch, index, chunk = task
            if failure is not None:
                results.put((epoch, index, failure))
                continue
            try:
                batch = _ship(loader._fetch(chunk))
            except Exception as exc:
                batch = _WorkerFailure(worker_id, exc)
            results.put((epoch, index, batch))
    except KeyboardInterrupt:  # Ctrl-C reaches the whole process group: the main process
        pass                   # handles it and shuts the workers down


class _WorkerPool:
    """``num_workers`` processes loading batches for one DataLoader.

    The main process keeps up to ``prefetch_factor`` batches per worker in flight, handing
    batch i to worker ``i % num_workers``; results come back on one queue in any order and
    are handed out in order. Each worker seeds Python's ``random`` and minigpu's generator
    with ``base_seed + worker_id`` (``base_seed`` drawn from the loader's generator by the
    iterator that starts the pool) and NumPy's from the pair. Workers are daemon processes started with
    ``multiprocessing_context`` (default: the platform's, ``fork`` on Linux); they are
    stopped (asked, then terminated if they do not exit) when an epoch ends without
    ``persistent_workers``, when a worker's error is raised, when the iteration is abandoned
    (``break``, Ctrl-C: the iterator's ``close`` / garbage collection) and at interpreter exit.
    """

    def __init__(self, loader, base_seed):
        import multiprocessing
        import os
        self.loader, self.epoch_count = loader, 0
        context = loader.multiprocessing_context
        if context is None or isinstance(context, str):
            context = multiprocessing.get_context(context)
        self.results = context.Queue()
        self.tasks, self.processes = [], []
        for worker_id in range(loader.num_workers):
            tasks = context.Queue()
            process = context.Process(
                target=_worker_loop, daemon=True,
                args=(loader, worker_id, base_seed + worker_id, tasks, self.results,
                      os.getpid()))
            process.start()
            self.tasks.append(tasks)
            self.processes.append(process)

    def alive(self):
        return all(p.is_alive() for p in self.processes)

    def epoch(self, chunks, last=False):
        """A generator over one epoch's batches (``last``: shut down when it is over)."""
        self.epoch_count += 1
        try:
            yield from self._run(self.epoch_count, enumerate(chunks))
        except GeneratorExit:  # abandoned (break): persistent workers stay for the next epoch
            raise
        except BaseException:  # a worker's error, a dead worker, Ctrl-C in the main process
            self.shutdown()
            raise
        finally:
            if last:
                self.shutdown()

    def _run(self, epoch, chunks):
        loader, pending, sent, received = self.loader, {}, 0, 0
        in_flight = loader.prefetch_factor * loader.num_workers
        exhausted = False
        while True:
            while not exhausted and sent - received < in_flight:
                item = next(chunks, None)
                if item is None:
                    exhausted = True
                    break
                index, chunk = item
                self.tasks[index % loader.num_workers].put((epoch, index, chunk))
                sent += 1
            if received == sent:
                return
            while received not in pending:
                got_epoch, index, batch = self._get()
                if got_epoch == epoch:  # (results of an abandoned epoch are dropped)
                    pending[index] = batch
            batch = pending.pop(received)
            received += 1
            if isinstance(batch, _WorkerFailure):
                batch.reraise()
            batch = _unship(batch)
            yield pin_memory(batch) if loader.pin_memory else batch

    def _get(self):
        import queue
        import time
        deadline = time.monotonic() + self.loader.timeout if self.loader.timeout else None
        while True:
            try:
                return self.results.get(timeout=0.1)
            except queue.Empty:
                dead = [p.pid for p in self.processes if not p.is_alive()]
                if dead:
                    raise RuntimeError(f"DataLoader worker (pid(s) "
                                       f"{', '.join(map(str, dead))}) exited unexpectedly")
                if deadline is not None and time.monotonic() > deadline:
                    raise RuntimeError(f"DataLoader timed out after {self.loader.timeout} "
                                       f"seconds")

    def shutdown(self):
        """Ask every worker to stop, wait a little, terminate the ones still running."""
        if not self.processes:
            return
        for tasks, process in zip(self.tasks, self.processes):
            if process.is_alive():
                tasks.put(None)
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()
        for q in self.tasks + [self.results]:
            q.cancel_join_thread()
            q.close()
        self.processes, self.tasks = [], []
        if self.loader._workers is self:
            self.loader._workers = None

    def __del__(self):
        if self.processes:
            self.shutdown()


def _cuda_available():
    return cuda.is_available()


def _take_rows(t: Tensor, rows: np.ndarray, pinned=False) -> Tensor:
    """t[rows] for a host index array: a host-side gather on cpu (straight into a pinned
    buffer when ``pinned``), index_select on cuda."""
    if t.device.type != "cpu":
        return t[Tensor._from_array(rows.astype(np.int64), t.device)]
    source = cpu.array(t._view())  # a NumPy view of the dataset: no copy
    shape = (len(rows),) + tuple(t.shape[1:])
    n = int(np.prod(shape, dtype=np.int64))
    out = _pinned_empty(n, t.dtype) if pinned else np.empty(n, t.dtype)
    np.take(source, rows, axis=0, out=out.reshape(shape))
    return Tensor._dense(out, shape, "cpu")


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
