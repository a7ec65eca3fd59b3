"""Indeterminate values: what a simulated thread gets from a load it should not rely on.

Two loads give one: a load of never-written memory (it holds the poison pattern), and a load
at a *computed* negative index (Numba wraps it around on a GPU, so it reads some other element;
``rules.negative_index_is_constant``). Neither is a bug yet; *using* the value is (the rule in
``rules.py``, MemorySanitizer's). An :class:`Indeterminate` remembers the load. Arithmetic,
comparisons and NumPy ufuncs on it give another Indeterminate (the taint propagates); a use
raises the load's error (``UninitializedReadError`` or ``OutOfBoundsError``) naming the load and
the use:

- a branch or a boolean test (``__bool__``), an index or a loop bound (``__index__``), a
  conversion to a Python number;
- an atomic, a warp vote or a barrier predicate (checked where they happen);
- memory: a store keeps the taint on the element (``memory.Array``), and it is a use when
  another thread reads that element, or when a global element still holds it at the end of
  the kernel (it is kept). A store overwritten before either happens was never observed.
"""
from __future__ import annotations

from .errors import UninitializedReadError
from .sites import site


class Indeterminate:
    """A value a simulated thread must not use (see the module doc)."""

    __slots__ = ("value", "origin", "error")

    def __init__(self, value, origin, error=UninitializedReadError):
        self.value = value      # the bits that were read (printed, never computed on)
        self.origin = origin    # "kernel 'k': thread ... read <array> at index ... at f:l, but ..."
        self.error = error      # the exception class a use raises

    def use(self, how, at=None):
        """Raise: this value is being used ``how`` (e.g. "stored to global array 'out'"),
        at source position ``at`` (None: the user's code running now; "": none)."""
        if at is None:
            here = site()
            at = f"{here[0][0]}:{here[0][1]}" if here else None
        raise self.error(f"{self.origin}; the value read is then {how}"
                         f"{f' at {at}' if at else ''}.")

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
