"""Branch divergence vs predication.

The 32 threads of a warp share one instruction stream. If some take an ``if`` and the rest
the ``else``, the warp runs both arms one after the other with half the lanes masked off.
The select form computes the *operand* with a select (``slope = 1 if x > 0 else a``) and then
runs one multiply on every lane: nothing to diverge on, by construction.

``op_leaky_relu_branch`` (here) against the production ``elementwise.unary_leaky_relu``,
each pasted into the same dense map kernel (``elementwise.dense_unary_kernel``). For a body
this small the compiler if-converts the branch too (sm_90 PTX: the branch variant computes
``a*x`` on every lane and picks with ``selp``; the select variant picks the slope with ``selp``
and multiplies: three instructions each), so today they cost the same; a real branch survives
once the arms store to memory, call functions or loop, and then every mixed warp pays for both
arms. The production path uses the select form: branch-free no matter what the compiler
decides, and exact (``x * 1 == x``) with NaN propagation matching NumPy. (The tempting
``max(x, 0) + a * min(x, 0)`` compiles to ``max.f32``/``min.f32``, which *drop* NaNs.)
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32

from ..backends.cuda.blocks import launch
from ..backends.cuda.device import BLOCK, empty, scalar
from ..backends.cuda.elementwise import dense_unary_kernel, map_kernel, unary
from . import draw
from .draw import ACTIVE, MASKED, WARP
from .record import Experiment, Inputs, KernelSpec, Lesson, Problem, Variant


@cuda.jit(device=True)
def op_leaky_relu_branch(x, a, b):
    """leaky_relu as an if/else whose arms a warp may split on."""
    if x > float32(0):
        return x
    else:
        return a * x


leaky_relu_branch_dense = dense_unary_kernel(op_leaky_relu_branch)
leaky_relu_select_dense = map_kernel("unary", "leaky_relu", "dense")


def leaky_relu_branch(x, alpha):
    """``leaky_relu`` of a dense 1-D device buffer with the branch kernel -> new buffer."""
    out = empty(x.size, x.dtype)
    if x.size:
        launch(leaky_relu_branch_dense, x.size, x, 0, out, scalar(alpha, x.dtype),
               scalar(0, x.dtype))
    return out


def _build(inputs):
    n = inputs.size(1 << 26, 100)
    x = inputs.upload(inputs.rng.standard_normal(n))  # signs mixed inside every warp
    return Problem(f"leaky_relu of {n} float32, random signs", 8 * n,
                   x=x, xv=inputs.view(x, (n,)), alpha=0.01)


def _kernels():
    f, s = np.zeros(1, np.float32), np.float32(0)
    return [KernelSpec("divergence.leaky_relu_branch_dense", leaky_relu_branch_dense,
                       (f, 0, f, s, s), BLOCK)]


def arms(ax, trace, values, branch):
    """Warp 0's 32 lanes (columns) and the instruction paths the warp issues (rows), from the
    elements each lane loaded (the trace) and their signs: with a branch the warp issues the
    ``if`` arm with the negative lanes masked off, then the ``else`` arm with the others;
    with a select, one path for all lanes."""
    lane_x = {t.lane: values[t.index] for t in trace.select(space="global", kind="load",
                                                          array="x", warp=0)}
    positive = np.array([lane_x.get(lane, 0) > 0 for lane in range(WARP)])
    rows = ([("if x > 0: return x", positive), ("else: return a * x", ~positive)] if branch
            else [("slope = 1 if x > 0 else a; return x * slope", np.ones(WARP, bool))])
    for r, (label, on) in enumerate(rows):
        for lane in range(WARP):
            ax.add_patch(_cell(lane, r, ACTIVE if on[lane] else MASKED))
        ax.text(-0.5, r - 0.42, f"path {r + 1}: {label}", fontsize=9, va="bottom")
    ax.set_xlim(-0.5, WARP - 0.5)
    ax.set_ylim(1.6, -0.8)
    ax.set_yticks([])
    ax.set_xlabel(f"lane of warp 0 ({int(positive.sum())} of 32 with x > 0)\ngreen: the lane "
                  f"runs the path; pink: masked off, it waits", fontsize=9)


def _cell(x, y, colour):
    from matplotlib.patches import Rectangle
    return Rectangle((x - 0.5, y - 0.4), 1, 0.8, facecolor=colour, edgecolor="white")


def _pictures():
    inputs = Inputs(small=True)
    exp = LESSON.experiments[0]
    p = exp.build(inputs)
    values = p.x.copy_to_host()
    tr = {v.name: draw.variant_trace(exp, v.name, p, block=0, warp=0) for v in exp.variants}
    return [draw.Picture(
        "divergence_arms",
        "The 32 lanes of warp 0 on inputs of random sign. Written as an if/else, a warp whose "
        "lanes disagree issues both arms, each with part of its lanes masked off. As a select "
        "of the slope, every lane runs the same instructions. (For this small body the "
        "compiler predicates the branch itself on sm_90: see the lesson.)",
        (draw.panel("before: if/else (a branch per lane)", arms, tr["leaky_relu_branch"],
                    values=values, branch=True),
         draw.panel("after: select the slope, one multiply", arms, tr["leaky_relu_select"],
                    values=values, branch=False)))]


LESSON = Lesson(
    "divergence", "Branch divergence vs predication",
    "lanes of a warp that disagree on an if run both arms; a select of the operand leaves "
    "nothing to diverge on",
    (Experiment("divergence", _build,
                (Variant("leaky_relu_branch", "if/else",
                         lambda p: leaky_relu_branch(p.x, p.alpha), leaky_relu_branch),
                 Variant("leaky_relu_select", "select the slope, one multiply",
                         lambda p: unary("leaky_relu", p.xv, p.alpha), unary)),
                tol=dict(rtol=0, atol=0),
                look_for="identical counters: both variants touch the same bytes with the "
                         "same lanes. Divergence costs instructions, not memory traffic, and "
                         "for this small body the sm_90 compiler turns the branch into a "
                         "select itself (the lesson's docstring shows the PTX)."),),
    _kernels, _pictures)
