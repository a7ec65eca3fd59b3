"""2-D convolution (NCHW) as im2col + one batched matrix product.

``im2col`` unrolls every receptive field of the input into a column, so the convolution of an
image is one GEMM with the weight matrix::

    cols   = im2col(x)                      (N, C*kh*kw, OH*OW)
    out[n] = W2 @ cols[n] + bias            W2 = weight viewed as (OC, C*kh*kw)

``W2`` enters the batched ``matmul`` primitive as a view with batch stride 0 (no copy), and the
bias is added by one broadcasting ``binary`` kernel. The backward pass is three more products
and the adjoint of im2col::

    grad_bias = sum over (n, pixel) of g                     reduce
    grad_W2   = sum_n g[n] @ cols[n]^T                       matmul + reduce over n, or one GEMM
                                                             over all pixels (sum_of_products)
    grad_x    = col2im(W2^T @ g[n])                          matmul + col2im (overlaps summed)

Memory: ``cols`` is kh*kw times larger than the input. Like PyTorch, the op keeps the input
for the backward pass; columns larger than ``KEEP_COLUMNS_BYTES`` (1 MiB) are not kept but
gathered again by backward for the weight gradient (one ``im2col``, ~1.6 ms for LeNet's second
layer at batch 64 on the cpu device), so a training step's peak holds no large columns between
forward and backward (``cnn-mnist`` in ``benchmarks/cpu_training_step.py``: 53.8 -> 42.9 MiB).
Small columns are kept: gathering them again cost the small CNN and DCGAN steps ~7 %.
Columns larger than ``CHUNK_COLUMNS_BYTES`` (8 MiB) are made a few images at a time
(:func:`image_chunks`), in forward and in backward, so no step holds a layer's columns for the
whole batch (a 64x64 DCGAN's second layer: 64 MiB of columns at batch 64). The transposed
convolution (``conv_transpose.py``) does the same with its columns.
"""
from __future__ import annotations

from ..autograd import Function
from ..backends.contract import View, contiguous_strides, conv_out_size, numel, pair
from ..dtypes import autocast_cast
from ..tensor import Tensor
from .common import check_same_device, filled
from .registry import op
from .shape import cat, contiguous, narrow


KEEP_COLUMNS_BYTES = 1 << 20
"""A convolution's im2col columns up to this size are kept from forward to backward."""
CHUNK_COLUMNS_BYTES = 8 << 20
"""Columns larger than this are made for a few images at a time (at least one)."""


