"""Batch and group normalisation and dropout, composed from existing ops (no new primitive).

``batch_norm`` in training mode is one Function: its forward composes ``mean``, elementwise
and ``rsqrt`` ops over all dims but the channel dim (dim 1) and its backward is the closed
form (one pass of two per-channel sums instead of differentiating through mean and var)::

    xhat = (x - mean) * invstd                invstd = 1 / sqrt(var + eps), var biased
    y    = xhat * weight + bias
    grad_x = weight * invstd / n * (n*g - sum(g) - xhat * sum(g*xhat))
    grad_weight = sum(g*xhat),  grad_bias = sum(g)

The running statistics are updated in place (``copy_`` into the buffers, the tensors are the
module's own) with PyTorch's rule: ``running = (1-momentum)*running + momentum*batch_stat``,
the variance unbiased (``n/(n-1)``) in the running estimate, biased in the normalisation.
In evaluation mode the layer is an affine map with per-channel constants, composed from
elementwise ops so autograd differentiates it.

``dropout`` draws its mask on the tensor's device with the ``random_uniform`` primitive from
the global counter-based generator (``minigpu.random.default_generator.take(n)``), so the same
seed drops the same elements on cpu and cuda; kept elements are scaled by ``1/(1-p)``.
"""
from __future__ import annotations

from ..autograd import Function, no_grad
from ..random import default_generator
from ..tensor import Tensor
from . import elementwise as ew
from .common import as_float, check_same_device
from .registry import op


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _stat_dims(x):
    return (0,) + tuple(range(2, x.ndim))


class BatchNormTrain(Function):
    """Normalise with the batch statistics; returns (y, batch mean, biased batch var)."""

    def forward(self, x, weight, bias, eps):
        dims, shape = _stat_dims(x), _channel_shape(x)
        self.count = x.numel() // x.shape[1]
        with no_grad():
            mean = x.mean(dims, keepdim=True)
            centred = x - mean
            var = (centred * centred).mean(dims, keepdim=True)
            invstd = ew.rsqrt(var + eps)
            xhat = centred * invstd
            y = xhat
            if weight is not None:
                y = y * weight.reshape(*shape)
            if bias is not None:
                y = y + bias.reshape(*shape)
        mean, var = mean.reshape(x.shape[1]), var.reshape(x.shape[1])
        self.mark_non_differentiable(mean, var)
        self.save_for_backward(xhat, invstd, weight)
        return y, mean, var

    def backward(self, g, _mean, _var):
        xhat, invstd, weight = self.saved_tensors
        dims, shape = _stat_dims(g), _channel_shape(g)
        sum_g = g.sum(dims, keepdim=True)
        sum_gx = (g * xhat).sum(dims, keepdim=True)
        gx = None
        if self.needs_input_grad[0]:
            scale = invstd * (1.0 / self.count)
            if weight is not None:
                scale = scale * weight.reshape(*shape)
            gx = scale * (g * float(self.count) - sum_g - xhat * sum_gx)
        gw = sum_gx.reshape(g.shape[1]) if self.needs_input_grad[1] else None
        gb = sum_g.reshape(g.shape[1]) if len(self.needs_input_grad) > 2 and \
            self.needs_input_grad[2] else None
        return gx, gw, gb, None


@op(method=False, F=True, module="BatchNorm2d")
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """``torch.nn.functional.batch_norm`` for (N, C), (N, C, L) or (N, C, H, W) input."""
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2D input (N, C, ...), got input of "
                         f"shape {tuple(input.shape)}")
    c = input.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None:
            check_same_device(input, t)
            if tuple(t.shape) != (c,):
                raise RuntimeError(f"batch_norm: {name} should contain {c} elements not "
                                   f"{t.numel()}")
    shape = _channel_shape(input)
    if training:
        count = input.numel() // max(c, 1)
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {tuple(input.shape)}")
        y, mean, var = BatchNormTrain.apply(input, weight, bias, float(eps))
        with no_grad():
            if running_mean is not None:
                running_mean.copy_(running_mean * (1.0 - momentum) + mean * momentum)
            if running_var is not None:
                unbiased = var * (count / (count - 1.0))
                running_var.copy_(running_var * (1.0 - momentum) + unbiased * momentum)
        return y
    if running_mean is None or running_var is None:
        raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                           "evaluation mode (training=False)")
    with no_grad():
        invstd = ew.rsqrt(running_var.to(input.dtype) + eps)
        mean = running_mean.to(input.dtype)
    scale = invstd if weight is None else weight * invstd
    shift = -(mean * scale) if bias is None else bias - mean * scale
    return input * scale.reshape(*shape) + shift.reshape(*shape)


@op(method=False, F=True, module="Dropout")
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1/(1-p); identity in eval.

    The result is always a new tensor (``inplace`` is accepted for signature compatibility).
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    x = as_float(input)
    if p == 1.0:
        return x * 0.0
    n = x.numel()
    seed, offset = default_generator.take(n)
    u = Tensor._dense(x.backend.random_uniform(n, seed, offset, x.dtype), x.shape, x.device)
    mask = (u < 1.0 - p).to(x.dtype) * (1.0 / (1.0 - p))
    return x * mask


@op(method=False, F=True, module="GroupNorm",
    example=lambda rng: (rng.standard_normal((2, 4, 3)), 2, rng.standard_normal(4),
                         rng.standard_normal(4)))
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Each sample's channels split in ``num_groups`` groups, each group normalised with its
    own mean and biased variance (over its channels and every spatial position), then scaled
    and shifted per channel. Composed of reshape, mean, var and elementwise ops: autograd
    differentiates it (no Function of its own)."""
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by "
                           f"num_groups, but got input of shape {list(input.shape)} and "
                           f"num_groups={num_groups}")
    n, c = input.shape[0], input.shape[1]
    x = input.reshape(n, num_groups, -1)
    mean, var = x.mean(2, keepdim=True), x.var(2, correction=0, keepdim=True)
    y = ((x - mean) * (var + eps).rsqrt()).reshape(*input.shape)
    per_channel = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(*per_channel)
    if bias is not None:
        y = y + bias.reshape(*per_channel)
    return y
