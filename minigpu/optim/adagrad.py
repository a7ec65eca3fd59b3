"""Adagrad (``torch.optim.Adagrad``): per-element learning rates from the summed squared
gradients.

Per parameter and step, one fused primitive (``backend.adagrad_step_``) does, in place::

    d = g + weight_decay * p
    sum = sum + d * d                                  (state 'sum')
    p = p - lr / (1 + (t - 1) * lr_decay) * d / (sqrt(sum) + eps)

As in PyTorch, the state ('step' = 0 and 'sum' = initial_accumulator_value) is created for
every parameter when the optimizer is constructed, so ``state_dict()`` holds it from the start.
"""
from __future__ import annotations

from ..creation import full_like, tensor
from .common import FusedOptimizer, check_hyperparameters, next_step


class Adagrad(FusedOptimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_hyperparameters(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                              initial_accumulator_value=initial_accumulator_value, eps=eps)
        if differentiable:
            raise NotImplementedError("Adagrad: differentiable=True is not supported by minigpu")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["step"] = tensor(0.0)
                self.state[p]["sum"] = full_like(p, group["initial_accumulator_value"])

    def _update(self, group, p, grad, state):
        step = next_step(state)
        p.backend.adagrad_step_(self._flat(p, "parameter"), grad, self._flat(state["sum"], "sum"),
                                step, group["lr"], group["lr_decay"], group["weight_decay"],
                                group["eps"])
