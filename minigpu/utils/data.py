"""Datasets and batching (``minigpu.utils.data`` ~ ``torch.utils.data``)."""
from __future__ import annotations

import numbers

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
    """Stack a list of samples (tuples of tensors / arrays / numbers) into batch tensors."""
    first = samples[0]
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate([s[i] for s in samples]) for i in range(len(first)))
    if isinstance(first, Tensor):
        from ..ops import stack
        return stack(samples)
    array = np.stack([np.asarray(s) for s in samples])
    if isinstance(first, numbers.Integral) or array.dtype.kind in "iu":
        array = array.astype(np.int64)
    elif array.dtype.kind == "f" and array.dtype != np.float64:
        array = array.astype(np.float32)
    return Tensor._from_array(array, "cpu")


class DataLoader:
    """Iterate over a dataset in batches.

    ``shuffle`` draws a permutation per epoch from ``generator`` (default: minigpu's global
    generator, so ``manual_seed`` makes epochs reproducible). A :class:`TensorDataset` is
    batched with one ``index_select`` per tensor instead of one lookup per sample.
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
        self.pin_memory = pin_memory

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
                yield tuple(_take_rows(t, chunk) for t in self.dataset.tensors)
            else:
                yield self.collate_fn([self.dataset[int(i)] for i in chunk])


def _take_rows(t: Tensor, rows: np.ndarray) -> Tensor:
    """t[rows] for a host index array: host-side slicing on cpu, index_select on cuda."""
    if t.device.type == "cpu":
        return Tensor._from_array(t.numpy()[rows], "cpu")
    return t[Tensor._from_array(rows.astype(np.int64), t.device)]
