"""Batch and group normalisation and dropout, composed from existing ops (no new primitive).

``batch_norm`` in training mode is one Function whose forward and backward call the backend's
``reduce``, ``unary`` and ``binary`` primitives over all dims but the channel dim (dim 1); the
backward is the closed form (two per-channel sums instead of differentiating through mean and
var)::

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
from ..backends.contract import View
from ..dtypes import float16
from ..tensor import Tensor
from . import elementwise as ew
from .common import as_float, check_same_device, uniform
from .layernorm import normalised
from .registry import Unlike, op


def _channel_shape(x):
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _stat_dims(x):
    return (0,) + tuple(range(2, x.ndim))


def _channels(buf, c):
    """A (C,) buffer as a view."""
    return View(buf, (c,), (1,), 0)


def _spread(buf, dims):
    """A (C,) buffer broadcast over (N, C, S): stride 0 along N and S."""
    return View(buf, dims, (0, 1, 0), 0)


def _scale(be, invstd, weight, c):
    """invstd * weight per channel (invstd alone without a weight), a (C,) buffer."""
    if weight is None:
        return invstd
    return be.binary("mul", _channels(invstd, c), View(weight._buf, (c,), weight._strides,
                                                        weight._offset))


class BatchNormTrain(Function):
    """Normalise with the batch statistics; returns (y, batch mean, biased batch var).

    Written on the backend's primitives over an (N, C, S) view of x (S: the spatial size), as
    the convolutions are: per-channel sums are one ``reduce`` over dims (0, 2), per-channel
    factors are (C,) buffers broadcast with stride 0, and the factors are folded before the
    full-size passes: ``y = centred * (invstd * weight) + bias``, ``grad_x = g * scale -
    centred * (scale/n * invstd * sum(g*xhat)) - scale/n * sum(g)``. No Tensor op runs in
    between (each would cost more host time than a small layer's arithmetic)."""

    def forward(self, x, weight, bias, eps):
        x = x.contiguous()
        weight, bias = (p if p is None or p.dtype == x.dtype else p.to(x.dtype)
                        for p in (weight, bias))  # the primitives take one dtype
        n, c = x.shape[:2]
        s = x.numel() // (n * c)
        self.dims, self.count = (n, c, s), n * s
        be = x.backend
        xv = View(x._buf, (n, c, s), (c * s, s, 1), x._offset)
        mean = be.unary("affine", _channels(be.reduce("sum", xv, (0, 2)), c), 1.0 / (n * s))
        centred = be.binary("sub", xv, _spread(mean, self.dims))
        cv = View(centred, (n, c, s), (c * s, s, 1), 0)
        sum_sq = be.reduce("sum", View(be.unary("square", cv), (n, c, s), (c * s, s, 1), 0),
                           (0, 2))
        var = be.unary("affine", _channels(sum_sq, c), 1.0 / (n * s))
        invstd = be.unary("pow", _channels(be.unary("affine", _channels(var, c), 1.0, eps), c),
                          -0.5)
        scale = _scale(be, invstd, weight, c)
        y = be.binary("mul", cv, _spread(scale, self.dims))
        if bias is not None:
            b = View(bias._buf, (n, c, s), (0, bias._strides[0], 0), bias._offset)
            y = be.binary("add", View(y, (n, c, s), (c * s, s, 1), 0), b)
        mean_t, var_t = Tensor._dense(mean, (c,), x.device), Tensor._dense(var, (c,), x.device)
        self.mark_non_differentiable(mean_t, var_t)
        # x itself is kept, as PyTorch keeps it (and the node keeps its inputs anyway, for its
        # unfused form): backward subtracts the mean again instead of holding a second full-size
        # buffer, ``centred``, through the whole forward and backward.
        self.mean = mean
        self.save_for_backward(x, Tensor._dense(invstd, (c,), x.device), weight)
        return Tensor._dense(y, x.shape, x.device), mean_t, var_t

    def backward(self, g, _mean, _var):
        x, invstd, weight = self.saved_tensors
        (_, c, s), dims = self.dims, self.dims
        g = g.contiguous()
        be = g.backend
        gv = View(g._buf, dims, (c * s, s, 1), g._offset)
        xv = View(x._buf, dims, (c * s, s, 1), x._offset)
        cv = View(be.binary("sub", xv, _spread(self.mean, dims)), dims, (c * s, s, 1), 0)
        sum_g = be.reduce("sum", gv, (0, 2))
        sum_gc = be.reduce("sum", View(be.binary("mul", gv, cv), dims, (c * s, s, 1), 0), (0, 2))
        sum_gx = be.binary("mul", _channels(sum_gc, c), invstd._view())  # sum(g * xhat)
        gx = None
        if self.needs_input_grad[0]:
            scale = _scale(be, invstd._buf, weight, c)
            per_n = _channels(be.unary("affine", _channels(scale, c), 1.0 / self.count), c)
            coef = be.binary("mul", per_n, _channels(be.binary("mul", invstd._view(),
                                                               _channels(sum_gx, c)), c))
            shift = be.binary("mul", per_n, _channels(sum_g, c))
            # (g*scale - centred*coef) - shift, ordered so that at most three full-size
            # buffers live at once (the centred input is dropped before g*scale is made)
            centred_coef = View(be.binary("mul", cv, _spread(coef, dims)), dims,
                                (c * s, s, 1), 0)
            del cv
            gx = be.binary("mul", gv, _spread(scale, dims))
            gx = be.binary("sub", View(gx, dims, (c * s, s, 1), 0), centred_coef)
            del centred_coef
            gx = Tensor._dense(be.binary("sub", View(gx, dims, (c * s, s, 1), 0),
                                         _spread(shift, dims)), g.shape, g.device)
        gw = Tensor._dense(sum_gx, (c,), g.device) if self.needs_input_grad[1] else None
        gb = Tensor._dense(sum_g, (c,), g.device) if len(self.needs_input_grad) > 2 and \
            self.needs_input_grad[2] else None
        return gx, gw, gb, None

    def unfused(self, x, weight, bias, eps):
        """The unfused form: each channel normalised with its batch
        statistics (the batch mean and variance outputs get no gradient)."""
        dims = (0,) + tuple(range(2, x.ndim))
        channel = (1, -1) + (1,) * (x.ndim - 2)
        y = normalised(x, dims, eps)
        if weight is not None:
            y = y * weight.to(x.dtype).reshape(*channel)
        if bias is not None:
            y = y + bias.to(x.dtype).reshape(*channel)
        return y, None, None


@op(method=False, F=True, module="BatchNorm2d", tol=(1e-5, 1e-5),
    grad=(0, 3, 4),
    example=lambda r: (r.standard_normal((4, 3)), r.standard_normal(3), r.uniform(0.5, 2, 3),
                       r.standard_normal(3), r.standard_normal(3), False))
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """``torch.nn.functional.batch_norm`` for (N, C), (N, C, L) or (N, C, H, W) input. A
    float16 input is normalised in float32 (statistics included) and rounded to half once, as
    cuDNN does for the float16 activations of an autocast region."""
    if input.dtype == float16:
        return batch_norm(input.float(), running_mean, running_var, weight, bias, training,
                          momentum, eps).half()
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
        with no_grad():  # in place: (1 - momentum) * running + momentum * batch statistic
            if running_mean is not None:
                running_mean.mul_(1.0 - momentum).add_(mean, alpha=momentum)
            if running_var is not None:  # the variance unbiased: var * count / (count - 1)
                running_var.mul_(1.0 - momentum).add_(var, alpha=momentum * count / (count - 1.0))
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


@op(method=False, F=True, module="Dropout", tol=(1e-5, 1e-5),
    torch=Unlike("a random mask: minigpu's counter-based generator, not torch's"),
    example=lambda r: (r.standard_normal((3, 4)), 0.5))
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
    u = uniform(x.shape, x.dtype, x.device)
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
