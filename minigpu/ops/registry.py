"""The op registry: each public op says, where it is defined, how a user reaches it.

    @op(mg=True)                    # Tensor.exp, minigpu.exp, minigpu.ops.exp
    def exp(x): ...

    @op(method=False, F=True, module="LayerNorm")   # nn.functional.layer_norm only
    def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5): ...

Registering an op:

- sets it as a ``Tensor`` attribute under each of its method names (its own name by default,
  ``method=False`` for none, operators such as ``"__add__"`` too). The function itself is the
  class attribute, so ``x.exp()`` calls it with no forwarding in between;
- puts it in the flat ``minigpu.ops`` namespace, and with ``mg=True`` in ``minigpu``, with
  ``F=True`` in ``minigpu.nn.functional`` (both fill themselves from :func:`exported`);
- records its in-place variant and its ``nn`` layer (``inplace="add_"``, ``module="ReLU"``),
  for the op index (``python -m minigpu.tools.op_index``) and the tests;
- declares its test contract (``tests/test_registered_ops.py`` tests every op from it, and
  fails for an op without one):

  - ``example=``: a function of a NumPy ``Generator`` returning sample arguments (float
    arrays become float tensors, integer and bool arrays tensors of their dtype, also inside
    lists; a dict last: keyword arguments), or a tuple of such functions, one per form the
    op takes (a tensor operand and a scalar one);
  - ``torch=``: its PyTorch counterpart, a dotted name (``"torch.special.erf"``,
    ``"Tensor.view"``); by default the function of the same name (``torch.nn.functional.X``
    for an ``F`` op, else ``torch.X``, else the Tensor method); ``Unlike("why")`` where torch
    has none or its numbers differ by design (random draws);
  - ``domain=``: which edge values its inputs take: ``"real"`` (inf, -inf, nan, -0.0,
    denormals, +-1e30: every float), ``"bounded"`` (finite, and products of two stay finite:
    a dot product in float32), ``"positive"`` (the same edges, though the example draws
    values > 0: ``log``), ``"finite"`` (no inf or nan: an op that checks its
    input), ``"unit"`` (0, 1 and the numbers near them: probabilities), ``None`` (no float
    input);
  - ``tol=(rtol, atol)``: how far the cuda float32 result may be from the cpu one (the
    simulator's ``math`` against NumPy);
  - ``grad=False``: not differentiable (an integer or bool result, random draws); a tuple
    of argument positions: only those are (``batch_norm``'s running statistics are not);
  - ``signed_zeros=False``: torch's sign of a zero result is an artefact of its formula
    (listed in ``docs/pytorch_compat.md``), not compared;
  - ``out=False``: ``minigpu.<name>`` takes no ``out=`` keyword (torch's has none: a view,
    ``einsum``), see ``ops/out.py``.

  The generic suite runs it: cuda against cpu, float64 gradcheck, against torch on the
  example's drawn values and on the domain's edge values (float32, both devices), the result
  dtype as torch's.

Nothing else lists ops: a new op is one definition with its ``@op`` line.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional

import numpy as np

from ..tensor import Tensor


class Unlike(str):
    """``torch=Unlike("why")``: the op is not compared with PyTorch, for the reason given."""


class Entry(NamedTuple):
    name: str
    fn: Callable
    methods: tuple        # the Tensor attribute names it is set as
    mg: bool              # exported as minigpu.<name>
    F: bool               # exported as minigpu.nn.functional.<name>
    inplace: Optional[str]  # the name of its in-place variant, if any
    module: Optional[str]   # the name of its minigpu.nn layer, if any
    # the test contract (see the module docstring)
    example: Optional[Callable] = None  # rng -> sample arguments
    torch: Optional[str] = None  # the PyTorch counterpart (None: the same name), or Unlike
    domain: Optional[str] = "real"  # the edge values its float inputs take
    tol: tuple = (1e-5, 1e-6)  # rtol, atol of cuda float32 against cpu
    grad: object = True   # differentiable: float64 gradcheck (of the arguments at these
                          # positions, when a tuple)
    signed_zeros: bool = True  # zeros signed as torch's (False: torch's sign is an artefact)
    out: bool = True      # minigpu.<name> takes torch's out= keyword (ops/out.py); False where
                          # torch's has none (views, einsum) or the function is swapped by identity


EDGE_VALUES = {
    "real": (math.inf, -math.inf, math.nan, -0.0, 0.0, 1e-40, -1e-40, 1e30, -1e30, 1.0, -2.5),
    "positive": (math.inf, -math.inf, math.nan, -0.0, 0.0, 1e-40, -1e-40, 1e30, -1e30, 1.0,
                 -2.5),  # drawn values > 0; at the edges the result outside the domain too
    "finite": (-0.0, 0.0, 1e-40, -1e-40, 1e30, -1e30, 1.0, -2.5),
    "bounded": (-0.0, 0.0, 1e-40, -1e-40, 1e4, -1e4, 1.0, -2.5),  # products stay finite
    "unit": (0.0, 1.0, 1e-40, 1e-7, 1.0 - 1e-7, 0.5),
    None: (),
}
"""The edge values of each ``domain`` (denormal in float32: 1e-40)."""

def divisors(rng, shape):
    """Sample values for an example: normal draws pushed away from 0 (``|x| >= 0.5``), for a
    divisor, or where a derivative must be smooth."""
    x = rng.standard_normal(shape)
    return np.where(np.abs(x) < 0.5, 1.5, x)


OPS: dict = {}
"""``{name: Entry}`` of every registered op, in registration order."""

_METHOD_OWNERS: dict = {}


def op(fn=None, *, name=None, method=True, mg=False, F=False, inplace=None, module=None,
       example=None, torch=None, domain="real", tol=(1e-5, 1e-6), grad=True,
       signed_zeros=True, out=True):
    """Register ``fn`` (as a decorator, with or without arguments); returns ``fn`` unchanged.
    ``name`` defaults to ``fn.__name__`` (an alias such as ``clip`` passes its own)."""
    def register(fn):
        key = name or fn.__name__
        if key in OPS:
            raise ValueError(f"op {key!r} is registered twice ({OPS[key].fn.__module__} and "
                             f"{fn.__module__})")
        methods = ((key,) if method is True else () if method is False
                   else (method,) if isinstance(method, str) else tuple(method))
        for m in methods:
            if m in _METHOD_OWNERS or m in vars(Tensor):
                raise ValueError(f"Tensor.{m} is already defined (by "
                                 f"{_METHOD_OWNERS.get(m, 'tensor.py')}); {key!r} cannot "
                                 f"take it")
            _METHOD_OWNERS[m] = key
            setattr(Tensor, m, fn)
        if domain not in EDGE_VALUES:
            raise ValueError(f"op {key!r}: domain {domain!r} is not one of {list(EDGE_VALUES)}")
        OPS[key] = Entry(key, fn, methods, mg, F, inplace, module, example, torch, domain,
                         tuple(tol), grad, signed_zeros, out)
        return fn
    return register if fn is None else register(fn)


def exported(where: str) -> dict:
    """``{name: function}`` of the ops exported in ``where``: ``"mg"`` (``minigpu``), ``"F"``
    (``minigpu.nn.functional``) or ``"ops"`` (every op: the flat ``minigpu.ops``)."""
    return {e.name: e.fn for e in OPS.values() if where == "ops" or getattr(e, where)}


def method(fn, *names):
    """Set ``fn`` (a function or a property) as ``Tensor.<name>`` for each name, without making
    it an op: an operator alias of an op (``x[i]``), or a method of a module above the ops
    (``creation``'s ``new_zeros``, ``interop``'s ``data_ptr``). Returns ``fn``."""
    for m in names:
        if m in _METHOD_OWNERS or m in vars(Tensor):
            raise ValueError(f"Tensor.{m} is already defined (by "
                             f"{_METHOD_OWNERS.get(m, 'tensor.py')})")
        _METHOD_OWNERS[m] = getattr(fn, "__module__", None) or fn.fget.__module__
        setattr(Tensor, m, fn)
    return fn
