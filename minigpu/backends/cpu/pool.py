"""NumPy max / average pooling over the strided windows of ``conv.windows``."""
from __future__ import annotations

import numpy as np

from ..contract import View
from .conv import col2im, windows
from .memory import array, flat


def maxpool2d(x, kernel, stride, padding):
    a = array(x)
    n, c, h, w = a.shape
    win = windows(a, kernel, stride, padding, (1, 1), -np.inf)
    kh, kw, oh, ow = win.shape[2:]
    taps = win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c, oh, ow, kh * kw)
    k = taps.argmax(axis=-1)
    values = np.take_along_axis(taps, k[..., None], -1)[..., 0]
    i, j = k // kw, k % kw
    rows = np.arange(oh)[:, None] * stride[0] - padding[0] + i
    cols = np.arange(ow)[None, :] * stride[1] - padding[1] + j
    return flat(values, dtype=a.dtype), flat(rows * w + cols, dtype=np.int64)


def maxpool2d_backward(g, argmax, x_shape):
    n, c, h, w = x_shape
    gv, idx = array(g), array(argmax)
    out = np.zeros((n * c, h * w), dtype=g.dtype)
    planes = np.repeat(np.arange(n * c), gv[0, 0].size)
    np.add.at(out, (planes, idx.reshape(-1)), gv.reshape(-1))
    return out.reshape(-1)


def _avg_divisor(x_shape, kernel, stride, padding, count_include_pad, dtype):
    """Per-window divisor (OH, OW): the window's size, or its in-bounds part."""
    ones = np.ones((1, 1) + tuple(x_shape[2:]), dtype=dtype)
    win = windows(ones, kernel, stride, padding, (1, 1), 1 if count_include_pad else 0)
    return win.sum(axis=(2, 3))[0, 0]


def avgpool2d(x, kernel, stride, padding, count_include_pad=True):
    a = array(x)
    win = windows(a, kernel, stride, padding, (1, 1), 0)
    div = _avg_divisor(a.shape, kernel, stride, padding, count_include_pad, a.dtype)
    return flat(win.sum(axis=(2, 3)) / div, dtype=a.dtype)


def avgpool2d_backward(g, x_shape, kernel, stride, padding, count_include_pad=True):
    gv = array(g)
    div = _avg_divisor(x_shape, kernel, stride, padding, count_include_pad, gv.dtype)
    n, c, oh, ow = gv.shape
    share = np.broadcast_to((gv / div)[:, :, None, None], (n, c) + tuple(kernel) + (oh, ow))
    cols = View(flat(share), (n, c * kernel[0] * kernel[1], oh * ow),
                (c * kernel[0] * kernel[1] * oh * ow, oh * ow, 1), 0)
    return col2im(cols, x_shape, kernel, stride, padding)
