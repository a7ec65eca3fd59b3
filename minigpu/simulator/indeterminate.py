"""Indeterminate values: what a load of never-written memory gives a simulated thread.

initcheck's rule (``rules.py``): reading an uninitialised element is not yet a bug; *using*
the value is. A load that finds the poison pattern returns an :class:`Indeterminate` that
remembers where it was read. Arithmetic, comparisons and NumPy ufuncs on it give another
Indeterminate (the taint propagates, as in MemorySanitizer); a use raises
``UninitializedReadError`` naming the original read and the use:

- a branch or a boolean test (``__bool__``), an index or a loop bound (``__index__``), a
  conversion to a Python number;
- a store to shared or global memory (``memory.Array.__setitem__``), an atomic, a warp vote or
  a barrier predicate (checked where they happen).

A store into the thread's own local array writes the poison pattern again, so the element
stays uninitialised; a value that is never used is never reported.
"""
from __future__ import annotations

from .errors import UninitializedReadError
from .sites import site


class Indeterminate:
    """An indeterminate value read by a simulated thread (see the module doc)."""

    __slots__ = ("value", "origin")

    def __init__(self, value, origin):
        self.value = value      # the poison bits that were read (printed, never computed on)
        self.origin = origin    # "kernel 'k': thread ... read <array> at index ... at file:line"

    def use(self, how):
        """Raise: this value is being used ``how`` (e.g. "stored to global array 'out'")."""
        here = site()
        at = f" at {here[0][0]}:{here[0][1]}" if here else ""
        raise UninitializedReadError(
            f"{self.origin}, but nothing has written that element since it was allocated (it "
            f"holds the simulator's poison pattern); the value read is then {how}{at}.")

    # -- uses -------------------------------------------------------------------------------

    def __bool__(self):
        self.use("tested in a condition (a branch on an indeterminate value)")

    def __index__(self):
        self.use("used as an index, a loop bound or an integer")

    def __int__(self):
        self.use("converted to an integer")

    def __float__(self):
        self.use("converted to a float")

    def __complex__(self):
        self.use("converted to a complex")

    __hash__ = None

    def __repr__(self):
        return repr(self.value)

    def __str__(self):
        return str(self.value)

    def __format__(self, spec):
        return format(self.value, spec)

    # -- propagation ------------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *args, **kwargs):
        return self

    def __round__(self, ndigits=None):
        if ndigits is None:
            self.use("rounded to an integer")
        return self

    def __trunc__(self):
        self.use("truncated to an integer")

    __floor__ = __ceil__ = __trunc__


def _propagate(self, *_):
    return self


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor", "lshift", "rshift", "divmod"):
    setattr(Indeterminate, f"__{_name}__", _propagate)
    setattr(Indeterminate, f"__r{_name}__", _propagate)
for _name in ("lt", "le", "eq", "ne", "gt", "ge", "neg", "pos", "abs", "invert"):
    setattr(Indeterminate, f"__{_name}__", _propagate)
del _name


def first(*values):
    """The first Indeterminate among ``values``, or None (for functions of several args)."""
    for v in values:
        if type(v) is Indeterminate:
            return v
    return None
