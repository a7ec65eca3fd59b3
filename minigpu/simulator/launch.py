"""Launching a simulated kernel: launch checks, arguments, module swaps, block order.

Replaces ``FakeCUDAKernel.__call__``. For a kernel launch ``k[grid, block](*args)``:

1. **Launch checks** before any thread runs (``LaunchConfigError``): at most 1024 threads per
   block, block dimensions ≤ (1024, 1024, 64), grid dimensions ≤ (2³¹-1, 65535, 65535), and
   — read from the kernel's source — every ``cuda.shared.array``/``cuda.local.array`` shape a
   compile-time constant (not an argument or a local variable) and the kernel's static shared
   memory plus the dynamic size ≤ 48 KiB. (Shared arrays of device functions are counted as
   they are allocated.)
2. **Arguments**: host arrays are copied in and back like the stock simulator does; device
   arrays become :class:`memory.Array` proxies named after their parameter; an object with a
   ``__cuda_array_interface__`` whose pointer is a host address (what a simulated device
   pointer is) becomes a proxy *aliasing* that memory (:func:`from_cai`), so a kernel writes
   land in it; Python floats become ``numpy.float64`` (division by zero gives inf/nan).
3. **Swaps**: while the kernel (or a device function) runs, every global *and closure
   variable* bound to ``numba.cuda`` is the simulator's ``FakeCUDAModule`` (so kernel
   factories that take ``cuda`` as an argument, as GPU-Puzzles does, work), and every one bound
   to ``math`` or a ``math`` function is its IEEE version (:mod:`.ieee`).
4. **Block order**: the blocks run one after another in a shuffled order, a fresh permutation
   per launch drawn from ``MINIGPU_SIM_SEED`` (code that assumes block 0 runs first fails).
"""
from __future__ import annotations

import ast
import contextlib
import functools
import inspect
import random
import textwrap
import threading

import numpy as np

from . import config, ieee, memory
from .blocks import run_block
from .errors import LaunchConfigError

_sim = None  # (kernel module, kernelapi, devicearray, args module), set by install()
_cuda = None  # the real numba.cuda module, set by install()
_rng = random.Random(config.SEED)

MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2 ** 31 - 1, 65535, 65535)


class Launch:
    """One launch: what its threads share (kernel name, race maps)."""
    __slots__ = ("name", "shadow", "shared_shadow")

    def __init__(self, name):
        self.name = name
        self.shadow = {} if config.CHECKS else None   # global memory: byte address -> record
        self.shared_shadow = None                     # shared memory of the running block


def launch(self, *args):
    """``FakeCUDAKernel.__call__``: a device-function call, or a kernel launch."""
    kernel_mod, kernelapi, devicearray, _ = _sim
    if self._device or kernel_mod._kernel_context:
        with swapped(self.fn, kernel_mod._get_kernel_context()):
            return self.fn(*args)
    from numba.cuda.errors import normalize_kernel_dimensions
    grid_dim, block_dim = normalize_kernel_dimensions(self.grid_dim, self.block_dim)
    name = getattr(self.fn, "__qualname__", getattr(self.fn, "__name__", "?"))
    check_launch(self.fn, name, grid_dim, block_dim, self.dynshared_size)
    fake = kernelapi.FakeCUDAModule(grid_dim, block_dim, self.dynshared_size)
    state = Launch(name)
    with kernel_mod._push_kernel_context(fake):
        retr = []
        params = _params(self.fn)
        fake_args = [_arg(self, a, params[i] if i < len(params) else f"arg{i}", retr, state)
                     for i, a in enumerate(args)]
        observed = bool(memory.observers)
        if observed:
            memory.notify_event("launch", name, grid_dim, block_dim)
        with swapped(self.fn, fake):
            points = list(np.ndindex(*grid_dim))
            _rng.shuffle(points)
            for ordinal, point in enumerate(points):
                memory.reset_shared(fake._shared, state)
                run_block(self.fn, name, point, block_dim, ordinal, self._debug, fake_args,
                          state)
        if observed:
            memory.notify_event("end")
        for wb in retr:
            wb()


