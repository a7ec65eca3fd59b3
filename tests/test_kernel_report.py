"""``python -m minigpu.tools.kernel_report``: the static sm_90 report and its goals.

The report itself needs the CUDA compiler toolchain (``pip install -e .[inspect]``: NVVM and
ptxas); without it the test skips and says so. It runs in a subprocess (Numba cannot compile
for a GPU in a process that simulates one) on a selection of kernels that covers every goal:
the production GEMM (FFMA:LDS >= 4), the fusion and occupancy lessons, the transpose tiles, the
divergence pair, the one kernel whose float64 instructions are expected and the flash-attention
forward (the largest shared-memory footprint). Set
``MINIGPU_INSPECT_ALL=1`` to report every kernel (about 30 s on two cores).

The parsers are tested on canned ptxas / PTX / SASS text, with no toolchain.
"""
import json
import os
import subprocess
import sys

import pytest

from minigpu.tools import kernel_report as mi

SELECTION = ["matmul.", "fusion.", "occupancy.", "transpose.tiled", "bank_conflicts.",
             "leaky_relu", "random.normal", "reduction.warp_shuffle", "attention.flash_forward"]


@pytest.fixture(scope="module")
def report():
    cmd = [sys.executable, "-m", "minigpu.tools.kernel_report", "--json"]
    if os.environ.get("MINIGPU_INSPECT_ALL") != "1":
        for name in SELECTION:
            cmd += ["--kernel", name]
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode == mi.TOOLCHAIN_MISSING:
        pytest.skip(f"CUDA compiler toolchain not installed: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_every_selected_kernel_compiles(report):
    names = [k["name"] for k in report["kernels"]]
    for pattern in SELECTION:
        assert any(pattern in n for n in names), pattern
    assert not [k for k in report["kernels"] if k["error"]]
    assert report["meta"]["arch"] == "sm_90"


def test_no_spills(report):
    spilled = {k["name"]: k["spills"] for k in report["kernels"] if k["spills"]}
    assert not spilled


def test_no_float64_in_float32_kernels(report):
    bad = {k["name"]: k["f64"] for k in report["kernels"]
           if k["dtype"] in ("float16", "float32") and k["f64"] and not k["f64_reason"]}
    assert not bad


def test_gemm_ffma_per_shared_load(report):
    goal = [k for k in report["kernels"] if k["ffma_goal"]]
    assert [k["name"] for k in goal] == [n for n in (k["name"] for k in report["kernels"])
                                          if n.startswith("matmul.register_tiled[")]
    for k in goal:
        assert k["ffma_lds"] >= mi.GEMM_RATIO_GOAL, (k["name"], k["ffma"], k["lds"])
    tiled = next(k for k in report["kernels"] if k["name"].startswith("matmul.tiled"))
    assert 0 < tiled["ffma_lds"] < 2  # the rung before: about one FMA per shared load


def test_occupancy_columns(report):
    for k in report["kernels"]:
        assert 0 < k["occupancy"] <= 1 and k["blocks_per_sm"] >= 1
        assert k["registers"] > 0
    assert report["failures"] == []


# --- parsers, no toolchain -------------------------------------------------------------------
PTXAS_LOG = """\
ptxas info    : 8 bytes gmem
ptxas info    : Compiling entry function '_Z6kernel' for 'sm_90'
ptxas info    : Function properties for _Z6kernel
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 80 registers, used 1 barriers, 4352 bytes smem
ptxas info    : Compile time = 162.466 ms
"""


def test_parse_ptxas():
    assert mi.parse_ptxas(PTXAS_LOG) == dict(registers=80, smem=4352, stack=16,
                                             spill_stores=8, spill_loads=12)
    assert mi.parse_ptxas("ptxas info    : Used 12 registers\n")["smem"] == 0


PTX = """\
.visible .entry k(
\t.param .f64 k_param_0
)
{
\t.reg .f64 \t%fd<3>;
\tld.param.f64 \t%fd1, [k_param_0];
\tcvt.rn.f32.f64 \t%f1, %fd1;
$L__BB0_1:
\tld.shared.f32 \t%f2, [%rd1];
\tld.shared.f32 \t%f3, [%rd2];
\tfma.rn.f32 \t%f4, %f2, %f3, %f4;
\tfma.rn.f32 \t%f5, %f2, %f3, %f5;
\tfma.rn.f32 \t%f6, %f2, %f3, %f6;
\tfma.rn.f32 \t%f7, %f2, %f3, %f7;
\t@%p1 bra \t$L__BB0_1;
\tst.shared.f32 \t[%rd1], %f4;  // not a load
\tret;
}
"""

SASS = """\
.L_x_16:
        /*2360*/                   LDS R44, [R24+UR6] ;
        /*2380*/                   LDS.64 R46, [R23+UR6] ;
        /*2400*/                   FFMA R50, R44, R46, R50 ;
        /*2410*/                   FFMA R51, R46.reuse, R45, R51 ;
        /*2420*/                   FFMA R52, R46.reuse, R54, R52 ;
        /*2430*/                   FFMA R53, R46, R47, R53 ;
        /*2540*/               @P0 BRA `(.L_x_16) ;
        /*2550*/                   FFMA R1, R2, R3, R1 ;
"""


def test_count_f64():
    assert mi.count_f64(PTX) == 2  # ld.param.f64 and cvt.rn.f32.f64; not .reg / .param


def test_inner_loop_ratio():
    assert mi.inner_loop_ratio(PTX, "ptx") == dict(fma=4, lds=2, ratio=2.0, lines=7)
    assert mi.inner_loop_ratio(SASS, "sass")["ratio"] == 2.0
    assert mi.inner_loop_ratio("no loop here", "sass") is None


def test_registry_names_are_unique_and_cover_the_lessons():
    """Every lesson's own kernels are in the report (derived from ``lessons.ALL``)."""
    pytest.importorskip("numba")
    from minigpu import lessons

    names = [s.name for s in mi.registry()]
    assert len(names) == len(set(names))
    for lesson in lessons.ALL:
        for spec in lesson.kernels():
            assert spec.name in names and spec.family == lesson.name, spec.name
    for needle in ("transpose.tiled_padded", "matmul.register_tiled", "optim.adam", "lstm.cell",
                   "elementwise.unary_dense[leaky_relu]"):
        assert any(n.startswith(needle) for n in names), needle


def test_every_production_kernel_has_a_mark():
    """Each ``@cuda.jit`` kernel of ``backends/cuda/`` (module-level or built by a factory,
    found in the modules' AST) is compiled by some ``@reported`` mark beside it, and a kernel
    whose mark is dropped is reported by name and line."""
    pytest.importorskip("numba")
    specs = mi.production_specs()
    assert mi.unmarked_kernels(specs) == []
    from minigpu.backends.cuda import elementwise
    kernels = mi.cuda_jit_kernels(elementwise)
    assert {"where_strided", "dense_unary_kernel.<locals>.unary_dense"} <= set(kernels)
    assert not any(name.startswith("unary_") for name in kernels)  # device functions are not
    missing = mi.unmarked_kernels([s for s in specs if s.name != "elementwise.where_strided"])
    assert missing == [f"{elementwise.__file__}:{kernels['where_strided']} where_strided"]


def test_a_kernel_that_does_not_compile_fails_the_report(tmp_path):
    """No kernel is skipped quietly: one that fails to compile is an error row, named on
    stderr, and the report exits with status 1 even without --check."""
    script = tmp_path / "broken_report.py"
    script.write_text(
        "import sys\nimport numpy as np\nfrom numba import cuda\n"
        "from minigpu.tools import kernel_report as mi\n\n\n"
        "@cuda.jit\ndef broken(x):\n    x[0] = undefined_name\n\n\n"
        "mi.registry = lambda: [mi.KernelSpec('broken.k', broken, (np.zeros(1, np.float32),), 32)]\n"
        "sys.exit(mi.main(['--json']))\n")
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    if proc.returncode == mi.TOOLCHAIN_MISSING:
        pytest.skip(f"CUDA compiler toolchain not installed: {proc.stderr.strip()}")
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "broken.k: compile failed" in proc.stderr
    assert json.loads(proc.stdout)["failures"][0].startswith("broken.k: compile failed")


def _any_kernel_cli(*extra):
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run([sys.executable, "-m", "minigpu.tools.kernel_report", *extra],
                          capture_output=True, text=True, env=env, timeout=300)


def test_any_kernel_by_path_and_by_module(tmp_path):
    """The report of a kernel that is not in the registry: a file path or a module, typed by
    a signature or by example arguments; --ptx appends the PTX."""
    src = tmp_path / "mine.py"
    src.write_text("from numba import cuda\n\n\n@cuda.jit\ndef saxpy(a, x, y):\n"
                   "    i = cuda.grid(1)\n    if i < x.shape[0]:\n        y[i] = a * x[i] + y[i]\n")
    by_path = _any_kernel_cli("--kernel", f"{src}:saxpy", "--signature",
                              "float32, float32[::1], float32[::1]", "--block", "128", "--ptx")
    if by_path.returncode == mi.TOOLCHAIN_MISSING:
        pytest.skip(f"CUDA compiler toolchain not installed: {by_path.stderr.strip()}")
    assert by_path.returncode == 0, by_path.stderr[-2000:]
    out = by_path.stdout
    assert "registers per thread" in out and "occupancy             100%" in out
    assert "float64 instructions  0" in out and ".visible .entry" in out   # the PTX
    by_module = _any_kernel_cli("--kernel", "minigpu.exercises.solutions.histogram:kernel",
                                "--args", "np.zeros(4, np.int32), np.zeros(16, np.int32)",
                                "--block", "64", "--json")
    assert by_module.returncode == 0, by_module.stderr[-2000:]
    rep = json.loads(by_module.stdout)
    assert rep["smem"] == 64 and rep["spill_stores"] == 0 and rep["f64"] == 0


def test_report_kernel_refuses_a_simulated_process():
    from minigpu.exercises.solutions.stencil import kernel
    with pytest.raises(RuntimeError, match="without"):
        mi.report_kernel(kernel, (), 32)


def test_register_counts_in_the_lessons_doc_are_current(report):
    """docs/lessons.md's static tables quote registers per kernel: every row named exactly
    like a reported kernel must match this compiler's count (so the doc cannot go stale)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).parents[1] / "docs" / "lessons.md").read_text()
    regs = {k["name"]: k["registers"] for k in report["kernels"]}
    quoted = {m.group(1): int(m.group(2))
              for m in re.finditer(r"^\| ([\w.\[\]x,]+) \| \**(\d+)\** \|", doc, re.M)}
    checked = {name: n for name, n in quoted.items() if name in regs}
    assert checked, "no kernel of the report is quoted in docs/lessons.md"
    assert {name: regs[name] for name in checked} == checked
