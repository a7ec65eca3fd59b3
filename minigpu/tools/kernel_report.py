"""Static kernel report for the H200 (sm_90), no GPU needed:
``python -m minigpu.tools.kernel_report``.

For every kernel in :func:`registry` (each family's production configuration, float32, as the
``@reported`` mark beside the kernel says; then the lessons' kernels), it

1. compiles the kernel to PTX for compute capability 9.0 with numba-cuda's NVVM
   (``cuda.compile_ptx``; no driver needed),
2. assembles the PTX with ``ptxas -arch=sm_90 -v`` (from the ``nvidia-cuda-nvcc`` wheel) and
   reads back registers per thread, spill stores/loads, stack frame and static shared memory,
3. computes the theoretical occupancy for the kernel's launch block size on an H200
   (:func:`minigpu.lessons.occupancy.theoretical_occupancy`),
4. counts float64 instructions in the PTX (a float32 kernel should have none: a stray Python
   float literal promotes a whole expression to float64),
5. for the shared-memory GEMMs, the FFMA : shared-load ratio of the inner loop: the loop
   found by its backward branch, in the SASS when ``nvdisasm`` is installed
   (``nvidia-cuda-nvdisasm``), else ``fma.rn.f32`` : ``ld.shared`` in the PTX. For the
   register-tiled GEMM both give 64:16 (ptxas neither unrolls that loop further nor merges its
   strided shared loads); for ``matmul_tiled`` the SASS is 16:20 where the PTX says 16:32
   (ptxas merges the four-in-a-row ``As`` reads into 128-bit loads).

    python -m minigpu.tools.kernel_report                    # the table
    python -m minigpu.tools.kernel_report --kernel matmul    # kernels whose name contains 'matmul'
    python -m minigpu.tools.kernel_report --json             # machine-readable
    python -m minigpu.tools.kernel_report --check            # exit 1 if a goal below is missed
    python -m minigpu.tools.kernel_report --kernel my_kernels.py:saxpy --signature \
        "float32, float32[::1], float32[::1]" --block 256 [--ptx] [--sass]   # any kernel

Goals (``--check``): no spills; no float64 instruction in a float32 kernel (unless the
kernel's mark says why one is expected); GEMM FFMA : LDS >= 4. A kernel that fails to compile
always exits with status 1, ``--check`` or not, and a ``@cuda.jit`` kernel of the cuda backend
with no mark stops the report before it starts (:class:`UnmarkedKernel`).

Numba decides at import time whether it simulates CUDA, so this report must run with
``NUMBA_ENABLE_CUDASIM`` unset: when it is set to 1 (the test suite sets it), the command
re-runs itself in a subprocess without it. Needs ``pip install -e .[inspect]``; without the
toolchain it says what is missing and exits with status 3.

Caveat: the numbers are for PTX assembled by ptxas. On a GPU, numba-cuda links kernels with
nvJitLink (link-time optimisation of the NVVM IR), which can allocate a few registers
differently; the launch-time truth is ``kernel.get_regs_per_thread()``.
"""
from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.util
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import lessons
from ..lessons.occupancy import sweep_table, theoretical_occupancy
from ..backends.cuda.kernelspec import EXAMPLES, MARK, KernelSpec

CC = (9, 0)
ARCH = "sm_90"
GEMM_RATIO_GOAL = 4.0
TOOLCHAIN_MISSING = 3  # exit status when NVVM or ptxas cannot be found


# --- the registry: the marks beside the kernels, then the lessons' kernels ---------------------
CUDA_PACKAGE = "minigpu.backends.cuda"


class UnmarkedKernel(RuntimeError):
    """A ``@cuda.jit`` kernel of the cuda backend that no ``@reported`` mark compiles."""


def _cuda_modules():
    """Every module of the cuda backend, imported (importlib, because the package re-exports
    functions named like its modules: ``matmul``, ``reduce``, ...)."""
    package = importlib.import_module(CUDA_PACKAGE)
    return [importlib.import_module(f"{CUDA_PACKAGE}.{info.name}")
            for info in pkgutil.iter_modules(package.__path__)]


def _home(obj):
    """The module that defines ``obj`` (a kernel's is its Python function's)."""
    return getattr(getattr(obj, "py_func", obj), "__module__", None)


