"""The code generator of ``fusion.py``: one chain of table maps -> one kernel's source text.

On cuda the text is a ``@cuda.jit`` kernel written like the hand-written maps of
``backends/cuda/elementwise.py`` (a 1-D grid-stride loop, one output element per iteration):
each fused op is the cuda backend's own device function of that op (``unary_relu``,
``binary_add``: the op table's definition), each intermediate a local variable rounded to the
dtype eager stored it in, and only the chain's last result is stored. On cpu the text is a
Python function calling the cpu backend's maps (NumPy) in turn on temporaries, storing the last
result only. Either text is written to a file under the temporary directory and compiled from
it (so a sanitizer report, a traceback or ``inspect`` can point at its lines) and kept as
``Fused.source`` for printing.
"""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from typing import Callable, NamedTuple

import numpy as np

from .. import backends
from ..backends.contract import View

_HALF = np.dtype(np.float16)
SOURCE_DIR = os.path.join(tempfile.gettempdir(), "minigpu-fused")
"""Where the generated sources are written before they are compiled."""


class Fused(NamedTuple):
    """One fused chain: its generated kernel (or cpu function) and what it saves."""

    name: str
    ops: tuple            # the fused table ops, in order
    source: str           # the generated text
    step: Callable        # the replay step that runs it
    launches_saved: int   # cuda launches (cpu: backend calls) fewer per replay
    bytes_saved: int      # global memory traffic fewer per replay (eager's intermediates)

    def __str__(self):
        return self.source


def build(group) -> Fused:
    """The fused step of ``group`` (fusion.chains' maps, in order, the last one the root)."""
    inside = {id(m.out): k for k, m in enumerate(group)}
    inputs = {}  # (buffer id, layout) -> (index, view): each outside operand read once
    for m in group:
        for v in m.views:
            if id(v.buf) not in inside:
                inputs.setdefault((id(v.buf), v.shape, v.strides, v.offset), (len(inputs), v))
    views = [v for _, v in inputs.values()]

    def operand(v):
        return inside.get(id(v.buf)), inputs.get((id(v.buf), v.shape, v.strides, v.offset))

    name = "fused_" + "_".join(m.op for m in group)
    saved = _bytes_saved(group, views)
    if group[0].module.name == "cuda":
        return _cuda(group, name, views, operand, saved)
    return _cpu(group, name, views, operand, saved)


def _bytes_saved(group, views) -> int:
    """Eager's bytes (each map loads its operands and stores its result) minus the fused
    kernel's (each outside operand loaded once, the root's result stored)."""
    def size(v):
        return v.numel * np.dtype(v.dtype).itemsize
    eager = sum(size(v) for m in group for v in m.views) \
        + sum(m.out.size * np.dtype(m.out.dtype).itemsize for m in group)
    fused = sum(size(v) for v in views) + group[-1].out.size * np.dtype(group[-1].out.dtype).itemsize
    return eager - fused


def _formula(group, operand, names) -> list:
    """One line per fused op: ``t1 = relu(t0)`` (names: the operand names of each input)."""
    lines = []
    for k, m in enumerate(group):
        args = []
        for v in m.views:
            produced, found = operand(v)
            args.append(f"t{produced}" if produced is not None else names[found[0]])
        target = "out" if k == len(group) - 1 else f"t{k}"
        lines.append(f"{target} = {m.op}({', '.join(args)})")
    return lines


