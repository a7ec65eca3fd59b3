"""Convolution on the GPU: im2col / col2im (production) and a direct convolution (a lesson).

Production convolution is *im2col + GEMM*: ``im2col`` unrolls every receptive field of the
input into one column of a ``(C*kh*kw, OH*OW)`` matrix, so the convolution becomes a single
matrix product with the ``(OC, C*kh*kw)`` weight matrix, which the tuned ``matmul`` kernels
run at near-peak speed. The backward pass needs the adjoint, ``col2im``: it folds the columns
back onto the image, summing where receptive fields overlap.

Lessons, in file order:

1. ``im2col_kernel``: one thread per *output* element, so the (large) column matrix is written
   coalesced; the reads of the (smaller, heavily re-used, cached) input are the scattered side.
2. ``col2im_kernel``: the *gather* formulation of a scatter-add. One thread per input pixel
   sums the column entries that touch it: no atomics, every pixel written once, and the
   summation order is fixed, so the result is deterministic (bit-identical run to run and
   identical to ``cpu.col2im``).
3. ``conv2d_direct_constmem`` vs ``conv2d_direct_global``: a direct (stride-1) convolution whose
   small filter lives in *constant memory* (``cuda.const.array_like``), against the same kernel
   reading the filter from global memory. Every thread of a warp reads the same filter tap at
   the same time: the constant cache serves such a uniform read as one broadcast. The price is
   that the filter is baked into the compiled kernel, so every new filter means a new
   compilation: fine for fixed filters (Sobel, Gaussian blur, inference), useless for training.

Every input is read through its strides (``View.strides``/``offset``), so a non-contiguous input
costs no extra copy: the kernels gather anyway. Layout of an NCHW tensor element
``(n, c, h, w)``: ``buf[offset + n*s0 + c*s1 + h*s2 + w*s3]``.

Index arithmetic: Numba types integer arithmetic as int64 (it widens int32 operands), and a
64-bit division is a long software sequence on the GPU. The NVPTX backend guards every
64-bit ``div``/``rem`` with a 32-bit fast path taken when both operands fit in 32 bits (the
sm_90 PTX of ``im2col_kernel`` has a ``div.u32`` beside each ``div.s64``), so peeling a linear
index into coordinates costs 32-bit divisions for any tensor under 2**31 elements.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
from numba import cuda, float32

from ..contract import View, numel
from .device import current_stream, empty, launch_1d
from .memory import from_numpy, full
from .strided import unravel4




def _out_size(size, k, s, p, d=1):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _pair(v):
    return (int(v), int(v)) if np.isscalar(v) else (int(v[0]), int(v[1]))



# --- im2col ---------------------------------------------------------------------------------------
@cuda.jit
def im2col_kernel(x, xs, xoff, dims, geom, out):
    """Unroll receptive fields: ``out[n, (c*kh + ki)*kw + kj, oh*OW + ow] = x_pad[n, c, ih, iw]``
    with ``ih = oh*sh - ph + ki*dh``, ``iw = ow*sw - pw + kj*dw`` (0 outside the image).

    Thread mapping: one thread per output element (grid-stride loop over ``N*C*kh*kw*OH*OW``);
    the linear index is peeled into ``(n, c, ki, kj, oh, ow)``, ``ow`` fastest.
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(size/BLOCK)`` blocks (capped).
    Memory: writes are perfectly coalesced (consecutive threads, consecutive addresses). Reads
    of a warp walk one input row with step ``sw`` (coalesced for stride 1) and every input
    pixel is read ``kh*kw/(sh*sw)`` times, mostly from L1/L2.
    Why this mapping: the alternative, one thread per *input* pixel writing its ``kh*kw``
    copies, has the same arithmetic but scatters the writes of the matrix that is ``kh*kw``
    times larger than the input; writes cannot be cached, reads can.
    """
    n_, c_, h_, w_, oh_, ow_ = dims
    kh, kw, sh, sw, ph, pw, dh, dw = geom
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        ow = i % ow_
        t = i // ow_
        oh = t % oh_
        t //= oh_
        kj = t % kw
        t //= kw
        ki = t % kh
        t //= kh
        c = t % c_
        n = t // c_
        ih = oh * sh - ph + ki * dh
        iw = ow * sw - pw + kj * dw
        if 0 <= ih < h_ and 0 <= iw < w_:
            out[i] = x[xoff + n * xs[0] + c * xs[1] + ih * xs[2] + iw * xs[3]]
        else:
            out[i] = float32(0)


def im2col(x: View, kernel, stride, padding, dilation=(1, 1), *, block=None,
           max_blocks=None):
    """(N, C, H, W) -> (N, C*kh*kw, OH*OW), exactly ``cpu.im2col``."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (_pair(kernel), _pair(stride), _pair(padding),
                                              _pair(dilation))
    n, c, h, w = x.shape
    oh, ow = _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    out = empty(n * c * kh * kw * max(oh, 0) * max(ow, 0), x.dtype)
    if out.size == 0:
        return out
    grid, blk = launch_1d(out.size, block, max_blocks)
    im2col_kernel[grid, blk, current_stream()](
        x.buf, tuple(x.strides), x.offset, (n, c, h, w, oh, ow),
        (kh, kw, sh, sw, ph, pw, dh, dw), out)
    return out


