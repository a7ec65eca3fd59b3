"""The grader: three layers, each failure names the chapter that explains it.

(a) correctness against NumPy on sizes drawn for this run from the solution's own block size
    (its module constants: ``TPB``, ``TILE``, ...): every size spans several blocks, and
    along every axis one is ragged (drawn), one an exact multiple of the block, one a
    multiple plus one element, one a multiple less one, so an off-by-one at an edge fails on
    every seed. The seed is printed; ``--seed`` replays a run. Everything runs on the
    CUDA simulator with every sanitizer check on (memcheck, initcheck, racecheck, synccheck)
    in the simulator's strict mode (``MINIGPU_SIM_STRICT``: a barrier that some threads of the
    block never reach, after an early return or in a divergent branch, is a SyncError);
    float outputs start as NaN, so an element nobody writes shows up.
(b) access budgets measured with :func:`minigpu.cuda.counters` on the first size. A relative
    budget compares with the reference solution run with *your* constants on the same inputs,
    so it holds for any block size you choose.
(c) static limits of the kernels compiled for sm_90 by :mod:`minigpu.tools.kernel_report`
    (no spills, no float64, a register cap, a minimum occupancy). When any part of the CUDA
    compiler toolchain is missing (``pip install -e .[inspect]``), the kernels are still
    typed for the CUDA target by Numba's front end (:mod:`.typecheck`): what does not type or
    computes in float64 fails; the verdict then says "PASSED (simulated; not compiled for
    sm_90: <what is missing>)", since registers, spills and occupancy went unchecked.

Layers (a) and (b) need a process running the simulator with checks on; :func:`check` starts
``python -m minigpu.exercises check`` in such a subprocess when the current one is not.
Layer (c) needs a process *without* the simulator, so it always runs in a subprocess.
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..simulator import config, memory
from ..simulator.counters import counters, total
from .harness import _execute, _problem, constants_of, load
from .specs import BY_NAME, CH, Exercise

SOLUTIONS = Path(__file__).parent / "solutions"
TIMEOUT_S = 600   # a grading on the simulator takes seconds; this is an endless loop


@dataclass
class Result:
    name: str
    failures: list = field(default_factory=list)   # (layer, message)
    notes: list = field(default_factory=list)
    scores: list = field(default_factory=list)     # (label, measured, limit, reference, at_least)
    header: list = field(default_factory=list)     # what was run: constants, seed, sizes
    unchecked: str = ""                            # why layer (c) could not compile for sm_90

    @property
    def passed(self):
        return not self.failures

    def text(self):
        lines = [f"exercise {self.name}"] + [f"  {h}" for h in self.header]
        for label, value, limit, ref, at_least in self.scores:
            ok = value >= limit if at_least else value <= limit
            bound = f"{'at least' if at_least else 'budget'} {limit:.3g}"
            if ref is not None:
                bound += f" = {limit / ref if ref else 0:.3g} x the reference's {ref:.3g}"
            lines.append(f"  [{'ok  ' if ok else 'OVER'}] {label}: {value:.3g} ({bound})")
        lines += [f"  note: {n}" for n in self.notes]
        lines += [f"  FAIL ({layer}): {msg}" for layer, msg in self.failures]
        lines.append(self.verdict())
        return "\n".join(lines)

    def verdict(self):
        if not self.passed:
            return "FAILED"
        return f"PASSED (simulated; not compiled for sm_90: {self.unchecked})" \
            if self.unchecked else "PASSED"

    def to_json(self):
        return dict(failures=self.failures, notes=self.notes, scores=self.scores,
                    header=self.header, unchecked=self.unchecked)


def _sim_ready():
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and config.CHECKS


class Measurement:
    """The counters of one run: ``m[metric]`` sums every launch; ``of(kernel)`` the launches
    of one kernel; ``blocks``/``warps`` launched; ``global_atomics``; ``ins`` (the host
    inputs), ``shape``, ``outputs`` (output elements) and ``consts``."""

    def __init__(self, launches, global_atomics, ins, out, shape, consts):
        self.launches, self.global_atomics = list(launches), global_atomics
        self.ins, self.shape, self.consts, self.outputs = ins, shape, consts, out.size
        self._total = total(self.launches).metrics if self.launches else {}
        self._sum = total

    def __getitem__(self, metric):
        return self._total[metric]

    def _picked(self, kernel):
        picked = [k for k in self.launches if kernel is None or
                  k.name.split(".")[-1] == kernel]
        if not picked:
            raise KeyError(f"no launch of a kernel named {kernel!r}")
        return picked

    def of(self, kernel):
        return self._sum(self._picked(kernel)).metrics

    def blocks(self, kernel=None):
        return sum(int(np.prod(k.grid)) for k in self._picked(kernel))

    def warps(self, kernel=None):
        return sum(int(np.prod(k.grid)) * -(-int(np.prod(k.block)) // 32)
                   for k in self._picked(kernel))


class _GlobalAtomics:
    """An observer counting atomics on global memory (the counters sum global and shared)."""

    def __init__(self):
        self.count = 0

    def __call__(self, access):
        if access.kind == "atomic" and access.space == "global":
            self.count += 1


def _measured(ex, module, c, shape, ins, out):
    """(host output, :class:`Measurement`) of one run under the counters."""
    atomics = _GlobalAtomics()
    memory.observers.append(atomics)
    try:
        with counters() as launches:
            got = _execute(ex, module, c, shape, ins, out)
    finally:
        memory.observers.remove(atomics)
    return got, Measurement(launches, atomics.count, ins, out, shape, c)


_REFERENCE_RUNS = {}


def reference_measurement(ex, c, shape, seed):
    """The reference solution's :class:`Measurement` with constants ``c`` on the inputs of
    (``shape``, ``seed``); None if it cannot run there (then relative budgets are skipped)."""
    key = (ex.name, tuple(sorted(c.items())), repr(shape), seed)
    if key not in _REFERENCE_RUNS:
        try:
            ref = load(SOLUTIONS / f"{ex.name}.py", c)
            ins, out = _problem(ex, c, shape, seed)
            _REFERENCE_RUNS[key] = _measured(ex, ref, c, shape, ins, out)[1]
        except Exception:  # noqa: BLE001 - a grader limitation, never the student's failure
            _REFERENCE_RUNS[key] = None
    return _REFERENCE_RUNS[key]


# --- the layers ------------------------------------------------------------------------------
def check(name: str, path, static: bool = True, seed: int | None = None, plot=None) -> Result:
    """Grade the solution at ``path`` for exercise ``name``; ``seed`` picks the sizes (None:
    a fresh one, printed); ``plot``: a folder to draw the solution next to the reference."""
    ex = _exercise(name)
    seed = secrets.randbelow(10 ** 6) if seed is None else int(seed)
    if not _sim_ready():
        return _in_subprocess(name, path, static, seed, plot)
    res = Result(name)
    try:
        module = load(path)
        missing = [f for f in ex.functions if not hasattr(module, f)]
        if missing:
            raise AttributeError(f"{Path(path).name} defines no {', '.join(missing)}")
        c = constants_of(ex, module)
    except Exception as exc:  # noqa: BLE001 - any error of the student's file is reported
        res.failures.append(("import", f"{type(exc).__name__}: {exc}"))
        return res
    sizes = ex.sizes(np.random.default_rng(seed), c)
    res.header += [f"constants: {', '.join(f'{k} = {v}' for k, v in c.items())}",
                   f"seed {seed}: sizes {', '.join(map(_fmt_shape, sizes))} "
                   f"(replay: --seed {seed})"]
    strict, config.STRICT = config.STRICT, True    # a barrier some threads skip fails too
    try:
        measurement = _correct(ex, module, c, sizes, seed, res)
        if measurement is not None:
            _budgets(ex, c, sizes[0], seed, measurement, res)
    finally:
        config.STRICT = strict
    if static and res.passed:
        _static(ex, path, res)
    if plot:
        from .pictures import draw_solution
        try:
            res.notes.append(f"picture: {draw_solution(name, path, plot)}")
        except RuntimeError as exc:   # matplotlib missing: the grade stands, say why
            res.notes.append(f"no picture: {exc}")
    return res


def _exercise(name):
    if name not in BY_NAME:
        raise ValueError(f"unknown exercise {name!r}; the exercises are: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def _fmt_shape(s):
    return "x".join(map(str, s)) if isinstance(s, tuple) else str(s)


def _correct(ex, module, c, sizes, seed, res):
    """Layer (a); returns the first size's Measurement when every size is right."""
    measurement = None
    for k, shape in enumerate(sizes):
        ins, out = _problem(ex, c, shape, seed + k)
        try:
            if k == 0:
                got, measurement = _measured(ex, module, c, shape, ins, out)
            else:
                got = _execute(ex, module, c, shape, ins, out)
        except Exception as exc:  # noqa: BLE001 - the kernel's error is the report
            res.failures.append(("correctness", f"size {_fmt_shape(shape)}: the kernel raised "
                                 f"{type(exc).__name__}: {str(exc).strip()[:700]} "
                                 f"(see docs/simulator.md and {ex.chapter})"))
            return None
        want = ex.reference(c, *ins)
        scale = np.abs(want) + 1 if ex.scale is None else ex.scale(c, *ins) + 1e-3
        bad = _mismatch(got, want, ex.rtol, scale)
        if bad is not None:
            res.failures.append(("correctness", f"size {_fmt_shape(shape)}: {bad} "
                                 f"(see {ex.chapter})"))
            return None
    return measurement


