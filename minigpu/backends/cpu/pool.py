"""NumPy max / average pooling over the strided windows of ``conv.windows``."""
from __future__ import annotations

import numpy as np

from ..contract import View
from .conv import col2im, windows
from .memory import array, flat


def _first_inside(out_size, k, stride, pad):
    """For each window along one axis, its first tap inside the image (not padding)."""
    return np.minimum(np.maximum(pad - np.arange(out_size) * stride, 0), k - 1)


def maxpool2d(x, kernel, stride, padding):
    """Max and argmax of each window, PyTorch's rule: the first maximum in row-major window
    order, never a padding tap (a window of -inf points at its first pixel inside the image),
    and a NaN wins (the last NaN of the window). One tap at a time: each of the kh*kw taps is
    a strided (N, C, OH, OW) view of the input, compared with the best so far; where it is
    strictly larger it becomes the best and its tap number is kept (in a byte per window). A
    few passes over the output instead of gathering every window into a copy. Any NaN in the
    input takes ``maxpool2d_reference``."""
    a = array(x)
    if a.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):   # inf - inf is the NaN it finds too
            if np.isnan(np.add.reduce(a, axis=None)):
                return maxpool2d_reference(x, kernel, stride, padding)
    n, c, h, w = a.shape
    win = windows(a, kernel, stride, padding, (1, 1), -np.inf)
    kh, kw, oh, ow = win.shape[2:]
    best = win[:, :, 0, 0].copy()
    small = np.uint8 if kh * kw < 256 else np.int64
    # the taps before a window's first inside tap are padding: -inf, never strictly larger
    first = (_first_inside(oh, kh, stride[0], padding[0])[:, None] * kw
             + _first_inside(ow, kw, stride[1], padding[1])[None, :])
    tap_of_best = np.broadcast_to(first.astype(small), best.shape).copy()
    tap_if_larger = np.empty(best.shape, small)
    larger = np.empty(best.shape, bool)
    for t in range(1, kh * kw):
        tap = win[:, :, t // kw, t % kw]
        np.greater(tap, best, out=larger)
        np.maximum(best, tap, out=best)
        # taps come in increasing order: where this one is larger, t is the new maximum tap
        np.multiply(larger, small(t), out=tap_if_larger)
        np.maximum(tap_of_best, tap_if_larger, out=tap_of_best)
    return best.reshape(-1), _flat_index(tap_of_best, w, kw, stride, padding)


def _flat_index(tap, w, kw, stride, padding):
    """``ih * W + iw`` of tap number ``tap`` (..., OH, OW) of each window."""
    oh, ow = tap.shape[-2:]
    rows = np.arange(oh)[:, None] * stride[0] - padding[0] + tap // kw
    cols = np.arange(ow)[None, :] * stride[1] - padding[1] + tap % kw
    return (rows * w + cols).astype(np.int64).reshape(-1)


def maxpool2d_reference(x, kernel, stride, padding):
    """The plain form (the oracle of ``maxpool2d``): every window gathered as a last axis of
    kh*kw taps; the last NaN if there is one, else the first maximum among the taps inside
    the image."""
    a = array(x)
    n, c, h, w = a.shape
    win = windows(a, kernel, stride, padding, (1, 1), -np.inf)
    kh, kw, oh, ow = win.shape[2:]
    taps = win.transpose(0, 1, 4, 5, 2, 3).reshape(n, c, oh, ow, kh * kw)
    inside = windows(np.ones((1, 1, h, w), bool), kernel, stride, padding, (1, 1), False)
    inside = inside.transpose(0, 1, 4, 5, 2, 3).reshape(1, 1, oh, ow, kh * kw)
    k = np.where(inside, taps, -np.inf).argmax(axis=-1)
    at_k = np.take_along_axis(taps, k[..., None], -1)[..., 0]
    k = np.where(at_k == -np.inf, inside.argmax(axis=-1), k)
    is_nan = np.isnan(taps)
    k = np.where(is_nan.any(axis=-1), kh * kw - 1 - is_nan[..., ::-1].argmax(axis=-1), k)
    values = np.take_along_axis(taps, k[..., None], -1)[..., 0]
    return flat(values, dtype=a.dtype), flat(_flat_index(k, w, kw, stride, padding),
                                             dtype=np.int64)


def maxpool2d_backward(g, argmax, x_shape):
    """Each output gradient added to its argmax pixel: ``np.add.at`` with one flat index
    (plane * H*W + argmax), which NumPy runs on a fast path that a tuple of index arrays does
    not take; same additions in the same order as ``maxpool2d_backward_reference``."""
    n, c, h, w = x_shape
    gv, idx = array(g), array(argmax)
    planes = idx.reshape(n * c, -1)
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
