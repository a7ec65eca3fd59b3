"""IEEE-754 ``math`` for simulated kernels: ±inf and nan where Python's ``math`` raises.

On a GPU ``math.log(0.0)`` is ``-inf``, ``math.sqrt(-1.0)`` is nan and ``math.exp(1000.0)``
is ``inf``; Python's ``math`` raises ``ValueError``/``OverflowError`` instead, and returns a
Python ``float`` even for a float32 argument (so a float32 kernel silently computes in float64
and ``x / 0.0`` raises ``ZeroDivisionError``). While a kernel runs, the launcher swaps every
global (and closure variable) bound to the ``math`` module, or to one of its functions, for
:data:`MATH`, whose functions

- compute with Python's ``math`` (exact to double precision) on the fast path;
- on a domain error or overflow fall back to the NumPy ufunc, which returns the IEEE value;
- return ``numpy.float32`` when every argument is float32 and ``numpy.float64`` otherwise,
  the types Numba gives them. NumPy scalars divide by zero like the GPU (inf/nan, no raise).

``floor``/``ceil``/``trunc`` return a float of the argument's type, as numba-cuda's do (libdevice
``floorf``/``floor``: ``floor(inf)`` is inf), not Python's int; predicates and integer functions
are Python's own.
"""
import builtins
import math
import types

import numpy as np

from .indeterminate import Indeterminate

_F32, _F64 = np.float32, np.float64
_ERRORS = (ValueError, OverflowError, ZeroDivisionError)

_UNARY = {"acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
          "atan": np.arctan, "atanh": np.arctanh, "cbrt": np.cbrt,
          "cos": np.cos, "cosh": np.cosh, "degrees": np.degrees, "erf": None, "erfc": None,
          "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "fabs": np.fabs,
          "gamma": None, "lgamma": None, "log10": np.log10, "log1p": np.log1p, "log2": np.log2,
          "radians": np.radians, "sin": np.sin, "sinh": np.sinh, "sqrt": np.sqrt, "tan": np.tan,
          "tanh": np.tanh}
_ROUNDING = {"ceil": np.ceil, "floor": np.floor, "trunc": np.trunc}
_BINARY = {"atan2": np.arctan2, "copysign": np.copysign, "fmod": np.fmod, "hypot": np.hypot,
           "pow": np.power, "remainder": np.remainder, "nextafter": np.nextafter}


def _special(name, x):
    """IEEE results of the functions without a NumPy ufunc, at their poles and overflows."""
    x = float(x)
    if math.isnan(x):
        return math.nan
    if name == "lgamma":
        return math.inf
    if name == "gamma":
        if x == 0.0:
            return math.copysign(math.inf, x)
        return math.nan if x < 0 and x == int(x) or x == -math.inf else math.inf
    return math.nan


def _unary(name, ufunc):
    f = getattr(math, name)

    def g(x):
        if type(x) is Indeterminate:
            return x
        try:
            r = f(x)
        except _ERRORS:
            with np.errstate(all="ignore"):
                r = ufunc(_F64(x)) if ufunc is not None else _special(name, x)
        return _F32(r) if type(x) is _F32 else _F64(r)

    g.__name__ = g.__qualname__ = name
    g.__doc__ = f"math.{name} with IEEE results (inf/nan) and Numba's result type."
    return g


def _rounding(name, ufunc):
    """floor/ceil/trunc as the GPU computes them: a float of the argument's type, -0.0 and
    inf/nan kept (NumPy's ufunc is exact; Python's goes through an int)."""
    def g(x):
        if type(x) is Indeterminate:
            return x
        return ufunc(x) if type(x) is _F32 else ufunc(_F64(x))

    g.__name__ = g.__qualname__ = name
    g.__doc__ = f"math.{name} as numba-cuda computes it (libdevice {name}f / {name})."
    return g


def _binary(name, ufunc):
    f = getattr(math, name)

    def g(x, y):
        if type(x) is Indeterminate or type(y) is Indeterminate:
            return x if type(x) is Indeterminate else y
        try:
            r = f(x, y)
        except _ERRORS:
            with np.errstate(all="ignore"):
                r = ufunc(_F64(x), _F64(y))
        return _F32(r) if type(x) is _F32 and type(y) is _F32 else _F64(r)

    g.__name__ = g.__qualname__ = name
    g.__doc__ = f"math.{name} with IEEE results (inf/nan) and Numba's result type."
    return g


def _log(x, base=None):
    """math.log (natural, or to ``base``) with IEEE results and Numba's result type."""
    if type(x) is Indeterminate or type(base) is Indeterminate:
        return x if type(x) is Indeterminate else base
    with np.errstate(all="ignore"):
        if base is None:
            try:
                r = math.log(x)
            except _ERRORS:
                r = np.log(_F64(x))
        else:
            r = np.log(_F64(x)) / np.log(_F64(base))
    f32 = type(x) is _F32 and (base is None or type(base) is _F32)
    return _F32(r) if f32 else _F64(r)


MATH = types.ModuleType("math", "Python's math with IEEE results, as a simulated kernel sees it.")
MATH.__dict__.update({k: v for k, v in vars(math).items() if not k.startswith("__")})
for _name, _uf in _UNARY.items():
    setattr(MATH, _name, _unary(_name, _uf))
for _name, _uf in _ROUNDING.items():
    setattr(MATH, _name, _rounding(_name, _uf))
for _name, _uf in _BINARY.items():
    setattr(MATH, _name, _binary(_name, _uf))
MATH.log = _log

def _round(number, ndigits=None):
    """``round`` as Numba compiles it for a float and a number of digits: CPython's fallback
    algorithm (``numba/cuda/cudaimpl.py`` ``round_to_impl``) in float64, the result in the
    argument's type (float32 stays float32). Everything else is Python's ``round``."""
    if ndigits is None or not isinstance(number, (float, np.floating)) or isinstance(
            ndigits, Indeterminate):
        return builtins.round(number, ndigits) if ndigits is not None else builtins.round(number)
    kind = type(number) if isinstance(number, np.floating) else _F64
    x, ndigits = _F64(number), int(ndigits)
    if math.isinf(x) or math.isnan(x):
        return kind(x)
    with np.errstate(all="ignore"):
        if ndigits >= 0:
            pow1, pow2 = (_F64(10.0) ** (ndigits - 22), _F64(1e22)) if ndigits > 22 else (
                _F64(10.0) ** ndigits, _F64(1.0))
            y = (x * pow1) * pow2
            if math.isinf(y):
                return kind(x)
        else:
            pow1 = _F64(10.0) ** -ndigits
            y = x / pow1
        z = _F64(np.rint(y))
        if math.fabs(y - z) == 0.5:  # halfway between two integers: round half to even
            z = _F64(2.0) * np.rint(y / _F64(2.0))
        z = (z / pow2) / pow1 if ndigits >= 0 else z * pow1
    return kind(z)


BUILTINS = {"round": _round}
"""Builtins a simulated kernel sees as Numba types them (swapped in while it runs)."""

SWAPS = {id(math): MATH}
"""id(original) -> replacement, for the launcher's swap of globals and closure cells."""
for _name in list(_UNARY) + list(_ROUNDING) + list(_BINARY) + ["log"]:
    SWAPS[id(getattr(math, _name))] = getattr(MATH, _name)
del _name, _uf
