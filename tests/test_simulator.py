"""The patched CUDA simulator (``minigpu/simulator/``) as a test bench: warp intrinsics, barriers.

Each warp intrinsic is checked against a NumPy model of a warp: lanes are 32 consecutive linear
thread ids, the last warp of a block may be partial, a mask names the lanes taking part, and a
lane that reads from a lane not taking part gets poison (NaN). Then: poisoned shared memory,
blocking barriers (exited threads count as arrived; a barrier in a divergent branch or a
deadlock raises ``SyncError``), and the install switch itself. The sanitizer checks have
their own corpus in ``test_simulator_checks.py``.
"""
import os

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import inspect  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings, strategies as st  # noqa: E402
from numba import cuda, float32, int32  # noqa: E402

from minigpu import simulator  # noqa: E402
from minigpu.simulator import config, launch as sim_launch, patch as sim_patch  # noqa: E402

pytestmark = pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="tests the CUDA simulator")
needs_checks = pytest.mark.skipif(not config.CHECKS, reason="MINIGPU_SIM_CHECKS=0")

FULL = 0xFFFFFFFF
UNSET = -7.0  # what `out` holds where a thread did not write
few = settings(max_examples=8, deadline=None)


@pytest.fixture(scope="module", autouse=True)
def patched_simulator():
    assert simulator.install()
    yield


def line_of(kernel, marker):
    """The source line of ``kernel`` that carries the comment ``marker``."""
    lines, start = inspect.getsourcelines(kernel.py_func)
    return start + next(i for i, text in enumerate(lines) if marker in text)


# ----------------------------------------------------------------------------- NumPy warp model


def warp_lanes(n, tid):
    """(lane of tid, number of lanes in its warp, linear id of the warp's lane 0)."""
    warp, lane = divmod(tid, 32)
    return lane, min(32, n - 32 * warp), 32 * warp


def model_shfl(kind, n, mask, vals, args):
    out = np.full(n, UNSET)
    for tid in range(n):
        lane, nlanes, base = warp_lanes(n, tid)
        if not (mask >> lane) & 1:
            continue
        b = int(args[tid]) & 31
        src = {"idx": b, "up": lane - b, "down": lane + b, "xor": lane ^ b}[kind]
        if not 0 <= src < 32:
            src = lane  # out of range: own value
        taking_part = src < nlanes and (mask >> src) & 1
        out[tid] = vals[base + src] if taking_part else np.nan
    return out


def model_vote(kind, n, mask, preds):
    out = np.full(n, UNSET)
    for tid in range(n):
        lane, nlanes, base = warp_lanes(n, tid)
        if not (mask >> lane) & 1:
            continue
        members = [m for m in range(nlanes) if (mask >> m) & 1]
        p = [bool(preds[base + m]) for m in members]
        ballot = sum(1 << m for m, pm in zip(members, p) if pm)
        out[tid] = {"all": all(p), "any": any(p), "eq": len(set(p)) == 1,
                    "ballot": ballot - (1 << 32) if ballot >= 1 << 31 else ballot}[kind]
    return out


# ----------------------------------------------------------------------------- kernels

SHFL = {"idx": 0, "up": 1, "down": 2, "xor": 3}
VOTE = {"all": 0, "any": 1, "eq": 2, "ballot": 3}


@cuda.jit(device=True)
def shfl_dev(kind, mask, v, b):
    if kind == 0:
        return cuda.shfl_sync(mask, v, b)
    if kind == 1:
        return cuda.shfl_up_sync(mask, v, b)
    if kind == 2:
        return cuda.shfl_down_sync(mask, v, b)
    return cuda.shfl_xor_sync(mask, v, b)


@cuda.jit
def shfl_kernel(kind, mask, vals, args, out):
    t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    if (mask >> (t % 32)) & 1:
        v, b = vals[t], args[t]
        if kind == 0:
            out[t] = cuda.shfl_sync(mask, v, b)
        elif kind == 1:
            out[t] = cuda.shfl_up_sync(mask, v, b)
        elif kind == 2:
            out[t] = cuda.shfl_down_sync(mask, v, b)
        else:
            out[t] = cuda.shfl_xor_sync(mask, v, b)
    cuda.syncthreads()  # lanes outside the mask wait here: the intrinsic must not wait for them


