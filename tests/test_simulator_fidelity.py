"""``import minigpu`` never changes what a correct kernel does (issue 29).

One regression test per cause found by running numba-cuda's own suite and stumpy's GPU tests
under minigpu (``tools/outside/``): the checked array behaves as the stock simulator's array;
scalars and compile-time constants are typed as Numba types them; ``cg.this_grid().sync()`` is
a grid-wide barrier; and the sanitizer's rules (``minigpu/simulator/rules.py``) flag only what
is wrong: a constant negative index wraps, same-value stores are benign, an uninitialised
value is reported when it is used. Each test also checks the bug it must still catch.
"""
import os
import sys

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, float32, int32  # noqa: E402

import minigpu  # noqa: E402,F401  (installs the simulator)
from minigpu.cuda import (LaunchConfigError, OutOfBoundsError, RaceError,  # noqa: E402
                          UninitializedReadError)
from minigpu.simulator import config, launch, memory  # noqa: E402

pytestmark = [pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="tests the simulator"),
              pytest.mark.skipif(not config.CHECKS, reason="MINIGPU_SIM_CHECKS=0")]

GLOBAL_N = 8
NEG = -1


# ============================================================================= the checked array


def test_no_attribute_of_the_stock_array_is_missing():
    """Every attribute a kernel can reach on the stock simulator's array (its
    ``FakeCUDAArray``, ``FakeWithinKernelCUDAArray`` and the NumPy array they wrap) exists on
    the checked proxy."""
    from numba.cuda.simulator.cudadrv import devicearray as stock
    arr = memory.Array(np.zeros((3, 4), np.float32), "a", "global", None)
    names = set(dir(stock.FakeCUDAArray)) | set(dir(stock.FakeWithinKernelCUDAArray)) | set(
        dir(np.ndarray))
    internal = {"__dict__", "__weakref__", "__init__", "__module__", "__slots__",
                "_FakeWithinKernelCUDAArray__wrap_if_fake", "__getstate__", "__reduce__",
                "__reduce_ex__", "__setstate__", "__class_getitem__", "__init_subclass__"}
    missing = sorted(n for n in names - internal if not hasattr(arr, n))
    assert missing == []


@cuda.jit
def ufunc_kernel(out, x, y, cmp, n):
    np.arccos(x, out)              # a NumPy ufunc writing into an out array, as test_ufuncs does
    np.greater(x, y, cmp)
    n[0] = x.nbytes + x.size + x.ndim + x.itemsize + len(x) + x.shape[0] + x.strides[0]


def test_numpy_ufuncs_and_attributes_inside_a_kernel():
    x = np.linspace(-1, 1, 5).astype(np.float32)
    y = np.zeros(5, np.float32)
    out, cmp, n = np.zeros(5, np.float32), np.zeros(5, np.bool_), np.zeros(1, np.int64)
    ufunc_kernel[1, 1](out, x, y, cmp, n)
    np.testing.assert_allclose(out, np.arccos(x), rtol=1e-6)
    np.testing.assert_array_equal(cmp, x > y)
    assert n[0] == 20 + 5 + 1 + 4 + 5 + 5 + 4


@cuda.jit
def protocols_kernel(out, x):
    total = 0.0
    for v in x:                          # iteration: each element load is checked
        total += v
    out[0] = total
    out[1] = (x > 1.5).sum()             # a comparison is elementwise, as on NumPy
    out[2] = np.sum(x)                   # __array_function__
    out[3] = x.T[1]                      # views are checked proxies
    out[4] = x.copy_to_host()[2]         # the stock FakeCUDAArray's API


def test_iteration_comparisons_views_and_copy_to_host():
    x = np.array([1, 2, 3], np.float32)
    out = np.zeros(5, np.float32)
    protocols_kernel[1, 1](out, x)
    np.testing.assert_array_equal(out, [6, 2, 6, 2, 3])


