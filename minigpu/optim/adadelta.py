"""Adadelta (``torch.optim.Adadelta``): steps scaled by the ratio of two running RMS values, so
that ``lr=1.0`` is a sensible default and the update has the units of the parameter.

Per parameter and step, as PyTorch's ``_single_tensor_adadelta``::

    g = -grad if maximize else grad
    g = g + weight_decay * p
    square_avg = rho * square_avg + (1 - rho) * g * g           (state 'square_avg')
    delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g
    acc_delta = rho * acc_delta + (1 - rho) * delta * delta      (state 'acc_delta')
    p = p - lr * delta

Composed of existing elementwise ops, in place on the state tensors (no fused primitive: a
few kernels per parameter, which is what the textbook programs that pick Adadelta need). The
state is created at a parameter's first step, as in PyTorch.
"""
from __future__ import annotations

from ..autograd import no_grad
from ..creation import tensor, zeros_like
from .common import check_hyperparameters, next_step
from .optimizer import Optimizer


class Adadelta(Optimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_hyperparameters(lr=lr, eps=eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if differentiable:
            raise NotImplementedError("Adadelta: differentiable=True is not supported by minigpu")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        capturable=capturable, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One Adadelta update of every parameter that has a gradient; returns closure()."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = -p.grad if group["maximize"] else p.grad
                    if wd != 0:
                        grad = grad.add(p, alpha=wd)
                    state = self.state[p]
                    if not state:
                        state.update(step=tensor(0.0), square_avg=zeros_like(p),
                                     acc_delta=zeros_like(p))
                    next_step(state)
                    square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                    square_avg.mul_(rho).add_(grad * grad, alpha=1 - rho)
                    delta = (acc_delta + eps).sqrt() / (square_avg + eps).sqrt() * grad
                    acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
                    p.add_(delta, alpha=-lr)
        return loss
