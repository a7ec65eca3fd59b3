"""The NumPy backend: the reference semantics of every primitive in ``contract.py``.

One family per file, as in the cuda backend; this module only gathers the public primitives.
Each function turns its :class:`View` arguments into NumPy views (``memory.array``: NumPy's
array constructor over the flat buffer with the view's strides, no copy), does the math with
NumPy, and returns a new flat buffer.
"""
from .memory import (array, assign_, cast, contiguous, empty, from_numpy, full,  # noqa: F401
                     synchronize, to_numpy)
from .elementwise import binary, unary, where  # noqa: F401
from .reduce import argreduce, reduce  # noqa: F401
from .matmul import matmul  # noqa: F401
from .softmax import softmax, softmax_backward  # noqa: F401
from .conv import col2im, im2col  # noqa: F401
from .pool import avgpool2d, avgpool2d_backward, maxpool2d, maxpool2d_backward  # noqa: F401
from .indexing import gather, index_add, index_select, scatter  # noqa: F401
from .lstm import lstm_cell, lstm_cell_backward  # noqa: F401
from .optim import adagrad_step_, adam_step_, adamw_step_, rmsprop_step_, sgd_step_  # noqa: F401
from .layernorm import layer_norm, layer_norm_backward  # noqa: F401
from .random import random_normal, random_uniform  # noqa: F401
from .scan import masked_scatter, masked_select, scan  # noqa: F401
from .indexing import gather_dim, scatter_add_dim  # noqa: F401
from .sort import sort  # noqa: F401
from .attention import attention, attention_backward  # noqa: F401

name = "cpu"
