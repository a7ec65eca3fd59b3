"""Numba's CUDA simulator as a sanitizer: hardware-faithful, checking every access.

``NUMBA_ENABLE_CUDASIM=1`` runs a ``@cuda.jit`` kernel in Python, one OS thread per CUDA
thread. ``import minigpu`` then calls :func:`install`, which patches the installed simulator
in place (any Numba kernel benefits, not only minigpu's):

- :mod:`.warp` — warp intrinsics (``shfl_*_sync``, votes, ``match_*``, ``syncwarp``, ...);
- :mod:`.blocks` — simulated threads (pooled greenlets run in turn), blocking barriers, the
  grid barrier of cooperative launches, synccheck (``SyncError``);
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
- :mod:`.patch` — what :func:`install` sets over the simulator, after checking its internals;
- :mod:`.config` — the switches: ``MINIGPU_SIM_CHECKS=0`` (sanitizer off, for speed),
  ``MINIGPU_SIM_SEED`` (block order), ``MINIGPU_SIM_STRICT=1`` (also what the CUDA guide calls
  undefined but Volta+ completes), ``MINIGPU_STOCK_SIMULATOR=1`` (leave it stock).

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


_installed = False
_warned = False
_saved = []  # (owner, name, original or _MISSING), to undo install()
_MISSING = object()


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
        from . import patch  # the sanitizer's parts import Numba: only under the simulator
        problem = patch.check()
        if problem is None:
            patch.apply(cuda, _set)
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
