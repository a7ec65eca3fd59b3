"""The compiled path: a kernel's threads as loops of machine code, the sanitizer still on.

The checked interpreter (``blocks.py``) runs every CUDA thread as Python (a greenlet) and
observes every element access through a Python proxy: faithful, and microseconds per access. This
module runs the same kernel source as MCUDA does (Stratton et al., 2008), compiled with Numba's
CPU target:

1. **Rewrite** (:class:`Rewrite`): ``cuda.threadIdx.x`` and friends read the thread context
   ``__c``; every subscript of an array becomes a checked ``load``/``store`` of
   :mod:`.compiled_memory` (bounds, poison, races), atomics its stand-ins, integer ``/ // %`` a
   division that suspects a zero divisor; device functions are rewritten the same way.
2. **Split at the barriers** (:func:`_plan`): the body becomes *regions* (code without a
   ``syncthreads``) and the block-level ``for``/``while``/``if`` statements that contain a
   barrier. Each region is a function run once per thread of the block, in a loop; the
   variables it shares with another region live in per-thread arrays between them; the
   header of a block-level statement (its range, its condition) is evaluated by every thread
   and must agree (a barrier reached by some threads only is *divergent*).
3. **Drive** (:func:`_driver_source`): one compiled function runs the blocks in the launch's
   shuffled order, the regions in order, and poisons each block's shared arrays and each
   thread's local arrays again. It allocates nothing: :class:`Compiled` passes it every array
   (shared and local storage, the variables that cross a barrier), and it works on borrowed
   views of them (:func:`.compiled_memory.borrow`), which cost no reference counting.

A launch on the compiled path never decides an error. When anything is suspect (an index
outside an array, a load of never-written memory, a conflict, a zero divisor, a divergent
barrier) or the compiled code raises, the arrays are restored from a snapshot and the launch
runs again on the checked path, which gives the verdict and the message. Kernels it cannot
compile (warp intrinsics, grid sync, dynamic shared memory, slices, ``print``, anything the
rewrite does not know) always take the checked path; so do launches while a trace observes
memory. Under the performance counters every access also writes a row of the launch's log,
which ``counters.py`` counts as it counts the checked path's. :data:`STATS` records which
launches took which path; the ``minigpu.simulator.compiled`` logger says, at INFO, when a kernel
starts compiling, how long it took (or its load from the disk cache), and why a kernel stays on
the checked path.
"""
from __future__ import annotations

import ast
import builtins
import collections
import copy
import itertools
import logging
import math
import os
import re
import sys
import time

import numpy as np
from numba import njit, typeof, types
from numba.core import compiler, typed_passes
from numba.core import config as numba_config
from numba.core.errors import NumbaError
from numba.core.registry import cpu_target

from . import compiled_cache, compiled_memory, config, counters, ieee, memory, rules
from .compiled_memory import (BDX, BDY, BDZ, BLOCK, BX, BY, BZ, DIVERGENT, EPOCH, GDX, GDY,
                              GDZ, NTHREADS, THREAD, TX, TY, TZ)
from .counters import GLOBAL, LOCAL, SHARED

AUTO_SECONDS = 30.0
"""``auto`` compiles a kernel once its checked launches (spent and predicted) reach this.
Paying the checked path up to the price of compiling, then compiling, costs at most
1 + max(compile/30 s, 30 s/compile) times the better choice made in hindsight (ski rental).
A compile costs 1-15 s on the project's 2-core machine (elementwise 1-2 s, a reduction 4-7 s,
each tile shape of the register-tiled matmul 10-14 s); 30 s, above most of them, keeps the
suite's many small launches on the checked path (at 10 s kernels compiled in many tests and
the suite took 1300 s instead of 816 s)."""
FIRST_GUESS = 50e-6
"""Seconds per thread a kernel never timed is predicted to cost on the checked path."""

logger = logging.getLogger(__name__)

STATS = collections.defaultdict(collections.Counter)
"""Kernel name -> Counter of ``fast``, ``checked``, ``fallback: <reason>``, ``ineligible:
<reason>``: which path each launch took (the docs' table comes from here)."""


class Ineligible(Exception):
    """The kernel uses something the compiled path does not run."""


_AXES = {"x": 0, "y": 1, "z": 2}
_CTX = {"threadIdx": TX, "blockIdx": BX, "blockDim": BDX, "gridDim": GDX}


_cuda = None          # the numba.cuda module, set by bind()
_kernel_class = None  # the simulator's FakeCUDAKernel, set by bind()
_cuda_module_class = ()   # the simulator's FakeCUDAModule (what a launch swaps in), by bind()


def bind(cuda, kernel_class):
    """``install()`` tells this module what ``numba.cuda`` and a simulated kernel are."""
    global _cuda, _kernel_class, _cuda_module_class
    from numba.cuda.simulator.kernelapi import FakeCUDAModule
    _cuda, _kernel_class, _cuda_module_class = cuda, kernel_class, FakeCUDAModule


def _is_cuda(node, ns):
    return _cuda is not None and isinstance(node, ast.Name) and ns.get(node.id, None) is _cuda


def _cuda_path(node, ns):
    """``["atomic", "add"]`` for ``cuda.atomic.add`` (``cuda`` bound to numba.cuda)."""
    path = []
    while isinstance(node, ast.Attribute):
        path.append(node.attr)
        node = node.value
    return path[::-1] if path and _is_cuda(node, ns) else None


def _ctx(k):
    return ast.Subscript(ast.Name("__c", ast.Load()), ast.Constant(k), ast.Load())


def _call(name, args):
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def _index(node):
    if isinstance(node, ast.Slice) or isinstance(node, ast.Tuple) and any(
            isinstance(e, ast.Slice) for e in node.elts):
        raise Ineligible("a slice of an array")
    return node if isinstance(node, ast.Tuple) else ast.Tuple([node], ast.Load())


def _linear():
    """The linear thread index within its block, as source."""
    return (f"(__c[{TX}] + __c[{TY}] * __c[{BDX}] + __c[{TZ}] * __c[{BDX}] * __c[{BDY}])")


