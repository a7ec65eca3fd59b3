"""Composite forms: the fused ops written again in differentiable Tensor ops.

A fused op (one kernel forward, one kernel backward: a convolution, a pooling, a normalisation,
softmax) records no graph in its backward, so a gradient of its gradient (WGAN-GP's gradient
penalty, a Hessian-vector product, MAML) cannot come from it. Each such Function names its
composite here (``composite = composite.conv2d``); under ``create_graph=True`` the engine
differentiates the composite instead (``autograd._composite_backward``), to any order. Every
composite is built from slices, concatenations, reshapes, matmuls, sums and elementwise maps,
whose backwards are Tensor ops again. They are slower than the fused ops and run only for
higher-order gradients; the tests check that each equals its fused op, value and gradient.

Each takes the arguments the Function's ``forward`` takes (``ctx``, the node, first) and
returns its outputs; an output that gets no gradient (an argmax, a batch statistic) is None.
"""
from __future__ import annotations

import numpy as np

from ..backends.contract import conv_out_size
from ..tensor import Tensor
from .elementwise import where
from .shape import cat, stack


def _filled(like, shape, value):
    return Tensor._full(tuple(shape), value, like.dtype, like.device)


def _padded(x, dim, before, after, value=0.0):
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
            parts.insert(at_end * len(parts), _filled(x, shape, value))
    return cat(parts, dim) if len(parts) > 1 else x


def _padded2d(x, padding, value=0.0):
    (ph, pw) = padding
    return _padded(_padded(x, 2, ph, ph, value), 3, pw, pw, value)


def _window(xp, i, j, out_hw, stride, dilation):
    """The pixels of the padded input ``xp`` that kernel tap (i, j) meets, one per output pixel:
    ``xp[:, :, i*dh + sh*r, j*dw + sw*s]`` for r < OH, s < OW."""
    (oh, ow), (sh, sw), (dh, dw) = out_hw, stride, dilation
    return xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]


def _correlate(xp, tap_weight, kernel, out_hw, stride, dilation):
    """sum over taps of window(i, j) @ tap_weight(i, j): (N, C, OH, OW) x (C, OC) -> (N, OC,
    OH, OW). The convolution as kh*kw matrix products, one per kernel tap."""
    out = None
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            term = _window(xp, i, j, out_hw, stride, dilation).permute(0, 2, 3, 1) \
                @ tap_weight(i, j)
            out = term if out is None else out + term
    return out.permute(0, 3, 1, 2)


def _with_bias(out, bias):
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


def conv2d(ctx, x, weight, bias, stride, padding, dilation):
    """``ops/conv.py``'s Conv2d: the input zero-padded, then one product per kernel tap."""
    kh, kw = weight.shape[2:]
    out_hw = tuple(conv_out_size(s, k, st, p, d) for s, k, st, p, d in
                   zip(x.shape[2:], (kh, kw), stride, padding, dilation))
    return _with_bias(_correlate(_padded2d(x, padding), lambda i, j: weight[:, :, i, j].t(),
                                 (kh, kw), out_hw, stride, dilation), bias)


def _spread(x, dim, stride):
    """``stride - 1`` zeros between neighbours along ``dim`` (2 or 3) of an (N, C, H, W) x."""
    if stride == 1:
        return x
    size = x.shape[dim]
    shape = list(x.shape)
    shape.insert(dim + 1, stride - 1)
    interleaved = cat([x.unsqueeze(dim + 1), _filled(x, shape, 0.0)], dim + 1)
    shape = list(x.shape)
    shape[dim] = size * stride
    return interleaved.reshape(*shape).narrow(dim, 0, (size - 1) * stride + 1)