def _mismatch(got, want, rtol, scale):
    """None when ``got`` matches ``want`` within ``rtol * scale`` (exactly for rtol 0)."""
    if got.shape != want.shape:
        return f"the output has shape {got.shape}, expected {want.shape}"
    wrong = ~(np.abs(got.astype(np.float64) - want) <= rtol * scale)
    if not wrong.any():
        return None
    where = tuple(int(v) for v in np.argwhere(wrong)[0])
    value = got[where]
    unwritten = " (never written: float outputs start as NaN)" if value != value else ""
    return (f"wrong result, {int(wrong.sum())} of {want.size} elements differ; first at "
            f"index {where if len(where) > 1 else where[0]}: got {value}{unwritten}, "
            f"expected {want[where]}")


def _budgets(ex, c, shape, seed, m, res):
    """Layer (b), on the first size's measurement."""
    ref = None
    if any(b.relative for b in ex.budgets):
        ref = reference_measurement(ex, c, shape, seed)
        if ref is None:
            res.notes.append("relative budgets skipped: the reference solution does not run "
                             "with these constants (a grader limitation, not your error)")
    for b in ex.budgets:
        if b.relative and ref is None:
            continue
        try:
            value = float(b.measure(m))
        except (KeyError, ZeroDivisionError) as exc:
            res.failures.append(("budget", f"{b.label}: cannot be measured ({exc}): keep the "
                                 f"kernel names of the stub (see {b.chapter})"))
            continue
        base = float(b.measure(ref)) if b.relative else None
        limit = b.limit * base if b.relative else b.limit
        limit = limit + 1e-9 if not b.at_least else limit - 1e-9
        res.scores.append((b.label, value, limit, base, b.at_least))
        over = value < limit if b.at_least else value > limit
        if over:
            than = f" ({b.limit:g} x the reference solution's {base:.3g} at your block size)" \
                if b.relative else ""
            res.failures.append(("budget", f"{b.label} is {value:.3g}, "
                                 f"{'under' if b.at_least else 'over'} the budget of "
                                 f"{limit:.3g}{than} (see {b.chapter})"))