@cuda.jit
def shfl_via_device(kind, mask, vals, args, out):
    t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    if (mask >> (t % 32)) & 1:
        out[t] = shfl_dev(kind, mask, vals[t], args[t])
    cuda.syncthreads()  # lanes outside the mask wait here: the intrinsic must not wait for them


@cuda.jit(device=True)
def vote_dev(kind, mask, p):
    if kind == 0:
        return cuda.all_sync(mask, p)
    if kind == 1:
        return cuda.any_sync(mask, p)
    if kind == 2:
        return cuda.eq_sync(mask, p)
    return cuda.ballot_sync(mask, p)


@cuda.jit
def vote_kernel(kind, mask, preds, out):
    t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    if (mask >> (t % 32)) & 1:
        p = preds[t] != 0
        if kind == 0:
            out[t] = cuda.all_sync(mask, p)
        elif kind == 1:
            out[t] = cuda.any_sync(mask, p)
        elif kind == 2:
            out[t] = cuda.eq_sync(mask, p)
        else:
            out[t] = cuda.ballot_sync(mask, p)
    cuda.syncthreads()  # lanes outside the mask wait here: the intrinsic must not wait for them


@cuda.jit
def vote_via_device(kind, mask, preds, out):
    t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    if (mask >> (t % 32)) & 1:
        out[t] = vote_dev(kind, mask, preds[t] != 0)
    cuda.syncthreads()  # lanes outside the mask wait here: the intrinsic must not wait for them


def launch(kernel, n, *args):
    """One block of n threads; 2-D (8 x n/8) when n allows, to exercise the linear lane id."""
    block = (8, n // 8) if n % 8 == 0 else n
    kernel[1, block](*args)


block_sizes = st.sampled_from([1, 5, 32, 40, 64])  # 40: a full warp and a partial one
masks = st.one_of(st.just(FULL), st.integers(1, FULL))


# ----------------------------------------------------------------------------- shuffles


@pytest.mark.parametrize("via", [shfl_kernel, shfl_via_device])
@pytest.mark.parametrize("kind", sorted(SHFL))
@few
@given(n=block_sizes, mask=masks, data=st.data())
def test_shuffles_match_warp_model(kind, via, n, mask, data):
    vals = np.arange(n, dtype=np.float32) * 1.5 + 1
    if kind == "idx":  # any source lane, per lane; out-of-range ones wrap mod 32
        args = np.array(data.draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)), np.int32)
    else:
        args = np.full(n, data.draw(st.integers(0, 33)), np.int32)
    out = np.full(n, UNSET, np.float32)
    launch(via, n, SHFL[kind], mask, vals, args, out)
    np.testing.assert_array_equal(out, model_shfl(kind, n, mask, vals, args).astype(np.float32))


@pytest.mark.parametrize("via", [shfl_kernel, shfl_via_device])
def test_shfl_down_in_a_partial_warp(via):
    """Block of 40 threads: lanes 32-39 form a warp of 8; lane 39 + 1 does not exist (NaN),
    lane 31 + 1 is out of range (own value)."""
    vals = np.arange(40, dtype=np.float32)
    out = np.full(40, UNSET, np.float32)
    via[1, 40](SHFL["down"], FULL, vals, np.ones(40, np.int32), out)
    expected = vals + 1
    expected[31] = 31
    expected[39] = np.nan
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def warp_sum(vals, out):
    """The classic warp reduction: after 5 shfl_down steps lane 0 holds the warp's sum."""
    t = cuda.threadIdx.x
    v = vals[t]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if t % 32 == 0:
        out[t // 32] = v


def test_warp_reduction():
    vals = np.arange(64, dtype=np.float32)
    out = np.zeros(2, np.float32)
    warp_sum[1, 64](vals, out)
    np.testing.assert_array_equal(out, [vals[:32].sum(), vals[32:].sum()])
    out = np.zeros(2, np.float32)
    warp_sum[1, 40](vals, out)  # partial warp: lanes 8-31 of warp 1 do not exist -> poisoned sum
    assert out[0] == vals[:32].sum() and np.isnan(out[1])


# ----------------------------------------------------------------------------- votes


@pytest.mark.parametrize("via", [vote_kernel, vote_via_device])
@pytest.mark.parametrize("kind", sorted(VOTE))
@few
@given(n=block_sizes, mask=masks, data=st.data())
def test_votes_match_warp_model(kind, via, n, mask, data):
    preds = np.array(data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), np.int32)
    out = np.full(n, UNSET)
    launch(via, n, VOTE[kind], mask, preds, out)
    np.testing.assert_array_equal(out, model_vote(kind, n, mask, preds))