def conv_transpose2d(ctx, x, weight, bias, stride, padding, output_padding, dilation):
    """``ops/conv_transpose.py``'s ConvTranspose2d as the convolution it is the adjoint of:
    the input spread by the stride (zeros between pixels), padded by ``d*(k-1) - p`` (plus
    ``output_padding`` after), correlated with the kernel flipped and its channels swapped."""
    kh, kw = weight.shape[2:]
    xs = _spread(_spread(x, 2, stride[0]), 3, stride[1])
    for dim, k, p, op, d in zip((2, 3), (kh, kw), padding, output_padding, dilation):
        xs = _padded(xs, dim, d * (k - 1) - p, d * (k - 1) - p + op)
    out_hw = tuple(s - d * (k - 1) for s, k, d in zip(xs.shape[2:], (kh, kw), dilation))
    return _with_bias(_correlate(xs, lambda i, j: weight[:, :, kh - 1 - i, kw - 1 - j],
                                 (kh, kw), out_hw, (1, 1), dilation), bias)


def _picked(x, dim, index):
    """``x`` at ``index`` along ``dim`` (``index`` of x's rank, size 1 along ``dim``), summed
    out: a mask (``where``: a product with a one-hot would turn a -inf elsewhere into NaN)."""
    ramp_shape = [1] * x.ndim
    ramp_shape[dim] = x.shape[dim]
    ramp = Tensor._from_array(np.arange(x.shape[dim]).reshape(ramp_shape), x.device)
    return where(ramp == index, x, _filled(x, (), 0.0)).sum(dim)


def arg_extreme(ctx, x, op, dim, keepdim):
    """``ops/reduce.py``'s ArgExtreme (max or min along ``dim``, with indices): the element
    the forward's index names."""
    values = _picked(x, dim, ctx.indices if keepdim else ctx.indices.unsqueeze(dim))
    return (values.unsqueeze(dim) if keepdim else values), None


def sort(ctx, x, descending):
    """``ops/sort.py``'s Sort: x gathered at the indices the forward found."""
    return x.gather(-1, ctx.indices), None


def embedding(ctx, weight, idx, padding_idx=None):
    """``ops/rnn.py``'s EmbeddingFunction: rows of ``weight`` selected (the ``padding_idx``
    row as a constant: it gets no gradient)."""
    flat = idx.reshape(-1)
    rows = weight.index_select(0, flat)
    if padding_idx is not None:
        rows = where((flat == padding_idx).unsqueeze(1), rows.detach(), rows)
    return rows.reshape(*idx.shape, weight.shape[1])


def nll_loss(ctx, logp, target, coef):
    """``ops/loss.py``'s NLLLoss: ``-coef_r * logp[r, target_r]`` (an ignored row's target may
    lie outside the classes: it picks nothing, and its coef is 0)."""
    return -_picked(logp, 1, target.unsqueeze(1)) * coef


def cross_entropy(ctx, x, target, coef, valid, weight, smoothing):
    """``ops/loss.py``'s CrossEntropy over rows (the classes last): log_softmax, NLL, and
    label smoothing's spread."""
    logp = x.reshape(-1, x.shape[-1]).log_softmax(1)
    loss = nll_loss(ctx, logp, target, coef)
    if smoothing:
        weighted = logp if weight is None else logp * weight
        c = x.shape[-1]
        loss = loss * (1.0 - smoothing) - weighted.sum(1) * valid * (smoothing / c)
    return loss


def _pool_taps(xp, kernel, stride, out_hw):
    return [_window(xp, i, j, out_hw, stride, (1, 1))
            for i in range(kernel[0]) for j in range(kernel[1])]


def _pool_out(x, kernel, stride, padding):
    return tuple(conv_out_size(s, k, st, p) for s, k, st, p in
                 zip(x.shape[2:], kernel, stride, padding))


def max_pool2d(ctx, x, kernel, stride, padding):
    """``ops/pool.py``'s MaxPool2d: the taps stacked last, padded with -inf, and the max along
    them (the gradient goes to the first maximum in the window's row-major order, the element
    the fused op's argmax names)."""
    taps = _pool_taps(_padded2d(x, padding, float("-inf")), kernel, stride,
                      _pool_out(x, kernel, stride, padding))
    return stack(taps, -1).max(-1).values, None


