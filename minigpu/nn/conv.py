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
    """Transposed 2-D convolution over (N, C_in, H, W) (or unbatched) input; weight
    (in_channels, out_channels / groups, kH, kW) like PyTorch's. ``forward(input, output_size)``
    picks the output_padding that gives that size (a strided layer's output size is ambiguous
    by up to stride - 1)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, ntuple=pair,
                         transposed=True, output_padding=output_padding)

    def forward(self, input, output_size=None):
        output_padding = (self.output_padding if output_size is None
                          else self._output_padding(input, output_size))
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  output_padding, self.groups, self.dilation,
                                  name="ConvTranspose2d")

    def _output_padding(self, input, output_size):
        """PyTorch's rule: output_size (spatial, or with the batch and channel dims) must lie
        between the size with output_padding 0 and that plus stride - 1."""
        spatial = input.shape[input.ndim - 2:]
        output_size = list(output_size)
        if len(output_size) == input.ndim:
            output_size = output_size[input.ndim - 2:]
        if len(output_size) != 2:
            raise ValueError(f"ConvTranspose2D: for {input.ndim}D input, output_size must have "
                             f"2 or {input.ndim} elements (got {len(output_size)})")
        min_sizes = [(size - 1) * s - 2 * p + d * (k - 1) + 1 for size, s, p, d, k in
                     zip(spatial, self.stride, self.padding, self.dilation, self.kernel_size)]
        max_sizes = [m + s - 1 for m, s in zip(min_sizes, self.stride)]
        if any(not lo <= size <= hi for size, lo, hi in zip(output_size, min_sizes, max_sizes)):
            raise ValueError(f"requested an output size of {output_size}, but valid sizes range "
                             f"from {min_sizes} to {max_sizes} (for an input of {spatial})")
        return tuple(size - m for size, m in zip(output_size, min_sizes))