def image_chunks(n, column_bytes_per_image):
    """``(first image, count)`` slices of a batch of ``n`` whose columns fit
    ``CHUNK_COLUMNS_BYTES``: the whole batch in one slice when they all fit."""
    per = max(1, CHUNK_COLUMNS_BYTES // max(1, column_bytes_per_image))
    return [(start, min(per, n - start)) for start in range(0, n, per)]


def images(buf, shape, start, count, offset=0) -> View:
    """Images ``[start, start + count)`` of a dense ``(N, *rest)`` buffer, as a dense View."""
    shape = (count,) + tuple(shape[1:])
    strides = contiguous_strides(shape)
    return View(buf, shape, strides, offset + start * strides[0])


def place_(be, out, shape, start, count, part):
    """Copy ``part``, a dense buffer of images ``[start, start + count)``, into its place in
    ``out``, a dense buffer of ``shape`` (N, *rest)."""
    be.assign_(images(out, shape, start, count), images(part, shape, 0, count))


def added(be, total, part, shape):
    """``part`` (a dense buffer of ``shape``), or ``total + part`` when there is a total."""
    if total is None:
        return part
    strides = contiguous_strides(shape)
    return be.binary("add", View(total, shape, strides, 0), View(part, shape, strides, 0))


def written_in_chunks(be, n, chunks, out_shape, dtype, make):
    """The ``(N, *rest)`` result of ``make(start, count)`` (a dense buffer of those images)
    over ``chunks``: the one buffer itself when there is one chunk, else each part copied
    into its place in a new buffer."""
    if len(chunks) == 1:
        return make(*chunks[0])
    out = be.empty(numel(out_shape), dtype)
    for start, count in chunks:
        place_(be, out, out_shape, start, count, make(start, count))
    return out


def summed_over_chunks(be, chunks, shape, part):
    """``part(start, count)`` (a dense buffer of ``shape``) summed over ``chunks``."""
    total = None
    for start, count in chunks:
        total = added(be, total, part(start, count), shape)
    return total


def padded(x, dim, before, after, value=0.0):
    """x with ``before``/``after`` entries of ``value`` added along ``dim`` (a negative count
    crops instead)."""
    if before < 0:
        x, before = x.narrow(dim, -before, x.shape[dim] + before), 0
    if after < 0:
        x, after = x.narrow(dim, 0, x.shape[dim] + after), 0
    parts = [x]
    for count, at_end in ((before, 0), (after, 1)):
        if count:
            shape = list(x.shape)
            shape[dim] = count
            parts.insert(at_end * len(parts), filled(x, shape, value))
    return cat(parts, dim) if len(parts) > 1 else x


def padded2d(x, padding, value=0.0):
    (ph, pw) = padding
    return padded(padded(x, 2, ph, ph, value), 3, pw, pw, value)


def window(xp, i, j, out_hw, stride, dilation):
    """The pixels of the padded input ``xp`` that kernel tap (i, j) meets, one per output pixel:
    ``xp[:, :, i*dh + sh*r, j*dw + sw*s]`` for r < OH, s < OW."""
    (oh, ow), (sh, sw), (dh, dw) = out_hw, stride, dilation
    return xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]


def correlate(xp, tap_weight, kernel, out_hw, stride, dilation):
    """sum over taps of window(i, j) @ tap_weight(i, j): (N, C, OH, OW) x (C, OC) -> (N, OC,
    OH, OW). The convolution as kh*kw matrix products, one per kernel tap."""
    out = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            term = window(xp, i, j, out_hw, stride, dilation).permute(0, 2, 3, 1) \
                @ tap_weight(i, j)
            out = term if out is None else out + term
    return out.permute(0, 3, 1, 2)


def with_bias(out, bias):
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


