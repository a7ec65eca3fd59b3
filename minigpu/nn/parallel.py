"""``minigpu.nn.parallel``: what ``torch.nn.parallel`` does on a single device.

minigpu runs on one device (``cpu``, or ``cuda:0``). ``DataParallel`` over at most that one
device is what PyTorch does there too: it wraps the module (state_dict keys get the
``module.`` prefix) and calls it on the whole batch. Splitting a batch over several GPUs
(``device_ids`` of more than one device) and ``DistributedDataParallel`` (several processes)
are multi-device features minigpu does not have: they raise ``NotImplementedError`` naming the
feature. A program that outgrows one GPU moves to PyTorch itself for that part
(``minigpu.to_torch(model)``, ``minigpu/handover.py``).
"""
from __future__ import annotations

from ..tensor import Device
from .module import Module

_SINGLE = ("minigpu is single-device ('cpu' or 'cuda:0'); multi-GPU training needs PyTorch "
           "itself: hand the model over with minigpu.to_torch(model) and continue there")


def _check_device_ids(feature, device_ids, output_device):
    """The device ids as ints; more than one device (or one other than 0) is refused."""
    ids = [] if device_ids is None else [d if isinstance(d, int) else _index(d)
                                         for d in device_ids]
    wanted = set(ids) | ({_index(output_device)} if output_device is not None else set())
    if len(ids) > 1 or wanted - {0}:
        raise NotImplementedError(f"{feature} over device_ids={list(device_ids)}: {_SINGLE}")
    return ids


def _index(device):
    if isinstance(device, int):
        return device
    if isinstance(device, Device):
        return 0
    _, _, index = str(device).partition(":")
    if index and not index.isdigit():
        raise RuntimeError(f"Invalid device string: '{device}'")
    return int(index) if index else 0


class DataParallel(Module):
    """``nn.DataParallel(module)`` on one device: ``forward`` calls ``module`` on the batch."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.device_ids = _check_device_ids("DataParallel", device_ids, output_device)
        self.output_device = self.device_ids[0] if self.device_ids else None
        self.dim = dim
        self.module = module

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0,
                  module_kwargs=None):
    """``nn.parallel.data_parallel``: ``module(*inputs, **module_kwargs)`` on one device."""
    _check_device_ids("data_parallel", device_ids, output_device)
    inputs = inputs if isinstance(inputs, tuple) else (inputs,)
    return module(*inputs, **(module_kwargs or {}))


class DistributedDataParallel(Module):
    """Not in minigpu: it needs several processes and devices (``torch.distributed``)."""

    def __init__(self, module, *args, **kwargs):
        raise NotImplementedError(f"DistributedDataParallel (torch.nn.parallel."
                                  f"DistributedDataParallel, torch.distributed): {_SINGLE}")


__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
