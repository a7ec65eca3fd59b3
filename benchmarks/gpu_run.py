"""One command for a GPU: ``benchmarks/gpu_run.sh [--smoke] [--out DIR] [--force] [--budget S]``.

On a machine with an NVIDIA GPU (no network needed) it runs, in order, each step as its own
process with its own time limit, the whole within ``--budget`` seconds (480 by default):

1. ``gpu-tests``: ``pytest -m gpu``, the tests only real hardware runs;
2. ``suite``: the whole suite (``-m "not gpu"``, the gpu ones ran in step 1) with the simulator
   off (``NUMBA_ENABLE_CUDASIM=0``), on ``--workers`` pytest-xdist workers when xdist is
   installed, stopped at its time limit (the counts so far are recorded);
3. ``bench``: ``python -m minigpu.tools.bench --suite all`` against PyTorch or CuPy (whichever
   is importable with a GPU; none: minigpu's own numbers only);
4. ``demo-*``: one epoch of each demo on ``--device cuda``.

Each step writes ``<step>.out`` / ``<step>.err`` (its stdout and stderr) and ``<step>.json``
(command, status, seconds, key numbers) under ``benchmarks/results/<YYYY-MM-DD>-<device>/``;
``summary.json`` and ``summary.txt`` hold the one-screen summary printed at the end. A step
with a record is done: a second call skips it (``--force`` reruns everything, ``--step NAME``
reruns that step). A step left without a record (the machine went away, out of budget) runs
on the next call.

``--smoke`` runs every step in its smallest form on Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``), so the harness is tested on a CPU-only machine
(``tests/test_gpu_run.py``): one file of gpu tests (skipped there), one test file for the suite,
one lesson of the benchmark (counters, no timings) and the demos' ``--smoke`` on the cpu device
(on the simulator they take minutes; ``tests/test_demos.py`` runs them on cuda). Its device
name is ``simulator``; never commit a smoke run.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMOS = ("train_cnn", "train_lstm", "train_gan", "seed_examples")
SMOKE_GPU_TESTS = "tests/test_streams.py"   # carries a @pytest.mark.gpu test
SMOKE_SUITE = "tests/test_layering.py"       # a fast file of the suite
SMOKE_LESSON = "fusion"


@dataclass
class Step:
    name: str
    command: list
    limit_s: float
    what: str
    kind: str                      # "pytest", "bench" or "demo": how its key numbers are read
    env: dict = field(default_factory=dict)
    artifact: str | None = None    # a file the step writes, read for its key numbers


def steps(args, out: Path) -> list[Step]:
    py = sys.executable
    pytest = [py, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
    sim = "1" if args.smoke else "0"
    env = dict(NUMBA_ENABLE_CUDASIM=sim)
    if args.smoke:
        gpu_tests = pytest + ["-m", "gpu", SMOKE_GPU_TESTS]
        suite = pytest + [SMOKE_SUITE]
    else:
        gpu_tests = pytest + ["-m", "gpu", "tests"]
        suite = pytest + ["-m", "not gpu", "--durations=10", "tests"]
        if args.workers > 1 and _importable("xdist"):
            suite[3:3] = ["-n", str(args.workers)]
    bench = [py, "-m", "minigpu.tools.bench", "--json", str(out / "bench-rows.json")]
    bench += (["--smoke", "--suite", "lessons", "--lesson", SMOKE_LESSON] if args.smoke
              else ["--suite", "all"])
    device = "cpu" if args.smoke else "cuda"
    demo_limits = dict(train_cnn=25, train_lstm=25, train_gan=30, seed_examples=15)
    out_steps = [
        Step("gpu-tests", gpu_tests, 60, "pytest -m gpu (real-GPU-only tests)", "pytest", env),
        Step("suite", suite, 180, "the suite, simulator off" if not args.smoke
             else f"smoke: {SMOKE_SUITE} only", "pytest", env),
        Step("bench", bench, 140, "minigpu.tools.bench --suite all vs torch/CuPy"
             if not args.smoke else f"smoke: lesson {SMOKE_LESSON}, counters only", "bench",
             env, "bench-rows.json"),
    ]
    for demo in DEMOS:
        demo_out = out / "demos" / demo
        cmd = [py, f"demos/{demo}.py", "--device", device, "--out", str(demo_out)]
        cmd += ["--smoke"] if args.smoke else ["--epochs", "1"]
        out_steps.append(Step(f"demo-{demo}", cmd, demo_limits[demo],
                              f"demos/{demo}.py --smoke on cpu" if args.smoke
                              else f"demos/{demo}.py, one epoch on cuda", "demo", env,
                              f"demos/{demo}/metrics.json"))
    return out_steps


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# --- the device ----------------------------------------------------------------------------------
PROBE = ("from numba import cuda\n"
         "if not cuda.is_available(): raise SystemExit(3)\n"
         "d = cuda.get_current_device(); n = d.name\n"
         "print(n.decode() if isinstance(n, bytes) else n, *d.compute_capability)\n")


def gpu_name() -> str | None:
    """The GPU's name as the driver reports it (``"NVIDIA H200 9 0"`` -> name and capability),
    or None without one; asked in a child with the simulator off."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    try:
        done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                              text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    return done.stdout.strip().rsplit(" ", 2)[0]


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def versions() -> dict:
    """Versions of what the run measures and compares with (None: not installed)."""
    from importlib import metadata

    found = {}
    for dist in ("numpy", "numba", "numba-cuda", "torch", "cupy-cuda12x", "cupy-cuda13x",
                 "pytest", "pytest-xdist"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found


def git_commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


# --- running one step ----------------------------------------------------------------------------
def run_step(step: Step, out: Path, limit_s: float) -> dict:
    """Run ``step`` in its own process group, killed at ``limit_s``; its record."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **step.env)  # a killed step keeps its output
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    t0 = time.monotonic()
    with open(out / f"{step.name}.out", "w") as fout, open(out / f"{step.name}.err", "w") as ferr:
        proc = subprocess.Popen(step.command, cwd=ROOT, env=env, stdout=fout, stderr=ferr,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=limit_s)
            status = "passed" if rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                rc = proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
            status = "timeout"
    seconds = time.monotonic() - t0
    record = dict(step=step.name, what=step.what, status=status, rc=rc,
                  seconds=round(seconds, 2), limit_s=round(limit_s, 1), started=started,
                  command=[_show(c) for c in step.command], env=step.env,
                  stdout=f"{step.name}.out", stderr=f"{step.name}.err")
    record["numbers"] = key_numbers(step, out)
    return record


def _show(arg: str) -> str:
    """A command word as the record shows it: the interpreter as ``python``, paths relative."""
    if arg == sys.executable:
        return "python"
    return arg.replace(str(ROOT) + os.sep, "")


# --- key numbers ---------------------------------------------------------------------------------
OUTCOMES = ("passed", "failed", "errors", "error", "skipped", "deselected", "xfailed", "xpassed")
PROGRESS = re.compile(r"^([.FEsxX]+)\s*(\[\s*\d+%\])?$")


def pytest_counts(text: str) -> dict:
    """Outcome counts from pytest's last summary line; when it was killed before writing one,
    from its progress lines (``..F.s [ 40%]``), marked ``partial``."""
    for line in reversed(text.splitlines()):
        found = re.findall(r"(\d+) (" + "|".join(OUTCOMES) + r")\b", line)
        if found and re.search(r" in [\d.]+s", line):
            counts = {}
            for n, what in found:
                what = "errors" if what == "error" else what
                counts[what] = counts.get(what, 0) + int(n)
            return counts
    marks = "".join(m.group(1) for line in text.splitlines() if (m := PROGRESS.match(line)))
    names = {".": "passed", "F": "failed", "E": "errors", "s": "skipped", "x": "xfailed",
             "X": "xpassed"}
    counts = {names[c]: marks.count(c) for c in names if marks.count(c)}
    return dict(counts, partial=True)


def bench_numbers(path: Path) -> dict:
    """Rows, errors, mismatches, the ratio to the reference library and measured / predicted
    time (the counters' time model, each row's ``predicted_ms``): geomean, min, max."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    rows, meta = data["rows"], data["meta"]
    ratios = [r["vs_ref"] for r in rows if r.get("vs_ref")]
    numbers = dict(rows=len(rows), errors=sum("error" in r for r in rows),
                   mismatches=sum(r.get("check") == "DIFFERS" for r in rows),
                   reference=meta.get("reference"), device=meta.get("device"))
    predicted = [r["ms"] / r["predicted_ms"] for r in rows if r.get("predicted_ms")]
    if predicted:   # the time model's calibration: measured / predicted
        numbers.update(measured_over_predicted_geomean=round(
            math.exp(sum(map(math.log, predicted)) / len(predicted)), 3),
            measured_over_predicted_min=round(min(predicted), 3),
            measured_over_predicted_max=round(max(predicted), 3))
    if ratios:
        numbers.update(vs_ref_geomean=round(math.exp(sum(map(math.log, ratios)) / len(ratios)),
                                            3),
                       vs_ref_min=round(min(ratios), 3), vs_ref_max=round(max(ratios), 3),
                       vs_ref_rows=len(ratios))
    return numbers


DEMO_KEYS = ("epochs", "test_accuracy", "test_loss", "train_loss", "final_d_loss", "final_g_loss",
             "train_seconds", "seconds")


def demo_numbers(path: Path) -> dict:
    if not path.is_file():
        return {}
    metrics = json.loads(path.read_text())
    return {k: (round(v, 3) if isinstance(v, float) else v)
            for k, v in metrics.items() if k in DEMO_KEYS}


def key_numbers(step: Step, out: Path) -> dict:
    if step.kind == "pytest":
        return pytest_counts((out / f"{step.name}.out").read_text())
    if step.kind == "bench":
        return bench_numbers(out / step.artifact)
    return demo_numbers(out / step.artifact)


# --- the summary ---------------------------------------------------------------------------------
def format_numbers(numbers: dict) -> str:
    return ", ".join(f"{k} {v}" if not isinstance(v, bool) else k
                     for k, v in numbers.items() if v is not None and v is not False)


def summary(meta: dict, records: list) -> str:
    lines = [f"gpu_run: {meta['device']} ({meta['date']}, commit {str(meta['commit'])[:10]})"
             + ("  *** SMOKE on the simulator: no GPU numbers ***" if meta["smoke"] else ""),
             f"results: {meta['out']}", ""]
    lines.append(f"{'step':19s} {'status':8s} {'seconds':>8s}  key numbers")
    total = 0.0
    for rec in records:
        seconds = rec.get("seconds")
        total += seconds or 0
        shown = "-" if seconds is None else f"{seconds:.1f}"
        note = " (done before)" if rec.get("resumed") else ""
        lines.append(f"{rec['step']:19s} {rec['status']:8s} {shown:>8s}  "
                     f"{format_numbers(rec.get('numbers', {}))}{note}")
    lines.append("")
    done = sum(r["status"] == "passed" for r in records)
    lines.append(f"{done}/{len(records)} steps passed; {total:.1f} s of steps in all")
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="benchmarks/gpu_run.sh",
        description="Run minigpu's real-GPU tests, the suite with the simulator off, the "
                    "benchmark against PyTorch/CuPy and the demos, resumably, under "
                    "benchmarks/results/<date>-<device>/.")
    parser.add_argument("--smoke", action="store_true",
                        help="every step in its smallest form on Numba's CUDA simulator "
                             "(checks the harness; no GPU numbers)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results folder (default benchmarks/results/<date>-<device>)")
    parser.add_argument("--force", action="store_true", help="rerun the steps already done")
    parser.add_argument("--step", action="append", default=[], metavar="NAME",
                        help="only this step, rerun even if done (repeatable)")
    parser.add_argument("--budget", type=float, default=480.0,
                        help="seconds for the whole run; each step's limit is cut to what is "
                             "left (default 480)")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                        help="pytest-xdist workers for the suite step (default min(8, cores))")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.monotonic()  # the budget counts the device probe too
    if args.smoke:
        device = "simulator"
    else:
        device = gpu_name()
        if device is None:
            print("gpu_run: no CUDA GPU here (numba.cuda.is_available() is False with "
                  "NUMBA_ENABLE_CUDASIM=0), and this run needs one.\n"
                  "`benchmarks/gpu_run.sh --smoke` runs every step in its smallest form on "
                  "Numba's CUDA simulator (no GPU numbers).", file=sys.stderr)
            return 2
    date = datetime.date.today().isoformat()
    out = (args.out or ROOT / "benchmarks" / "results" / f"{date}-{slug(device)}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    plan = steps(args, out)
    known = {s.name for s in plan}
    unknown = [n for n in args.step if n not in known]
    if unknown:
        print(f"gpu_run: no step {', '.join(unknown)}; the steps: {', '.join(sorted(known))}",
              file=sys.stderr)
        return 2
    meta = dict(date=date, device=device, smoke=args.smoke, commit=git_commit(),
                python=platform.python_version(), host=platform.node(), budget_s=args.budget,
                versions=versions(),
                out=os.path.relpath(out, ROOT) if out.is_relative_to(ROOT) else str(out))
    records = []
    for step in plan:
        path = out / f"{step.name}.json"
        chosen = not args.step or step.name in args.step
        if path.is_file() and not args.force and not (args.step and chosen):
            records.append(dict(json.loads(path.read_text()), resumed=True))
            continue
        if not chosen:
            records.append(dict(step=step.name, status="not run", numbers={}))
            continue
        left = args.budget - (time.monotonic() - t0)
        if left < 5:
            records.append(dict(step=step.name, status="no time", numbers={}))
            continue
        print(f"gpu_run: {step.name}: {step.what} (limit {min(step.limit_s, left):.0f} s)",
              flush=True)
        record = run_step(step, out, min(step.limit_s, left))
        path.write_text(json.dumps(record, indent=1))
        records.append(record)
    text = summary(meta, records)
    (out / "summary.txt").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps(dict(meta=meta, steps=records), indent=1))
    print(text)
    return 0 if all(r["status"] in ("passed", "not run") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
