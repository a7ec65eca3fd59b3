"""Helpers every op family uses: wrapping a primitive's output buffer, device checks, dtype
promotion, uniform draws."""
from __future__ import annotations

import math

from .. import backends, dtypes
from ..random import default_generator
from ..tensor import Tensor, float32


def new(buf, shape, like: Tensor) -> Tensor:
    """A dense tensor on ``like``'s device holding a primitive's output buffer."""
    return Tensor._result(buf, shape, like.device)


def filled(like: Tensor, shape, value) -> Tensor:
    """A tensor of ``shape`` filled with ``value``, of ``like``'s dtype and device."""
    return Tensor._full(tuple(shape), value, like.dtype, like.device)


def uniform(shape, dtype, device, generator=None) -> Tensor:
    """Uniform draws in [0, 1) of ``shape`` on ``device`` from ``generator`` (the global
    counter-based one by default): the same seed gives the same numbers on cpu and cuda."""
    n = math.prod(shape)
    seed, offset = (generator or default_generator).take(n)
    return Tensor._dense(backends.get(device.type).random_uniform(n, seed, offset, dtype),
                         shape, device)


def check_same_device(*tensors):
    first = None
    for t in tensors:
        if isinstance(t, Tensor):
            if first is None:
                first = t.device.type
            elif t.device.type != first:
                break
    else:  # all on one device (a loop rather than a set: this runs for every op)
        return
    devices = {t.device.type for t in tensors if isinstance(t, Tensor)}
    if len(devices) > 1:
        raise RuntimeError("Expected all tensors to be on the same device, but found at least "
                           f"two devices, {' and '.join(sorted(devices))}!")


def promote(a: Tensor, b: Tensor):
    """Cast two tensors to their common dtype, PyTorch's ``result_type`` (``dtypes.py``: the
    higher category wins, then the wider type; a 0-d tensor counts only when it is of a higher
    category than a tensor with dimensions)."""
    if a.dtype == b.dtype:
        return a, b
    target = dtypes.result_type(a, b)
    return (a if a.dtype == target else a.to(target)), (b if b.dtype == target else b.to(target))


def as_float(x: Tensor) -> Tensor:
    """Integer and bool tensors become float32 before float math (like torch.exp(int))."""
    return x if x.dtype.kind == "f" else x.to(float32)
