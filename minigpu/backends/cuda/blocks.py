"""Shared kernel building blocks: what reduce, softmax and the lessons are made of.

- combining two partial results: ``add``, ``mul``, the NaN-propagating ``max_nan`` / ``min_nan``
  (``COMBINE``), and the (value, index) comparisons of argmax/argmin (``BETTER``), with the
  neutral element of each (``identity``);
- warp- and block-wide reductions as device-function factories: ``warp_allreduce`` (5 shuffle
  steps, registers only), ``block_allreduce`` (shuffles + one barrier, or the shared-memory
  tree), ``block_argreduce`` (the same for (value, index) pairs);
- launch and dtype helpers: ``launch`` (a 1-D grid-stride kernel over ``n`` elements on the
  current stream), ``numba_type``, ``pow2_at_least``, and ``WARP_SHUFFLE`` (whether warp
  intrinsics run here).

Warp intrinsics: on a real GPU they always exist. Numba's stock CUDA simulator lacks them;
minigpu's simulator extension adds them. ``WARP_SHUFFLE`` records, once at import, whether they
can be used; the production kernels fall back to the shared-memory tree when they cannot.
"""
from __future__ import annotations

import functools

import numba
import numpy as np
from numba import cuda

from ...simulator import config as sim_config
from .device import SIMULATOR, WARP_SIZE, current_stream, launch_1d, scalar

FULL_MASK = 0xFFFFFFFF
"""Every lane of a warp takes part (the ``mask`` of the ``*_sync`` intrinsics)."""


def warp_shuffle_available() -> bool:
    """True when ``cuda.shfl_down_sync`` / ``shfl_xor_sync`` can run: always on a GPU; under the
    simulator only once ``minigpu.simulator.install()`` has added them to its fake ``cuda`` module."""
    if not SIMULATOR:
        return True
    from numba.cuda.simulator import kernel as simkernel

    return all(hasattr(simkernel.FakeCUDAModule, name)
               for name in ("shfl_down_sync", "shfl_xor_sync"))


# Decided once: ``import minigpu`` runs ``minigpu.simulator.install()`` before this module loads.
WARP_SHUFFLE = warp_shuffle_available()


def launch(kernel, n, *args):
    """Launch a 1-D grid-stride ``kernel`` over ``n`` elements on the current stream
    (``device.launch_1d`` picks the grid and block)."""
    grid, block = launch_1d(n)
    configured(kernel, grid, block)(*args)


def configured(kernel, grid, block):
    """``kernel[grid, block, current_stream()]``: the kernel configured for a launch.

    On a GPU the configured launcher (numba-cuda's ``_LaunchConfiguration``, which checks and
    normalises the dimensions when it is made) is kept per (kernel, grid, block, stream), so a
    launch of a size seen before reuses it. The simulator's ``kernel[...]`` stores the
    configuration on the kernel object itself: there, it is configured at every launch."""
    if SIMULATOR:
        return kernel[grid, block, current_stream()]
    return _configured(kernel, grid, block, current_stream())


@functools.lru_cache(maxsize=4096)
def _configured(kernel, grid, block, stream):
    return kernel[grid, block, stream]


def launch_specialized(kernel, key, grid, block, *args):
    """``kernel[grid, block, current_stream()](*args)`` without numba-cuda's per-launch type
    dispatch: the kernel specialized for these arguments (see ``specialized``) is launched."""
    configured(specialized(kernel, key, args), grid, block)(*args)


_SPECIALIZATIONS = {}


def specialized(kernel, key, args):
    """``kernel`` compiled for exactly the numba types of ``args``, made once per (kernel,
    key) with numba-cuda's ``Dispatcher.specialize`` (the explicit signature of those types).

    A generic ``@cuda.jit`` kernel types every argument at every launch to pick its compiled
    overload; a specialized one has a single overload and launches it directly. It also
    checks nothing: arguments of other types would be reinterpreted. So ``key`` must decide
    every argument's type, as the buffers' dtype does for the optimizer kernels (their arrays
    are whole 1-D buffers of one dtype, their scalars typed with ``scalar``, their flags
    bools). The simulator's ``specialize`` returns the kernel itself, and its sanitizer checks
    that every launch with a key has the argument types of the first one."""
    found = _SPECIALIZATIONS.get((kernel, key))
    if found is None:
        found = _SPECIALIZATIONS[kernel, key] = kernel.specialize(*args)
    if SIMULATOR and sim_config.CHECKS:
        _check_argument_types(kernel, key, args)
    return found


