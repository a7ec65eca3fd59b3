"""The DataLoader (``minigpu.utils.data.dataloader`` ~ ``torch.utils.data.dataloader``): batches
of a dataset in the order of a sampler, collated into tensors, in this process or in worker
processes (``_worker.py``), optionally in pinned memory (``pinning.py``).

As in PyTorch, the order comes from a sampler (``SequentialSampler``, or ``RandomSampler`` with
``shuffle=True``, or the one given), grouped by a ``BatchSampler`` (or the ``batch_sampler``
given); ``batch_size=None`` turns the grouping off (each sample converted, not stacked), and an
``IterableDataset`` is read as a stream and batched as it comes.
"""
from __future__ import annotations

import itertools
import numbers
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from ... import cuda
from ...backends import cpu
from ...ops import stack
from ...random import default_generator
from ...tensor import Tensor
from ._worker import WorkerInfo, _WorkerPool, get_worker_info  # noqa: F401 (torch's names here)
from .dataset import IterableDataset, TensorDataset
from .pinning import _pinned_empty, pin_memory
from .sampler import BatchSampler, RandomSampler, SequentialSampler


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


def default_convert(data):
    """A sample as it is when batching is off (``batch_size=None``): NumPy arrays and NumPy
    scalars become tensors, containers are walked (a tuple becomes a list, as in PyTorch);
    everything else is left alone."""
    if isinstance(data, (np.ndarray, np.generic)) and np.asarray(data).dtype.kind in "biuf":
        return Tensor._from_array(np.asarray(data), "cpu")
    if isinstance(data, Mapping):
        converted = {key: default_convert(value) for key, value in data.items()}
        try:
            return type(data)(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data


class DataLoader:
    """Iterate over a dataset in batches, with PyTorch's arguments and their rules.

    The indices come from ``sampler`` (default: ``RandomSampler(dataset, generator=generator)``
    with ``shuffle=True``, else ``SequentialSampler``), grouped by ``batch_sampler`` (default:
    ``BatchSampler(sampler, batch_size, drop_last)``). ``generator`` (default: minigpu's global
    generator, so ``manual_seed`` makes epochs reproducible) also gives each iterator its
    workers' base seed, drawn first, as in PyTorch. A :class:`TensorDataset` is batched with one
    gather per tensor instead of one lookup per sample (the batch is a list of tensors, as
    PyTorch's collate makes it). ``pin_memory=True`` returns the cpu tensors of each batch in
    pinned host memory (see :func:`pin_memory`; cuda tensors are left alone); without a cuda
    device it warns and does nothing, as PyTorch does.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device=""):
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
        if isinstance(dataset, IterableDataset):
            for name, value in (("shuffle", shuffle), ("sampler", sampler),
                                ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                     f"{name} option, but got {name}={value}")
            if num_workers:
                raise ValueError("DataLoader with IterableDataset: minigpu reads the stream in "
                                 "the main process only; use num_workers=0")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is "
                                 "mutually exclusive with drop_last")
        elif not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if sampler is None and not isinstance(dataset, IterableDataset):
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and sampler is not None:
            batch_sampler = BatchSampler(sampler, int(batch_size), bool(drop_last))
        self.dataset, self.sampler, self.batch_sampler = dataset, sampler, batch_sampler
        self.batch_size, self.drop_last, self.generator = batch_size, drop_last, generator
        self._auto_collation = batch_sampler is not None or (
            isinstance(dataset, IterableDataset) and batch_size is not None)
        self.collate_fn = collate_fn or (default_collate if self._auto_collation
                                         else default_convert)
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
        if isinstance(self.dataset, IterableDataset):
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)

    def _batches(self):
        """This epoch's work items: lists of indices (batching on) or single indices."""
        return iter(self.batch_sampler if self._auto_collation else self.sampler)

    def __getstate__(self):  # a spawned worker gets the loader without the pool itself
        return dict(vars(self), _workers=None)

    def _fetch(self, item, pinned=False):
        """The collated batch of the samples at the indices ``item`` (or the converted sample
        at the index ``item`` when batching is off), in the calling process."""
        if not self._auto_collation:
            batch = self.collate_fn(self.dataset[item])
        elif isinstance(self.dataset, TensorDataset) and self.collate_fn is default_collate:
            rows = np.asarray(item, dtype=np.int64)
            return [_take_rows(t, rows, pinned) for t in self.dataset.tensors]
        else:
            batch = self.collate_fn([self.dataset[int(i)] for i in item])
        return pin_memory(batch) if pinned else batch

    def _stream(self):
        """The batches of an IterableDataset: consecutive samples, collated."""
        samples = iter(self.dataset)
        while True:
            if self.batch_size is None:
                chunk = next(samples, _END)
                if chunk is _END:
                    return
            else:
                chunk = list(itertools.islice(samples, self.batch_size))
                if not chunk or (len(chunk) < self.batch_size and self.drop_last):
                    return
            batch = self.collate_fn(chunk)
            yield pin_memory(batch) if self.pin_memory else batch

    def __iter__(self):
        # As in PyTorch, every new iterator first draws the workers' base seed from the
        # loader's generator (with or without workers), then the epoch's order.
        if self.num_workers and self.persistent_workers and self._workers is not None \
                and self._workers.alive():
            return self._workers.epoch(self._batches())
        base_seed = int((self.generator or default_generator).numpy_rng()
                        .integers(0, 2 ** 63 - 1))
        if isinstance(self.dataset, IterableDataset):
            return self._stream()
        if self.num_workers == 0:
            return (self._fetch(item, self.pin_memory) for item in self._batches())
        pool = _WorkerPool(self, base_seed)
        if self.persistent_workers:
            self._workers = pool
        return pool.epoch(self._batches(), last=not self.persistent_workers)


_END = object()


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
