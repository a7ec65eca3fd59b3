"""NumPy im2col / col2im over strided windows of a padded copy (``windows``, which pooling
uses too)."""
from __future__ import annotations

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
    a zeroed padded image. NumPy's inner loop runs along the last axis, OW long here: for
    narrow outputs (OW < 8, a small CNN's or a DCGAN's late layers) the columns are first
    transposed so that the N*C planes are the last axis, and every add runs N*C long
    (``col2im_reference``, the plain form, is the oracle)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel, stride, padding, dilation
    n, c, h, w = x_shape
    oh, ow = conv_out_size(h, kh, sh, ph, dh), conv_out_size(w, kw, sw, pw, dw)
    if ow >= 8:
        return col2im_reference(cols, x_shape, kernel, stride, padding, dilation)
    col = array(cols).reshape(n * c, kh, kw, oh, ow).transpose(1, 2, 3, 4, 0).copy()
    out = np.zeros((h + 2 * ph, w + 2 * pw, n * c), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            out[i * dh:i * dh + sh * oh:sh, j * dw:j * dw + sw * ow:sw] += col[i, j]
    return flat(out[ph:ph + h, pw:pw + w].transpose(2, 0, 1))


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
