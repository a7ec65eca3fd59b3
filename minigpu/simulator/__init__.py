"""Numba's CUDA simulator as a sanitizer: hardware-faithful, checking every access.

``NUMBA_ENABLE_CUDASIM=1`` runs a ``@cuda.jit`` kernel in Python, one OS thread per CUDA
thread. ``import minigpu`` then calls :func:`install`, which patches the installed simulator
in place (any Numba kernel benefits, not only minigpu's):

- :mod:`.warp` — warp intrinsics (``shfl_*_sync``, votes, ``match_*``, ``syncwarp``, ...);
- :mod:`.blocks` — pooled threads, blocking barriers, the grid barrier of cooperative launches,
  synccheck (``SyncError``);
- :mod:`.memory` — the checked array (a faithful stand-in for the stock simulator's) observing
  every load/store: memcheck (``OutOfBoundsError``), initcheck (``UninitializedReadError``),
  racecheck (``RaceError``), poisoned shared/local/device memory, and the observer seam for
  performance counters;
- :mod:`.rules` — the sanitizer's rules in one place (happens-before, same-value stores,
  negative indices, compile-time constants); :mod:`.indeterminate` — the value a load of
  never-written memory gives, an error when it is used;
- :mod:`.launch` — launch checks (``LaunchConfigError``), arguments (incl. objects with a
  ``__cuda_array_interface__``), ``numba.cuda``/``math`` swapped in globals *and closures*,
  shuffled seeded block order;
- :mod:`.ieee` — ``math.*`` with IEEE results (inf/nan, never an exception) and float32 kept;
- :mod:`.config` — the switches: ``MINIGPU_SIM_CHECKS=0`` (sanitizer off, for speed),
  ``MINIGPU_SIM_SEED`` (block order), ``MINIGPU_STOCK_SIMULATOR=1`` (leave it stock).

Errors (all ``SimulatorError``, a ``RuntimeError``; re-exported by ``minigpu.cuda``) are in
:mod:`.errors`. ``docs/simulator.md`` shows each check on a buggy kernel.

Fragile by nature: it relies on simulator internals of numba-cuda 0.30 (``FakeCUDAKernel``'s
fields, ``_push_kernel_context``, ``FakeCUDAModule``, ``FakeCUDAShared``/``FakeCUDALocal``/
``FakeCUDAAtomic``, ``Dim3``, ``FakeCUDAArray``, ``InOut``/``ArgHint``). :func:`install` checks
the version and these names first; on a mismatch it warns once and leaves the simulator stock.
"""
from __future__ import annotations

import os
import warnings

from .errors import (LaunchConfigError, OutOfBoundsError, RaceError, SimulatorError, SyncError,
                     UninitializedReadError)
from .memory import fill_poison  # no numba import: minigpu's allocator poisons fresh memory

__all__ = ["SimulatorError", "RaceError", "OutOfBoundsError", "UninitializedReadError",
           "SyncError", "LaunchConfigError", "install", "uninstall", "is_installed",
           "fill_poison"]

SUPPORTED = (0, 30)  # numba-cuda major.minor whose simulator internals this patch targets

_installed = False
_warned = False
_saved = []  # (owner, name, original or _MISSING), to undo install()
_MISSING = object()


def _check(kernel_mod, kernelapi, devicearray, args_mod):
    """None if the simulator's internals are the ones this patch expects, else why not."""
    try:
        from importlib.metadata import version
        v = version("numba-cuda")
    except Exception:  # pragma: no cover - not installed as a distribution
        v = "unknown"
    if tuple(int(p) for p in v.split(".")[:2] if p.isdigit()) != SUPPORTED:
        return f"numba-cuda {v} is installed; this patch targets {SUPPORTED[0]}.{SUPPORTED[1]}.x"
    for owner, names in ((kernel_mod, ("FakeCUDAKernel", "_push_kernel_context",
                                       "_get_kernel_context")),
                         (kernelapi, ("FakeCUDAModule", "FakeCUDAShared", "FakeCUDALocal",
                                      "FakeCUDAAtomic", "Dim3", "types", "numpy_support",
                                      "GridGroup")),
                         (devicearray, ("FakeCUDAArray", "FakeWithinKernelCUDAArray",
                                        "device_array")),
                         (args_mod, ("InOut", "ArgHint"))):
        for name in names:
            if not hasattr(owner, name):
                return f"{owner.__name__}.{name} is missing"
    k = kernel_mod.FakeCUDAKernel(lambda: None, device=False)
    shared = kernelapi.FakeCUDAShared(0)
    for obj, name in ((k, "fn"), (k, "_device"), (k, "_debug"), (k, "grid_dim"),
                      (k, "block_dim"), (k, "dynshared_size"), (k, "extensions"),
                      (shared, "_allocations"), (shared, "_dynshared"),
                      (shared, "_dynshared_size")):
        if not hasattr(obj, name):
            return f"{type(obj).__name__}.{name} is missing"
    return None


