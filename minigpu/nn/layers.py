"""Layers with PyTorch's names, constructor signatures, defaults, initialisation, parameter and
buffer names (so ``state_dict`` keys match ``torch.nn``) and ``repr``.

A layer holds its parameters and calls ``minigpu.nn.functional``; checks that name the layer
and the shapes involved run here, before any kernel sees the input.
"""
from __future__ import annotations

import math
import warnings

from .. import creation
from ..backends.contract import pair
from ..tensor import int64
from . import functional as F
from . import init
from .module import Module, Parameter

__all__ = ["Identity", "Linear", "Conv2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d",
           "BatchNorm1d", "BatchNorm2d", "Dropout", "Flatten", "ReLU", "LeakyReLU", "Tanh",
           "Sigmoid", "Softmax", "LogSoftmax"]


def _check_image(layer, input):
    """Pooling layers take (N, C, H, W) or unbatched (C, H, W) input."""
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{type(layer).__name__} expected 3D (unbatched) or 4D (batched) "
                           f"input, got input of shape {tuple(input.shape)}")


def _shape(t):
    return "x".join(str(s) for s in t.shape) if t.ndim > 1 else f"1x{t.shape[0]}"


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ W.T + b. W (out_features, in_features) and b (out_features,) start as
    U(-1/sqrt(in_features), 1/sqrt(in_features)) (kaiming_uniform_ with a=sqrt(5))."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = Parameter(creation.empty(out_features, in_features, device=device,
                                               dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            got = _shape(input) if input.ndim else "0-d"
            raise RuntimeError(
                f"Linear: mat1 and mat2 shapes cannot be multiplied ({got} and "
                f"{self.in_features}x{self.out_features}): Linear(in_features="
                f"{self.in_features}) expected input with last dimension {self.in_features}, "
                f"got input of shape {tuple(input.shape)} (weight shape "
                f"{tuple(self.weight.shape)})")
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class _ConvNd(Module):
    """What Conv1d, Conv2d and ConvTranspose2d share: arguments, PyTorch's parameter layout
    and initialisation (kaiming_uniform_(a=sqrt(5)) and U(-1/sqrt(fan_in), 1/sqrt(fan_in))),
    and repr. ``ntuple`` makes a size argument one int per spatial dim; a transposed layer's
    weight is (in_channels, out_channels / groups, *kernel_size), a plain one's
    (out, in / groups, *kernel)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 groups, bias, padding_mode, device, dtype, *, ntuple, transposed=False,
                 output_padding=0):
        super().__init__()
        name = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups (and "
                             f"groups positive), got {in_channels}, {out_channels} and {groups}")
        if padding_mode != "zeros":
            raise NotImplementedError(f"{name}: minigpu supports padding_mode='zeros' only, "
                                      f"got '{padding_mode}'")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = ntuple(kernel_size)
        self.stride = ntuple(stride)
        self.padding = padding if isinstance(padding, str) else ntuple(padding)
        self.dilation = ntuple(dilation)
        self.groups, self.padding_mode = groups, padding_mode
        self.output_padding = ntuple(output_padding)
        self.transposed = transposed
        channels = ((in_channels, out_channels // groups) if transposed
                    else (out_channels, in_channels // groups))
        self.weight = Parameter(creation.empty(*channels, *self.kernel_size, device=device,
                                               dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        dims = len(self.kernel_size)
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * dims:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * dims:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * dims:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W) (or unbatched (C, H, W)) input.

    weight (out_channels, in_channels / groups, kH, kW) (``groups=in_channels``: depthwise), bias (out_channels,), initialised like
    PyTorch: kaiming_uniform_(a=sqrt(5)) and U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, ntuple=pair)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups, name="Conv2d")


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        _check_image(self, input)
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        _check_image(self, input)
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        _check_image(self, input)
        return F.adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _BatchNorm(Module):
    """Shared by BatchNorm1d/2d: weight (ones), bias (zeros; keyword ``bias=False`` drops it),
    and the buffers running_mean, running_var and num_batches_tracked (int64), PyTorch's names.
    ``momentum=None`` uses a cumulative average (factor 1/num_batches_tracked)."""

    _dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = int(num_features), eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        if affine:
            self.weight = Parameter(creation.empty(num_features, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(creation.empty(num_features, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", creation.zeros(num_features, device=device,
                                                                dtype=dtype))
            self.register_buffer("running_var", creation.ones(num_features, device=device,
                                                              dtype=dtype))
            self.register_buffer("num_batches_tracked", creation.tensor(0, dtype=int64,
                                                                        device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        name = type(self).__name__
        if input.ndim not in self._dims:
            dims = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"{name}: expected {dims} input (got {input.ndim}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"{name} expected input with {self.num_features} channels, got "
                             f"{input.shape[1]} (input shape {tuple(input.shape)})")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.copy_(self.num_batches_tracked + 1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if track else None,
                            self.running_var if track else None, self.weight, self.bias,
                            bn_training, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) input."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) input, per channel."""
    _dims = (4,)


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for the Linear that MultiheadAttention uses as ``out_proj`` (a marker for
    its quantization tools); in minigpu the same as Linear. Programs list it among their
    ``safe_globals`` when they load a whole saved Transformer."""


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


def feature_dropout(input, p, training):
    """Dropout of whole channels (PyTorch's dropout2d): on (N, C, H, W) each (n, c) plane is
    zeroed with probability p, the kept ones scaled by 1/(1-p). Input without a batch
    dimension, (C, H, W), counts as one sample; PyTorch also takes 2-D input, with a warning,
    as one unbatched (C, L) sample: each row then is a channel."""
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is "
                      f"deprecated and will result in an error in a future release. To retain "
                      f"the behavior and silence this warning, please use dropout instead. Note "
                      f"that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      f"spatial dimensions, a channel dimension, and an optional batch dimension "
                      f"(i.e. 3D or 4D inputs).", stacklevel=3)
    if not training or p == 0.0:
        return input
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    noise_shape = tuple(x.shape[:2]) + (1,) * (x.dim() - 2)
    keep = creation.rand(*noise_shape, dtype=x.dtype, device=x.device) < 1.0 - p
    out = x * (keep.to(x.dtype) * (1.0 / (1.0 - p)) if p < 1.0 else keep.to(x.dtype))
    return out if batched else out.squeeze(0)


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) or (C, H, W) input (see :func:`feature_dropout`)."""

    def forward(self, input):
        return feature_dropout(input, self.p, self.training)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return F.flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, inplace=self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                           else "")


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.log_softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"