def avg_pool2d(ctx, x, kernel, stride, padding, count_include_pad):
    """``ops/pool.py``'s AvgPool2d: the sum of the taps over the zero-padded input, divided by
    the window size (or, without ``count_include_pad``, by how many real pixels each window
    holds: the same sum over a padded tensor of ones)."""
    out_hw = _pool_out(x, kernel, stride, padding)
    taps = _pool_taps(_padded2d(x, padding), kernel, stride, out_hw)
    total = sum(taps[1:], taps[0])
    if count_include_pad:
        return total / (kernel[0] * kernel[1])
    ones = _padded2d(_filled(x, (1, 1) + tuple(x.shape[2:]), 1.0), padding)
    taps = _pool_taps(ones, kernel, stride, out_hw)
    return total / sum(taps[1:], taps[0])


def softmax(ctx, x, log):
    """``ops/softmax.py``'s Softmax along the last dim (the row maximum subtracted first, as a
    constant: softmax does not change when every input moves by the same amount)."""
    rows = x.reshape(1) if x.ndim == 0 else x
    shifted = rows - rows.max(-1, keepdim=True).values.detach()
    if log:
        out = shifted - shifted.exp().sum(-1, keepdim=True).log()
    else:
        e = shifted.exp()
        out = e / e.sum(-1, keepdim=True)
    return out.reshape(x.shape)


def _normalised(x, dims, eps):
    centred = x - x.mean(dims, keepdim=True)
    return centred * ((centred * centred).mean(dims, keepdim=True) + eps) ** -0.5


def layer_norm(ctx, x, weight, bias, cols, eps):
    """``ops/layernorm.py``: each row of ``cols`` features normalised (biased variance)."""
    y = _normalised(x.reshape(-1, cols), 1, eps)
    if weight is not None:
        y = y * weight.reshape(cols)
    if bias is not None:
        y = y + bias.reshape(cols)
    return y.reshape(x.shape)


def batch_norm(ctx, x, weight, bias, eps):
    """``ops/normalization.py``'s BatchNormTrain: each channel normalised with its batch
    statistics (the batch mean and variance outputs get no gradient)."""
    dims = (0,) + tuple(range(2, x.ndim))
    channel = (1, -1) + (1,) * (x.ndim - 2)
    y = _normalised(x, dims, eps)
    if weight is not None:
        y = y * weight.to(x.dtype).reshape(*channel)
    if bias is not None:
        y = y + bias.to(x.dtype).reshape(*channel)
    return y, None, None


# --- recurrent cells and sequences (ops/rnn.py) -------------------------------------------------
def _lstm_step(gates, c_prev):
    """PyTorch's LSTM cell on gate pre-activations in the order (i, f, g, o)."""
    hs = c_prev.shape[1]
    i, f, g, o = (gates.narrow(1, k * hs, hs) for k in range(4))
    c = f.sigmoid() * c_prev + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def lstm_cell(ctx, gates, c_prev):
    """``LSTMCellFunction``: (h, c) from the gates and the previous cell state."""
    return _lstm_step(gates, c_prev)


def gru_cell(ctx, gx, gh, h_prev):
    """``GRUCellFunction``: PyTorch's GRU step from the two projections (gate order r, z, n)."""
    hs = h_prev.shape[1]
    r = (gx.narrow(1, 0, hs) + gh.narrow(1, 0, hs)).sigmoid()
    z = (gx.narrow(1, hs, hs) + gh.narrow(1, hs, hs)).sigmoid()
    n = (gx.narrow(1, 2 * hs, hs) + r * gh.narrow(1, 2 * hs, hs)).tanh()
    return n + z * (h_prev - n)


