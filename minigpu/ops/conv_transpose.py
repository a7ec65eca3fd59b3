"""Transposed 2-D convolution (the adjoint of conv2d, "deconvolution"), NCHW.

conv2d is ``cols = im2col(x); y = W2 @ cols``. Its transpose swaps the two halves of that
pipeline and transposes the weight matrix, so it reuses both primitives::

    forward   cols   = W2^T @ x[n]         W2 = weight viewed as (C_in, C_out*kh*kw)
              y      = col2im(cols)        overlapping patches are summed (stride < kernel)
    backward  gcols  = im2col(g)           the adjoint of col2im
              grad_x = W2 @ gcols[n]
              grad_W = sum_n x[n] @ gcols[n]^T

The weight is laid out (C_in, C_out, kh, kw) like PyTorch's; ``W2^T`` enters the batched
matmul as a stride view (batch stride 0), never a copy. Output size per spatial dim:
``(H - 1)*stride - 2*padding + dilation*(k - 1) + output_padding + 1``.

``groups`` > 1 is composed of ``groups`` plain transposed convolutions on channel views, as
conv2d's groups are (``_grouped``); the weight is then (C_in, C_out/groups, kh, kw).
"""
from __future__ import annotations

from ..autograd import Function
from ..backends.contract import View, numel, pair
from ..dtypes import autocast_cast
from ..tensor import Tensor
from .common import filled
from .conv import (added, check_conv_args, correlate, image_chunks, images, padded, place_,
                   sum_of_products, with_bias, written_in_chunks)
from .registry import op
from .shape import cat, contiguous, narrow


