"""Layer normalisation (``torch.nn.functional.layer_norm``): one Function over the fused
``layer_norm`` / ``layer_norm_backward`` primitives.

The trailing ``len(normalized_shape)`` dims of the input are the features; every other dim is
a row, so the primitive sees a dense (R, C) matrix (a free reshape for a contiguous input).
Forward saves the input and the per-row ``mean``/``rstd`` (R floats each) that the primitive
returns; backward gets ``dx``, ``dweight`` and ``dbias`` from one primitive call (two kernels
on cuda). PyTorch's semantics: biased variance, ``eps`` inside the square root.
"""
from __future__ import annotations

from ..autograd import Function
from ..backends.contract import numel
from ..dtypes import autocast_cast
from ..tensor import Tensor
from . import elementwise as ew
from .registry import op
from .shape import contiguous


def _matrix(t: Tensor, cols: int):
    """t as a dense tensor and its (rows, cols) view (one copy when t is not contiguous)."""
    t = contiguous(t)
    return t, t._view()._replace(shape=(t.numel() // max(cols, 1), cols), strides=(cols, 1))


def _vector(t, cols):
    """A dense (cols,) view of a weight or bias (None stays None)."""
    return None if t is None else _matrix(t, cols)[1]._replace(shape=(cols,), strides=(1,))


def normalised(x, dims, eps):
    centred = x - x.mean(dims, keepdim=True)
    return centred * ((centred * centred).mean(dims, keepdim=True) + eps) ** -0.5


class LayerNormFunction(Function):
    def forward(self, x, weight, bias, cols, eps):
        x, xv = _matrix(x, cols)
        y, mean, rstd = x.backend.layer_norm(xv, _vector(weight, cols), _vector(bias, cols), eps)
        rows = (xv.shape[0],)
        self.cols, self.bias_shape = cols, None if bias is None else bias.shape
        self.save_for_backward(x, weight, Tensor._dense(mean, rows, x.device),
                               Tensor._dense(rstd, rows, x.device))
        return Tensor._dense(y, x.shape, x.device)

    def backward(self, g):
        x, weight, mean, rstd = self.saved_tensors
        needs = self.needs_input_grad
        dx, dw, db = g.backend.layer_norm_backward(
            _matrix(g, self.cols)[1], _matrix(x, self.cols)[1], mean._view(), rstd._view(),
            _vector(weight, self.cols), any(needs[1:3]))
        gx = Tensor._dense(dx, g.shape, g.device) if needs[0] else None
        gw = Tensor._dense(dw, weight.shape, g.device) if needs[1] else None
        gb = Tensor._dense(db, self.bias_shape, g.device) if needs[2] else None
        return gx, gw, gb, None, None

    def unfused(self, x, weight, bias, cols, eps):
        """The unfused form: each row of ``cols`` features normalised (biased variance)."""
        y = normalised(x.reshape(-1, cols), 1, eps)
        if weight is not None:
            y = y * weight.reshape(cols)
        if bias is not None:
            y = y + bias.reshape(cols)
        return y.reshape(x.shape)


@op(method=False, F=True, module="LayerNorm",
    example=lambda rng: (rng.standard_normal((3, 4)), (4,)))
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing dims ``normalized_shape`` (an int or a tuple): per row
    ``(x - mean) / sqrt(var + eps) * weight + bias``, the variance biased."""
    input, weight, bias = autocast_cast("layer_norm", input, weight, bias)
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    shape = tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if not isinstance(input, Tensor):
        raise TypeError(f"layer_norm(): argument 'input' must be Tensor, not "
                        f"{type(input).__name__}")
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size"
                           f"{list(input.shape)}")
    if input.dtype.kind != "f":
        raise RuntimeError(f"layer_norm: expected a floating point input, got {input.dtype}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        ew.check_same_device(input, t)
        if tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {list(t.shape)} and normalized_shape = "
                               f"{list(shape)}")
        if t.dtype != input.dtype:
            raise RuntimeError(f"layer_norm: expected {name} of dtype {input.dtype}, got "
                               f"{t.dtype}")
    return LayerNormFunction.apply(input, weight, bias, numel(shape), float(eps))
