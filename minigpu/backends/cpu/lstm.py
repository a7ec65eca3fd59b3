"""NumPy reference of the fused LSTM cell.

The gate pre-activations ``gates = x @ W_ih^T + b_ih + h @ W_hh^T + b_hh`` come from matmuls;
these two primitives do only the cell's pointwise math, in PyTorch's gate order (i, f, g, o).
Every array operation stays in the input dtype (float32 in, float32 out), in the same order as
the CUDA kernels of ``backends/cuda/lstm.py``, so the two backends agree to a few float32 ulps.
"""
from __future__ import annotations

import numpy as np

from ..optable import sigmoid
from .memory import array, flat


def lstm_cell(gates, c_prev):
    """gates (N, 4H), c_prev (N, H) -> (h, c, act) flat buffers of (N, H), (N, H), (N, 4H).

    act = [sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)]; c = f*c_prev + i*g; h = o*tanh(c).
    One sigmoid over all four blocks (then tanh over the g block in place), and the products
    written into their outputs (``out=``): a few passes over (N, 4H) and no temporaries,
    elementwise the same values.
    """
    g4, c0 = array(gates), array(c_prev)
    hs = g4.shape[1] // 4
    act = sigmoid(g4)
    np.tanh(g4[:, 2 * hs:3 * hs], out=act[:, 2 * hs:3 * hs])
    i, f, g, o = (act[:, k * hs:(k + 1) * hs] for k in range(4))
    c = np.multiply(f, c0)
    c += i * g
    h = np.tanh(c)
    h *= o
    return flat(h), flat(c), flat(act)


def lstm_cell_backward(act, c_prev, c, grad_h, grad_c):
    """The cell's backward: (grad_gates (N, 4H), grad_c_prev (N, H)) as flat buffers.

    With tc = tanh(c): dc = grad_c + grad_h*o*(1 - tc^2) (the cell state's total gradient);
    d(pre-activations) = [dc*g*i(1-i), dc*c_prev*f(1-f), dc*i*(1-g^2), grad_h*tc*o(1-o)];
    grad_c_prev = dc*f. Each product is formed left to right in its block of the output.
    """
    a = array(act)
    c0, cv, gh, gc = array(c_prev), array(c), array(grad_h), array(grad_c)
    hs = a.shape[1] // 4
    i, f, g, o = (a[:, k * hs:(k + 1) * hs] for k in range(4))
    one = a.dtype.type(1)
    tc = np.tanh(cv)
    dc = np.multiply(tc, tc)
    np.subtract(one, dc, out=dc)
    dc *= np.multiply(gh, o)
    dc += gc  # gc + (...): addition commutes exactly
    out = np.empty(a.shape, a.dtype)
    di, df, dg, do = (out[:, k * hs:(k + 1) * hs] for k in range(4))
    one_minus = np.subtract(one, a)
    np.multiply(dc, g, out=di)
    di *= i
    di *= one_minus[:, 0 * hs:1 * hs]
    np.multiply(dc, c0, out=df)
    df *= f
    df *= one_minus[:, 1 * hs:2 * hs]
    np.multiply(g, g, out=dg)
    np.subtract(one, dg, out=dg)
    dg *= np.multiply(dc, i)  # (dc*i) * (1 - g*g): the same product, its factors in order
    np.multiply(gh, tc, out=do)
    do *= o
    do *= one_minus[:, 3 * hs:4 * hs]
    return flat(out), flat(dc * f)