class Rewrite(ast.NodeTransformer):
    """A kernel or device function's AST in compiled-path terms (see the module docstring)."""

    def __init__(self, ns, kernel, compiler_):
        self.ns, self.kernel, self.compiler = ns, kernel, compiler_
        self.shared, self.local = {}, {}   # name -> (shape, dtype)
        self.temps = itertools.count()

    def _access(self, name, node, args):
        """The call of an access stand-in: its arguments, the thread context and flags, and
        the access's site for the counters (:meth:`KernelCompiler.site`)."""
        return _call(name, args + [ast.Name("__c", ast.Load()), ast.Name("__F", ast.Load()),
                                   ast.Constant(self.compiler.site(node))])

    # --- expressions
    def visit_Attribute(self, node):
        path = _cuda_path(node, self.ns)
        if path is not None:
            if len(path) == 2 and path[0] in _CTX and path[1] in _AXES:
                return _ctx(_CTX[path[0]] + _AXES[path[1]])
            if path == ["warpsize"]:
                return ast.Constant(32)
            if path == ["laneid"]:
                return ast.parse(f"{_linear()} % 32", mode="eval").body
            raise Ineligible(f"cuda.{'.'.join(path)}")
        node = self.generic_visit(node)
        if node.attr in ("shape", "size", "ndim") and isinstance(node.ctx, ast.Load):
            return _call(f"__{node.attr}_of", [node.value])
        return node

    def visit_Call(self, node):
        path = _cuda_path(node.func, self.ns)
        if node.keywords and path is None:
            raise Ineligible("a call with keyword arguments")
        if path is not None:
            return self._cuda_call(path, node)
        node.args = [self.visit(a) for a in node.args]
        if isinstance(node.func, ast.Name) and node.func.id == "len":
            return _call("__len_of", node.args)
        target = _resolve(node.func, self.ns)
        if isinstance(target, type(math.floor)) and target in ROUNDING:
            node.func = ast.Name(f"__{target.__name__}", ast.Load())
            return node
        if target is not None and _is_device_function(target):
            name = self.compiler.device(target)
            return _call(name, node.args + [ast.Name("__c", ast.Load()),
                                            ast.Name("__F", ast.Load())])
        if target is print:
            raise Ineligible("print")
        if target in (round, ieee.BUILTINS["round"]) and len(node.args) == 2:
            raise Ineligible("round(x, ndigits), which Numba's CPU target rounds otherwise")
        node.func = self.visit(node.func)
        return node

    def _cuda_call(self, path, node):
        args = [self.visit(a) for a in node.args]
        if node.keywords:
            raise Ineligible(f"cuda.{'.'.join(path)} with keyword arguments")
        if path == ["grid"] or path == ["gridsize"]:
            n = args[0].value if isinstance(args[0], ast.Constant) else None
            if n not in (1, 2, 3):
                raise Ineligible("cuda.grid of a non-literal rank")
            if path == ["grid"]:
                parts = [f"(__c[{BX + k}] * __c[{BDX + k}] + __c[{TX + k}])" for k in range(n)]
            else:
                parts = [f"(__c[{BDX + k}] * __c[{GDX + k}])" for k in range(n)]
            text = parts[0] if n == 1 else "(" + ", ".join(parts) + ")"
            return ast.parse(text, mode="eval").body
        if path == ["syncthreads"]:
            if not self.kernel:
                raise Ineligible("a barrier in a device function")
            return _call("__BARRIER", [])
        if len(path) == 2 and path[0] == "atomic":
            op = {"compare_and_swap": "cas", "cas": "cas"}.get(path[1], path[1])
            if op != "cas" and op not in compiled_memory.ATOMICS:
                raise Ineligible(f"cuda.atomic.{path[1]}")
            if op == "cas" and path[1] == "compare_and_swap":
                args = [args[0], ast.Constant(0)] + args[1:]
            args[1] = _index(args[1])
            name = "__atomic_cas" if op == "cas" else f"__atomic_{op}"
            return self._access(name, node, args)
        if path == ["const", "array_like"]:
            return args[0]
        if path == ["cbrt"] and len(args) == 1:
            return _call("__cbrt", args)   # the real cube root (cbrt(-8) is -2), its type kept
        if len(path) == 1 and path[0] in compiled_memory.BIT_INTRINSICS and len(args) == 1:
            return _call(f"__{path[0]}", [args[0], ast.Name("__F", ast.Load())])
        if len(path) == 1 and path[0] in compiled_memory.SHUFFLES and len(args) == 3:
            if not self.kernel:
                raise Ineligible("a warp shuffle in a device function not inlined")
            mask, value, arg = args
            kind = ast.Constant(compiled_memory.SHUFFLES[path[0]])
            return _call("__SHFL", [kind, value, arg, mask])
        raise Ineligible(f"cuda.{'.'.join(path)}")

    def visit_BinOp(self, node):
        node = self.generic_visit(node)
        op = type(node.op).__name__
        if op in compiled_memory.DIVISIONS:
            return _call(f"__{op}", [node.left, node.right, ast.Name("__F", ast.Load())])
        return node

    def visit_Subscript(self, node):
        if not isinstance(node.ctx, ast.Load):
            raise Ineligible("an unusual store")
        value = self.visit(node.value)
        if isinstance(value, ast.Call) and not (isinstance(value.func, ast.Name) and
                                                value.func.id == "__load"):
            # x.shape[0]: a tuple of a call (a[i][j] is a load of a load: a row of a 2-d a)
            node.value, node.slice = value, self.visit(node.slice)
            return node
        return self._access("__load", node, [value, _index(self.visit(node.slice))])

    # --- statements
    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            space = self._allocation(node.value)
            if space is not None:
                return self._allocate(node.targets[0].id, space, node.value)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            t = node.targets[0]
            return ast.Expr(self._access("__store", t, [
                self.visit(t.value), _index(self.visit(t.slice)), self.visit(node.value)]))
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple) and all(
                isinstance(e, (ast.Name, ast.Subscript)) for e in node.targets[0].elts):
            return self._unpack(node.targets[0].elts, node.value)
        for t in node.targets:
            if any(isinstance(n, (ast.Subscript, ast.Attribute, ast.Starred))
                   for n in ast.walk(t)):
                raise Ineligible("a store to several places at once")
        node.value = self.visit(node.value)
        return node

    def _unpack(self, targets, value):
        """``a[i], a[j] = a[j], a[i]``: every value first (into temporaries), then each
        target in order, as Python does."""
        k = next(self.temps)
        if isinstance(value, ast.Tuple) and len(value.elts) == len(targets):
            parts = [self.visit(e) for e in value.elts]
        else:
            whole = ast.Name(f"__tv{k}", ast.Load())
            out = [ast.Assign([ast.Name(f"__tv{k}", ast.Store())], self.visit(value))]
            parts = [ast.Subscript(whole, ast.Constant(i), ast.Load())
                     for i in range(len(targets))]
            return out + self._assign_each(targets, parts)
        temps = [ast.Name(f"__tv{k}_{i}", ast.Load()) for i in range(len(parts))]
        out = [ast.Assign([ast.Name(t.id, ast.Store())], v) for t, v in zip(temps, parts)]
        return out + self._assign_each(targets, temps)

    def _assign_each(self, targets, values):
        out = []
        for t, v in zip(targets, values):
            if isinstance(t, ast.Name):
                out.append(ast.Assign([t], v))
            else:
                out.append(ast.Expr(self._access("__store", t, [
                    self.visit(t.value), _index(self.visit(t.slice)), v])))
        return out

    def visit_AugAssign(self, node):
        op = type(node.op).__name__
        if isinstance(node.target, ast.Name):
            left = ast.Name(node.target.id, ast.Load())
            value = self.visit(ast.BinOp(left, node.op, node.value))
            return ast.Assign([ast.Name(node.target.id, ast.Store())], value)
        if not isinstance(node.target, ast.Subscript):
            raise Ineligible("an augmented store to an attribute")
        t = node.target
        temp = f"__ix{next(self.temps)}"
        index = ast.Assign([ast.Name(temp, ast.Store())], _index(self.visit(t.slice)))
        base = self.visit(t.value)
        old = self._access("__load", t, [base, ast.Name(temp, ast.Load())])
        right = self.visit(node.value)
        if op in compiled_memory.DIVISIONS:
            new = _call(f"__{op}", [old, right, ast.Name("__F", ast.Load())])
        else:
            new = ast.BinOp(old, node.op, right)
        store = ast.Expr(self._access("__store", t, [base, ast.Name(temp, ast.Load()), new]))
        return [index, store]

    def visit_While(self, node):
        node = self.generic_visit(node)
        node.test = ast.BoolOp(ast.And(), [_call("__loop_goes_on", [ast.Name("__F", ast.Load())]),
                                           node.test])
        return node

    def visit_AnnAssign(self, node):
        """``x: float32 = v`` is ``x = v``, as Numba compiles it (the annotation is not
        evaluated); ``x: float32`` alone is nothing."""
        if node.value is None:
            return ast.Pass()
        return self.visit_Assign(ast.copy_location(ast.Assign([node.target], node.value), node))

    def visit_Raise(self, node):
        raise Ineligible("raise")

    def visit_Assert(self, node):
        raise Ineligible("assert")

    def visit_With(self, node):
        raise Ineligible("with")

    def visit_Try(self, node):
        raise Ineligible("try")

    def visit_Lambda(self, node):
        raise Ineligible("a lambda")

    def visit_FunctionDef(self, node):
        raise Ineligible("a nested function")

    def _allocation(self, value):
        if isinstance(value, ast.Call):
            path = _cuda_path(value.func, self.ns)
            if path in (["shared", "array"], ["local", "array"]):
                return path[0]
        return None

    def _allocate(self, name, space, call):
        if not self.kernel:
            raise Ineligible(f"a {space} array in a device function")
        kw = {k.arg: k.value for k in call.keywords}
        shape = call.args[0] if call.args else kw.get("shape")
        dtype = call.args[1] if len(call.args) > 1 else kw.get("dtype")
        if set(kw) - {"shape", "dtype"}:
            raise Ineligible(f"cuda.{space}.array with {sorted(set(kw) - {'shape', 'dtype'})}")
        try:
            shp = eval(compile(ast.Expression(shape), "<shape>", "eval"), dict(self.ns))
            dt = memory._dtype(eval(compile(ast.Expression(dtype), "<dtype>", "eval"),
                                    dict(self.ns)), memory.kernelapi)
        except Exception as exc:
            raise Ineligible(f"a {space} array shape or dtype not known before the launch "
                             f"({exc})") from None
        shp = (shp,) if isinstance(shp, (int, np.integer)) else tuple(shp)
        if shp == (0,) or not shp:
            raise Ineligible("dynamic shared memory")
        table = self.shared if space == "shared" else self.local
        if name in self.shared or name in self.local:
            raise Ineligible(f"{name} allocated twice")
        table[name] = (tuple(int(s) for s in shp), dt)
        if space == "shared":
            return ast.Pass()
        return ast.Assign([ast.Name(name, ast.Store())],
                          _call("__local_row", [ast.Name(f"__LS_{name}", ast.Load()),
                                                ast.Name("__t", ast.Load()),
                                                ast.Constant(True)]))


