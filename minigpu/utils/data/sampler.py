"""Samplers (``minigpu.utils.data.sampler`` ~ ``torch.utils.data.sampler``): the order in which
a DataLoader visits a map-style dataset's indices, and how they are grouped into batches.

The random ones draw from a ``generator=`` (an ``mg.Generator``; default: minigpu's global
generator, so ``manual_seed`` makes them reproducible), one fresh NumPy stream per epoch taken
from it. They have torch's semantics (a permutation, draws with replacement, weighted draws),
not torch's numbers: torch's ``randperm`` and ``multinomial`` run its own Mersenne Twister,
which minigpu's counter-based generator does not reproduce (see docs/pytorch_compat.md).
:class:`SequentialSampler` and :class:`BatchSampler` are deterministic and give torch's exact
indices.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...random import default_generator
from ...tensor import Tensor


def _positive_int(value, what):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{what} should be a positive integer value, but got {what}={value}")
    return int(value)


def _rng(generator):
    """This epoch's NumPy stream, taken from ``generator`` (or the global one)."""
    return (generator or default_generator).numpy_rng()


class Sampler:
    """An iterable over indices (or lists of indices, for a batch sampler)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


_DRAWS_AT_ONCE = 32  # draws with replacement are made this many at a time, as torch's are


class RandomSampler(Sampler):
    """A random permutation of the indices; with ``replacement=True``, ``num_samples``
    independent uniform draws. Without replacement, ``num_samples`` larger than the dataset
    gives whole permutations one after the other, then part of one (torch's rule)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        _positive_int(self.num_samples, "num_samples")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        # drawn as they are consumed (torch's trainers ask for num_samples=int(1e10))
        n, rng = len(self.data_source), _rng(self.generator)
        for start in range(0, self.num_samples, _DRAWS_AT_ONCE if self.replacement else n):
            left = self.num_samples - start
            if self.replacement:
                yield from rng.integers(0, n, size=min(_DRAWS_AT_ONCE, left)).tolist()
            else:
                yield from rng.permutation(n)[:left].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        order = _rng(self.generator).permutation(len(self.indices))
        return (self.indices[i] for i in order.tolist())

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probability proportional to ``weights`` (with
    replacement by default; without it, no index twice, as ``torch.multinomial``)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        self.num_samples = _positive_int(num_samples, "num_samples")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        array = weights.detach().numpy() if isinstance(weights, Tensor) else weights
        self.weights = np.asarray(array, dtype=np.float64)
        if self.weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(self.weights.shape)}")
        self.replacement, self.generator = replacement, generator

    def __iter__(self):
        w = self.weights
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise RuntimeError("invalid multinomial distribution (encountering probability "
                               "entry < 0, inf or nan)")
        if w.sum() <= 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if not self.replacement and self.num_samples > np.count_nonzero(w):
            raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without "
                               f"replacement ({self.num_samples} samples, "
                               f"{np.count_nonzero(w)} nonzero weights)")
        draws = _rng(self.generator).choice(len(w), size=self.num_samples,
                                            replace=self.replacement, p=w / w.sum())
        return iter(draws.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` consecutive indices of ``sampler``; the last one shorter, or
    dropped with ``drop_last``."""

    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = _positive_int(batch_size, "batch_size")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler, self.drop_last = sampler, drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)