@cuda.jit
def view_oob(out, x):
    tail = x[2:]
    out[0] = tail[4]                     # x has 6 elements: tail[4] is x[6], out of bounds


def test_a_view_is_still_checked():
    with pytest.raises(OutOfBoundsError, match=r"global array 'x' at index 4 \(shape \(4,\)"):
        view_oob[1, 1](np.zeros(1, np.float32), np.zeros(6, np.float32))


@cuda.jit
def atomic_on_parts(z):
    cuda.atomic.add(z.real, 0, 1.0)
    cuda.atomic.add(z.imag, 0, 2.0)


def test_atomics_on_the_real_and_imaginary_parts_of_a_complex_array():
    z = np.zeros(1, np.complex64)
    atomic_on_parts[1, 16](z)
    assert z[0] == 16 + 32j


def test_cuda_array_interface_of_the_proxy():
    a = np.arange(4, dtype=np.float32)
    arr = memory.Array(a, "a", "global", None)
    cai = arr.__cuda_array_interface__
    assert cai["shape"] == (4,) and cai["typestr"] == "<f4"
    assert cai["data"][0] == a.__array_interface__["data"][0]


# ============================================================================= typing


def round_to(ary, c, ndigits):
    ary[0] = round(c, ndigits)


def test_float32_stays_float32_through_round():
    """numba-cuda's test_round_to_f4_halfway: 0.3425 as a float32 is 0.34250000119..., which
    Numba's round (CPython's algorithm in float64) takes to 0.343."""
    kernel = cuda.jit("void(float32[:], float32, int32)")(round_to)
    ary = np.zeros(1, np.float32)
    kernel[1, 1](ary, 0.3425, 3)
    assert ary[0] == np.float32(0.343)


@cuda.jit
def math_types(out, x):
    v = x[0]
    out[0] = 1.0 if type(math.sqrt(v)) is np.float32 and type(round(v, 2)) is np.float32 \
        else 0.0


def test_math_and_round_keep_float32():
    out = np.zeros(1, np.float32)
    math_types[1, 1](out, np.array([2.0], np.float32))
    assert out[0] == 1


@cuda.jit(device=True)
def widen(v):
    return float32(v) + int32(1)


@cuda.jit
def numba_scalar_types(out, x):
    i = cuda.threadIdx.x
    local = cuda.local.array(2, float32)
    local[0] = widen(x[i])
    out[i] = local[0] if type(local[0]) is np.float32 and type(int32(x[i])) is np.int32 else -1


def test_numba_scalar_types_cast_as_numpy_and_are_restored_after_the_launch():
    """``float32(x)`` in a kernel or device function is NumPy's cast (the simulator swaps the
    Numba type for it while the launch runs, with the device function's other swaps) and
    after the launch the module's globals hold Numba's types and ``numba.cuda`` again."""
    x = np.arange(4, dtype=np.float64) + 0.5
    out = np.zeros(4, np.float32)
    numba_scalar_types[1, 4](out, x)
    np.testing.assert_array_equal(out, (x + 1).astype(np.float32))
    from numba.core import types
    assert globals()["float32"] is types.float32 and globals()["int32"] is types.int32
    assert globals()["cuda"] is sys.modules["numba.cuda"]


@cuda.jit(device=True)
def plus_one(v):
    return v + 1


