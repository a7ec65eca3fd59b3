"""Fused optimizer steps: one kernel updates a whole parameter in place.

An optimizer step is pure elementwise arithmetic over a handful of same-shaped buffers
(parameter, gradient, momentum or moment estimates) and is therefore *memory bound*: the time
is the bytes moved, not the flops. Written naively, as one elementwise op per line of the
update rule, every line reads its inputs from global memory and writes its result back.
Fusing the whole rule into one kernel keeps the intermediates in registers, so each buffer is
read once and the updated ones written once.

The fusion lesson (``minigpu/lessons/fusion.py``) sets ``adam_step_unfused_`` (five
launches, one per line) against ``adam_step_`` (one launch). Counting global-memory passes
over the n-element buffers:

* fused:   reads p, g, m, v; writes p, m, v                                 =  7 passes
* unfused: g'=g+wd*p (3) | m (3) | v (3) | denom=sqrt(v)/c+eps (2) | p (4)  = 15 passes
  plus two temporaries of n elements and five launch latencies,

so the fused step moves about half the bytes: about 2x faster for large parameters, and for
the many small parameters of a real network the saved launches matter as much.

The update rules are PyTorch's (``torch.optim.SGD``, ``torch.optim.Adam`` with its L2
``weight_decay``, not AdamW). Scalars that are the same for every element (bias corrections,
step size) are computed once on the host in float64 and passed as typed scalars of the
buffer dtype, so a float32 kernel does float32 arithmetic only.
"""
from __future__ import annotations

import math

from numba import cuda

from .blocks import launch_specialized
from .device import current_stream, launch_1d, scalar
from .kernelspec import KernelSpec, reported


def check_buffers(*bufs):
    """(size, dtype) shared by all the optimizer buffers; ValueError when they differ."""
    n, dtype = bufs[0].size, bufs[0].dtype
    for b in bufs[1:]:
        if b.size != n or b.dtype != dtype:
            raise ValueError(f"optimizer buffers must match: got sizes/dtypes "
                             f"{[(x.size, str(x.dtype)) for x in bufs]}")
    return n, dtype


# --- SGD ------------------------------------------------------------------------------------------
@reported(lambda k, x: [KernelSpec("sgd", k, (x.f, x.f, x.s, x.s, True), x.block)])
@cuda.jit
def sgd_kernel(p, g, lr, weight_decay, use_wd):
    """Plain SGD: ``p -= lr * (g + wd*p)``.

    Thread mapping: one thread per element (grid-stride). Block/grid: 1-D, ``device.BLOCK`` threads.
    Memory: reads p, g; writes p: 3 coalesced passes.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, p.size, step):
        d = g[i]
        if use_wd:
            d = d + weight_decay * p[i]
        p[i] = p[i] - lr * d


@reported(lambda k, x: [KernelSpec("sgd_momentum", k, (x.f, x.f, x.f) + (x.s,) * 4 + (True,) * 3,
                                   x.block)])
@cuda.jit
def sgd_momentum_kernel(p, g, buf, lr, momentum, one_minus_dampening, weight_decay, use_wd,
                        nesterov, first_step):
    """SGD with momentum, PyTorch's rule, fused:

    ``d = g + wd*p``; ``buf = d`` on the first step, else ``buf = momentum*buf +
    (1-dampening)*d``; ``d = d + momentum*buf`` (Nesterov) or ``d = buf``; ``p -= lr*d``.

    Thread mapping: one thread per element (grid-stride). Block/grid: 1-D, ``device.BLOCK`` threads.
    The flags are kernel arguments, the same for every thread, so the branches never diverge.
    Memory: reads p, g, buf; writes p, buf: 5 coalesced passes (unfused: 11).
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, p.size, step):
        d = g[i]
        if use_wd:
            d = d + weight_decay * p[i]
        if first_step:
            b = d
        else:
            b = momentum * buf[i] + one_minus_dampening * d
        buf[i] = b
        if nesterov:
            d = d + momentum * b
        else:
            d = b
        p[i] = p[i] - lr * d


