"""Outside kernels, stock simulator against minigpu's sanitizer: results and verdicts.

The corpus (``tools/outside/corpus/``, one module per source) holds kernels from sources the
project did not write — race-detector test suites with labelled verdicts (DataRaceBench's
accelerator cases, GPUVerify's CUDA tests; translated to Numba), tutorial notebooks and example
collections (adapted) — each a case that launches its kernel on small inputs. This script runs
every case twice under ``NUMBA_ENABLE_CUDASIM=1``, each run in a process of its own: on the
stock simulator, and under ``python -m minigpu.sanitizer`` (the command a user runs; its
summary is printed). A run *reports* a bug when a launch raised an error (stock: any exception;
minigpu: the sanitizer's errors too). Per source it prints the kernels run, the results equal
(cases both runs completed, compared bit for bit, or to the case's tolerance), the bugs each
run reported, and against the labels precision and recall of each; then every disagreement —
a verdict that differs from the label or from stock, a result that differs — with, for the
ones read and understood, the reason (:data:`KNOWN`). It exits 1 on a false alarm of minigpu
(a ``clean`` case reported) or a result difference not in :data:`KNOWN`.

    python tools/outside/kernel_corpus.py [--source NAME ...] [-k SUBSTRING] [--verbose]
"""
from __future__ import annotations

import argparse
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before Numba: the corpus modules compile nothing
HERE = Path(__file__).resolve().parent
CASE_SECONDS = 60
"""A case still running after this long has hung (a grid sync some blocks never reach)."""

KNOWN = {
    "gpuverify:loop_unwind":
        "every thread stores B[i] = A[i], the same value, to a shared element: GPUVerify "
        "reports a write-write race; minigpu's rule calls a store of the bytes already there "
        "benign: no order of the stores can be told apart (docs/simulator.md, racecheck)",
    "gpuverify:curand_init_race":
        "both threads initialise states[0] with the same seed: the same bytes, a benign "
        "same-value store for minigpu, a write-write race for GPUVerify",
    "gpuverify:cg_divergence_grid_group":
        "a grid sync inside `if idx % 2 == 0` in the only block: the odd threads exit, and on "
        "Volta and later GPUs the barrier waits only for threads that have not exited, so it "
        "completes; GPUVerify reports barrier divergence, and so does minigpu in strict mode "
        "(MINIGPU_SIM_STRICT=1), not by default",
    "gpuverify:cg_divergence_thread_block":
        "the same with a block barrier: completes on Volta and later GPUs; strict mode reports it",
    "gpuverify:ctimeslid":
        "GPUVerify checks races only; the kernel declares 16,384 uint32 of static shared memory "
        "(64 KiB, the test's blockDim 64 x WIDTH 256), over the 48 KiB a kernel may declare "
        "statically: a GPU build refuses it, minigpu's launch check too, the stock simulator "
        "runs it",
    "gpuverify:warpsync_scan_warp":
        "GPUVerify proves it only under --warp-sync=32 (lanes of a warp in lockstep); on Volta "
        "and later GPUs lanes are independently scheduled and the scan's reads of A[tid - k] "
        "race the neighbour's writes (CUDA: warp-synchronous code needs __syncwarp)",
    "gpuverify:cg_multiple_barriers":
        "the stock simulator's grid sync does not wait for the other blocks (it runs them one "
        "after another), so block 0 reads A[32] before block 1 has written it: stock gives "
        "A[31] = 32, minigpu 33, which is what a GPU gives (the test's arithmetic: A[i] = i + 2 "
        "for i < 32)",
    "accelerated_computing_hub:ch10_vecadd_forall":
        "the stock simulator refuses cuda.jit(lineinfo=True) (a TypeError); a GPU compiles it, "
        "and minigpu runs it",
    "numba_examples:configured_sum":
        "the stock simulator has no kernel.configure(grid, block); a GPU has, and minigpu too",
    "gpuverify:warpsync_shuffle":
        "as warpsync_scan_warp: a rotation through global memory with no __syncwarp, race free "
        "only with lockstep warps",
}
"""Disagreements read and understood: case id -> why."""
KNOWN.update(dict.fromkeys(
    [f"gpu_puzzles:{name}" for name in (
        "puzzle05_broadcast", "puzzle10_dot", "puzzle11_conv_one_block", "puzzle11_conv_two_blocks",
        "puzzle12_sum_simple", "puzzle13_axis_sum", "puzzle14_matmul_one_tile")],
    "the puzzles hand the `cuda` module to a kernel factory, so the kernel reaches it through a "
    "closure, which the stock simulator does not swap for its simulated module (AttributeError: "
    "no threadIdx); the puzzles are meant for a GPU, where they run, and minigpu runs them"))


