"""AdamW (``torch.optim.AdamW``): Adam with *decoupled* weight decay.

Adam's ``weight_decay`` adds ``wd * p`` to the gradient, so the decay is rescaled by the
adaptive denominator like any gradient; AdamW shrinks the weight directly instead. Per
parameter and step, one fused primitive (``backend.adamw_step_``) does, in place::

    p = p * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * g                (state 'exp_avg')
    v = beta2 * v + (1 - beta2) * g * g            (state 'exp_avg_sq')
    v_max = max(v_max, v)  (amsgrad only)          (state 'max_exp_avg_sq')
    p = p - lr / (1 - beta1**t) * m / (sqrt(v or v_max) / sqrt(1 - beta2**t) + eps)

The step count ``t`` ('step') is a 0-d float32 tensor on the host, as in PyTorch's default
(non-capturable) optimizers.
"""
from __future__ import annotations

from ..creation import tensor, zeros_like
from .common import FusedOptimizer, check_betas, check_hyperparameters, next_step


class AdamW(FusedOptimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        check_hyperparameters(lr=lr, eps=eps)
        check_betas(betas)
        check_hyperparameters(weight_decay=weight_decay)
        if capturable or differentiable:
            raise NotImplementedError("AdamW: capturable/differentiable are not supported by "
                                      "minigpu")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=True)
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
        vmax = (self._flat(state["max_exp_avg_sq"], "max_exp_avg_sq") if group["amsgrad"]
                else None)
        p.backend.adamw_step_(self._flat(p, "parameter"), grad,
                              self._flat(state["exp_avg"], "exp_avg"),
                              self._flat(state["exp_avg_sq"], "exp_avg_sq"), vmax, step,
                              group["lr"], beta1, beta2, group["eps"], group["weight_decay"])