def production_specs() -> list[KernelSpec]:
    """The specialisations every ``@reported`` mark of the cuda backend asks for
    (``backends/cuda/kernelspec.py``), named ``<module>.<name>``, in module then definition
    order. A mark whose specs cannot be built raises: nothing is skipped."""
    specs = []
    for module in _cuda_modules():
        family = module.__name__.rsplit(".", 1)[1]
        for obj in vars(module).values():
            build = getattr(obj, MARK, None)
            if build is None or _home(obj) != module.__name__:
                continue
            specs += [spec._replace(name=f"{family}.{spec.name}")
                      for spec in build(obj, EXAMPLES)]
    return specs


def cuda_jit_kernels(module) -> dict[str, int]:
    """``{qualified name: line}`` of every ``@cuda.jit`` kernel (not ``device=True``) defined
    in ``module``'s source, module-level or inside a factory, read from its AST."""
    found = {}

    def is_kernel(decorator):
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call else decorator
        if not (isinstance(target, ast.Attribute) and target.attr == "jit"
                and isinstance(target.value, ast.Name) and target.value.id == "cuda"):
            return False
        return not any(k.arg == "device" and not (isinstance(k.value, ast.Constant)
                                                   and k.value.value is False)
                       for k in (call.keywords if call else ()))

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                if any(is_kernel(d) for d in child.decorator_list):
                    found[name] = child.lineno
                visit(child, name + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(Path(module.__file__).read_text()), "")
    return found


def unmarked_kernels(specs) -> list[str]:
    """``path:line name`` of each ``@cuda.jit`` kernel of the cuda backend that none of
    ``specs`` compiles (matched by the kernels' Python functions)."""
    covered = {(s.kernel.py_func.__module__, s.kernel.py_func.__qualname__) for s in specs}
    missing = []
    for module in _cuda_modules():
        for name, line in cuda_jit_kernels(module).items():
            if (module.__name__, name) not in covered:
                missing.append(f"{module.__file__}:{line} {name}")
    return missing


def registry() -> list[KernelSpec]:
    """Every production kernel, at its production configuration, float32, from the marks
    beside the kernels (:func:`production_specs`), then the lessons' own kernels
    (``lessons.ALL``). Raises :class:`UnmarkedKernel` when a ``@cuda.jit`` kernel of the cuda
    backend has no mark that compiles it.

    Imports the kernel modules (so call it without the simulator for real numbers)."""
    specs = production_specs()
    missing = unmarked_kernels(specs)
    if missing:
        raise UnmarkedKernel("kernels with no @reported mark (backends/cuda/kernelspec.py) "
                             "that compiles them, so the static report cannot check them: "
                             + "; ".join(missing))
    for lesson in lessons.ALL:
        specs += lesson.kernels()
    return specs


# --- the toolchain --------------------------------------------------------------------------------
def _find_binary(name):
    """Path of a CUDA binary utility: the nvidia-* wheels (via cuda.pathfinder, then a search
    of site-packages), then PATH and CUDA_HOME."""
    try:
        from cuda import pathfinder

        path = pathfinder.find_nvidia_binary_utility(name)
        if path:
            return path
    except Exception:
        pass
    import site

    roots = [Path(p) for p in site.getsitepackages() + [site.getusersitepackages()]]
    roots += [Path(p) for p in sys.path if p.endswith("site-packages")]
    for root in roots:
        nvidia = root / "nvidia"
        if nvidia.is_dir():
            for candidate in sorted(nvidia.glob(f"*/bin/{name}")) + sorted(
                    nvidia.glob(f"*/*/bin/{name}")):
                if os.access(candidate, os.X_OK):
                    return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.access(Path(home) / "bin" / name, os.X_OK):
        return str(Path(home) / "bin" / name)
    return None