def transposed_out_size(size, k, stride, padding, dilation, output_padding):
    return (size - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1


def _spread(x, dim, stride):
    """``stride - 1`` zeros between neighbours along ``dim`` (2 or 3) of an (N, C, H, W) x."""
    if stride == 1:
        return x
    size = x.shape[dim]
    shape = list(x.shape)
    shape.insert(dim + 1, stride - 1)
    interleaved = cat([x.unsqueeze(dim + 1), filled(x, shape, 0.0)], dim + 1)
    shape = list(x.shape)
    shape[dim] = size * stride
    return interleaved.reshape(*shape).narrow(dim, 0, (size - 1) * stride + 1)


class ConvTranspose2d(Function):
    """y = conv_transpose2d(x, weight, bias); x (N,C_in,H,W), weight (C_in,C_out,kh,kw)."""

    def forward(self, x, weight, bias, stride, padding, output_padding, dilation):
        x, weight = contiguous(x), contiguous(weight)
        n, cin, h, w = x.shape
        _, cout, kh, kw = weight.shape
        oh, ow = (transposed_out_size(s, k, st, p, d, op) for s, k, st, p, d, op in
                  zip((h, w), (kh, kw), stride, padding, dilation, output_padding))
        k, pixels = cout * kh * kw, h * w
        be = x.backend
        out_shape = (n, cout, oh, ow)
        opix = oh * ow

        def transpose_convolve(start, count):
            wt_v = View(weight._buf, (count, k, cin), (0, 1, k), weight._offset)  # W2^T
            x_v = images(x._buf, (n, cin, pixels), start, count, x._offset)
            cols = View(be.matmul(wt_v, x_v), (count, k, pixels), (k * pixels, pixels, 1), 0)
            out = be.col2im(cols, (count, cout, oh, ow), (kh, kw), stride, padding, dilation)
            if bias is None:
                return out
            out_v = View(out, (count, cout, opix), (cout * opix, opix, 1), 0)
            b_v = View(bias._buf, (count, cout, opix), (0, bias._strides[0], 0), bias._offset)
            return be.binary("add", out_v, b_v)

        out = written_in_chunks(be, n, image_chunks(n, k * pixels * x.dtype.itemsize),
                                out_shape, x.dtype, transpose_convolve)
        self.geometry = ((kh, kw), stride, padding, dilation, (n, cin, h, w), k)
        self.save_for_backward(x, weight)
        return Tensor._dense(out, out_shape, x.device)

    def backward(self, g):
        x, weight = self.saved_tensors
        kernel, stride, padding, dilation, (n, cin, h, w), k = self.geometry
        pixels = h * w
        g = contiguous(g)
        be = g.backend
        chunks = image_chunks(n, k * pixels * g.dtype.itemsize)
        grad_x = grad_w = grad_b = None
        whole = len(chunks) == 1
        needs_x, needs_w = self.needs_input_grad[:2]
        x_buf = None if whole or not needs_x else be.empty(numel(x.shape), g.dtype)
        w_buf = None
        for start, count in chunks:  # the columns of g, a few images at a time
            gcols = View(be.im2col(images(g._buf, g.shape, start, count, g._offset), kernel,
                                   stride, padding, dilation), (count, k, pixels),
                         (k * pixels, pixels, 1), 0)
            if needs_x:
                w2 = View(weight._buf, (count, cin, k), (0, k, 1), weight._offset)
                part = be.matmul(w2, gcols)
                if whole:
                    x_buf = part
                else:
                    place_(be, x_buf, x.shape, start, count, part)
            if needs_w:
                part = sum_of_products(be, images(x._buf, (n, cin, pixels), start, count,
                                                  x._offset), gcols)
                w_buf = added(be, w_buf, part, tuple(weight.shape))
        if needs_x:
            grad_x = Tensor._dense(x_buf, x.shape, g.device)
        if needs_w:
            grad_w = Tensor._dense(w_buf, weight.shape, g.device)
        if len(self.needs_input_grad) > 2 and self.needs_input_grad[2]:
            grad_b = Tensor._dense(be.reduce("sum", g._view(), (0, 2, 3)), (g.shape[1],),
                                   g.device)
        return grad_x, grad_w, grad_b, None, None, None, None

    def unfused(self, x, weight, bias, stride, padding, output_padding, dilation):
        """The unfused form: the convolution this one is the adjoint of:
        the input spread by the stride (zeros between pixels), padded by ``d*(k-1) - p`` (plus
        ``output_padding`` after), correlated with the kernel flipped and its channels swapped."""
        kh, kw = weight.shape[2:]
        xs = _spread(_spread(x, 2, stride[0]), 3, stride[1])
        for dim, k, p, extra, d in zip((2, 3), (kh, kw), padding, output_padding, dilation):
            xs = padded(xs, dim, d * (k - 1) - p, d * (k - 1) - p + extra)
        out_hw = tuple(s - d * (k - 1) for s, k, d in zip(xs.shape[2:], (kh, kw), dilation))
        return with_bias(correlate(xs, lambda i, j: weight[:, :, kh - 1 - i, kw - 1 - j],
                                     (kh, kw), out_hw, (1, 1), dilation), bias)


@op(method=False, F=True, module="ConvTranspose2d", tol=(1e-5, 1e-5),
    example=lambda r: (r.standard_normal((1, 2, 3, 3)), r.standard_normal((2, 3, 3, 3)),
                       r.standard_normal(3), 2))
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1, *, name="conv_transpose2d"):
    """``torch.nn.functional.conv_transpose2d``: (N,C_in,H,W) or unbatched (C_in,H,W) input,
    weight (C_in, C_out/groups, kH, kW), int or pair stride/padding/output_padding/dilation;
    ``groups`` > 1 as one transposed convolution per group (:func:`_grouped`)."""
    input, weight, bias = autocast_cast("conv_transpose2d", input, weight, bias)
    if groups != 1:
        return _grouped(input, weight, bias, stride, padding, output_padding, groups, dilation,
                        name)
    x, unbatched = check_conv_args(name, input, weight, bias, groups, transposed=True)
    kh, kw = weight.shape[2:]
    stride, padding = pair(stride, "stride"), pair(padding, "padding")
    output_padding, dilation = pair(output_padding, "output_padding"), pair(dilation, "dilation")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0 or min(output_padding) < 0:
        raise RuntimeError(f"{name}: stride and dilation must be positive, padding and "
                           f"output_padding non-negative, got stride={stride}, padding="
                           f"{padding}, output_padding={output_padding}, dilation={dilation}")
    if any(op >= max(s, d) for op, s, d in zip(output_padding, stride, dilation)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, "
                           f"but got output_padding_height: {output_padding[0]} "
                           f"output_padding_width: {output_padding[1]} stride_height: "
                           f"{stride[0]} stride_width: {stride[1]} dilation_height: "
                           f"{dilation[0]} dilation_width: {dilation[1]}")
    size = [transposed_out_size(s, k, st, p, d, op) for s, k, st, p, d, op in
            zip(x.shape[2:], (kh, kw), stride, padding, dilation, output_padding)]
    if min(size) < 1:
        raise RuntimeError(f"{name}: the output size {tuple(size)} is too small for input "
                           f"{tuple(x.shape[2:])} with kernel {(kh, kw)}, stride {stride} and "
                           f"padding {padding}")
    out = ConvTranspose2d.apply(x, weight, bias, stride, padding, output_padding, dilation)
    return out.squeeze(0) if unbatched else out


def _grouped(input, weight, bias, stride, padding, output_padding, groups, dilation, name):
    """A grouped transposed convolution composed of ``groups`` plain ones: group g maps input
    channels [g*C/groups, (g+1)*C/groups) through weight rows of the same range (weight
    (C, OC/groups, kH, kW)) to output channels [g*OC/groups, (g+1)*OC/groups); the outputs are
    concatenated along the channels. Each group is a view (no copy) until the concatenation."""
    c = input.shape[-3] if input.ndim >= 3 else None
    if not isinstance(groups, int) or groups < 1:
        raise RuntimeError(f"{name}: non-positive groups is not supported (got {groups})")
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {list(weight.shape)} instead")
    if weight.ndim != 4 or c != weight.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"input{list(input.shape)} to have {weight.shape[0]} channels, but "
                           f"got {c} channels instead")
    cg, og = c // groups, weight.shape[1]
    if bias is not None and tuple(bias.shape) != (og * groups,):
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"bias to be 1-dimensional with {og * groups} elements, but got bias "
                           f"of size {list(bias.shape)} instead")
    return cat([conv_transpose2d(narrow(input, -3, g * cg, cg), narrow(weight, 0, g * cg, cg),
                                 None if bias is None else narrow(bias, 0, g * og, og),
                                 stride, padding, output_padding, 1, dilation, name=name)
                for g in range(groups)], -3)
