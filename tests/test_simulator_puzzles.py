"""Course-style kernels run unchanged: solved ones as on a GPU, buggy ones flagged rightly.

Written by us in the style of GPU-Puzzles (a kernel factory receives the ``cuda`` module and
returns the kernel, launched as ``cuda.jit(factory(cuda))[blocks, threads](out, *inputs,
*sizes)``; sizes arrive as Python ints). Public solved forks were run under minigpu while
writing these (issue 29): the solutions ran and matched their specs, and the one with a real
bug (a block sum whose early-returning threads leave a shared slot unwritten that another
thread then adds in) was reported as an uninitialised read, which the stock simulator's
zero-filled shared memory hides.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402

import minigpu  # noqa: E402,F401  (installs the simulator)
from minigpu.cuda import RaceError, UninitializedReadError  # noqa: E402
from minigpu.simulator import config  # noqa: E402

pytestmark = [pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="tests the simulator"),
              pytest.mark.skipif(not config.CHECKS, reason="MINIGPU_SIM_CHECKS=0")]

TPB = 8


def run(factory, blocks, threads, out, *inputs):
    cuda.jit(factory(cuda))[blocks, threads](out, *inputs)
    return out


# ----------------------------------------------------------------------------- solved


def guarded_add_ten(cuda):
    def call(out, a, size):
        local_i = cuda.threadIdx.x
        if local_i < size:
            out[local_i] = a[local_i] + 10
    return call


def outer_sum(cuda):
    def call(out, a, b, size):
        i, j = cuda.threadIdx.x, cuda.threadIdx.y
        if i < size and j < size:
            out[i, j] = a[i, 0] + b[0, j]
    return call


def window_of_three(cuda):
    def call(out, a, size):
        shared = cuda.shared.array(TPB, numba.float32)
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        local_i = cuda.threadIdx.x
        if i < size:
            shared[local_i] = a[i]
        cuda.syncthreads()
        if i < size:
            acc = shared[local_i]
            if local_i >= 1:
                acc += shared[local_i - 1]
            if local_i >= 2:
                acc += shared[local_i - 2]
            out[i] = acc
    return call


def dot_everyone_writes(cuda):
    def call(out, a, b, size):
        shared = cuda.shared.array(TPB, numba.float32)
        local_i = cuda.threadIdx.x
        shared[local_i] = a[local_i] * b[local_i] if local_i < size else 0
        cuda.syncthreads()
        step = TPB // 2
        while step > 0:
            if local_i < step:
                shared[local_i] += shared[local_i + step]
            cuda.syncthreads()
            step //= 2
        out[0] = shared[0]          # every thread stores the same total
    return call


def scale_by_last(cuda):
    def call(out, a, size):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        if i < size:
            out[i] = a[i] / a[-1]   # the last element, on purpose
    return call


def tiled_matmul(cuda, barrier_after_compute=True):
    def call(out, a, b, size):
        a_tile = cuda.shared.array((TPB, TPB), numba.float32)
        b_tile = cuda.shared.array((TPB, TPB), numba.float32)
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        li, lj = cuda.threadIdx.x, cuda.threadIdx.y
        acc = 0.0
        for k0 in range(0, size, TPB):
            a_tile[li, lj] = a[i, k0 + lj] if i < size and k0 + lj < size else 0
            b_tile[li, lj] = b[k0 + li, j] if j < size and k0 + li < size else 0
            cuda.syncthreads()
            for k in range(TPB):
                acc += a_tile[li, k] * b_tile[k, lj]
            if barrier_after_compute:
                cuda.syncthreads()
        if i < size and j < size:
            out[i, j] = acc
    return call


def test_solved_puzzles_run_as_on_a_gpu():
    a = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(run(guarded_add_ten, 1, 8, np.zeros(6), a, 6), a + 10)

    col, row = np.arange(3.0).reshape(3, 1), np.arange(3.0).reshape(1, 3)
    np.testing.assert_array_equal(run(outer_sum, 1, (4, 4), np.zeros((3, 3)), col, row, 3),
                                  col + row)

    a = np.arange(13, dtype=np.float32)
    expect = [a[max(i - 2, i - i % TPB):i + 1].sum() for i in range(13)]
    np.testing.assert_array_equal(run(window_of_three, 2, TPB, np.zeros(13), a, 13), expect)

    a = np.arange(TPB, dtype=np.float32)
    assert run(dot_everyone_writes, 1, TPB, np.zeros(1), a, a, 6)[0] == (a[:6] @ a[:6])

    a = np.arange(1, 11, dtype=np.float64)
    np.testing.assert_allclose(run(scale_by_last, 2, TPB, np.zeros(10), a, 10), a / 10)

    a = np.arange(100, dtype=np.float32).reshape(10, 10) / 10
    np.testing.assert_allclose(run(tiled_matmul, (2, 2), (TPB, TPB), np.zeros((10, 10)), a, a,
                                   10), a @ a, rtol=1e-5)


# ----------------------------------------------------------------------------- buggy


def dot_no_barrier(cuda):
    def call(out, a, b, size):
        shared = cuda.shared.array(TPB, numba.float32)
        local_i = cuda.threadIdx.x
        if local_i < size:
            shared[local_i] = a[local_i] * b[local_i]
        if local_i == 0:            # forgot cuda.syncthreads(): reads the others' slots early
            acc = 0.0
            for k in range(size):
                acc += shared[k]
            out[0] = acc
    return call


def block_sum_early_exit(cuda):
    def call(out, a, size):
        cache = cuda.shared.array(TPB, numba.float32)
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        local_i = cuda.threadIdx.x
        if i < size:
            cache[local_i] = a[i]
        else:
            return                  # this slot stays unwritten
        cuda.syncthreads()
        step = 1
        while step < TPB:
            if local_i % (2 * step) == 0:
                if local_i + step < TPB:
                    cache[local_i] = cache[local_i] + cache[local_i + step]
            step *= 2
            cuda.syncthreads()
        if local_i == 0:
            out[cuda.blockIdx.x] = cache[0]
    return call


def test_buggy_puzzles_are_flagged_with_the_right_error():
    a = np.arange(TPB, dtype=np.float32)
    with pytest.raises(RaceError, match="shared array 'shared'"):
        run(dot_no_barrier, 1, TPB, np.zeros(1), a, a, TPB)
    with pytest.raises(UninitializedReadError, match="shared array 'cache' at index 7"):
        run(block_sum_early_exit, 2, TPB, np.zeros(2), np.arange(15, dtype=np.float32), 15)
    a = np.arange(100, dtype=np.float32).reshape(10, 10)
    with pytest.raises(RaceError, match="race on shared array '[ab]_tile'"):
        run(lambda cuda: tiled_matmul(cuda, barrier_after_compute=False), (2, 2), (TPB, TPB),
            np.zeros((10, 10)), a, a, 10)
