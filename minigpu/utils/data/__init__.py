"""Datasets and batching (``minigpu.utils.data`` ~ ``torch.utils.data``), with torch's
submodules: ``dataset`` (Dataset, TensorDataset, Subset, ConcatDataset, random_split, ...),
``sampler`` (the orders a DataLoader visits), ``distributed`` (DistributedSampler),
``dataloader`` (DataLoader, default_collate, get_worker_info); ``pinning`` holds pinned
memory and :class:`CudaPrefetcher`, ``_worker`` the worker processes.
"""
from .dataloader import DataLoader, default_collate, default_convert
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,
                      TensorDataset, random_split)
from .distributed import DistributedSampler
from ._worker import WorkerInfo, get_worker_info
from .pinning import CudaPrefetcher, is_pinned, map_tensors, pin_memory
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "CudaPrefetcher", "DataLoader",
           "Dataset", "DistributedSampler", "IterableDataset", "RandomSampler", "Sampler",
           "SequentialSampler", "Subset", "SubsetRandomSampler", "TensorDataset",
           "WeightedRandomSampler", "WorkerInfo", "default_collate", "default_convert",
           "get_worker_info", "is_pinned", "map_tensors", "pin_memory", "random_split"]
