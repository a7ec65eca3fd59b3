"""PyTorch's legacy tensor types: ``FloatTensor``, ``DoubleTensor``, ``LongTensor``,
``BoolTensor`` (constructors, ``isinstance`` checks) and the type strings of ``Tensor.type()``.

Each is a dtype on the cpu device, as in PyTorch (``torch.cuda.FloatTensor`` is the cuda one):
``LongTensor([1, 2])`` copies data, ``FloatTensor(2, 3)`` makes an uninitialised 2x3 tensor,
and ``isinstance(x, FloatTensor)`` is true for a float32 cpu tensor. The strings are
``"minigpu.FloatTensor"`` / ``"minigpu.cuda.FloatTensor"``; ``Tensor.type`` also accepts
PyTorch's ``"torch."`` spellings.
"""
from __future__ import annotations

import numbers

from .tensor import Device, Size, Tensor, bool_, float32, float64, int64

NAMES = {float32: "FloatTensor", float64: "DoubleTensor", int64: "LongTensor", bool_: "BoolTensor"}
_DTYPES = {name: dtype for dtype, name in NAMES.items()}


class _LegacyType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None):
        from . import creation
        if device is not None and Device(device).type != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                               f"{Device(device).type} was passed")
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return creation.empty(*(args or (0,)), dtype=cls.dtype)  # FloatTensor(2, 3)
        if len(args) == 1:
            (data,) = args
            if isinstance(data, Size):  # FloatTensor(x.shape), as in PyTorch
                return creation.empty(data, dtype=cls.dtype)
            if isinstance(data, Tensor):
                if data.dtype != cls.dtype:
                    raise TypeError(f"expected {NAMES[cls.dtype]} (got {type_name(data)})")
                return data
            return creation.tensor(data, dtype=cls.dtype)
        raise TypeError(f"{cls.__name__}() takes sizes (ints) or one sequence of data, got "
                        f"{', '.join(type(a).__name__ for a in args)}")


def _legacy(dtype):
    return _LegacyType(NAMES[dtype], (), {"dtype": dtype, "__doc__": f"A {dtype} cpu tensor."})


FloatTensor, DoubleTensor, LongTensor, BoolTensor = (_legacy(d) for d in NAMES)


def type_name(t: Tensor) -> str:
    """``"minigpu.FloatTensor"``, ``"minigpu.cuda.LongTensor"``, ..."""
    cuda = "cuda." if t.device.type == "cuda" else ""
    return f"minigpu.{cuda}{NAMES[t.dtype]}"


def parse(spec):
    """(dtype, device or None) of a ``Tensor.type(spec)`` argument: a type string, a legacy
    type (cpu) or a dtype (device unchanged)."""
    if isinstance(spec, _LegacyType):
        return spec.dtype, Device("cpu")
    if isinstance(spec, str):
        prefix, _, name = spec.rpartition(".")
        if prefix in ("torch", "minigpu", "torch.cuda", "minigpu.cuda") and name in _DTYPES:
            return _DTYPES[name], Device("cuda" if prefix.endswith("cuda") else "cpu")
        raise ValueError(f"invalid type: '{spec}'")
    return spec, None


class memory_format:
    """PyTorch's memory formats. minigpu tensors are row-major: ``contiguous_format`` and
    ``preserve_format`` are accepted wherever PyTorch takes ``memory_format=``;
    ``channels_last`` (NHWC strides) is refused, naming the feature."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"minigpu.{self.name}"


contiguous_format, preserve_format = memory_format("contiguous_format"), memory_format(
    "preserve_format")
channels_last, channels_last_3d = memory_format("channels_last"), memory_format(
    "channels_last_3d")


def check_memory_format(what, fmt):
    """Refuse a memory format minigpu does not have (``None`` and the row-major ones pass)."""
    if fmt is None or fmt is contiguous_format or fmt is preserve_format:
        return
    if fmt is channels_last or fmt is channels_last_3d:
        raise NotImplementedError(f"{what}: memory_format={fmt!r} (channels-last strides) is not "
                                  f"supported by minigpu: its tensors are row-major; use "
                                  f"minigpu.contiguous_format")
    raise TypeError(f"{what}: memory_format must be a minigpu memory format, got {fmt!r}")
