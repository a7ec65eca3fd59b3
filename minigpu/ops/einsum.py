"""``einsum``: Einstein summation rewritten into the ops the engine already differentiates.

No kernel of its own: an equation becomes views and one batched matmul per pair of operands,
so its backward comes for free. For ``"bij,bjk->bik"`` the plan is exactly ``bmm``; for
``"i,j->ij"`` a (1 x 1)-contraction matmul (an outer product); for ``"ii->"`` a diagonal view
(a step slice of the flattened square) then a sum.

The rewrite, operand by operand:

1. a subscript repeated inside one operand (``ii``) takes the diagonal: the two dims are moved
   last, flattened, and sliced with step n + 1;
2. a subscript that appears in no other operand and not in the output is summed away;
3. two operands are contracted by one ``matmul``: each is permuted to (batch, kept, contracted)
   / (batch, contracted, kept) and reshaped to 3-D, where batch = subscripts in both that are
   still needed, contracted = in both and needed by no one else;
4. more operands fold left to right; the result is permuted into the output's order.

Ellipsis (``...``) is not supported; it raises NotImplementedError.
"""
from __future__ import annotations

import math

from ..tensor import Tensor
from .linalg import matmul
from .reduce import sum as _sum
from .registry import op
from .shape import Slice, permute, reshape


def _parse(equation, count):
    equation = equation.replace(" ", "")
    if "." in equation:
        raise NotImplementedError("einsum(): minigpu does not support ellipsis ('...') in the "
                                  "equation; write every dimension's subscript")
    lhs, arrow, out = equation.partition("->")
    inputs = lhs.split(",")
    for term in inputs + ([out] if arrow else []):
        for ch in term:
            if not ch.isalpha():
                raise ValueError(f"einsum(): invalid subscript given at index "
                                 f"{equation.index(ch)} in the equation string, subscripts "
                                 f"must be in [a-zA-Z]")
    if len(inputs) > count:
        raise ValueError("einsum(): fewer operands were provided than specified in the "
                         "equation")
    if len(inputs) < count:
        raise ValueError("einsum(): more operands were provided than specified in the "
                         "equation")
    if not arrow:  # implicit output: the subscripts seen once, alphabetically
        letters = "".join(inputs)
        out = "".join(sorted(ch for ch in set(letters) if letters.count(ch) == 1))
    for ch in out:
        if out.count(ch) > 1:
            raise ValueError(f"einsum(): output subscript {ch} appears more than once in the "
                             f"output")
        if not any(ch in term for term in inputs):
            raise ValueError(f"einsum(): output subscript {ch} does not appear in the "
                             f"equation for any input operand")
    return inputs, out


def _diagonal(x, term):
    """Take the diagonal of every subscript repeated within ``term``."""
    while any(term.count(ch) > 1 for ch in term):
        ch = next(c for c in term if term.count(c) > 1)
        i = term.index(ch)
        j = term.index(ch, i + 1)
        n = x.shape[i]
        rest = [d for d in range(x.ndim) if d not in (i, j)]
        x = reshape(permute(x, *rest, i, j), *[x.shape[d] for d in rest], n * n)
        x = Slice.apply(x, (Ellipsis, slice(None, None, n + 1)))
        term = "".join(term[d] for d in rest) + ch
    return x, term


def _sum_out(x, term, keep):
    """Sum over the subscripts of ``term`` not in ``keep``."""
    dims = [d for d, ch in enumerate(term) if ch not in keep]
    if not dims:
        return x, term
    return _sum(x, dims), "".join(ch for ch in term if ch in keep)


def _contract(a, ta, b, tb, needed):
    """a (subscripts ta) and b (tb) -> (result, its subscripts); ``needed`` are the subscripts
    later operands or the output still use."""
    batch = [ch for ch in ta if ch in tb and ch in needed]
    summed = [ch for ch in ta if ch in tb and ch not in needed]
    left = [ch for ch in ta if ch not in tb]
    right = [ch for ch in tb if ch not in ta]
    size = {**dict(zip(ta, a.shape)), **dict(zip(tb, b.shape))}
    prod = lambda chars: math.prod(size[ch] for ch in chars)  # noqa: E731
    a3 = reshape(permute(a, *[ta.index(ch) for ch in batch + left + summed]),
                 prod(batch), prod(left), prod(summed))
    b3 = reshape(permute(b, *[tb.index(ch) for ch in batch + summed + right]),
                 prod(batch), prod(summed), prod(right))
    out = reshape(matmul(a3, b3), *[size[ch] for ch in batch + left + right])
    return out, "".join(batch + left + right)


@op(method=False, mg=True, out=False, tol=(1e-5, 1e-5),
    example=lambda r: ("ij,jk->ik", r.standard_normal((2, 3)), r.standard_normal((3, 4))))
def einsum(equation, *operands):
    """``torch.einsum``: e.g. ``"ij,jk->ik"`` (matmul), ``"bij,bjk->bik"`` (batched),
    ``"i,j->ij"`` (outer), ``"ii->"`` (trace), ``"ij->ji"``, ``"i,i->"`` (dot), ``"ij->j"``;
    operands as arguments or as one list."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands or not all(isinstance(t, Tensor) for t in operands):
        raise TypeError("einsum(): expected tensors as operands")
    inputs, out = _parse(equation, len(operands))
    seen = {}
    for k, (term, t) in enumerate(zip(inputs, operands)):
        if len(term) != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                               f"({len(term)}) does not match the number of dimensions "
                               f"({t.ndim}) for operand {k} and no ellipsis was given")
        for ch, n in zip(term, t.shape):
            if seen.setdefault(ch, n) != n:
                raise RuntimeError(f"einsum(): subscript {ch} has size {n} for operand {k} "
                                   f"which does not broadcast with previously seen size "
                                   f"{seen[ch]}")
    terms = []
    for t, term in zip(operands, inputs):
        t, term = _diagonal(t, term)
        terms.append((t, term))
    acc, acc_term = None, ""
    for k, (t, term) in enumerate(terms):
        later = set(out).union(*(s for _, s in terms[k + 1:]))
        t, term = _sum_out(t, term, later | set(acc_term))
        if acc is None:
            acc, acc_term = t, term
        else:
            acc, acc_term = _contract(acc, acc_term, t, term, later)
    acc, acc_term = _sum_out(acc, acc_term, set(out))
    return permute(acc, *[acc_term.index(ch) for ch in out]) if out else acc