def _set(owner, name, value):
    _saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
    setattr(owner, name, value)


def install() -> bool:
    """Patch the CUDA simulator in place (idempotent). True when the patches are active; False
    when not running under ``NUMBA_ENABLE_CUDASIM=1``, under ``MINIGPU_STOCK_SIMULATOR=1``, or
    when the simulator's internals differ from what this package expects (then it warns once
    and leaves the simulator stock)."""
    global _installed, _warned
    if _installed:
        return True
    try:
        from numba import cuda
    except ImportError:  # numba-cuda not installed: nothing to patch
        return False
    if not cuda.config.ENABLE_CUDASIM or os.environ.get("MINIGPU_STOCK_SIMULATOR") == "1":
        return False
    try:
        import numba.cuda.simulator as simpkg
        from numba.cuda.simulator import args as args_mod, kernel as kernel_mod, kernelapi
        from numba.cuda.simulator.cudadrv import devicearray
        problem = _check(kernel_mod, kernelapi, devicearray, args_mod)
        if problem is None:
            _patch(cuda, simpkg, kernel_mod, kernelapi, devicearray, args_mod)
            _installed = True
            return True
    except Exception as exc:  # never break `import minigpu`
        problem = f"{type(exc).__name__}: {exc}"
        uninstall()
    if not _warned:
        _warned = True
        warnings.warn(f"minigpu: CUDA simulator left stock (no warp intrinsics, busy-wait "
                      f"barriers, no sanitizer checks): {problem}", RuntimeWarning, stacklevel=2)
    return False


def _patch(cuda, simpkg, kernel_mod, kernelapi, devicearray, args_mod):
    from . import blocks, launch, memory, sites, warp

    blocks.Dim3 = kernelapi.Dim3
    memory.kernelapi = kernelapi
    launch._sim = (kernel_mod, kernelapi, devicearray, args_mod)
    launch._cuda = cuda
    launch.fast.bind(cuda, kernel_mod.FakeCUDAKernel)
    sites.skip_dir(os.path.dirname(kernel_mod.__file__) + os.sep)
    _set(kernel_mod.FakeCUDAKernel, "__call__", launch.launch)
    _set(kernel_mod.FakeCUDAKernel, "overloads", property(launch.overloads))
    _set(kernel_mod.FakeCUDAKernel, "forall", launch.forall)
    _set(kernelapi.GridGroup, "sync", lambda self: blocks.current().grid_sync())
    from numba.cuda.simulator import api
    stock_jit = api.jit
    jit = launch.jit_recording_signature(stock_jit)
    for owner in (api, simpkg, cuda):
        if getattr(owner, "jit", None) is stock_jit:
            _set(owner, "jit", jit)
    _set(kernelapi.FakeCUDAShared, "array", memory.shared_array)
    _set(kernelapi.FakeCUDALocal, "array", memory.local_array)
    for name, fn in vars(memory.Atomics).items():
        if callable(fn) and not name.startswith("_"):
            _set(kernelapi.FakeCUDAAtomic, name, fn)
    for name, fn in vars(warp.WarpIntrinsics).items():
        if callable(fn) and not name.startswith("_"):
            _set(kernelapi.FakeCUDAModule, name, fn)
    stock_device_array = devicearray.device_array

    def device_array(*args, **kwargs):
        """``cuda.device_array`` (simulated): uninitialised, so filled with the poison."""
        arr = stock_device_array(*args, **kwargs)
        memory.fill_poison(arr._ary)
        return arr

    for owner in (devicearray, simpkg, cuda):
        if getattr(owner, "device_array", None) is stock_device_array:
            _set(owner, "device_array", device_array)
    for name in ("as_cuda_array", "is_cuda_array"):
        for owner in (simpkg, cuda):
            if not hasattr(owner, name):
                _set(owner, name, getattr(launch, name))


def uninstall() -> None:
    """Undo ``install()`` (the benchmark uses it to time the stock simulator)."""
    global _installed
    while _saved:
        owner, name, original = _saved.pop()
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    _installed = False


def is_installed() -> bool:
    return _installed
