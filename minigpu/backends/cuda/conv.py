"""Convolution on the GPU: im2col / col2im. (The direct convolution with its filter in constant
memory is the lesson ``minigpu/lessons/constant_memory.py``.)

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

from numba import cuda, float32

from ..contract import View, conv_out_size, pair
from .device import current_stream, empty, launch_1d
from .kernelspec import KernelSpec, reported
from .memory import full
from .strided import unravel4


# --- im2col ---------------------------------------------------------------------------------------
@reported(lambda k, x: [KernelSpec("im2col", k, (x.f, x.t4, 0, x.t6, x.t8, x.f), x.block)])
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
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (pair(kernel), pair(stride), pair(padding),
                                              pair(dilation))
    n, c, h, w = x.shape
    oh, ow = conv_out_size(h, kh, sh, ph, dh), conv_out_size(w, kw, sw, pw, dw)
    out = empty(n * c * kh * kw * max(oh, 0) * max(ow, 0), x.dtype)
    if out.size == 0:
        return out
    grid, blk = launch_1d(out.size, block, max_blocks)
    im2col_kernel[grid, blk, current_stream()](
        x.buf, tuple(x.strides), x.offset, (n, c, h, w, oh, ow),
        (kh, kw, sh, sw, ph, pw, dh, dw), out)
    return out


# --- col2im ---------------------------------------------------------------------------------------
@reported(lambda k, x: [KernelSpec("col2im", k, (x.f, x.t3, 0, x.t6, x.t8, x.f), x.block)])
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
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (pair(kernel), pair(stride), pair(padding),
                                              pair(dilation))
    n, c, h, w = (int(s) for s in x_shape)
    oh, ow = conv_out_size(h, kh, sh, ph, dh), conv_out_size(w, kw, sw, pw, dw)
    if oh <= 0 or ow <= 0 or cols.numel == 0:
        return full(n * c * h * w, 0, cols.dtype)
    out = empty(n * c * h * w, cols.dtype)
    grid, blk = launch_1d(out.size, block, max_blocks)
    col2im_kernel[grid, blk, current_stream()](
        cols.buf, tuple(cols.strides), cols.offset, (n, c, h, w, oh, ow),
        (kh, kw, sh, sw, ph, pw, dh, dw), out)
    return out