@cuda.jit
def leader_kernel(preds, out):
    t = cuda.threadIdx.x
    b = cuda.ballot_sync(FULL, preds[t] != 0)
    out[t, 0] = cuda.popc(b)
    out[t, 1] = cuda.ffs(b) - 1  # the first lane whose predicate holds


def test_ballot_is_int32_and_popc_ffs_count_it():
    preds = np.ones(32, np.int32)
    preds[:3] = 0
    out = np.zeros((32, 2), np.int64)
    leader_kernel[1, 32](preds, out)
    assert (out[:, 0] == 29).all() and (out[:, 1] == 3).all()


@cuda.jit
def match_kernel(vals, out):
    t = cuda.threadIdx.x
    out[t, 0] = cuda.match_any_sync(FULL, vals[t])
    m, same = cuda.match_all_sync(FULL, vals[t])
    out[t, 1] = m
    out[t, 2] = same


@few
@given(n=st.sampled_from([3, 32, 40]), data=st.data())
def test_match(n, data):
    vals = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), np.int32)
    out = np.zeros((n, 3), np.int64)
    match_kernel[1, n](vals, out)
    for t in range(n):
        lane, nlanes, base = warp_lanes(n, t)
        warp = vals[base:base + nlanes]
        same_value = sum(1 << m for m in range(nlanes) if warp[m] == vals[t])
        assert out[t, 0] == np.int32(np.uint32(same_value))
        same = bool((warp == warp[0]).all())
        assert out[t, 2] == same
        assert out[t, 1] == (np.int32(np.uint32((1 << nlanes) - 1)) if same else 0)


# ----------------------------------------------------------------------------- activemask & co


@cuda.jit(device=True)
def activemask_dev():
    return cuda.activemask()


@cuda.jit
def activemask_kernel(split, exit_every, out):
    t = cuda.threadIdx.x
    if exit_every > 0 and t % exit_every == 0:
        return
    if t % 32 < split:
        out[t] = cuda.activemask()
    else:
        out[t] = activemask_dev()


@pytest.mark.parametrize("n", [40, 64])
@pytest.mark.parametrize("split", [0, 10])
@pytest.mark.parametrize("exit_every", [0, 3])
def test_activemask_sees_converged_lanes(n, split, exit_every):
    """Lanes in the same branch see each other; exited and missing lanes are inactive."""
    out = np.full(n, UNSET)
    activemask_kernel[1, n](split, exit_every, out)
    for t in range(n):
        lane, nlanes, base = warp_lanes(n, t)
        if exit_every and t % exit_every == 0:
            assert out[t] == UNSET
            continue
        same_branch = [m for m in range(nlanes) if (m < split) == (lane < split)
                       and not (exit_every and (base + m) % exit_every == 0)]
        assert out[t] == sum(1 << m for m in same_branch), t


@cuda.jit
def lanemask_kernel(out):
    t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
    out[t] = cuda.lanemask_lt()


def test_lanemask_lt():
    out = np.zeros(40, np.int64)
    lanemask_kernel[1, (8, 5)](out)
    lanes = np.arange(40) % 32
    np.testing.assert_array_equal(out, (1 << lanes) - 1)


@cuda.jit
def syncwarp_exchange(mask, out):
    """Warp-synchronous exchange through shared memory: without the syncwarp a lane could
    read its neighbour's slot before the neighbour wrote it (poison: NaN)."""
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    if (mask >> (t % 32)) & 1:
        buf[t] = t
        cuda.syncwarp(mask)
        out[t] = buf[t ^ 1]


@few
@given(n=st.sampled_from([32, 40, 64]), pairs=st.integers(1, 0xFFFF))
def test_syncwarp_orders_shared_memory(n, pairs):
    mask = sum(0b11 << (2 * i) for i in range(16) if (pairs >> i) & 1)  # whole pairs of lanes
    out = np.full(n, UNSET, np.float32)
    syncwarp_exchange[1, n](mask, out)
    expected = np.full(n, UNSET, np.float32)
    for t in range(n):
        if (mask >> (t % 32)) & 1:
            expected[t] = (t ^ 1) if (t ^ 1) < n else np.nan
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def lane_not_in_mask(out):
    t = cuda.threadIdx.x
    out[t] = cuda.shfl_sync(0b10, np.float32(t), 0)


