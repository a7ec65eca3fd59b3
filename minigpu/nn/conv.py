"""Conv1d and ConvTranspose2d: PyTorch's arguments, parameter layout, init and repr
(``layers._ConvNd``); the compute is ``functional.conv1d`` / ``conv_transpose2d``."""
from __future__ import annotations

from ..backends.contract import pair
from ..ops.conv import _single
from . import functional as F
from .layers import _ConvNd


def _one(value):
    return _single(value, "size")


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L) (or unbatched (C, L)) input; weight
    (out_channels, in_channels / groups, k)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, ntuple=_one)

    def forward(self, input):
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups, name="Conv1d")


class ConvTranspose2d(_ConvNd):
    """Transposed 2-D convolution over (N, C_in, H, W) (or unbatched) input, groups=1; weight
    (in_channels, out_channels, kH, kW) like PyTorch's."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, ntuple=pair,
                         transposed=True, output_padding=output_padding)

    def forward(self, input, output_size=None):
        if output_size is not None:
            raise NotImplementedError("ConvTranspose2d: output_size is not supported; pass "
                                      "output_padding to the constructor instead")
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, 1, self.dilation, name="ConvTranspose2d")
