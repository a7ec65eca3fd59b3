"""Fusion: chains of elementwise table maps in a captured graph become one generated kernel.

A capture records every ``unary``/``binary`` primitive call as a :class:`Map` (op, operand
views, alpha and beta, the buffer it made, the steps it recorded) and, for every step, the
buffers it touches. :func:`fuse` reads them and joins a producer map P to a consumer map C
when C reads P's whole result densely (element i of P is element i of C) and nothing else
ever does:

- no other step of the graph touches P's result (checked by address ranges, views and
  aliases included), and no live tensor or autograd node holds it (a tensor the caller kept,
  an activation saved for a backward captured in another graph): such a result must still be
  written;
- the inputs of every map moved down to C are not touched between its step and C's by a step
  that is not a map (maps only write the fresh buffer they make).

Joined maps form a tree whose root is the last one; each tree of two maps or more becomes one
step: on cuda a generated ``@cuda.jit`` kernel (``fused_kernels.py``) that computes the whole
chain per element in registers and stores only the root's result, launched as any kernel (the
simulator's sanitizer checks it and its counters count it); on cpu one generated function that
runs the same table maps of the cpu backend on temporaries and stores only the root's result.
Each fused op is the eager op's own definition (the cuda backend's device function, the cpu
backend's map) and each intermediate is rounded to the dtype eager stored it in, so a fused
graph gives eager's values: bit for bit on the cpu device and on the simulator; on a GPU the
compiler may contract a multiply and an add of two fused ops into one FMA (``docs/graphs.md``).
"""
from __future__ import annotations

import gc
from typing import Any, NamedTuple

import numpy as np

from ..autograd import Function, TensorBase
from . import fused_kernels

INTERMEDIATE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
"""The dtypes a fused intermediate may have: it stays in a register of that type (a float16,
bool or integer intermediate would need eager's rounding through memory spelled out)."""


class Map(NamedTuple):
    """One recorded ``unary``/``binary`` primitive call."""

    module: Any      # the real backend module that ran it
    kind: str        # "unary" or "binary"
    op: str          # the op table's name
    views: tuple     # the operand Views
    alpha: Any
    beta: Any
    out: Any         # the buffer it made
    steps: range     # the capture steps it recorded (one launch or one call)

    @classmethod
    def of(cls, module, kind, args, out, steps):
        n = 1 if kind == "unary" else 2
        alpha, beta = (tuple(args[1 + n:]) + (0, 0))[:2]
        return cls(module, kind, args[0], tuple(args[1:1 + n]), alpha, beta, out, steps)

    @property
    def step(self) -> int:
        return self.steps[0]


class Update(NamedTuple):
    """One recorded optimizer step of one parameter (``adam_step_``, ...)."""

    module: Any
    name: str
    args: tuple      # the primitive's arguments: buffers, then step count and hyper-parameters
    step: int        # the capture step that replays it


MULTI_TENSOR = {"adam_step_": (4, fused_kernels.multi_tensor_adam)}
"""Optimizer primitives :func:`fuse` applies to many parameters in one generated launch: how
many buffers lead their arguments, and the generator."""


def extents(objects) -> tuple:
    """The memory ranges ``(space, first byte, end)`` of the buffers in ``objects`` (nested
    in tuples, lists and Views; NumPy arrays, simulator and device arrays)."""
    found, stack = [], [objects]
    while stack:
        obj = stack.pop()
        if isinstance(obj, (tuple, list)):
            stack.extend(obj)
            continue
        if isinstance(obj, TensorBase):
            obj = obj._buf
        space = "host"
        if hasattr(obj, "_ary"):  # a simulator device array: NumPy memory underneath
            obj = obj._ary
        elif hasattr(obj, "__cuda_array_interface__") and not isinstance(obj, np.ndarray):
            pointer, nbytes = obj.__cuda_array_interface__["data"][0], obj.nbytes
            if nbytes:
                found.append(("device", pointer, pointer + nbytes))
            continue
        if isinstance(obj, np.ndarray) and obj.size:
            first, end = np.lib.array_utils.byte_bounds(obj)
            found.append((space, first, end))
    return tuple(found)


def _overlap(a, b) -> bool:
    return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x in a for y in b)


