"""What Adam(W), RMSprop and Adagrad share: PyTorch's constructor checks, the host-side step
counter, and the step loop that hands each parameter with a gradient to one fused primitive.
"""
from __future__ import annotations

import numpy as np

from ..autograd import no_grad
from ..tensor import Device, Tensor
from .optimizer import Optimizer

HOST = Device("cpu")


def check_hyperparameters(**values):
    """PyTorch's constructor checks: every value given must be >= 0."""
    names = {"lr": "learning rate", "eps": "epsilon value"}
    for key, value in values.items():
        if not 0.0 <= value:
            raise ValueError(f"Invalid {names.get(key, key + ' value')}: {value}")


def check_betas(betas):
    """PyTorch's check of Adam-style ``betas``: each in [0, 1)."""
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")


def next_step(state) -> int:
    """Advance the step counter ``state['step']`` (a 0-d float32 tensor on the host, as in
    PyTorch's default non-capturable optimizers) and return it as an int.

    The counter is replaced, not changed in place, so a ``state_dict()`` taken earlier keeps
    its count. It is read and made directly on its host buffer (the element of a 0-d tensor
    is ``buf[offset]``): a counter needs no op dispatch."""
    counter = state["step"]
    step = int(counter._buf[counter._offset]) + 1
    state["step"] = Tensor._dense(np.array([step], dtype=np.float32), (), HOST)
    return step


class FusedOptimizer(Optimizer):
    """An optimizer whose ``step()`` is one fused primitive call (one kernel on cuda) per
    parameter that has a gradient: subclasses implement ``_update(group, p, grad, state)``
    with ``grad`` the flat gradient buffer (negated when ``maximize``)."""

    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns closure() if given."""
        loss = self._closure_loss(closure)
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        self._update(group, p, self._grad_buffer(p, group["maximize"]),
                                     self.state[p])
        return loss

    def _update(self, group, p, grad, state):
        raise NotImplementedError