def _cuda(group, name, views, operand, saved) -> Fused:
    elementwise = backends.cuda_module("elementwise")
    device = backends.cuda_module("device")
    n = group[-1].out.size
    params, loads, args, notes = [], [], [], []
    for j, v in enumerate(views):
        shape, (strides,) = elementwise.collapse_dims(v.shape, v.strides)
        x = f"in{j}"
        if len(shape) == 0 or shape == (n,) and strides == (1,):
            params += [x, f"{x}_o"]
            loads.append(f"{x}[{x}_o + i]")
            args += [v.buf, v.offset]
            notes.append(f"{x}: dense (coalesced)")
        elif all(s == 0 for s in strides):
            params += [x, f"{x}_o"]
            loads.append(f"{x}[{x}_o]")
            args += [v.buf, v.offset]
            notes.append(f"{x}: one value for every element (a scalar operand)")
        else:
            params += [x, f"{x}_shape", f"{x}_s", f"{x}_o"]
            loads.append(f"{x}[strided_offset(i, {x}_shape, {x}_s, {x}_o)]")
            args += [v.buf, shape, strides, v.offset]
            notes.append(f"{x}: strided over {len(shape)} dims (a broadcast or permuted view)")
    params.append("out")
    args.append(group[-1].out)
    functions, body = {}, []
    for k, m in enumerate(group):
        half = m.views[0].buf.dtype == _HALF
        function = f"{m.kind}_{m.op}" + ("_in_float32" if half else "")
        functions[function] = (elementwise._in_float32(m.kind, m.op) if half
                               else elementwise._OPS[m.kind][m.op])
        operands = []
        for v in m.views:
            produced, found = operand(v)
            operands.append(f"t{produced}" if produced is not None else loads[found[0]])
        params += [f"a{k}", f"b{k}"]
        dtype = m.views[0].dtype
        args += [elementwise._alpha(m.alpha, dtype), elementwise._alpha(m.beta, dtype)]
        call = f"{function}({', '.join(operands)}, a{k}, b{k})"
        if k == len(group) - 1:
            body.append(f"out[i] = {call}")
        else:
            body.append(f"t{k} = {np.dtype(m.out.dtype).name}({call})")
    ops = " -> ".join(m.op for m in group)
    formula = "\n".join("        " + line for line in
                        _formula(group, operand, [f"in{j}" for j in range(len(views))]))
    memory = "\n".join("        " + note for note in notes)
    source = f'''@cuda.jit
def {name}({", ".join(params)}):
    """Fused from {len(group)} table maps of a captured step: {ops}.

    What one thread computes: element i of out, in a grid-stride loop (i = t, t + gridsize,
    ...), the chain's intermediates in registers, each rounded to the dtype eager stored it in:
{formula}
    Block/grid: 1-D, device.launch_1d({n}) (the hand-written maps' shape).
    Memory: each outside operand loaded once per element, out stored once (coalesced):
{memory}
    Saves per replay: {len(group) - 1} launch(es) and {saved} bytes of global traffic (eager
    stores each intermediate and loads it back).
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, step):
''' + "".join(f"        {line}\n" for line in body)
    kernel = _compiled(source, name, dict(functions))
    grid, block = device.launch_1d(n)
    args = tuple(args)

    def launch():
        kernel[grid, block](*args)
    return Fused(name, tuple(m.op for m in group), source, launch, len(group) - 1, saved)


def _cpu(group, name, views, operand, saved) -> Fused:
    module = group[0].module
    params = [f"in{j}" for j in range(len(views))] + ["out"]
    body = []
    for k, m in enumerate(group):
        operands = []
        for v in m.views:
            produced, found = operand(v)
            operands.append(f"View(t{produced}, {v.shape}, {v.strides}, 0)"
                            if produced is not None else f"in{found[0]}")
        params += [f"a{k}", f"b{k}"]
        body.append(f"t{k} = {m.kind}({m.op!r}, {', '.join(operands)}, a{k}, b{k})")
    body.append(f"copyto(out, t{len(group) - 1})")
    ops = " -> ".join(m.op for m in group)
    formula = "\n".join("        " + line for line in
                        _formula(group, operand, params))
    source = f'''def {name}({", ".join(params)}):
    """Fused from {len(group)} table maps of a captured step: {ops}.

    One call runs each op's cpu map (NumPy, the op table's form) on the previous result:
{formula}
    Only out is stored into the graph's buffers. Saves per replay: {len(group) - 1} backend
    call(s) and the copies of eager's intermediates into the graph's buffers ({saved} bytes
    that eager stores and loads back).
    """
''' + "".join(f"    {line}\n" for line in body)
    function = _compiled(source, name, {"unary": module.unary, "binary": module.binary})
    args = [*views, group[-1].out]
    for m in group:
        args += [m.alpha, m.beta]
    return Fused(name, tuple(m.op for m in group), source, functools.partial(function, *args),
                 len(group) - 1, saved)


def _compiled(source: str, name: str, functions: dict):
    """``name`` defined by ``source``, compiled from a file holding that text, in a namespace
    of ``functions`` and what generated code uses (``cuda``, the float types,
    ``strided_offset``, ``View``, ``copyto``)."""
    os.makedirs(SOURCE_DIR, exist_ok=True)
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    path = os.path.join(SOURCE_DIR, f"{name[:80]}_{digest}.py")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(source)
    namespace = dict(functions, View=View, copyto=np.copyto)
    if source.startswith("@cuda.jit"):
        from numba import cuda, float32, float64  # only a cuda graph needs them
        namespace.update(cuda=cuda, float32=float32, float64=float64,
                         strided_offset=backends.cuda_module("strided").strided_offset)
    exec(compile(source, path, "exec"), namespace)
    return namespace[name]
