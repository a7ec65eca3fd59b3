"""Differentiable operations, one module per family.

Importing this package imports every family; each op's ``@op`` line (``registry.py``) sets its
Tensor methods as the family is imported. This namespace is then every op by name
(``minigpu.ops.exp``), filled from the registry: no list of ops is kept here.
"""
from . import (activation, attention, conv, conv_transpose, einsum, elementwise, indexing,
               inplace, layernorm, linalg, loss, normalization, pool, reduce, rnn, scan, shape,
               softmax, sort, subscript)
from .registry import exported

globals().update(exported("ops"))
