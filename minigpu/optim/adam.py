"""Adam (``torch.optim.Adam``, L2 ``weight_decay`` added to the gradient, not AdamW).

Per parameter and step, one fused primitive (``backend.adam_step_``) does, in place::

    d = g + weight_decay * p
    m = beta1 * m + (1 - beta1) * d                (state 'exp_avg')
    v = beta2 * v + (1 - beta2) * d * d            (state 'exp_avg_sq')
    p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

``m`` and ``v`` live on the parameter's device. The step count ``t`` ('step') is a 0-d float32
tensor on the host, as in PyTorch's default (non-capturable) Adam: the bias corrections are
computed from it on the host, so reading it never waits for the device.
"""
from __future__ import annotations

from ..creation import tensor, zeros
from .common import FusedOptimizer, check_betas, check_hyperparameters, next_step


class Adam(FusedOptimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        check_hyperparameters(lr=lr, eps=eps)
        check_betas(betas)
        check_hyperparameters(weight_decay=weight_decay)
        if amsgrad:
            raise NotImplementedError("Adam: amsgrad=True is not supported by minigpu (the "
                                      "fused adam_step_ primitive keeps no max_exp_avg_sq)")
        if decoupled_weight_decay:
            raise NotImplementedError("Adam: decoupled_weight_decay=True (AdamW) is not "
                                      "supported by minigpu's fused adam_step_")
        if capturable or differentiable:
            raise NotImplementedError("Adam: capturable/differentiable are not supported by "
                                      "minigpu")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _update(self, group, p, grad, state):
        if not state:
            state["step"] = tensor(0.0)
            state["exp_avg"] = zeros(*p.shape, dtype=p.dtype, device=p.device)
            state["exp_avg_sq"] = zeros(*p.shape, dtype=p.dtype, device=p.device)
        step = next_step(state)
        beta1, beta2 = group["betas"]
        p.backend.adam_step_(self._flat(p, "parameter"), grad,
                             self._flat(state["exp_avg"], "exp_avg"),
                             self._flat(state["exp_avg_sq"], "exp_avg_sq"),
                             step, group["lr"], beta1, beta2, group["eps"], group["weight_decay"])
