"""NumPy counter-based random numbers (the same bits as the cuda backend)."""
from __future__ import annotations

import functools

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
    """uint32 bits of elements offset..offset+n-1: mix32(counter ^ mix32(seed + stream)).
    (Arrays of unsigned integers wrap around without a warning; only the key, hashed once
    per seed and stream, is a NumPy scalar.)"""
    counter = (np.arange(n, dtype=np.uint64) + np.uint64(offset)).astype(np.uint32)
    return mix32(counter ^ _key(int(seed), stream))


@functools.lru_cache(maxsize=64)
def _key(seed, stream):
    """mix32(seed + stream * 0x9E3779B9), cached: a generator's draws share its seed and
    differ in their offsets (eight NumPy scalar operations cost more than drawing 32 numbers)."""
    with np.errstate(over="ignore"):  # NumPy scalars warn when they wrap around
        return mix32(np.uint32((seed + stream * 0x9E3779B9) & 0xFFFFFFFF))


def _arithmetic(dtype):
    """The dtype a fill computes in: the output dtype, float32 for float16 (2**24 does not fit
    in a half): the cuda kernels' choice, so both backends round the same operations."""
    return np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)


def random_uniform(n, seed, offset, dtype):
    """[0, 1) from the top 24 bits: exactly representable in float32 (float16 draws are the
    float32 ones rounded)."""
    arith = _arithmetic(dtype)
    top24 = random_bits(n, seed, offset, 0) >> np.uint32(8)
    return (top24.astype(arith) * arith.type(2.0 ** -24)).astype(dtype, copy=False)


def random_normal(n, seed, offset, dtype):
    """Box-Muller on two independent uniform streams; u1 in (0, 1] so log(u1) is finite. The
    math runs in the output dtype (float32 for float16), in the cuda kernel's order: NumPy's
    float32 ``cos`` is vectorised, its float64 one is not (a float64 Box-Muller rounded to
    float32 took 2.5x as long)."""
    arith = _arithmetic(dtype)
    t = arith.type
    u1 = (random_bits(n, seed, offset, 1) >> np.uint32(8)).astype(arith)
    u1 += t(1)
    u1 *= t(2.0 ** -24)
    radius = np.log(u1, out=u1)
    radius *= t(-2)
    np.sqrt(radius, out=radius)
    angle = (random_bits(n, seed, offset, 2) >> np.uint32(8)).astype(arith)
    angle *= t(2.0 ** -24)
    angle *= t(2 * np.pi)
    np.cos(angle, out=angle)
    radius *= angle
    return radius.astype(dtype, copy=False)
