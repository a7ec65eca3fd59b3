"""``minigpu.optim``: SGD, Adam, AdamW, RMSprop, Adagrad and Adadelta with PyTorch's
names, defaults and state_dict layout, and ``optim.lr_scheduler``.

Each ``step()`` updates every parameter with ONE fused primitive call (``sgd_step_``,
``adam_step_``, ...: one kernel per parameter on cuda), in place on the parameter's buffer;
Adadelta is composed of tensor ops; LBFGS works on a flat host vector (``lbfgs.py``).
"""
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .lbfgs import LBFGS
from .rmsprop import RMSprop

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
           "LBFGS", "lr_scheduler"]
