"""``DistributedSampler`` (``minigpu.utils.data.distributed`` ~ ``torch.utils.data.distributed``):
the share of a dataset's indices that one of ``num_replicas`` processes visits.

minigpu has no process group (``torch.distributed``), so ``num_replicas`` and ``rank`` must be
given; a program written for torch runs as one of its ranks (``num_replicas=1, rank=0`` is the
whole dataset).
"""
from __future__ import annotations

import math

from ...random import Generator
from .sampler import Sampler


class DistributedSampler(Sampler):
    """Rank ``rank``'s indices: every ``num_replicas``-th index of the (shuffled, with the seed
    ``seed + epoch``) order, starting at ``rank``. The order is padded by repeating its start
    so that every rank gets the same count, or cut with ``drop_last`` (torch's rule). Call
    ``set_epoch(e)`` before each epoch for a new order."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            raise RuntimeError("DistributedSampler needs num_replicas= and rank=: minigpu has "
                               "no distributed process group to ask (torch.distributed); pass "
                               "e.g. num_replicas=1, rank=0 for a single process")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last, self.epoch = shuffle, seed, drop_last, 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            generator = Generator().manual_seed(self.seed + self.epoch)
            indices = generator.numpy_rng().permutation(n).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[:self.total_size]
        else:
            padding = self.total_size - n
            indices += (indices * math.ceil(padding / n))[:padding] if padding else []
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        self.epoch = epoch
