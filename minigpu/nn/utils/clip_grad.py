"""Gradient clipping, as ``torch.nn.utils.clip_grad_norm_`` / ``clip_grad_value_``.

``clip_grad_norm_`` computes the norm of every gradient, then the norm of those norms (which
equals the norm of all gradients concatenated; for the 2-norm, the square root of the summed
squares of every gradient, one map and one reduction each), and scales every gradient in place by
``min(1, max_norm / (total_norm + 1e-6))``. The coefficient stays a 0-d tensor on the
gradients' device, so clipping never waits for the device (PyTorch's ``error_if_nonfinite``
check is the one exception: it reads the norm on the host).
"""
from __future__ import annotations

import math

from ...autograd import no_grad
from ...backends.contract import View
from ...creation import tensor
from ...ops import elementwise as ew
from ...ops.shape import stack
from ...tensor import Tensor, float32, float64


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def vector_norm(x: Tensor, ord: float) -> Tensor:
    """The ``ord``-norm of all elements of x as a 0-d tensor (``torch.linalg.vector_norm``):
    ``inf``: max |x|, ``-inf``: min |x|, 0: the count of non-zeros, else (sum |x|^ord)^(1/ord)."""
    if ord == 2:
        return ew.sqrt((x * x).sum())
    a = ew.abs(x)
    if ord == math.inf:
        return a.max()
    if ord == -math.inf:
        return a.min()
    if ord == 0:
        return (a != 0).to(x.dtype).sum()
    if ord == 1:
        return a.sum()
    return (a ** ord).sum() ** (1.0 / ord)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients of ``parameters`` in place so that their joint ``norm_type``-norm
    is at most ``max_norm``; returns the total norm before clipping (a 0-d tensor)."""
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return tensor(0.0)
    ew.check_same_device(*grads)
    with no_grad():
        if norm_type == 2 and all(g.dtype in (float32, float64) for g in grads):
            dtype = grads[0].dtype
            total = ew.sqrt(stack([_sum_of_squares(g).to(dtype) for g in grads]).sum())
        else:
            norms = [vector_norm(g, norm_type) for g in grads]
            total = vector_norm(stack([n.to(grads[0].dtype) for n in norms]), norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                               f"`parameters` is non-finite, so it cannot be clipped. To disable "
                               f"this error and scale the gradients by the non-finite norm "
                               f"anyway, set `error_if_nonfinite=False`")
        coef = ew.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef if coef.dtype == g.dtype else coef.to(g.dtype))
    return total


def _sum_of_squares(g: Tensor) -> Tensor:
    """``sum(g * g)`` as a 0-d tensor on g's device, from two backend primitives (a map and a
    reduction: what PyTorch's ``_foreach_norm`` fuses): the host work of one call per
    gradient, not of three recorded-op calls (``clip_grad_norm_`` of a 27-parameter
    Transformer LM: most of its ~1.7 ms was that)."""
    be, v, n = g.backend, g._view(), g.numel()
    squares = be.binary("mul", v, v)
    return Tensor._dense(be.reduce("sum", View(squares, (n,), (1,), 0), (0,)), (), g.device)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of ``parameters`` in place to ``[-clip_value, clip_value]``."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.copy_(ew.clamp(g, -clip_value, clip_value))