class Conv2d(Function):
    """y = conv2d(x, weight, bias); x (N,C,H,W) and weight (OC,C,kh,kw), groups=1."""

    def forward(self, x, weight, bias, stride, padding, dilation):
        x = contiguous(x)
        weight = contiguous(weight)
        n, c, h, w = x.shape
        oc, _, kh, kw = weight.shape
        oh = conv_out_size(h, kh, stride[0], padding[0], dilation[0])
        ow = conv_out_size(w, kw, stride[1], padding[1], dilation[1])
        k, pixels = c * kh * kw, oh * ow
        be = x.backend
        chunks = image_chunks(n, k * pixels * x.dtype.itemsize)
        # small columns are kept (a second gather would cost more time than they take
        # memory); large ones are gathered again in backward
        keep = len(chunks) == 1 and n * k * pixels * x.dtype.itemsize <= KEEP_COLUMNS_BYTES
        self.cols = None

        def convolve(start, count):
            cols = be.im2col(images(x._buf, x.shape, start, count, x._offset), (kh, kw), stride,
                             padding, dilation)
            if keep:
                self.cols = cols
            cols_v = View(cols, (count, k, pixels), (k * pixels, pixels, 1), 0)
            w_v = View(weight._buf, (count, oc, k), (0, k, 1), weight._offset)  # shared by all
            out = be.matmul(w_v, cols_v)
            if bias is None:
                return out
            out_v = View(out, (count, oc, pixels), (oc * pixels, pixels, 1), 0)
            b_v = View(bias._buf, (count, oc, pixels), (0, bias._strides[0], 0), bias._offset)
            return be.binary("add", out_v, b_v)

        out = written_in_chunks(be, n, chunks, (n, oc, pixels), x.dtype, convolve)
        self.geometry = ((n, c, h, w), (kh, kw), stride, padding, dilation, (oc, oh, ow))
        self.save_for_backward(x, weight)
        return Tensor._dense(out, (n, oc, oh, ow), x.device)

    def backward(self, g):
        x, weight = self.saved_tensors
        x_shape, kernel, stride, padding, dilation, (oc, oh, ow) = self.geometry
        n, c = x_shape[:2]
        k, pixels = c * kernel[0] * kernel[1], oh * ow
        g = contiguous(g)
        be = g.backend
        g_v = View(g._buf, (n, oc, pixels), (oc * pixels, pixels, 1), g._offset)
        chunks = image_chunks(n, k * pixels * g.dtype.itemsize)
        grad_x = grad_w = grad_b = None
        if self.needs_input_grad[1]:
            def weight_part(start, count):
                cols = self.cols if self.cols is not None else be.im2col(
                    images(x._buf, x_shape, start, count, x._offset), kernel, stride, padding,
                    dilation)
                return sum_of_products(be, images(g._buf, (n, oc, pixels), start, count,
                                                  g._offset),
                                       View(cols, (count, k, pixels), (k * pixels, pixels, 1), 0))

            grad_w = Tensor._dense(summed_over_chunks(be, chunks, (oc, k), weight_part),
                                   weight.shape, g.device)
            self.cols = None  # before grad_x's columns, as large, are made
        if len(self.needs_input_grad) > 2 and self.needs_input_grad[2]:
            grad_b = Tensor._dense(be.reduce("sum", g_v, (0, 2)), (oc,), g.device)
        if self.needs_input_grad[0]:
            def input_part(start, count):
                wt_v = View(weight._buf, (count, k, oc), (0, 1, k), weight._offset)  # W2^T
                grad_cols = be.matmul(wt_v, images(g._buf, (n, oc, pixels), start, count,
                                                   g._offset))
                grad_cols_v = View(grad_cols, (count, k, pixels), (k * pixels, pixels, 1), 0)
                return be.col2im(grad_cols_v, (count,) + tuple(x_shape[1:]), kernel, stride,
                                 padding, dilation)

            grad_x = Tensor._dense(written_in_chunks(be, n, chunks, x_shape, g.dtype,
                                                     input_part), x_shape, g.device)
        return grad_x, grad_w, grad_b, None, None, None

    def unfused(self, x, weight, bias, stride, padding, dilation):
        """The unfused form: the input zero-padded, then one product per kernel tap."""
        kh, kw = weight.shape[2:]
        out_hw = tuple(conv_out_size(s, k, st, p, d) for s, k, st, p, d in
                       zip(x.shape[2:], (kh, kw), stride, padding, dilation))
        return with_bias(correlate(padded2d(x, padding), lambda i, j: weight[:, :, i, j].t(),
                                     (kh, kw), out_hw, stride, dilation), bias)