def _is_device_function(obj):
    return _kernel_class is not None and isinstance(obj, _kernel_class) and obj._device


def _namespace(fn):
    """``fn``'s globals and closure variables as they are outside a launch: during a checked
    launch (a background compile starts in one, :func:`checked_block`) the launcher has swapped
    in the simulator's ``cuda``, IEEE ``math`` and device builtins, which are put back here
    (its NumPy scalar types stand for Numba's: the same casts, the same cache key)."""
    ns = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                ns[name] = cell.cell_contents
            except ValueError:
                pass
    for name, value in list(ns.items()):
        if isinstance(value, _cuda_module_class):
            ns[name] = _cuda
        elif id(value) in _IEEE_ORIGINALS:
            ns[name] = _IEEE_ORIGINALS[id(value)]
        elif name in _BUILTIN_NAMES and getattr(value, "__module__", "").startswith(__package__):
            del ns[name]   # a device builtin swapped in (round, print): the builtin again
    return ns


_IEEE_ORIGINALS = {id(ieee.SWAPS[id(v)]): v for v in [math, *vars(math).values()]
                   if id(v) in ieee.SWAPS}
"""id(IEEE replacement) -> the ``math`` module or function it stands in for."""
_BUILTIN_NAMES = frozenset(vars(builtins))


def _function_def(fn):
    """``fn``'s definition, its nodes at their lines in its file (``lineno``) and tagged with
    the file (``minigpu_file``): an access's site, as the checked path sees it."""
    code = fn.__code__
    func = copy.deepcopy(rules.function_ast(code))   # the cached tree stays as it is
    if isinstance(func, ast.Lambda):   # a device function of the op table: lines of its file
        lam, func = func, ast.parse("def __lambda(): pass").body[0]
        func.args, func.body = lam.args, [ast.Return(lam.body)]
    elif isinstance(func, ast.FunctionDef):   # lines of its source, from its first
        ast.increment_lineno(func, code.co_firstlineno - 1)
    else:
        raise Ineligible("no source")
    for node in ast.walk(func):
        node.minigpu_file = code.co_filename
    a = func.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
        raise Ineligible("a signature with defaults, * or **")
    func.decorator_list = []
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:] or [ast.Pass()]
    func.body = body
    return func


SPLITS = {"syncthreads", *compiled_memory.SHUFFLES}
"""The ``cuda`` calls the split cuts a kernel at: a device function that makes one (itself or
through another) is inlined into the kernel, so that the split sees it."""


class Inliner:
    """Pastes into a kernel's body the device functions that reach a barrier or a warp
    shuffle: their parameters bound to the arguments (a name or a constant argument is
    substituted), their names prefixed (``__in3_val``; the free ones resolved in the device
    function's own namespace, which :attr:`extra` adds to the kernel's), an ``if`` on a
    constant folded, and the final ``return`` an assignment to the call's target."""

    def __init__(self, ns):
        self.ns, self.extra = ns, {}
        self.count = itertools.count()
        self._needs = {}

    def needs(self, target):
        """Whether a device function reaches a split point."""
        key = id(target)
        if key not in self._needs:
            self._needs[key] = False   # a recursive device function does not reach one
            func, ns = _function_def(target.fn), _namespace(target.fn)
            self._needs[key] = any(self._splits(call, ns) for call in ast.walk(func)
                                   if isinstance(call, ast.Call))
        return self._needs[key]

    def _splits(self, call, ns):
        path = _cuda_path(call.func, ns)
        if path is not None:
            return len(path) == 1 and path[0] in SPLITS
        target = _resolve(call.func, ns)
        return target is not None and _is_device_function(target) and self.needs(target)

    def _inlined_call(self, node, ns):
        """The device function a call statement's call inlines, or None."""
        call = node.value if isinstance(node, (ast.Assign, ast.Expr, ast.Return)) else None
        return _resolve(call.func, ns) if self._inlines(call, ns) else None

    def body(self, stmts, ns):
        out = []
        for s in stmts:
            target = self._inlined_call(s, ns)
            if target is not None and not (isinstance(s, ast.Assign) and len(s.targets) > 1):
                out += self._paste(target, s, ns)
                continue
            if isinstance(s, (ast.If, ast.While, ast.For)):
                s.body, s.orelse = self.body(s.body, ns), self.body(s.orelse, ns)
                header = s.iter if isinstance(s, ast.For) else s.test
                if any(self._inlines(n, ns) for n in ast.walk(header)):
                    raise Ineligible("a device function with a barrier or shuffle called in "
                                     "a loop or branch condition")
                out.append(s)
                continue
            hoisted = []
            inliner = self

            class Hoist(ast.NodeTransformer):
                """Each such call inside an expression first, into a temporary."""

                def visit_Call(self, node):
                    node = self.generic_visit(node)
                    if not inliner._inlines(node, ns):
                        return node
                    name = f"__ir{next(inliner.count)}"
                    hoisted.append(ast.Assign([ast.Name(name, ast.Store())], node))
                    return ast.Name(name, ast.Load())

            s = ast.fix_missing_locations(Hoist().visit(s))
            out += self.body(hoisted, ns) + [s]
        return out

    def _inlines(self, call, ns):
        return isinstance(call, ast.Call) and _cuda_path(call.func, ns) is None and \
            self._splits(call, ns)

    def _paste(self, target, stmt, ns):
        call = stmt.value
        if call.keywords:
            raise Ineligible("a call with keyword arguments")
        func, fns = _function_def(target.fn), _namespace(target.fn)
        params = [a.arg for a in func.args.args]
        if len(params) != len(call.args):
            raise Ineligible(f"{target.fn.__name__} called with {len(call.args)} arguments")
        prefix = f"__in{next(self.count)}_"
        assigned = _stored(func.body)
        local = set(params) | assigned
        body = _fold_constant_ifs(func.body, fns, local)
        if body and (any(isinstance(n, ast.Return) for s in body[:-1] for n in ast.walk(s))
                     or any(isinstance(n, ast.Return) for n in ast.walk(body[-1])
                            if n is not body[-1])):
            raise Ineligible(f"a return before the end of {target.fn.__name__}, which has a "
                             f"barrier or shuffle")
        substitute = {p: a for p, a in zip(params, call.args)
                      if p not in assigned and isinstance(a, (ast.Name, ast.Constant))}
        renamed = _Prefix(prefix, local, fns, substitute, self.extra).run(body)
        binds = [ast.Assign([ast.Name(prefix + p, ast.Store())], a)
                 for p, a in zip(params, call.args) if p not in substitute]
        last = renamed[-1] if renamed else None
        if isinstance(last, ast.Return):
            value = last.value or ast.Constant(None)
            if isinstance(stmt, ast.Assign):
                renamed[-1] = ast.Assign(stmt.targets, value)
            elif isinstance(stmt, ast.Return):
                renamed[-1] = ast.Return(value)
            else:
                renamed[-1] = ast.Expr(value)
        elif isinstance(stmt, ast.Assign):
            renamed.append(ast.Assign(stmt.targets, ast.Constant(None)))
        inner_ns = {**ns, **self.extra}
        return self.body([ast.fix_missing_locations(n) for n in binds + renamed], inner_ns)


def _resolve(func, ns):
    try:
        return eval(compile(ast.Expression(func), "<resolve>", "eval"), dict(ns))
    except Exception:
        return None


_CONSTANT_TEST = (ast.Name, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp,
                  ast.cmpop, ast.boolop, ast.unaryop, ast.operator, ast.Load)