@cuda.jit
def grid_plus_one(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = plus_one(i)


def test_a_device_function_called_on_the_host_first_leaves_the_modules_kernels_intact():
    """A device function called from host code runs with no kernel's ``cuda``; the module's
    kernels launched after it must still see the simulator's ``cuda`` (``cuda.grid``)."""
    launch._swap_keys.pop(id(globals()), None)  # as if nothing of this module had run yet
    assert plus_one(41) == 42
    out = np.zeros(5, np.int64)
    grid_plus_one[2, 4](out)
    np.testing.assert_array_equal(out, np.arange(1, 6))


@cuda.jit
def local_constant_shapes(out):
    n = 16
    shape = (n, 2)
    s = cuda.shared.array(n, int32)
    t = cuda.shared.array(shape, float32)
    g = cuda.shared.array(GLOBAL_N, int32)
    i = cuda.threadIdx.x
    s[i] = i
    t[i, 1] = 2 * i
    if i < GLOBAL_N:
        g[i] = i
    cuda.syncthreads()
    out[i] = s[15 - i] + t[i, 1]


@cuda.jit
def shape_from_argument(out, n):
    s = cuda.shared.array(n, int32)
    s[0] = 1
    out[0] = s[0]


def test_shared_array_shapes_from_local_constants():
    out = np.zeros(16, np.int32)
    local_constant_shapes[1, 16](out)
    np.testing.assert_array_equal(out, 15 - np.arange(16) + 2 * np.arange(16))
    with pytest.raises(LaunchConfigError, match="not a compile-time constant"):
        shape_from_argument[1, 1](np.zeros(1, np.int32), 4)


# ============================================================================= launches


def sequential_rows(m):
    """numba's documentation example: each row from the previous one, a grid sync between."""
    col = cuda.grid(1)
    g = cuda.cg.this_grid()
    for row in range(1, m.shape[0]):
        m[row, col] = m[row - 1, m.shape[1] - col - 1] + 1
        g.sync()


def test_grid_sync_is_a_grid_wide_barrier():
    kernel = cuda.jit((int32[:, ::1],))(sequential_rows)
    m = np.zeros((6, 32), np.int32)
    kernel[4, 8](m)
    np.testing.assert_array_equal(m, np.tile(np.arange(6), (32, 1)).T)


def test_a_cooperative_grid_too_large_to_be_resident_is_refused():
    kernel = cuda.jit((int32[:, ::1],))(sequential_rows)
    most = kernel.overloads[(int32[:, ::1],)].max_cooperative_grid_blocks(1024)
    assert most == kernel.overloads[(int32[:, ::1],)].max_cooperative_grid_blocks((32, 32))
    with pytest.raises(LaunchConfigError, match="cooperative launch"):
        kernel[most + 1, 1024](np.zeros((2, (most + 1) * 1024), np.int32))


def oob_after_grid_sync(x):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    x[i] = 1
    g.sync()
    if cuda.blockIdx.x == 1:
        x[i + 100] = 2                    # out of bounds while the other blocks wait
    g.sync()


def test_an_error_in_one_block_of_a_cooperative_launch_is_raised():
    kernel = cuda.jit(oob_after_grid_sync)
    with pytest.raises(OutOfBoundsError, match="block \\(1, 0, 0\\)"):
        kernel[3, 4](np.zeros(12, np.int32))


@cuda.jit
def increment(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


def heat_steps(buf_0, buf_1, steps, k):
    """numba's Laplace documentation example (a forall launch with a grid sync per step)."""
    i = cuda.grid(1)
    if i >= len(buf_0):
        return
    grid = cuda.cg.this_grid()
    for step in range(steps):
        data, next_data = (buf_0, buf_1) if step % 2 == 0 else (buf_1, buf_0)
        left = data[i - 1] if i > 0 else 0.0
        right = data[i + 1] if i < len(data) - 1 else 0.0
        next_data[i] = data[i] + k * (left - 2 * data[i] + right)
        grid.sync()


def test_forall():
    x = np.arange(11)
    increment.forall(x.size)(x)
    np.testing.assert_array_equal(x, np.arange(11) + 1)
    increment.forall(0)(x)                         # no work: no launch
    with pytest.raises(ValueError, match="negative task count"):
        increment.forall(-1)


def test_forall_of_a_cooperative_kernel_runs_as_on_a_gpu():
    """forall picks blocks as the driver does, so the grid barrier orders every step."""
    data = np.zeros(33)
    data[16] = 100.0
    buf_0, buf_1 = cuda.to_device(data), cuda.to_device(np.zeros(33))
    cuda.jit(heat_steps).forall(33)(buf_0, buf_1, 4, 0.25)
    expect, nxt = data.copy(), np.zeros(33)
    for _ in range(4):
        padded = np.concatenate([[0.0], expect, [0.0]])
        nxt = expect + 0.25 * (padded[:-2] - 2 * expect + padded[2:])
        expect = nxt
    np.testing.assert_allclose(buf_0.copy_to_host(), expect)


# ============================================================================= negative indices


@cuda.jit
def last_column(out, profile):
    i = cuda.grid(1)
    if i < profile.shape[0]:
        out[i] = profile[i, -1] + profile[i, NEG]      # a literal and a constant: they wrap


@cuda.jit
def previous(out, x):
    s = cuda.shared.array(8, float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    out[t] = s[t - 1]                                  # computed: thread 0 reads s[-1]


@cuda.jit
def shifted_then_fixed(out, x):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i - 1] * 2            # at i = 0 this reads x[-1] (wrapped) ...
        out[0] = x[0]                    # ... and the value is overwritten before anyone sees it


def test_a_computed_negative_load_whose_value_is_never_used_is_fine():
    """stumpy's gpu_stump: QT_out[i] = QT_in[i - 1] ... at i = 0, then QT_out[0] = QT_first[j]."""
    x = np.arange(1, 9, dtype=np.float32)
    out = np.zeros(8, np.float32)
    shifted_then_fixed[1, 8](out, x)
    expect = 2 * np.roll(x, 1)
    expect[0] = x[0]
    np.testing.assert_array_equal(out, expect)


def test_a_negative_literal_or_constant_index_wraps_as_on_a_gpu():
    profile = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = np.zeros(4, np.float32)
    last_column[1, 4](out, profile)
    np.testing.assert_array_equal(out, 2 * profile[:, -1])


def test_a_computed_negative_index_is_still_flagged_with_the_rule():
    with pytest.raises(OutOfBoundsError, match="(?s)computed negative index.*literal or a constant"):
        previous[1, 8](np.zeros(8, np.float32), np.ones(8, np.float32))


# ============================================================================= same-value stores


@cuda.jit
def everyone_stores_the_total(out, a, b):
    cache = cuda.shared.array(8, float32)
    t = cuda.threadIdx.x
    cache[t] = a[t] * b[t]
    cuda.syncthreads()
    if t == 0:
        acc = float32(0)
        for k in range(8):
            acc += cache[k]
        cache[0] = acc
    cuda.syncthreads()
    total = cache[0]
    cuda.syncthreads()
    cache[1] = total                 # every thread stores the same value to one shared element
    out[0] = total                   # ... and to one global element, from every block


@cuda.jit
def everyone_stores_its_id(out):
    out[0] = cuda.grid(1)


@cuda.jit
def store_read_store(out, flag):
    t = cuda.threadIdx.x
    if t == 0:
        out[0] = 1.0
    if t == 1:
        flag[0] = out[0]             # another thread reads between the two stores
    if t == 2:
        out[0] = 1.0


@cuda.jit
def broadcast_through_global(ary):
    i = cuda.grid(1)
    if i == 0:
        ary[0] = 42
    cuda.syncwarp(0xFFFFFFFF)
    ary[i] = ary[0]                  # lane 0 stores back the value every lane reads


def test_same_value_stores_are_benign():
    ary = np.zeros(32, np.int32)
    broadcast_through_global[1, 32](ary)
    assert (ary == 42).all()
    a = np.arange(8, dtype=np.float32)
    out = np.zeros(1, np.float32)
    everyone_stores_the_total[3, 8](out, a, a)
    assert out[0] == float(a @ a)


def test_different_values_or_a_read_between_stay_races():
    with pytest.raises(RaceError, match="(?s)write-after-write.*different values"):
        everyone_stores_its_id[1, 4](np.zeros(1, np.int64))
    with pytest.raises(RaceError):
        store_read_store[1, 4](np.zeros(1, np.float32), np.zeros(1, np.float32))


# ============================================================================= indeterminate values


@cuda.jit
def read_but_discard(out):
    s = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    v = s[t]                          # uninitialised, but never used
    s[t] = t
    out[t] = s[t] + 0 * t
    unused = v * 2                    # noqa: F841  (arithmetic on it is not a use)


@cuda.jit
def uninit_then(out, how):
    s = cuda.shared.array(4, int32)
    v = s[cuda.threadIdx.x]           # READ
    if how == 0:
        out[0] = v + 1
    elif how == 1:
        if v > 0:
            out[0] = 1
    elif how == 2:
        out[0] = out[v]
    elif how == 3:
        cuda.atomic.add(out, 0, v)
    elif how == 4:
        out[0] = cuda.syncthreads_count(v)
    elif how == 5:
        for _ in range(v):
            out[0] = 1


@cuda.jit
def through_a_local(out):
    s = cuda.shared.array(4, float32)
    acc = cuda.local.array(2, float32)
    acc[0] = s[cuda.threadIdx.x] * 2  # READ-LOCAL: indeterminate, kept in the thread's local
    out[0] = acc[0]                   # used: stored to global memory


@cuda.jit
def scratch_then_overwrite(out):
    s = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    out[t] = s[t]                     # garbage stored ...
    out[t] = t                        # ... and overwritten by the same thread: never observed


@cuda.jit
def pass_garbage_on(out):
    s = cuda.shared.array(4, float32)
    t = cuda.threadIdx.x
    if t == 0:
        s[1] = s[0] + 1               # STORE-GARBAGE: thread 0 stores an indeterminate value
    cuda.syncthreads()
    if t == 1:
        v = s[1]                      # READ-BY-OTHER: thread 1 reads it: a use
        out[0] = 0 * v


def test_an_uninitialised_value_that_is_not_used_is_not_reported():
    out = np.zeros(4, np.float32)
    scratch_then_overwrite[1, 4](out)
    np.testing.assert_array_equal(out, np.arange(4))
    out = np.zeros(4, np.float32)
    read_but_discard[1, 4](out)
    np.testing.assert_array_equal(out, np.arange(4))


@pytest.mark.parametrize("how, use", [(0, "stored to global array 'out'"),
                                      (1, "tested in a condition"), (2, "used as an index"),
                                      (3, "given to an atomic"), (4, "predicate"),
                                      (5, "loop bound")])
def test_an_uninitialised_value_is_reported_when_used(how, use):
    with pytest.raises(UninitializedReadError, match="read shared array 's' at index 0") as e:
        uninit_then[1, 1](np.zeros(4, np.int32), how)
    assert use in str(e.value)


def test_an_uninitialised_value_read_by_another_thread_is_reported():
    with pytest.raises(UninitializedReadError, match="read there by thread \\(1, 0, 0\\)"):
        pass_garbage_on[1, 4](np.zeros(1, np.float32))


def test_the_report_names_the_first_read_even_through_a_local_array():
    with pytest.raises(UninitializedReadError) as e:
        through_a_local[1, 1](np.zeros(1, np.float32))
    msg = str(e.value)
    assert "read shared array 's' at index 0" in msg and "stored to global array 'out'" in msg


def test_a_kernels_print_writes_each_call_whole(capsys):
    """CUDA's printf is atomic per call; Python's print writes each argument apart, so threads
    switching mid-call would mix their lines (numba-cuda's test_print.test_string). A tiny
    switch interval makes such switches frequent."""
    @cuda.jit
    def shout():
        i = cuda.grid(1)
        for _ in range(20):
            print(i, "hop!", 999, sep=" ")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        shout[2, 32]()
        cuda.synchronize()
    finally:
        sys.setswitchinterval(interval)
    lines = capsys.readouterr().out.splitlines()
    assert sorted(lines) == sorted(f"{i} hop! 999" for i in range(64) for _ in range(20))