_ARGUMENT_TYPES = {}


def _check_argument_types(kernel, key, args):
    """The simulator's check of a specialized launch: the arguments have the numba types of
    the first launch with this key (a GPU would reinterpret any others without a word)."""
    types = tuple(numba.typeof(a) for a in args)
    first = _ARGUMENT_TYPES.setdefault((kernel, key), types)
    if types != first:
        raise TypeError(f"{kernel.py_func.__name__} specialized for key {key!r} was compiled "
                        f"for argument types {first} and is launched with {types}: on a GPU "
                        f"they would be reinterpreted (the key must decide every argument's "
                        f"type)")


# --- combining two partial results ---------------------------------------------------------
@cuda.jit(device=True)
def add(a, b):
    return a + b


@cuda.jit(device=True)
def max_nan(x, y):
    """max(x, y) that propagates NaN from either side, like ``numpy.maximum`` (``x != x`` is
    the NaN test; the hardware ``max.f32`` would drop it)."""
    return x if (x > y or x != x) else y


@cuda.jit(device=True)
def min_nan(x, y):
    """min(x, y) that propagates NaN from either side, like ``numpy.minimum``."""
    return x if (x < y or x != x) else y


@cuda.jit(device=True)
def mul(a, b):
    return a * b


COMBINE = {"sum": add, "max": max_nan, "min": min_nan, "prod": mul}


@cuda.jit(device=True)
def better_max(va, ia, vb, ib):
    """True when (va, ia) beats (vb, ib) for argmax: larger value, then smaller index; NaN
    beats every number (NumPy's argmax returns the first NaN)."""
    if va != va:
        return not (vb != vb and ib < ia)
    if vb != vb:
        return False
    return va > vb or (va == vb and ia < ib)


@cuda.jit(device=True)
def better_min(va, ia, vb, ib):
    if va != va:
        return not (vb != vb and ib < ia)
    if vb != vb:
        return False
    return va < vb or (va == vb and ia < ib)


BETTER = {"max": better_max, "min": better_min}


def identity(op, dtype):
    """The neutral element of ``op`` as a ``dtype`` scalar: 0, 1, -inf/+inf (or the integer
    extremes), so padded lanes and empty threads never change the result."""
    dtype = np.dtype(dtype)
    if op == "sum":
        value = 0
    elif op == "prod":
        value = 1
    elif dtype.kind == "f":
        value = -np.inf if op == "max" else np.inf
    else:
        info = np.iinfo(dtype)
        value = info.min if op == "max" else info.max
    return scalar(value, dtype)


def numba_type(dtype):
    """The Numba scalar type of a NumPy dtype (what ``cuda.shared.array`` takes)."""
    return numba.from_dtype(np.dtype(dtype))


def pow2_at_least(n, lo, hi):
    """The smallest power of two >= ``n`` in [lo, hi] (block sizes: whole warps, capped)."""
    p = min(lo, hi)
    while p < n and p < hi:
        p *= 2
    return p


# --- warp- and block-wide reductions -------------------------------------------------------
@functools.lru_cache(maxsize=None)
def warp_allreduce(op):
    """Device function ``(val) -> total over the 32 lanes``, in every lane.

    Butterfly (``shfl_xor_sync`` with offsets 16, 8, 4, 2, 1): after step s each lane holds the
    total of a 2**s-lane group, so after 5 steps all lanes hold the warp total. Registers only:
    no shared memory, no barrier. All 32 lanes must call it together."""
    combine = COMBINE[op]

    @cuda.jit(device=True)
    def allreduce(val):
        offset = 16
        while offset > 0:
            val = combine(val, cuda.shfl_xor_sync(FULL_MASK, val, offset))
            offset //= 2
        return val

    return allreduce


