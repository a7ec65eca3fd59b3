"""NumPy layer normalisation over the rows of an (R, C) matrix, and its backward."""
from __future__ import annotations

import numpy as np

from .memory import array, flat


def layer_norm(x, weight, bias, eps):
    """(y, mean, rstd): ``y = (x - mean) * rstd * w + b`` per row, the variance biased
    (PyTorch's), ``rstd = 1/sqrt(var + eps)``; weight/bias (C,) views or None. Computed in
    float64 and rounded to x's dtype, so the reference is at least as exact as the kernel."""
    a = array(x)
    wide = a.astype(np.float64)  # float64 statistics: a constant row has exactly var 0
    with np.errstate(all="ignore"):  # rows of no features: NaN statistics, as in NumPy
        mean = wide.mean(axis=1)
        var = ((wide - mean[:, None]) ** 2).mean(axis=1)
        rstd = 1 / np.sqrt(var + eps)
    y = (wide - mean[:, None]) * rstd[:, None]
    if weight is not None:
        y = y * array(weight)
    if bias is not None:
        y = y + array(bias)
    return flat(y, dtype=a.dtype), flat(mean, dtype=a.dtype), flat(rstd, dtype=a.dtype)


def layer_norm_backward(g, x, mean, rstd, weight, param_grads):
    """(dx, dweight, dbias) with ``xhat = (x - mean) * rstd``, ``gw = g * w``:
    ``dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat))`` per row,
    ``dweight = sum_rows(g * xhat)``, ``dbias = sum_rows(g)`` (None unless param_grads)."""
    gv, a = array(g).astype(np.float64), array(x)
    r = array(rstd).astype(np.float64)[:, None]
    xhat = (a.astype(np.float64) - array(mean)[:, None]) * r
    gw = gv if weight is None else gv * array(weight)
    c = a.shape[1]
    dx = r * (gw - gw.sum(axis=1, keepdims=True) / c -
              xhat * (gw * xhat).sum(axis=1, keepdims=True) / c) if c else gw
    if not param_grads:
        return flat(dx, dtype=a.dtype), None, None
    return (flat(dx, dtype=a.dtype), flat((gv * xhat).sum(axis=0), dtype=a.dtype),
            flat(gv.sum(axis=0), dtype=a.dtype))