@functools.lru_cache(maxsize=None)
def toolchain() -> dict:
    """{'ptxas', 'nvdisasm' (or None), 'ptxas_version', 'missing': [what is missing]}."""
    missing = []
    try:
        from numba.cuda.cudadrv import nvvm

        if not nvvm.is_available():
            missing.append("NVVM (libnvvm: pip install 'numba-cuda[cu13]')")
    except Exception as exc:  # numba-cuda itself missing or broken
        missing.append(f"numba-cuda with NVVM ({exc})")
    ptxas = _find_binary("ptxas")
    if ptxas is None:
        missing.append("ptxas (pip install nvidia-cuda-nvcc)")
    version = ""
    if ptxas:
        out = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
        version = out.strip().splitlines()[-2] if out.strip() else ""
    return dict(ptxas=ptxas, nvdisasm=_find_binary("nvdisasm"), ptxas_version=version,
                missing=missing)


class _FakeDevice:
    """What ``numba.cuda.dispatcher.get_current_device`` returns while compiling: compiling a
    kernel that calls a device function asks the *current device* for its compute capability,
    which needs a driver; this answers 9.0 without one."""

    compute_capability = CC


def _compile_ptx(spec: KernelSpec) -> str:
    import numba
    from numba import cuda

    sig = tuple(a if isinstance(a, numba.types.Type) else numba.typeof(a) for a in spec.args)
    opts = spec.kernel.targetoptions
    ptx, _ = cuda.compile_ptx(spec.kernel.py_func, sig, cc=CC, fastmath=opts.get("fastmath",
                              False), launch_bounds=opts.get("launch_bounds"))
    return ptx


@functools.lru_cache(maxsize=None)
def working_toolchain() -> dict:
    """:func:`toolchain`, proven by compiling a two-line kernel that calls a device function
    and ``math.exp`` (NVVM, NVRTC and libdevice all there) before the real work starts; raises
    :class:`ToolchainMissing` saying what is missing."""
    import math

    import numba
    from numba import cuda
    from numba.cuda import dispatcher

    tools = toolchain()
    if tools["missing"]:
        raise ToolchainMissing(tools["missing"])

    @cuda.jit(device=True)
    def twice(x):
        return x + x

    def probe(out):
        out[0] = twice(math.exp(out[0]))

    real = dispatcher.get_current_device
    dispatcher.get_current_device = _FakeDevice
    try:
        cuda.compile_ptx(probe, (numba.float32[::1],), cc=CC)
    except Exception as exc:  # NVVM found, but e.g. NVRTC or libdevice missing
        raise ToolchainMissing([f"a working numba-cuda compiler (a probe kernel failed: "
                                f"{str(exc).strip()[:300]})"])
    finally:
        dispatcher.get_current_device = real
    return tools


# --- reading PTX, ptxas and SASS ------------------------------------------------------------------
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def parse_ptxas(log: str) -> dict:
    """registers of the entry function, the largest stack frame, total spill bytes, smem."""
    regs = smem = 0
    stack = spill_stores = spill_loads = 0
    for line in log.splitlines():
        m = _STACK.search(line)
        if m:
            stack = max(stack, int(m.group(1)))
            spill_stores += int(m.group(2))
            spill_loads += int(m.group(3))
        m = _USED.search(line)
        if m:
            regs = max(regs, int(m.group(1)))
            sm = _SMEM.search(line)
            smem = max(smem, int(sm.group(1)) if sm else 0)
    return dict(registers=regs, smem=smem, stack=stack, spill_stores=spill_stores,
                spill_loads=spill_loads)


def _instructions(ptx: str):
    """Opcodes of the PTX instructions (no directives, labels, comments or braces)."""
    for line in ptx.splitlines():
        text = line.split("//", 1)[0].strip()
        if not text or text[0] in ".${}":
            continue
        if text.startswith("@"):  # predicate guard
            text = text.split(None, 1)[1] if " " in text else ""
        if text:
            yield text.split(None, 1)[0]


def count_f64(ptx: str) -> int:
    """Number of PTX instructions that operate on or convert to/from float64."""
    return sum(1 for op in _instructions(ptx) if ".f64" in op)


_DIALECTS = {
    # label definition, backward-branch target, FMA, shared load
    "ptx": (re.compile(r"^\s*(\$L__\w+):"), re.compile(r"\bbra(?:\.uni)?\s+(\$L__\w+)\s*;"),
            re.compile(r"\bfma\.rn\.f32\b"), re.compile(r"\bld\.shared\.")),
    "sass": (re.compile(r"^\s*(\.L_x_\d+):"), re.compile(r"\bBRA\b[^;]*?(\.L_x_\d+)"),
             re.compile(r"\bFFMA\b"), re.compile(r"\bLDS\b")),
}