def _arg(kernel, arg, name, retr, state):
    _, kernelapi, devicearray, args_mod = _sim
    _, arg = functools.reduce(
        lambda ty_val, ext: ext.prepare_args(*ty_val, stream=0, retr=retr),
        kernel.extensions, (None, arg))
    if isinstance(arg, np.ndarray) and arg.ndim > 0:
        ret = args_mod.InOut(arg).to_device(retr)
    elif isinstance(arg, args_mod.ArgHint):
        ret = arg.to_device(retr)
    elif isinstance(arg, np.void):
        ret = devicearray.FakeCUDAArray(arg)
    elif type(arg) is float:
        return np.float64(arg)
    elif not isinstance(arg, (devicearray.FakeCUDAArray, np.ndarray)) and hasattr(
            arg, "__cuda_array_interface__"):
        ret = devicearray.FakeCUDAArray(from_cai(arg))
    else:
        ret = arg
    if isinstance(ret, devicearray.FakeCUDAArray):
        a = ret._ary
        if isinstance(a, np.ndarray) and a.ndim > 0 and a.dtype.fields is None:
            return memory.global_array(a, name, state)
        return devicearray.FakeWithinKernelCUDAArray(ret)
    return ret


# ----------------------------------------------------------------------------- interop


class _Interface:
    """Holds a ``__cuda_array_interface__`` object alive as the base of its NumPy view."""

    def __init__(self, obj, cai):
        self.obj = obj
        self.__array_interface__ = {
            "shape": tuple(cai["shape"]), "typestr": cai["typestr"],
            "data": (int(cai["data"][0]), bool(cai["data"][1])),
            "strides": None if cai.get("strides") is None else tuple(cai["strides"]),
            "version": 3}
        if cai.get("descr") is not None:
            self.__array_interface__["descr"] = cai["descr"]


def from_cai(obj):
    """A NumPy array aliasing the memory an object's ``__cuda_array_interface__`` describes.

    Under the simulator a "device pointer" is the host address of a simulated array's NumPy
    storage, so the same dict read as ``__array_interface__`` is a view of it."""
    cai = obj.__cuda_array_interface__
    if cai.get("mask") is not None:
        raise ValueError("__cuda_array_interface__ with a mask is not supported")
    shape = tuple(cai["shape"])
    if int(np.prod(shape)) == 0:
        return np.empty(shape, np.dtype(cai["typestr"]))
    return np.asarray(_Interface(obj, cai))


def as_cuda_array(obj, sync=True):
    """``numba.cuda.as_cuda_array`` for the simulator: a device array aliasing ``obj``."""
    if not is_cuda_array(obj):
        raise TypeError("*obj* doesn't implement the cuda array interface.")
    return _sim[2].FakeCUDAArray(from_cai(obj))


def is_cuda_array(obj):
    """``numba.cuda.is_cuda_array`` for the simulator."""
    return hasattr(obj, "__cuda_array_interface__")


# ----------------------------------------------------------------------------- launch checks


def check_launch(fn, name, grid_dim, block_dim, dynshared):
    threads = block_dim[0] * block_dim[1] * block_dim[2]
    if threads > MAX_THREADS:
        raise LaunchConfigError(
            f"kernel '{name}': block {tuple(block_dim)} has {threads} threads; a block may "
            f"have at most {MAX_THREADS}.")
    for axis, (n, cap, what) in enumerate(zip(block_dim + grid_dim, MAX_BLOCK + MAX_GRID,
                                              ["block"] * 3 + ["grid"] * 3)):
        if n > cap:
            raise LaunchConfigError(
                f"kernel '{name}': {what} dimension {'xyz'[axis % 3]} is {n}; the limit is "
                f"{cap} (block {tuple(block_dim)}, grid {tuple(grid_dim)}).")
    static, problem = _static_shared(fn)
    if problem:
        raise LaunchConfigError(f"kernel '{name}': {problem}")
    if static + dynshared > memory.STATIC_SHARED_LIMIT:
        raise LaunchConfigError(
            f"kernel '{name}': {static} bytes of static shared memory + {dynshared} dynamic "
            f"per block; a block may use at most {memory.STATIC_SHARED_LIMIT} bytes (48 KiB).")


def _source_facts(fn):
    """(parameters, locally assigned names, [(space, shape node, dtype node, line)]) of a
    kernel's source, or None when the source is not available. Cached per code object."""
    if fn.__code__ not in _FACTS:
        _FACTS[fn.__code__] = _read_source(fn)
    return _FACTS[fn.__code__]


