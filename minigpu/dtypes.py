"""PyTorch's dtypes as NumPy dtypes, their torch names, and PyTorch's type promotion.

A minigpu dtype *is* a ``numpy.dtype`` (``mg.float16 == np.float16``), so buffers, kernels and
NumPy interop need no translation. The set is PyTorch's common one: bool, uint8, int8, int16,
int32, int64, float16, float32, float64.

bfloat16 is left out on purpose: the maintained NumPy extension type (``ml_dtypes.bfloat16``)
works for NumPy, but Numba can type neither it nor its arithmetic, so no cuda kernel could
compile for it, and a dtype that works on one device only would be a silent difference.

Promotion follows PyTorch (``torch.result_type``), not NumPy. Operands fall in three
categories, bool < integer < floating; within a category the wider type wins (uint8 with int8
needs int16); across categories the higher category's dtype wins as it is (int64 with float16
gives float16, where NumPy gives float64). Operands also have a priority: tensors with
dimensions decide, unless a 0-d tensor or a Python scalar is of a higher category. A Python
float then brings the default dtype (float32), a Python int int64.
"""
from __future__ import annotations

import numbers
import threading

import numpy as np

bool_ = np.dtype(np.bool_)
uint8 = np.dtype(np.uint8)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)

DTYPES = (bool_, uint8, int8, int16, int32, int64, float16, float32, float64)
"""Every dtype a tensor may have, narrowest first within each category."""

TORCH_NAMES = {
    bool_: "bool", uint8: "uint8", int8: "int8", int16: "int16", int32: "int32",
    int64: "int64", float16: "float16", float32: "float32", float64: "float64",
}
"""The name ``torch.<name>`` has for each dtype (what ``repr`` and errors print)."""

SCALAR_NAMES = {
    bool_: "Bool", uint8: "Byte", int8: "Char", int16: "Short", int32: "Int", int64: "Long",
    float16: "Half", float32: "Float", float64: "Double",
}
"""PyTorch's ScalarType name of each dtype, as its error messages print them (``'Long'``)."""

DEFAULT_FLOAT = float32
"""What a Python float becomes (PyTorch's default dtype)."""

_SUPPORTED = frozenset(DTYPES)
_BY_KIND = {"b": 0, "u": 1, "i": 1, "f": 2}


def widen_bfloat16(raw: bytes, big_endian: bool = False) -> np.ndarray:
    """bfloat16 values stored in a checkpoint (raw bytes) as float32, exactly: a bfloat16 is
    the top half of a float32, so its 16 bits shifted into place are that float32."""
    bits = np.frombuffer(raw, dtype=">u2" if big_endian else "<u2").astype("<u4")
    return (bits << 16).view("<f4").astype(np.float32)


def category(dtype) -> int:
    """0 for bool, 1 for the integers, 2 for the floating types."""
    return _BY_KIND[dtype.kind]


def to_dtype(spec):
    """A supported ``numpy.dtype`` from a dtype, a NumPy type or Python's ``bool``, ``int``,
    ``float`` (as PyTorch reads them: bool, int64, float32); None stays None. Anything else
    raises a TypeError naming what is supported."""
    if spec is None:
        return None
    if spec is bool:
        return bool_
    if spec is int:
        return int64
    if spec is float:
        return DEFAULT_FLOAT
    try:
        d = np.dtype(spec)
    except TypeError:
        raise TypeError(f"{spec!r} is not a dtype") from None
    if d not in _SUPPORTED:
        names = ", ".join(TORCH_NAMES[t] for t in DTYPES)
        raise TypeError(f"minigpu has no tensors of dtype {d} (supported: {names})")
    return d


def promote_types(a, b):
    """The smallest dtype both ``a`` and ``b`` convert to, as ``torch.promote_types``."""
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    return np.promote_types(a, b)  # within a category PyTorch and NumPy agree


def scalar_dtype(value):
    """The dtype a Python (or NumPy) scalar brings to promotion: bool, int64 or float32."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, numbers.Integral):
        return int64
    if isinstance(value, numbers.Real):
        return DEFAULT_FLOAT
    raise TypeError(f"unsupported scalar type {type(value).__name__}")


def _combine(higher, lower):
    """PyTorch's rule for two priority groups: the higher-priority group's dtype, unless the
    lower one is of a higher category (then the two promote)."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher == bool_ or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def result_type(*operands):
    """The dtype of an op on ``operands`` (tensors and Python scalars), as
    ``torch.result_type``: tensors with dimensions decide; a 0-d tensor, then a Python scalar,
    changes the result only when it is of a higher category."""
    dims = zero_dim = scalars = None
    for x in operands:
        dtype = getattr(x, "dtype", None)
        if dtype is None or isinstance(x, np.generic):
            d = scalar_dtype(x)
            scalars = d if scalars is None else promote_types(scalars, d)
        elif len(x.shape) == 0:
            zero_dim = dtype if zero_dim is None else promote_types(zero_dim, dtype)
        else:
            dims = dtype if dims is None else promote_types(dims, dtype)
    if dims is None and zero_dim is None and scalars is None:
        raise TypeError("result_type() needs at least one operand")
    return _combine(dims, _combine(zero_dim, scalars))


class _AutocastState(threading.local):
    """Per thread, as in PyTorch: ``{device type: dtype}`` of the autocast regions entered."""

    def __init__(self):
        self.dtypes = {}


_autocast = _AutocastState()

AUTOCAST_LOWER = frozenset({"matmul", "linear", "conv2d", "conv_transpose2d"})
"""The ops an autocast region runs in its lower precision (from PyTorch's CUDA list; ``mm``,
``bmm`` and ``conv1d`` reach them)."""

AUTOCAST_FLOAT32 = frozenset({
    "sum", "softmax", "log_softmax", "layer_norm", "cross_entropy", "nll_loss", "mse_loss",
    "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "binary_cross_entropy_with_logits"})
"""The ops an autocast region runs in float32 (from PyTorch's CUDA list: reductions, softmax,
norms and losses; ``mean``, ``group_norm`` and the norms reach ``sum``). Each name here is one
an op passes to :func:`autocast_cast`."""


def autocast_dtype(device_type):
    """The dtype of the innermost autocast region for ``device_type``, or None outside one."""
    return _autocast.dtypes.get(device_type)


def autocast_cast(op, *tensors):
    """``tensors`` cast as an autocast region asks for ``op``: float16/float32 tensors to the
    region's dtype for the ops of ``AUTOCAST_LOWER``, to float32 for those of ``AUTOCAST_FLOAT32``; the
    same tensors outside a region (the common case: one dict lookup)."""
    if not _autocast.dtypes:
        return tensors
    first = next((t for t in tensors if hasattr(t, "device")), None)
    low = first is not None and _autocast.dtypes.get(first.device.type)
    if not low:
        return tensors
    target = low if op in AUTOCAST_LOWER else float32 if op in AUTOCAST_FLOAT32 else None
    if target is None:
        return tensors
    return tuple(t.to(target) if hasattr(t, "dtype") and t.dtype in (float16, float32)
                 and t.dtype != target else t for t in tensors)  # float64 stays, as in torch
