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
        functions[function] = (f"{function} = _in_float32({m.kind!r}, {m.op!r})" if half
                               else f"{function} = {m.kind.upper()}[{m.op!r}]")
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
    kernel = _compiled(source, name, functions.values())
    grid, block = device.launch_1d(n)
    args = tuple(args)

    def launch():
        kernel[grid, block](*args)
    return Fused(name, tuple(m.op for m in group), source, launch, len(group) - 1, saved)


LEAN_MAPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
             "neg": np.negative, "sqrt": np.sqrt, "relu": np.maximum}
"""Table maps whose NumPy form (``backends/optable.py``) is this one correctly rounded ufunc
(``relu``: ``np.maximum(x, 0)``): a cpu replay calls it on NumPy views made once, writing into
a buffer made once (``out=``), the same values as the backend's call."""


def _lean(m) -> bool:
    """True when map ``m`` is one ufunc of :data:`LEAN_MAPS` on dense floats of its result's
    dtype (it then runs on flat arrays, ``out=`` a buffer made once)."""
    return m.op in LEAN_MAPS and not (m.alpha or m.beta) and np.dtype(m.out.dtype).kind == "f" \
        and all(v.dtype == m.out.dtype and v.is_contiguous() for v in m.views)


def _cpu(group, name, views, operand, saved) -> Fused:
    lean_only = [True] * len(views)  # an input read by ufuncs only is passed as an array
    for m in group:
        for v in m.views:
            found = operand(v)[1]
            if found is not None:
                lean_only[found[0]] &= _lean(m)
    array = group[0].module.array
    params = [f"in{j}" for j in range(len(views))] + ["out"]
    args = [array(v).reshape(-1) if lean else v for v, lean in zip(views, lean_only)]
    args.append(group[-1].out.reshape(-1))
    body = []
    for k, m in enumerate(group):
        operands, root = [], k == len(group) - 1
        for v in m.views:
            produced, found = operand(v)
            if produced is None:
                operands.append(f"in{found[0]}")
            else:
                operands.append(f"t{produced}" if _lean(m)
                                else f"View(t{produced}, {v.shape}, {v.strides}, 0)")
        if _lean(m):
            into = "out" if root else f"t{k}"
            if not root:
                params.append(f"t{k}")
                args.append(np.empty(m.out.size, m.out.dtype))
            extra = ", 0" if m.op == "relu" else ""
            body.append(f"{LEAN_MAPS[m.op].__name__}({', '.join(operands)}{extra}, out={into})")
            continue
        params += [f"a{k}", f"b{k}"]
        args += [m.alpha, m.beta]
        call = f"{m.kind}({m.op!r}, {', '.join(operands)}, a{k}, b{k}).reshape(-1)"
        body.append(f"copyto(out, {call})" if root else f"t{k} = {call}")
    ops = " -> ".join(m.op for m in group)
    formula = "\n".join("        " + line for line in
                        _formula(group, operand, params))
    source = f'''def {name}({", ".join(params)}):
    """Fused from {len(group)} table maps of a captured step: {ops}.

    One call runs each op's cpu map on the previous result: a plain ufunc on flat arrays
    writing into a buffer made once (``out=``), else the cpu backend's map (NumPy, the op
    table's form):
{formula}
    Only out is stored into the graph's buffers: {len(group) - 1} intermediate(s) ({saved}
    bytes that eager stores and loads back) stay in temporaries of this function.
    """
''' + "".join(f"    {line}\n" for line in body)
    function = _compiled(source, name)
    return Fused(name, tuple(m.op for m in group), source, functools.partial(function, *args),
                 len(group) - 1, saved)


CUDA_HEADER = ("from numba import cuda, float32, float64\n\n"
               "from minigpu.backends.cuda.elementwise import BINARY, UNARY, _in_float32\n"
               "from minigpu.backends.cuda.optim import adam_update\n"
               "from minigpu.backends.cuda.strided import strided_offset\n")
CPU_HEADER = ("from numpy import add, copyto, divide, maximum, multiply, negative, sqrt, "
              "subtract\n\n"
              "from minigpu.backends.contract import View\n"
              "from minigpu.backends.cpu import binary, unary\n")
"""The imports above a generated source in its file: the file is a module of its own (the
static kernel report compiles it by path: ``--kernel FILE:NAME``)."""


def _compiled(source: str, name: str, bindings=()):
    """``name`` defined by ``source``, compiled from a file under :data:`SOURCE_DIR` that
    holds the imports, the ``bindings`` (lines such as ``binary_add = BINARY["add"]``) and
    the source."""
    header = CUDA_HEADER if source.startswith("@cuda.jit") else CPU_HEADER
    text = header + "".join(line + "\n" for line in bindings) + "\n\n" + source
    os.makedirs(SOURCE_DIR, exist_ok=True)
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    path = os.path.join(SOURCE_DIR, f"{name[:80]}_{digest}.py")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(text)
    namespace = {}
    exec(compile(text, path, "exec"), namespace)
    return namespace[name]


def multi_tensor_adam(run) -> Fused:
    """One launch for a run of per-parameter Adam steps (``fusion.multi_tensor_runs``):
    thread i updates element i of the parameters laid end to end, through the eager kernel's
    own per-element device function (``optim.adam_update``). The step count grows by one per
    replay, as each replaced step's did."""
    optim, device = backends.cuda_module("optim"), backends.cuda_module("device")
    first, buffers = run[0].args, 4
    sizes = [u.args[0].size for u in run]
    names = [[f"{b}{j}" for b in "pgmv"] for j in range(len(run))]
    scalars = ("beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps, "
               "weight_decay, use_wd")
    params = [name for group in names for name in group]
    body, start = [], 0
    for j, (size, group) in enumerate(zip(sizes, names)):
        test = "if" if j == 0 else "elif"
        end = start + size
        body.append(f"{test} i < {end}:" if j < len(run) - 1 else "else:")
        body.append(f"    adam_update({', '.join(group)}, i - {start}, {scalars})")
        start = end
    name = f"multi_tensor_adam_{len(run)}"
    saved = len(run) - 1
    source = f'''@cuda.jit
def {name}({", ".join(params)}, {scalars}):
    """Adam over {len(run)} parameters ({start} elements) in one launch: a multi-tensor apply
    of the {len(run)} per-parameter adam_step_ launches of a captured step.

    What one thread computes: element i of the parameters laid end to end (grid-stride), the
    element i - start of the parameter whose range holds i, by adam_update (the eager
    kernel's own per-element update). Parameter sizes: {", ".join(map(str, sizes))}.
    Block/grid: 1-D, device.launch_1d({start}).
    Memory: as the eager kernels (each buffer read and written once, coalesced); the
    branches cost a few compares per element.
    Saves per replay: {saved} launch(es).
    """
    start, step = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, {start}, step):
''' + "".join(f"        {line}\n" for line in body)
    kernel = _compiled(source, name)
    grid, block = device.launch_1d(start)
    arrays = tuple(a for u in run for a in u.args[:buffers])
    count, (lr, beta1, beta2, eps, weight_decay) = [first[buffers]], first[buffers + 1:]
    dtype = first[0].dtype

    def launch():
        constants = optim.adam_scalars(count[0], lr, beta1, beta2, eps, weight_decay, dtype)
        kernel[grid, block](*arrays, *constants, weight_decay != 0)
        count[0] += 1
    return Fused(name, (run[0].name,) * len(run), source, launch, saved, 0)
