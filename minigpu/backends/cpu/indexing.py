"""NumPy gather / scatter / index_select / index_add."""
from __future__ import annotations

import numpy as np

from .memory import array, flat


def gather(x, idx):
    a, i = array(x), array(idx)
    return flat(a[np.arange(a.shape[0]), i], dtype=a.dtype)


def scatter(idx, src, c):
    i, s = array(idx), array(src)
    out = np.zeros((i.shape[0], c), dtype=s.dtype)
    out[np.arange(i.shape[0]), i] = s
    return out.reshape(-1)


def index_select(w, idx):
    return flat(array(w)[array(idx)], dtype=w.dtype)


def index_add(idx, src, v):
    s = array(src)
    out = np.zeros((v,) + s.shape[1:], dtype=s.dtype)
    np.add.at(out, array(idx), s)
    return out.reshape(-1)


def gather_dim(x, dim, idx):
    i = array(idx)
    a = array(x)[tuple(slice(0, s) if d != dim else slice(None) for d, s in enumerate(i.shape))]
    return flat(np.take_along_axis(a, i, axis=dim), dtype=x.dtype)


def scatter_add_dim(base, dim, idx, src):
    out = np.array(array(base), order="C")
    i = array(idx)
    s = array(src)[tuple(slice(0, n) for n in i.shape)]
    coords = list(np.indices(i.shape, sparse=True))
    coords[dim] = i
    np.add.at(out, tuple(coords), s)
    return out.reshape(-1)
