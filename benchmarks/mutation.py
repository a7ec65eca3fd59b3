"""Mutation testing: plant each bug of the catalogue (``benchmarks/mutations.py``) in a scratch
copy of the repository, run the tests that cover the patched file, and report which test
killed it.

    python benchmarks/mutation.py                    # every bug, one at a time
    python benchmarks/mutation.py --seed 2           # Hypothesis seed 2 (-p hypothesis --hypothesis-seed=2)
    python benchmarks/mutation.py --only max-identity-zero
    python benchmarks/mutation.py --jobs 2           # two scratch copies in parallel
    python benchmarks/mutation.py --docs             # (re)write docs/bugs.md from the catalogue

The working tree is never modified: the tree (without .git, .venv and caches) is copied to a
temporary directory per job, each bug is applied there, the covering test files run with
``pytest -x -p no:cacheprovider`` under ``NUMBA_ENABLE_CUDASIM=1`` (the scratch copy first on
``PYTHONPATH``, so its ``minigpu`` is the one imported), and the file is restored. A bug is
*killed* when pytest fails within the per-bug timeout (60 s by default); the table ends with
``killed N/M``. Exit status 1 unless every bug was killed.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CUDA = "minigpu/backends/cuda/"

R, MM = "tests/test_cuda_reduce.py::", "tests/test_cuda_matmul.py::"
TESTS = {
    CUDA + "blocks.py": [R + "test_row_kernel_long_rows", R + "test_max_min_of_one_signed_rows",
                         R + "test_split_rows_match_numpy", "tests/test_cuda_reduce.py",
                         "tests/test_cuda_softmax.py"],
    CUDA + "reduce.py": [R + "test_max_min_of_one_signed_rows", R + "test_column_kernel_split",
                         R + "test_split_rows_match_numpy", "tests/test_cuda_reduce.py"],
    CUDA + "matmul.py": [MM + "test_every_small_config_fixed",
                         MM + "test_tile_loads_are_coalesced",
                         MM + "test_production_configuration", "tests/test_cuda_matmul.py"],
    CUDA + "transpose.py": ["tests/test_cuda_transpose.py::test_more_tiles_than_blocks",
                            "tests/test_cuda_transpose.py::test_production_tile_is_conflict_free",
                            "tests/test_cuda_transpose.py"],
    CUDA + "softmax.py": ["tests/test_cuda_softmax.py::test_softmax_extreme_rows",
                          "tests/test_cuda_softmax.py"],
    CUDA + "indexing.py": ["tests/test_cuda_indexing.py::test_index_add_all_rows_to_one_index",
                           "tests/test_scan.py::test_scatter_add_all_same_index",
                           "tests/test_cuda_indexing.py", "tests/test_scan.py"],
    CUDA + "pool.py": ["tests/test_cuda_pool.py::test_maxpool2d_backward_sums_overlapping_windows",
                       "tests/test_cuda_pool.py"],
    CUDA + "optim.py": ["tests/test_cuda_optim.py::test_adam_first_step_moves_each_weight_by_about_lr",
                        "tests/test_cuda_optim.py"],
    CUDA + "lstm.py": ["tests/test_cuda_lstm.py::test_lstm_cell_distinct_gates",
                       "tests/test_cuda_lstm.py"],
    "minigpu/lessons/matmul.py": [MM + "test_every_small_config_fixed", "tests/test_cuda_matmul.py"],
    "minigpu/lessons/reduction.py": [R + "test_sum_ladder_small_blocks_and_passes",
                                     R + "test_sum_ladder_production_block",
                                     "tests/test_cuda_reduce.py"],
    CUDA + "random.py": ["tests/test_cuda_random.py::test_more_numbers_than_threads_match_cpu",
                         "tests/test_cuda_random.py"],
    CUDA + "scan.py": ["tests/test_scan.py::test_scan_production_configuration",
                       "tests/test_scan.py"],
}
"""Which tests cover a kernel file: fixed edge-value and configuration tests first (``-x``
stops at the first failure, so a bug they catch costs seconds), then the whole files."""

IGNORE = shutil.ignore_patterns(".git", ".venv", "__pycache__", ".hypothesis", ".pytest_cache",
                                "*.egg-info", "build", "dist", "results")


def load_catalogue():
    """The ``BUGS`` list of ``benchmarks/mutations.py`` (loaded by path: benchmarks/ is not a
    package)."""
    spec = importlib.util.spec_from_file_location("mutations", Path(__file__).with_name(
        "mutations.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BUGS


def scratch_copy() -> Path:
    where = Path(tempfile.mkdtemp(prefix="minigpu-mutant-"))
    shutil.copytree(ROOT, where / "repo", ignore=IGNORE)
    return where / "repo"


def pytest_command(targets, seed, deselect=()):
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-rfE", "-p", "no:cacheprovider",
           "-p", "no:xdist", *targets, *(f"--deselect={t}" for t in deselect)]
    if seed is not None:
        cmd += ["-p", "hypothesis", f"--hypothesis-seed={seed}"]
    return cmd


def stages(targets):
    """Two pytest runs: the named tests first, then the whole files without them (pytest runs
    the tests of one file in file order whatever order the arguments name them in)."""
    named = [t for t in targets if "::" in t]
    files = [t for t in targets if "::" not in t]
    return [s for s in ((named, ()), (files, named)) if s[0]]


def run_tests(repo: Path, targets, seed, timeout):
    """(status, first failing test, seconds): status is 'killed', 'survived' or 'timeout'
    (the timeout covers both stages)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=str(repo))
    env.pop("MINIGPU_SIM_CHECKS", None)
    t0 = time.perf_counter()
    for run, deselect in stages(targets):
        proc = subprocess.Popen(pytest_command(run, seed, deselect), cwd=repo, env=env,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return "timeout", "", time.perf_counter() - t0
        if proc.returncode != 0:
            failed = re.search(r"^(?:FAILED|ERROR) (\S+)", out, re.M)
            test = failed.group(1) if failed else \
                f"pytest exit {proc.returncode}: {out.strip().splitlines()[-1:]}"
            return "killed", test, time.perf_counter() - t0
    return "survived", "", time.perf_counter() - t0


def check_scratch(repo: Path):
    """The scratch copy's minigpu must be the one the tests import."""
    env = dict(os.environ, PYTHONPATH=str(repo))
    got = subprocess.run([sys.executable, "-c", "import minigpu; print(minigpu.__file__)"],
                         cwd=repo, env=env, capture_output=True, text=True).stdout.strip()
    if not got.startswith(str(repo)):
        raise SystemExit(f"the scratch copy is not imported first (got {got!r})")


def mutate_and_run(repo: Path, bug, seed, timeout):
    path = repo / bug.file
    original = path.read_text()
    if original.count(bug.old) != 1:
        return "bad patch", f"snippet occurs {original.count(bug.old)} times", 0.0
    path.write_text(original.replace(bug.old, bug.new))
    try:
        return run_tests(repo, TESTS[bug.file], seed, timeout)
    finally:
        path.write_text(original)


def run_all(bugs, seed, timeout, jobs):
    repos = [scratch_copy() for _ in range(jobs)]
    check_scratch(repos[0])
    free = list(repos)
    results = {}

    def one(bug):
        repo = free.pop()
        try:
            results[bug.name] = mutate_and_run(repo, bug, seed, timeout)
        finally:
            free.append(repo)
        status, test, secs = results[bug.name]
        print(f"  {bug.name}: {status} {test} ({secs:.1f} s)", file=sys.stderr, flush=True)

    try:
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            list(pool.map(one, bugs))
    finally:
        for repo in repos:
            shutil.rmtree(repo.parent, ignore_errors=True)
    return results


def table(bugs, results):
    width = max(len(b.name) for b in bugs)
    lines = [f"{'bug':<{width}}  {'status':<8}  {'seconds':>7}  first failing test",
             f"{'-' * width}  {'-' * 8}  {'-' * 7}  {'-' * 18}"]
    for b in bugs:
        status, test, secs = results[b.name]
        lines.append(f"{b.name:<{width}}  {status:<8}  {secs:7.1f}  {test}")
    killed = sum(results[b.name][0] == "killed" for b in bugs)
    lines.append(f"killed {killed}/{len(bugs)}")
    return "\n".join(lines), killed


DOC_HEAD = """# Classic GPU kernel bugs, and what catches them

Every bug below is a real, small patch against minigpu's own kernels (the catalogue is
`benchmarks/mutations.py`; this page is generated from it by
`python benchmarks/mutation.py --docs`). `python benchmarks/mutation.py` plants them one at a
time in a scratch copy of the repository and runs the tests that cover the patched file: the
suite is meant to kill every one of them, with any Hypothesis seed.

Three kinds of damage on a real GPU:

- **wrong result**: the kernel computes something else, always or only for some inputs
  (all-negative rows, ragged edges, repeated indices, production launch sizes);
- **intermittent wrong result**: a race (missing barrier, atomic turned into a plain update)
  gives the right answer most runs and a wrong one under other timing; a test that only
  compares outputs catches it by luck, the simulator's racecheck every time
  (`docs/simulator.md`);
- **silent slowdown**: the output is identical and only the time changes (lost padding,
  uncoalesced access); only the simulator's counters (`minigpu.cuda.counters()`) see it
  without a GPU.

How the catching works, beyond comparing cuda with the NumPy reference on drawn inputs: fixed
edge-value tests next to the Hypothesis ones (all-negative rows for max, all-positive for min,
on every reduce path; distinct values per gate block for the LSTM; all-equal indices for the
atomics), small launch configurations that reach every code path of the production ones
(matmul micro-tile TN = 8, column splits of 2, 4 and 8), launch configurations parametrised
rather than sampled, and the sanitizer (racecheck, memcheck, initcheck) on every test.

| bug | file | what it does on a real GPU | caught by |
| --- | --- | --- | --- |
"""


def docs_text(bugs):
    """docs/bugs.md: the page head and one table row per bug."""
    rows = [f"| **{b.name}**: {b.what} | `{b.file.removeprefix('minigpu/')}` | {b.gpu} | "
            f"{b.caught} |" for b in bugs]
    return DOC_HEAD + "\n".join(rows) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=None, help="Hypothesis seed")
    ap.add_argument("--only", action="append", metavar="NAME", help="run only this bug")
    ap.add_argument("--jobs", type=int, default=1, help="scratch copies run in parallel")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per bug")
    ap.add_argument("--docs", action="store_true", help="write docs/bugs.md and exit")
    args = ap.parse_args(argv)
    bugs = load_catalogue()
    if args.docs:
        (ROOT / "docs" / "bugs.md").write_text(docs_text(bugs))
        return 0
    if args.only:
        unknown = set(args.only) - {b.name for b in bugs}
        if unknown:
            ap.error(f"unknown bug(s): {', '.join(sorted(unknown))}")
        bugs = [b for b in bugs if b.name in args.only]
    results = run_all(bugs, args.seed, args.timeout, max(1, args.jobs))
    text, killed = table(bugs, results)
    print(text)
    return 0 if killed == len(bugs) else 1


if __name__ == "__main__":
    sys.exit(main())
