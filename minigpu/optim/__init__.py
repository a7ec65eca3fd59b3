"""``minigpu.optim``: SGD and Adam with PyTorch's names, defaults and state_dict layout.

Each ``step()`` updates every parameter with ONE fused primitive call (``sgd_step_`` /
``adam_step_``: one kernel per parameter on cuda), in place on the parameter's buffer.
"""
from .adam import Adam
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam"]
