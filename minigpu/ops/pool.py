"""2-D pooling (NCHW): max (with argmax routing), average, and adaptive average.

* ``max_pool2d``: the forward primitive returns the values *and* the flat index ``h*W + w`` of
  each window's maximum inside its (n, c) plane; backward routes each output gradient to that
  one input pixel (``maxpool2d_backward``, overlapping windows summed). PyTorch's
  ``return_indices=True`` returns the same indices.
* ``avg_pool2d``: the mean of each window; backward spreads ``g / window_size`` back over the
  window (``avgpool2d_backward``). ``ceil_mode`` and ``divisor_override`` rescale that mean
  (a product with a constant divisor map, which autograd differentiates).
* ``adaptive_avg_pool2d``: output size given, windows derived. When the input divides evenly it
  *is* an average pool (kernel = stride = input // output). Otherwise PyTorch's windows
  ``[floor(i*H/OH), ceil((i+1)*H/OH))`` overlap unevenly; their averages are separable, so the
  op composes two matrix products with constant averaging matrices: ``Ph @ x @ Pw^T``,
  ``Ph`` of shape (OH, H). Autograd differentiates the composition.
"""
from __future__ import annotations

import math
import numbers

from ..autograd import Function
from ..backends.contract import conv_out_size, pair
from ..tensor import Tensor
from .common import filled
from .conv import padded2d, window
from .linalg import matmul
from .registry import op
from .shape import cat, contiguous, stack


def _pool_taps(xp, kernel, stride, out_hw):
    return [window(xp, i, j, out_hw, stride, (1, 1))
            for i in range(kernel[0]) for j in range(kernel[1])]


def _pool_out(x, kernel, stride, padding):
    return tuple(conv_out_size(s, k, st, p) for s, k, st, p in
                 zip(x.shape[2:], kernel, stride, padding))


class MaxPool2d(Function):
    def forward(self, x, kernel, stride, padding):
        x = contiguous(x)
        out, argmax = x.backend.maxpool2d(x._view(), kernel, stride, padding)
        n, c, h, w = x.shape
        shape = (n, c, conv_out_size(h, kernel[0], stride[0], padding[0]),
                 conv_out_size(w, kernel[1], stride[1], padding[1]))
        self.x_shape = tuple(x.shape)
        self.indices = Tensor._dense(argmax, shape, x.device)
        self.mark_non_differentiable(self.indices)
        return Tensor._dense(out, shape, x.device), self.indices

    def backward(self, g, _):
        g = contiguous(g)
        grad = g.backend.maxpool2d_backward(g._view(), self.indices._view(), self.x_shape)
        return Tensor._dense(grad, self.x_shape, g.device), None, None, None

    def unfused(self, x, kernel, stride, padding):
        """The unfused form: the taps stacked last, padded with -inf, and the max along
        them (the gradient goes to the first maximum in the window's row-major order, the element
        the fused op's argmax names)."""
        taps = _pool_taps(padded2d(x, padding, float("-inf")), kernel, stride,
                          _pool_out(x, kernel, stride, padding))
        return stack(taps, -1).max(-1).values, None


class AvgPool2d(Function):
    def forward(self, x, kernel, stride, padding, count_include_pad):
        x = contiguous(x)
        self.args = (kernel, stride, padding, count_include_pad)
        self.x_shape = tuple(x.shape)
        n, c, h, w = x.shape
        shape = (n, c, conv_out_size(h, kernel[0], stride[0], padding[0]),
                 conv_out_size(w, kernel[1], stride[1], padding[1]))
        return Tensor._dense(x.backend.avgpool2d(x._view(), *self.args), shape, x.device)

    def backward(self, g):
        g = contiguous(g)
        grad = g.backend.avgpool2d_backward(g._view(), self.x_shape, *self.args)
        return Tensor._dense(grad, self.x_shape, g.device), None, None, None, None

    def unfused(self, x, kernel, stride, padding, count_include_pad):
        """The unfused form: the sum of the taps over the zero-padded input, divided by
        the window size (or, without ``count_include_pad``, by how many real pixels each window
        holds: the same sum over a padded tensor of ones)."""
        out_hw = _pool_out(x, kernel, stride, padding)
        taps = _pool_taps(padded2d(x, padding), kernel, stride, out_hw)
        total = sum(taps[1:], taps[0])
        if count_include_pad:
            return total / (kernel[0] * kernel[1])
        ones = padded2d(filled(x, (1, 1) + tuple(x.shape[2:]), 1.0), padding)
        taps = _pool_taps(ones, kernel, stride, out_hw)
        return total / sum(taps[1:], taps[0])


