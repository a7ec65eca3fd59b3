"""The grader: three layers, each failure names the chapter that explains it.

(a) correctness against NumPy on random ragged shapes (at least two blocks), on the CUDA
    simulator with every sanitizer check on (memcheck, initcheck, racecheck, synccheck);
(b) access budgets measured with :func:`minigpu.cuda.counters` on the first shape;
(c) static limits of the kernel compiled for sm_90 by :mod:`minigpu.tools.kernel_report`
    (no spills, no float64, a register cap, a minimum occupancy) — skipped, with a notice,
    when the CUDA compiler toolchain (``pip install -e .[inspect]``) is not installed.

Layers (a) and (b) need a process running the simulator with checks on; :func:`check` starts
``python -m minigpu.exercises check`` in such a subprocess when the current one is not.
Layer (c) needs a process *without* the simulator, so it always runs in a subprocess.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .specs import BY_NAME, Exercise

SEED = 16


@dataclass
class Result:
    name: str
    failures: list = field(default_factory=list)   # (layer, message)
    notes: list = field(default_factory=list)
    scores: list = field(default_factory=list)     # (label, measured, limit)

    @property
    def passed(self):
        return not self.failures

    def text(self):
        lines = [f"exercise {self.name}"]
        for label, value, limit in self.scores:
            mark = "ok  " if value <= limit else "OVER"
            lines.append(f"  [{mark}] {label}: {value:.3g} (budget {limit:g})")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  FAIL ({layer}): {msg}" for layer, msg in self.failures]
        lines.append("PASSED" if self.passed else "FAILED")
        return "\n".join(lines)


def load(path):
    """The solution module at ``path`` (a fresh module each call)."""
    path = Path(path).resolve()
    spec = importlib.util.spec_from_file_location(f"_minigpu_solution_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "kernel"):
        raise AttributeError(f"{path} defines no function named 'kernel'")
    return module


def _sim_ready():
    from ..simulator import config
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and config.CHECKS


def check(name: str, path, static: bool = True) -> Result:
    """Grade the solution at ``path`` for exercise ``name``."""
    ex = BY_NAME[name]
    if not _sim_ready():
        return _in_subprocess(name, path, static)
    res = Result(name)
    try:
        module = load(path)
    except Exception as exc:
        res.failures.append(("import", f"{type(exc).__name__}: {exc}"))
        return res
    if _correct(ex, module, res):
        _budgets(ex, module, res)
    if static and res.passed:
        _static(ex, path, res)
    return res


def _run(ex: Exercise, module, shape, rng):
    from numba import cuda
    arrays = ex.inputs(rng, shape)
    *ins, out = arrays
    if out.dtype.kind == "f":
        out = np.full_like(out, np.nan)   # an output element never written shows up
    d_ins = [cuda.to_device(a) for a in ins]
    d_out = cuda.to_device(out)
    grid, block = ex.launch(module, shape)
    module.kernel[grid, block](*d_ins, d_out)
    return ins, d_out.copy_to_host(), out.size


def _correct(ex, module, res) -> bool:
    rng = np.random.default_rng(SEED)
    for shape in ex.shapes:
        try:
            ins, got, _ = _run(ex, module, shape, rng)
        except Exception as exc:
            res.failures.append(("correctness", f"shape {shape}: the kernel raised "
                                 f"{type(exc).__name__}: {str(exc).strip()[:600]} "
                                 f"(see docs/simulator.md and {ex.chapter})"))
            return False
        want = ex.reference(*ins)
        if got.shape != want.shape or not np.allclose(got, want, rtol=ex.rtol, atol=ex.rtol):
            bad = np.argwhere(~np.isclose(got, want, rtol=ex.rtol, atol=ex.rtol))
            where = tuple(int(v) for v in bad[0]) if len(bad) else ()
            res.failures.append(("correctness", f"shape {shape}: wrong result, "
                                 f"{len(bad)} of {want.size} elements differ; first at index "
                                 f"{where}: got {got[where]}{_unwritten(got[where])}, "
                                 f"expected {want[where]} "
                                 f"(see {ex.chapter})"))
            return False
    return True


def _unwritten(value):
    return " (never written: float outputs start as NaN)" if np.isnan(value) else ""


class _GlobalAtomics:
    """An observer counting atomics on global memory (the counters sum global and shared)."""

    def __init__(self):
        self.count = 0

    def __call__(self, access):
        if access.kind == "atomic" and access.space == "global":
            self.count += 1


def _budgets(ex, module, res):
    from ..simulator import memory
    from ..simulator.counters import counters, total
    atomics = _GlobalAtomics()
    memory.observers.append(atomics)
    try:
        with counters() as launches:
            _, _, n = _run(ex, module, ex.shapes[0], np.random.default_rng(SEED))
    finally:
        memory.observers.remove(atomics)
    k = launches[0] if len(launches) == 1 else total(launches)
    k.global_atomics = atomics.count
    for b in ex.budgets:
        value = b.measure(k, n, module)
        res.scores.append((b.label, value, b.limit))
        if value > b.limit:
            res.failures.append(("budget", f"{b.label} is {value:.3g}, over the budget of "
                                 f"{b.limit:g} (see {b.chapter})"))


def static_limits(ex: Exercise, report) -> list:
    """Failures of one :class:`minigpu.tools.kernel_report.KernelReport` against the limits."""
    ch = "docs/course/09-occupancy.md"
    out = []
    if report.error:
        return [f"the kernel did not compile for sm_90: {report.error}"]
    if report.spill_stores + report.spill_loads:
        out.append(f"{report.spill_stores + report.spill_loads} bytes of register spills "
                   f"(see {ch})")
    if report.f64:
        out.append(f"{report.f64} float64 instructions in a float32 kernel: a Python float "
                   f"literal or math on float64 promotes the expression; wrap constants in "
                   f"float32(...) (see docs/course/10-fusion-constant-streams.md)")
    if report.registers > ex.max_registers:
        out.append(f"{report.registers} registers per thread, over the cap of "
                   f"{ex.max_registers} (see {ch})")
    if report.occupancy < ex.min_occupancy:
        out.append(f"theoretical occupancy {report.occupancy:.0%} (limited by "
                   f"{report.limited_by}), under the minimum of {ex.min_occupancy:.0%} "
                   f"(see {ch})")
    return out


def _env(sim: bool):
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.pop("MINIGPU_SIM_CHECKS", None)
    if sim:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    return env


def _static(ex, path, res):
    from ..tools.kernel_report import TOOLCHAIN_MISSING
    proc = subprocess.run([sys.executable, "-m", "minigpu.exercises", "static", ex.name,
                           str(path)], capture_output=True, text=True, env=_env(False))
    if proc.returncode == TOOLCHAIN_MISSING:
        res.notes.append("static limits (layer c) skipped: the CUDA compiler toolchain is not "
                         "installed (pip install -e '.[inspect]')")
        return
    if proc.returncode:
        res.failures.append(("static", f"the static report failed: {proc.stderr[-800:]}"))
        return
    data = json.loads(proc.stdout)
    res.notes.append(f"sm_90: {data['registers']} registers, {data['smem']} B shared, "
                     f"occupancy {data['occupancy']:.0%}, spills "
                     f"{data['spill_stores'] + data['spill_loads']} B, float64 {data['f64']}")
    res.failures += [("static", m) for m in data["failures"]]


def _in_subprocess(name, path, static):
    cmd = [sys.executable, "-m", "minigpu.exercises", "check", name, str(path), "--json"]
    if not static:
        cmd.append("--no-static")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(True))
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"the grader subprocess failed:\n{proc.stderr[-2000:]}")
    data = json.loads(proc.stdout)
    return Result(name, [tuple(f) for f in data["failures"]], data["notes"],
                  [tuple(s) for s in data["scores"]])