def test_calling_lane_must_be_in_mask():
    with pytest.raises(simulator.SyncError, match="does not include the calling lane 0"):
        lane_not_in_mask[1, 2](np.zeros(2, np.float32))


# ----------------------------------------------------------------------------- shared memory poison


@cuda.jit
def sum_without_init(x, out):
    """Bug on purpose: the shared accumulator is never zeroed."""
    acc = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    cuda.atomic.add(acc, 0, x[t])
    cuda.syncthreads()
    if t == 0:
        out[0] = acc[0]


@needs_checks
def test_initcheck_catches_read_before_write():
    out = np.zeros(1, np.float32)
    with pytest.raises(simulator.UninitializedReadError, match="shared array 'acc' at index 0"):
        sum_without_init[1, 32](np.ones(32, np.float32), out)


@cuda.jit
def fresh_per_block(out):
    f = cuda.shared.array(4, float32)
    i = cuda.shared.array(4, int32)
    t = cuda.threadIdx.x
    b = cuda.blockIdx.x
    if b == 0:
        f[t] = 1.0
        i[t] = 1
    cuda.syncthreads()
    out[b, t, 0] = f[t]
    out[b, t, 1] = i[t]


@needs_checks
def test_shared_memory_is_fresh_in_every_block():
    out = np.zeros((2, 4, 2), np.float64)
    with pytest.raises(simulator.UninitializedReadError, match=r"block \(1, 0, 0\) read shared"):
        fresh_per_block[2, 4](out)


@cuda.jit
def dynamic_shared(out):
    buf = cuda.shared.array(0, float32)
    ibuf = cuda.shared.array(0, int32)
    t = cuda.threadIdx.x
    out[t, 0] = buf[t]
    out[t, 1] = ibuf[t]


@needs_checks
def test_dynamic_shared_memory_is_poisoned():
    out = np.zeros((8, 2))
    with pytest.raises(simulator.UninitializedReadError, match="shared array 'buf'"):
        dynamic_shared[1, 8, 0, 64](out)


@cuda.jit
def two_arrays(out):
    a = cuda.shared.array(8, float32)
    b = cuda.shared.array(8, float32)
    t = cuda.threadIdx.x
    a[t] = 1.0
    b[t] = 2.0
    cuda.syncthreads()
    out[t] = a[(t + 1) % 8] + b[(t + 1) % 8]


def test_shared_arrays_on_different_lines_are_distinct():
    out = np.zeros(8, np.float32)
    two_arrays[1, 8](out)
    assert (out == 3).all()


# ----------------------------------------------------------------------------- barriers


@cuda.jit
def divergent_barrier(out):
    t = cuda.threadIdx.x
    if t < 16:
        cuda.syncthreads()  # barrier A
    else:
        cuda.syncthreads()  # barrier B
    out[t] = t


def test_barrier_in_divergent_branch_raises():
    with pytest.raises(simulator.SyncError) as err:
        divergent_barrier[1, 32](np.zeros(32, np.float32))
    msg = str(err.value)
    assert "divergent_barrier" in msg and "different syncthreads() calls" in msg
    assert f"{__file__}:{line_of(divergent_barrier, '# barrier A')}" in msg
    assert f"{__file__}:{line_of(divergent_barrier, '# barrier B')}" in msg
    assert "tid 0-15" in msg and "tid 16-31" in msg


@cuda.jit
def early_exit(work, out):
    buf = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    if t >= 20:
        acc = 0  # exit late, after the others wait at the barrier
        for i in range(work):
            acc += i
        return
    buf[t] = t
    cuda.syncthreads()
    out[t] = buf[(t + 1) % 20]
    cuda.syncthreads()


@pytest.mark.parametrize("work", [0, 2000])
def test_exited_threads_count_as_arrived(work):
    out = np.full(40, UNSET, np.float32)
    early_exit[1, 40](work, out)
    np.testing.assert_array_equal(out[:20], (np.arange(20) + 1) % 20)
    assert (out[20:] == UNSET).all()


@cuda.jit
def shfl_waits_for_barrier(out):
    t = cuda.threadIdx.x
    if t == 0:
        out[t] = cuda.shfl_sync(0b11, np.float32(t), 1)  # waits for lane 1 ...
    else:
        cuda.syncthreads()  # ... which waits for thread 0


