"""Patterns from code written outside this project (issue 53): kernels a GPU runs as written,
which the simulator must run the same way, and real bugs in that code which it must report.
Each kernel here is written for the test, showing the pattern; launches are small.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import importlib  # noqa: E402
import inspect  # noqa: E402
from math import sqrt  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda, int32, njit  # noqa: E402
from numba.cuda.core.errors import TypingError  # noqa: E402
from numba.cuda.random import (create_xoroshiro128p_states,  # noqa: E402
                               xoroshiro128p_uniform_float32)

import minigpu  # noqa: E402,F401  (installs the simulator)
from minigpu.cuda import (OutOfBoundsError, RaceError, SyncError,  # noqa: E402
                          UninitializedReadError)
from minigpu.simulator import config  # noqa: E402

pytestmark = pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="tests the CUDA simulator")
needs_checks = pytest.mark.skipif(not config.CHECKS, reason="MINIGPU_SIM_CHECKS=0")


def at(kernel, marker):
    """``file:line`` of the source line of ``kernel`` carrying the comment ``marker``."""
    fn = getattr(kernel, "py_func", kernel)
    lines, start = inspect.getsourcelines(fn)
    line = start + next(i for i, text in enumerate(lines) if marker in text)
    return f"{os.path.basename(__file__)}:{line}"


def message_of(error, launch):
    """The message of the ``error`` that ``launch()`` must raise."""
    with pytest.raises(error) as info:
        launch()
    return str(info.value)


# ============================================================================= plain loads of
# global memory that other threads update with atomics


@cuda.jit
def fold_then_atomic(best, total, x):
    """Each thread reads the current minimum with a plain load, folds its value in and
    publishes it with an atomic; other threads' atomics race the load, and any value it sees
    gives the right final result."""
    i = cuda.grid(1)
    seen = best[0]
    mine = min(seen, x[i])
    cuda.atomic.min(best, 0, mine)
    cuda.atomic.max(best, 1, max(best[1], x[i]))
    cuda.atomic.add(total, 0, x[i] + 0 * total[0])


@needs_checks
def test_a_plain_load_racing_only_atomics_on_global_memory_is_not_a_race():
    x = np.random.default_rng(0).integers(-100, 100, 64).astype(np.int32)
    best = np.array([1000, -1000], np.int32)
    total = np.zeros(1, np.int32)
    fold_then_atomic[2, 32](best, total, x)
    assert best.tolist() == [x.min(), x.max()]
    assert total[0] == x.sum()


@cuda.jit
def plain_store_among_atomics(best, x):
    i = cuda.grid(1)
    cuda.atomic.min(best, 0, x[i])  # PS-ATOMIC
    if i == 40:
        best[0] = x[i]  # PS-STORE


@cuda.jit
def plain_read_modify_write(best, x):
    i = cuda.grid(1)
    if x[i] < best[0]:  # RMW-READ
        best[0] = x[i]  # RMW-WRITE


@cuda.jit
def shared_load_racing_atomic(out):
    s = cuda.shared.array(1, int32)
    t = cuda.threadIdx.x
    if t == 0:
        s[0] = 0
    cuda.syncthreads()
    cuda.atomic.add(s, 0, 1)  # SH-ATOMIC
    out[t] = s[0]  # SH-READ


@needs_checks
@pytest.mark.parametrize("kernel, markers", [
    (plain_store_among_atomics, ("PS-ATOMIC", "PS-STORE")),
    (plain_read_modify_write, ("RMW-WRITE",)),
])
def test_plain_stores_racing_atomics_or_plain_loads_stay_races(kernel, markers):
    x = np.arange(64, 0, -1).astype(np.int32)
    msg = message_of(RaceError, lambda: kernel[2, 32](np.array([1000], np.int32), x))
    assert "global array 'best' at index 0" in msg, msg
    for m in markers:
        assert at(kernel, m) in msg, msg


@needs_checks
def test_in_shared_memory_a_plain_load_racing_an_atomic_stays_a_race():
    out = np.zeros(32, np.int32)
    msg = message_of(RaceError, lambda: shared_load_racing_atomic[1, 32](out))
    assert at(shared_load_racing_atomic, "SH-ATOMIC") in msg
    assert at(shared_load_racing_atomic, "SH-READ") in msg


# ============================================================================= a grid sync that
# only some blocks of a cooperative launch reach


@cuda.jit
def grid_sync_in_some_blocks(out):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    out[i] = 1
    if cuda.blockIdx.x < 2:
        g.sync()  # GRID-SYNC (blocks 2 and 3 never come)
        out[i] += out[(i + 32) % out.size]


def test_a_grid_sync_that_some_blocks_never_reach_is_a_deadlock():
    out = np.zeros(128, np.int32)
    msg = message_of(SyncError, lambda: grid_sync_in_some_blocks[4, 32](out))
    assert "kernel 'grid_sync_in_some_blocks'" in msg and "hangs" in msg, msg
    assert at(grid_sync_in_some_blocks, "GRID-SYNC") in msg, msg
    assert "ended without arriving ((2, 0, 0), (3, 0, 0))" in msg.replace(
        "((3, 0, 0), (2, 0, 0))", "((2, 0, 0), (3, 0, 0))"), msg


@cuda.jit
def grid_sync_in_every_block(out, staged):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    staged[i] = i
    g.sync()
    if cuda.blockIdx.x == 0:
        return  # ends after the last grid sync: fine
    out[i] = staged[(i + 32) % out.size]


def test_blocks_ending_after_the_last_grid_sync_are_fine():
    out = np.zeros(96, np.int32)
    grid_sync_in_every_block[3, 32](out, np.zeros(96, np.int32))
    i = np.arange(96)
    assert (out == np.where(i < 32, 0, (i + 32) % 96)).all()


# ============================================================================= record arrays:
# the states of numba.cuda.random


@cuda.jit
def draw_each_from_its_own_state(out, states):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = xoroshiro128p_uniform_float32(states, i)


@cuda.jit
def draw_all_from_state_zero(out, states):
    i = cuda.grid(1)
    out[i] = xoroshiro128p_uniform_float32(states, 0)  # SHARED-STATE


@cuda.jit
def draw_past_the_states(out, states):
    i = cuda.grid(1)
    out[i] = xoroshiro128p_uniform_float32(states, i + 1)  # PAST-END


@cuda.jit
def fields_as_arrays(pairs, a, b):
    i = cuda.grid(1)
    a[i] = pairs.key[i]
    b[i] = pairs.weight[i + 1]  # FIELD-ARRAY (past the end in the last thread)


@cuda.jit
def swap_fields(pairs):
    i = cuda.grid(1)
    p = pairs[i]
    p.key, p["weight"] = p["weight"], p.key
    pairs[(i + 1) % pairs.size] = pairs[i]  # WHOLE-RECORD


PAIR = np.dtype([("key", np.int32), ("weight", np.float32)])


def test_record_arrays_per_thread_use_runs_as_on_a_gpu():
    states = create_xoroshiro128p_states(64, seed=7)
    out = np.zeros(64, np.float32)
    draw_each_from_its_own_state[2, 32](out, states)
    host = create_xoroshiro128p_states(64, seed=7).copy_to_host()
    expected = [xoroshiro128p_uniform_float32(host, i) for i in range(64)]  # on the CPU
    assert np.array_equal(out, np.array(expected, np.float32))
    assert np.array_equal(states.copy_to_host(), host)  # each state advanced as on the CPU


@needs_checks
def test_every_thread_drawing_from_one_rng_state_is_a_race():
    states = create_xoroshiro128p_states(4, seed=1)
    out = np.zeros(32, np.float32)
    msg = message_of(RaceError, lambda: draw_all_from_state_zero[1, 32](out, states))
    assert "global array 'states' at index 0, field 's" in msg, msg
    assert at(draw_all_from_state_zero, "SHARED-STATE") in msg, msg


@needs_checks
def test_a_record_index_past_the_end_is_out_of_bounds():
    states = create_xoroshiro128p_states(32, seed=1)
    out = np.zeros(32, np.float32)
    msg = message_of(OutOfBoundsError, lambda: draw_past_the_states[1, 32](out, states))
    assert "global array 'states' at index 32 (shape (32,)" in msg, msg
    assert "thread (31, 0, 0)" in msg, msg


@needs_checks
def test_record_fields_and_whole_records_are_checked_accesses():
    pairs = np.zeros(4, PAIR)
    pairs["key"], pairs["weight"] = np.arange(4), np.arange(4) + 0.5
    one = pairs[:1].copy()
    swap_fields[1, 1](one)
    assert one[0]["key"] == 0 and one[0]["weight"] == 0.0
    msg = message_of(RaceError, lambda: swap_fields[1, 4](pairs))
    assert at(swap_fields, "WHOLE-RECORD") in msg, msg
    a, b = np.zeros(3, np.int32), np.zeros(3, np.float32)
    fields_as_arrays[1, 3](pairs, a, b)
    assert a.tolist() == pairs["key"][:3].tolist() and b.tolist() == pairs["weight"][1:].tolist()
    a, b = np.zeros(4, np.int32), np.zeros(4, np.float32)
    msg = message_of(OutOfBoundsError, lambda: fields_as_arrays[1, 4](pairs, a, b))
    assert "global array 'pairs' at index 4, field 'weight'" in msg, msg
    assert at(fields_as_arrays, "FIELD-ARRAY") in msg, msg


# ============================================================================= constant memory

WEIGHTS = np.array([0.25, 0.5, 0.25], np.float32)


@cuda.jit
def smooth_with_constants(out, x):
    w = cuda.const.array_like(WEIGHTS)
    i = cuda.grid(1)
    if 1 <= i < x.size - 1:
        out[i] = w[0] * x[i - 1] + w[1] * x[i] + w[2] * x[i + 1]


@cuda.jit
def store_into_constants(out):
    w = cuda.const.array_like(WEIGHTS)
    w[0] = 1.0  # CONST-STORE
    out[0] = w[0]


@cuda.jit
def atomic_on_constants(out):
    w = cuda.const.array_like(WEIGHTS)
    out[0] = cuda.atomic.add(w, 1, 1.0)  # CONST-ATOMIC


def test_constant_arrays_are_read_as_on_a_gpu():
    x = np.arange(8, dtype=np.float32) ** 2
    out = np.zeros(8, np.float32)
    with minigpu.cuda.counters() as launches:  # constant loads are not global traffic
        smooth_with_constants[1, 8](out, x)
    assert np.allclose(out[1:-1], 0.25 * x[:-2] + 0.5 * x[1:-1] + 0.25 * x[2:])
    assert launches[0].metrics["global_load_requests"] == 3


@pytest.mark.parametrize("kernel, marker", [(store_into_constants, "CONST-STORE"),
                                            (atomic_on_constants, "CONST-ATOMIC")])
def test_a_store_into_a_constant_array_is_refused_as_numba_refuses_it(kernel, marker):
    msg = message_of(TypingError, lambda: kernel[1, 1](np.zeros(1, np.float32)))
    assert "constant array 'w' at index " in msg and "read-only" in msg, msg
    assert "Cannot modify readonly array of type: readonly array(float32, 1d, C)" in msg, msg
    assert at(kernel, marker) in msg, msg
    assert WEIGHTS.tolist() == [0.25, 0.5, 0.25]  # unchanged


# ============================================================================= what a GPU runs
# as written: the numba module, math names, configure, jit keywords, @njit helpers


@cuda.jit
def through_the_numba_module(out):
    s = numba.cuda.shared.array(32, numba.float32)
    t = numba.cuda.threadIdx.x
    s[t] = numba.cuda.grid(1)
    numba.cuda.syncthreads()
    out[numba.cuda.grid(1)] = s[31 - t]


@cuda.jit
def imports_inside_the_kernel(out, x):
    from math import log as natural_log
    import math
    from numba import cuda as device
    i = device.grid(1)
    out[i] = sqrt(x[i]) + natural_log(x[i]) + math.exp(1000.0 * x[i])


def test_the_numba_module_and_imports_inside_a_kernel_run_as_on_a_gpu():
    out = np.zeros(64, np.float32)
    through_the_numba_module[2, 32](out)
    assert out.tolist() == [32 * (i // 32) + 31 - i % 32 for i in range(64)]
    x = np.array([-1.0, 0.0, 4.0], np.float32)
    out = np.zeros(3, np.float32)
    imports_inside_the_kernel[1, 3](out, x)  # sqrt(-1) nan, log(0) -inf, exp(4000) inf: IEEE
    assert np.isnan(out[0]) and out[1] == -np.inf and out[2] == np.inf


def test_configure_and_numba_cuda_jit_keywords():
    def fill(out, v):
        out[cuda.grid(1)] = v

    for options in [dict(lineinfo=True), dict(debug=False, opt=True), dict(fastmath=True),
                    dict(cache=True), dict(max_registers=32), dict(inline=True),
                    dict(inline="always"), dict(forceinline=True), dict(launch_bounds=(64,)),
                    dict(lto=False), dict(link=[]), dict(extensions=[])]:
        for kernel in (cuda.jit(**options)(fill), cuda.jit("void(float32[:], float32)",
                                                           **options)(fill)):
            out = np.zeros(64, np.float32)
            kernel.configure(2, 32)(out, 1.5)
            assert (out == 1.5).all(), options


@njit
def neighbours_sum(a, i):
    return a[i] + a[i + 1]  # NJIT-LOAD


@cuda.jit
def calls_a_cpu_function(out, x):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = neighbours_sum(x, i)


def test_an_njit_function_called_from_a_kernel_is_a_checked_device_function():
    x = np.arange(33, dtype=np.float32)
    out = np.zeros(32, np.float32)
    calls_a_cpu_function[1, 32](out, x)
    assert (out == x[:-1] + x[1:]).all()
    if config.CHECKS:
        msg = message_of(OutOfBoundsError, lambda: calls_a_cpu_function[1, 32](out, x[:32]))
        assert "global array 'x' at index 32" in msg and "thread (31, 0, 0)" in msg, msg
        assert at(neighbours_sum, "NJIT-LOAD") in msg, msg


@cuda.jit
def set_in_some_threads(out):
    i = cuda.grid(1)
    if i < 16:
        v = 2.0 * i
    out[i] = v  # UNSET-USE (threads 16..31 never set v)


def test_a_local_set_only_in_some_threads_is_an_uninitialised_value():
    out = np.zeros(32, np.float32)
    msg = message_of(UninitializedReadError, lambda: set_in_some_threads[1, 32](out))
    assert "read local variable 'v'" in msg and "never assigned it" in msg, msg
    assert at(set_in_some_threads, "UNSET-USE") in msg, msg
    assert "thread (16, 0, 0)" in msg, msg


# ============================================================================= strict mode


@cuda.jit
def early_return_before_barrier(out, x):
    s = cuda.shared.array(32, int32)
    i = cuda.grid(1)
    if i >= x.size:
        return  # threads past the end leave before the barrier
    s[i] = x[i]
    cuda.syncthreads()  # EARLY-BARRIER
    out[i] = s[x.size - 1 - i]


@cuda.jit
def barrier_in_a_data_branch(out, x):
    s = cuda.shared.array(32, int32)
    t = cuda.threadIdx.x
    if x[t] > 0:  # DATA-BRANCH
        s[t] = x[t]
        cuda.syncthreads()  # BRANCH-BARRIER
        out[t] = s[(t + 2) % 32] if x[(t + 2) % 32] > 0 else -1


def test_strict_mode_reports_barriers_that_exited_threads_never_reached(monkeypatch):
    x = np.arange(20, dtype=np.int32)
    data = np.where(np.arange(32) % 2 == 0, 1, 0).astype(np.int32)
    for strict in (False, True):
        monkeypatch.setattr(config, "STRICT", strict)
        out = np.zeros(20, np.int32)
        branch_out = np.zeros(32, np.int32)
        if not strict:  # what Volta+ does: both complete
            early_return_before_barrier[1, 32](out, x)
            assert out.tolist() == x[::-1].tolist()
            barrier_in_a_data_branch[1, 32](branch_out, data)
            assert branch_out.tolist() == [1 if t % 2 == 0 else 0 for t in range(32)]
            continue
        msg = message_of(SyncError, lambda: early_return_before_barrier[1, 32](out, x))
        assert at(early_return_before_barrier, "EARLY-BARRIER") in msg, msg
        assert "reached by 20 of the block's 32 threads" in msg and "tid 20-31" in msg, msg
        assert "early `return`" in msg and "Volta" in msg and "undefined" in msg, msg
        msg = message_of(SyncError, lambda: barrier_in_a_data_branch[1, 32](branch_out, data))
        assert at(barrier_in_a_data_branch, "BRANCH-BARRIER") in msg, msg
        line = at(barrier_in_a_data_branch, "DATA-BRANCH").split(":")[1]
        assert f"inside the `if` at line {line}" in msg and "divergent barrier" in msg, msg


def test_strict_mode_is_off_by_default_and_read_from_the_environment(monkeypatch):
    saved = vars(config).copy()
    try:
        for value, strict in (("1", True), ("0", False), (None, False)):
            if value is None:
                monkeypatch.delenv("MINIGPU_SIM_STRICT", raising=False)
            else:
                monkeypatch.setenv("MINIGPU_SIM_STRICT", value)
            assert importlib.reload(config).STRICT is strict
    finally:
        vars(config).update(saved)
