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
        return flat(quietly(np.matmul, x.reshape(-1, x.shape[2]), y[0]), dtype=a.dtype)
    return flat(quietly(np.matmul, x, y), dtype=a.dtype)