@functools.lru_cache(maxsize=None)
def block_allreduce(op, block, shuffle):
    """Device function ``(val, scratch, identity) -> total over the block``, in every thread.

    ``block`` threads (a power of two, 1-D block); ``scratch`` is a shared array of ``block``
    elements that no other code touches during the call (give each call site its own, or put
    a barrier before reusing it).

    shuffle=True: every warp reduces in registers (``warp_allreduce``), lane 0 of each warp
    writes its partial to ``scratch[warp]``, one barrier, then every warp reduces the
    ``block/32`` partials again with shuffles, so all threads get the total without a second
    barrier. One barrier in all.
    shuffle=False: shared-memory tree with sequential addressing (``tid < s`` halves the active
    threads each step: no divergence inside warps, contiguous addresses, no bank conflicts);
    log2(block) barriers; every thread reads the total from ``scratch[0]``."""
    combine = COMBINE[op]
    nwarps = block // WARP_SIZE

    if shuffle:
        assert block % WARP_SIZE == 0, "the shuffle reduction needs whole warps"
        warp_reduce = warp_allreduce(op)

        @cuda.jit(device=True)
        def allreduce(val, scratch, ident):
            val = warp_reduce(val)
            if nwarps == 1:
                return val
            tid = cuda.threadIdx.x
            lane = tid % WARP_SIZE
            if lane == 0:
                scratch[tid // WARP_SIZE] = val
            cuda.syncthreads()
            partial = scratch[lane] if lane < nwarps else ident
            return warp_reduce(partial)

        return allreduce

    assert block & (block - 1) == 0, "the tree reduction needs a power-of-two block"

    @cuda.jit(device=True)
    def allreduce(val, scratch, ident):
        tid = cuda.threadIdx.x
        scratch[tid] = val
        cuda.syncthreads()
        s = block // 2
        while s > 0:
            if tid < s:
                scratch[tid] = combine(scratch[tid], scratch[tid + s])
            cuda.syncthreads()
            s //= 2
        return scratch[0]

    return allreduce


@functools.lru_cache(maxsize=None)
def block_argreduce(op, block, shuffle):
    """Like ``block_allreduce`` for (value, index) pairs:
    ``(v, i, sv, si, ident, ident_i) -> (v, i)`` with the best pair in every thread; ties keep
    the smaller index, so the identity pair (``ident``, an index past the end) never wins. Two
    scratch arrays (values and int64 indices) of ``block`` elements."""
    better = BETTER[op]
    nwarps = block // WARP_SIZE

    @cuda.jit(device=True)
    def pick(va, ia, vb, ib):
        if better(va, ia, vb, ib):
            return va, ia
        return vb, ib

    if shuffle:
        assert block % WARP_SIZE == 0, "the shuffle reduction needs whole warps"

        @cuda.jit(device=True)
        def warp_pairs(v, i):
            offset = 16
            while offset > 0:
                ov = cuda.shfl_xor_sync(FULL_MASK, v, offset)
                oi = cuda.shfl_xor_sync(FULL_MASK, i, offset)
                v, i = pick(v, i, ov, oi)
                offset //= 2
            return v, i

        @cuda.jit(device=True)
        def argreduce(v, i, sv, si, ident, ident_i):
            v, i = warp_pairs(v, i)
            if nwarps == 1:
                return v, i
            tid = cuda.threadIdx.x
            lane = tid % WARP_SIZE
            if lane == 0:
                sv[tid // WARP_SIZE] = v
                si[tid // WARP_SIZE] = i
            cuda.syncthreads()
            if lane < nwarps:
                v, i = sv[lane], si[lane]
            else:
                v, i = ident, ident_i
            return warp_pairs(v, i)

        return argreduce

    @cuda.jit(device=True)
    def argreduce(v, i, sv, si, ident, ident_i):
        tid = cuda.threadIdx.x
        sv[tid] = v
        si[tid] = i
        cuda.syncthreads()
        s = block // 2
        while s > 0:
            if tid < s:
                bv, bi = pick(sv[tid], si[tid], sv[tid + s], si[tid + s])
                sv[tid] = bv
                si[tid] = bi
            cuda.syncthreads()
            s //= 2
        return sv[0], si[0]

    return argreduce
