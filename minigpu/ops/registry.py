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
- with ``example=``, a function of a NumPy ``Generator`` returning sample arguments (float
  arrays become tensors), the op is tested with no test edit (``tests/test_registered_ops.py``:
  cuda against cpu, float64 gradcheck, against PyTorch's function of the same name).

Nothing else lists ops: a new op is one definition with its ``@op`` line.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from ..tensor import Tensor


class Entry(NamedTuple):
    name: str
    fn: Callable
    methods: tuple        # the Tensor attribute names it is set as
    mg: bool              # exported as minigpu.<name>
    F: bool               # exported as minigpu.nn.functional.<name>
    inplace: Optional[str]  # the name of its in-place variant, if any
    module: Optional[str]   # the name of its minigpu.nn layer, if any
    example: Optional[Callable]  # rng -> sample arguments, for the generic tests


OPS: dict = {}
"""``{name: Entry}`` of every registered op, in registration order."""

_METHOD_OWNERS: dict = {}


def op(fn=None, *, name=None, method=True, mg=False, F=False, inplace=None, module=None,
       example=None):
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
        OPS[key] = Entry(key, fn, methods, mg, F, inplace, module, example)
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