def _pool_args(name, input, kernel_size, stride, padding, dilation=1, ceil_mode=False):
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{name}: expected 3D or 4D (batch mode) tensor for input, got "
                           f"input of shape {tuple(input.shape)}")
    if input.dtype.kind != "f":
        raise RuntimeError(f"{name}: expected a floating point input, got {input.dtype}")
    if pair(dilation, "dilation") != (1, 1):
        raise NotImplementedError(f"{name}: minigpu supports dilation=1 only")
    kernel = pair(kernel_size, "kernel_size")
    stride = kernel if stride is None or (not isinstance(stride, numbers.Integral)
                                          and len(stride) == 0) else pair(stride, "stride")
    padding = pair(padding, "padding")
    if min(kernel) < 1 or min(stride) < 1:
        raise RuntimeError(f"{name}: kernel_size and stride must be positive, got "
                           f"kernel_size={kernel}, stride={stride}")
    if any(p < 0 or p > k // 2 for p, k in zip(padding, kernel)):
        raise RuntimeError(f"{name}: pad should be at most half of effective kernel size, but "
                           f"got pad={padding}, kernel_size={kernel}")
    c, h, w = input.shape[-3:]
    oh, ow = (_out_size(h, kernel[0], stride[0], padding[0], ceil_mode),
              _out_size(w, kernel[1], stride[1], padding[1], ceil_mode))
    if oh < 1 or ow < 1:
        raise RuntimeError(f"{name}: Given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{oh}x{ow}). Output size is too small")
    return kernel, stride, padding


def _batched(input):
    return (input.unsqueeze(0), True) if input.ndim == 3 else (input, False)


def _out_size(size, k, s, p, ceil_mode):
    """The number of windows along one axis. ceil_mode: PyTorch rounds the count up, but drops
    a last window that would start in the right padding."""
    if not ceil_mode:
        return conv_out_size(size, k, s, p)
    out = -(-(size + 2 * p - k) // s) + 1
    if (out - 1) * s >= size + p:
        out -= 1
    return out


def _ceil_extra(size, k, s, p):
    """How many cells to append after ``size`` so that floor-mode pooling gives ceil_mode's
    output."""
    return max((_out_size(size, k, s, p, True) - 1) * s + k - (size + 2 * p), 0)


def _append(x, rows, cols, value):
    """x (N, C, H, W) with ``rows`` rows and ``cols`` columns of ``value`` after its last ones."""
    n, c, h, w = x.shape
    if cols:
        x = cat([x, Tensor._full((n, c, h, cols), value, x.dtype, x.device)], 3)
    if rows:
        x = cat([x, Tensor._full((n, c, rows, w + cols), value, x.dtype, x.device)], 2)
    return x


def _divisors(size, out, k, s, p, count_include_pad):
    """PyTorch's divisor along one axis for each of the ``out`` windows: the window clipped to
    the padded input (count_include_pad) or to the input itself. The cells ceil_mode appends
    beyond the padded input never count."""
    result = []
    for i in range(out):
        start = i * s - p
        end = min(start + k, size + p)
        if not count_include_pad:
            start, end = max(start, 0), min(end, size)
        result.append(end - start)
    return result


@op(method=False, F=True, module="MaxPool2d",
    example=lambda r: (r.standard_normal((1, 2, 4, 4)), 2))
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """``torch.nn.functional.max_pool2d`` (dilation=1). ``ceil_mode=True``: the partial windows
    at the right and bottom edges count too (the input is extended with -inf cells)."""
    kernel, stride, padding = _pool_args("max_pool2d", input, kernel_size, stride, padding,
                                         dilation, ceil_mode)
    x, unbatched = _batched(input)
    rows = cols = 0
    if ceil_mode:
        h, w = x.shape[2:]
        rows = _ceil_extra(h, kernel[0], stride[0], padding[0])
        cols = _ceil_extra(w, kernel[1], stride[1], padding[1])
    if rows or cols:
        # -inf: cells no window's maximum can come from.
        out, indices = MaxPool2d.apply(_append(x, rows, cols, -math.inf), kernel, stride,
                                       padding)
        width = x.shape[3]
        indices = indices // (width + cols) * width + indices % (width + cols)  # unextended
    else:
        out, indices = MaxPool2d.apply(x, kernel, stride, padding)
    if unbatched:
        out, indices = out.squeeze(0), indices.squeeze(0)
    return (out, indices) if return_indices else out


@op(method=False, F=True, module="AvgPool2d",
    example=lambda r: (r.standard_normal((1, 2, 4, 4)), 2))
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """``torch.nn.functional.avg_pool2d``. ``divisor_override`` divides each window's sum by
    a fixed number instead of its size. ``ceil_mode=True``: the partial windows at the right and
    bottom edges count too; the input is extended with zeros, and each window's mean over its
    kh*kw cells is rescaled to PyTorch's divisor (which never counts those extra cells)."""
    kernel, stride, padding = _pool_args("avg_pool2d", input, kernel_size, stride, padding,
                                         ceil_mode=ceil_mode)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("avg_pool2d: divisor must be not zero")
    x, unbatched = _batched(input)
    h, w = x.shape[2:]
    rows = cols = 0
    if ceil_mode:
        rows = _ceil_extra(h, kernel[0], stride[0], padding[0])
        cols = _ceil_extra(w, kernel[1], stride[1], padding[1])
    if divisor_override is None and not (rows or cols):
        out = AvgPool2d.apply(x, kernel, stride, padding, bool(count_include_pad))
    else:
        # Every window of a floor-mode pool with count_include_pad covers kh*kw cells.
        out = AvgPool2d.apply(_append(x, rows, cols, 0.0), kernel, stride, padding, True)
        if divisor_override is not None:
            out = out * (kernel[0] * kernel[1] / float(divisor_override))
        else:
            oh, ow = out.shape[2:]
            dh = _divisors(h, oh, kernel[0], stride[0], padding[0], count_include_pad)
            dw = _divisors(w, ow, kernel[1], stride[1], padding[1], count_include_pad)
            scale = [[kernel[0] * kernel[1] / (a * b) for b in dw] for a in dh]
            out = out * Tensor._from_array(scale, out.device, out.dtype)
    return out.squeeze(0) if unbatched else out


def _averaging_matrix(size, out, like):
    """(out, size) matrix whose row i averages PyTorch's adaptive window i."""
    rows = []
    for i in range(out):
        lo, hi = (i * size) // out, math.ceil((i + 1) * size / out)
        rows.append([1.0 / (hi - lo) if lo <= j < hi else 0.0 for j in range(size)])
    return Tensor._from_array(rows, like.device, like.dtype)


@op(method=False, F=True, module="AdaptiveAvgPool2d",
    example=lambda r: (r.standard_normal((1, 2, 4, 4)), 2))
def adaptive_avg_pool2d(input, output_size):
    """``torch.nn.functional.adaptive_avg_pool2d``; ``None`` in output_size keeps that size."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d: expected 3D or 4D tensor for input, got "
                           f"input of shape {tuple(input.shape)}")
    h, w = input.shape[-2:]
    if isinstance(output_size, numbers.Integral) or output_size is None:
        output_size = (output_size, output_size)
    oh, ow = (h if output_size[0] is None else int(output_size[0]),
              w if output_size[1] is None else int(output_size[1]))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise RuntimeError(f"adaptive_avg_pool2d: output size must be positive and the input "
                           f"non-empty, got output_size=({oh}, {ow}) for input of shape "
                           f"{tuple(input.shape)}")
    if h % oh == 0 and w % ow == 0:
        k = (h // oh, w // ow)
        return avg_pool2d(input, k, k)
    ph = _averaging_matrix(h, oh, input)
    pw = _averaging_matrix(w, ow, input)
    return matmul(matmul(ph, input), pw.mT)
