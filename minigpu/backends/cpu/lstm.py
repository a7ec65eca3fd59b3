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
    One sigmoid over all four blocks (then tanh over the g block in place): a few calls over
    (N, 4H) instead of one call sequence per gate, with elementwise the same values.
    """
    g4, c0 = array(gates), array(c_prev)
    hs = g4.shape[1] // 4
    act = sigmoid(g4)
    act[:, 2 * hs:3 * hs] = np.tanh(g4[:, 2 * hs:3 * hs])
    i, f, g, o = (act[:, k * hs:(k + 1) * hs] for k in range(4))
    c = f * c0 + i * g
    h = o * np.tanh(c)
    return flat(h), flat(c), flat(act)


def lstm_cell_backward(act, c_prev, c, grad_h, grad_c):
    """The cell's backward: (grad_gates (N, 4H), grad_c_prev (N, H)) as flat buffers.

    With tc = tanh(c): dc = grad_c + grad_h*o*(1 - tc^2) (the cell state's total gradient);
    d(pre-activations) = [dc*g*i(1-i), dc*c_prev*f(1-f), dc*i*(1-g^2), grad_h*tc*o(1-o)];
    grad_c_prev = dc*f.
    """
    a = array(act)
    c0, cv, gh, gc = array(c_prev), array(c), array(grad_h), array(grad_c)
    hs = a.shape[1] // 4
    i, f, g, o = (a[:, k * hs:(k + 1) * hs] for k in range(4))
    one = a.dtype.type(1)
    tc = np.tanh(cv)
    dc = gc + gh * o * (one - tc * tc)
    grad_gates = np.empty(a.shape, a.dtype)
    grad_gates[:, 0 * hs:1 * hs] = dc * g * i * (one - i)
    grad_gates[:, 1 * hs:2 * hs] = dc * c0 * f * (one - f)
    grad_gates[:, 2 * hs:3 * hs] = dc * i * (one - g * g)
    grad_gates[:, 3 * hs:4 * hs] = gh * tc * o * (one - o)
    return flat(grad_gates), flat(dc * f)