def static_limits(ex: Exercise, report) -> list:
    """Failures of one :class:`minigpu.tools.kernel_report.KernelReport` against the limits."""
    ch = CH[9]
    out = []
    if report.error:
        return [f"{report.name} did not compile for sm_90: {report.error}"]
    if report.spill_stores + report.spill_loads:
        out.append(f"{report.name}: {report.spill_stores + report.spill_loads} bytes of "
                   f"register spills (see {ch})")
    if report.f64:
        out.append(float64_failure(report.name, report.f64))
    if report.registers > ex.max_registers:
        out.append(f"{report.name}: {report.registers} registers per thread, over the cap of "
                   f"{ex.max_registers} (see {ch})")
    if report.occupancy < ex.min_occupancy:
        out.append(f"{report.name}: theoretical occupancy {report.occupancy:.0%} (limited by "
                   f"{report.limited_by}), under the minimum of {ex.min_occupancy:.0%} "
                   f"(see {ch})")
    return out


def float64_failure(kernel, count, example=""):
    """The message for float64 arithmetic in a float32 kernel (``count`` instructions)."""
    seen = f" (e.g. `{example}`)" if example else ""
    return (f"{kernel}: {count} float64 instructions in a float32 kernel{seen}: a Python float "
            f"literal or math on float64 promotes the expression; wrap constants in "
            f"float32(...) (see {CH[1]})")