def inner_loop_ratio(text: str, dialect: str) -> dict | None:
    """FMA and shared-load counts of the innermost loop that contains both (the smallest
    range from a label to a later branch back to it). None when there is no such loop."""
    label_re, branch_re, fma_re, lds_re = _DIALECTS[dialect]
    lines = text.splitlines()
    labels, best = {}, None
    for i, line in enumerate(lines):
        m = label_re.match(line)
        if m:
            labels[m.group(1)] = i
        b = branch_re.search(line)
        if b and b.group(1) in labels:
            start = labels[b.group(1)]
            body = lines[start:i + 1]
            fmas = sum(1 for x in body if fma_re.search(x))
            loads = sum(1 for x in body if lds_re.search(x))
            if fmas and loads and (best is None or i - start < best["lines"]):
                best = dict(fma=fmas, lds=loads, ratio=fmas / loads, lines=i - start)
    return best


# --- one kernel ---------------------------------------------------------------------------------
@dataclass
class KernelReport:
    name: str
    block: int
    dtype: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack: int = 0
    smem: int = 0
    blocks_per_sm: int = 0
    warps_per_sm: int = 0
    occupancy: float = 0.0
    limited_by: str = ""
    f64: int = 0
    f64_reason: str = ""
    ffma_lds: float | None = None
    ffma_goal: bool = False
    ffma_lds_source: str = ""
    ffma: int | None = None
    lds: int | None = None
    error: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def spills(self):
        return self.spill_stores + self.spill_loads


def _assemble(spec: KernelSpec, ptx: str, workdir: Path, tools: dict) -> KernelReport:
    rep = KernelReport(spec.name, spec.block, spec.dtype, f64_reason=spec.f64_reason,
                       ffma_goal=spec.ffma_lds == "goal")
    # One file pair per kernel (they are assembled two at a time), named after it.
    stem = re.sub(r"[^\w-]+", "_", spec.name) + f"_{zlib.crc32(spec.name.encode()):08x}"
    ptx_path, cubin = workdir / f"{stem}.ptx", workdir / f"{stem}.cubin"
    ptx_path.write_text(ptx)
    proc = subprocess.run([tools["ptxas"], f"-arch={ARCH}", "-v", str(ptx_path), "-o",
                           str(cubin)], capture_output=True, text=True)
    if proc.returncode:
        rep.error = f"ptxas failed: {proc.stderr.strip()[-500:]}"
        return rep
    for key, value in parse_ptxas(proc.stderr + proc.stdout).items():
        setattr(rep, key, value)
    occ = theoretical_occupancy(rep.registers, rep.smem, spec.block)
    rep.blocks_per_sm, rep.warps_per_sm = occ.blocks_per_sm, occ.active_warps
    rep.occupancy, rep.limited_by = occ.occupancy, occ.limited_by
    rep.f64 = count_f64(ptx)
    if spec.ffma_lds:
        found = None
        if tools.get("nvdisasm"):
            sass = subprocess.run([tools["nvdisasm"], "-c", str(cubin)], capture_output=True,
                                  text=True).stdout
            found = inner_loop_ratio(sass, "sass")
            source = "SASS FFMA:LDS (nvdisasm), inner loop"
        in_ptx = inner_loop_ratio(ptx, "ptx")
        if in_ptx:
            rep.extra["ptx_inner_loop"] = dict(fma=in_ptx["fma"], ld_shared=in_ptx["lds"],
                                               ratio=in_ptx["ratio"])
        if found is None:
            found, source = in_ptx, "PTX fma.rn.f32:ld.shared, inner loop (no nvdisasm)"
        if found:
            rep.ffma_lds, rep.ffma, rep.lds = found["ratio"], found["fma"], found["lds"]
            rep.ffma_lds_source = source
    return rep


