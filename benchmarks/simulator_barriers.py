"""Barrier cost in the CUDA simulator: stock numba-cuda versus minigpu's patched one.

The kernel is barrier-bound on purpose: 4 blocks x 256 threads, 16 ``syncthreads()`` each,
with a little shared-memory traffic between them (double-buffered, so it is race-free). Both
simulators run in this one process: ``simulator.uninstall()`` restores the stock one (busy-poll
barriers, fresh OS threads per block), ``simulator.install()`` brings back the patched one
(every simulated thread a pooled greenlet run in turn, barriers that switch to the next one:
its first launch also pays for creating the pool).

    python benchmarks/simulator_barriers.py [--repeat 3]
"""
import os

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba is imported

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from numba import cuda, float32  # noqa: E402

from minigpu import simulator  # noqa: E402

BLOCKS, THREADS, BARRIERS = 4, 256, 16


@cuda.jit
def barrier_heavy(out):
    """Each thread: BARRIERS rounds of write own slot, syncthreads, read the neighbour's."""
    buf = cuda.shared.array((2, THREADS), float32)
    t = cuda.threadIdx.x
    acc = float32(0)
    for i in range(BARRIERS):
        buf[i % 2, t] = t + i
        cuda.syncthreads()
        acc += buf[i % 2, (t + 1) % THREADS]
    out[cuda.blockIdx.x * THREADS + t] = acc


def expected():
    t = (np.arange(THREADS) + 1) % THREADS
    return np.tile(BARRIERS * t + BARRIERS * (BARRIERS - 1) // 2, BLOCKS).astype(np.float32)


def times(repeat):
    """Seconds per launch, ``repeat`` launches (the first one is cold)."""
    out_times = []
    for _ in range(repeat):
        out = np.zeros(BLOCKS * THREADS, np.float32)
        start = time.perf_counter()
        barrier_heavy[BLOCKS, THREADS](out)
        out_times.append(time.perf_counter() - start)
        np.testing.assert_array_equal(out, expected())
    return out_times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="launches per simulator")
    args = parser.parse_args()

    simulator.uninstall()
    stock = times(args.repeat)
    if not simulator.install():
        raise SystemExit("simulator.install() declined (see the warning above)")
    patched = times(args.repeat)
    print(f"{BLOCKS} blocks x {THREADS} threads x {BARRIERS} syncthreads, {args.repeat} launches each")
    print("                    first launch   best launch")
    print(f"stock simulator   : {stock[0]:9.3f} s   {min(stock):9.3f} s")
    print(f"patched simulator : {patched[0]:9.3f} s   {min(patched):9.3f} s"
          "   (first launch also creates the pool of simulated threads)")
    print(f"speed-up          : {stock[0] / patched[0]:9.2f}x   {min(stock) / min(patched):9.2f}x")


if __name__ == "__main__":
    main()
