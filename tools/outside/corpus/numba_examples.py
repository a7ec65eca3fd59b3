"""Kernels of Numba's example collection, adapted: sizes made small.

Source: https://github.com/numba/numba-examples (commit c423f5419a459f5ab8874fda6d39bb5ea05d04b2),
BSD 2-Clause License, Copyright (c) 2017, Numba. Files:
``examples/density_estimation/histogram/gpu.py``,
``examples/finance/blackscholes/blackscholes_cuda.py``,
``legacy/cudajit/{matmul,matmul_smem,sum}.py``,
``legacy/laplace2d/laplace2d-numba-cuda-{smem,improve}.py``, ``legacy/cuda_dask.py``. Each is
presented as working (``clean``), except as noted at a case.
"""
import math

import numba
import numpy as np
from numba import cuda, f8, float32

from . import case


# ----------------------------------------------------------------------------- histogram

@numba.jit(nopython=True)
def compute_bin(x, n, xmin, xmax):
    if x == xmax:
        return n - 1
    bin = np.int32(n * (np.float64(x) - np.float64(xmin)) / (np.float64(xmax) - np.float64(xmin)))
    if bin < 0 or bin >= n:
        return None
    else:
        return bin


@cuda.jit
def histogram(x, xmin, xmax, histogram_out):
    nbins = histogram_out.shape[0]
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        bin_number = compute_bin(x[i], nbins, xmin, xmax)
        if bin_number >= 0 and bin_number < histogram_out.shape[0]:
            cuda.atomic.add(histogram_out, bin_number, 1)


@cuda.jit
def min_max(x, min_max_array):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    local_min = min_max_array[0]
    local_max = min_max_array[1]
    for i in range(start, x.shape[0], stride):
        element = x[i]
        local_min = min(element, local_min)
        local_max = max(element, local_max)
    cuda.atomic.min(min_max_array, 0, local_min)
    cuda.atomic.max(min_max_array, 1, local_max)


def _samples():
    return np.random.default_rng(5).normal(size=500).astype(np.float32)


@case("examples/density_estimation/histogram/gpu.py (min_max)", "clean")
def histogram_min_max():
    """Reads ``min_max_array[0]`` plainly while other threads update it with atomics: the
    plain load sees some value the atomics made, and the result is right whatever it sees."""
    x = _samples()
    mm = np.array([np.finfo(np.float32).max, np.finfo(np.float32).min], np.float32)
    min_max[4, 32](x, mm)
    return mm


@case("examples/density_estimation/histogram/gpu.py (histogram)", "clean")
def histogram_bins():
    x = _samples()
    out = np.zeros(10, np.int32)
    histogram[4, 32](x, np.float32(x.min()), np.float32(x.max()), out)
    return out


# ----------------------------------------------------------------------------- Black-Scholes

@cuda.jit(device=True)
def cnd_cuda(d):
    A1 = 0.31938153
    A2 = -0.356563782
    A3 = 1.781477937
    A4 = -1.821255978
    A5 = 1.330274429
    RSQRT2PI = 0.39894228040143267793994605993438
    K = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    ret_val = (RSQRT2PI * math.exp(-0.5 * d * d) *
               (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5))))))
    if d > 0:
        ret_val = 1.0 - ret_val
    return ret_val


@cuda.jit
def black_scholes_cuda_kernel(callResult, putResult, S, X, T, R, V):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= S.shape[0]:
        return
    sqrtT = math.sqrt(T[i])
    d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1 = cnd_cuda(d1)
    cndd2 = cnd_cuda(d2)
    expRT = math.exp((-1. * R) * T[i])
    callResult[i] = (S[i] * cndd1 - X[i] * expRT * cndd2)
    putResult[i] = (X[i] * expRT * (1.0 - cndd2) - S[i] * (1.0 - cndd1))


