"""Adam and AdamW (``torch.optim.Adam`` / ``torch.optim.AdamW``): one class, as in PyTorch 2.x.

``decoupled_weight_decay`` chooses how ``weight_decay`` acts. False (Adam's default): the decay
is added to the gradient (L2), so the adaptive denominator rescales it like any gradient; one
fused primitive (``backend.adam_step_``) does, in place::

    d = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * d                (state 'exp_avg')
    v = beta2 * v + (1 - beta2) * d * d            (state 'exp_avg_sq')
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

True (AdamW): the weight shrinks directly, with ``backend.adamw_step_``::

    p = p * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * g                (state 'exp_avg')
    v = beta2 * v + (1 - beta2) * g * g            (state 'exp_avg_sq')
    v_max = max(v_max, v)  (amsgrad only)          (state 'max_exp_avg_sq')
    p = p - lr / (1 - beta1**t) * m / (sqrt(v or v_max) / sqrt(1 - beta2**t) + eps)

``m`` and ``v`` live on the parameter's device. The step count ``t`` ('step') is a 0-d float32
tensor on the host, as in PyTorch's default (non-capturable) optimizers: the bias corrections
are computed from it on the host, so reading it never waits for the device.
"""
from __future__ import annotations

from ..creation import tensor, zeros_like
from .common import FusedOptimizer, check_betas, check_hyperparameters, next_step


class Adam(FusedOptimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        name = type(self).__name__
        check_hyperparameters(lr=lr, eps=eps)
        check_betas(betas)
        check_hyperparameters(weight_decay=weight_decay)
        if amsgrad and not decoupled_weight_decay:
            raise NotImplementedError(f"{name}: amsgrad=True is supported with "
                                      "decoupled_weight_decay=True (AdamW) only (the fused "
                                      "adam_step_ primitive keeps no max_exp_avg_sq)")
        if capturable or differentiable:
            raise NotImplementedError(f"{name}: capturable/differentiable are not supported by "
                                      "minigpu")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update(self, group, p, grad, state):
        if not state:
            state["step"] = tensor(0.0)
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = zeros_like(p)
        step = next_step(state)
        beta1, beta2 = group["betas"]
        buffers = (self._flat(p, "parameter"), grad, self._flat(state["exp_avg"], "exp_avg"),
                   self._flat(state["exp_avg_sq"], "exp_avg_sq"))
        hyper = (group["lr"], beta1, beta2, group["eps"], group["weight_decay"])
        if group["decoupled_weight_decay"]:
            vmax = (self._flat(state["max_exp_avg_sq"], "max_exp_avg_sq") if group["amsgrad"]
                    else None)
            p.backend.adamw_step_(*buffers, vmax, step, *hyper)
        else:
            p.backend.adam_step_(*buffers, step, *hyper)


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with ``decoupled_weight_decay=True`` and PyTorch's AdamW
    default ``weight_decay=1e-2``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
