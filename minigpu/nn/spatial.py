"""``interpolate`` (nearest, linear, bilinear), ``pad`` and ``one_hot``: compositions of ops.

Resampling is separable: each spatial axis is resampled on its own, by gathering the source
rows with ``index_select`` (one kernel; its backward is an ``index_add``). Nearest gathers one
source row per output row; (bi)linear gathers the two neighbours ``i0``, ``i1`` and blends them,
``w0 * x[i0] + w1 * x[i1]``, with per-row weights broadcast along the other axes. The indices
and weights depend only on the sizes, so they are computed once on the host, by PyTorch's
formulas (``area_pixel_compute_source_index``):

- align_corners=False: ``src = max((dst + 0.5) * scale - 0.5, 0)``, ``scale = in / out``
  (or ``1 / scale_factor``);
- align_corners=True: ``src = dst * (in - 1) / (out - 1)``: the corner pixels line up;
- nearest: ``src = min(floor(dst * scale), in - 1)``.

``pad`` builds every mode from the same gather (replicate, reflect, circular: an index map per
padded axis) or from ``cat`` with constant blocks (constant).
"""
from __future__ import annotations

import math

import numpy as np

from .. import creation, ops
from ..tensor import Tensor, int64

_MODES = {"nearest": None, "linear": 3, "bilinear": 4}


def _source_scale(n_in, n_out, scale_factor, align_corners):
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale_factor if scale_factor is not None else n_in / n_out


def _gather(x, dim, index):
    return ops.index_select(x, dim, creation.tensor(index, dtype=int64, device=x.device))


def _weights(x, dim, w):
    shape = [1] * x.ndim
    shape[dim] = len(w)
    return creation.tensor(w.reshape(shape), dtype=x.dtype, device=x.device)


def _resample_axis(x, dim, n_out, scale_factor, mode, align_corners):
    n_in = x.shape[dim]
    scale = _source_scale(n_in, n_out, scale_factor, align_corners)
    dst = np.arange(n_out, dtype=np.float64)
    if mode == "nearest":
        return _gather(x, dim, np.minimum(np.floor(dst * scale).astype(np.int64), n_in - 1))
    src = dst * scale if align_corners else np.maximum((dst + 0.5) * scale - 0.5, 0.0)
    i0 = np.minimum(src.astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w1 = src - i0
    return (_gather(x, dim, i0) * _weights(x, dim, 1.0 - w1)
            + _gather(x, dim, i1) * _weights(x, dim, w1))


def _per_axis(value, n, what):
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ValueError(f"Input and {what} must have the same number of spatial "
                             f"dimensions, but got input with spatial dimensions of "
                             f"{n} and {what} {tuple(value)}.")
        return tuple(value)
    return (value,) * n


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """``torch.nn.functional.interpolate`` for modes ``nearest`` (3-D and 4-D input),
    ``linear`` (3-D) and ``bilinear`` (4-D), with ``size`` or ``scale_factor``."""
    if mode not in _MODES:
        raise NotImplementedError(f"minigpu's interpolate supports modes nearest, linear and "
                                  f"bilinear, got mode={mode!r}")
    if input.ndim not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D and 4D input Tensors supported (got "
                                  f"{input.ndim}D) for the modes: nearest | linear | bilinear "
                                  f"(got {mode})")
    if _MODES[mode] not in (None, input.ndim):
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{_MODES[mode]}D input")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if antialias:
        raise NotImplementedError("minigpu's interpolate does not support antialias=True")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    spatial = input.ndim - 2
    in_sizes = input.shape[2:]
    sizes = _per_axis(size, spatial, "output_size")
    factors = _per_axis(scale_factor, spatial, "scale_factor")
    if sizes is None:
        sizes = tuple(int(math.floor(n * float(f))) for n, f in zip(in_sizes, factors))
        if recompute_scale_factor:
            factors = None
    if min(sizes) < 1:
        raise ValueError(f"interpolate: the output size {tuple(sizes)} must be positive")
    x = input
    for axis in range(spatial):
        f = None if factors is None else float(factors[axis])
        x = _resample_axis(x, 2 + axis, int(sizes[axis]), f, mode, bool(align_corners))
    return x


def pad(input, pad, mode="constant", value=None):
    """``torch.nn.functional.pad``: ``pad = (left_last, right_last, left_2nd_last, ...)``;
    negative amounts crop. Modes constant (``value``, default 0), replicate, reflect and
    circular."""
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length must be divisible by 2 and at most twice the "
                           f"number of dimensions of the input ({input.ndim}), got "
                           f"{len(pad)}")
    if mode not in ("constant", "replicate", "reflect", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if mode != "constant" and value is not None:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    x = input
    for k in range(len(pad) // 2):
        dim, left, right = x.ndim - 1 - k, int(pad[2 * k]), int(pad[2 * k + 1])
        n = x.shape[dim]
        if mode == "constant":
            x = _pad_constant(x, dim, left, right, 0 if value is None else value)
            continue
        if mode == "reflect" and (left >= n or right >= n):
            raise RuntimeError(f"Padding size should be less than the corresponding input "
                               f"dimension, but got: padding ({left}, {right}) at dimension "
                               f"{dim} of input {list(input.shape)}")
        if mode == "circular" and (left > n or right > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        x = _gather(x, dim, _pad_index(np.arange(-left, n + right), n, mode))
    return x


def _pad_index(i, n, mode):
    """Source index of every padded position ``i`` (-left .. n+right-1) of an axis of n."""
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    if mode == "circular":
        return i % n
    period = 2 * (n - 1)  # reflect: ... 2 1 | 0 1 2 ... n-1 | n-2 ...
    i = np.abs(i) % period if period else np.zeros_like(i)
    return np.where(i < n, i, period - i)


def _pad_constant(x, dim, left, right, value):
    if left < 0:
        x = ops.narrow(x, dim, -left, x.shape[dim] + left)
    if right < 0:
        x = ops.narrow(x, dim, 0, x.shape[dim] + right)
    parts = [x]
    for amount, where in ((left, 0), (right, len(parts) + 1)):
        if amount > 0:
            shape = list(x.shape)
            shape[dim] = amount
            parts.insert(where, creation.full(shape, value, dtype=x.dtype, device=x.device))
    return ops.cat(parts, dim) if len(parts) > 1 else x


def one_hot(tensor, num_classes=-1):
    """``torch.nn.functional.one_hot``: an int64 tensor of shape ``(*tensor.shape, C)`` with a
    1 at each index; ``C = max + 1`` when ``num_classes`` is -1."""
    if not isinstance(tensor, Tensor) or tensor.dtype != int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if tensor.numel() and int(tensor.min().item()) < 0:
        raise RuntimeError("Class values must be non-negative.")
    if num_classes == -1:
        if not tensor.numel():
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(tensor.max().item()) + 1
    elif tensor.numel() and int(tensor.max().item()) >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    classes = creation.arange(int(num_classes), device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).long()