def _constant_test(test, ns, local):
    """The truth of an ``if`` test made of numbers and names bound to numbers in ``ns`` (the
    factory's closure constants: Numba freezes them too), or None."""
    if not all(isinstance(n, _CONSTANT_TEST) for n in ast.walk(test)):
        return None
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    if names & local or not all(isinstance(ns.get(n), (bool, int, float, np.number))
                                for n in names):
        return None
    try:
        return bool(eval(compile(ast.Expression(test), "<if>", "eval"), dict(ns)))
    except Exception:
        return None


def _fold_constant_ifs(stmts, ns, local):
    """``if`` statements on constants (:func:`_constant_test`) replaced by the branch they
    take, as Numba prunes them."""
    out = []
    for s in stmts:
        if isinstance(s, ast.If):
            taken = _constant_test(s.test, ns, local)
            if taken is not None:
                out += _fold_constant_ifs(s.body if taken else s.orelse, ns, local)
                if out and isinstance(out[-1], ast.Return):
                    return out   # what follows a return it now always takes is dead
                continue
        for field in ("body", "orelse"):
            if isinstance(getattr(s, field, None), list):
                setattr(s, field, _fold_constant_ifs(getattr(s, field), ns, local))
        out.append(s)
    return out


class _AugmentedNames(ast.NodeTransformer):
    """``x += e`` as ``x = x + e`` (for a name: the same for the scalars a kernel holds), so
    that the read of ``x`` is a read like any other."""

    def visit_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            return node
        read = ast.Name(node.target.id, ast.Load())
        return ast.copy_location(ast.Assign([node.target], ast.BinOp(read, node.op, node.value)),
                                 node)


def _unset_reads(stmts, params):
    """The reads (``ast.Name`` nodes) of a local variable that some path to them leaves
    unassigned (a GPU would read an uninitialised register there; Python raises)."""
    local = _stored(stmts) - set(params)
    found = []

    def reads(node, done):
        found.extend(n for n in ast.walk(node) if isinstance(n, ast.Name)
                     and isinstance(n.ctx, ast.Load) and n.id in local and n.id not in done)

    def block(body, done):
        """The names surely assigned after ``body`` (None: no path gets past it)."""
        for s in body:
            if isinstance(s, ast.If):
                reads(s.test, done)
                after = [d for d in (block(s.body, set(done)), block(s.orelse, set(done)))
                         if d is not None]
                done = set.intersection(*after) if after else None
            elif isinstance(s, (ast.For, ast.While)):   # the body may not run at all
                reads(s.iter if isinstance(s, ast.For) else s.test, done)
                block(s.body, done | (_stored([s.target]) if isinstance(s, ast.For) else set()))
                block(s.orelse, set(done))
            elif isinstance(s, (ast.Return, ast.Break, ast.Continue)):
                reads(s, done)
                return None
            else:
                reads(s, done)
                done = done | _stored([s])
            if done is None:
                return None
        return done

    block(stmts, set())
    return found


def _guard_unset(stmts, params):
    """Each read of :func:`_unset_reads` checked at run time: ``__set_v`` says whether this
    thread assigned ``v``; a read where it did not is suspected (``compiled_memory.assigned``),
    and the checked path reports the uninitialised value. Other code is unchanged."""
    stmts = [_AugmentedNames().visit(s) for s in stmts]
    unset = _unset_reads(stmts, params)
    if not unset:
        return stmts
    guarded = {n.id for n in unset}
    ids = {id(n) for n in unset}

    class Check(ast.NodeTransformer):
        def visit_Name(self, node):
            if id(node) not in ids:
                return node
            return _call("__assigned", [ast.Name(node.id, ast.Load()),
                                        ast.Name(f"__set_{node.id}", ast.Load()),
                                        ast.Name("__F", ast.Load())])

    def mark(names):
        return [ast.Assign([ast.Name(f"__set_{n}", ast.Store())], ast.Constant(True))
                for n in sorted(names & guarded)]

    def body(block):
        out = []
        for s in block:
            s = Check().visit(s)
            if isinstance(s, (ast.If, ast.For, ast.While)):
                s.body, s.orelse = body(s.body), body(s.orelse)
                if isinstance(s, ast.For):
                    s.body = mark(_stored([s.target])) + s.body
                out.append(s)
            else:
                out += [s] + mark(_stored([s]))
        return out

    start = [ast.Assign([ast.Name(f"__set_{n}", ast.Store())], ast.Constant(False))
             for n in sorted(guarded)]
    return [ast.fix_missing_locations(s) for s in start + body(stmts)]


class _Prefix(ast.NodeTransformer):
    """A device function's names in the kernel: locals prefixed, free names prefixed and
    bound in ``extra`` to their values, substituted parameters replaced, builtins kept."""

    def __init__(self, prefix, local, ns, substitute, extra):
        self.prefix, self.local, self.ns = prefix, local, ns
        self.substitute, self.extra = substitute, extra

    def run(self, stmts):
        return [self.visit(copy.deepcopy(s)) for s in stmts]

    def visit_Name(self, node):
        if node.id in self.substitute and isinstance(node.ctx, ast.Load):
            return copy.deepcopy(self.substitute[node.id])
        if node.id in self.local:
            return ast.Name(self.prefix + node.id, node.ctx)
        if node.id in self.ns:
            self.extra[self.prefix + node.id] = self.ns[node.id]
            return ast.Name(self.prefix + node.id, node.ctx)
        return node


ROUNDING = (math.floor, math.ceil, math.trunc)
"""``math.floor`` and friends return a float of the argument's type in a CUDA kernel (libdevice
``floorf``: ``floor(inf)`` is inf, ``floor(-0.0)`` is -0.0) but an int64 on Numba's CPU
target; the compiled path calls NumPy's (``__floor`` ...), which keep the float."""

_HELPERS = {
    "__load": compiled_memory.load, "__store": compiled_memory.store,
    "__atomic_cas": compiled_memory.atomic_cas,
    "__shape_of": compiled_memory.shape_of, "__size_of": compiled_memory.size_of,
    "__ndim_of": compiled_memory.ndim_of, "__len_of": compiled_memory.len_of,
    "__local_row": compiled_memory.local_row, "__reset": compiled_memory.reset,
    "__borrow": compiled_memory.borrow, "__shuffle": compiled_memory.shuffle,
    "__warps_converged": compiled_memory.warps_converged,
    "__loop_goes_on": compiled_memory.loop_goes_on,
    "np": np, "__cbrt": np.cbrt, "__assigned": compiled_memory.assigned,
    **{f"__{f.__name__}": getattr(np, f.__name__) for f in ROUNDING},
    **{f"__atomic_{k}": v for k, v in compiled_memory.ATOMICS.items()},
    **{f"__{k}": v for k, v in compiled_memory.DIVISIONS.items()},
    **{f"__{k}": v for k, v in compiled_memory.BIT_INTRINSICS.items()},
}


def _barrier():
    """``cuda.syncthreads()`` while typing the unsplit kernel: nothing."""


# ----------------------------------------------------------------------------- the split


def _shuffle_typing(kind, value, arg, mask):
    """A warp shuffle while typing the unsplit kernel: its value's type."""
    return value


def _is_shuffle(node):
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == "__SHFL"