@op(method=False, F=True, module="Conv2d", tol=(1e-5, 1e-5),
    example=lambda r: (r.standard_normal((1, 2, 5, 5)), r.standard_normal((3, 2, 3, 3)),
                       r.standard_normal(3), 1, 1))
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           name="conv2d"):
    """``torch.nn.functional.conv2d``: (N,C,H,W) or unbatched (C,H,W) input, int or pair
    stride/padding/dilation, padding also ``'valid'`` or ``'same'``; ``groups`` > 1 (depthwise
    when it equals the channels) as one convolution per group (:func:`_grouped`)."""
    input, weight, bias = autocast_cast("conv2d", input, weight, bias)
    if groups != 1:
        return _grouped(input, weight, bias, stride, padding, dilation, groups, name)
    x, unbatched = check_conv_args(name, input, weight, bias, groups, transposed=False)
    oc, c, kh, kw = weight.shape
    stride, dilation = pair(stride, "stride"), pair(dilation, "dilation")
    if isinstance(padding, str):
        padding = _string_padding(padding, (kh, kw), stride, dilation, name)
    padding = pair(padding, "padding")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise RuntimeError(f"{name}: stride and dilation must be positive and padding "
                           f"non-negative, got stride={stride}, padding={padding}, "
                           f"dilation={dilation}")
    h, w = x.shape[2:]
    oh = conv_out_size(h, kh, stride[0], padding[0], dilation[0])
    ow = conv_out_size(w, kw, stride[1], padding[1], dilation[1])
    if oh < 1 or ow < 1:
        raise RuntimeError(f"{name}: Calculated padded input size per channel: "
                           f"({h + 2 * padding[0]} x {w + 2 * padding[1]}). Kernel size: "
                           f"({dilation[0] * (kh - 1) + 1} x {dilation[1] * (kw - 1) + 1}). "
                           f"Kernel size can't be greater than actual input size")
    out = Conv2d.apply(x, weight, bias, stride, padding, dilation)
    return out.squeeze(0) if unbatched else out


def _grouped(input, weight, bias, stride, padding, dilation, groups, name):
    """A grouped convolution composed of ``groups`` plain ones: group g convolves input
    channels [g*C/groups, (g+1)*C/groups) with filters [g*OC/groups, (g+1)*OC/groups) (weight
    (OC, C/groups, kH, kW)), and the outputs are concatenated along the channels. Each group is
    a view (no copy) until the concatenation."""
    c, oc = (input.shape[-3] if input.ndim >= 3 else None), weight.shape[0]
    if not isinstance(groups, int) or groups < 1:
        raise RuntimeError(f"{name}: non-positive groups is not supported (got {groups})")
    if oc % groups:
        raise RuntimeError(f"{name}: Given groups={groups}, expected weight to be divisible by "
                           f"{groups} at dimension 0, but got weight of size "
                           f"{list(weight.shape)} instead")
    if weight.ndim != 4 or c != weight.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, "
                           f"expected input{list(input.shape)} to have "
                           f"{weight.shape[1] * groups} channels, but got {c} channels instead")
    cg, og = c // groups, oc // groups
    return cat([conv2d(narrow(input, -3, g * cg, cg), narrow(weight, 0, g * og, og),
                       None if bias is None else narrow(bias, 0, g * og, og),
                       stride, padding, dilation, 1, name=name)
                for g in range(groups)], -3)


def check_conv_args(name, input, weight, bias, groups, transposed):
    """The checks conv2d and conv_transpose2d share (groups, devices, ranks, channels, bias,
    dtypes); returns the input as a batch and whether it was unbatched. A transposed
    convolution's weight is (in_channels, out_channels, kH, kW), a plain one's (out, in, ...)."""
    if groups != 1:
        raise NotImplementedError(f"{name}: minigpu supports groups=1 only, got groups={groups}")
    check_same_device(input, weight, *([bias] if bias is not None else []))
    layout = "in_channels, out_channels" if transposed else "out_channels, in_channels"
    if weight.ndim != 4:
        raise RuntimeError(f"{name} expected a 4-D weight ({layout}, kH, kW), got weight of "
                           f"shape {tuple(weight.shape)}")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{name} expected 3D (unbatched) or 4D (batched) input, got input "
                           f"of shape {tuple(input.shape)}")
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    c, oc = weight.shape[:2] if transposed else weight.shape[1::-1]
    if x.shape[1] != c:
        raise RuntimeError(f"{name} expected input with {c} channels, got {x.shape[1]} "
                           f"(input shape {tuple(input.shape)}, weight shape "
                           f"{tuple(weight.shape)})")
    if bias is not None and tuple(bias.shape) != (oc,):
        raise RuntimeError(f"{name} expected bias of shape ({oc},), got {tuple(bias.shape)}")
    if x.dtype != weight.dtype or (bias is not None and bias.dtype != weight.dtype):
        raise RuntimeError(f"{name}: input type ({x.dtype}) and weight type ({weight.dtype}) "
                           f"should be the same")
    return x, unbatched


