"""NumPy max / average pooling over the strided windows of ``conv.windows``."""
from __future__ import annotations

import numpy as np

from ..contract import View
from .conv import col2im, windows
from .memory import array, flat


def maxpool2d(x, kernel, stride, padding):
    """Max and first argmax of each window, one tap at a time: each of the kh*kw taps is a
    strided (N, C, OH, OW) view of the input, compared with the best so far; where it is
    strictly larger (ties keep the first tap, as argmax does) it becomes the best and its tap
    number is kept (in a byte per window). A few passes over the output instead of gathering
    every window into a copy. Any NaN in the input takes ``maxpool2d_reference`` (whose
    argmax picks the first NaN)."""
    a = array(x)
    if a.dtype.kind == "f" and np.isnan(np.add.reduce(a, axis=None)):
        return maxpool2d_reference(x, kernel, stride, padding)
    n, c, h, w = a.shape
    win = windows(a, kernel, stride, padding, (1, 1), -np.inf)
    kh, kw, oh, ow = win.shape[2:]
    best = win[:, :, 0, 0].copy()
    small = np.uint8 if kh * kw < 256 else np.int64
    tap_of_best, tap_if_larger = np.zeros(best.shape, small), np.empty(best.shape, small)
    larger = np.empty(best.shape, bool)
    for t in range(1, kh * kw):
        tap = win[:, :, t // kw, t % kw]
        np.greater(tap, best, out=larger)
        np.maximum(best, tap, out=best)
        # taps come in increasing order: where this one is larger, t is the new maximum tap
        np.multiply(larger, small(t), out=tap_if_larger)
        np.maximum(tap_of_best, tap_if_larger, out=tap_of_best)
    # flat index = the window's top-left pixel + the tap's offset inside the window
    corner = (np.arange(oh)[:, None] * stride[0] - padding[0]) * w + \
        (np.arange(ow)[None, :] * stride[1] - padding[1])
    tap_offset = np.array([i * w + j for i in range(kh) for j in range(kw)], np.int64)
    return best.reshape(-1), np.add(corner, tap_offset.take(tap_of_best)).reshape(-1)


def maxpool2d_reference(x, kernel, stride, padding):
    """The plain form (the oracle of ``maxpool2d``): every window gathered as a last axis of
    kh*kw taps, argmax over it."""
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
    """Each output gradient added to its argmax pixel: ``np.add.at`` with one flat index
    (plane * H*W + argmax), which NumPy runs on a fast path that a tuple of index arrays does
    not take; same additions in the same order as ``maxpool2d_backward_reference``. An argmax
    outside its plane (a window of -inf that points at padding) takes the reference."""
    n, c, h, w = x_shape
    gv, idx = array(g), array(argmax)
    planes = idx.reshape(n * c, -1)
    if planes.size and (planes.min() < 0 or planes.max() >= h * w):
        return maxpool2d_backward_reference(g, argmax, x_shape)
    pixel = planes + (np.arange(n * c) * (h * w))[:, None]
    out = np.zeros(n * c * h * w, dtype=g.dtype)
    np.add.at(out, pixel.reshape(-1), gv.reshape(-1))
    return out


def maxpool2d_backward_reference(g, argmax, x_shape):
    """The plain form (the oracle of ``maxpool2d_backward``): ``np.add.at``."""
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