def _in_process_run(patterns=None, log=None) -> tuple[list[KernelReport], dict]:
    tools = working_toolchain()
    from numba.cuda import dispatcher

    specs = [s for s in registry() if not patterns or any(p in s.name for p in patterns)]
    real = dispatcher.get_current_device
    dispatcher.get_current_device = _FakeDevice
    reports: list[KernelReport | None] = [None] * len(specs)
    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="minigpu-kernel-report-") as tmp, \
                ThreadPoolExecutor(max_workers=2) as pool:
            futures = []
            for k, spec in enumerate(specs):  # compile here (GIL-bound), assemble in threads
                if log:
                    log(f"compiling {spec.name} ...")
                try:
                    ptx = _compile_ptx(spec)
                except Exception as exc:
                    reports[k] = KernelReport(spec.name, spec.block, spec.dtype,
                                              error=f"compile failed: {exc}"[:500])
                    continue
                futures.append((k, pool.submit(_assemble, spec, ptx, Path(tmp), tools)))
            for k, fut in futures:
                reports[k] = fut.result()
    finally:
        dispatcher.get_current_device = real
    meta = dict(arch=ARCH, ptxas=tools["ptxas"], ptxas_version=tools["ptxas_version"],
                nvdisasm=tools["nvdisasm"], seconds=round(time.perf_counter() - t0, 1),
                gemm_goal=GEMM_RATIO_GOAL)
    return reports, meta


def report_kernel(kernel, args, block, name=None, ptx=False, sass=False) -> KernelReport:
    """The static sm_90 report of any ``@cuda.jit`` kernel: ``args`` are example arguments (NumPy
    arrays and scalars type the signature) or Numba types (``numba.float32[::1]``), ``block`` the threads per block of its launch (for
    the occupancy). ``ptx=True`` / ``sass=True`` keep the PTX / SASS text in ``report.extra``.
    Needs a process without the simulator and the toolchain (raises :class:`ToolchainMissing`).
    """
    if _simulated():
        raise RuntimeError("report_kernel compiles for a GPU: call it in a process without "
                           "NUMBA_ENABLE_CUDASIM=1 (python -m minigpu.tools.kernel_report "
                           "--kernel path.py:name does that for you)")
    tools = working_toolchain()
    from numba.cuda import dispatcher
    spec = KernelSpec(name or kernel.py_func.__name__, kernel, tuple(args), int(block))
    real = dispatcher.get_current_device
    dispatcher.get_current_device = _FakeDevice
    try:
        text = _compile_ptx(spec)
    finally:
        dispatcher.get_current_device = real
    with tempfile.TemporaryDirectory(prefix="minigpu-kernel-report-") as tmp:
        rep = _assemble(spec, text, Path(tmp), tools)
        if sass:
            cubin = next(Path(tmp).glob("*.cubin"), None)
            rep.extra["sass"] = (subprocess.run([tools["nvdisasm"], "-c", str(cubin)],
                                                capture_output=True, text=True).stdout
                                 if tools["nvdisasm"] and cubin else
                                 "(nvdisasm not installed: pip install nvidia-cuda-nvdisasm)")
    if ptx:
        rep.extra["ptx"] = text
    return rep


class ToolchainMissing(RuntimeError):
    def __init__(self, missing):
        self.missing = list(missing)
        super().__init__("minigpu.tools.kernel_report needs the CUDA compiler toolchain, missing: "
                         + "; ".join(missing) + ". Install it with: pip install -e '.[inspect]'")


def _simulated() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def run(patterns=None) -> tuple[list[KernelReport], dict]:
    """(reports, meta) for the kernels whose names contain one of ``patterns`` (all when
    None). In a process running the CUDA simulator, runs
    ``python -m minigpu.tools.kernel_report --json`` in a subprocess instead (Numba cannot
    compile for a GPU once it simulates one)."""
    if not _simulated():
        return _in_process_run(patterns)
    cmd = [sys.executable, "-m", "minigpu.tools.kernel_report", "--json"]
    for p in patterns or ():
        cmd += ["--kernel", p]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env_without_simulator())
    if proc.returncode == TOOLCHAIN_MISSING:
        raise ToolchainMissing([proc.stderr.strip()])
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"minigpu.tools.kernel_report failed:\n{proc.stderr[-2000:]}")
    data = json.loads(proc.stdout)
    return [KernelReport(**{k: v for k, v in r.items() if k != "spills"})
            for r in data["kernels"]], data["meta"]


def _env_without_simulator():
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return env