def sgd_step_(param_buf, grad_buf, momentum_buf, lr, momentum, dampening, weight_decay,
              nesterov, first_step, *, block=None, max_blocks=None):
    """One in-place SGD step on a flat parameter (``momentum_buf`` None when momentum == 0)."""
    bufs = (param_buf, grad_buf) if momentum_buf is None else (param_buf, grad_buf, momentum_buf)
    n, dtype = check_buffers(*bufs)
    if n == 0:
        return
    grid, blk = launch_1d(n, block, max_blocks)
    use_wd = weight_decay != 0
    if momentum == 0 or momentum_buf is None:
        launch_specialized(sgd_kernel, dtype, grid, blk, param_buf, grad_buf, scalar(lr, dtype),
                           scalar(weight_decay, dtype), use_wd)
        return
    launch_specialized(
        sgd_momentum_kernel, dtype, grid, blk,
        param_buf, grad_buf, momentum_buf, scalar(lr, dtype), scalar(momentum, dtype),
        scalar(1 - dampening, dtype), scalar(weight_decay, dtype), use_wd, bool(nesterov),
        bool(first_step))


# --- Adam -----------------------------------------------------------------------------------------
def adam_scalars(step, lr, beta1, beta2, eps, weight_decay, dtype):
    """The per-step constants, computed once on the host in float64, cast to ``dtype``:
    ``(1-b1, b1, 1-b2, b2, lr/bc1, sqrt(bc2), eps, wd)`` with ``bc = 1 - beta**step``."""
    bc1 = 1 - beta1 ** step
    bc2 = 1 - beta2 ** step
    return tuple(scalar(v, dtype) for v in (
        beta1, 1 - beta1, beta2, 1 - beta2, lr / bc1, math.sqrt(bc2), eps, weight_decay))


@cuda.jit(device=True)
def adam_update(p, g, m, v, i, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size,
                bc2_sqrt, eps, weight_decay, use_wd):
    """Element i's Adam update (``adam_kernel``'s body; the multi-tensor kernels that
    ``minigpu/graphs`` generates call it too); ``d`` and the new ``m`` and ``v`` in registers."""
    pi = p[i]
    d = g[i]
    if use_wd:
        d = d + weight_decay * pi
    mi = beta1 * m[i] + one_minus_beta1 * d
    vi = beta2 * v[i] + one_minus_beta2 * d * d
    m[i] = mi
    v[i] = vi
    p[i] = pi - step_size * mi / (math.sqrt(vi) / bc2_sqrt + eps)