def _read_source(fn):
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    func = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef,
                                                             ast.AsyncFunctionDef))), None)
    if func is None:
        return None
    params = {a.arg for a in func.args.args + func.args.kwonlyargs}
    assigned = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    arrays = []
    for n in ast.walk(func):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "array" and isinstance(n.func.value, ast.Attribute)
                and n.func.value.attr in ("shared", "local")):
            kw = {k.arg: k.value for k in n.keywords}
            shape = n.args[0] if n.args else kw.get("shape")
            dtype = n.args[1] if len(n.args) > 1 else kw.get("dtype")
            arrays.append((n.func.value.attr, shape, dtype, start + n.lineno - 1))
    return params, assigned, arrays


_FACTS = {}


def _static_shared(fn):
    """(static shared bytes the kernel's own source allocates, problem or None)."""
    facts = _source_facts(fn)
    if facts is None:
        return 0, None
    params, assigned, arrays = facts
    scope = dict(fn.__globals__)
    if fn.__closure__:
        scope.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))
    total = 0
    for space, shape, dtype, line in arrays:
        if shape is None:
            continue
        names = {n.id for n in ast.walk(shape) if isinstance(n, ast.Name)}
        bad = sorted(names & (params | assigned))
        where = f"{fn.__code__.co_filename}:{line}"
        if bad:
            return 0, (f"cuda.{space}.array shape `{ast.unparse(shape)}` at {where} is not a "
                       f"compile-time constant ({', '.join(bad)} is a kernel argument or a "
                       f"local variable). Numba needs the shape when it compiles the kernel: "
                       f"use a global or closure constant (or dynamic shared memory).")
        if space != "shared" or dtype is None:
            continue
        try:
            shp = eval(compile(ast.Expression(shape), where, "eval"), scope)
            dt = eval(compile(ast.Expression(dtype), where, "eval"), scope)
            dt = memory._dtype(dt, _sim[1])
        except Exception:  # not evaluable here: the allocation-time check counts it
            continue
        total += int(np.prod(shp)) * dt.itemsize if shp != 0 else 0
    return total, None


# ----------------------------------------------------------------------------- module swaps

_swap_lock = threading.Lock()
_swap_count = {}   # id(globals dict) or id(cell) -> threads inside
_swap_saved = {}   # same key -> what to restore
_swap_keys = {}    # id(globals dict) -> names that held numba.cuda/math when first scanned


def _replacement(value, fake):
    if value is _cuda:
        return fake
    return ieee.SWAPS.get(id(value))


@contextlib.contextmanager
def swapped(fn, fake):
    """Swap ``numba.cuda`` for ``fake`` and ``math`` for its IEEE version in ``fn``'s globals
    and closure cells while ``fn`` runs (refcounted: many threads run one function)."""
    globs, gid = fn.__globals__, id(fn.__globals__)
    with _swap_lock:
        cells = [c for c in (fn.__closure__ or ()) if _cell_swappable(c, fake)]
        if _swap_count.get(gid, 0) == 0:
            keys = _swap_keys.get(gid)
            if keys is None:
                keys = _swap_keys[gid] = [k for k, v in globs.items()
                                          if _replacement(v, fake) is not None]
            saved = {}
            for k in keys:
                v = globs.get(k)
                r = _replacement(v, fake)
                if r is not None:
                    saved[k] = v
                    globs[k] = r
            _swap_saved[gid] = saved
        _swap_count[gid] = _swap_count.get(gid, 0) + 1
        for c in cells:
            cid = id(c)
            if _swap_count.get(cid, 0) == 0:
                r = _replacement(c.cell_contents, fake)
                if r is not None:
                    _swap_saved[cid] = c.cell_contents
                    c.cell_contents = r
            _swap_count[cid] = _swap_count.get(cid, 0) + 1
    try:
        yield
    finally:
        with _swap_lock:
            for key in [gid] + [id(c) for c in cells]:
                _swap_count[key] -= 1
                if _swap_count[key] == 0:
                    del _swap_count[key]
                    saved = _swap_saved.pop(key, None)
                    if key == gid:
                        globs.update(saved)
                    elif saved is not None:
                        next(c for c in cells if id(c) == key).cell_contents = saved


def _cell_swappable(cell, fake):
    if id(cell) in _swap_count:  # swapped by a thread still inside
        return True
    try:
        return _replacement(cell.cell_contents, fake) is not None
    except ValueError:  # an empty cell
        return False


@functools.lru_cache(maxsize=None)
def _param_names(code):
    return code.co_varnames[:code.co_argcount]


def _params(fn):
    return _param_names(fn.__code__)
