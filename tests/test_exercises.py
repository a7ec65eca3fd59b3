"""The exercise grader (minigpu/exercises): it passes every reference solution, fails a buggy
variant (wrong result or a sanitizer error) and a slow variant (over an access budget) of every
exercise, and the command line works from a process without the simulator."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minigpu import exercises
from minigpu.exercises import grader

VARIANTS = Path(__file__).parent / "exercise_variants"
# Variants that are the reference solution with one edit: (exercise, [(old, new), ...]).
# The others are files in exercise_variants/.
EDITS = {
    "stencil_buggy": ("stencil", [("    cuda.syncthreads()\n", "")]),   # no barrier: a race
    "matmul_buggy": ("matmul", [("acc += sa[ty, k] * sb[k, tx]\n        cuda.syncthreads()\n",
                                 "acc += sa[ty, k] * sb[k, tx]\n")]),    # no second barrier
    "softmax_buggy": ("softmax", [("shfl_xor_sync", "shfl_down_sync")]),  # only lane 0 has it
    "epilogue_buggy": ("epilogue", [("bias[c]", "bias[r % C]")]),         # a per-row bias
    "epilogue_float64": ("epilogue", [("SLOPE * v", "0.1 * v")]),         # float64 math
    "transpose_slow": ("transpose", [("(TILE, PADDED)", "(TILE, TILE)")]),  # 32-way conflicts
}


@pytest.fixture(scope="module")
def variant(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("variants")

    def path(name):
        if name not in EDITS:
            return VARIANTS / f"{name}.py"
        base, edits = EDITS[name]
        text = exercises.solution_path(base).read_text()
        for old, new in edits:
            assert old in text, (name, old)
            text = text.replace(old, new)
        (tmp / f"{name}.py").write_text(text)
        return tmp / f"{name}.py"
    return path
NAMES = [e.name for e in exercises.EXERCISES]
SLOW = {"stencil": ["stencil_slow"], "histogram": ["histogram_slow"],
        "transpose": ["transpose_slow", "transpose_uncoalesced"], "reduction": ["reduction_slow"],
        "scan": ["scan_slow"], "matmul": ["matmul_slow"], "softmax": ["softmax_slow"],
        "epilogue": ["epilogue_slow"]}


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(name):
    res = exercises.check(name, exercises.solution_path(name), static=False)
    assert res.passed, res.text()
    assert res.scores and all(v <= lim for _, v, lim in res.scores)


@pytest.mark.parametrize("name", NAMES)
def test_buggy_variant_fails_correctness(name, variant):
    res = exercises.check(name, variant(f"{name}_buggy"), static=False)
    assert not res.passed
    assert [layer for layer, _ in res.failures] == ["correctness"], res.text()
    assert "docs/course/" in res.failures[0][1]


@pytest.mark.parametrize("name,slow", [(n, v) for n in NAMES for v in SLOW[n]])
def test_slow_variant_is_correct_but_over_budget(name, slow, variant):
    res = exercises.check(name, variant(slow), static=False)
    layers = {layer for layer, _ in res.failures}
    assert layers == {"budget"}, res.text()
    assert all("docs/course/" in msg for _, msg in res.failures)


def test_stub_is_graded_not_crashed():
    res = exercises.check("stencil", exercises.stub_path("stencil"), static=False)
    assert not res.passed and res.failures[0][0] == "correctness"
    assert "wrong result" in res.failures[0][1]


def test_every_exercise_has_stub_solution_and_variants():
    for name in NAMES:
        assert exercises.stub_path(name).exists() and exercises.solution_path(name).exists()
        assert ((VARIANTS / f"{name}_buggy.py").exists() or f"{name}_buggy" in EDITS) \
            and name in SLOW
        assert "TODO" in exercises.stub_path(name).read_text()
        assert (Path(__file__).parents[1] / exercises.BY_NAME[name].chapter).exists()


def test_static_limits_on_canned_reports():
    from minigpu.tools.kernel_report import KernelReport
    ex = exercises.BY_NAME["reduction"]
    good = KernelReport("k", 128, "float32", registers=20, occupancy=1.0)
    assert grader.static_limits(ex, good) == []
    bad = KernelReport("k", 128, "float32", registers=200, spill_stores=8, f64=3,
                       occupancy=0.25, limited_by="registers")
    msgs = grader.static_limits(ex, bad)
    assert len(msgs) == 4 and all("docs/course/" in m for m in msgs)


def test_cli_from_a_process_without_the_simulator(tmp_path):
    """stub + check as the README runs them: the grader restarts itself on the simulator, and
    layer (c) runs or says it was skipped."""
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    run = lambda *a: subprocess.run([sys.executable, "-m", "minigpu.exercises", *a],
                                    capture_output=True, text=True, env=env, cwd=tmp_path)
    listed = run("list")
    assert listed.returncode == 0 and all(n in listed.stdout for n in NAMES)
    assert run("stub", "histogram", "mine.py").returncode == 0
    failed = run("check", "histogram", "mine.py", "--no-static")
    assert failed.returncode == 1 and "FAILED" in failed.stdout
    (tmp_path / "mine.py").write_text(exercises.solution_path("histogram").read_text())
    ok = run("check", "histogram", "mine.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASSED" in ok.stdout
    assert "sm_90:" in ok.stdout or "layer c) skipped" in ok.stdout


def _scores(name, path):
    return {label: v for label, v, _ in exercises.check(name, path, static=False).scores}


def test_numbers_quoted_in_the_course():
    """docs/course/02 and 05 quote these: keep them true."""
    ref = _scores("stencil", exercises.solution_path("stencil"))
    slow = _scores("stencil", VARIANTS / "stencil_slow.py")
    key = "global load sectors per output"
    assert slow[key] > 2 * ref[key]          # "more than twice the sectors"
    assert _scores("reduction", exercises.solution_path("reduction"))["barriers per block"] == 1
    assert _scores("reduction", VARIANTS / "reduction_slow.py")["barriers per block"] == 8


def test_static_layer_catches_float64(variant):
    """Layer (c) on the sm_90 build (skipped without the toolchain, as the grader says)."""
    ref = exercises.check("epilogue", exercises.solution_path("epilogue"))
    assert ref.passed, ref.text()
    if any("layer c) skipped" in n for n in ref.notes):
        pytest.skip("CUDA compiler toolchain not installed")
    assert any(n.startswith("sm_90:") for n in ref.notes)
    res = exercises.check("epilogue", variant("epilogue_float64"))
    assert [layer for layer, _ in res.failures] == ["static"], res.text()
    assert "float64" in res.failures[0][1] and "docs/course/" in res.failures[0][1]


def test_readme_shows_the_path_the_cli_test_runs():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for cmd in ("pip install -e . && .venv/bin/python -m minigpu.exercises list",
                "minigpu.exercises stub stencil my_stencil.py",
                "minigpu.exercises check stencil my_stencil.py"):
        assert cmd in readme