def _string_padding(padding, kernel, stride, dilation, name):
    if padding == "valid":
        return (0, 0)
    if padding != "same":
        raise ValueError(f"Invalid padding string '{padding}', should be one of "
                         f"{{'valid', 'same'}}")
    if stride != (1, 1):
        raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
    total = [d * (k - 1) for k, d in zip(kernel, dilation)]
    if any(t % 2 for t in total):
        raise NotImplementedError(f"{name}: padding='same' with an even effective kernel size "
                                  f"needs asymmetric padding, which minigpu does not support")
    return tuple(t // 2 for t in total)


@op(method=False, F=True, module="Conv1d", tol=(1e-5, 1e-5),
    example=lambda r: (r.standard_normal((1, 2, 6)), r.standard_normal((3, 2, 3)),
                       r.standard_normal(3)))
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, *,
           name="conv1d"):
    """``torch.nn.functional.conv1d``: (N, C, L) or unbatched (C, L) input, weight
    (OC, C/groups, k). A height-1 conv2d: (N, C, 1, L) with a (OC, C, 1, k) weight, both
    views (no copy), on the same im2col + GEMM path."""
    if weight.ndim != 3:
        raise RuntimeError(f"{name} expected a 3-D weight (out_channels, in_channels, kW), got "
                           f"weight of shape {tuple(weight.shape)}")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{name} expected 2D (unbatched) or 3D (batched) input, got input "
                           f"of shape {tuple(input.shape)}")
    if input.shape[-2] != weight.shape[1] * groups:
        raise RuntimeError(f"{name} expected input with {weight.shape[1] * groups} channels, got "
                           f"{input.shape[-2]} (input shape {tuple(input.shape)}, weight shape "
                           f"{tuple(weight.shape)})")
    stride, dilation = (1, *_single(stride, "stride")), (1, *_single(dilation, "dilation"))
    if not isinstance(padding, str):
        padding = (0, *_single(padding, "padding"))
    out = conv2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, stride, padding, dilation,
                 groups, name=name)
    return out.squeeze(-2)


def _single(value, what):
    """An int or a 1-tuple, as a 1-tuple (PyTorch's ``_single``)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise RuntimeError(f"expected {what} to be a single integer value or a list of 1 "
                               f"values to match the convolution dimensions, but got "
                               f"{what}={list(value)}")
        return (int(value[0]),)
    return (int(value),)


def sum_of_products(be, a: View, b: View):
    """``sum_n a[n] @ b[n]^T`` for dense a (N, R, P) and b (N, K, P): a weight's gradient.

    Per image it is an (R, P) @ (P, K) product, and the N products are then summed. When the
    images are small (few pixels P, as in a DCGAN's first layers) those N (R, K) products are
    larger than the operands: then both are copied into one (R, N*P) @ (N*P, K) product over
    every pixel of every image, one GEMM with nothing to sum afterwards."""
    n, r, p = a.shape
    k = b.shape[1]
    if p * (r + k) < r * k:  # the two copies are smaller than the N products
        a2 = be.contiguous(View(a.buf, (r, n, p), (p, r * p, 1), a.offset))
        b2 = be.contiguous(View(b.buf, (n, p, k), (k * p, 1, p), b.offset))
        return be.matmul(View(a2, (1, r, n * p), (0, n * p, 1), 0),
                         View(b2, (1, n * p, k), (0, k, 1), 0))
    per_image = be.matmul(a, View(b.buf, (n, p, k), (k * p, 1, p), b.offset))
    return be.reduce("sum", View(per_image, (n, r, k), (r * k, k, 1), 0), (0,))