# ----------------------------------------------------------------------------- the worker

def worker(mode, out, names):
    """Run the cases (in this process) and pickle each one's outcome to ``out``."""
    sys.path.insert(0, str(HERE))
    from corpus import load
    report = None
    if mode == "minigpu":
        from minigpu.sanitizer import report as sanitizer
        report = sanitizer.REPORT
        if report is None:
            sys.exit("the minigpu run must go through python -m minigpu.sanitizer")

    def timeout(*_):
        raise TimeoutError(f"still running after {CASE_SECONDS} s (hung)")
    signal.signal(signal.SIGALRM, timeout)
    results = {}
    for c in load():
        if names and not any(n in c.id for n in names):
            continue
        before = dict(report.errors) if report else {}
        print(f"kernel_corpus: {c.id}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        signal.alarm(CASE_SECONDS)
        try:
            outputs, error = c.run(), None
        except Exception as e:  # the case's verdict: what a launch raised
            outputs, error = None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        finally:
            signal.alarm(0)
        if report:
            new = [f"{cls} (sanitizer)" for (tool, cls), n in report.errors.items()
                   if n > before.get((tool, cls), 0)]
            error = error or (new[0] if new else None)
        if not isinstance(outputs, (tuple, list)):
            outputs = () if outputs is None else (outputs,)
        results[c.id] = dict(outputs=[_host(o) for o in outputs], error=error,
                             seconds=time.perf_counter() - start)
    with open(out, "wb") as f:
        pickle.dump(results, f)


def _host(a):
    import numpy as np
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a).copy()


def run_worker(mode, names):
    fd, out = tempfile.mkstemp(suffix=".pickle")
    os.close(fd)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env.pop("MINIGPU_OUTSIDE", None)
    me = [str(Path(__file__).resolve()), "--worker", mode, "--out", out, *names]
    cmd = ([sys.executable, "-m", "minigpu.sanitizer", *me] if mode == "minigpu"
           else [sys.executable, *me])
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    try:
        with open(out, "rb") as f:
            results = pickle.load(f)
    except (EOFError, pickle.UnpicklingError):
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n")
        sys.exit(f"the {mode} run ended without results (exit status {proc.returncode})")
    finally:
        os.unlink(out)
    summary = proc.stderr.split("\nminigpu.sanitizer (", 1)
    return results, wall, ("minigpu.sanitizer (" + summary[1]).rstrip() if len(summary) > 1 else ""


# ----------------------------------------------------------------------------- comparing

def equal(a, b, rtol):
    import numpy as np
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if rtol and x.dtype.kind in "fc":
            if not np.allclose(x, y, rtol=rtol, atol=0, equal_nan=True):
                return False
        elif x.tobytes() != y.tobytes() and \
                not np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"):
            return False
    return True


def known(c):
    """Why case ``c`` disagrees, if that was read and understood (:data:`KNOWN`)."""
    return KNOWN.get(c.id)


def judge(c, s, m):
    """What is wrong with case ``c``'s stock (``s``) and minigpu (``m``) outcomes, if anything."""
    bug = c.label != "clean"
    notes = []
    if not bug and m["error"]:
        notes.append("FALSE ALARM")
    if bug and not m["error"]:
        notes.append("missed")
    if bool(s["error"]) != bool(m["error"]) and not notes:
        notes.append("stock silent" if m["error"] else "stock reports, minigpu not")
    if not bug and not s["error"] and not m["error"] and \
            not equal(s["outputs"], m["outputs"], c.rtol):
        notes.append("RESULT DIFFERS")
    return notes


