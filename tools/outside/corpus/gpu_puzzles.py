"""A learner's solutions to Sasha Rush's GPU-Puzzles, as published in a public fork.

Source: https://github.com/rm-wu/GPU-Puzzles (commit 01edfcc7e106bdd4a2386d4d16560c3686d7aca8,
``solutions/puzzle_{05,10,11,12,13,14}.py``), MIT License, Copyright (c) 2022 Sasha Rush. The
puzzles' style is kept: a factory receives the ``cuda`` module and returns the kernel, launched
with the puzzle's own sizes (``lib.CudaProblem``'s blocks, threads and inputs; its drawing and
checking are left out). The fork presents each solution as solved (the puzzles run on a GPU),
so the source labels it working (``clean``); two of the launches are labelled by our reading
instead, as their cases say: on a GPU one adds an unwritten element, the other races.
"""
import numba
import numpy as np
from numba import cuda

from . import case

P = "solutions/"


def launch(factory, blocks, threads, out, *args):
    cuda.jit(factory(cuda))[blocks, threads](out, *args)
    return out


def broadcast_test(cuda):
    def call(out, a, b, size) -> None:
        local_i = cuda.threadIdx.x
        local_j = cuda.threadIdx.y
        if local_i < size and local_j < size:
            out[local_i, local_j] = a[local_i, 0] + b[0, local_j]
        return
    return call


@case(P + "puzzle_05.py", "clean")
def puzzle05_broadcast():
    a, b = np.arange(2).reshape(2, 1), np.arange(2).reshape(1, 2)
    return launch(broadcast_test, (1, 1), (3, 3), np.zeros((2, 2)), a, b, 2)


TPB = 8


def dot_test(cuda):
    def call(out, a, b, size) -> None:
        shared = cuda.shared.array(TPB, numba.float32)
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        local_i = cuda.threadIdx.x
        if i < size:
            shared[local_i] = a[i] * b[i]
            cuda.syncthreads()
        if i > 0:
            return
        acc = 0
        for idx in range(size):
            acc += shared[idx]
        out[0] = acc
    return call


@case(P + "puzzle_10.py", "clean")
def puzzle10_dot():
    return launch(dot_test, (1, 1), (TPB, 1), np.zeros(1), np.arange(TPB), np.arange(TPB), TPB)


MAX_CONV = 4
TPB_MAX_CONV = TPB + MAX_CONV - 1


def conv_test(cuda):
    def call(out, a, b, a_size, b_size) -> None:
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        local_i = cuda.threadIdx.x
        a_shared = cuda.shared.array(TPB_MAX_CONV, numba.float32)
        b_shared = cuda.shared.array(MAX_CONV, numba.float32)
        if i < a_size:
            a_shared[local_i] = a[i]
        if local_i < b_size:
            b_shared[local_i] = b[local_i]
        elif local_i < 2 * b_size - 1 and TPB + (i - b_size) < a_size:
            a_shared[TPB + (local_i - b_size)] = a[TPB + (i - b_size)]
        cuda.syncthreads()
        acc = 0.0
        if i < a_size:
            for j in range(b_size):
                if i + j < a_size:
                    acc += a_shared[local_i + j] * b_shared[j]
            out[i] = acc
    return call


@case(P + "puzzle_11.py (test 1: one block)", "clean")
def puzzle11_conv_one_block():
    return launch(conv_test, (1, 1), (TPB, 1), np.zeros(6), np.arange(6), np.arange(3), 6, 3)


@case(P + "puzzle_11.py (test 2: two blocks)", "clean")
def puzzle11_conv_two_blocks():
    return launch(conv_test, (2, 1), (TPB, 1), np.zeros(15), np.arange(15), np.arange(4), 15, 4)


def sum_test(cuda):
    def call(out, a, size: int) -> None:
        cache = cuda.shared.array(TPB, numba.float32)
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        local_i = cuda.threadIdx.x
        if i < size:
            cache[local_i] = a[i]
        else:
            return
        cuda.syncthreads()
        step = 1
        while step < TPB:
            if local_i % (2 * step) == 0:
                if local_i + step < TPB:
                    cache[local_i] = cache[local_i] + cache[local_i + step]
                step *= 2
            else:
                return
            cuda.syncthreads()
        if local_i == 0:
            out[cuda.blockIdx.x] = cache[0]
    return call


@case(P + "puzzle_12.py (Sum (Simple))", "clean")
def puzzle12_sum_simple():
    return launch(sum_test, (1, 1), (TPB, 1), np.zeros(1), np.arange(8), 8)


@case(P + "puzzle_12.py (Sum (Full))", "uninit")
def puzzle12_sum_full():
    """15 elements in blocks of 8: the second block's thread 7 has no element and returns,
    leaving ``cache[7]`` unwritten, and thread 6 adds it in (``local_i + step < TPB`` tests the
    block size, not the array's): on a GPU whatever the shared memory held."""
    return launch(sum_test, (2, 1), (TPB, 1), np.zeros(2), np.arange(15), 15)


def axis_sum_test(cuda):
    def call(out, a, size: int) -> None:
        cache = cuda.shared.array(TPB, numba.float32)
        local_i = cuda.threadIdx.x
        batch = cuda.blockIdx.y
        if local_i < size:
            cache[local_i] = a[batch, local_i]
        cuda.syncthreads()
        step = 1
        while step < TPB:
            if local_i % (2 * step) == 0:
                if local_i + step < size:
                    cache[local_i] = cache[local_i] + cache[local_i + step]
            else:
                return
            cuda.syncthreads()
            step *= 2
        out[batch, 0] = cache[local_i]
    return call


@case(P + "puzzle_13.py", "clean")
def puzzle13_axis_sum():
    inp = np.arange(4 * 6).reshape((4, 6))
    return launch(axis_sum_test, (1, 4), (TPB, 1), np.zeros((4, 1)), inp, 6)


TPB_MM = 3


def mm_oneblock_test(cuda):
    def call(out, a, b, size: int) -> None:
        a_shared = cuda.shared.array((TPB_MM, TPB_MM), numba.float32)
        b_shared = cuda.shared.array((TPB_MM, TPB_MM), numba.float32)
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        j = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        local_i = cuda.threadIdx.x
        local_j = cuda.threadIdx.y
        acc = 0
        for tile_offset in range(0, size, TPB_MM):
            if i < size and local_j + tile_offset < size:
                a_shared[local_i, local_j] = a[i, local_j + tile_offset]
            if j < size and local_i + tile_offset < size:
                b_shared[local_i, local_j] = b[local_i + tile_offset, j]
            cuda.syncthreads()
            for c in range(min(TPB_MM, size - tile_offset)):
                acc += (a_shared[local_i, c] * b_shared[c, local_j])
        if i < size and j < size:
            out[i, j] = acc
        return
    return call


def _square(size):
    m = np.arange(size * size).reshape((size, size))
    return m, m.T.copy()


@case(P + "puzzle_14.py (Matmul (Simple))", "clean")
def puzzle14_matmul_one_tile():
    a, b = _square(2)
    return launch(mm_oneblock_test, (1, 1), (TPB_MM, TPB_MM), np.zeros((2, 2)), a, b, 2)


@case(P + "puzzle_14.py (Matmul (Full))", "race")
def puzzle14_matmul_tiles():
    """Several tiles: no barrier after a tile's products, so a thread that is done with tile
    ``t`` overwrites ``a_shared``/``b_shared`` with tile ``t + 1`` while others still read
    tile ``t``."""
    a, b = _square(8)
    return launch(mm_oneblock_test, (3, 3), (TPB_MM, TPB_MM), np.zeros((8, 8)), a, b, 8)
