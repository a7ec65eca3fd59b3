"""How the simulator picks the register-tiled GEMM's tiles (``backends/cuda/matmul.py``,
``simulator_tiles``), measured: the checked simulator's time of one launch for 6 shapes x 6
tile shapes, the least-squares fit of its cost per block, per thread, per thread and K slice
and per element access (the constants of ``SIMULATOR_COST``), then, same run, each shape with
the tiles ``simulator_tiles`` chooses against the fixed 16 x 16 tiles used before.

    python benchmarks/simulator_matmul_tiles.py            # about 3 minutes on 2 cores

Every time is one launch of the same kernel, checks on; the ratio is what to read (the
machine's load scales both sides).
"""
from __future__ import annotations

import importlib
import os
import sys
import time

if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":  # the simulator is what is measured
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    os.execv(sys.executable, [sys.executable, *sys.argv])

import numpy as np  # noqa: E402

import minigpu as mg  # noqa: E402
from minigpu.backends import contract  # noqa: E402

MM = importlib.import_module("minigpu.backends.cuda.matmul")
cuda = mg.backends.get("cuda")

SHAPES = [(2, 256, 64), (256, 64, 2), (64, 64, 64), (6, 256, 32), (2, 1, 256), (32, 64, 27)]
"""(M, N, K): layers of the demos at their smoke sizes (batch 2 to 6), a weight gradient
(K = batch), a square product, an im2col convolution."""
TILES = [(16, 16, 4, 2, 2), (2, 64, 16, 2, 4), (32, 32, 8, 4, 4), (8, 32, 8, 2, 4),
         (64, 16, 8, 4, 2), (2, 8, 8, 2, 1)]
"""(BM, BN, BK, TM, TN); the first is the 16 x 16 default of the lesson's register-tiled
variant (``SIMULATOR_DEFAULT``)."""


def launch_seconds(M, N, K, tiles, rng):
    a = rng.random((1, M, K), dtype=np.float32)
    b = rng.random((1, K, N), dtype=np.float32)
    va = contract.dense(cuda.from_numpy(a), a.shape)
    vb = contract.dense(cuda.from_numpy(b), b.shape)
    start = time.perf_counter()
    c = MM.matmul_register_tiled(va, vb, *tiles)
    cuda.synchronize()
    seconds = time.perf_counter() - start
    np.testing.assert_allclose(cuda.to_numpy(contract.dense(c, (1, M, N))), a @ b, rtol=1e-4)
    return seconds


def main():
    rng = np.random.default_rng(0)
    print(f"{'shape (M, N, K)':18} {'tiles (BM, BN, BK, TM, TN)':28} {'seconds':>8} "
          f"{'model':>8}")
    rows, seconds = [], []
    for shape in SHAPES:
        for tiles in TILES:
            t = launch_seconds(*shape, tiles, rng)
            rows.append(list(MM.simulator_counts(*shape, 1, *tiles).values()))
            seconds.append(t)
            model = MM.simulator_cost(*shape, 1, *tiles)
            print(f"{str(shape):18} {str(tiles):28} {t:8.3f} {model:8.3f}", flush=True)
    fit, *_ = np.linalg.lstsq(np.array(rows, float), np.array(seconds), rcond=None)
    print("\nfit of this run (seconds): " + ", ".join(
        f"{name} {value:.2e}" for name, value in zip(MM.SIMULATOR_COST, fit)))
    print("SIMULATOR_COST (matmul.py): " + ", ".join(
        f"{name} {value:.2e}" for name, value in MM.SIMULATOR_COST.items()))

    print(f"\n{'shape (M, N, K)':18} {'chosen tiles':22} {'chosen s':>9} {'16x16 s':>9} "
          f"{'speedup':>8}")
    for shape in SHAPES:
        chosen = MM.simulator_tiles(*shape)
        t_chosen = launch_seconds(*shape, chosen, rng)
        t_default = launch_seconds(*shape, TILES[0], rng)
        print(f"{str(shape):18} {str(chosen):22} {t_chosen:9.3f} {t_default:9.3f} "
              f"{t_default / t_chosen:7.1f}x", flush=True)


if __name__ == "__main__":
    main()
