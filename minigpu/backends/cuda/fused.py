"""Fused bias + activation: the epilogue of a Linear layer, ``act(x + bias)``, in one kernel.

A Linear layer's matmul writes its (R, C) output; the bias add and the activation are then
pure elementwise work, limited by memory bandwidth. Counting global-memory passes over the
R*C elements (the bias row is C elements, read from cache, and is ignored):

* unfused (``bias_act_unfused``): ``t = x + bias`` (read x, write t) then ``y = act(t)``
  (read t, write y): 4 passes, 2 launches and an (R, C) temporary. The add is the general
  broadcast path of ``elementwise.binary`` (a div/mod pair per dimension and operand).
* fused (``bias_act``): read x, write y: **2 passes, 1 launch**, no temporary; ``x + bias``
  lives in a register between the add and the activation.

So the fused kernel moves half the bytes and should run about 2x faster once the tensor is
large enough to be bandwidth bound (``python -m minigpu.bench --suite lessons``). This is the
same fusion ``optim.py`` (Adam: 15 -> 7 passes) and ``lstm.py`` (LSTM cell: 30 -> 11 passes)
teach, on the smallest example that shows it; cuBLAS/cuDNN call it an *epilogue*.

The activations are the ``elementwise`` device functions themselves (``op_relu``,
``op_leaky_relu_select``, ...), so fused and unfused compute bit-identical values: the only
difference is whether ``x + bias`` makes a round trip through global memory, and the store
rounds it to the buffer dtype, which is the dtype the fused kernel computes in anyway.
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..contract import View, dense
from .device import current_stream, empty, launch_1d, scalar
from .elementwise import (binary, op_identity, op_leaky_relu_select, op_relu, op_sigmoid,
                          op_tanh, unary)

ACTIVATIONS = {"identity": op_identity, "relu": op_relu, "leaky_relu": op_leaky_relu_select,
               "tanh": op_tanh, "sigmoid": op_sigmoid}
"""Activation name -> the elementwise device function ``f(x, alpha, beta)`` both paths use."""


@functools.lru_cache(maxsize=None)
def bias_act_kernel(act: str):
    """The fused kernel for activation ``act`` (built once per activation, compiled lazily)."""
    f = ACTIVATIONS[act]

    @cuda.jit
    def bias_act(x, xs0, xs1, xo, bias, bs, bo, cols, out, alpha):
        """out[i] = act(x[r, c] + bias[c], alpha) for the (R, C) view x, i = r*C + c.

        Thread mapping: one thread per output element, grid-stride, c fastest; the bias index
        is i % C (computed as i - (i // C) * C, one division serving both r and c).
        Block/grid: 1-D, ``device.launch_1d`` (256 threads, enough blocks to cover R*C, capped).
        Memory: one coalesced load of x (when its column stride is 1), one coalesced store; the
        bias load is a run of consecutive addresses shared by every row, served from L1/L2.
        Faster than ``bias_act_unfused``: 2 passes over R*C instead of 4, one launch instead
        of two, and no (R, C) temporary.
        """
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            r = i // cols
            c = i - r * cols
            out[i] = f(x[xo + r * xs0 + c * xs1] + bias[bo + c * bs], alpha, alpha)

    return bias_act


def _check(x: View, bias: View, act: str):
    if act not in ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}; expected one of {sorted(ACTIVATIONS)}")
    if x.ndim != 2 or bias.ndim != 1 or bias.shape[0] != x.shape[1]:
        raise ValueError(f"bias_act expects x of shape (R, C) and bias of shape (C,), got "
                         f"{tuple(x.shape)} and {tuple(bias.shape)}")
    if x.dtype != bias.dtype:
        raise ValueError(f"bias_act: x and bias must have the same dtype, got {x.dtype} and "
                         f"{bias.dtype}")


def bias_act(x: View, bias: View, act: str, alpha=0, *, block=None, max_blocks=None):
    """``act(x + bias)`` for x (R, C) and bias (C,) views, in one fused launch -> new dense
    (R, C) buffer. ``alpha`` is leaky_relu's negative slope (ignored by the others)."""
    _check(x, bias, act)
    rows, cols = x.shape
    out = empty(rows * cols, x.dtype)
    if rows * cols == 0:
        return out
    grid, blk = launch_1d(rows * cols, block, max_blocks)
    bias_act_kernel(act)[grid, blk, current_stream()](
        x.buf, x.strides[0], x.strides[1], x.offset, bias.buf, bias.strides[0], bias.offset,
        cols, out, scalar(alpha, x.dtype))
    return out


def bias_act_unfused(x: View, bias: View, act: str, alpha=0):
    """The same ``act(x + bias)`` as two elementwise launches: the broadcast add
    (``binary('add', x, bias expanded to (R, C))``), then ``unary(act, t)``. The lesson's
    baseline: tested equal to :func:`bias_act`. (``identity`` is just the add: one launch.)"""
    _check(x, bias, act)
    rows, cols = x.shape
    expanded = View(bias.buf, (rows, cols), (0, bias.strides[0]), bias.offset)
    t = binary("add", x, expanded)
    if act == "identity" or rows * cols == 0:
        return t
    return unary(act, dense(t, (rows, cols)), alpha)


def reference(x: np.ndarray, bias: np.ndarray, act: str, alpha=0) -> np.ndarray:
    """NumPy ``act(x + bias)`` in the inputs' dtype (what the tests compare against)."""
    t = x + bias
    if act == "relu":
        return np.where(t < 0, t.dtype.type(0), t)
    if act == "leaky_relu":
        return np.where(t > 0, t, t * t.dtype.type(alpha))
    if act == "tanh":
        return np.tanh(t)
    if act == "sigmoid":
        return (1 / (1 + np.exp(-t.astype(np.float64)))).astype(t.dtype)
    return t
