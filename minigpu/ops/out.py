"""torch's ``out=`` keyword on the public functions: ``mg.add(a, b, out=c)`` writes the sum into
``c`` and returns ``c``.

It is written once, here, for every op exported as ``minigpu.<name>`` whose ``@op`` line does
not say ``out=False``; the op itself (the Tensor method, ``minigpu.ops.<name>``) knows nothing
of it. As in PyTorch:

- ``out`` takes the result's shape: an ``out`` with no elements is resized silently, one with
  elements is resized with PyTorch's deprecation warning; otherwise the values are written into
  its elements, whatever its strides (a transposed ``out`` stays transposed);
- its dtype stays: the result must be castable to it (a float result into an integer ``out`` is
  refused with PyTorch's error), and its device must be the result's;
- under grad mode, no argument and not ``out`` may require grad: the write is not differentiable;
- an op returning several tensors (``max(x, dim)``, ``sort``) takes a tuple of as many.
"""
from __future__ import annotations

import functools
import warnings

from ..autograd import is_grad_enabled, no_grad
from ..tensor import Tensor
from .inplace import _dense_copy, _result_dtype, write_
from .registry import OPS


def exported_with_out() -> dict:
    """``{name: function}`` of the ops exported as ``minigpu.<name>``, each taking ``out=``
    unless its ``@op`` line says ``out=False``."""
    return {e.name: takes_out(e.fn) if e.out else e.fn for e in OPS.values() if e.mg}


def takes_out(fn):
    """``fn`` with torch's ``out=`` keyword (see the module docstring)."""
    @functools.wraps(fn)
    def with_out(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        if is_grad_enabled() and any(t.requires_grad for t in _tensors((args, kwargs, out))):
            raise RuntimeError(f"{fn.__name__}(): functions with out=... arguments don't support "
                               f"automatic differentiation, but one of the arguments requires "
                               f"grad.")
        result = fn(*args, **kwargs)
        if isinstance(result, Tensor):
            if not isinstance(out, Tensor):
                raise TypeError(f"{fn.__name__}(): argument 'out' must be Tensor, not "
                                f"{type(out).__name__}")
            return _write(out, result)
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise TypeError(f"{fn.__name__}(): argument 'out' must be a tuple of {len(result)} "
                            f"Tensors")
        written = [_write(o, r) for o, r in zip(out, result)]
        return result._make(written) if hasattr(result, "_make") else tuple(written)
    return with_out


def _tensors(obj):
    """The Tensors in ``obj``, looking into tuples, lists and dicts (``cat``'s list)."""
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        yield from _tensors(list(obj.values()))


def _write(out: Tensor, result: Tensor) -> Tensor:
    if out.device != result.device:
        raise RuntimeError(f"Expected out tensor to have device {result.device}, but got "
                           f"{out.device} instead")
    values = _result_dtype(result.detach(), out)
    with no_grad():
        if tuple(out.shape) == tuple(result.shape):
            write_(out, values)
            return out
        if out.numel() > 0:
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape "
                          f"{list(result.shape)}. This behavior is deprecated, and in a future "
                          f"PyTorch release outputs will not be resized unless they have zero "
                          f"elements.", UserWarning, stacklevel=3)
        out.data = _dense_copy(values)
        out._version_counter[0] += 1
    return out
