"""Stochastic gradient descent (``torch.optim.SGD``): momentum, dampening, weight decay, Nesterov.

Per parameter and step, one fused primitive (``backend.sgd_step_``) does, in place::

    d = g + weight_decay * p
    buf = d (first step) or momentum * buf + (1 - dampening) * d
    d = d + momentum * buf (nesterov) or buf
    p = p - lr * d
"""
from __future__ import annotations

from ..autograd import no_grad
from ..tensor import Tensor
from .optimizer import Optimizer


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if differentiable:
            raise NotImplementedError("SGD: differentiable=True is not supported by minigpu")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                momentum = group["momentum"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = self._grad_buffer(p, group["maximize"])
                    state = self.state[p]
                    buf, first = None, False
                    if momentum != 0:
                        if state.get("momentum_buffer") is None:
                            # Uninitialised: the first step writes buf = d.
                            state["momentum_buffer"] = Tensor._dense(
                                p.backend.empty(p.numel(), p.dtype), p.shape, p.device)
                            first = True
                        buf = self._flat(state["momentum_buffer"], "momentum buffer")
                    p.backend.sgd_step_(self._flat(p, "parameter"), grad, buf, group["lr"],
                                        momentum, group["dampening"], group["weight_decay"],
                                        group["nesterov"], first)
        return loss
