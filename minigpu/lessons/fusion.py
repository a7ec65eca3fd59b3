"""Kernel fusion: elementwise work is bound by memory traffic and launches, not arithmetic.

Three experiments, each an unfused "before" against one fused kernel:

* bias + activation (``bias_act_unfused`` -> ``bias_act``, both here): 4 -> 2 passes;
* the Adam step (``adam_step_unfused_`` here -> the production ``optim.adam_step_``):
  15 -> 7 passes, 5 launches -> 1;
* the LSTM cell (``lstm_cell_unfused`` here -> the production ``lstm.lstm_cell``):
  30 -> 11 passes, 13 launches -> 1.

Fused bias + activation: the epilogue of a Linear layer, ``act(x + bias)``, in one kernel.

A Linear layer's matmul writes its (R, C) output; the bias add and the activation are then
pure elementwise work, limited by memory bandwidth. Counting global-memory passes over the
R*C elements (the bias row is C elements, read from cache, and is ignored):

* unfused (``bias_act_unfused``): ``t = x + bias`` (read x, write t) then ``y = act(t)``
  (read t, write y): 4 passes, 2 launches and an (R, C) temporary. The add is the general
  broadcast path of ``elementwise.binary`` (a div/mod pair per dimension and operand).
* fused (``bias_act``): read x, write y: **2 passes, 1 launch**, no temporary; ``x + bias``
  lives in a register between the add and the activation.

So the fused kernel moves about half the bytes (counted on the simulator:
``python -m minigpu.lessons fusion``); on a GPU, expect it to be faster once the tensor is
large enough to be bandwidth bound (``python -m minigpu.tools.bench --lesson fusion`` times
both). This is the same fusion ``optim.py`` (Adam: 15 -> 7 passes) and ``lstm.py`` (LSTM cell: 30 -> 11 passes)
teach, on the smallest example that shows it; cuBLAS/cuDNN call it an *epilogue*.

The activations are the ``elementwise`` device functions themselves (``unary_relu``,
``unary_leaky_relu``, ...), so fused and unfused compute bit-identical values: the only
difference is whether ``x + bias`` makes a round trip through global memory, and the store
rounds it to the buffer dtype, which is the dtype the fused kernel computes in anyway.
"""
from __future__ import annotations

import functools

import math

import numpy as np
from numba import cuda

from ..backends.contract import View, dense
from ..backends.cuda.device import BLOCK, current_stream, empty, launch_1d, scalar
from ..backends.cuda.elementwise import UNARY, binary, unary
from ..backends.cuda.lstm import lstm_cell
from ..backends.cuda.memory import assign_
from ..backends.cuda.optim import adam_plan, adam_step_
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant

ACTIVATIONS = {act: UNARY[act] for act in ("identity", "relu", "leaky_relu", "tanh", "sigmoid")}
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


# --- Adam: one elementwise launch per line of the rule, against optim.adam_step_ -------------
@cuda.jit
def axpby_kernel(out, a, x, b, y):
    """``out = a*x + b*y`` elementwise (``out`` may alias ``x``). 3 passes."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = a * x[i] + b * y[i]


@cuda.jit
def axpbyy_kernel(out, a, x, b, y):
    """``out = a*x + b*y*y`` elementwise (``out`` may alias ``x``). 3 passes."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = a * x[i] + b * y[i] * y[i]


