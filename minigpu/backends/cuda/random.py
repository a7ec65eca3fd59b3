"""Counter-based random numbers: element i of a (seed, offset) stream is a pure function of
(seed, offset + i), so every thread computes its own number with no state to share, and cpu
and cuda produce the same bits (contract: ``bits(i, s) = mix32(uint32(offset + i) ^ key_s)``
with ``key_s = mix32(uint32(seed + s * 0x9E3779B9))`` and mix32 the 'lowbias32' hash).

Lesson: integer width on the GPU. The hash is uint32 arithmetic that must wrap at 2**32.
Numba types ``uint32 op uint32`` as uint64 (and uint32 with an int literal as int64), so each
step is cast back with ``uint32(...)`` and every constant is a typed ``uint32``; the compiler
then emits 32-bit ``mul.lo.u32``/``xor.b32``/``shr.u32``. Likewise the conversion to floating
point is explicit (``uint32 * float32`` would be float64 in Numba).

The per-stream key depends only on the seed, so the host computes it once (the same
:func:`mix32`, run as plain Python on NumPy scalars) instead of every thread rehashing it.
"""
from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import cuda

from .blocks import launch
from .device import SIMULATOR, empty
from .kernelspec import KernelSpec, reported

if SIMULATOR:
    @cuda.jit(device=True)
    def uint32(value):
        """Simulator stand-in for ``numba.uint32``: the same value mod 2**32, as a Python int.
        The simulator runs the hash on NumPy scalars, whose wrapping multiply (the point of
        the hash) raises overflow warnings; Python ints don't, and the mask wraps them. A
        device function, so that the simulator's compiled path compiles it too (there the
        int is an int64 whose multiply wraps mod 2**64: the same low 32 bits)."""
        return int(value) & 0xFFFFFFFF
else:
    from numba import uint32

GOLDEN = 0x9E3779B9  # 2**32 / golden ratio: spreads the three stream keys apart


def _mix32(x):
    """lowbias32: x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B; x ^= x >> 16,
    all mod 2**32. Written once, compiled for the device as :data:`mix32` and run as plain
    Python on ``numpy.uint32`` scalars for the host-side key."""
    x = uint32(x ^ (x >> uint32(16)))
    x = uint32(x * uint32(0x7FEB352D))
    x = uint32(x ^ (x >> uint32(15)))
    x = uint32(x * uint32(0x846CA68B))
    return uint32(x ^ (x >> uint32(16)))


mix32 = cuda.jit(device=True)(_mix32)


def stream_key(seed, stream) -> np.uint32:
    """key_s = mix32(uint32(seed + stream * 0x9E3779B9)), on the host."""
    with np.errstate(over="ignore"):
        return np.uint32(_mix32(np.uint32((int(seed) + stream * GOLDEN) & 0xFFFFFFFF)))


def _counter0(offset) -> np.uint32:
    return np.uint32(int(offset) & 0xFFFFFFFF)


def _arithmetic(dtype):
    """The dtype a fill computes in: float32 for float16 outputs (2**24 does not fit in a half,
    and half math needs intrinsics), rounded by the store; else the output dtype."""
    return np.dtype(np.float32) if np.dtype(dtype) == np.float16 else np.dtype(dtype)


@reported(lambda k, x: [KernelSpec("uniform", k(x.f32), (x.f, x.u32, x.u32), x.block)])
@functools.lru_cache(maxsize=None)
def uniform_kernel(dtype):
    arith = _arithmetic(dtype)
    real = numba.from_dtype(arith)
    scale = arith.type(2.0 ** -24)

    @cuda.jit
    def uniform_kernel(out, key, counter0):
        """out[i] = (mix32(uint32(counter0 + i) ^ key) >> 8) * 2**-24, in [0, 1).

        Thread mapping: grid-stride, one element per iteration, no state between them.
        Block/grid: 1-D, ``device.launch_1d``.
        Memory: one coalesced store per element and no loads: compute-bound on ~10 integer ops.
        The top 24 bits convert exactly to float32, so cpu and cuda agree bit for bit.
        """
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            bits = mix32(uint32(uint32(counter0) + uint32(i)) ^ key)
            out[i] = real(bits >> uint32(8)) * scale

    return uniform_kernel


@reported(lambda k, x: [KernelSpec(
    "normal", k(x.f32), (x.f, x.u32, x.u32, x.u32), x.block,
    f64_reason="libdevice cosf: Payne-Hanek reduction for |x| > 105615, never taken "
               "(argument < 2 pi); see random.py")])
@functools.lru_cache(maxsize=None)
def normal_kernel(dtype):
    arith = _arithmetic(dtype)
    real = numba.from_dtype(arith)
    scale, one = arith.type(2.0 ** -24), arith.type(1)
    minus_two, two_pi = arith.type(-2), arith.type(2 * np.pi)

    @cuda.jit
    def normal_kernel(out, key1, key2, counter0):
        """Box-Muller: out[i] = sqrt(-2 log u1) cos(2 pi u2), u1 in (0, 1], u2 in [0, 1) from
        streams 1 and 2 at counter (counter0 + i).

        Thread mapping: grid-stride, one element per iteration (the sine half of Box-Muller is
        dropped so element i depends on counter i alone, as the contract says).
        Block/grid: 1-D, ``device.launch_1d``.
        Memory: one coalesced store per element. Math in the output dtype (logf/sqrtf/cosf for
        float32; the cpu reference rounds the same operations with NumPy's log and cos, so
        float32 agrees to a few ulps, not bit for bit). The only float64 instructions in the
        float32 PTX are libdevice cosf's Payne-Hanek reduction for |x| > 105615, never reached:
        2 pi u2 < 2 pi.
        """
        start, step = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, step):
            counter = uint32(uint32(counter0) + uint32(i))
            u1 = (real(mix32(counter ^ key1) >> uint32(8)) + one) * scale
            u2 = real(mix32(counter ^ key2) >> uint32(8)) * scale
            out[i] = math.sqrt(minus_two * math.log(u1)) * math.cos(two_pi * u2)

    return normal_kernel


def random_uniform(n, seed, offset, dtype):
    """n uniform numbers in [0, 1) of stream 0 at counters offset..offset+n-1."""
    dtype = np.dtype(dtype)
    out = empty(n, dtype)
    if n:
        launch(uniform_kernel(dtype), n, out, stream_key(seed, 0), _counter0(offset))
    return out


def random_normal(n, seed, offset, dtype):
    """n standard normal numbers (Box-Muller on streams 1 and 2) at counters offset..."""
    dtype = np.dtype(dtype)
    out = empty(n, dtype)
    if n:
        launch(normal_kernel(dtype), n, out, stream_key(seed, 1), stream_key(seed, 2),
               _counter0(offset))
    return out