def _recurrence(step):
    """A ``Recurrence`` composite over ``step(gates, state) -> (h, state)``: the sequence one
    step at a time, each step a matmul with W_hh^T and the cell's maps."""
    def recurrence(ctx, xproj, h0, c0, w_hh, reverse=False):
        steps = xproj.shape[0]
        h, state = h0, c0
        if ctx.has_state and state is None:
            state = _filled(xproj, (xproj.shape[1], w_hh.shape[1]), 0.0)
        outputs = [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            gates = xproj[t] if h is None else xproj[t] + h @ w_hh.t()
            h, state = step(gates, state)
            outputs[t] = h
        output = stack(outputs, 0)
        return (output, h, state) if ctx.has_state else (output, h)
    return recurrence


lstm_recurrence = _recurrence(_lstm_step)
tanh_recurrence = _recurrence(lambda gates, state: (gates.tanh(), None))
relu_recurrence = _recurrence(lambda gates, state: (gates.relu(), None))


def unbind_steps(ctx, x):
    """``UnbindSteps``: x[0], x[1], ... (slices)."""
    return tuple(x[t] for t in range(x.shape[0]))


# --- scans (ops/scan.py) --------------------------------------------------------------------------
def _running(x, dim, combine):
    """The inclusive scan of ``x`` along ``dim`` as a chain of ``combine`` calls (what a
    gradient of any order differentiates exactly, zeros of a product included)."""
    total = x.narrow(dim, 0, 1)
    parts = [total]
    for k in range(1, x.shape[dim]):
        total = combine(total, x.narrow(dim, k, 1))
        parts.append(total)
    return parts


def scan(ctx, x, op, dim):
    """``Scan``: cumsum or cumprod along ``dim``."""
    parts = _running(x, dim, (lambda a, b: a + b) if op == "sum" else (lambda a, b: a * b))
    return cat(parts, dim)


def prod(ctx, x, dim, keepdim):
    """``Prod``: the product along ``dim`` (the last running product)."""
    total = _running(x, dim, lambda a, b: a * b)[-1]
    return total if keepdim else total.squeeze(dim)


# --- attention (ops/attention.py) -----------------------------------------------------------------
def attention(ctx, q, k, v, mask, causal, scale):
    """``FlashAttention`` on (B, L, E), (B, S, E), (B, S, Ev): softmax(q k^T * scale + mask)
    @ v, with the causal mask's -inf above the diagonal; a row masked everywhere gives 0."""
    scores = q @ k.transpose(1, 2) * scale
    if mask is not None:  # the additive mask, a backend view
        scores = scores + Tensor(mask.buf, mask.shape, mask.strides, mask.offset, q.device)
    if causal:
        above = np.triu(np.full(tuple(scores.shape[-2:]), -np.inf, q.dtype), 1)
        scores = scores + Tensor._from_array(above, q.device)
    dead = scores.max(-1, keepdim=True).values.detach() == float("-inf")
    zero = _filled(scores, (), 0.0)
    return where(dead, zero, where(dead, zero, scores).softmax(-1)) @ v


def _window_positions(base, window):
    """The flat positions in dense ``base`` of a window (shape, strides, offset): an int64
    tensor of the window's shape."""
    shape, strides, offset = window
    pos = np.full(shape, offset, np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        ramp = [1] * len(shape)
        ramp[d] = n
        pos = pos + np.arange(n, dtype=np.int64).reshape(ramp) * s
    return Tensor._from_array(pos, base.device)


def copy_slices(ctx, base, values, window):
    """``ops/inplace.py``'s CopySlices: ``base`` with its window holding ``values`` (a write
    through a view): the values scattered to the window's flat positions, chosen there by a
    mask (``where``, so an inf outside the window stays inf)."""
    pos = _window_positions(base, window).reshape(-1)
    flat = base.reshape(-1)
    placed = _filled(flat, flat.shape, 0.0).scatter_add(
        0, pos, values.expand(*window[0]).reshape(-1))
    inside = _filled(pos, flat.shape, 0).scatter_add(0, pos, _filled(pos, pos.shape, 1)) > 0
    return where(inside, placed, flat).reshape(base.shape)


def view_of(ctx, base, window):
    """``ops/inplace.py``'s ViewOf: the window of ``base`` (its elements picked by flat
    position)."""
    pos = _window_positions(base, window)
    return base.reshape(-1).index_select(0, pos.reshape(-1)).reshape(pos.shape)
