"""NumPy softmax / log_softmax and their backward."""
from __future__ import annotations

import numpy as np

from .memory import array, flat


def softmax(x, log):
    a = array(x)
    shifted = a - a.max(axis=1, keepdims=True)
    if log:
        out = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    else:
        e = np.exp(shifted)
        out = e / e.sum(axis=1, keepdims=True)
    return flat(out, dtype=a.dtype)


def softmax_backward(y, g, log):
    yv, gv = array(y), array(g)
    if log:
        out = gv - np.exp(yv) * gv.sum(axis=1, keepdims=True)
    else:
        out = yv * (gv - (gv * yv).sum(axis=1, keepdims=True))
    return flat(out, dtype=yv.dtype)
