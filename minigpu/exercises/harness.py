"""A solution module and one problem run with it: :func:`load` (with constants replaced),
:func:`constants_of` (the block geometry it declares), :func:`_problem` (the inputs of one size)
and :func:`_execute` (one launch). The grader and the pictures both build on these."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np

from .specs import Exercise


# --- the solution module and its constants -------------------------------------------------
def load(path, constants=None):
    """The solution module at ``path`` (a fresh module each call). ``constants`` replaces the
    values of module-level assignments ``NAME = ...`` before it runs (used on the reference
    solutions, to run them with a student's block size)."""
    path = Path(path).resolve()
    source = path.read_text()
    for name, value in (constants or {}).items():
        source, n = re.subn(rf"^{name}\s*=\s*[^#\n]*", f"{name} = {value!r}", source, count=1,
                            flags=re.M)
        if not n:
            raise ValueError(f"{path.name} assigns no module constant {name}")
    spec = importlib.util.spec_from_loader(f"_minigpu_solution_{abs(hash((path, source)))}",
                                           loader=None, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def constants_of(ex: Exercise, module) -> dict:
    """The block-geometry constants ``ex`` reads from ``module`` (ints), or ValueError."""
    out = {}
    for name in ex.constants:
        if not hasattr(module, name):
            raise ValueError(f"the module defines no {name}: the grader launches with it "
                             f"(see the stub)")
        value = getattr(module, name)
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an int, got {value!r}")
        out[name] = int(value)
    why = ex.check_constants(out)
    if why:
        raise ValueError(why)
    return out


# --- running one problem ---------------------------------------------------------------------
def _launch_default(ex):
    def run(module, c, shape, ins, out):
        from numba import cuda
        grid, block = ex.launch(c, shape)
        d_out = cuda.to_device(out)
        module.kernel[grid, block](*[cuda.to_device(a) for a in ins], d_out)
        return d_out.copy_to_host()
    return run


def _problem(ex, c, shape, seed):
    """The inputs and the output buffer of one size (float outputs start as NaN)."""
    *ins, out = ex.inputs(np.random.default_rng(seed), shape, c)
    if out.dtype.kind == "f":
        out = np.full_like(out, np.nan)
    return ins, out


def _execute(ex, module, c, shape, ins, out):
    run = ex.run or _launch_default(ex)
    return run(module, c, shape, ins, out.copy())
