"""NumPy batched matmul."""
from __future__ import annotations

import numpy as np

from .memory import array, flat


def matmul(a, b):
    return flat(np.matmul(array(a), array(b)), dtype=a.dtype)
