"""The simulator as a sanitizer (``minigpu/simulator/``): a corpus of buggy kernels, each caught
with the right error class at the right line, and correct kernels that are never flagged.

Also: IEEE math, shuffled block order, ``cuda`` captured in a closure, launch checks, the
``__cuda_array_interface__`` argument hook, the observer seam, the switches.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import inspect  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32, int32  # noqa: E402

import minigpu  # noqa: E402,F401  (installs the simulator)
from minigpu import simulator  # noqa: E402
from minigpu.cuda import (LaunchConfigError, OutOfBoundsError, RaceError,  # noqa: E402
                          SimulatorError, SyncError, UninitializedReadError)
from minigpu.simulator import config, launch as sim_launch, memory  # noqa: E402

pytestmark = pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="tests the CUDA simulator")
needs_checks = pytest.mark.skipif(not config.CHECKS, reason="MINIGPU_SIM_CHECKS=0")


def line_of(kernel, marker):
    """The source line of ``kernel`` that carries the comment ``marker``."""
    fn = getattr(kernel, "py_func", kernel)
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def at(kernel, marker):
    return f"{os.path.basename(__file__)}:{line_of(kernel, marker)}"


def raises(cls, kernel, *markers):
    """pytest.raises(cls) whose message names every line marked with one of ``markers``."""
    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(cls)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            msg = str(self.info.value)
            assert f"kernel '{kernel.py_func.__qualname__}'" in msg, msg
            for m in markers:
                assert at(kernel, m) in msg, (m, msg)
            return handled
    return Check()


ones = np.ones(64, np.float32)


# ============================================================================= memcheck


@cuda.jit
def oob_global(out):
    i = cuda.grid(1)
    out[i] = 1.0  # OOB-GLOBAL (no `if i < out.size` guard)


@cuda.jit
def oob_shared_negative(out):
    s = cuda.shared.array(8, float32)
    t = cuda.threadIdx.x
    s[t] = t
    cuda.syncthreads()
    out[t] = s[t - 1]  # OOB-NEG (thread 0 reads s[-1])


@cuda.jit
def oob_local(out, n):
    acc = cuda.local.array(4, float32)
    for j in range(n):
        acc[j] = j  # OOB-LOCAL
    out[0] = acc[0]


@needs_checks
def test_memcheck_global():
    with raises(OutOfBoundsError, oob_global, "OOB-GLOBAL") as e:
        oob_global[2, 8](np.zeros(15, np.float32))
    assert "global array 'out' at index 15 (shape (15,), float32)" in str(e.value)


@needs_checks
def test_memcheck_negative_shared_index():
    with raises(OutOfBoundsError, oob_shared_negative, "OOB-NEG") as e:
        oob_shared_negative[3, 8](np.zeros(8, np.float32))
    msg = str(e.value)
    assert "shared array 's' at index -1" in msg and "thread (0, 0, 0)" in msg
    assert "negative" in msg
    assert isinstance(e.value, IndexError) and isinstance(e.value, SimulatorError)


@needs_checks
def test_memcheck_local():
    with raises(OutOfBoundsError, oob_local, "OOB-LOCAL") as e:
        oob_local[1, 1](np.zeros(1, np.float32), 5)
    assert "local array 'acc' at index 4 (shape (4,)" in str(e.value)


# ============================================================================= initcheck


@cuda.jit
def uninit_local(out):
    acc = cuda.local.array(4, float32)
    for j in range(4):
        acc[j] += 1.0  # UNINIT-LOCAL (forgot acc[j] = 0)
    out[0] = acc[0]


@cuda.jit
def uninit_shared(out):
    s = cuda.shared.array(16, int32)
    t = cuda.threadIdx.x
    if t < 8:
        s[t] = t
    cuda.syncthreads()
    out[t] = s[t]  # UNINIT-SHARED (threads 8-15 read what nobody wrote)


@cuda.jit
def read_all(out, src):
    i = cuda.grid(1)
    if i < src.size:
        out[i] = src[i]  # UNINIT-DEVICE


@needs_checks
def test_initcheck_local():
    with raises(UninitializedReadError, uninit_local, "UNINIT-LOCAL") as e:
        uninit_local[1, 1](np.zeros(1, np.float32))
    assert "local array 'acc' at index 0" in str(e.value)


@needs_checks
def test_initcheck_shared_int():
    with raises(UninitializedReadError, uninit_shared, "UNINIT-SHARED"):
        uninit_shared[1, 16](np.zeros(16, np.int32))


@needs_checks
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_initcheck_device_array(dtype):
    src = cuda.device_array(8, dtype=dtype)
    with raises(UninitializedReadError, read_all, "UNINIT-DEVICE") as e:
        read_all[1, 8](np.zeros(8, dtype), src)
    assert "global array 'src'" in str(e.value)
    src.copy_to_device(np.arange(8).astype(dtype))  # a host write initialises it
    out = np.zeros(8, dtype)
    read_all[1, 8](out, src)
    assert (out == np.arange(8)).all()


@needs_checks
def test_initcheck_minigpu_allocator():
    from minigpu.backends.cuda import allocator

    src = allocator.device_array(8, np.float32)
    with raises(UninitializedReadError, read_all, "UNINIT-DEVICE"):
        read_all[1, 8](np.zeros(8, np.float32), src)


def test_computed_nan_is_not_uninitialised():
    src = cuda.to_device(np.array([np.nan, np.inf, -np.inf, 0.0], np.float32))
    out = np.zeros(4, np.float32)
    read_all[1, 4](out, src)
    assert np.isnan(out[0]) and np.isinf(out[1:3]).all()


# ============================================================================= racecheck: shared


@cuda.jit
def shared_raw(out):
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    s[t] = t  # RAW-W
    out[t] = s[(t + 1) % 64]  # RAW-R (missing syncthreads)


@cuda.jit
def shared_war(out, x):
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    acc = float32(0)
    for i in range(4):
        s[t] = x[t] + i  # WAR-W (next round overwrites before the neighbour has read)
        cuda.syncthreads()
        acc += s[(t + 1) % 64]  # WAR-R
    out[t] = acc


@cuda.jit
def shared_waw(out):
    s = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    s[0] = t  # WAW (every thread writes the same slot)
    cuda.syncthreads()
    out[t] = s[0]


@cuda.jit
def histogram_no_atomics(h_out, b):
    h = cuda.shared.array(4, int32)
    t = cuda.threadIdx.x
    if t < 4:
        h[t] = 0
    cuda.syncthreads()
    h[b[t]] += 1  # HIST (no atomic)
    cuda.syncthreads()
    if t < 4:
        h_out[t] = h[t]


@needs_checks
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_read_after_write(seed, monkeypatch):
    monkeypatch.setattr(sim_launch, "_rng", random.Random(seed))
    with raises(RaceError, shared_raw, "RAW-W", "RAW-R") as e:
        shared_raw[2, 64](np.zeros(64, np.float32))
    assert "read-after-write race on shared array 's'" in str(e.value)


@needs_checks
def test_shared_write_after_read():
    with raises(RaceError, shared_war, "WAR-W", "WAR-R") as e:
        shared_war[1, 64](np.zeros(64, np.float32), ones)
    # which of the two accesses ran first is up to the scheduler, as on a GPU; the pair is not
    assert re.search(r"(write-after-read|read-after-write) race on shared array 's'", str(e.value))


@needs_checks
def test_shared_write_after_write():
    with raises(RaceError, shared_waw, "WAW") as e:
        shared_waw[1, 32](np.zeros(32, np.float32))
    assert "write-after-write race" in str(e.value)


@needs_checks
def test_shared_histogram_without_atomics():
    with raises(RaceError, histogram_no_atomics, "HIST"):
        histogram_no_atomics[1, 32](np.zeros(4, np.int32), np.arange(32) % 4)


# ============================================================================= racecheck: global


@cuda.jit
def global_sum_no_atomic(out, x):
    i = cuda.grid(1)
    out[0] += x[i]  # GSUM


@cuda.jit
def global_raw_in_block(out, g):
    t = cuda.threadIdx.x
    g[t] = t  # GRAW-W
    out[t] = g[(t + 1) % 32]  # GRAW-R (no syncthreads between)


@cuda.jit
def global_war_in_block(g):
    t = cuda.threadIdx.x
    v = g[(t + 1) % 32]  # GWAR-R
    g[t] = v  # GWAR-W (shift in place without a barrier)


@cuda.jit
def global_raw_across_blocks(g):
    b = cuda.blockIdx.x
    t = cuda.threadIdx.x
    if t == 0:
        if b > 0:
            g[b] = g[b - 1] + 1  # XRAW (assumes block b-1 ran first)
        else:
            g[0] = 0  # XRAW-FIRST


@cuda.jit
def global_waw_across_blocks(out):
    if cuda.threadIdx.x == 0:
        out[0] = cuda.blockIdx.x  # XWAW (the "last" block wins)


@needs_checks
def test_global_sum_without_atomic():
    with raises(RaceError, global_sum_no_atomic, "GSUM") as e:
        global_sum_no_atomic[2, 32](np.zeros(1, np.float32), ones)
    assert "global array 'out' at index 0 (shape (1,), float32)" in str(e.value)


@needs_checks
def test_global_read_after_write_in_a_block():
    with raises(RaceError, global_raw_in_block, "GRAW-W", "GRAW-R"):
        global_raw_in_block[1, 32](np.zeros(32, np.float32), np.zeros(32, np.float32))


@needs_checks
def test_global_write_after_read_in_a_block():
    with raises(RaceError, global_war_in_block, "GWAR-R", "GWAR-W") as e:
        global_war_in_block[1, 32](np.arange(32, dtype=np.float32))
    assert re.search(r"(write-after-read|read-after-write) race on global array 'g'", str(e.value))


@needs_checks
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_global_read_after_write_across_blocks(seed, monkeypatch):
    monkeypatch.setattr(sim_launch, "_rng", random.Random(seed))
    with raises(RaceError, global_raw_across_blocks, "XRAW") as e:
        global_raw_across_blocks[8, 4](np.zeros(8, np.float32))
    assert "from different blocks of one launch" in str(e.value)


@needs_checks
def test_global_write_after_write_across_blocks():
    with raises(RaceError, global_waw_across_blocks, "XWAW") as e:
        global_waw_across_blocks[4, 32](np.zeros(1, np.float32))
    assert "write-after-write" in str(e.value) and "different blocks" in str(e.value)


# ============================================================================= syncwarp, atomics


@cuda.jit
def syncwarp_across_warps(out):
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    s[t] = t  # SW-W
    cuda.syncwarp()
    out[t] = s[63 - t]  # SW-R (lane of the other warp: syncwarp does not order it)


@cuda.jit
def atomic_then_plain(out, x):
    t = cuda.threadIdx.x
    cuda.atomic.add(out, 0, x[t])  # AP-ATOMIC
    if t == 5:
        out[0] = 0.0  # AP-PLAIN


@needs_checks
def test_syncwarp_orders_only_its_warp():
    with raises(RaceError, syncwarp_across_warps, "SW-W", "SW-R"):
        syncwarp_across_warps[1, 64](np.zeros(64, np.float32))


@needs_checks
def test_plain_write_races_with_atomics():
    with raises(RaceError, atomic_then_plain, "AP-ATOMIC", "AP-PLAIN"):
        atomic_then_plain[1, 32](np.zeros(1, np.float32), ones)


@cuda.jit
def plain_after_every_atomic(out, x, seen):
    t = cuda.threadIdx.x
    cuda.atomic.add(out, 0, x[t])  # AL-ATOMIC
    if t == 31:
        while cuda.atomic.add(out, 0, 0) < 32:  # until every other thread has added
            pass
        seen[0] = out[0]  # a plain load racing only atomics of global memory: not a race
        out[0] = 0.0  # AL-WRITE


@needs_checks
def test_plain_access_races_with_atomics_the_os_ran_earlier():
    """The last atomic on the element is the writer's own: racecheck still finds the other
    threads' unordered atomics (it once kept only the last write, and missed them whenever
    the OS happened to run the plain access last)."""
    with raises(RaceError, plain_after_every_atomic, "AL-ATOMIC", "AL-WRITE"):
        plain_after_every_atomic[1, 32](np.zeros(1, np.float32), ones, np.zeros(1, np.float32))


# ============================================================================= synccheck


@cuda.jit
def divergent_barrier(out):
    if cuda.threadIdx.x < 16:
        cuda.syncthreads()  # SYNC-A
    else:
        cuda.syncthreads()  # SYNC-B
    out[cuda.threadIdx.x] = 1


def test_synccheck():
    with raises(SyncError, divergent_barrier, "SYNC-A", "SYNC-B"):
        divergent_barrier[1, 32](np.zeros(32, np.float32))


# ============================================================================= launch checks


@cuda.jit
def noop(out):
    pass


BIG = 20 * 1024  # float32 elements: 80 KiB


@cuda.jit
def big_shared(out):
    s = cuda.shared.array(BIG, float32)
    s[cuda.threadIdx.x] = 1.0
    out[0] = 1.0


@cuda.jit
def runtime_shape(out, n):
    acc = cuda.local.array(n, float32)  # SHAPE
    acc[0] = 1.0
    out[0] = acc[0]


def test_too_many_threads_per_block():
    with pytest.raises(LaunchConfigError, match="2048 threads; a block may have at most 1024"):
        noop[1, 2048](np.zeros(1, np.float32))


def test_block_and_grid_dimension_limits():
    with pytest.raises(LaunchConfigError, match="block dimension z is 65"):
        noop[1, (1, 1, 65)](np.zeros(1, np.float32))
    with pytest.raises(LaunchConfigError, match="grid dimension y is 65536"):
        noop[(1, 65536), 1](np.zeros(1, np.float32))


def test_static_shared_memory_limit():
    with pytest.raises(LaunchConfigError, match="81920 bytes of static shared memory"):
        big_shared[1, 1](np.zeros(1, np.float32))


def test_shapes_must_be_compile_time_constants():
    with pytest.raises(LaunchConfigError, match=r"shape `n` .* not a compile-time constant") as e:
        runtime_shape[1, 1](np.zeros(1, np.float32), 4)
    assert at(runtime_shape, "SHAPE") in str(e.value)


def test_error_hierarchy():
    for cls in (RaceError, OutOfBoundsError, UninitializedReadError, SyncError,
                LaunchConfigError):
        assert issubclass(cls, SimulatorError) and issubclass(cls, RuntimeError)
    assert simulator.SyncError is SyncError


# ============================================================================= correct kernels

TILE = 8


@cuda.jit
def tiled_transpose(out, x):
    tile = cuda.shared.array((TILE, TILE + 1), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    bx, by = cuda.blockIdx.x * TILE, cuda.blockIdx.y * TILE
    if by + ty < x.shape[0] and bx + tx < x.shape[1]:
        tile[ty, tx] = x[by + ty, bx + tx]
    cuda.syncthreads()
    if bx + ty < out.shape[0] and by + tx < out.shape[1]:
        out[bx + ty, by + tx] = tile[tx, ty]


@cuda.jit
def tree_sum(out, x):
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    s[t] = x[i] if i < x.size else 0.0
    cuda.syncthreads()
    stride = 32
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[cuda.blockIdx.x] = s[0]


@cuda.jit
def warp_sum(out, x):
    i = cuda.grid(1)
    v = x[i]
    for d in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, d)
    if cuda.laneid == 0:
        out[i // 32] = v


@cuda.jit
def atomic_histogram(h, b):
    i = cuda.grid(1)
    if i < b.size:
        cuda.atomic.add(h, b[i], 1)


@cuda.jit
def grid_stride_scale(out, x):
    for i in range(cuda.grid(1), x.size, cuda.gridsize(1)):
        out[i] = 2 * x[i]


@cuda.jit
def syncwarp_exchange(out):
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    s[t] = t
    cuda.syncwarp()
    out[t] = s[t ^ 1]  # the partner is in the same warp


@cuda.jit
def global_exchange(out, g):
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * cuda.blockDim.x
    g[base + t] = t
    cuda.syncthreads()
    out[base + t] = g[base + (t + 1) % cuda.blockDim.x]


@cuda.jit
def add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


def test_correct_kernels_are_never_flagged():
    x = np.arange(20 * 12, dtype=np.float32).reshape(20, 12)
    out = np.zeros((12, 20), np.float32)
    tiled_transpose[(2, 3), (TILE, TILE)](out, x)
    np.testing.assert_array_equal(out, x.T)

    x = np.arange(100, dtype=np.float32)
    sums = np.zeros(2, np.float32)
    tree_sum[2, 64](sums, x)
    assert sums.sum() == x.sum()

    w = np.zeros(2, np.float32)
    warp_sum[1, 64](w, x[:64])
    np.testing.assert_array_equal(w, [x[:32].sum(), x[32:64].sum()])

    h = np.zeros(4, np.int32)
    atomic_histogram[3, 32](h, np.arange(90) % 4)
    np.testing.assert_array_equal(h, np.bincount(np.arange(90) % 4))

    out = np.zeros(100, np.float32)
    grid_stride_scale[2, 16](out, x)
    np.testing.assert_array_equal(out, 2 * x)

    out = np.zeros(64, np.float32)
    syncwarp_exchange[1, 64](out)
    np.testing.assert_array_equal(out, np.arange(64) ^ 1)

    out, g = np.zeros(64, np.float32), np.zeros(64, np.float32)
    global_exchange[2, 32](out, g)
    np.testing.assert_array_equal(out, np.tile((np.arange(32) + 1) % 32, 2))

    d = cuda.to_device(np.zeros(40, np.float32))
    add_one[2, 32](d)
    add_one[2, 32](d)  # the second launch reads what the first wrote: ordered
    assert (d.copy_to_host() == 2).all()


# ============================================================================= IEEE math


@cuda.jit
def math_edges(out, x, zero):
    out[0] = math.log(x[0])           # log(0) = -inf
    out[1] = math.sqrt(x[1])          # sqrt(-1) = nan
    out[2] = math.exp(x[2])           # exp(1000) = inf
    out[3] = 1.0 / zero               # a Python float argument, divided by 0.0
    out[4] = x[3] / x[0]              # float32 1 / 0
    out[5] = math.log(x[0]) - math.log(x[0])   # -inf - -inf = nan
    out[6] = math.pow(x[0], -1.0)     # pow(0, -1) = inf
    out[7] = type(math.exp(x[3])) is np.float32  # float32 in, float32 out


def test_ieee_math_never_raises_and_keeps_float32():
    out = np.zeros(8, np.float64)
    math_edges[1, 1](out, np.array([0.0, -1.0, 1000.0, 1.0], np.float32), 0.0)
    assert out[0] == -np.inf and np.isnan(out[1]) and out[2] == np.inf
    assert out[3] == np.inf and out[4] == np.inf and np.isnan(out[5]) and out[6] == np.inf
    assert out[7] == 1


def test_tensor_log_of_zero_on_cuda():
    t = minigpu.tensor([0.0, 1.0], device="cuda").log()
    np.testing.assert_array_equal(t.numpy(), [-np.inf, 0.0])


# ============================================================================= block order, closures


@cuda.jit
def record_order(order, counter):
    if cuda.threadIdx.x == 0:
        k = cuda.atomic.add(counter, 0, 1)
        order[k] = cuda.blockIdx.x


def test_blocks_run_in_a_shuffled_seeded_order(monkeypatch):
    runs = []
    for _ in range(2):
        monkeypatch.setattr(sim_launch, "_rng", random.Random(7))
        order = np.zeros(16, np.int32)
        record_order[16, 2](order, np.zeros(1, np.int32))
        runs.append(order.tolist())
    assert sorted(runs[0]) == list(range(16)) and runs[0] != list(range(16))
    assert runs[0] == runs[1]  # same seed, same order


def kernel_factory(cuda):
    """GPU-Puzzles style: the kernel reaches ``cuda`` through a closure, not a global."""
    def call(out, a):
        i = cuda.threadIdx.x
        out[i] = a[i] + 10
    return call


def test_cuda_captured_in_a_closure():
    out = np.zeros(8, np.float32)
    cuda.jit(kernel_factory(cuda))[1, 8](out, np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(out, np.arange(8) + 10)


# ============================================================================= interop, observers


class CAIArray:
    """A stand-in for a tensor exposing ``__cuda_array_interface__`` over NumPy storage."""

    def __init__(self, a):
        self.a = a

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.a.shape, "typestr": self.a.dtype.str,
                "data": (self.a.__array_interface__["data"][0], False),
                "strides": None if self.a.flags.c_contiguous else self.a.strides,
                "version": 3}


@cuda.jit
def fill_index(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = i


def test_cai_argument_aliases_its_memory():
    base = np.zeros(12, np.float32)
    fill_index[1, 8](CAIArray(base[:6]))
    strided = np.zeros(12, np.float32)
    fill_index[1, 8](CAIArray(strided[::2]))
    np.testing.assert_array_equal(base[:6], np.arange(6))
    np.testing.assert_array_equal(strided[::2], np.arange(6))
    assert (strided[1::2] == 0).all()
    assert cuda.is_cuda_array(CAIArray(base)) and not cuda.is_cuda_array(base)
    d = cuda.as_cuda_array(CAIArray(strided[::2]))
    d[0] = 42
    assert strided[0] == 42 and d.shape == (6,)


@needs_checks
def test_cai_argument_is_checked():
    with raises(OutOfBoundsError, oob_global, "OOB-GLOBAL"):
        oob_global[1, 8](CAIArray(np.zeros(6, np.float32)))


@needs_checks
def test_observers_see_every_access(monkeypatch):
    seen = []
    monkeypatch.setattr(memory, "observers", [seen.append])
    x = cuda.to_device(np.arange(4, dtype=np.float32))
    h = np.zeros(2, np.int32)
    grid_stride_scale[1, 4](x, x)
    atomic_histogram[1, 4](h, np.array([0, 1, 1, 0]))
    loads = [a for a in seen if a.kind == "load" and a.array == "x"]
    stores = [a for a in seen if a.kind == "store"]
    assert len(loads) == 4 and len(stores) == 4
    assert sorted(a.offset for a in stores) == [0, 4, 8, 12]
    a = stores[0]
    assert (a.kernel, a.space, a.itemsize) == ("grid_stride_scale", "global", 4)
    assert a.site[1] == line_of(grid_stride_scale, "out[i] = 2 * x[i]")
    assert a.block == (0, 0, 0) and len(a.thread) == 3
    assert sum(a.kind == "atomic" for a in seen) == 4


# ============================================================================= switches


def run_script(code, **env):
    env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=120)


def test_import_minigpu_installs_and_checks_can_be_turned_off():
    code = """
        import numpy as np
        import minigpu
        from minigpu import simulator
        from numba import cuda, float32
        assert simulator.is_installed()

        @cuda.jit
        def k(out):
            s = cuda.shared.array(4, float32)
            t = cuda.threadIdx.x
            out[0] += t                               # a race
            out[1] = cuda.shfl_down_sync(0xFFFFFFFF, t, 1)
            out[2] = s[t - 1]                         # negative index, uninitialised
        out = np.zeros(3, np.float32)
        k[1, 4](out)
        print("ran", np.isnan(out[2]))
    """
    off = run_script(code, NUMBA_ENABLE_CUDASIM="1", MINIGPU_SIM_CHECKS="0")
    assert off.returncode == 0 and "ran True" in off.stdout, off.stderr
    on = run_script(code, NUMBA_ENABLE_CUDASIM="1", MINIGPU_SIM_CHECKS="1")
    assert on.returncode != 0 and "RaceError" in on.stderr, on.stderr


def test_error_classes_import_without_the_simulator():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-c", "import minigpu, sys; "
                           "assert issubclass(minigpu.cuda.RaceError, RuntimeError); "
                           "print('numba.cuda' in sys.modules)"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


@needs_checks
def test_a_specialized_launch_with_other_argument_types_is_refused():
    """A kernel specialized for a key (``blocks.specialized``) takes on a GPU whatever it is
    given as the types of its first launch; the simulator refuses a launch whose argument
    types differ, naming both."""
    from minigpu.backends.cuda import blocks

    @cuda.jit
    def scale(x, s):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = x[i] * s

    x32 = cuda.to_device(np.ones(4, np.float32))
    blocks.launch_specialized(scale, "a key", 1, 32, x32, np.float32(2))
    blocks.launch_specialized(scale, "a key", 1, 32, x32, np.float32(3))  # same types
    np.testing.assert_array_equal(x32.copy_to_host(), 6)
    x64 = cuda.to_device(np.ones(4, np.float64))
    with pytest.raises(TypeError, match=r"scale specialized for key 'a key'.*float64"):
        blocks.launch_specialized(scale, "a key", 1, 32, x64, np.float32(2))


@cuda.jit
def everyone_stores_the_first_value(src, out):
    """Each thread stores out[i] = src[i], then out[0] = src[0]: the same value from every
    thread (benign), over memory that held another value (stumpy's gpu_aamp does this)."""
    i = cuda.threadIdx.x
    out[i] = src[i]
    out[0] = src[0]


@needs_checks
def test_a_thread_switched_out_inside_a_store_gives_no_false_race(monkeypatch):
    """The interpreter may preempt a simulated thread between racecheck's verdict on a store
    and the store itself. Forced here (every store yields the interpreter first): another
    thread storing the same value must still see that value in memory, not a race."""
    import time
    store = memory._store

    def slow_store(a, idx, value):
        time.sleep(0.0005)  # switch to the other threads mid-store
        store(a, idx, value)

    monkeypatch.setattr(memory, "_store", slow_store)
    src = np.arange(1, 9, dtype=np.float32)
    out = np.full(8, -1, np.float32)
    everyone_stores_the_first_value[1, 8](src, out)
    np.testing.assert_array_equal(out, np.r_[src[0], src[1:]])