# --- checks and output -------------------------------------------------------------------------
def check(reports: list[KernelReport]) -> list[str]:
    """The goals, as a list of failures (empty: all met)."""
    failures = []
    for r in reports:
        if r.error:
            failures.append(f"{r.name}: {r.error}")
            continue
        if r.spills:
            failures.append(f"{r.name}: spills {r.spill_stores} B stored, {r.spill_loads} B "
                            f"loaded")
        if r.dtype in ("float16", "float32") and r.f64 and not r.f64_reason:
            failures.append(f"{r.name}: {r.f64} float64 instructions in a {r.dtype} kernel")
        if r.ffma_goal and (r.ffma_lds or 0) < GEMM_RATIO_GOAL:
            failures.append(f"{r.name}: FFMA:LDS {r.ffma_lds} < {GEMM_RATIO_GOAL:g}")
    return failures


def format_table(reports: list[KernelReport], meta: dict) -> str:
    head = ("kernel", "block", "regs", "spill B", "stack B", "smem B", "blocks/SM",
            "warps/SM", "occupancy", "limited by", "f64", "FFMA:LDS")
    rows = []
    for r in reports:
        if r.error:
            rows.append((r.name, str(r.block), "ERROR", r.error[:60], "", "", "", "", "", "",
                         "", ""))
            continue
        f64 = str(r.f64) + (" (expected*)" if r.f64 and r.f64_reason else "")
        ratio = f"{r.ffma_lds:.2f} ({r.ffma}:{r.lds})" if r.ffma_lds is not None else ""
        rows.append((r.name, str(r.block), str(r.registers), str(r.spills), str(r.stack),
                     str(r.smem), str(r.blocks_per_sm), f"{r.warps_per_sm}/64",
                     f"{100 * r.occupancy:.1f}%", r.limited_by, f64, ratio))
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths))
    out = [f"minigpu static kernel report: {ARCH} (H200 occupancy), float32, "
           f"{meta.get('ptxas_version', '')}", "", line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    notes = [r for r in reports if r.f64 and r.f64_reason]
    for r in notes:
        out.append(f"* {r.name}: {r.f64_reason}")
    gemm = [r for r in reports if r.ffma_lds is not None]
    if gemm:
        out.append(f"FFMA:LDS: {gemm[0].ffma_lds_source}; the goal (>= {GEMM_RATIO_GOAL:g}) "
                   f"applies to the production GEMM, " + ", ".join(
                       r.name for r in gemm if r.ffma_goal))
    saxpy = next((r for r in reports if r.name == "occupancy.saxpy" and not r.error), None)
    if saxpy:
        out.append("")
        out.append(f"occupancy sweep lesson (occupancy.saxpy, {saxpy.registers} registers, "
                   f"no shared memory):")
        for row in sweep_table(saxpy.registers, saxpy.smem):
            out.append(f"  block {row['block']:4d}: {row['blocks_per_sm']:2d} blocks/SM, "
                       f"{row['warps_per_sm']:2d}/64 warps = {100 * row['occupancy']:5.1f}% "
                       f"(limited by {row['limited_by']})")
    failures = check(reports)
    out.append("")
    out.append(f"{len(reports)} kernels in {meta.get('seconds', '?')} s; goals (no spills, no "
               f"float64 in float32 kernels, GEMM FFMA:LDS >= {GEMM_RATIO_GOAL:g}): "
               + ("all met" if not failures else f"{len(failures)} missed"))
    out += [f"  MISSED {f}" for f in failures]
    return "\n".join(out)


def to_json(reports: list[KernelReport], meta: dict) -> str:
    kernels = []
    for r in reports:
        d = asdict(r)
        d["spills"] = r.spills
        kernels.append(d)
    return json.dumps(dict(meta=meta, kernels=kernels, failures=check(reports)), indent=1)


def load_kernel(target: str):
    """``path/to/file.py:name`` or ``package.module:name`` -> the kernel object."""
    where, _, name = target.rpartition(":")
    if where.endswith(".py") or os.sep in where:
        spec = importlib.util.spec_from_file_location(Path(where).stem, where)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    kernel = getattr(module, name, None)
    if kernel is None or not hasattr(kernel, "py_func"):
        raise SystemExit(f"{target}: no @cuda.jit kernel named {name!r} in {where}")
    return kernel


def _example_args(args):
    """The argument types from ``--signature`` (Numba types) or ``--args`` (Python values)."""
    import numba
    import numpy as np
    if args.signature:
        return eval(f"({args.signature},)", dict(vars(numba.types)))  # noqa: S307 (user's CLI)
    return eval(f"({args.args},)", {"np": np, "numpy": np})  # noqa: S307


def _one_kernel(args) -> int:
    kernel = load_kernel(args.kernel[0])
    try:
        rep = report_kernel(kernel, _example_args(args), args.block, name=args.kernel[0],
                            ptx=args.ptx, sass=args.sass)
    except ToolchainMissing as exc:
        print(exc, file=sys.stderr)
        return TOOLCHAIN_MISSING
    if args.json:
        print(json.dumps(asdict(rep), indent=1))
        return 0
    if rep.error:
        print(f"{rep.name}: {rep.error}")
        return 1
    print(f"{rep.name} (sm_90, {rep.block} threads per block)\n"
          f"  registers per thread  {rep.registers}\n"
          f"  spills                {rep.spill_stores} B stored, {rep.spill_loads} B loaded\n"
          f"  static shared memory  {rep.smem} B\n"
          f"  occupancy             {rep.occupancy:.0%} ({rep.warps_per_sm} warps per SM, "
          f"limited by {rep.limited_by})\n"
          f"  float64 instructions  {rep.f64}")
    for key in ("ptx", "sass"):
        if key in rep.extra:
            print(f"\n--- {key.upper()} ---\n{rep.extra[key]}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m minigpu.tools.kernel_report",
        description="Compile every minigpu kernel for sm_90 and report registers, spills, "
                    "shared memory, H200 occupancy, float64 use and the GEMM FFMA:LDS ratio.")
    parser.add_argument("--kernel", action="append", metavar="NAME",
                        help="only kernels whose name contains NAME (repeatable); or any "
                             "kernel: path/to/file.py:name or package.module:name, with "
                             "--signature or --args")
    parser.add_argument("--signature", help="argument types of a path:name kernel, e.g. "
                        "'float32[::1], float32[:, ::1], int64'")
    parser.add_argument("--args", help="example arguments of a path:name kernel, e.g. "
                        "'np.zeros(100, np.float32), 3'")
    parser.add_argument("--block", type=int, default=256,
                        help="threads per block of a path:name kernel (for the occupancy)")
    parser.add_argument("--ptx", action="store_true", help="also print the PTX")
    parser.add_argument("--sass", action="store_true", help="also print the SASS (nvdisasm)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of the table")
    parser.add_argument("--check", action="store_true",
                        help="exit with status 1 when a goal is missed")
    parser.add_argument("--list", action="store_true", help="list the kernel names and exit")
    parser.add_argument("-v", "--verbose", action="store_true", help="log each compilation")
    args = parser.parse_args(argv)
    if _simulated():  # Numba fixed its mind at import: start again without the simulator
        cmd = [sys.executable, "-m", "minigpu.tools.kernel_report", *(sys.argv[1:] if argv is None
                                                          else argv)]
        return subprocess.run(cmd, env=_env_without_simulator()).returncode
    if args.kernel and ":" in args.kernel[0]:
        if len(args.kernel) != 1 or not (args.signature or args.args):
            parser.error("a path:name kernel takes one --kernel and --signature or --args")
        return _one_kernel(args)
    if args.list:
        print("\n".join(s.name for s in registry()))
        return 0
    log = (lambda msg: print(msg, file=sys.stderr)) if args.verbose else None
    try:
        reports, meta = _in_process_run(args.kernel, log)
    except ToolchainMissing as exc:
        print(exc, file=sys.stderr)
        return TOOLCHAIN_MISSING
    if not reports:
        print(f"no kernel matches {args.kernel}; see --list", file=sys.stderr)
        return 2
    print(to_json(reports, meta) if args.json else format_table(reports, meta))
    broken = [r for r in reports if r.error]
    for r in broken:
        print(f"{r.name}: {r.error}", file=sys.stderr)
    return 1 if broken or (args.check and check(reports)) else 0


if __name__ == "__main__":
    sys.exit(main())