def row(name, mine, stock, mg):
    """Print one line of the table: ``mine``'s counts, precision and recall."""
    bugs = sum(c.label != "clean" for c in mine)
    compared = [c for c in mine if c.label == "clean" and not stock[c.id]["error"]
                and not mg[c.id]["error"]]
    same = sum(equal(stock[c.id]["outputs"], mg[c.id]["outputs"], c.rtol) for c in compared)
    cols = []
    for run in (stock, mg):
        reported = [c for c in mine if run[c.id]["error"]]
        tp = sum(c.label != "clean" for c in reported)
        cols.append(f"{len(reported):>8d} {ratio(tp, len(reported)):>5s} {ratio(tp, bugs):>5s}")
    print(f"{name:27s} {len(mine):>7d} {bugs:>5d} {same:>4d}/{len(compared):<4d} "
          f"{cols[0]:>25s} {cols[1]:>27s}")


def ratio(num, den):
    return f"{num / den:.2f}" if den else "  - "


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="only the cases whose id contains one of these")
    p.add_argument("--worker", choices=["stock", "minigpu"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--verbose", action="store_true", help="print every case's verdicts")
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.out, args.names)

    sys.path.insert(0, str(HERE))
    from corpus import SOURCES, load
    cases = [c for c in load() if not args.names or any(n in c.id for n in args.names)]
    stock, stock_wall, _ = run_worker("stock", args.names)
    mg, mg_wall, summary = run_worker("minigpu", args.names)
    print(f"outside kernel corpus: {len(cases)} kernels from {len(SOURCES)} sources "
          f"(stock {stock_wall:.0f} s, minigpu {mg_wall:.0f} s)")
    print(f"{'source':27s} {'kernels':>7s} {'bugs':>5s} {'equal':>9s} "
          f"{'stock: reported  P     R':>25s} {'minigpu: reported  P     R':>27s}")
    for source in SOURCES:
        if any(c.source == source for c in cases):
            row(source, [c for c in cases if c.source == source], stock, mg)
    row("all", cases, stock, mg)
    disagreements, failing = [], []
    for c in cases:
        s, m = stock[c.id], mg[c.id]
        notes = judge(c, s, m)
        if notes:
            disagreements.append((c, notes, s, m))
            if known(c) is None and ("FALSE ALARM" in notes or "RESULT DIFFERS" in notes):
                failing.append(c.id)
        if args.verbose:
            print(f"  {c.id:55s} {c.label:8s} stock: {s['error'] or 'ok'}\n"
                  f"  {'':55s} {'':8s} minigpu: {m['error'] or 'ok'} ({m['seconds']:.2f} s)")
    print("(bugs: cases the source labels buggy; equal: clean cases both runs completed, "
          "results equal; P, R: precision and recall of the reported bugs against the labels)")
    caught = [(c, m) for c, notes, s, m in disagreements if notes == ["stock silent"]]
    print(f"\nlabelled bugs minigpu reports and the stock simulator runs silently: {len(caught)}")
    for c, m in caught:
        print(f"  {c.id} [{c.label}]: {m['error'][:90]}")
    disagreements = [d for d in disagreements if d[1] != ["stock silent"]]
    print(f"\ndisagreements (with the label, or in results): {len(disagreements)}")
    for c, notes, s, m in disagreements:
        print(f"  {c.id} [{c.label}] {', '.join(notes)}  ({c.origin})")
        print(f"      stock:   {s['error'] or 'completed'}")
        print(f"      minigpu: {m['error'] or 'completed'}")
        if known(c) is not None:
            print(f"      known: {known(c)}")
    if summary:
        print("\n" + summary)
    print(f"\n{len(failing)} unexplained false alarms or result differences")
    for name in failing:
        print(f"  {name}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
