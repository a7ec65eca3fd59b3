"""NumPy reference of the fused optimizer steps.

Same rules, same order of operations and the same typed scalars as ``backends/cuda/optim.py``: the
per-step constants are computed in float64 on the host and cast to the buffer dtype, and
every array operation stays in that dtype. All buffers are flat, contiguous and updated in
place.
"""
from __future__ import annotations

import math

import numpy as np


BLOCK = 1 << 16
"""Elements per block of :func:`_add_scaled_`: its temporary is one block, not a parameter."""


def _add_scaled_(y, a, x):
    """``y += a * x`` in place (the same rounding: the product, then the sum), a block at a
    time, so that a large parameter's update needs no temporary as large as the parameter."""
    for start in range(0, y.size, BLOCK):
        block = slice(start, start + BLOCK)
        y[block] += a * x[block]


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
            momentum_buf *= t(momentum)
            _add_scaled_(momentum_buf, t(1 - dampening), d)
        d = d + t(momentum) * momentum_buf if nesterov else momentum_buf
    _add_scaled_(param_buf, -t(lr), d)


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
    # The same operations as the formulas above, into two scratch buffers (no temporaries).
    scratch = np.multiply(d, t(1 - beta1))
    exp_avg_buf *= t(beta1)
    exp_avg_buf += scratch
    np.multiply(d, t(1 - beta2), out=scratch)
    scratch *= d
    exp_avg_sq_buf *= t(beta2)
    exp_avg_sq_buf += scratch
    denom = np.sqrt(exp_avg_sq_buf, out=scratch)
    denom /= t(math.sqrt(bc2))
    denom += t(eps)
    update = np.multiply(exp_avg_buf, t(lr / bc1))
    update /= denom
    param_buf -= update


# --- AdamW, RMSprop, Adagrad ---------------------------------------------------------------------
def adamw_step_(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf, max_exp_avg_sq_buf, step, lr,
                beta1, beta2, eps, weight_decay):
    """PyTorch AdamW (decoupled weight decay), ``step`` counting from 1: ``p *= 1 - lr*wd``;
    ``m = b1*m + (1-b1)*g``; ``v = b2*v + (1-b2)*g*g``; with amsgrad (``max_exp_avg_sq_buf``
    given) ``vmax = max(vmax, v)`` replaces ``v`` in ``p -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) +
    eps)``."""
    t = param_buf.dtype.type
    param_buf *= t(1 - lr * weight_decay)
    bc1 = 1 - beta1 ** step
    bc2 = 1 - beta2 ** step
    exp_avg_buf[...] = t(beta1) * exp_avg_buf + t(1 - beta1) * grad_buf
    exp_avg_sq_buf[...] = t(beta2) * exp_avg_sq_buf + t(1 - beta2) * grad_buf * grad_buf
    v = exp_avg_sq_buf
    if max_exp_avg_sq_buf is not None:
        np.maximum(max_exp_avg_sq_buf, exp_avg_sq_buf, out=max_exp_avg_sq_buf)
        v = max_exp_avg_sq_buf
    denom = np.sqrt(v) / t(math.sqrt(bc2)) + t(eps)
    param_buf -= t(lr / bc1) * exp_avg_buf / denom


def rmsprop_step_(param_buf, grad_buf, square_avg_buf, grad_avg_buf, momentum_buf, lr, alpha,
                  eps, weight_decay, momentum):
    """PyTorch RMSprop: ``d = g + wd*p``; ``sq = alpha*sq + (1-alpha)*d*d``; centred
    (``grad_avg_buf`` given): ``gavg = alpha*gavg + (1-alpha)*d``,
    ``avg = sqrt(sq - gavg**2) + eps``, else ``avg = sqrt(sq) + eps``; with ``momentum_buf``:
    ``buf = momentum*buf + d/avg``, ``p -= lr*buf``, else ``p -= lr*d/avg``."""
    t = param_buf.dtype.type
    d = grad_buf
    if weight_decay != 0:
        d = d + t(weight_decay) * param_buf
    square_avg_buf[...] = t(alpha) * square_avg_buf + t(1 - alpha) * d * d
    s = square_avg_buf
    if grad_avg_buf is not None:
        grad_avg_buf[...] = t(alpha) * grad_avg_buf + t(1 - alpha) * d
        s = s - grad_avg_buf * grad_avg_buf
    avg = np.sqrt(s) + t(eps)
    if momentum_buf is not None:
        momentum_buf[...] = t(momentum) * momentum_buf + d / avg
        param_buf -= t(lr) * momentum_buf
    else:
        param_buf -= t(lr) * d / avg


def adagrad_step_(param_buf, grad_buf, sum_buf, step, lr, lr_decay, weight_decay, eps):
    """PyTorch Adagrad, ``step`` counting from 1: ``d = g + wd*p``; ``sum += d*d``;
    ``p -= clr * d / (sqrt(sum) + eps)`` with ``clr = lr / (1 + (step-1)*lr_decay)``."""
    t = param_buf.dtype.type
    d = grad_buf
    if weight_decay != 0:
        d = d + t(weight_decay) * param_buf
    sum_buf += d * d
    param_buf -= t(lr / (1 + (step - 1) * lr_decay)) * d / (np.sqrt(sum_buf) + t(eps))
