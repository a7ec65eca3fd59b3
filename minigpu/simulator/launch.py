"""Launching a simulated kernel: launch checks, arguments, module swaps, block order.

Replaces ``FakeCUDAKernel.__call__``. For a kernel launch ``k[grid, block](*args)``:

1. **Launch checks** before any thread runs (``LaunchConfigError``): at most 1024 threads per
   block, block dimensions ≤ (1024, 1024, 64), grid dimensions ≤ (2³¹-1, 65535, 65535), and
   — read from the kernel's source — every ``cuda.shared.array``/``cuda.local.array`` shape a
   compile-time constant as Numba resolves one (``rules.constant_names``: a literal, a global,
   a closure variable, a local assigned once to a constant) and the kernel's static shared
   memory plus the dynamic size ≤ 48 KiB. (Shared arrays of device functions are counted as
   they are allocated.) A kernel that synchronises its grid is a cooperative launch
   (:func:`uses_grid_sync`): its grid must fit on the device at once (:func:`check_cooperative`)
   and its blocks run at once (``blocks.run_grid``).
2. **Arguments**: host arrays are copied in and back like the stock simulator does; device
   arrays become :class:`memory.Array` proxies named after their parameter; an object with a
   ``__cuda_array_interface__`` whose pointer is a host address (what a simulated device
   pointer is) becomes a proxy *aliasing* that memory (:func:`from_cai`), so a kernel writes
   land in it; a scalar takes the type the kernel's signature gives it (recorded by
   :func:`jit_recording_signature`), and without one a Python float becomes
   ``numpy.float64`` (division by zero gives inf/nan).
3. **Swaps**: while the kernel (or a device function) runs, every global *and closure
   variable* bound to ``numba.cuda`` is the simulator's ``FakeCUDAModule`` (so kernel
   factories that take ``cuda`` as an argument, as GPU-Puzzles does, work), and every one bound
   to ``math`` or a ``math`` function is its IEEE version (:mod:`.ieee`); ``round`` is Numba's.
4. **Block order**: the blocks run one after another in a shuffled order, a fresh permutation
   per launch drawn from ``MINIGPU_SIM_SEED`` (code that assumes block 0 runs first fails).
   The launch runs compiled (:mod:`.compiled`) when it can, in that same order; when that path
   suspects anything it restores the arguments and the checked path below runs it.
5. **The end**: an indeterminate value still held by global memory is reported
   (``memory.check_kept``).

``forall`` and ``overloads[sig].max_cooperative_grid_blocks`` are configured as numba-cuda
configures them on a GPU (:func:`forall`, :class:`CooperativeOverload`).
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import inspect
import math
import random
import sys
import threading
import time

import numpy as np
from numba.core import types as _numba_types
from numba.core.registry import CPUDispatcher

from . import compiled, config, ieee, memory, rules
from .blocks import run_block, run_grid
from .errors import LaunchConfigError

_sim = None  # (kernel module, kernelapi, devicearray, args module), set by install()
_cuda = None  # the real numba.cuda module, set by install()
_rng = random.Random(config.SEED)

MAX_THREADS = 1024
MAX_BLOCK = (1024, 1024, 64)
MAX_GRID = (2 ** 31 - 1, 65535, 65535)


class Launch:
    """One launch: what its threads share (kernel name, global race map, grid size)."""
    __slots__ = ("name", "shadow", "blocks", "dynshared", "taint")

    def __init__(self, name, blocks, dynshared):
        self.name, self.blocks, self.dynshared = name, blocks, dynshared
        self.shadow = {} if config.CHECKS else None   # global memory: byte address -> record
        self.taint = {}  # global elements holding a stored indeterminate value (memory.py)


def launch(self, *args):
    """``FakeCUDAKernel.__call__``: a device-function call, or a kernel launch."""
    kernel_mod, kernelapi, devicearray, _ = _sim
    if self._device or kernel_mod._kernel_context:
        held = getattr(_running, "device_swaps", None)
        if held is None:  # not inside a launch of ours: swap for this call only
            with swapped(self.fn, kernel_mod._get_kernel_context()):
                return self.fn(*args)
        if self.fn not in held.functions:  # swapped from its first call to the launch's end
            held.functions.add(self.fn)
            held.enter_context(swapped(self.fn, kernel_mod._get_kernel_context()))
        return self.fn(*args)
    from numba.cuda.errors import normalize_kernel_dimensions
    grid_dim, block_dim = normalize_kernel_dimensions(self.grid_dim, self.block_dim)
    name = getattr(self.fn, "__qualname__", getattr(self.fn, "__name__", "?"))
    static = check_launch(self.fn, name, grid_dim, block_dim, self.dynshared_size)
    cooperative = uses_grid_sync(self.fn)
    if cooperative:
        check_cooperative(name, grid_dim, block_dim, static + self.dynshared_size)
    fake = kernelapi.FakeCUDAModule(grid_dim, block_dim, self.dynshared_size)
    points = list(np.ndindex(*grid_dim))
    state = Launch(name, len(points), self.dynshared_size)
    with kernel_mod._push_kernel_context(fake):
        retr = []
        params = _params(self.fn)
        types = getattr(self, "_minigpu_argtypes", None) or ()
        fake_args = [_arg(self, a, params[i] if i < len(params) else f"arg{i}", retr, state,
                          types[i] if i < len(types) else None)
                     for i, a in enumerate(args)]
        _rng.shuffle(points)
        if not (cooperative or config.STRICT) and compiled.try_launch(  # strict: checked path
                self, name, fake_args, grid_dim, block_dim, points):
            for wb in retr:
                wb()
            return
        started = time.perf_counter()
        observed = bool(memory.observers)
        if observed:
            memory.notify_event("launch", name, grid_dim, block_dim)
        with swapped(self.fn, fake), _DeviceSwaps(), _kernel_imports():
            if cooperative:
                run_grid(self.fn, name, points, block_dim, self._debug, fake_args, state)
            else:
                for ordinal, point in enumerate(points):
                    run_block(self.fn, name, point, block_dim, ordinal, self._debug, fake_args,
                              state)
                    compiled.checked_block(self, name, fake_args, ordinal + 1, len(points),
                                           started)
        memory.check_kept(state)
        if observed:
            memory.notify_event("end")
        compiled.checked_time(self, name, fake_args, len(points) * int(np.prod(block_dim)),
                          time.perf_counter() - started)
        for wb in retr:
            wb()


class _DeviceSwaps(contextlib.ExitStack):
    """The swaps (:func:`swapped`) of the device functions a running launch has called, held
    until the launch ends: a device function called once per element (the engine's maps)
    then pays for its swap once, not at every call. While entered it is this OS thread's
    ``_running.device_swaps``."""

    def __init__(self):
        super().__init__()
        self.functions = set()

    def __enter__(self):
        self.outer = getattr(_running, "device_swaps", None)
        _running.device_swaps = self
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            _running.device_swaps = self.outer


_running = threading.local()  # device_swaps: the _DeviceSwaps of this OS thread's launch


def cuda_module_getattr(name):
    """``numba.cuda.<name>`` for what only a kernel has (``grid``, ``threadIdx``, ``shared``,
    ``syncthreads``, ...; a module ``__getattr__``): inside a simulated kernel, the running
    launch's ``FakeCUDAModule``'s. The swaps of :func:`swapped` reach only names bound to
    ``numba.cuda``, so ``import numba`` and ``numba.cuda.grid(1)``, or an import inside the
    kernel, found the host module, which has none of them; a GPU compiles them all."""
    context = _sim[0]._get_kernel_context()
    if context is None or name.startswith("__"):
        raise AttributeError(f"module 'numba.cuda' has no attribute {name!r}")
    return getattr(context, name)


@contextlib.contextmanager
def _kernel_imports():
    """``__import__`` while a launch runs: ``import math`` or ``from math import sqrt`` inside
    the kernel or a device function (code of a module whose globals :func:`swapped` holds)
    gives the IEEE ``math`` (:mod:`.ieee`), as the swaps give a module's own; any other
    import (a library the kernel calls, another OS thread) is Python's."""
    host_import = builtins.__import__

    def import_in_kernel(name, globals=None, locals=None, fromlist=(), level=0):
        module = host_import(name, globals, locals, fromlist, level)
        if module is math and globals is not None and id(globals) in _swap_count:
            return ieee.MATH
        return module

    builtins.__import__ = import_in_kernel
    try:
        yield
    finally:
        builtins.__import__ = host_import


def _scalar(arg, numba_type):
    """A scalar argument as the kernel receives it: converted to the type its signature
    gives (a Python float to ``numpy.float32`` for a float32 parameter, as Numba converts
    it), a Python float without a signature to ``numpy.float64`` (what Numba infers)."""
    if numba_type is not None and isinstance(arg, (float, int, complex, np.number)) \
            and not isinstance(arg, bool):
        from numba.cuda import types
        if isinstance(numba_type, (types.Float, types.Complex)):
            return np.dtype(str(numba_type)).type(arg)
    if type(arg) is float:
        return np.float64(arg)
    return arg


def _arg(kernel, arg, name, retr, state, numba_type=None):
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
    elif isinstance(arg, (float, int, complex, np.number)):
        return _scalar(arg, numba_type)
    elif not isinstance(arg, (devicearray.FakeCUDAArray, np.ndarray)) and hasattr(
            arg, "__cuda_array_interface__"):
        ret = devicearray.FakeCUDAArray(from_cai(arg))
    else:
        ret = arg
    if isinstance(ret, devicearray.FakeCUDAArray):
        a = ret._ary
        checked = memory.global_array(a, name, state) if isinstance(a, np.ndarray) and \
            a.ndim > 0 else None
        return devicearray.FakeWithinKernelCUDAArray(ret) if checked is None else checked
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
    return static


# A cooperative launch (a kernel that calls cg.this_grid().sync()) needs every block resident
# at once. The device modelled is an H200 (sm_90): 132 multiprocessors, each holding at most
# 32 blocks, 64 warps and 228 KiB of shared memory (1 KiB of it reserved per block).
SMS, BLOCKS_PER_SM, WARPS_PER_SM, SHARED_PER_SM = 132, 32, 64, 228 * 1024
SIM_COOPERATIVE_THREADS = 4096  # the simulator keeps them all alive at once


def max_cooperative_blocks(block_dim, shared=0):
    """The largest grid of a cooperative launch with blocks of ``block_dim`` threads using
    ``shared`` bytes of shared memory: what is resident at once on the device modelled, and
    at most what the simulator can run at once."""
    dims = tuple(block_dim) if isinstance(block_dim, (tuple, list)) else (block_dim,)
    threads = int(np.prod(dims))
    warps = -(-threads // 32)
    per_sm = min(BLOCKS_PER_SM, WARPS_PER_SM // warps, SHARED_PER_SM // (shared + 1024))
    return max(0, min(SMS * per_sm, SIM_COOPERATIVE_THREADS // threads))


def check_cooperative(name, grid_dim, block_dim, shared):
    blocks = grid_dim[0] * grid_dim[1] * grid_dim[2]
    threads = block_dim[0] * block_dim[1] * block_dim[2]
    warps = -(-threads // 32)
    per_sm = min(BLOCKS_PER_SM, WARPS_PER_SM // warps, SHARED_PER_SM // (shared + 1024))
    if blocks > SMS * per_sm:
        raise LaunchConfigError(
            f"kernel '{name}' synchronises its whole grid (cg.this_grid().sync()), so it is a "
            f"cooperative launch and every block must be resident at once: grid "
            f"{tuple(grid_dim)} has {blocks} blocks of {threads} threads, but an H200 holds "
            f"at most {SMS} x {per_sm} = {SMS * per_sm} such blocks at once (CUDA refuses the "
            f"launch: cudaErrorCooperativeLaunchTooLarge). Use "
            f"kernel.overloads[sig].max_cooperative_grid_blocks(blockdim), or a grid-stride loop.")
    if blocks * threads > SIM_COOPERATIVE_THREADS:
        raise LaunchConfigError(
            f"kernel '{name}' synchronises its whole grid (cg.this_grid().sync()): the "
            f"simulator runs every thread of a cooperative launch at once and supports at most "
            f"{SIM_COOPERATIVE_THREADS} threads; grid {tuple(grid_dim)} x block "
            f"{tuple(block_dim)} has {blocks * threads} (a GPU would accept it). Launch fewer "
            f"blocks with a grid-stride loop to simulate it.")


def uses_grid_sync(fn):
    """True when ``fn`` or a device function it calls refers to ``this_grid`` (Numba links a
    kernel that synchronises its grid as cooperative, and launches it so)."""
    return _grid_sync(fn.__code__, fn.__globals__, fn.__closure__, set())


def _grid_sync(code, globs, closure, seen):
    if code in seen:
        return False
    seen.add(code)
    if code in _COOPERATIVE:
        return _COOPERATIVE[code]
    found = False
    names = set(code.co_names)
    codes = [c for c in code.co_consts if inspect.iscode(c)]
    if "this_grid" in names:
        found = True
    values = [globs.get(n) for n in names]
    if closure:
        values += [_cell(c) for c in closure]
    kernel_cls = _sim[0].FakeCUDAKernel
    for v in values:
        if found:
            break
        if isinstance(v, kernel_cls) and hasattr(v.fn, "__code__"):
            found = _grid_sync(v.fn.__code__, v.fn.__globals__, v.fn.__closure__, seen)
    for c in codes:
        if found:
            break
        found = _grid_sync(c, globs, None, seen)
    _COOPERATIVE[code] = found
    return found


def _cell(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return None


_COOPERATIVE = {}


class CooperativeOverload:
    """What ``kernel.overloads[sig]`` gives in the simulator: ``max_cooperative_grid_blocks``
    from the model of :func:`max_cooperative_blocks`."""

    def __init__(self, kernel):
        self.kernel = kernel

    def max_cooperative_grid_blocks(self, blockdim):
        static, _ = _static_shared(self.kernel.fn)
        return max_cooperative_blocks(blockdim, static)


class Overloads(dict):
    def __init__(self, kernel):
        super().__init__()
        self.kernel = kernel

    def __getitem__(self, key):
        return CooperativeOverload(self.kernel)


def overloads(self):
    """``FakeCUDAKernel.overloads``."""
    return Overloads(self)


def forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
    """``FakeCUDAKernel.forall`` as numba-cuda configures it on a GPU: blocks of ``tpb``
    threads (0: the block size the driver suggests, which for the simulator's model is the
    largest, 1024), and enough of them for ``ntasks`` (the stock simulator launched ``ntasks``
    blocks of one thread, so a grid-wide barrier synchronised 1-thread blocks)."""
    if ntasks < 0:
        raise ValueError("Can't create ForAll with negative task count: %s" % ntasks)
    if ntasks == 0:
        return lambda *args: None
    tpb = tpb or MAX_THREADS
    return self[(ntasks + tpb - 1) // tpb, tpb, stream, sharedmem]


def configure(self, griddim, blockdim, stream=0, sharedmem=0):
    """``FakeCUDAKernel.configure``: ``kernel.configure(grid, block)(*args)``, numba-cuda's
    spelling of ``kernel[grid, block](*args)``."""
    return self[griddim, blockdim, stream, sharedmem]


def _source_facts(fn):
    """(parameters, locally assigned names, [(space, shape node, dtype node, line)]) of a
    kernel's source, or None when the source is not available. Cached per code object."""
    if fn.__code__ not in _FACTS:
        _FACTS[fn.__code__] = _read_source(fn)
    return _FACTS[fn.__code__]


def _read_source(fn):
    func = rules.function_ast(fn.__code__)
    if func is None:
        return None
    start = fn.__code__.co_firstlineno
    params = {a.arg for a in func.args.args + func.args.kwonlyargs}
    consts = rules.constant_names(func)
    assigned = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)} - consts.keys()
    arrays = []
    for n in ast.walk(func):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "array" and isinstance(n.func.value, ast.Attribute)
                and n.func.value.attr in ("shared", "local")):
            kw = {k.arg: k.value for k in n.keywords}
            shape = n.args[0] if n.args else kw.get("shape")
            dtype = n.args[1] if len(n.args) > 1 else kw.get("dtype")
            arrays.append((n.func.value.attr, shape, dtype, start + n.lineno - 1))
    return params, assigned, arrays, consts


_FACTS = {}


def _static_shared(fn):
    """(static shared bytes the kernel's own source allocates, problem or None)."""
    facts = _source_facts(fn)
    if facts is None:
        return 0, None
    params, assigned, arrays, consts = facts
    scope = dict(fn.__globals__)
    if fn.__closure__:
        scope.update(zip(fn.__code__.co_freevars, (_cell(c) for c in fn.__closure__)))
    for local, value in consts.items():  # local constants, in definition order
        try:
            scope[local] = eval(compile(ast.Expression(value), "<constant>", "eval"), scope)
        except Exception:
            pass
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
                       f"local variable that is not assigned once to a constant). Numba needs "
                       f"the shape when it compiles the kernel: use a constant (a literal, a "
                       f"global, a closure variable, a local assigned once to one) or dynamic "
                       f"shared memory.")
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
_swap_keys = {}    # id(globals dict) -> (its size, names that held numba.cuda/math) when scanned
_ABSENT = object()  # a name swapped in that the globals did not have (deleted afterwards)
_print_lock = threading.Lock()


def device_print(*args, sep=" ", end="\n", file=None, flush=False):
    """``print`` in a kernel: one call's line written whole, as CUDA's ``printf`` is (the
    threads' lines come in any order, never mixed within one)."""
    text = sep.join(map(str, args)) + end
    out = sys.stdout if file is None else file
    with _print_lock:
        out.write(text)
        if flush:
            out.flush()


KERNEL_BUILTINS = {**ieee.BUILTINS, "print": device_print}
"""Builtins a simulated kernel sees in their device form (swapped in while it runs)."""


def _replacement(value, fake):
    if value is _cuda:
        return fake
    if isinstance(value, (_numba_types.Float, _numba_types.Integer)):
        return _NUMPY_SCALARS.get(value.name)  # float32(x): NumPy's cast, not Numba's detour
    if isinstance(value, CPUDispatcher):
        return _as_device_function(value)
    return ieee.SWAPS.get(id(value))


def _as_device_function(dispatcher):
    """A CPU ``@njit`` function called from a kernel, as the device function a GPU compiles it
    into (numba-cuda compiles ``@jit`` functions called from kernels for the device): its
    Python code run by the kernel's threads, on checked arrays. (The stock simulator called
    the CPU machine code, which cannot take a simulated array.) Object-mode functions
    (``forceobj``, numba.cuda.random's under the simulator) take the arrays as they are."""
    if dispatcher.targetoptions.get("forceobj"):
        return None
    device = _AS_DEVICE.get(dispatcher)
    if device is None:
        device = _AS_DEVICE[dispatcher] = _sim[0].FakeCUDAKernel(dispatcher.py_func,
                                                                 device=True)
    return device


_AS_DEVICE = {}  # CPU dispatcher -> its device-function stand-in


_NUMPY_SCALARS = {name: getattr(np, name) for name in (
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64")}


@contextlib.contextmanager
def swapped(fn, fake):
    """Swap ``numba.cuda`` for ``fake`` and ``math`` for its IEEE version in ``fn``'s globals
    and closure cells while ``fn`` runs (refcounted: many threads run one function)."""
    globs, gid = fn.__globals__, id(fn.__globals__)
    with _swap_lock:
        cells = [c for c in (fn.__closure__ or ()) if _cell_swappable(c, fake)]
        if _swap_count.get(gid, 0) == 0:
            size, keys = _swap_keys.get(gid, (None, None))
            if size != len(globs):  # first seen, or names defined since (a script's next cell)
                keys = [k for k, v in globs.items()
                        if v is _cuda or _replacement(v, None) is not None]
                _swap_keys[gid] = len(globs), keys
            saved = {}
            for k in keys:
                v = globs.get(k)
                r = _replacement(v, fake)
                if r is not None:
                    saved[k] = v
                    globs[k] = r
            for k, r in KERNEL_BUILTINS.items():
                if k not in globs:
                    saved[k] = _ABSENT
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
                        for k, v in saved.items():
                            if v is _ABSENT:
                                globs.pop(k, None)
                            else:
                                globs[k] = v
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


# ----------------------------------------------------------------------------- signatures


GPU_CODEGEN_OPTIONS = ("lineinfo", "forceinline", "launch_bounds", "lto", "max_registers",
                       "shared_memory_carveout")
"""``cuda.jit`` keywords that only steer the GPU's code generation: accepted and ignored (the
stock simulator's ``jit`` refused them with a ``TypeError``)."""


def jit_recording_signature(stock_jit):
    """``cuda.jit`` that takes numba-cuda's keywords (those of :data:`GPU_CODEGEN_OPTIONS`
    ignored, ``link=[]`` as no link, ``extensions`` given to the kernel) and records a kernel's
    explicit signature, so that a scalar argument arrives as the type the signature gives it
    (``_scalar``); the stock simulator drops it."""
    from numba.cuda.core import sigutils

    @functools.wraps(stock_jit)
    def jit(func_or_sig=None, *args, **kwargs):
        for name in GPU_CODEGEN_OPTIONS:
            kwargs.pop(name, None)
        if "link" in kwargs and not kwargs["link"]:
            del kwargs["link"]
        extensions = kwargs.pop("extensions", None)
        if extensions:
            decorate = jit(func_or_sig, *args, **kwargs)
            if not callable(func_or_sig) or sigutils.is_signature(func_or_sig):
                return lambda fn: _with_extensions(decorate(fn), extensions)
            return _with_extensions(decorate, extensions)
        result = stock_jit(func_or_sig, *args, **kwargs)
        if func_or_sig is None or callable(func_or_sig) and not sigutils.is_signature(
                func_or_sig):
            return result
        try:
            argtypes, _ = sigutils.normalize_signature(func_or_sig)
        except Exception:  # a list of signatures, or one the simulator cannot parse
            return result

        @functools.wraps(result)
        def decorate(fn):
            kernel = result(fn)
            kernel._minigpu_argtypes = tuple(argtypes)
            return kernel
        return decorate
    return jit


def _with_extensions(kernel, extensions):
    kernel.extensions = list(extensions)
    return kernel
