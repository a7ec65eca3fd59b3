"""Functional forms of the layers (``minigpu.nn.functional`` ~ ``torch.nn.functional``).

Same names, argument order and defaults as PyTorch. The ops registered with ``F=True``
(``ops/registry.py``) are this module's functions as they are; the functions below adapt an op
to PyTorch's functional signature (``relu(input, inplace=False)``, ``softmax``'s implicit dim).
"""
from __future__ import annotations

import warnings

from .. import ops
from ..ops.registry import exported
from ..ops.shape import broadcast_shapes
from . import spatial
from .spatial import interpolate, one_hot, pad

globals().update(exported("F"))  # the ops marked @op(F=True): conv2d, cross_entropy, ...


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``: weight (out_features, in_features); the transpose is a
    free strided view, and input may have any leading batch dims."""
    return ops.linear(input, weight, bias)


def _softmax_dim(ndim):
    warnings.warn("Implicit dimension choice for softmax has been deprecated. Change the call "
                  "to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return ops.softmax(input, _softmax_dim(input.ndim) if dim is None else dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dtype is not None:
        input = input.to(dtype)
    return ops.log_softmax(input, _softmax_dim(input.ndim) if dim is None else dim)


def relu(input, inplace=False):
    """max(x, 0); ``inplace=True`` writes it over ``input`` (``relu_``) and returns it."""
    return ops.relu_(input) if inplace else ops.relu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x if x > 0 else negative_slope * x; ``inplace=True`` writes it over ``input``."""
    return (ops.leaky_relu_(input, negative_slope) if inplace
            else ops.leaky_relu(input, negative_slope))


def tanh(input):
    return ops.tanh(input)


def sigmoid(input):
    return ops.sigmoid(input)


def flatten(input, start_dim=0, end_dim=-1):
    return ops.flatten(input, start_dim, end_dim)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1); ``inplace`` is accepted for compatibility."""
    return ops.elu(input, alpha)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(norm_p(input, dim), eps)``: vectors along ``dim`` scaled to unit norm."""
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported by minigpu")
    return input / ops.norm(input, p, dim, keepdim=True).clamp(min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """The cosine of the angle between ``x1`` and ``x2`` (broadcast) along ``dim``: each divided
    by its norm, clamped to ``eps`` as PyTorch does (the clamp outside the gradient), then the
    products summed."""
    shape = broadcast_shapes(x1.shape, x2.shape)
    x1, x2 = ops.expand(x1, *shape), ops.expand(x2, *shape)

    def unit(x):
        n = ops.norm(x, 2, dim, keepdim=True)
        return x / (n + (n.detach().clamp(min=eps) - n.detach()))
    return ops.sum(unit(x1) * unit(x2), dim)


__all__ = sorted([*exported("F"), *(
    name for name, value in list(globals().items()) if not name.startswith("_")
    and getattr(value, "__module__", None) in (__name__, spatial.__name__))])
