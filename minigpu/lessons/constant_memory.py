"""Constant memory for convolution filters.

``conv2d_direct_constmem`` vs ``conv2d_direct_global``: a direct (stride-1) convolution whose
small filter lives in *constant memory* (``cuda.const.array_like``), against the same kernel
reading the filter from global memory. Every thread of a warp reads the same filter tap at the
same time: the constant cache serves such a uniform read as one broadcast. The price is that
the filter is baked into the compiled kernel, so every new filter means a new compilation: fine
for fixed filters (Sobel, Gaussian blur, inference), useless for training. That is why the
production convolution (``backends/cuda/conv.py``) is im2col + GEMM and neither variant here.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
from numba import cuda, float32

from ..backends.contract import View, conv_out_size, numel, pair
from ..backends.cuda.device import BLOCK, current_stream, empty, launch_1d
from ..backends.cuda.memory import from_numpy
from ..backends.cuda.strided import unravel4
from . import draw
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant

CONST_BYTES = 64 * 1024
"""Constant memory per kernel (the filter and the bias must fit)."""


@cuda.jit(device=True, inline=True)
def _direct_conv_point(x, xs, xoff, n, oc, oh, ow, c_, h_, w_, ph, pw, wt, kh, kw):
    """Sum over (c, ki, kj) of x_pad[n, c, oh + ki, ow + kj] * wt[oc, c, ki, kj]."""
    acc = float32(0)
    for c in range(c_):
        xc = xoff + n * xs[0] + c * xs[1]
        for ki in range(kh):
            ih = oh - ph + ki
            if ih < 0 or ih >= h_:
                continue
            for kj in range(kw):
                iw = ow - pw + kj
                if 0 <= iw < w_:
                    acc += x[xc + ih * xs[2] + iw * xs[3]] * wt[oc, c, ki, kj]
    return acc


def constmem_kernel(weight, bias):
    """Compile a direct-conv kernel with ``weight`` (OC, C, kh, kw) and ``bias`` (OC,) baked
    into constant memory. The host arrays are closure constants: the kernel *is* the filter."""
    oc_count, _, kh, kw = weight.shape

    @cuda.jit
    def conv2d_constmem_kernel(x, xs, xoff, dims, pad, out):
        """Direct convolution, stride 1, filter in constant memory.

        Thread mapping: one thread per output element ``(n, oc, oh, ow)`` (grid-stride, ``ow``
        fastest); it loops over ``(c, ki, kj)``.
        Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(N*OC*OH*OW/BLOCK)`` blocks (capped).
        Memory: output writes coalesced; input reads of a warp hit consecutive ``iw``
        (coalesced, cached, each pixel re-read ``kh*kw*OC`` times). The filter read
        ``wt[oc, c, ki, kj]`` has the same address in every thread of a warp (the warp shares
        ``oc`` except at an ``oc`` boundary): the constant cache answers a uniform address with
        one broadcast per warp, using no L1 capacity and no load/store bandwidth.
        Why faster than ``conv2d_global_kernel``: the filter stops competing with the input
        for L1 and load bandwidth, and its address arithmetic folds into the instruction's
        constant operand. Trade-off: one compilation per distinct filter (hundreds of ms), a
        64 KiB limit, and divergent (non-uniform) addresses serialise, so it only pays for
        small, fixed filters.
        """
        wt = cuda.const.array_like(weight)
        bs = cuda.const.array_like(bias)
        n_, c_, h_, w_, oh_, ow_ = dims
        ph, pw = pad
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            n, oc, oh, ow = unravel4(i, oc_count, oh_, ow_)
            out[i] = _direct_conv_point(x, xs, xoff, n, oc, oh, ow, c_, h_, w_, ph, pw, wt,
                                        kh, kw) + bs[oc]

    return conv2d_constmem_kernel


@cuda.jit
def conv2d_global_kernel(x, xs, xoff, dims, pad, wt, bs, out):
    """Direct convolution, stride 1, filter ``wt`` (OC, C, kh, kw) and bias in global memory.

    Thread mapping, block/grid and input/output access: as ``conv2d_constmem_kernel``.
    Memory: the filter is an ordinary global array; a warp's uniform read of one tap becomes
    one cached load (L1 hit after the first warp), competing with the input for L1 space and
    load/store slots. Any filter works without recompiling: this is the baseline the
    constant-memory variant improves on.
    """
    n_, c_, h_, w_, oh_, ow_ = dims
    ph, pw = pad
    oc_count, _, kh, kw = wt.shape
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        n, oc, oh, ow = unravel4(i, oc_count, oh_, ow_)
        out[i] = _direct_conv_point(x, xs, xoff, n, oc, oh, ow, c_, h_, w_, ph, pw, wt,
                                    kh, kw) + bs[oc]


_CONST_KERNELS: OrderedDict = OrderedDict()
_CONST_CACHE_SIZE = 16


def _host_filter(weight, bias, dtype):
    w = np.ascontiguousarray(weight, dtype=dtype)
    if w.ndim != 4:
        raise ValueError(f"expected a 4-D weight (OC, C, kh, kw), got shape {w.shape}")
    b = np.zeros(w.shape[0], dtype=dtype) if bias is None else np.ascontiguousarray(
        bias, dtype=dtype).reshape(-1)
    if b.shape != (w.shape[0],):
        raise ValueError(f"bias of shape {b.shape} does not match {w.shape[0]} output channels")
    return w, b


def conv_geometry(x: View, w_shape, padding):
    n, c, h, wd = x.shape
    if w_shape[1] != c:
        raise ValueError(f"weight of shape {tuple(w_shape)} expects {w_shape[1]} input "
                         f"channels, got input of shape {tuple(x.shape)}")
    ph, pw = pair(padding)
    kh, kw = w_shape[2], w_shape[3]
    oh, ow = conv_out_size(h, kh, 1, ph), conv_out_size(wd, kw, 1, pw)
    return (n, c, h, wd, oh, ow), (ph, pw)


def conv2d_direct_constmem(x: View, weight_np, bias_np, padding, *, block=None,
                           max_blocks=None):
    """Stride-1 convolution (N, C, H, W) -> (N, OC, OH, OW) with the host filter ``weight_np``
    (OC, C, kh, kw) and ``bias_np`` (OC,) or None compiled into constant memory.

    Kernels are cached per filter (by value), so calling again with the same filter reuses
    the compiled kernel; a new filter compiles a new one."""
    w, b = _host_filter(weight_np, bias_np, x.dtype)
    if w.nbytes + b.nbytes > CONST_BYTES:
        raise ValueError(f"filter and bias take {w.nbytes + b.nbytes} bytes; constant memory "
                         f"holds {CONST_BYTES}")
    dims, pad = conv_geometry(x, w.shape, padding)
    key = (w.dtype.str, w.shape, w.tobytes(), b.tobytes())
    kernel = _CONST_KERNELS.get(key)
    if kernel is None:
        kernel = constmem_kernel(w, b)
        _CONST_KERNELS[key] = kernel
        if len(_CONST_KERNELS) > _CONST_CACHE_SIZE:
            _CONST_KERNELS.popitem(last=False)
    else:
        _CONST_KERNELS.move_to_end(key)
    out = empty(numel((dims[0], w.shape[0], max(dims[4], 0), max(dims[5], 0))), x.dtype)
    if out.size == 0:
        return out
    grid, blk = launch_1d(out.size, block, max_blocks)
    kernel[grid, blk, current_stream()](x.buf, tuple(x.strides), x.offset, dims, pad, out)
    return out


def conv2d_direct_global(x: View, weight_np, bias_np, padding, *, block=None,
                         max_blocks=None):
    """Stride-1 convolution like :func:`conv2d_direct_constmem`, with the filter uploaded to
    global memory and passed as an ordinary kernel argument (one compiled kernel for all
    filters)."""
    w, b = _host_filter(weight_np, bias_np, x.dtype)
    dims, pad = conv_geometry(x, w.shape, padding)
    out = empty(numel((dims[0], w.shape[0], max(dims[4], 0), max(dims[5], 0))), x.dtype)
    if out.size == 0:
        return out
    wt = from_numpy(w).reshape(w.shape)
    bs = from_numpy(b)
    grid, blk = launch_1d(out.size, block, max_blocks)
    conv2d_global_kernel[grid, blk, current_stream()](
        x.buf, tuple(x.strides), x.offset, dims, pad, wt, bs, out)
    return out


def _build(inputs):
    N, C, H, W, OC, k = inputs.size((16, 3, 256, 256, 16, 5), (1, 2, 6, 6, 2, 3))
    x = inputs.tensor(N, C, H, W)
    weight, bias = inputs.uniform(OC, C, k, k), inputs.uniform(OC)
    dims, _ = conv_geometry(x, weight.shape, k // 2)
    flops = 2 * N * OC * dims[4] * dims[5] * C * k * k
    return Problem(f"direct conv {N}x{C}x{H}x{W}, {OC} filters {k}x{k}", flops, x=x,
                   weight=weight, bias=bias, padding=k // 2)


def _variant(fn, note):
    return Variant(fn.__name__, note, lambda p: fn(p.x, p.weight, p.bias, p.padding), fn)


def _kernels():
    f32 = np.dtype(np.float32)
    f, f4 = np.zeros(1, f32), np.zeros((1, 1, 1, 1), f32)
    t2, t4, t6 = (1,) * 2, (1,) * 4, (1,) * 6
    weight = np.full((8, 3, 3, 3), 0.5, f32)
    return [KernelSpec("constant_memory.direct_global", conv2d_global_kernel,
                       (f, t4, 0, t6, t2, f4, f, f), BLOCK),
            KernelSpec("constant_memory.direct_constmem[8x3x3x3]",
                       constmem_kernel(weight, np.zeros(8, f32)), (f, t4, 0, t6, t2, f), BLOCK)]


def _pictures():
    exp = LESSON.experiments[0]
    p = exp.build(Inputs(small=True))
    tr = {v.name: draw.traced(lambda v=v: v.run(p), block=None) for v in exp.variants}
    top = 1.1 * max(max(draw.traffic_bytes(t).values()) for t in tr.values())
    return [draw.Picture(
        "constant_memory_traffic",
        "Global bytes per array of the direct convolution, all blocks. With the filter in "
        "global memory every thread loads it (wt); in constant memory it is served by the "
        "constant cache, one broadcast per warp, and leaves global traffic entirely.",
        (draw.panel("before: filter in global memory", draw.traffic,
                    tr["conv2d_direct_global"], ymax=top),
         draw.panel("after: filter in constant memory", draw.traffic,
                    tr["conv2d_direct_constmem"], ymax=top)))]


LESSON = Lesson(
    "constant_memory", "Constant memory for convolution filters",
    "a filter every lane reads at the same address is one broadcast from the constant cache",
    (Experiment("constant_memory", _build,
                (_variant(conv2d_direct_global, "filter in global memory"),
                 _variant(conv2d_direct_constmem, "filter in constant memory")),
                unit="GFLOP/s", memory_bound=False,
                no_production="production convolution is im2col + GEMM: a filter compiled "
                              "into the kernel does not suit training",
                look_for="global_load_requests fall by about half with the filter in constant "
                         "memory: the filter loads leave global memory (the constant cache "
                         "serves them; the simulator does not count them as global traffic), "
                         "and only the input loads remain."),),
    _kernels, _pictures)
