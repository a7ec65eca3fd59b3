"""NumPy counter-based random numbers (the same bits as the cuda backend)."""
from __future__ import annotations

import numpy as np


def mix32(x):
    """A 32-bit integer hash (the 'lowbias32' finaliser): every output bit depends on every
    input bit. uint32 arithmetic wraps exactly as it does in the CUDA kernel."""
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


def random_bits(n, seed, offset, stream):
    """uint32 bits of elements offset..offset+n-1: mix32(counter ^ mix32(seed + stream))."""
    with np.errstate(over="ignore"):
        key = mix32(np.uint32((int(seed) + stream * 0x9E3779B9) & 0xFFFFFFFF))
        counter = (np.arange(n, dtype=np.uint64) + np.uint64(offset)).astype(np.uint32)
        return mix32(counter ^ key)


def random_uniform(n, seed, offset, dtype):
    """[0, 1) from the top 24 bits: exactly representable in float32 (float16 draws are the
    float32 ones rounded: 2**24 does not fit in a half)."""
    top24 = random_bits(n, seed, offset, 0) >> np.uint32(8)
    arith = np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)
    return (top24.astype(arith) * arith.type(2.0 ** -24)).astype(dtype, copy=False)


def random_normal(n, seed, offset, dtype):
    """Box-Muller on two independent uniform streams; u1 in (0, 1] so log(u1) is finite."""
    u1 = ((random_bits(n, seed, offset, 1) >> np.uint32(8)).astype(np.float64) + 1) * 2.0 ** -24
    u2 = (random_bits(n, seed, offset, 2) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    return (np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)).astype(dtype)
