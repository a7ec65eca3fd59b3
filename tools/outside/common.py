"""What the outside-suite scripts share: one pytest run of someone else's tests, stock or
with minigpu's sanitizer (``pytest -p minigpu.sanitizer``, the plugin a library's CI would use;
``outside_plugin.py`` imports minigpu in the processes a test starts), and its outcomes per
test."""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

RANK = {"failed": 2, "passed": 1, "skipped": 0}


def run(label, mode, targets, workers, rootdir, extra_env=None, log=None, deselect=()):
    """Run pytest on ``targets`` with minigpu's sanitizer plugin (``mode`` "minigpu", whose
    summary is printed) or stock; return (test id -> outcome, test id -> seconds, summary line,
    wall seconds)."""
    fd, results = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", MINIGPU_OUTSIDE=mode,
               MINIGPU_OUTSIDE_RESULTS=results,
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
               **(extra_env or {}))
    sanitizer = ["-p", "minigpu.sanitizer"] if mode == "minigpu" else []
    cmd = [sys.executable, "-m", "pytest", *sanitizer, "-p", "outside_plugin",
           "-p", "no:cacheprovider",
           "-q", "--timeout=900", "-W", "ignore", "--rootdir", str(rootdir),
           "-c", os.devnull, *(["-n", str(workers)] if workers > 1 else []),
           *(f"--deselect={t}" for t in deselect), *targets]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=rootdir)
    wall = time.perf_counter() - start
    if log:
        Path(log).write_text(proc.stdout + proc.stderr)
    outcomes, seconds = {}, collections.Counter()
    with open(results) as f:
        for line in f:
            r = json.loads(line)
            t = r["test"]
            if RANK[r["outcome"]] >= RANK.get(outcomes.get(t), -1):
                outcomes[t] = r["outcome"]
            seconds[t] += r.get("duration", 0.0)
    os.unlink(results)
    summary = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    if sanitizer:
        print(*sanitizer_summary(proc.stdout), sep="\n")
    if proc.returncode not in (0, 1, 5):  # 1: some tests failed; 5: none collected
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        sys.exit(f"{label}: pytest exited with {proc.returncode}")
    return outcomes, seconds, summary, wall


def sanitizer_summary(stdout):
    """The lines of the sanitizer plugin's terminal summary, indented."""
    lines = stdout.split("= minigpu.sanitizer =", 1)[-1].splitlines()[1:]
    end = next((i for i, line in enumerate(lines) if line.startswith("ERROR SUMMARY")), None)
    return ["    " + line for line in lines[:end + 1]] if end is not None else [
        "    (no minigpu.sanitizer summary in pytest's output)"]


def counts(outcomes):
    c = collections.Counter(outcomes.values())
    return f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"


def listing(title, tests, notes=None):
    """Print ``title: N`` and the tests, one a line (with ``notes[test]`` under each)."""
    print(f"{title}: {len(tests)}")
    for t in tests:
        print(f"  {t}")
        if notes:
            print(f"      {notes[t]}")