@cuda.jit
def sqrt_affine_kernel(out, x, c, e):
    """``out = sqrt(x)/c + e`` elementwise. 2 passes."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = math.sqrt(x[i]) / c + e


@cuda.jit
def sub_scaled_ratio_kernel(out, s, x, y):
    """``out -= s*x/y`` elementwise. 4 passes (reads out, x, y; writes out)."""
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        out[i] = out[i] - s * x[i] / y[i]


def adam_step_unfused_(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf, step, lr, beta1,
                       beta2, eps, weight_decay, *, block=None, max_blocks=None):
    """The same Adam step as :func:`adam_step_`, as five separate elementwise launches (one
    per line of the rule). Same arithmetic in the same order, so the same results; 15
    global-memory passes and two n-element temporaries instead of 7 passes and none."""
    plan = adam_plan(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf, step, lr, beta1, beta2,
                     eps, weight_decay, block, max_blocks)
    if plan is None:
        return
    launch, (b1, omb1, b2, omb2, step_size, bc2_sqrt, eps_, wd) = plan
    n, dtype = param_buf.size, param_buf.dtype
    d = grad_buf
    if weight_decay != 0:                                       # d = g + wd*p
        d = empty(n, dtype)
        axpby_kernel[launch](d, scalar(1, dtype), grad_buf, wd, param_buf)
    axpby_kernel[launch](exp_avg_buf, b1, exp_avg_buf, omb1, d)       # m = b1*m + (1-b1)*d
    axpbyy_kernel[launch](exp_avg_sq_buf, b2, exp_avg_sq_buf, omb2, d)  # v = b2*v + (1-b2)*d*d
    denom = empty(n, dtype)
    sqrt_affine_kernel[launch](denom, exp_avg_sq_buf, bc2_sqrt, eps_)   # sqrt(v)/sqrt(bc2)+eps
    sub_scaled_ratio_kernel[launch](param_buf, step_size, exp_avg_buf, denom)  # p -= s*m/denom


def lstm_cell_unfused(gates: View, c_prev: View):
    """The same cell from separate elementwise launches: the kernel-fusion lesson.

    13 launches (9 maps + 4 copies packing ``act``) and 30 passes over (N, H) elements
    against 1 launch and 11 passes for ``lstm_cell`` (``backends/cuda/lstm.py``). Tested
    equal.
    """
    n, h4 = gates.shape
    hs = h4 // 4

    def gate(k):  # column block k of the gates: a strided view, no copy
        return View(gates.buf, (n, hs), gates.strides, gates.offset + k * hs * gates.strides[1])

    def d(buf):
        return dense(buf, (n, hs))

    i = unary("sigmoid", gate(0))
    f = unary("sigmoid", gate(1))
    g = unary("tanh", gate(2))
    o = unary("sigmoid", gate(3))
    fc = binary("mul", d(f), c_prev)
    ig = binary("mul", d(i), d(g))
    c = binary("add", d(fc), d(ig))
    tc = unary("tanh", d(c))
    h = binary("mul", d(o), d(tc))
    act = empty(n * h4, gates.dtype)
    for k, buf in enumerate((i, f, g, o)):
        assign_(View(act, (n, hs), (h4, 1), k * hs), d(buf))
    return h, c, act


# --- the experiments ---------------------------------------------------------------------------
def _bias_act_problem(inputs):
    R, C = inputs.size((16384, 4096), (5, 7))
    return Problem(f"relu(x + bias), x {R}x{C} float32", (2 * R * C + C) * 4,
                   x=inputs.tensor(R, C), bias=inputs.tensor(C))


def _adam_problem(inputs):
    n = inputs.size(1 << 26, 100)
    bufs = [inputs.upload(inputs.uniform(n)) for _ in range(3)]
    bufs.append(inputs.upload(inputs.rng.random(n)))  # the second moment is >= 0
    return Problem(f"Adam step, {n} float32 parameters", 7 * n * 4, bufs=bufs,
                   hyper=(1, 1e-3, 0.9, 0.999, 1e-8, 0.01))  # step, lr, betas, eps, decay


def _lstm_problem(inputs):
    N, H = inputs.size((4096, 1024), (3, 5))
    return Problem(f"LSTM cell, N={N} H={H} float32", 11 * N * H * 4,
                   gates=inputs.tensor(N, 4 * H, lo=-3, hi=3), c_prev=inputs.tensor(N, H))


def _bias_act_variant(fn, note):
    return Variant(fn.__name__, note, lambda p: fn(p.x, p.bias, "relu"), fn)


def _adam_variant(fn, note):
    return Variant(fn.__name__, note, lambda p: fn(*p.bufs, *p.hyper), fn)


def _lstm_variant(fn, note):
    return Variant(fn.__name__, note, lambda p: fn(p.gates, p.c_prev)[0], fn)


def _kernels():
    f = np.zeros(1, np.float32)
    s = np.float32(0)
    specs = [KernelSpec(f"fusion.bias_act[{act}]", bias_act_kernel(act),
                        (f, 1, 1, 0, f, 1, 0, 1, f, s), BLOCK) for act in ACTIVATIONS]
    for name, kernel in (("axpby", axpby_kernel), ("axpbyy", axpbyy_kernel),
                         ("sqrt_affine", sqrt_affine_kernel),
                         ("sub_scaled_ratio", sub_scaled_ratio_kernel)):
        args = (f, f, s, s) if name == "sqrt_affine" else (f, s, f, f) if name.startswith(
            "sub") else (f, s, f, s, f)
        specs.append(KernelSpec(f"fusion.adam_unfused.{name}", kernel, args, BLOCK))
    return specs


def _pictures():
    exp = LESSON.experiments[0]
    p = exp.build(Inputs(small=True))
    tr = {name: draw.variant_trace(exp, name, p, block=None)
          for name in ("bias_act_unfused", "bias_act")}
    top = 1.1 * max(max(draw.traffic_bytes(t).values()) for t in tr.values())
    return [draw.Picture(
        "fusion_traffic",
        "Global bytes per array, all blocks. Unfused, x + bias is "
        "written to a temporary and read back by the second launch; fused, it stays in a "
        "register: x is read once and out written once.",
        (draw.panel("before: add, then relu (2 launches)", draw.traffic,
                    tr["bias_act_unfused"], ymax=top),
         draw.panel("after: one fused kernel", draw.traffic, tr["bias_act"], ymax=top)))]


LESSON = Lesson(
    "fusion", "Kernel fusion",
    "fusing a chain of elementwise maps keeps the intermediates in registers: fewer passes "
    "over memory, fewer launches",
    (Experiment("fusion_bias_act", _bias_act_problem,
                (_bias_act_variant(bias_act_unfused, "add, then relu: 2 launches, 4 passes"),
                 _bias_act_variant(bias_act, "fused: 1 launch, 2 passes")),
                tol=dict(rtol=0, atol=0),
                no_production="minigpu's Linear adds the bias in its GEMM's caller; the fused "
                              "epilogue is the lesson's own kernel",
                look_for="bytes_moved of bias_act is about half of bias_act_unfused's, and it "
                         "has fewer global_load_requests: x + bias is never written and read "
                         "back."),
     Experiment("fusion_adam", _adam_problem,
                (_adam_variant(adam_step_unfused_, "5 launches, 15 passes"),
                 _adam_variant(adam_step_, "fused: 1 launch, 7 passes")),
                check=False,
                look_for="bytes_moved and global_load_requests of the fused step are well "
                         "under half the unfused ones: four kernels' intermediate buffers no "
                         "longer go through global memory."),
     Experiment("fusion_lstm", _lstm_problem,
                (_lstm_variant(lstm_cell_unfused, "13 launches, 30 passes"),
                 _lstm_variant(lstm_cell, "fused: 1 launch, 11 passes")),
                tol=dict(rtol=1e-5, atol=1e-6),
                look_for="bytes_moved and global_load_requests of the fused cell are well "
                         "under the unfused ones: the gate activations stay in registers "
                         "instead of 13 launches' buffers.")),
    _kernels, _pictures)