@case("examples/finance/blackscholes/blackscholes_cuda.py", "clean")
def blackscholes():
    rng = np.random.default_rng(6)
    n = 100
    S, X, T = rng.uniform(5, 30, n), rng.uniform(1, 100, n), rng.uniform(0.25, 10, n)
    call, put = cuda.device_array_like(S), cuda.device_array_like(S)
    black_scholes_cuda_kernel[(n + 63) // 64, 64](call, put, S, X, T, 0.02, 0.30)
    return call.copy_to_host(), put.copy_to_host()


# ----------------------------------------------------------------------------- matmul

TPB = 8
BPG = 3
N = TPB * BPG


@cuda.jit("(float32[:,:], float32[:,:], float32[:,:])")
def cu_square_matrix_mul(A, B, C):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y
    bw = cuda.blockDim.x
    bh = cuda.blockDim.y
    x = tx + bx * bw
    y = ty + by * bh
    if x >= N or y >= N:
        return
    C[y, x] = 0
    for i in range(N):
        C[y, x] += A[y, i] * B[i, x]


@cuda.jit("(float32[:,:], float32[:,:], float32[:,:])")
def cu_square_matrix_mul_smem(A, B, C):
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x = tx + cuda.blockIdx.x * cuda.blockDim.x
    y = ty + cuda.blockIdx.y * cuda.blockDim.y
    acc = 0.
    for i in range(BPG):
        if x < N and y < N:
            sA[ty, tx] = A[y, tx + i * TPB]
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        if x < N and y < N:
            for j in range(TPB):
                acc += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if x < N and y < N:
        C[y, x] = acc


def _matrices():
    rng = np.random.default_rng(7)
    return rng.random((N, N), dtype=np.float32), rng.random((N, N), dtype=np.float32)


@case("legacy/cudajit/matmul.py", "clean")
def matmul():
    A, B = _matrices()
    C = np.empty_like(A)
    cu_square_matrix_mul[(BPG, BPG), (TPB, TPB)](A, B, C)
    return C


@case("legacy/cudajit/matmul_smem.py", "clean")
def matmul_smem():
    A, B = _matrices()
    C = np.empty_like(A)
    cu_square_matrix_mul_smem[(BPG, BPG), (TPB, TPB)](A, B, C)
    return C


@cuda.jit("(f4[:], f4[:], f4[:])")
def cuda_sum(a, b, c):
    i = cuda.grid(1)
    c[i] = a[i] + b[i]


@case("legacy/cudajit/sum.py (kernel.configure)", "clean")
def configured_sum():
    rng = np.random.default_rng(8)
    a, b = rng.random(4 * 32, dtype=np.float32), rng.random(4 * 32, dtype=np.float32)
    c = np.empty_like(a)
    cuda_sum.configure((4, 1), (32, 1, 1))(a, b, c)
    return c


# ----------------------------------------------------------------------------- Laplace

@cuda.jit("(f8[:,:], f8[:,:], f8[:,:])")
def jacobi_relax_core_smem(A, Anew, error):
    smem = cuda.shared.array(shape=(32 + 2, 32 + 2), dtype=f8)
    n = A.shape[0]
    m = A.shape[1]
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    j = ty + cuda.blockIdx.y * cuda.blockDim.y
    i = tx + cuda.blockIdx.x * cuda.blockDim.x
    sy = ty + 1
    sx = tx + 1
    smem[sy, sx] = A[j, i]
    if tx == 0 and i >= 1:
        smem[sy, 0] = A[j, i - 1]
    if ty == 0 and j < m - 1:
        smem[0, sx] = A[j - 1, i]
    if tx == 31 and j >= 1:
        smem[sy, 33] = A[j, i + 1]
    if ty == 31 and j < n - 1:
        smem[33, sx] = A[j + 1, i]
    cuda.syncthreads()
    if j >= 1 and j < n - 1 and i >= 1 and i < m - 1:
        Anew[j, i] = 0.25 * (smem[sy, sx + 1] + smem[sy, sx - 1]
                             + smem[sy - 1, sx] + smem[sy + 1, sx])
        error[j, i] = Anew[j, i] - A[j, i]


@case("legacy/laplace2d/laplace2d-numba-cuda-smem.py", "oob")
def laplace_smem():
    """Presented as working, but its halo loads test ``j`` where ``i`` is meant: the last
    column of threads loads ``A[j, i + 1]`` one past the end of the row (on a GPU, the next
    row's first element)."""
    A = np.zeros((32, 64))
    A[:, 0] = 1.0
    Anew, error = A.copy(), np.zeros_like(A)
    jacobi_relax_core_smem[(2, 1), (32, 32)](A, Anew, error)
    return Anew, error


TPB_LAPLACE = 16


@cuda.jit(device=True, inline=True)
def get_max(a, b):
    if a > b:
        return a
    else:
        return b


@cuda.jit("(f8[:,:], f8[:,:], f8[:,:])")
def jacobi_relax_core_improve(A, Anew, error):
    err_sm = cuda.shared.array((TPB_LAPLACE, TPB_LAPLACE), dtype=f8)
    ty = cuda.threadIdx.x
    tx = cuda.threadIdx.y
    bx = cuda.blockIdx.x
    by = cuda.blockIdx.y
    n = A.shape[0]
    m = A.shape[1]
    i, j = cuda.grid(2)
    err_sm[ty, tx] = 0
    if j >= 1 and j < n - 1 and i >= 1 and i < m - 1:
        Anew[j, i] = 0.25 * (A[j, i + 1] + A[j, i - 1] + A[j - 1, i] + A[j + 1, i])
        err_sm[ty, tx] = Anew[j, i] - A[j, i]
    cuda.syncthreads()
    t = TPB_LAPLACE // 2
    while t > 0:
        if ty < t:
            err_sm[ty, tx] = get_max(err_sm[ty, tx], err_sm[ty + t, tx])
        t //= 2
        cuda.syncthreads()
    t = TPB_LAPLACE // 2
    while t > 0:
        if tx < t and ty == 0:
            err_sm[ty, tx] = get_max(err_sm[ty, tx], err_sm[ty, tx + t])
        t //= 2
        cuda.syncthreads()
    if tx == 0 and ty == 0:
        error[by, bx] = err_sm[0, 0]


@case("legacy/laplace2d/laplace2d-numba-cuda-improve.py", "clean")
def laplace_improve():
    A = np.zeros((32, 32))
    A[:, 0] = 1.0
    Anew, error = A.copy(), np.zeros((2, 2))
    jacobi_relax_core_improve[(2, 2), (TPB_LAPLACE, TPB_LAPLACE)](A, Anew, error)
    return Anew, error


BLOCK_SUM = 128


@cuda.jit
def gpu_single_block_sum(arr, out):
    temp = cuda.shared.array(BLOCK_SUM, dtype=float32)
    tid = cuda.threadIdx.x
    blksz = cuda.blockDim.x
    temp[tid] = 0
    for i in range(tid, arr.size, blksz):
        temp[tid] += arr[i]
    cuda.syncthreads()
    if tid == 0:
        for i in range(1, blksz):
            temp[0] += temp[i]
        out[0] = temp[0]


@case("legacy/cuda_dask.py (gpu_single_block_sum)", "clean")
def single_block_sum():
    arr = np.random.default_rng(9).random(500).astype(np.float32)
    out = cuda.device_array(1, dtype=np.float32)
    gpu_single_block_sum[1, BLOCK_SUM](arr, out)
    return out.copy_to_host()