# --- col2im ---------------------------------------------------------------------------------------
@cuda.jit
def col2im_kernel(cols, cs, coff, dims, geom, out):
    """Fold columns back: ``out[n, c, h, w] = sum of cols[n, (c*kh + ki)*kw + kj, oh*OW + ow]``
    over every ``(ki, kj, oh, ow)`` whose receptive field covers ``(h, w)``.

    Thread mapping: one thread per *input* pixel (grid-stride over ``N*C*H*W``, ``w`` fastest).
    For each kernel tap ``(ki, kj)`` the thread solves ``oh*sh - ph + ki*dh = h`` for an
    integer ``oh`` in ``[0, OH)`` (same for ``ow``) and adds that one column entry; the taps
    are visited in ``(ki, kj)`` order, the order ``cpu.col2im`` sums in, so the results agree
    bit for bit.
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(N*C*H*W/BLOCK)`` blocks (capped).
    Memory: each output written once, coalesced. Reads of a warp for a fixed tap hit
    consecutive ``ow`` of one column row (coalesced for stride 1).
    Why gather beats scatter-with-atomics (one thread per column entry doing
    ``atomic.add(out, pixel, v)``): (1) no atomics: with ``kh*kw/(sh*sw)`` column entries per
    pixel, neighbouring threads of a scatter warp collide on the same pixels and the L2 atomic
    unit serialises them; (2) no zero-fill pass: the gather writes each pixel exactly once;
    (3) determinism: atomics add in whatever order threads arrive, so float results change run
    to run; the gather sums in a fixed order; (4) float64 needs no ``atom.add.f64``. The cost is
    ``kh*kw`` divisibility tests per pixel when ``stride > 1`` (a few integer ops, cheap
    next to memory).
    """
    n_, c_, h_, w_, oh_, ow_ = dims
    kh, kw, sh, sw, ph, pw, dh, dw = geom
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        n, c, h, w = unravel4(i, c_, h_, w_)
        base = coff + n * cs[0]
        acc = float32(0)
        for ki in range(kh):
            hp = h + ph - ki * dh
            if hp < 0 or hp % sh != 0:
                continue
            oh = hp // sh
            if oh >= oh_:
                continue
            for kj in range(kw):
                wp = w + pw - kj * dw
                if wp < 0 or wp % sw != 0:
                    continue
                ow = wp // sw
                if ow >= ow_:
                    continue
                acc += cols[base + ((c * kh + ki) * kw + kj) * cs[1] + (oh * ow_ + ow) * cs[2]]
        out[i] = acc


def col2im(cols: View, x_shape, kernel, stride, padding, dilation=(1, 1), *, block=None,
           max_blocks=None):
    """(N, C*kh*kw, OH*OW) -> (N, C, H, W), the adjoint of :func:`im2col`."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (_pair(kernel), _pair(stride), _pair(padding),
                                              _pair(dilation))
    n, c, h, w = (int(s) for s in x_shape)
    oh, ow = _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    if oh <= 0 or ow <= 0 or cols.numel == 0:
        return full(n * c * h * w, 0, cols.dtype)
    out = empty(n * c * h * w, cols.dtype)
    grid, blk = launch_1d(out.size, block, max_blocks)
    col2im_kernel[grid, blk, current_stream()](
        cols.buf, tuple(cols.strides), cols.offset, (n, c, h, w, oh, ow),
        (kh, kw, sh, sw, ph, pw, dh, dw), out)
    return out


# --- direct convolution: constant memory vs global memory ----------------------------------------
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


def _constmem_kernel(weight, bias):
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


def _conv_geometry(x: View, w_shape, padding):
    n, c, h, wd = x.shape
    if w_shape[1] != c:
        raise ValueError(f"weight of shape {tuple(w_shape)} expects {w_shape[1]} input "
                         f"channels, got input of shape {tuple(x.shape)}")
    ph, pw = _pair(padding)
    kh, kw = w_shape[2], w_shape[3]
    oh, ow = _out_size(h, kh, 1, ph), _out_size(wd, kw, 1, pw)
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
    dims, pad = _conv_geometry(x, w.shape, padding)
    key = (w.dtype.str, w.shape, w.tobytes(), b.tobytes())
    kernel = _CONST_KERNELS.get(key)
    if kernel is None:
        kernel = _constmem_kernel(w, b)
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
    dims, pad = _conv_geometry(x, w.shape, padding)
    out = empty(numel((dims[0], w.shape[0], max(dims[4], 0), max(dims[5], 0))), x.dtype)
    if out.size == 0:
        return out
    wt = from_numpy(w).reshape(w.shape)
    bs = from_numpy(b)
    grid, blk = launch_1d(out.size, block, max_blocks)
    conv2d_global_kernel[grid, blk, current_stream()](
        x.buf, tuple(x.strides), x.offset, dims, pad, wt, bs, out)
    return out
