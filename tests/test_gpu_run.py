"""``benchmarks/gpu_run.sh``: the one command for a GPU, tested with ``--smoke`` on the simulator.

It runs the wrapper in a subprocess (as a user would), checks every step's record, output files
and the printed summary, that a second call skips the steps already done, and that without a
GPU and without ``--smoke`` it refuses in one clear message. The smoke steps are the smallest
forms (one test file, one lesson, the demos' ``--smoke`` on cpu): about 32 CPU seconds for the
first call (40 to 70 s of wall time on a 2-core machine under a load of 6 to 11), under a second
for the second.
"""
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

import minigpu as mg

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_run.sh"
STEPS = ["gpu-tests", "suite", "bench", "demo-train_cnn", "demo-train_lstm", "demo-train_gan",
         "demo-seed_examples"]


def gpu_run(*args, simulator=True):
    env = dict(os.environ, PYTHON=sys.executable)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    else:
        env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run([str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # ~45 CPU seconds: CI runs it in its slow step
def test_smoke_runs_every_step_then_resumes(tmp_path):
    out = tmp_path / "results"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    first = gpu_run("--smoke", "--out", str(out))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert first.returncode == 0, first.stdout + first.stderr
    # CPU seconds of the run and its steps (about 32 s on the 2-core machine), not wall time,
    # which a shared machine's load doubles
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 60, f"gpu_run.sh --smoke used {cpu:.0f} CPU seconds (keep its steps tiny)"
    for step in STEPS:
        record = json.loads((out / f"{step}.json").read_text())
        assert record["step"] == step and record["status"] == "passed", record
        assert record["env"] == {"NUMBA_ENABLE_CUDASIM": "1"}
        assert 0 < record["seconds"] <= record["limit_s"]
        assert (out / record["stdout"]).is_file() and (out / record["stderr"]).is_file()
        assert f"gpu_run: {step}:" in first.stdout
    numbers = {s: json.loads((out / f"{s}.json").read_text())["numbers"] for s in STEPS}
    assert numbers["gpu-tests"]["skipped"] >= 1  # the simulator skips the real-GPU tests
    assert numbers["suite"]["passed"] >= 1 and "failed" not in numbers["suite"]
    assert numbers["bench"]["rows"] >= 2 and numbers["bench"]["errors"] == 0
    assert numbers["bench"]["device"] == "simulator"
    assert numbers["demo-train_cnn"]["epochs"] == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["device"] == "simulator" and summary["meta"]["smoke"]
    assert [r["step"] for r in summary["steps"]] == STEPS
    text = (out / "summary.txt").read_text()
    assert text.strip() in first.stdout
    assert "SMOKE on the simulator" in text and "7/7 steps passed" in text
    assert len(text.splitlines()) <= 24  # one screen

    second = gpu_run("--smoke", "--out", str(out))
    assert second.returncode == 0, second.stdout + second.stderr
    assert "gpu_run: suite:" not in second.stdout  # nothing reran
    assert second.stdout.count("(done before)") == len(STEPS)

    third = gpu_run("--smoke", "--out", str(out), "--step", "bench")  # reruns that step only
    assert third.returncode == 0, third.stdout + third.stderr
    assert "gpu_run: bench:" in third.stdout and "gpu_run: suite:" not in third.stdout


def load_runner():
    """benchmarks/gpu_run.py as a module (benchmarks/ is not a package)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import gpu_run
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return gpu_run


def test_a_step_past_its_limit_is_killed_and_keeps_its_counts(tmp_path):
    gpu_run = load_runner()
    hang = "print('....F. [ 50%]'); import time; time.sleep(60)"
    step = gpu_run.Step("hang", [sys.executable, "-c", hang], 60, "sleeps", "pytest")
    t0 = time.monotonic()
    record = gpu_run.run_step(step, tmp_path, limit_s=1.0)
    assert time.monotonic() - t0 < 10
    assert record["status"] == "timeout" and record["rc"] != 0
    assert record["numbers"] == dict(passed=5, failed=1, partial=True)


def test_pytest_counts_of_a_run_killed_midway():
    runner = load_runner()
    done = "....s\n== 3 failed, 120 passed, 2 skipped, 1 error in 12.5s ==\n"
    assert runner.pytest_counts(done) == dict(failed=3, passed=120, skipped=2, errors=1)
    killed = "....F.s. [  5%]\n..E.                 [ 10%]\n"
    assert runner.pytest_counts(killed) == dict(passed=9, failed=1, errors=1, skipped=1,
                                                partial=True)
    assert runner.slug("NVIDIA H200") == "nvidia-h200"


def test_refuses_without_gpu_or_smoke(tmp_path):
    if mg.cuda.has_gpu():
        pytest.skip("a real GPU is here: the full run would start")
    done = gpu_run("--out", str(tmp_path / "results"), simulator=False)
    assert done.returncode == 2
    assert "no CUDA GPU here" in done.stderr and "--smoke" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "results").exists()


def test_the_gpu_plan_fits_the_budget(tmp_path):
    """What a call without --smoke would run (checked here, where no GPU runs it)."""
    gpu_run = load_runner()
    args = gpu_run.parse_args([])
    plan = gpu_run.steps(args, tmp_path)
    assert [s.name for s in plan] == STEPS
    assert sum(s.limit_s for s in plan) <= args.budget == 480
    assert all(s.env == {"NUMBA_ENABLE_CUDASIM": "0"} for s in plan)
    by_name = {s.name: s.command for s in plan}
    assert by_name["gpu-tests"][-3:] == ["-m", "gpu", "tests"]
    assert by_name["suite"][-1] == "tests" and "not gpu" in by_name["suite"]
    assert by_name["bench"][-2:] == ["--suite", "all"] and "--smoke" not in by_name["bench"]
    for demo in ("train_cnn", "train_lstm", "train_gan", "seed_examples"):
        cmd = by_name[f"demo-{demo}"]
        assert f"demos/{demo}.py" in cmd and cmd[cmd.index("--device") + 1] == "cuda"
        assert "--smoke" not in cmd and cmd[cmd.index("--epochs") + 1] == "1"
