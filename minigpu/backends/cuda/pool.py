"""2-D pooling on the GPU (NCHW): max and average, forward and backward.

Forward kernels map one thread to one output element and loop over its window: the window is
tiny (``kh*kw`` <= 9 or so), so the loop stays in registers and the output writes are
coalesced.

The two backward kernels teach the two ways to write a scatter-add:

* ``maxpool2d_backward_kernel`` *scatters with atomics*: the contract hands the backward only
  the saved argmax indices, not the window geometry, so the natural mapping is one thread per
  output gradient adding into ``grad_x[plane, argmax]``. Collisions happen only where windows
  overlap (``stride < kernel``), at most ``ceil(kh/sh)*ceil(kw/sw)`` writers per pixel, so the
  atomics rarely contend; the price is a zero-fill pass and a float summation order that
  depends on thread timing (not bit-reproducible where windows overlap).
* ``avgpool2d_backward_kernel`` *gathers*: one thread per input pixel sums the share of every
  window that covers it. No atomics, no zero fill, one coalesced write per pixel, and the sum
  runs in a fixed order (the same order as ``cpu.avgpool2d_backward``), so it is deterministic.

Padding follows PyTorch: max pooling pads with -inf (padding never wins unless a window holds
only -inf), average pooling pads with 0 and divides by the full window (``count_include_pad``)
or by the in-bounds part of it. Inputs are read through their strides, so non-contiguous views
cost no extra copy.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32

from ..contract import View, conv_out_size, pair
from .device import current_stream, empty, launch_1d
from .kernelspec import KernelSpec, reported
from .memory import full
from .strided import unravel4


NEG_INF = np.float32(-np.inf)
"""The max-pool padding value; a float32 constant, so float32 kernels stay float32 (a float64
kernel promotes it exactly)."""


def _geometry(x_shape, kernel, stride, padding):
    (kh, kw), (sh, sw), (ph, pw) = pair(kernel), pair(stride), pair(padding)
    n, c, h, w = (int(s) for s in x_shape)
    oh, ow = conv_out_size(h, kh, sh, ph), conv_out_size(w, kw, sw, pw)
    return (n, c, h, w, max(oh, 0), max(ow, 0)), (kh, kw, sh, sw, ph, pw)


# --- max pooling ---------------------------------------------------------------------------------
@reported(lambda k, x: [KernelSpec("maxpool2d", k, (x.f, x.t4, 0, x.t6, x.t6, x.f, x.i64),
                                   x.block)])
@cuda.jit
def maxpool2d_kernel(x, xs, xoff, dims, geom, out, argmax):
    """``out[n, c, oh, ow]`` = max of the -inf-padded window, ``argmax`` = ``ih*W + iw`` of its
    first maximum in row-major window order, PyTorch's rule: never a padding tap (a window of
    -inf points at its first pixel inside the image) and a NaN wins (the last NaN).

    Thread mapping: one thread per output element (grid-stride over ``N*C*OH*OW``, ``ow``
    fastest), looping over the ``kh*kw`` window in registers.
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(N*C*OH*OW/BLOCK)`` blocks (capped).
    Memory: value and index writes coalesced; a warp's reads for one tap step through an input
    row with stride ``sw`` (cached: overlapping windows re-read the same lines).
    """
    n_, c_, h_, w_, oh_, ow_ = dims
    kh, kw, sh, sw, ph, pw = geom
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        n, c, oh, ow = unravel4(i, c_, oh_, ow_)
        base = xoff + n * xs[0] + c * xs[1]
        h0 = oh * sh - ph
        w0 = ow * sw - pw
        best = NEG_INF
        best_at = max(h0, 0) * w_ + max(w0, 0)
        for ki in range(kh):
            ih = h0 + ki
            for kj in range(kw):
                iw = w0 + kj
                if 0 <= ih < h_ and 0 <= iw < w_:
                    v = x[base + ih * xs[2] + iw * xs[3]]
                    if v > best or v != v:
                        best = v
                        best_at = ih * w_ + iw
        out[i] = best
        argmax[i] = best_at


def maxpool2d(x: View, kernel, stride, padding, *, block=None, max_blocks=None):
    """(N, C, H, W) -> (values (N, C, OH, OW), argmax int64), exactly ``cpu.maxpool2d``."""
    dims, geom = _geometry(x.shape, kernel, stride, padding)
    n, c, _, _, oh, ow = dims
    size = n * c * oh * ow
    out, argmax = empty(size, x.dtype), empty(size, np.int64)
    if size == 0:
        return out, argmax
    grid, blk = launch_1d(size, block, max_blocks)
    maxpool2d_kernel[grid, blk, current_stream()](x.buf, tuple(x.strides), x.offset, dims, geom,
                                                  out, argmax)
    return out, argmax


@reported(lambda k, x: [KernelSpec("maxpool2d_backward", k, (x.f, x.t4, 0, x.i64, x.t4, 0, x.t6,
                                                                x.f), x.block)])
@cuda.jit
def maxpool2d_backward_kernel(g, gs, goff, am, ams, amoff, dims, grad_x):
    """``grad_x[n, c].flat[argmax[n, c, oh, ow]] += g[n, c, oh, ow]`` (grad_x pre-zeroed).

    Thread mapping: one thread per output gradient (grid-stride over ``N*C*OH*OW``).
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(N*C*OH*OW/BLOCK)`` blocks (capped).
    Memory: coalesced reads of ``g`` and ``argmax``; one ``atomic.add`` per thread into the
    input-sized gradient. Without overlap (``stride >= kernel``, the usual 2x2/2) no two
    threads hit one address and an atomic costs about a store; with overlap at most
    ``ceil(kh/sh)*ceil(kw/sw)`` threads collide. Float64 ``atomic.add`` needs cc >= 6.0.
    Why atomics rather than the deterministic gather used by ``avgpool2d_backward_kernel``:
    the contract passes only the argmax, and a gather needs the window geometry to know which
    outputs can point at a pixel.
    """
    n_, c_, h_, w_, oh_, ow_ = dims
    plane = h_ * w_
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, oh_ * ow_ * c_ * n_, step):
        n, c, oh, ow = unravel4(i, c_, oh_, ow_)
        at = am[amoff + n * ams[0] + c * ams[1] + oh * ams[2] + ow * ams[3]]
        cuda.atomic.add(grad_x, (n * c_ + c) * plane + at,
                        g[goff + n * gs[0] + c * gs[1] + oh * gs[2] + ow * gs[3]])


def maxpool2d_backward(g: View, argmax: View, x_shape, *, block=None, max_blocks=None):
    """Route each output gradient to its argmax pixel; overlapping windows sum."""
    n, c, h, w = (int(s) for s in x_shape)
    grad_x = full(n * c * h * w, 0, g.dtype)
    count = g.numel
    if count == 0 or grad_x.size == 0:
        return grad_x
    oh, ow = g.shape[2], g.shape[3]
    grid, blk = launch_1d(count, block, max_blocks)
    maxpool2d_backward_kernel[grid, blk, current_stream()](
        g.buf, tuple(g.strides), g.offset, argmax.buf, tuple(argmax.strides), argmax.offset,
        (n, c, h, w, oh, ow), grad_x)
    return grad_x


# --- average pooling -----------------------------------------------------------------------------
@cuda.jit(device=True, inline=True)
def _window_divisor(oh, ow, h_, w_, kh, kw, sh, sw, ph, pw, count_include_pad):
    """Divisor of window (oh, ow) as float32 (exact: a small integer): ``kh*kw``, or the
    number of its in-bounds pixels."""
    if count_include_pad:
        return float32(kh * kw)
    h0 = oh * sh - ph
    w0 = ow * sw - pw
    rows = min(h0 + kh, h_) - max(h0, 0)
    cols = min(w0 + kw, w_) - max(w0, 0)
    return float32(rows * cols)


@reported(lambda k, x: [KernelSpec("avgpool2d", k, (x.f, x.t4, 0, x.t6, x.t6, True, x.f), x.block)])
@cuda.jit
def avgpool2d_kernel(x, xs, xoff, dims, geom, count_include_pad, out):
    """``out[n, c, oh, ow]`` = sum of the zero-padded window / divisor.

    Thread mapping: one thread per output element (grid-stride over ``N*C*OH*OW``, ``ow``
    fastest), summing its window in a register.
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(N*C*OH*OW/BLOCK)`` blocks (capped).
    Memory: coalesced writes; cached strided reads as in ``maxpool2d_kernel``.
    """
    n_, c_, h_, w_, oh_, ow_ = dims
    kh, kw, sh, sw, ph, pw = geom
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
        n, c, oh, ow = unravel4(i, c_, oh_, ow_)
        base = xoff + n * xs[0] + c * xs[1]
        h0 = oh * sh - ph
        w0 = ow * sw - pw
        acc = float32(0)
        for ki in range(kh):
            ih = h0 + ki
            if ih < 0 or ih >= h_:
                continue
            for kj in range(kw):
                iw = w0 + kj
                if 0 <= iw < w_:
                    acc += x[base + ih * xs[2] + iw * xs[3]]
        out[i] = acc / _window_divisor(oh, ow, h_, w_, kh, kw, sh, sw, ph, pw,
                                       count_include_pad)


def avgpool2d(x: View, kernel, stride, padding, count_include_pad=True, *, block=None,
              max_blocks=None):
    """(N, C, H, W) -> (N, C, OH, OW), ``cpu.avgpool2d`` (up to summation order)."""
    dims, geom = _geometry(x.shape, kernel, stride, padding)
    n, c, _, _, oh, ow = dims
    out = empty(n * c * oh * ow, x.dtype)
    if out.size == 0:
        return out
    grid, blk = launch_1d(out.size, block, max_blocks)
    avgpool2d_kernel[grid, blk, current_stream()](x.buf, tuple(x.strides), x.offset, dims, geom,
                                                  bool(count_include_pad), out)
    return out


@reported(lambda k, x: [KernelSpec("avgpool2d_backward", k, (x.f, x.t4, 0, x.t6, x.t6, True, x.f),
                                   x.block)])
@cuda.jit
def avgpool2d_backward_kernel(g, gs, goff, dims, geom, count_include_pad, grad_x):
    """``grad_x[n, c, h, w]`` = sum over the windows ``(oh, ow)`` covering ``(h, w)`` of
    ``g[n, c, oh, ow] / divisor(oh, ow)``.

    Thread mapping: one thread per *input* pixel (grid-stride over ``N*C*H*W``, ``w``
    fastest). For each window tap ``(ki, kj)`` it solves ``oh*sh - ph + ki = h`` for an integer
    ``oh`` in ``[0, OH)`` (same for ``ow``): the windows covering a pixel, visited in the tap
    order ``cpu.avgpool2d_backward`` (via ``col2im``) sums in, so the results agree bit for bit.
    Block/grid: 1-D, ``device.BLOCK`` threads, ``ceil(N*C*H*W/BLOCK)`` blocks (capped).
    Memory: one coalesced write per pixel; reads of ``g`` cached (each read by up to
    ``kh*kw/(sh*sw)`` neighbouring threads).
    Why gather, not a scatter with atomics: see ``col2im_kernel`` — no atomic contention, no
    zero-fill pass, deterministic sums. The avg backward knows its window geometry, so the
    gather is possible here (unlike ``maxpool2d_backward``).
    """
    n_, c_, h_, w_, oh_, ow_ = dims
    kh, kw, sh, sw, ph, pw = geom
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, grad_x.size, step):
        n, c, h, w = unravel4(i, c_, h_, w_)
        base = goff + n * gs[0] + c * gs[1]
        acc = float32(0)
        for ki in range(kh):
            hp = h + ph - ki
            if hp < 0 or hp % sh != 0:
                continue
            oh = hp // sh
            if oh >= oh_:
                continue
            for kj in range(kw):
                wp = w + pw - kj
                if wp < 0 or wp % sw != 0:
                    continue
                ow = wp // sw
                if ow >= ow_:
                    continue
                acc += g[base + oh * gs[2] + ow * gs[3]] / _window_divisor(
                    oh, ow, h_, w_, kh, kw, sh, sw, ph, pw, count_include_pad)
        grad_x[i] = acc


def avgpool2d_backward(g: View, x_shape, kernel, stride, padding, count_include_pad=True, *,
                       block=None, max_blocks=None):
    """Gradient of :func:`avgpool2d` w.r.t. its input, (N, C, H, W)."""
    dims, geom = _geometry(x_shape, kernel, stride, padding)
    n, c, h, w, oh, ow = dims
    grad_x = empty(n * c * h * w, g.dtype)
    if grad_x.size == 0:
        return grad_x
    if oh == 0 or ow == 0:
        return full(grad_x.size, 0, g.dtype)
    grid, blk = launch_1d(grad_x.size, block, max_blocks)
    avgpool2d_backward_kernel[grid, blk, current_stream()](
        g.buf, tuple(g.strides), g.offset, dims, geom, bool(count_include_pad), grad_x)
    return grad_x
