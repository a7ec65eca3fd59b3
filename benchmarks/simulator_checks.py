"""What the sanitizer costs: checks on (default) vs ``MINIGPU_SIM_CHECKS=0``.

Two measurements:

- **kernel** (default): the barrier-heavy kernel of ``simulator_barriers.py`` (4 blocks x 256
  threads, 16 ``syncthreads()`` each, shared-memory traffic between them) and a plain
  elementwise kernel (1 load + 1 store per thread, 64 blocks x 64 threads), in this process,
  with ``minigpu.simulator.config.CHECKS`` switched between launches.
- **suite** (``--suite``): the whole test suite (``pytest -n 2 -q``) twice, in subprocesses
  with ``MINIGPU_SIM_CHECKS=1`` and ``=0``. Takes minutes.

    python benchmarks/simulator_checks.py [--repeat 3] [--suite]
"""
import os

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba is imported

import argparse  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

import minigpu  # noqa: E402,F401  (installs the simulator)
from minigpu.simulator import config  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from simulator_barriers import barrier_heavy, expected, BLOCKS, THREADS  # noqa: E402


@cuda.jit
def scale(out, x):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2 * x[i]


def best(launch, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        launch()
        times.append(time.perf_counter() - start)
    return min(times)


def kernels(repeat):
    out = np.zeros(BLOCKS * THREADS, np.float32)
    x = cuda.to_device(np.ones(64 * 64, np.float32))
    y = cuda.device_array(64 * 64, np.float32)
    rows = []
    for checks in (True, False):
        config.CHECKS = checks
        barrier_heavy[BLOCKS, THREADS](out)  # fill the pool of simulated threads
        np.testing.assert_array_equal(out, expected())
        rows.append((checks, best(lambda: barrier_heavy[BLOCKS, THREADS](out), repeat),
                     best(lambda: scale[64, 64](y, x), repeat)))
    config.CHECKS = True
    print(f"best of {repeat} launches        barrier-heavy ({BLOCKS}x{THREADS}, 16 barriers)"
          f"   elementwise (64x64)")
    for checks, heavy, elem in rows:
        print(f"checks {'on ' if checks else 'off'}                   {heavy:9.3f} s"
              f"                          {elem:9.3f} s")
    print(f"cost of the checks          {rows[0][1] / rows[1][1]:9.2f}x"
          f"                          {rows[0][2] / rows[1][2]:9.2f}x")


def suite():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for checks in ("1", "0"):
        env = {**os.environ, "MINIGPU_SIM_CHECKS": checks}
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-q", "-p",
                               "no:cacheprovider"], cwd=root, env=env, capture_output=True,
                              text=True)
        last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr
        print(f"suite, checks {'on ' if checks == '1' else 'off'}: "
              f"{time.perf_counter() - start:7.1f} s wall   ({last})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--suite", action="store_true", help="also time the whole test suite")
    args = parser.parse_args()
    kernels(args.repeat)
    if args.suite:
        suite()


if __name__ == "__main__":
    main()
