"""softmax / log_softmax along any dim, as one fused row kernel over the last axis."""
from __future__ import annotations

from ..autograd import Function
from ..dtypes import autocast_cast, float16
from ..tensor import Tensor
from .common import as_float
from .registry import op
from .shape import contiguous, normalize_dim, transpose


def _rows(t: Tensor):
    """A dense (rows, cols) view of a tensor whose softmax axis is last."""
    t = contiguous(t)
    cols = t.shape[-1] if t.ndim else 1
    return t, t._view()._replace(shape=(t.numel() // max(cols, 1), cols), strides=(cols, 1))


class Softmax(Function):
    def forward(self, x, log):
        self.log = log
        x, rows = _rows(x)
        y = Tensor._dense(x.backend.softmax(rows, log), x.shape, x.device)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved_tensors
        g, g_rows = _rows(g)
        _, y_rows = _rows(y)
        return Tensor._dense(g.backend.softmax_backward(y_rows, g_rows, self.log), g.shape,
                             g.device), None

    def unfused(self, x, log):
        """The unfused form along the last dim (the row maximum subtracted first, as a
        constant: softmax does not change when every input moves by the same amount)."""
        rows = x.reshape(1) if x.ndim == 0 else x
        shifted = rows - rows.max(-1, keepdim=True).values.detach()
        if log:
            out = shifted - shifted.exp().sum(-1, keepdim=True).log()
        else:
            e = shifted.exp()
            out = e / e.sum(-1, keepdim=True)
        return out.reshape(x.shape)


def _along(x, dim, log):
    (x,) = autocast_cast("log_softmax" if log else "softmax", x)
    x = as_float(x)
    if x.dtype == float16:  # computed in float32, rounded to half once (as torch)
        return _along(x.float(), dim, log).half()
    if x.ndim == 0:
        return Softmax.apply(x, log)
    d = normalize_dim(dim, x.ndim)
    last = x.ndim - 1
    if d == last:
        return Softmax.apply(x, log)
    return transpose(Softmax.apply(transpose(x, d, last), log), d, last)


@op(mg=True, module="Softmax", example=lambda r: (r.standard_normal((3, 4)), 1))
def softmax(x, dim=-1):
    return _along(x, dim, False)


@op(mg=True, module="LogSoftmax", example=lambda r: (r.standard_normal((3, 4)), 1))
def log_softmax(x, dim=-1):
    return _along(x, dim, True)
