"""NumPy batched matmul."""
from __future__ import annotations

import numpy as np

from .memory import array, flat, quietly


def matmul(a, b):
    """(B, M, K) @ (B, K, N). When b is one matrix for every batch (batch stride 0, as for a
    Linear layer on a batch of sequences), the batches' rows are stacked into one (B*M, K)
    matrix and multiplied in one GEMM (NumPy's batched matmul would call BLAS B times on
    small matrices); the result is the same (B, M, N) buffer. A product that overflows is inf,
    with no warning (as in PyTorch: a GradScaler's float16 step is expected to overflow)."""
    x, y = array(a), array(b)
    if x.shape[0] > 1 and b.strides[0] == 0:
        return flat(_product(x.reshape(-1, x.shape[2]), y[0]), dtype=a.dtype)
    if x.shape[0] == 1:
        return flat(_product(x[0], y[0]), dtype=a.dtype)
    return flat(quietly(np.matmul, x, y), dtype=a.dtype)


def _product(x, y):
    """x (M, K) @ y (K, N). OpenBLAS multiplies a few rows by a column-major y (a Linear's
    ``W^T`` view) 1.2-1.9x slower than the same product taken the other way round,
    ``(W @ x^T)^T``, whose W is row-major (64x784 by 784x512: 688 -> 596 us, 8x200 by 200x800:
    105 -> 55 us, one thread, 2-core machine, 2026-12-07); for many rows or few columns it is
    the other way, so only a few rows (M <= 64) by many columns (N >= 128) swap."""
    if (x.shape[0] <= 64 and y.shape[1] >= 128 and y.strides[0] == y.itemsize
            and x.flags.c_contiguous):
        return np.ascontiguousarray(quietly(np.matmul, y.T, x.T).T)
    return quietly(np.matmul, x, y)