def test_deadlock_is_reported():
    with pytest.raises(simulator.SyncError, match="cannot make progress") as err:
        shfl_waits_for_barrier[1, 2](np.zeros(2, np.float32))
    assert "shfl_sync(mask=0x00000003)" in str(err.value) and "syncthreads()" in str(err.value)


@cuda.jit
def barrier_reductions(preds, out):
    t = cuda.threadIdx.x
    p = preds[t]
    out[t, 0] = cuda.syncthreads_count(p)
    out[t, 1] = cuda.syncthreads_and(p)
    out[t, 2] = cuda.syncthreads_or(p)


@few
@given(n=st.sampled_from([1, 7, 40]), data=st.data())
def test_syncthreads_count_and_or(n, data):
    preds = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), np.int32)
    out = np.zeros((n, 3), np.int64)
    barrier_reductions[1, n](preds, out)
    expected = [np.count_nonzero(preds), preds.all(), preds.any()]
    np.testing.assert_array_equal(out, np.tile(expected, (n, 1)))


@cuda.jit
def kernel_raises(out):
    t = cuda.threadIdx.x
    if t == 3:
        raise ValueError("boom")
    cuda.syncthreads()
    out[t] = t


def test_exception_in_one_thread_propagates_and_frees_the_block():
    with pytest.raises(ValueError, match=r"tid=\[3, 0, 0\].*boom"):
        kernel_raises[1, 8](np.zeros(8))
    out = np.zeros(8)
    warp_sum[1, 32](np.ones(32, np.float32), out)  # the simulator still works afterwards
    assert out[0] == 32


@cuda.jit
def spin_on_a_later_thread(flag, out):
    t = cuda.threadIdx.x
    if t < cuda.blockDim.x - 1:
        while cuda.atomic.add(flag, 0, 0) == 0:  # waits for the last thread
            pass
        out[t] = 1
    else:
        cuda.atomic.exch(flag, 0, 1)


@pytest.mark.parametrize("checks", [True, False])
@pytest.mark.parametrize("n", [2, 40])
def test_a_thread_spinning_on_a_later_threads_write_lets_it_run(n, checks, monkeypatch):
    """The simulated threads run in turn (greenlets): a spinning one must yield, or this hangs
    (with the checks off too, where arrays are plain and only the atomics count)."""
    monkeypatch.setattr(config, "CHECKS", checks)
    out = np.zeros(n, np.int32)
    spin_on_a_later_thread[1, n](np.zeros(1, np.int32), out)
    np.testing.assert_array_equal(out, [1] * (n - 1) + [0])


@cuda.jit
def nested_waits(out):
    t = cuda.threadIdx.x
    for step in range(3):
        v = cuda.shfl_xor_sync(0xFFFFFFFF, t + step, 1)
        cuda.syncthreads()
        out[cuda.blockIdx.x, step, t] = v


def test_threads_of_several_blocks_and_launches_reuse_the_pool():
    """Pooled simulated threads keep no state from one block or launch to the next."""
    for blocks in (1, 3):
        out = np.zeros((blocks, 3, 64), np.int64)
        nested_waits[blocks, 64](out)
        t = np.arange(64)
        np.testing.assert_array_equal(out, [[(t ^ 1) + s for s in range(3)]] * blocks)


# ----------------------------------------------------------------------------- install


def test_install_is_idempotent_and_reaches_the_kernels_cuda():
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    assert simulator.install() and simulator.install() and simulator.is_installed()
    assert hasattr(FakeCUDAModule, "shfl_down_sync") and hasattr(FakeCUDAModule, "activemask")


def test_version_mismatch_warns_once_and_leaves_the_simulator_stock(monkeypatch):
    from numba.cuda.simulator import kernel, kernelapi

    simulator.uninstall()
    try:
        assert not hasattr(kernelapi.FakeCUDAModule, "shfl_sync")
        monkeypatch.setattr(sim_patch, "SUPPORTED", (0, 29))
        monkeypatch.setattr(simulator, "_warned", False)
        with pytest.warns(RuntimeWarning, match="left stock"):
            assert simulator.install() is False
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert simulator.install() is False  # once is enough
        assert not hasattr(kernelapi.FakeCUDAModule, "shfl_sync")
        assert kernel.FakeCUDAKernel.__call__ is not sim_launch.launch
    finally:
        monkeypatch.undo()
        assert simulator.install()
