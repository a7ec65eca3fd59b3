"""RMSprop (``torch.optim.RMSprop``): divide the gradient by a running RMS of its history.

Per parameter and step, one fused primitive (``backend.rmsprop_step_``) does, in place::

    d = g + weight_decay * p
    sq = alpha * sq + (1 - alpha) * d * d               (state 'square_avg')
    centered:  ga = alpha * ga + (1 - alpha) * d        (state 'grad_avg')
               avg = sqrt(sq - ga * ga) + eps
    else:      avg = sqrt(sq) + eps
    momentum:  buf = momentum * buf + d / avg;  p = p - lr * buf   (state 'momentum_buffer')
    else:      p = p - lr * d / avg

All buffers start at zero, as in PyTorch; 'step' is a 0-d float32 tensor on the host.
"""
from __future__ import annotations

from ..creation import tensor, zeros_like
from .common import FusedOptimizer, check_hyperparameters, next_step


class RMSprop(FusedOptimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        check_hyperparameters(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay,
                              alpha=alpha)
        if capturable or differentiable:
            raise NotImplementedError("RMSprop: capturable/differentiable are not supported by "
                                      "minigpu")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _update(self, group, p, grad, state):
        if not state:
            state["step"] = tensor(0.0)
            state["square_avg"] = zeros_like(p)
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        next_step(state)
        grad_avg = self._flat(state["grad_avg"], "grad_avg") if group["centered"] else None
        buf = (self._flat(state["momentum_buffer"], "momentum_buffer")
               if group["momentum"] > 0 else None)
        p.backend.rmsprop_step_(self._flat(p, "parameter"), grad,
                                self._flat(state["square_avg"], "square_avg"), grad_avg, buf,
                                group["lr"], group["alpha"], group["eps"],
                                group["weight_decay"], group["momentum"])
