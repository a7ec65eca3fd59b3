"""NumPy reference of the fused optimizer steps.

Same rules, same order of operations and the same typed scalars as ``backends/cuda/optim.py``: the
per-step constants are computed in float64 on the host and cast to the buffer dtype, and
every array operation stays in that dtype. All buffers are flat, contiguous and updated in
place.
"""
from __future__ import annotations

import math

import numpy as np


def sgd_step_(param_buf, grad_buf, momentum_buf, lr, momentum, dampening, weight_decay,
              nesterov, first_step):
    """PyTorch SGD: ``d = g + wd*p``; with momentum ``buf = d`` (first step) or
    ``buf = momentum*buf + (1-dampening)*d``, then ``d = d + momentum*buf`` (Nesterov) or
    ``d = buf``; ``p -= lr*d``."""
    t = param_buf.dtype.type
    d = grad_buf
    if weight_decay != 0:
        d = d + t(weight_decay) * param_buf
    if momentum != 0 and momentum_buf is not None:
        if first_step:
            momentum_buf[...] = d
        else:
            momentum_buf[...] = t(momentum) * momentum_buf + t(1 - dampening) * d
        d = d + t(momentum) * momentum_buf if nesterov else momentum_buf
    param_buf -= t(lr) * d


def adam_step_(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf, step, lr, beta1, beta2, eps,
               weight_decay):
    """PyTorch Adam (L2 weight decay, not AdamW), ``step`` counting from 1:
    ``d = g + wd*p``; ``m = b1*m + (1-b1)*d``; ``v = b2*v + (1-b2)*d*d``;
    ``p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps)`` with ``bc = 1 - beta**step``."""
    t = param_buf.dtype.type
    bc1 = 1 - beta1 ** step
    bc2 = 1 - beta2 ** step
    d = grad_buf
    if weight_decay != 0:
        d = d + t(weight_decay) * param_buf
    exp_avg_buf[...] = t(beta1) * exp_avg_buf + t(1 - beta1) * d
    exp_avg_sq_buf[...] = t(beta2) * exp_avg_sq_buf + t(1 - beta2) * d * d
    denom = np.sqrt(exp_avg_sq_buf) / t(math.sqrt(bc2)) + t(eps)
    param_buf -= t(lr / bc1) * exp_avg_buf / denom