def _env(sim: bool):
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env.pop("MINIGPU_SIM_CHECKS", None)
    if sim:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
        env["MINIGPU_SIM_STRICT"] = "1"
    return env


def _static(ex, path, res):
    proc = subprocess.run([sys.executable, "-m", "minigpu.exercises", "static", ex.name,
                           str(path)], capture_output=True, text=True, env=_env(False))
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr or proc.stdout).strip()[-600:]
        res.notes.append(f"static limits (layer c) skipped: the static report could not run "
                         f"({tail})")
        res.unchecked = "the static report could not run"
        return
    for rep in data["reports"]:
        res.notes.append(f"sm_90 {rep['name']}: {rep['registers']} registers, {rep['smem']} B "
                         f"shared, occupancy {rep['occupancy']:.0%}, spills "
                         f"{rep['spill_stores'] + rep['spill_loads']} B, float64 {rep['f64']}")
    if data["missing"]:
        res.unchecked = data["missing"]
        res.notes.append(f"static limits (layer c) skipped: missing: {data['missing']} "
                         f"(pip install -e '.[inspect]')")
        if data["typed"]:
            res.notes.append(f"typed for the CUDA target instead (Numba's front end, no NVVM): "
                             f"{', '.join(data['typed'])}: checked for types a GPU build "
                             f"refuses and float64 arithmetic; registers, spills and "
                             f"occupancy not checked")
    res.notes += [f"static limits (layer c) skipped for {s}" for s in data["skipped"]]
    if data["skipped"] and not res.unchecked:
        res.unchecked = "the compiler failed"
    res.failures += [("static", m) for m in data["failures"]]


def _in_subprocess(name, path, static, seed, plot):
    cmd = [sys.executable, "-m", "minigpu.exercises", "check", name, str(path), "--json",
           "--seed", str(seed)]
    if not static:
        cmd.append("--no-static")
    if plot:
        cmd += ["--plot", str(plot)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(True),
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Result(name, [("correctness", f"the grader stopped the kernel after "
                              f"{TIMEOUT_S} s: an endless loop, or a barrier some threads "
                              f"never reach? (seed {seed})")])
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise RuntimeError(f"the grader subprocess failed (exit status {proc.returncode}):\n"
                           f"{proc.stderr[-2000:]}") from None
    return Result(name, [tuple(f) for f in data["failures"]], data["notes"],
                  [tuple(s) for s in data["scores"]], data["header"], data["unchecked"])
