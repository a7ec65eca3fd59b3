"""NumPy im2col / col2im over strided windows of a padded copy (``windows``, which pooling
uses too)."""
from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..contract import conv_out_size
from .memory import array, flat


def windows(x, kernel, stride, padding, dilation, pad_value):
    """(N, C, kh, kw, OH, OW) strided windows over a padded copy of x (over x itself when
    there is no padding)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=pad_value) \
        if ph or pw else x
    oh, ow = conv_out_size(h, kh, sh, ph, dh), conv_out_size(w, kw, sw, pw, dw)
    s = xp.strides
    return as_strided(xp, shape=(n, c, kh, kw, oh, ow),
                      strides=(s[0], s[1], s[2] * dh, s[3] * dw, s[2] * sh, s[3] * sw),
                      writeable=False)


def im2col(x, kernel, stride, padding, dilation=(1, 1)):
    """The windows gathered into a new buffer in one copy (``reshape`` of the strided windows
    would copy into a temporary that ``flat`` copies again: 7.8 -> ~2 ms for a (64, 32, 14, 14)
    input and a 3x3 kernel)."""
    a = array(x)
    win = windows(a, kernel, stride, padding, dilation, 0)
    cols = np.empty(win.size, a.dtype)
    cols.reshape(win.shape)[...] = win
    return cols


def col2im(cols, x_shape, kernel, stride, padding, dilation=(1, 1)):
    """The adjoint of im2col: each kernel tap's (OH, OW) block of columns added, strided, into
    a zeroed padded image (``col2im_reference``, the plain form, is the oracle). NumPy's
    inner loop runs along the last axis, OW long here, and a strided add of short rows is
    bound by NumPy's iteration, not by memory: float columns go through ``_col2im_loops``,
    the same adds in the same order compiled by Numba's CPU target (one thread, 2-core
    machine, 2026-12-07, reference -> compiled: LeNet's second layer at batch 64, 26x26 from
    3x3 taps, 17.3 -> 5.5 ms; a DCGAN's 32x32 from 4x4 taps at stride 2, 39.0 -> 14.3 ms; its
    4x4 ones over 256 channels, 15.1 -> 5.9 ms). For outputs narrower than 4 the columns are
    instead transposed so that the N*C planes are the last axis, and every NumPy add runs
    N*C long (2x2 from 4x4 taps over 512 channels: 4.1 ms, 7.1 ms compiled)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = x_shape
    oh, ow = conv_out_size(h, kh, sh, ph, dh), conv_out_size(w, kw, sw, pw, dw)
    if ow >= 4:
        if cols.dtype not in _COMPILED_DTYPES:
            return col2im_reference(cols, x_shape, kernel, stride, padding, dilation)
        col = array(cols).reshape(n * c, kh, kw, oh, ow)
        out = np.zeros((n * c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
        _compiled(_col2im_loops)(np.ascontiguousarray(col), out, sh, sw, dh, dw)
        return flat(out[:, ph:ph + h, pw:pw + w]) if ph or pw else out.reshape(-1)
    col = array(cols).reshape(n * c, kh, kw, oh, ow).transpose(1, 2, 3, 4, 0).copy()
    out = np.zeros((h + 2 * ph, w + 2 * pw, n * c), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw] += col[i, j]
    return flat(out[ph:ph + h, pw:pw + w].transpose(2, 0, 1))


_COMPILED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


@functools.cache
def _compiled(loops):
    """``loops`` compiled by Numba's CPU target on first use (``import minigpu`` does not
    import Numba). The machine code is cached on disk next to this module, or in the user's
    cache directory; where neither is writable, Numba refuses to cache and it is compiled
    in each process."""
    from numba import njit
    try:
        return njit(cache=True)(loops)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(loops)


def _col2im_loops(col, out, sh, sw, dh, dw):
    """``out[p, i*dh + r*sh, j*dw + q*sw] += col[p, i, j, r, q]`` for every plane p, tap
    (i, j) and output pixel (r, q), in ``col2im_reference``'s order (taps outer): the same
    sums, bit for bit. col (planes, kh, kw, OH, OW), out (planes, padded H, padded W)."""
    planes, kh, kw, oh, ow = col.shape
    for p in range(planes):
        for i in range(kh):
            for j in range(kw):
                for r in range(oh):
                    row, taps = out[p, i * dh + r * sh], col[p, i, j, r]
                    if sw == 1:  # a loop of unit stride, which LLVM vectorizes
                        for q in range(ow):
                            row[j * dw + q] += taps[q]
                    else:
                        for q in range(ow):
                            row[j * dw + q * sw] += taps[q]


def col2im_reference(cols, x_shape, kernel, stride, padding, dilation=(1, 1)):
    """The plain form: one strided add per kernel tap over the (N, C, OH, OW) columns."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = x_shape
    oh, ow = conv_out_size(h, kh, sh, ph, dh), conv_out_size(w, kw, sw, pw, dw)
    col = array(cols).reshape(n, c, kh, kw, oh, ow)
    out = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw] += col[:, :, i, j]
    return flat(out[:, :, ph:ph + h, pw:pw + w])