def _has_barrier(node):
    """Whether a statement holds a split point: a barrier or a warp shuffle."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.func.id in ("__BARRIER", "__SHFL") for n in ast.walk(node))


def _hoist_shuffles(stmts, count):
    """Each warp shuffle as a statement of its own, ``__w3 = __SHFL(kind, __wv3, arg,
    mask)``, its value first copied to ``__wv3`` (which every lane's result reads, so no lane
    may overwrite it in the shuffle's region); the statement that used it reads ``__w3``."""
    out = []
    for s in stmts:
        if isinstance(s, (ast.If, ast.While, ast.For)):
            if _has_barrier(s.iter if isinstance(s, ast.For) else s.test):
                raise Ineligible("a warp shuffle in a loop or branch condition")
            s.body, s.orelse = _hoist_shuffles(s.body, count), _hoist_shuffles(s.orelse, count)
            out.append(s)
            continue
        pre = []

        class Hoist(ast.NodeTransformer):
            def visit_Call(self, node):
                node = self.generic_visit(node)
                if not _is_shuffle(node):
                    return node
                k = next(count)
                kind, value, arg, mask = node.args
                pre.append(ast.Assign([ast.Name(f"__wv{k}", ast.Store())], value))
                operands = []
                for name, e in ((f"__wa{k}", arg), (f"__wm{k}", mask)):
                    if not isinstance(e, (ast.Name, ast.Constant)):
                        pre.append(ast.Assign([ast.Name(name, ast.Store())], e))
                        e = ast.Name(name, ast.Load())
                    operands.append(e)
                pre.append(ast.Assign([ast.Name(f"__w{k}", ast.Store())], _call(
                    "__SHFL", [kind, ast.Name(f"__wv{k}", ast.Load())] + operands)))
                return ast.Name(f"__w{k}", ast.Load())

        s = Hoist().visit(s)
        out += [ast.fix_missing_locations(n) for n in pre + [s]]
    return out


class _ShuffleReads(ast.NodeTransformer):
    """``__SHFL(kind, v, arg, mask)`` in a region: thread ``__t`` reads its source lane's ``v``
    from the per-thread array ``__L_v`` every lane stored before the split."""

    def visit_Call(self, node):
        node = self.generic_visit(node)
        if not _is_shuffle(node):
            return node
        kind, value, arg, mask = node.args
        return _call("__shuffle", [kind, ast.Name(f"__L_{value.id}", ast.Load()), value, arg,
                                   mask, ast.Name("__t", ast.Load()),
                                   ast.Name("__c", ast.Load()), ast.Name("__F", ast.Load())])


def _plan(stmts):
    """Statements -> [("region", [stmt]), ("barrier",), ("warp",), ("for", name, args, plan),
    ("while", test, plan), ("if", test, plan, plan)]; ("warp",) comes before a shuffle."""
    items, region = [], []
    for s in stmts:
        if isinstance(s, ast.Assign) and _is_shuffle(s.value):
            if region:
                items.append(("region", region))
            items.append(("warp",))
            region = [s]
            continue
        if not _has_barrier(s):
            region.append(s)
            continue
        if region:
            items.append(("region", region))
            region = []
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
                isinstance(s.value.func, ast.Name) and s.value.func.id == "__BARRIER":
            items.append(("barrier",))
        elif isinstance(s, ast.For) and not s.orelse and isinstance(s.target, ast.Name) and \
                isinstance(s.iter, ast.Call) and isinstance(s.iter.func, ast.Name) and \
                s.iter.func.id == "range" and 1 <= len(s.iter.args) <= 3:
            a = s.iter.args
            args = [ast.Constant(0), a[0], ast.Constant(1)] if len(a) == 1 else \
                ([a[0], a[1], ast.Constant(1)] if len(a) == 2 else list(a))
            items.append(("for", s.target.id, args, _plan(s.body)))
        elif isinstance(s, ast.While) and not s.orelse:
            items.append(("while", s.test, _plan(s.body)))
        elif isinstance(s, ast.If):
            items.append(("if", s.test, _plan(s.body), _plan(s.orelse)))
        else:
            raise Ineligible("a barrier inside a statement the split does not know")
    if region:
        items.append(("region", region))
    return items


def _names(nodes):
    return {n.id for node in nodes for n in ast.walk(node) if isinstance(n, ast.Name)}


def _stored(nodes):
    return {n.id for node in nodes for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _loose_jump(stmts):
    """A ``break``/``continue`` of a loop outside these statements."""
    def walk(node):
        if isinstance(node, (ast.Break, ast.Continue)):
            return True
        if isinstance(node, (ast.For, ast.While)):   # its body's jumps are its own
            return any(walk(c) for c in node.orelse)
        return any(walk(c) for c in ast.iter_child_nodes(node))
    return any(walk(s) for s in stmts)


class _Unit:
    """A region or a header: the code run once per thread, with the names it uses."""

    def __init__(self, kind, nodes):
        self.kind, self.nodes = kind, nodes
        self.names, self.stored = _names(nodes), _stored(nodes)


def _units(plan, out):
    for item in plan:
        if item[0] == "region":
            if _loose_jump(item[1]):
                raise Ineligible("break or continue of a loop that contains a barrier")
            out.append(_Unit("region", item[1]))
        elif item[0] == "for":
            out.append(_Unit("header", item[2] + [ast.Name(item[1], ast.Store())]))
            _units(item[3], out)
        elif item[0] == "while":
            out.append(_Unit("header", [item[1]]))
            _units(item[2], out)
        elif item[0] == "if":
            out.append(_Unit("header", [item[1]]))
            _units(item[2], out)
            _units(item[3], out)
    return out


# ----------------------------------------------------------------------------- compiling


class Compiled:
    """A kernel compiled for one argument signature: its driver, and the arrays a launch gives
    it besides the kernel's arguments (the driver allocates nothing: it borrows)."""

    def __init__(self, driver, shared, local, carried, branches, key, cached):
        self.driver, self.branches, self.key = driver, branches, key
        self.cached = cached   # compiled before on this machine: its first call is a load
        self.remembered = False   # its carried types and hint are on disk
        # name -> (shape, dtype) of shared arrays and local arrays; name -> dtype of the variables
        # that live across a barrier
        self.shared, self.local, self.carried = shared, local, carried

    def run(self, values, order, dims, log=compiled_memory.NO_LOG):
        """Run the launch; its flags (:data:`.compiled_memory.SUSPECT`: the suspect's number in
        :data:`.compiled_memory.SUSPECTS`, 0 if none; the accesses logged into ``log``, the barriers
        completed)."""
        args = self._arguments(values, order, dims, log)
        self.driver(*args)
        return args[len(values) + 2]

    def load(self, values):
        """Compile (or load from the disk cache) the driver's machine code for these argument
        values' types now, without running it."""
        dims = np.ones(6, np.int64)
        args = self._arguments(values, np.zeros((1, 3), np.int64), dims, compiled_memory.NO_LOG)
        self.driver.compile(tuple(typeof(a) for a in args))

    def _arguments(self, values, order, dims, log):
        nt = int(dims[0] * dims[1] * dims[2])
        extra = [compiled_memory.make_buf(np.empty(shape, dt), SHARED, log, -1 - k)
                 for k, (shape, dt) in enumerate(self.shared.values())]
        extra += [compiled_memory.make_buf(np.empty((nt,) + shape, dt), LOCAL, log)
                  for shape, dt in self.local.values()]
        extra += [np.zeros(nt, dt) for dt in self.carried.values()]
        flags = np.zeros(compiled_memory.FLAGS, np.int64)
        return [*values, order, dims, flags, *extra, np.zeros(16, np.int64),
                np.ones(nt, np.bool_), np.ones(nt, np.bool_),
                np.zeros((max(2 * self.branches, 1), nt), np.bool_)]


class KernelCompiler:
    """Compiles one kernel (and the device functions it calls) to the compiled path."""

    def __init__(self, fn):
        self.fn = fn
        self.ns = {**_namespace(fn), **_HELPERS}
        self.devices = {}
        self.sources = []   # what was compiled, for ``source()`` and the cache key
        self.files = {}     # file -> its number in the sites (:meth:`site`)
        self.fingerprints = []   # the globals each source reads (compiled_cache.fingerprint)

    def site(self, node):
        """The site of the access ``node``: its file's number and its line, one integer."""
        number = self.files.setdefault(getattr(node, "minigpu_file", None), len(self.files))
        return number << 32 | node.lineno

    def device(self, kernel):
        """The name of ``kernel`` (a device function) compiled with hidden ``(__c, __F)``."""
        key = id(kernel)
        if key not in self.devices:
            name = f"__dev{len(self.devices)}_" + re.sub(r"\W", "", kernel.fn.__name__)
            self.devices[key] = name
            func = _function_def(kernel.fn)
            rw = Rewrite({**_namespace(kernel.fn), **_HELPERS}, False, self)
            body = []
            for s in _guard_unset(func.body, [a.arg for a in func.args.args]):
                r = rw.visit(s)
                body.extend(r if isinstance(r, list) else [r])
            func.body = body
            func = ast.fix_missing_locations(func)
            func.name = name
            func.args.args += [ast.arg("__c"), ast.arg("__F")]
            ns = {**_namespace(kernel.fn), **_HELPERS,
                  **{n: self.ns[n] for n in self.ns if n.startswith("__dev")}}
            src = ast.unparse(func)
            self.sources.append(src)
            self.fingerprints.append(compiled_cache.fingerprint(src, ns))
            exec(compile(src, f"<minigpu.compiled {name}>", "exec"), ns)
            self.ns[name] = njit(error_model="numpy", forceinline=True)(ns[name])
            # later device functions see this one too
        return self.devices[key]

    def compile(self, args):
        func = _function_def(self.fn)
        params = [a.arg for a in func.args.args]
        inliner = Inliner(self.ns)
        body = _fold_constant_ifs(func.body, self.ns, set(params) | _stored(func.body))
        func.body = _guard_unset(inliner.body(body, self.ns), params)
        self.ns.update(inliner.extra)
        rw = Rewrite(self.ns, True, self)
        body = []
        for s in func.body:
            r = rw.visit(s)
            body.extend(r if isinstance(r, list) else [r])
        body = _hoist_shuffles([ast.fix_missing_locations(s) for s in body], itertools.count())
        plan = _plan(body)
        units = _units(plan, [])
        arrays = set(rw.shared) | set(rw.local)
        locals_ = (set().union(*(u.stored for u in units)) if units else set()) - arrays
        if len(units) > 1 and locals_ & set(params):
            raise Ineligible("a parameter assigned in a kernel with barriers")
        uses = collections.Counter(n for u in units for n in (u.names & locals_))
        carried = sorted(n for n, k in uses.items() if k > 1)
        carried_arrays = sorted(n for n in rw.local if sum(n in u.names for u in units) > 1)
        extra = ([f"__SH_{n}" for n in sorted(rw.shared)] + [f"__LS_{n}" for n in sorted(rw.local)]
                 + [f"__L_{n}" for n in carried])
        region_args = params + extra   # each unit takes those it reads
        renames = {n: f"__SH_{n}" for n in rw.shared}
        sources, k = [], itertools.count()
        for u in units:
            u.fname = f"__u{next(k)}"
            nodes = [_ShuffleReads().visit(_Rename(renames).visit(copy.deepcopy(n)))
                     for n in u.nodes]   # the body stays as it is, to be typed whole
            head = [f"    {n} = __L_{n}[__t]" for n in carried if n in u.names]
            head += [f"    {n} = __local_row(__LS_{n}, __t, False)" for n in carried_arrays
                     if n in u.names]
            if u.kind == "region":
                code = "\n".join(ast.unparse(_Returns().visit(s)) for s in nodes)
                tail = [f"__L_{n}[__t] = {n}" for n in carried if n in u.stored]
                text = _indent(code) + "\n" + "\n".join("    " + t for t in tail + ["return 0"])
            else:
                if len(nodes) == 1:    # while / if test
                    text = f"    return 1 if ({ast.unparse(nodes[0])}) else 0"
                else:                  # a range's (start, stop, step)
                    text = "    return (" + ", ".join(
                        f"np.int64({ast.unparse(n)})" for n in nodes[:3]) + ")"
            body_text = "\n".join(head + [text])
            u.args = [n for n in region_args if re.search(rf"\b{n}\b", body_text)]
            sources.append(f"def {u.fname}({_unit_args(u)}):\n{body_text}\n")
        ns = dict(self.ns)
        self.sources += sources
        for name, src in zip([u.fname for u in units], sources):
            exec(compile(src, f"<minigpu.compiled {self.fn.__name__}.{name}>", "exec"), ns)
            ns[name] = njit(error_model="numpy", forceinline=True)(ns[name])
        src = _driver_source(params, plan, units, extra, rw, carried)
        self.sources.append(src)
        self.fingerprints += [compiled_cache.fingerprint(s, ns) for s in sources + [src]]
        # the argument types too: the carried variables' types depend on them
        key = compiled_cache.key(self.sources + [str(typeof(a)) for a in args], self.fingerprints)
        if ns.get("__name__") not in sys.modules:
            key = None   # Numba loads a cached function's globals by importing its module by
            # name: a kernel exec'd without one (a generated fused kernel) compiles in memory
        dtypes = compiled_cache.carried_types(key)
        cached = dtypes is not None
        if not cached:
            dtypes = self._carried_types(func, params, body, rw, args, carried)
        path = compiled_cache.source_file(key, src)
        exec(compile(src, path or f"<minigpu.compiled {self.fn.__name__}>", "exec"), ns)
        return Compiled(njit(error_model="numpy", cache=path is not None)(ns["__driver"]),
                        {n: rw.shared[n] for n in sorted(rw.shared)},
                        {n: rw.local[n] for n in sorted(rw.local)},
                        {n: dtypes[n] for n in carried}, _count_ifs(plan), key, cached)

    def _carried_types(self, func, params, body, rw, args, carried):
        """The NumPy scalar type of each variable that lives across a barrier (the kernel
        typed whole, barriers as no-ops, its SSA versions unified)."""
        if not carried:
            return {}
        renames = {n: f"__SH_{n}" for n in rw.shared}
        whole = [_Rename(renames).visit(ast.parse(ast.unparse(s)).body[0]) for s in body]
        extra = [f"__SH_{n}" for n in sorted(rw.shared)] + [f"__LS_{n}" for n in sorted(rw.local)]
        src = (f"def __whole({', '.join(['__c', '__F', '__t'] + params + extra)}):\n"
               + _indent("\n".join(ast.unparse(s) for s in whole)) + "\n    return\n")
        ns = {**self.ns, "__BARRIER": _barrier}
        exec(compile(src, "<minigpu.compiled typing>", "exec"), ns)
        make_buf = compiled_memory.make_buf
        flags = np.zeros(compiled_memory.FLAGS, np.int64)
        samples = [np.zeros(16, np.int64), flags, 0] + list(args)
        for n in sorted(rw.shared):
            samples.append(make_buf(np.zeros(rw.shared[n][0], rw.shared[n][1]), SHARED))
        for n in sorted(rw.local):
            samples.append(make_buf(np.zeros((1,) + rw.local[n][0], rw.local[n][1]), LOCAL))
        argtypes = tuple(typeof(s) for s in samples)
        ns["__BARRIER"], ns["__SHFL"] = njit(_barrier), njit(_shuffle_typing)
        typingctx, targetctx = cpu_target.typing_context, cpu_target.target_context
        typingctx.refresh()
        targetctx.refresh()
        flags = compiler.Flags()
        flags.no_compile = True
        typemap = compiler.compile_extra(typingctx, targetctx, ns["__whole"], argtypes, None,
                                         flags, {}, pipeline_class=_TypeOnly).typemap
        out = {}
        for n in carried:
            found = [types.unliteral(t) for k, t in typemap.items()
                     if k == n or k.startswith(n + ".") and k[len(n) + 1:].isdigit()]
            t = typingctx.unify_types(*found) if found else None
            if not isinstance(t, (types.Number, types.Boolean)):
                raise Ineligible(f"{n} ({t}) lives across a barrier")
            out[n] = np.dtype(str(t) if not isinstance(t, types.Boolean) else "bool").type
        return out


class _TypeOnly(compiler.CompilerBase):
    """Numba's pipeline up to type inference (SSA included: a variable first bound to a
    constant and later to a computed value has one type per version), nothing lowered."""

    def define_pipelines(self):
        pm = compiler.DefaultPassBuilder.define_untyped_pipeline(self.state)
        pm.add_pass(typed_passes.NopythonTypeInference, "type inference")
        pm.finalize()
        return [pm]

    def _compile_core(self):
        for pm in self.define_pipelines():
            pm.run(self.state)
        return self.state


class _Rename(ast.NodeTransformer):
    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            return ast.Name(self.names[node.id], node.ctx)
        return node


class _Returns(ast.NodeTransformer):
    """``return`` in a region: the thread exits (1)."""

    def visit_Return(self, node):
        return ast.Return(ast.Constant(1))


def _indent(text, n=1):
    return "\n".join("    " * n + line for line in text.splitlines())


def _count_ifs(plan):
    """The block-level ``if`` statements of a plan (each gets two rows of thread masks)."""
    n = 0
    for item in plan:
        if item[0] == "if":
            n += 1 + _count_ifs(item[2]) + _count_ifs(item[3])
        elif item[0] in ("for", "while"):
            n += _count_ifs(item[-1])
    return n


def _unit_args(unit):
    """A unit's parameters (and the driver's arguments when it calls it): the thread context,
    the flags, the thread's number, then the kernel's arguments and arrays the unit reads."""
    return ", ".join(["__c", "__F", "__t"] + unit.args)


def _driver_source(params, plan, units, extra, rw, carried):
    """The driver: every array it touches is its caller's (:class:`Compiled`), borrowed.

    ``__alive[t]``: thread t has not returned; ``__active[t]``: it also takes the branches
    the code now runs (a region runs in the active threads). A loop holding a split point must
    have the same header in every active thread (else the barrier in it is divergent); an
    ``if`` holding one may differ between threads: it runs its body in the threads whose test
    holds, then its ``else`` in the others (``__masks`` keeps each ``if``'s test and the
    threads active before it). A barrier must be reached by every thread of the block, a warp
    shuffle by every thread of its warp."""
    owned = params + ["__order", "__dims", "__F"] + extra + ["__c", "__alive", "__active",
                                                              "__masks"]
    lines = [f"def __driver({', '.join(owned)}):"]
    lines += [f"    {n} = __borrow({n})" for n in owned]
    lines += [f"    __c[{BDX}] = __dims[0]; __c[{BDY}] = __dims[1]; __c[{BDZ}] = __dims[2]",
              f"    __c[{GDX}] = __dims[3]; __c[{GDY}] = __dims[4]; __c[{GDZ}] = __dims[5]",
              "    __nt = __dims[0] * __dims[1] * __dims[2]",
              f"    __c[{NTHREADS}] = __nt"]
    lines += ["    for __b in range(__order.shape[0]):",
              f"        __c[{BX}] = __order[__b, 0]; __c[{BY}] = __order[__b, 1]; "
              f"__c[{BZ}] = __order[__b, 2]",
              f"        __c[{BLOCK}] = __order[__b, 0] + __dims[3] * (__order[__b, 1] + "
              f"__dims[4] * __order[__b, 2])",
              f"        __c[{EPOCH}] = 0",
              "        __alive[:] = True",
              "        __active[:] = True"]
    lines += [f"        __reset(__SH_{n})" for n in sorted(rw.shared)]
    counter = iter(units)
    loop, branch = itertools.count(), itertools.count()

    def thread_loop(ind, body):
        pad = "    " * ind
        return [f"{pad}for __t in range(__nt):",
                f"{pad}    if __active[__t]:",
                f"{pad}        __c[{TX}] = __t % __dims[0]",
                f"{pad}        __c[{TY}] = (__t // __dims[0]) % __dims[1]",
                f"{pad}        __c[{TZ}] = __t // (__dims[0] * __dims[1])",
                f"{pad}        __c[{THREAD}] = 1 + __c[{BLOCK}] * __nt + __t",
                f"{pad}        __F[{compiled_memory.ITERATIONS}] = 0"] + \
            [f"{pad}        {b}" for b in body]

    def uniform(ind, unit, width):
        """Evaluate a loop header in every active thread; they must agree."""
        pad = "    " * ind
        k = next(loop)
        out = [f"{pad}__n{k} = 0"]
        out += thread_loop(ind, [f"__v{k} = {unit.fname}({_unit_args(unit)})",
                                 f"if __n{k} == 0:", f"    __h{k} = __v{k}",
                                 f"elif __v{k} != __h{k}:",
                                 f"    __F[0] = {DIVERGENT}", "    return",
                                 f"__n{k} += 1"])
        empty = "(0, 0, 1)" if width == 3 else "0"
        out += [f"{pad}if __n{k} == 0:", f"{pad}    __h{k} = {empty}"]
        return k, out

    def set_active(pad, expr):
        return [f"{pad}for __t in range(__nt):", f"{pad}    __active[__t] = {expr}"]

    def emit(plan_, ind):
        pad = "    " * ind
        out = []
        for item in plan_:
            if item[0] == "region":
                u = next(counter)
                out += thread_loop(ind, [f"if {u.fname}({_unit_args(u)}):",
                                         "    __alive[__t] = False",
                                         "    __active[__t] = False",
                                         "if __F[0]:", "    return"])
            elif item[0] == "warp":
                out += [f"{pad}if not __warps_converged(__active, __nt):",
                        f"{pad}    __F[0] = {DIVERGENT}", f"{pad}    return"]
            elif item[0] == "barrier":
                out += [f"{pad}if not __active.all() and __active.any():",
                        f"{pad}    __F[0] = {DIVERGENT}", f"{pad}    return",
                        f"{pad}__c[{EPOCH}] += 1", f"{pad}__F[{compiled_memory.BARRIERS}] += 1"]
            elif item[0] == "for":
                k, code = uniform(ind, next(counter), 3)
                out += code
                out += [f"{pad}for __i{k} in range(__h{k}[0], __h{k}[1], __h{k}[2]):"]
                if item[1] in carried:
                    out += [f"{pad}    __L_{item[1]}[:] = __i{k}"]
                out += emit(item[3], ind + 1) or [f"{pad}    pass"]
            elif item[0] == "while":
                out += [f"{pad}while True:"]
                k, code = uniform(ind + 1, next(counter), 1)
                out += code + [f"{pad}    if not __h{k}:", f"{pad}        break"]
                out += emit(item[2], ind + 1)
            elif item[0] == "if":
                u, k = next(counter), next(branch)
                test, before = f"__masks[{2 * k}, __t]", f"__masks[{2 * k + 1}, __t]"
                out += [f"{pad}for __t in range(__nt):", f"{pad}    {before} = __active[__t]",
                        f"{pad}    {test} = False"]
                out += thread_loop(ind, [f"{test} = {u.fname}({_unit_args(u)}) != 0",
                                         "if __F[0]:", "    return"])
                out += set_active(pad, test)
                out += emit(item[2], ind)
                if item[3]:
                    out += set_active(pad, f"{before} and __alive[__t] and not {test}")
                    out += emit(item[3], ind)
                out += set_active(pad, f"{before} and __alive[__t]")
        return out

    lines += emit(plan, 2)
    lines += ["    return"]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- launching

_COMPILED = {}     # (kernel, signature) -> driver, or Ineligible / Exception text
_SPENT = collections.defaultdict(float)   # (kernel, signature) -> checked seconds
_PER_THREAD = {}   # kernel -> checked seconds per thread, last measured
_HINTS = {}        # (kernel, signature) -> what the disk cache says (:func:`.compiled_cache.hint`)
_BACKGROUND = {}   # (kernel, signature) -> pid of the process compiling it, 0 once it ended


def _data(arg):
    """The NumPy storage of an array argument (a checked proxy or, checks off, the array)."""
    if isinstance(arg, memory.Array):
        return arg.a if arg.a.dtype.fields is None else None  # records: the checked path
    if isinstance(arg, np.ndarray) and arg.ndim > 0 and arg.dtype.fields is None:
        return arg
    return None


def _scalar_signature(a):
    """The type key of a scalar or a (nested) tuple of scalars, else None."""
    if isinstance(a, (bool, np.bool_)):
        return ("b",)
    if isinstance(a, (int, float, complex, np.number)):
        return ("s", type(a).__name__)
    if isinstance(a, tuple):
        parts = tuple(_scalar_signature(e) for e in a)
        return None if None in parts else ("t",) + parts
    return None


def _signature(fake_args):
    sig = []
    for a in fake_args:
        d = _data(a)
        part = (("a", d.dtype.str, d.ndim, d.flags.c_contiguous) if d is not None
                else _scalar_signature(a))
        if part is None:
            return None
        sig.append(part)
    return tuple(sig)


def _identity(d):
    return d.__array_interface__["data"][0], d.shape, d.strides, d.dtype.str


def try_launch(kernel, name, fake_args, grid_dim, block_dim, points):
    """Run the launch on the compiled path if it applies. True: done (no suspect); False:
    the caller runs the checked path (the arrays are as they were)."""
    mode = config.FAST
    if mode == "0" or numba_config.DISABLE_JIT:  # nothing can compile then
        return False
    counting = bool(memory.observers)
    if not all(isinstance(o, counters.Recorder) for o in memory.observers):
        STATS[name]["checked: an observer other than the counters (a trace) watches memory"] += 1
        return False
    sig = _signature(fake_args)
    stats = STATS[name]
    if sig is None:
        stats["ineligible: an argument of a kind the compiled path does not take"] += 1
        return False
    key = (kernel, sig)
    driver, started = _COMPILED.get(key), time.perf_counter()
    threads = len(points) * block_dim[0] * block_dim[1] * block_dim[2]
    if driver is None:
        _background_ended(key)
        if key not in _HINTS:
            _HINTS[key] = compiled_cache.hint(kernel, sig)
        hint = _HINTS[key]
        predicted = _SPENT[key] + threads * _PER_THREAD.get(kernel, FIRST_GUESS)
        if hint:
            driver = _take(name, key, hint)
        elif hint is None and mode != "always" and (_BACKGROUND.get(key)
                                                     or predicted < AUTO_SECONDS):
            if predicted >= config.BACKGROUND:
                _start_background(name, key, fake_args)
            return False   # the checked path serves (while the compile runs, if it does)
        else:
            driver = _take(name, key, _compile(kernel, fake_args))
    if isinstance(driver, str):
        stats[driver] += 1
        return False
    views, slots, snapshot = {}, [], []   # slots: each argument, or the key of its view
    arrays = [d for d in map(_data, fake_args) if d is not None]
    for a in fake_args:
        d = _data(a)
        if d is None:
            slots.append((None, a))
            continue
        k = _identity(d)
        if k not in views:
            if any(b is not d and np.may_share_memory(b, d) and _identity(b) != k
                   for b in arrays):
                stats["checked: arguments overlap"] += 1
                return False
            views[k] = (d, getattr(a, "root", k[0]))   # root: where its allocation starts
            snapshot.append((d, d.copy()))
        slots.append((k, None))
    order = np.array(points, np.int64).reshape(len(points), 3)
    dims = np.array(list(block_dim) + list(grid_dim), np.int64)
    rows = 1 << 16 if counting else 0
    try:
        while True:
            log = np.empty((rows, 8), np.int64) if counting else compiled_memory.NO_LOG
            bufs = {k: compiled_memory.make_buf(d, GLOBAL, log, root, k[0] - root)
                    for k, (d, root) in views.items()}
            flags = driver.run([bufs[k] if k else a for k, a in slots], order, dims, log)
            if flags[compiled_memory.LOGGED] <= rows:
                break
            rows = int(flags[compiled_memory.LOGGED])   # the log was too short: again, with room
            for a, saved in snapshot:
                a[...] = saved
        reason = compiled_memory.SUSPECTS.get(int(flags[compiled_memory.SUSPECT]))
        if not driver.remembered:   # its first launch: it has just compiled
            compiled_cache.remember(driver.key, driver.carried, kernel, sig)
            driver.remembered = True
            logger.info("%s: on the compiled path after %.1f s (its first launch included)",
                        name, time.perf_counter() - started)
    except NumbaError as exc:   # it compiles at its first call: it never will
        _COMPILED[key] = _failure(exc)
        compiled_cache.remember_failure(kernel, sig, _COMPILED[key])
        logger.info("%s: stays on the checked path (%s)", name, _COMPILED[key])
        reason = "it does not compile"
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
    if reason is None:
        stats["fast"] += 1
        for recorder in memory.observers:
            recorder.launch(name, grid_dim, block_dim)
            recorder.log(log[:flags[compiled_memory.LOGGED]], int(flags[compiled_memory.BARRIERS]))
            recorder.end()
        return True
    for a, saved in snapshot:
        a[...] = saved
    stats[f"fallback: {reason}"] += 1
    return False


def _take(name, key, driver):
    """Keep ``driver`` (compiled, or why not) as the kernel's for these argument types; log it."""
    _COMPILED[key] = driver
    if isinstance(driver, str):
        logger.info("%s: stays on the checked path (%s)", name, driver)
    else:
        logger.info("%s: %s", name, "loading from the disk cache" if driver.cached else
                    "compiling for the compiled path (once per machine and argument types: the "
                    "disk cache keeps it)")
    return driver


def _values(fake_args):
    return [a if _data(a) is None else compiled_memory.make_buf(_data(a)) for a in fake_args]


def _compile(kernel, fake_args):
    if getattr(kernel, "_debug", False):
        return "ineligible: debug=True (a float division by zero raises)"
    try:
        return KernelCompiler(kernel.fn).compile(_values(fake_args))
    except Ineligible as exc:
        return f"ineligible: {exc}"
    except Exception as exc:
        return f"ineligible: compile failed ({type(exc).__name__}: {str(exc)[:200]})"


def _failure(exc):
    return (f"ineligible: compile failed ({type(exc).__name__}: "
            f"{str(exc).splitlines()[-1][:200]})")


def _start_background(name, key, fake_args):
    """Fork a process that compiles the kernel for these arguments into the disk cache and
    exits (:func:`_compile_and_exit`); this one goes on, on the checked path, and switches
    when the process has ended (its hint is then on disk). Nothing where there is no ``fork``,
    no disk cache, Numba's JIT is off or ``MINIGPU_SIM_BACKGROUND=0``."""
    if (not config.BACKGROUND or key in _BACKGROUND or key in _COMPILED
            or _HINTS.get(key) is not None or numba_config.DISABLE_JIT or not hasattr(os, "fork")
            or compiled_cache.directory() is None):
        return
    if not all(_background_ended(k) for k, pid in list(_BACKGROUND.items()) if pid):
        return   # one at a time: this kernel's turn comes at a later launch
    pid = os.fork()
    if pid == 0:
        _compile_and_exit(key, fake_args)
    _BACKGROUND[key] = pid
    logger.info("%s: compiling in a background process (pid %d); the checked path runs it "
                "until the disk cache holds it", name, pid)


def _compile_and_exit(key, fake_args):
    """The forked process: compile, write the disk cache and the kernel's hint (or why it does
    not compile), exit. Its output goes nowhere and it holds none of the parent's files."""
    kernel, sig = key
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)
        logging.disable(logging.CRITICAL)
        driver = _compile(kernel, fake_args)
        if isinstance(driver, str):
            compiled_cache.remember_failure(kernel, sig, driver)
        elif driver.key is not None:   # else it cannot be cached: the parent compiles it
            driver.load(_values(fake_args))
            compiled_cache.remember(driver.key, driver.carried, kernel, sig)
    except NumbaError as exc:
        compiled_cache.remember_failure(kernel, sig, _failure(exc))
    except BaseException:
        pass
    finally:
        os._exit(0)


def _background_ended(key, wait=0.0):
    """True when the background compile of ``key`` has ended (once: then it is forgotten),
    waiting up to ``wait`` seconds for it."""
    pid = _BACKGROUND.get(key)
    if not pid:
        return False
    deadline = time.perf_counter() + wait
    while True:
        try:
            ended = os.waitpid(pid, os.WNOHANG)[0] == pid
        except ChildProcessError:
            ended = True
        if ended:
            _BACKGROUND[key] = 0
            _HINTS.pop(key, None)   # its next launch reads the disk cache's hint again
            return True
        if time.perf_counter() >= deadline:
            return False
        time.sleep(0.02)


def checked_block(kernel, name, fake_args, done, total, started):
    """After each block of a checked launch: under ``auto``, start the background compile as
    soon as the launch promises to cost ``config.BACKGROUND`` seconds (its time so far, scaled
    to all its blocks)."""
    if config.FAST == "auto" and config.BACKGROUND and (time.perf_counter() - started) * total \
            >= config.BACKGROUND * done:
        sig = _signature(fake_args)
        if sig is not None:
            _start_background(name, (kernel, sig), fake_args)


def checked_time(kernel, name, fake_args, threads, seconds):
    """Record a checked launch's cost (for ``auto``'s decision). Under ``auto``, a kernel whose
    checked launches have cost ``config.BACKGROUND`` seconds compiles in the background
    (:func:`_start_background`); a launch that alone cost that much waits at its end for the
    compile, at most as long as it ran (a kernel that large is almost always launched again),
    and loads it for the next launch."""
    sig = _signature(fake_args)
    STATS[name]["checked"] += 1
    if sig is None:
        return
    key = (kernel, sig)
    _SPENT[key] += seconds
    _PER_THREAD[kernel] = seconds / max(threads, 1)
    if config.FAST != "auto" or not config.BACKGROUND or key in _COMPILED:
        return
    if _SPENT[key] >= config.BACKGROUND:
        _start_background(name, key, fake_args)
    if seconds >= config.BACKGROUND and _background_ended(key, wait=seconds):
        _HINTS[key] = compiled_cache.hint(kernel, sig)
        if _HINTS[key] == "":
            driver = _take(name, key, _compile(kernel, fake_args))
            if not isinstance(driver, str):
                driver.load(_values(fake_args))
