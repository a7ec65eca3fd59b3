"""The NumPy backend: the reference semantics of every primitive in ``contract.py``.

One family per file, as in the cuda backend. This module gathers the primitives from the
family modules (``contract.gather``: each is defined in exactly one; a new family file needs no
import line here). Each function turns its :class:`View` arguments into NumPy views
(``memory.array``: NumPy's array constructor over the flat buffer with the view's strides, no
copy), does the math with NumPy, and returns a new flat buffer.
"""
from .. import contract
from .memory import array  # noqa: F401  (a view as a NumPy array: the fast paths of ops use it)

globals().update(contract.gather(__name__))

name = "cpu"
