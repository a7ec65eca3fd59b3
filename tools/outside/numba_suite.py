"""numba-cuda's own test suite as the judge of minigpu's simulator.

``import minigpu`` upgrades Numba's CUDA simulator for every kernel in the process, so it must
run every correct kernel as the stock simulator does. This script runs the test suite that
ships inside the installed numba-cuda wheel (``site-packages/numba_cuda/numba/cuda/tests``)
twice under ``NUMBA_ENABLE_CUDASIM=1`` — stock, and with ``import minigpu`` first (sanitizer
on) — and prints every test that passes stock and fails with minigpu, minus
:data:`TRUE_FINDINGS` (tests with a real bug that the sanitizer reports). It must print
``0 broken``; it exits 1 otherwise.

It then runs the tests the stock simulator must skip for a feature minigpu adds (warp
intrinsics, ``syncwarp``, kernels that import ``cuda`` inside a function, IEEE math; see
``outside_plugin.UNSKIP_REASONS``) with those skips lifted, stock and with minigpu, and reports
the ones "passing only with minigpu". Last, the speed: the kernel-heavy files'
(:data:`KERNEL_HEAVY`) test time, stock over minigpu with checks on.

    python tools/outside/numba_suite.py [-n 2] [--quick]

Needs the ``outside`` extra (``pip install -e ".[test,outside]"``). ``--quick`` skips the
unskipped runs.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from common import counts, listing, run

TRUE_FINDINGS = {
    "cudapy/test_sm_creation.py::TestSharedMemoryCreation::test_global_constants":
        "stores sa[i] of a shared array nothing ever wrote (A[i] = sa[i]): an uninitialised read",
    "cudapy/test_sm_creation.py::TestSharedMemoryCreation::test_global_build_tuple":
        "stores sa[i, j] of a shared array nothing ever wrote: an uninitialised read",
    "cudapy/test_sm_creation.py::TestSharedMemoryCreation::test_global_constant_tuple":
        "stores sa[i, j] of a shared array nothing ever wrote: an uninitialised read",
    "cudapy/test_freevar.py::TestFreeVar::test_freevar":
        "stores sdata[i] of a shared array nothing ever wrote (A[i] = sdata[i])",
    "cudapy/test_sm.py::TestSharedMemoryIssue::test_issue_2393":
        "stores s_initialcost[0] + s_features[...] to global memory, both read from shared "
        "arrays nothing wrote (the issue's misaligned-address reproducer; its 48 one-thread "
        "blocks also all store to d_block_costs[0])",
    "cudapy/test_exception.py::TestException::test_raise_causing_warp_diverge":
        "threads 13-31 update y[i] += x[i] // y[i] for every i while the others read y[i]: "
        "an unordered read and write of one global element (a race)",
}
"""Tests that fail with minigpu because they are wrong: what the bug in each one is."""

TOO_LARGE = ("doc_examples/test_laplace.py::TestLaplace::test_ex_laplace",
             "doc_examples/test_montecarlo.py::TestMonteCarlo::test_ex_montecarlo",
             "doc_examples/test_random.py::TestRandom::test_ex_3d_grid",
             "doc_examples/test_vecadd.py::TestVecAdd::test_ex_vecadd")
"""Documentation examples the stock simulator skips that are sized for a GPU (a million
threads, or 10,000 grid-wide barriers of 1,001 threads): minutes each in a simulator, so the
unskipped runs leave them out (``test_simulator_fidelity.py`` runs the Laplace example small)."""

KERNEL_HEAVY = ("cudapy/test_atomics.py", "cudapy/test_sync.py", "cudapy/test_sm.py",
                "cudapy/test_laplace.py", "cudapy/test_matmul.py", "cudapy/test_random.py",
                "cudapy/test_complex.py", "cudapy/test_math.py", "cudapy/test_ufuncs.py",
                "cudapy/test_constmem.py", "cudapy/test_cooperative_groups.py",
                "cudapy/test_array_methods.py", "cudapy/test_blackscholes.py",
                "cudapy/test_reduction.py")
"""The files whose tests run many threads and kernel launches (the speed comparison)."""

def tests_dir():
    spec = importlib.util.find_spec("numba_cuda")
    if spec is None:
        sys.exit("numba-cuda is not installed")
    return Path(spec.origin).parent / "numba" / "cuda" / "tests"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=2, help="pytest-xdist workers (default 2)")
    p.add_argument("--quick", action="store_true", help="skip the unskipped runs")
    p.add_argument("--logs", help="folder for the pytest logs of each run")
    args = p.parse_args()
    tdir = tests_dir()
    log = (lambda name: str(Path(args.logs) / f"{name}.log")) if args.logs else (lambda n: None)
    if args.logs:
        Path(args.logs).mkdir(parents=True, exist_ok=True)
    print(f"numba-cuda's test suite: {tdir}")

    stock, stock_s, stock_line, stock_wall = run("stock", "stock", [str(tdir)], args.n, tdir,
                                                 log=log("stock"))
    print(f"  stock simulator      {counts(stock):45s} {stock_wall:6.0f} s   ({stock_line})")
    mg, mg_s, mg_line, mg_wall = run("minigpu", "minigpu", [str(tdir)], args.n, tdir,
                                     log=log("minigpu"))
    print(f"  with import minigpu  {counts(mg):45s} {mg_wall:6.0f} s   ({mg_line})")

    candidates = sorted(t for t, o in mg.items() if o == "failed" and stock.get(t) == "passed")
    flaky = []
    if candidates:  # a second try, one at a time: a test that passes now, or that fails stock
        #             too now (a timeout on a loaded machine), is flaky, not broken
        again, *_ = run("rerun", "minigpu", [f"{tdir}/{t}" for t in candidates], 1, tdir,
                        log=log("rerun"))
        flaky = [t for t in candidates if again.get(t) == "passed"]
        still = [t for t in candidates if t not in flaky and t not in TRUE_FINDINGS]
        if still:
            stock_again, *_ = run("rerun stock", "stock", [f"{tdir}/{t}" for t in still], 1,
                                  tdir, log=log("rerun-stock"))
            flaky += [t for t in still if stock_again.get(t) != "passed"]
    broken = [t for t in candidates if t not in flaky and t not in TRUE_FINDINGS]
    found = [t for t in candidates if t in TRUE_FINDINGS]
    stale = sorted(set(TRUE_FINDINGS) - set(found))

    print()
    listing("true findings (pass stock, fail with minigpu, each a real bug)", found,
            TRUE_FINDINGS)
    for t in stale:
        print(f"  (listed but not failing now: {t})")
    if flaky:
        listing("flaky (failed once with minigpu; run again, passed, or failed stock too)",
                flaky)
    fixed = sorted(t for t, o in mg.items() if o == "passed" and stock.get(t) == "failed")
    if fixed:
        listing("fail stock, pass with minigpu", fixed)

    if not args.quick:
        env = {"MINIGPU_OUTSIDE_UNSKIP": "1"}
        mg_u, _, mg_u_line, mg_u_wall = run("minigpu, unskipped", "minigpu", [str(tdir)],
                                             args.n, tdir, env, log=log("minigpu-unskipped"),
                                             deselect=TOO_LARGE)
        st_u, _, st_u_line, st_u_wall = run("stock, unskipped", "stock", [str(tdir)], args.n,
                                            tdir, env, log=log("stock-unskipped"),
                                            deselect=TOO_LARGE)
        only = sorted(t for t, o in mg_u.items() if o == "passed" and st_u.get(t) != "passed")
        print(f"\ntests the stock simulator skips (a feature minigpu adds), skip lifted "
              f"({len(TOO_LARGE)} GPU-sized documentation examples left out):")
        print(f"  stock simulator      {counts(st_u):45s} {st_u_wall:6.0f} s")
        print(f"  with import minigpu  {counts(mg_u):45s} {mg_u_wall:6.0f} s")
        listing("passing only with minigpu", only)
        both = sorted(t for t, o in mg_u.items() if o == "passed" and st_u.get(t) == "passed")
        if both:
            print(f"passing with either once unskipped: {len(both)}")
        still = sorted(t for t, o in mg_u.items() if o == "failed")
        if still:
            listing("failing with minigpu once unskipped (not claimed)", still)

    heavy = [t for t in stock if t.split("::")[0] in KERNEL_HEAVY and stock[t] == "passed"
             and mg.get(t) == "passed"]
    t_stock = sum(stock_s[t] for t in heavy)
    t_mg = sum(mg_s[t] for t in heavy)
    print(f"\nspeed, kernel-heavy files ({len(heavy)} tests passing in both): stock "
          f"{t_stock:.1f} s, minigpu with checks {t_mg:.1f} s: "
          f"{t_stock / t_mg if t_mg else float('nan'):.2f}x")
    print()
    listing("broken (pass stock, fail with minigpu, not a listed true finding)", broken)
    print(f"{len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