@reported(lambda k, x: [KernelSpec("adam", k, (x.f,) * 4 + (x.s,) * 8 + (True,), x.block)])
@cuda.jit
def adam_kernel(p, g, m, v, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size,
                bc2_sqrt, eps, weight_decay, use_wd):
    """Adam (PyTorch's, L2 weight decay), the whole update fused:

    ``d = g + wd*p``; ``m = b1*m + (1-b1)*d``; ``v = b2*v + (1-b2)*d*d``;
    ``p -= step_size * m / (sqrt(v)/sqrt(bc2) + eps)`` with ``step_size = lr/bc1``.

    Thread mapping: one thread per element (grid-stride), :func:`adam_update`; ``d``, the new
    ``m`` and ``v`` and the denominator live in registers. Block/grid: 1-D, ``device.BLOCK``
    threads. Memory: reads p, g, m, v; writes p, m, v: 7 coalesced passes, the minimum for
    this rule (``adam_step_unfused_`` makes 15). ``math.sqrt`` of a float32 is the float32
    ``sqrtf``.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, p.size, step):
        adam_update(p, g, m, v, i, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size,
                    bc2_sqrt, eps, weight_decay, use_wd)


def adam_plan(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf, step, lr, beta1, beta2, eps,
              weight_decay, block=None, max_blocks=None):
    """((grid, block, stream), the typed scalars of :func:`adam_scalars`) for one Adam step
    over the four buffers, or None when they are empty."""
    n, dtype = check_buffers(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf)
    if n == 0:
        return None
    grid, blk = launch_1d(n, block, max_blocks)
    return (grid, blk, current_stream()), adam_scalars(step, lr, beta1, beta2, eps,
                                                       weight_decay, dtype)


def adam_step_(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf, step, lr, beta1, beta2, eps,
               weight_decay, *, block=None, max_blocks=None):
    """One in-place Adam step (``step`` counts from 1) in a single fused kernel."""
    plan = adam_plan(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf, step, lr, beta1, beta2,
                     eps, weight_decay, block, max_blocks)
    if plan is not None:
        (grid, blk, _), scalars = plan  # launch_specialized launches on the current stream
        launch_specialized(adam_kernel, param_buf.dtype, grid, blk, param_buf, grad_buf,
                           exp_avg_buf, exp_avg_sq_buf, *scalars, weight_decay != 0)


# --- AdamW, RMSprop, Adagrad: the same one-kernel-per-parameter pattern ----------------
@reported(lambda k, x: [KernelSpec("adamw", k, (x.f,) * 5 + (x.s,) * 8 + (True,), x.block)])
@cuda.jit
def adamw_kernel(p, g, m, v, vmax, decay, beta1, one_minus_beta1, beta2, one_minus_beta2,
                 step_size, bc2_sqrt, eps, amsgrad):
    """AdamW (PyTorch's, decoupled weight decay), fused:

    ``p *= 1 - lr*wd``; ``m = b1*m + (1-b1)*g``; ``v = b2*v + (1-b2)*g*g``; with ``amsgrad``
    ``vmax = max(vmax, v)`` and ``vmax`` replaces ``v`` below;
    ``p -= step_size * m / (sqrt(v)/sqrt(bc2) + eps)`` with ``step_size = lr/bc1``.

    Thread mapping: one thread per element (grid-stride). Block/grid: 1-D, ``device.BLOCK``
    threads. The decay never touches the gradient (that is the difference from Adam's L2):
    it scales the weight in the same register that the update then writes.
    Memory: reads p, g, m, v (and vmax); writes p, m, v (and vmax): 7 (9) coalesced passes.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, p.size, step):
        pi = p[i] * decay
        d = g[i]
        mi = beta1 * m[i] + one_minus_beta1 * d
        vi = beta2 * v[i] + one_minus_beta2 * d * d
        m[i] = mi
        v[i] = vi
        if amsgrad:
            vi = max(vmax[i], vi)
            vmax[i] = vi
        p[i] = pi - step_size * mi / (math.sqrt(vi) / bc2_sqrt + eps)


def adamw_step_(param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf, max_exp_avg_sq_buf, step, lr,
                beta1, beta2, eps, weight_decay, *, block=None, max_blocks=None):
    """One in-place AdamW step (``step`` counts from 1; ``max_exp_avg_sq_buf`` None unless
    amsgrad) in a single fused kernel."""
    amsgrad = max_exp_avg_sq_buf is not None
    bufs = (param_buf, grad_buf, exp_avg_buf, exp_avg_sq_buf)
    n, dtype = check_buffers(*bufs, *((max_exp_avg_sq_buf,) if amsgrad else ()))
    if n == 0:
        return
    b1, omb1, b2, omb2, step_size, bc2_sqrt, eps_, _ = adam_scalars(
        step, lr, beta1, beta2, eps, 0.0, dtype)
    grid, blk = launch_1d(n, block, max_blocks)
    vmax = max_exp_avg_sq_buf if amsgrad else exp_avg_sq_buf  # never touched without amsgrad
    launch_specialized(
        adamw_kernel, dtype, grid, blk, *bufs, vmax, scalar(1 - lr * weight_decay, dtype), b1, omb1, b2, omb2, step_size,
        bc2_sqrt, eps_, amsgrad)


@cuda.jit(device=True)
def with_l2(d, pi, weight_decay, use_wd):
    """The gradient ``d`` plus PyTorch's L2 term ``weight_decay * p`` when decay is on."""
    if use_wd:
        return d + weight_decay * pi
    return d


@reported(lambda k, x: [KernelSpec("rmsprop", k, (x.f,) * 5 + (x.s,) * 5 + (True,) * 3 + (x.s,),
                                   x.block)])
@cuda.jit
def rmsprop_kernel(p, g, sq, gavg, buf, lr, alpha, one_minus_alpha, eps, weight_decay, use_wd,
                   centered, use_momentum, momentum):
    """RMSprop (PyTorch's), fused:

    ``d = g + wd*p``; ``sq = alpha*sq + (1-alpha)*d*d``; centred: ``gavg = alpha*gavg +
    (1-alpha)*d`` and ``avg = sqrt(sq - gavg*gavg) + eps``, else ``avg = sqrt(sq) + eps``;
    momentum: ``buf = momentum*buf + d/avg``, ``p -= lr*buf``; else ``p -= lr*d/avg``.

    Thread mapping: one thread per element (grid-stride). Block/grid: 1-D, ``device.BLOCK``
    threads. The option flags are the same for every thread (no divergence); unused buffers
    are aliases the kernel never touches.
    Memory: reads p, g, sq (+gavg, +buf); writes p, sq (+gavg, +buf): 5 to 9 coalesced passes
    (one launch per line of the rule makes 12 or more, plus temporaries).
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, p.size, step):
        pi = p[i]
        d = with_l2(g[i], pi, weight_decay, use_wd)
        s = alpha * sq[i] + one_minus_alpha * d * d
        sq[i] = s
        if centered:
            a = alpha * gavg[i] + one_minus_alpha * d
            gavg[i] = a
            s = s - a * a
        avg = math.sqrt(s) + eps
        if use_momentum:
            b = momentum * buf[i] + d / avg
            buf[i] = b
            p[i] = pi - lr * b
        else:
            p[i] = pi - lr * d / avg


def rmsprop_step_(param_buf, grad_buf, square_avg_buf, grad_avg_buf, momentum_buf, lr, alpha,
                  eps, weight_decay, momentum, *, block=None, max_blocks=None):
    """One in-place RMSprop step; ``grad_avg_buf`` None unless centered, ``momentum_buf``
    None unless momentum > 0 (then it starts at zeros, as in PyTorch)."""
    optional = tuple(b for b in (grad_avg_buf, momentum_buf) if b is not None)
    n, dtype = check_buffers(param_buf, grad_buf, square_avg_buf, *optional)
    if n == 0:
        return
    lr_, alpha_, oma, eps_, wd, mom = (scalar(v, dtype) for v in (
        lr, alpha, 1 - alpha, eps, weight_decay, momentum))
    grid, blk = launch_1d(n, block, max_blocks)
    launch_specialized(
        rmsprop_kernel, dtype, grid, blk, param_buf, grad_buf, square_avg_buf,
        square_avg_buf if grad_avg_buf is None else grad_avg_buf,
        square_avg_buf if momentum_buf is None else momentum_buf,
        lr_, alpha_, oma, eps_, wd, weight_decay != 0, grad_avg_buf is not None,
        momentum_buf is not None, mom)


@reported(lambda k, x: [KernelSpec("adagrad", k, (x.f, x.f, x.f, x.s, x.s, x.s, True), x.block)])
@cuda.jit
def adagrad_kernel(p, g, acc, clr, eps, weight_decay, use_wd):
    """Adagrad (PyTorch's), fused: ``d = g + wd*p``; ``acc += d*d``;
    ``p -= clr * d / (sqrt(acc) + eps)`` with ``clr = lr / (1 + (step-1)*lr_decay)`` computed
    once on the host.

    Thread mapping: one thread per element (grid-stride). Block/grid: 1-D, ``device.BLOCK``
    threads. Memory: reads p, g, acc; writes p, acc: 5 coalesced passes.
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, p.size, step):
        pi = p[i]
        d = with_l2(g[i], pi, weight_decay, use_wd)
        s = acc[i] + d * d
        acc[i] = s
        p[i] = pi - clr * d / (math.sqrt(s) + eps)


def adagrad_step_(param_buf, grad_buf, sum_buf, step, lr, lr_decay, weight_decay, eps, *,
                  block=None, max_blocks=None):
    """One in-place Adagrad step (``step`` counts from 1) in a single fused kernel."""
    n, dtype = check_buffers(param_buf, grad_buf, sum_buf)
    if n == 0:
        return
    grid, blk = launch_1d(n, block, max_blocks)
    launch_specialized(
        adagrad_kernel, dtype, grid, blk, param_buf, grad_buf, sum_buf, scalar(lr / (1 + (step - 1) * lr_decay), dtype),
        scalar(eps, dtype), scalar(weight_decay, dtype), weight_decay != 0)