def _held() -> tuple:
    """The memory of every live tensor and of what every live autograd node keeps (saved
    tensors, raw buffers, views)."""
    gc.collect()
    kept = []
    for obj in gc.get_objects():
        kind = type(obj)  # not isinstance: a dead weak proxy raises on __class__
        if issubclass(kind, TensorBase):
            kept.append(getattr(obj, "_buf", None))
        elif issubclass(kind, Function):
            kept.append(tuple(vars(obj).values()))
    return extents(kept)


def _reads_whole(view, out) -> bool:
    """True when ``view`` reads all of ``out`` in its own order (element i is element i)."""
    return view.buf is out and view.offset == 0 and view.numel == out.size \
        and view.is_contiguous()


def chains(maps, touches, held) -> list:
    """The groups of maps to fuse, each a list of step indexes in order (its last, the root,
    keeps its result; the others' results live in registers)."""
    by_step = {m.step: m for m in maps if len(m.steps) == 1}
    by_out = {id(m.out): s for s, m in by_step.items()
              if np.dtype(m.out.dtype) in INTERMEDIATE_DTYPES}
    groups = {s: [s] for s in by_step}  # root step -> its members
    for c in sorted(by_step):
        consumer = by_step[c]
        for view in consumer.views:
            p = by_out.get(id(view.buf))
            if p is None or p >= c or p not in groups or not all(
                    _reads_whole(v, v.buf) for v in consumer.views if v.buf is view.buf):
                continue  # (x * x[::-1]: a register holds element i only)
            result = extents(view.buf)
            if _overlap(result, held) or any(
                    _overlap(result, touched) for s, touched in enumerate(touches)
                    if s not in (p, c)):
                continue
            members = groups[p]
            if all(_inputs_kept(by_step[m], c, members, by_step, touches) for m in members):
                groups[c] = sorted(groups[c] + groups.pop(p))
    return [[by_step[s] for s in g] for g in groups.values() if len(g) > 1]


def _inputs_kept(member, root, members, by_step, touches) -> bool:
    """True when no step between ``member`` and ``root`` other than a map touches an input
    of ``member`` that is not a result of the group."""
    inside = {id(by_step[m].out) for m in members}
    inputs = extents([v for v in member.views if id(v.buf) not in inside])
    return not any(_overlap(inputs, touches[s]) for s in range(member.step + 1, root)
                   if s not in by_step)


def multi_tensor_runs(updates) -> list:
    """Runs of two or more consecutive steps of one optimizer primitive on the cuda device
    with the same step count, hyper-parameters and dtype: one generated launch each."""
    runs, run = [], []
    for u in updates:
        buffers = MULTI_TENSOR.get(u.name, (None,))[0]
        key = (u.name, u.args[buffers:], u.args[0].dtype) if buffers else None
        if run and key == run[-1][0] and u.step == run[-1][1].step + 1:
            run.append((key, u))
            continue
        if len(run) > 1:
            runs.append([u for _, u in run])
        run = [(key, u)] if key and u.module.name == "cuda" and u.args[0].size else []
    if len(run) > 1:
        runs.append([u for _, u in run])
    return runs


def fuse(graph) -> list:
    """Fuse the elementwise chains of a captured :class:`CUDAGraph` in place, and apply each
    run of per-parameter optimizer steps (Adam) to all its parameters in one launch (a
    "multi-tensor apply"); the list of :class:`fused_kernels.Fused` made (their ``source`` is
    the generated code)."""
    recorded = graph._recorded
    if recorded is None:
        raise RuntimeError("fuse: nothing has been captured into this graph")
    if graph.fused is not None:
        return graph.fused
    steps = list(graph._steps)
    made = []
    for group in chains(recorded.maps, recorded.touches, _held()):
        fused = fused_kernels.build(group)
        steps[group[-1].step] = fused.step
        for member in group[:-1]:
            steps[member.step] = None
        if group[0].module.name == "cuda":
            recorded.launches -= len(group) - 1
        made.append(fused)
    for run in multi_tensor_runs(recorded.updates):
        fused = MULTI_TENSOR[run[0].name][1](run)
        steps[run[-1].step] = fused.step
        for update in run[:-1]:
            steps[update.step] = None
        recorded.launches -= len(run) - 1
        made.append(fused)
    graph._steps = tuple(s for s in steps if s is not None)
    graph.fused = made
    return made
