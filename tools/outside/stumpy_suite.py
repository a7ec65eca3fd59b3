"""A real library as the second judge of minigpu's simulator: stumpy's GPU tests.

stumpy (matrix profiles) runs its GPU tests in CI on Numba's CUDA simulator, with
``NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1``. This script takes the test files of the
installed stumpy release from its source distribution (downloaded once with pip into a cache
folder), runs every ``tests/test_gpu_*.py`` with ``import minigpu`` first (sanitizer on), then
stock the tests that failed, and prints the tests that pass stock and fail with minigpu. It
must print ``0 broken``; it exits 1 otherwise. ``--compare`` runs every test stock as well
(minutes more) and prints both runs' counts and test time.

    python tools/outside/stumpy_suite.py [-n 2] [--compare] [--tests DIR] [test_gpu_stump.py ...]

Needs the ``outside`` extra (stumpy, pandas). ``--tests`` uses an already extracted
``tests`` folder of stumpy's sdist instead of downloading it.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

from common import counts, listing, run


def stumpy_tests(cache):
    """The ``tests`` folder of the installed stumpy's sdist, downloaded once into ``cache``."""
    v = version("stumpy")
    dest = Path(cache) / f"stumpy-{v}"
    if (dest / "tests").is_dir():
        return dest / "tests"
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", f"stumpy=={v}", "--no-binary",
                        ":all:", "--no-deps", "-q", "-d", tmp], check=True)
        sdist = next(Path(tmp).glob("stumpy-*.tar.gz"))
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/tests/" in m.name and m.isfile()]
            for m in members:
                m.name = m.name.split("/", 1)[1]  # drop the stumpy-<v>/ prefix
            dest.mkdir(parents=True, exist_ok=True)
            tar.extractall(dest, members=members, filter="data")
    return dest / "tests"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", help="test files (default: every tests/test_gpu_*.py)")
    p.add_argument("-n", type=int, default=2, help="pytest-xdist workers (default 2)")
    p.add_argument("--tests", help="stumpy's extracted tests folder")
    p.add_argument("--compare", action="store_true", help="run every test stock too")
    p.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "minigpu-outside"))
    args = p.parse_args()
    tdir = Path(args.tests) if args.tests else stumpy_tests(args.cache)
    files = args.files or sorted(f.name for f in tdir.glob("test_gpu_*.py"))
    env = {"NUMBA_DISABLE_JIT": "1"}
    print(f"stumpy {version('stumpy')} GPU tests ({len(files)} files): {tdir}")
    mg, mg_s, _, mg_wall = run("minigpu", "minigpu", files, args.n, tdir, env)
    print(f"  with import minigpu  {counts(mg):40s} wall {mg_wall:5.0f} s, "
          f"test time {sum(mg_s.values()):6.1f} s")
    failed = sorted(t for t, o in mg.items() if o == "failed")
    targets = files if args.compare else failed
    stock, stock_s = {}, {}
    if targets:
        stock, stock_s, _, stock_wall = run("stock", "stock", targets, args.n, tdir, env)
        what = "" if args.compare else f" (the {len(failed)} failing with minigpu)"
        print(f"  stock simulator{what} {counts(stock):40s} wall {stock_wall:5.0f} s, "
              f"test time {sum(stock_s.values()):6.1f} s")
    both = [t for t in stock if stock[t] == "passed" and mg.get(t) == "passed"]
    if both:
        ratio = sum(stock_s[t] for t in both) / max(sum(mg_s[t] for t in both), 1e-9)
        print(f"  speed (tests passing in both): {ratio:.2f}x stock")
    broken = sorted(t for t, o in mg.items() if o == "failed" and stock.get(t) == "passed")
    print()
    listing("broken (pass stock, fail with minigpu)", broken)
    print(f"{len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
