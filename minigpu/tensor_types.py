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

from . import creation
from .ops.registry import method
from .tensor import Device, Size, Tensor, bool_, float32, float64, int64

NAMES = {float32: "FloatTensor", float64: "DoubleTensor", int64: "LongTensor", bool_: "BoolTensor"}
_DTYPES = {name: dtype for dtype, name in NAMES.items()}


class _LegacyType(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None):
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


def tensor_type(self, dtype=None, non_blocking=False):
    """``x.type()``: the type string (``"minigpu.FloatTensor"``, ``"minigpu.cuda.
    LongTensor"``); ``x.type(t)``: ``x`` converted to ``t``, a dtype, a legacy type
    (``mg.LongTensor``) or a type string (``"torch.cuda.FloatTensor"`` too)."""
    if dtype is None:
        return type_name(self)
    dtype, device = parse(dtype)
    return self.to(dtype) if device is None else self.to(device, dtype)


method(tensor_type, "type")
