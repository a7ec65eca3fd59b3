"""``LayerNorm`` (``torch.nn.LayerNorm``): normalise every sample over its trailing feature dims;
``GroupNorm``: over groups of channels (``F.group_norm``).

Unlike BatchNorm there are no running statistics and training and evaluation compute the same
thing: each row (e.g. each token's feature vector) is normalised with its own mean and biased
variance, then scaled and shifted per feature by ``weight`` (ones) and ``bias`` (zeros). The
work is one fused kernel per direction (``backends/cuda/layernorm.py``).
"""
from __future__ import annotations

import numbers

from .. import creation
from ..ops.layernorm import layer_norm
from . import functional as F
from . import init
from .module import Module, Parameter


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.empty(*self.normalized_shape, device=device,
                                                   dtype=dtype))
            if bias:
                self.bias = Parameter(creation.empty(*self.normalized_shape, device=device,
                                                     dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class GroupNorm(Module):
    """``torch.nn.GroupNorm``: ``F.group_norm`` with a per-channel ``weight`` (ones) and
    ``bias`` (zeros) when ``affine``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups, num_channels, eps, affine)
        if affine:
            self.weight = Parameter(creation.ones(num_channels, device=device, dtype=dtype))
            self.bias = Parameter(creation.zeros(num_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


__all__ = [name for name, value in list(globals().items()) if isinstance(value, type)
           and issubclass(value, Module) and value.__module__ == __name__]
"""Every layer defined here (``minigpu.nn`` imports them all)."""
