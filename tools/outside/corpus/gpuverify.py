"""GPUVerify's CUDA test suite, translated to Numba CUDA.

Source: https://github.com/mc-imperial/gpuverify (commit 49219770aad01231edd0d8e0fa3ed036006cf32a,
``testsuite/CUDA/<test>/kernel.cu``), Microsoft Public License (Ms-PL). Each test's first line is
its verdict: ``//pass`` (GPUVerify proves it free of races and barrier divergence) or
``//xfail:NOT_ALL_VERIFIED`` with the error GPUVerify must find (a race, barrier divergence, a
store into constant memory). The kernels below are our translations of the tests whose verdict
is about what a kernel does when it runs (not the ones about GPUVerify's own annotations,
function pointers, null pointers or memcpy lowering); the launch is the test's
``--blockDim``/``--gridDim``, made smaller where the pattern allows (the simulator runs Python
per thread). Where GPUVerify assumes lockstep warps (``--warp-sync``) its verdict is the label,
and the runner's list of known disagreements says what Volta and later GPUs do instead.
"""
import numpy as np
from numba import cuda, float32, int32, uint32
from numba.cuda.random import (create_xoroshiro128p_states, init_xoroshiro128p_state,
                               xoroshiro128p_next, xoroshiro128p_uniform_float32)

from . import case

T = "testsuite/CUDA/"
SEVEN = np.arange(8, dtype=np.int32)


# ----------------------------------------------------------------------------- atomics

@cuda.jit
def slot_from_atomic(counter, a, step):
    """atomics/add_one, add_tid, add_zero: ``j = atomicAdd(i, step)``; ``A[j] = tid``."""
    tid = cuda.threadIdx.x
    j = cuda.atomic.add(counter, 0, step if step >= 0 else tid)
    a[j] = tid


def _slots(step):
    counter, a = np.zeros(1, np.uint32), np.full(4, -1, np.int32)
    slot_from_atomic[1, 2](counter, a, step)
    return a


@case(T + "atomics/add_one/kernel.cu", "clean")
def atomics_add_one():
    return np.sort(_slots(1))  # which thread gets which slot is the GPU's choice


@case(T + "atomics/add_tid/kernel.cu", "race")
def atomics_add_tid():
    return _slots(-1)


@case(T + "atomics/add_zero/kernel.cu", "race")
def atomics_add_zero():
    return _slots(0)


@cuda.jit
def every_atomic(a, b, d):
    """atomics/definitions: each atomic of CUDA on an int, an unsigned int and a float."""
    cuda.atomic.add(a, 0, 10)
    cuda.atomic.sub(a, 0, 10)
    cuda.atomic.exch(a, 0, 10)
    cuda.atomic.min(a, 0, 10)
    cuda.atomic.max(a, 0, 10)
    cuda.atomic.and_(a, 0, 10)
    cuda.atomic.or_(a, 0, 10)
    cuda.atomic.xor(a, 0, 10)
    cuda.atomic.cas(a, 0, 10, 11)
    cuda.atomic.add(b, 0, 10)
    cuda.atomic.inc(b, 0, 10)
    cuda.atomic.dec(b, 0, 10)
    cuda.atomic.add(d, 0, float32(10.0))
    cuda.atomic.exch(d, 0, float32(10.0))


@case(T + "atomics/definitions/kernel.cu", "clean")
def atomics_definitions():
    a, b, d = np.zeros(1, np.int32), np.zeros(1, np.uint32), np.zeros(1, np.float32)
    every_atomic[1, 64](a, b, d)
    return ()  # every final value depends on the order the atomics ran in


@cuda.jit
def atomic_inc_global(x):
    cuda.atomic.inc(x, 0, 1)


@case(T + "atomics/device_global/kernel.cu", "clean")
def atomics_device_global():
    x = np.zeros(1, np.uint32)
    atomic_inc_global[1, 2](x)
    return x


# ----------------------------------------------------------------------------- barriers

@cuda.jit
def barrier_if_param(out, x):
    if x == 0:
        cuda.syncthreads()
    out[cuda.grid(1)] = x


@case(T + "barrierconditionalkernelparam/kernel.cu", "clean")
def barrierconditionalkernelparam():
    out = np.ones(4 * 64, np.int32)
    barrier_if_param[4, 64](out, 0)
    return out


@cuda.jit
def arithmetic_then_barrier(out):
    a, b = 2, 3
    c = a + b
    cuda.syncthreads()
    out[cuda.grid(1)] = c


@case(T + "basicbarrier/kernel.cu", "clean")
def basicbarrier():
    out = np.zeros(4 * 64, np.int32)
    arithmetic_then_barrier[4, 64](out)
    return out


@cuda.jit
def store_two(p):
    p[cuda.threadIdx.x] = 2


@case(T + "basicglobalarray/kernel.cu", "clean")
def basicglobalarray():
    p = np.zeros(64, np.int32)
    store_two[1, 64](p)
    return p


# ----------------------------------------------------------------------------- cooperative groups

@cuda.jit
def shift_across_grid_sync(a):
    """cooperative_groups/pass/grid_barrier: read the right neighbour, grid sync, write."""
    idx = cuda.grid(1)
    temp = a[idx + 1]
    cuda.cg.this_grid().sync()
    a[idx] = temp


@case(T + "cooperative_groups/pass/grid_barrier/kernel.cu", "clean")
def cg_grid_barrier():
    a = np.arange(65, dtype=np.int32)
    shift_across_grid_sync[2, 32](a)
    return a


@cuda.jit
def shift_across_block_sync(a):
    idx = cuda.grid(1)
    temp = a[idx + 1]
    cuda.syncthreads()
    a[idx] = temp


@case(T + "cooperative_groups/pass/block_barrier/kernel.cu", "clean")
def cg_block_barrier():
    a = np.arange(33, dtype=np.int32)
    shift_across_block_sync[1, 32](a)
    return a


@cuda.jit
def shift_with_barriers(a):
    idx = cuda.grid(1)
    g = cuda.cg.this_grid()
    temp = a[idx + 1]
    g.sync()
    a[idx] = temp
    g.sync()
    if cuda.blockIdx.x == 0:
        temp = a[idx + 1]
        cuda.syncthreads()
        a[idx] = temp


@case(T + "cooperative_groups/pass/multiple_barriers/kernel.cu", "clean")
def cg_multiple_barriers():
    a = np.arange(65, dtype=np.int32)
    shift_with_barriers[2, 32](a)
    return a


@cuda.jit
def shift_without_sync(a):
    idx = cuda.grid(1)
    temp = a[idx + 1]
    a[idx] = temp


@case(T + "cooperative_groups/fail/race/kernel.cu", "race")
def cg_race():
    a = np.arange(65, dtype=np.int32)
    shift_without_sync[2, 32](a)
    return a


@cuda.jit
def grid_sync_in_even_blocks(a):
    idx = cuda.grid(1)
    if cuda.blockIdx.x % 2 == 0:
        temp = a[idx + 2]
        cuda.cg.this_grid().sync()
        a[idx] = temp


@case(T + "cooperative_groups/fail/block_divergence_grid_group/kernel.cu", "sync")
def cg_block_divergence_grid_group():
    a = np.arange(66, dtype=np.int32)
    grid_sync_in_even_blocks[2, 32](a)
    return a


@cuda.jit
def grid_sync_in_even_threads(a):
    idx = cuda.grid(1)
    if idx % 2 == 0:
        temp = a[idx + 2]
        cuda.cg.this_grid().sync()
        a[idx] = temp


@case(T + "cooperative_groups/fail/divergence_grid_group/kernel.cu", "sync")
def cg_divergence_grid_group():
    a = np.arange(34, dtype=np.int32)
    grid_sync_in_even_threads[1, 32](a)
    return a


@cuda.jit
def block_sync_in_even_threads(a):
    idx = cuda.grid(1)
    if idx % 2 == 0:
        temp = a[idx + 2]
        cuda.syncthreads()
        a[idx] = temp


@case(T + "cooperative_groups/fail/divergence_thread_block/kernel.cu", "sync")
def cg_divergence_thread_block():
    a = np.arange(34, dtype=np.int32)
    block_sync_in_even_threads[1, 32](a)
    return a


# ----------------------------------------------------------------------------- loops and strides

WIDTH = 64


@cuda.jit
def rows_of_gid(a):
    gid = cuda.grid(1)
    for i in range(WIDTH):
        a[i + gid * WIDTH] = gid


@case(T + "ctimesgid/kernel.cu", "clean")
def ctimesgid():
    a = np.zeros(4 * 16 * WIDTH, np.uint32)
    rows_of_gid[4, 16](a)  # the test: 16 blocks of 64, WIDTH 256
    return a


@cuda.jit
def rows_of_lid_in_shared(out):
    s = cuda.shared.array(16384, uint32)  # blockDim 64 x WIDTH 256 (the test's sizes)
    for i in range(256):
        s[i + cuda.threadIdx.x * 256] = cuda.threadIdx.x
    out[cuda.grid(1)] = s[cuda.threadIdx.x * 256]


@case(T + "ctimeslid/kernel.cu", "clean")
def ctimeslid():
    out = np.zeros(64, np.uint32)
    rows_of_lid_in_shared[1, 64](out)
    return out


@cuda.jit
def blockwise_strided(a, width):
    for i in range(cuda.threadIdx.x, width, cuda.blockDim.x):
        a[cuda.blockIdx.x * width + i] = i


@case(T + "reduced_strength_blockwise/kernel.cu", "clean")
def reduced_strength_blockwise():
    a = np.zeros(2 * 200, np.int32)
    blockwise_strided[2, 64](a, 200)  # the test: 256 threads, WIDTH 2064 (not a multiple)
    return a


@cuda.jit
def first_rows_to_shared(out, a):
    b = cuda.shared.array(256, float32)
    for i in range(10):
        b[i] = a[i]
    cuda.syncthreads()
    out[cuda.grid(1)] = b[cuda.threadIdx.x % 10]


@case(T + "loop_unwind/kernel.cu", "race")
def loop_unwind():
    out, a = np.zeros(64, np.float32), np.arange(10, dtype=np.float32)
    first_rows_to_shared[1, 64](out, a)
    return out


# ----------------------------------------------------------------------------- races

@cuda.jit
def last_writer_wins(out):
    s = cuda.shared.array(16, int32)
    s[0] = cuda.threadIdx.x
    cuda.syncthreads()
    out[cuda.threadIdx.x] = s[0]


@case(T + "fail_tests/race_on_shared/kernel.cu", "race")
def race_on_shared():
    out = np.zeros(16, np.int32)
    last_writer_wins[1, 16](out)
    return out


@cuda.jit
def add_neighbour(a, offset):
    """misc/fail/miscfail3, miscfail4: ``A[tid] += A[tid + offset]`` in a device function."""
    tid = cuda.threadIdx.x
    _add_at(a, tid, offset)


@cuda.jit(device=True)
def _add_at(a, tid, offset):
    temp = a[tid + offset]
    a[tid] += temp


@case(T + "misc/fail/miscfail3/kernel.cu", "race")
def miscfail3():
    a = np.arange(129, dtype=np.int32)
    add_neighbour[1, 128](a, 1)
    return a


@case(T + "misc/fail/miscfail4/kernel.cu", "race")
def miscfail4():
    a = np.arange(256, dtype=np.int32)
    add_neighbour[1, 128](a, 100)
    return a


@cuda.jit
def two_threads_one_slot(a, x):
    if cuda.threadIdx.x == 15:
        a[cuda.threadIdx.x + x] = cuda.threadIdx.x
    if cuda.threadIdx.x == 200:
        a[cuda.threadIdx.x] = cuda.threadIdx.x


@case(T + "param_values/value_causing_race/kernel.cu", "race")
def value_causing_race():
    a = np.zeros(1000, np.float32)
    two_threads_one_slot[1, 256](a, 185)
    return a


@cuda.jit
def next_block_into_this(a):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    a[i] += a[(cuda.blockIdx.x + 1) * cuda.blockDim.x + cuda.threadIdx.x]


@case(T + "warpsync/bad_inter_group/kernel.cu", "race")
def warpsync_bad_inter_group():
    a = np.arange(5 * 32, dtype=np.int32)
    next_block_into_this[4, 32](a)
    return a


@cuda.jit
def own_slot_from_two(a):
    a[1 if cuda.threadIdx.x == 0 else 2 * cuda.threadIdx.x] = float32(2.4)


@case(T + "ternarytest/kernel.cu", "clean")
def ternarytest():
    a = np.zeros(128, np.float32)
    own_slot_from_two[1, 64](a)
    return a


@cuda.jit
def write_then_read_neighbour():
    s = cuda.shared.array(11, int32)
    s[cuda.threadIdx.x] = 2
    cuda.syncthreads()
    x = s[cuda.threadIdx.x + 1]  # noqa: F841  (the test reads s[10], never written, and drops it)


@case(T + "localarrayaccess/kernel.cu", "clean")
def localarrayaccess():
    write_then_read_neighbour[4, 10]()
    return ()


@cuda.jit
def return_early_in_device_function(a):
    _only_thread_zero_writes(a)


@cuda.jit(device=True)
def _only_thread_zero_writes(a):
    if cuda.threadIdx.x != 0:
        return 0
    a[4] = float32(26.8)
    return 1


@case(T + "noraceduetoreturn/kernel.cu", "clean")
def noraceduetoreturn():
    a = np.zeros(8, np.float32)
    return_early_in_device_function[1, 64](a)
    return a


@cuda.jit
def first_block_only(a):
    if cuda.blockIdx.x == 0:
        a[cuda.threadIdx.x] = float32(42.0)


@case(T + "test_for_get_group_id/kernel.cu", "clean")
def test_for_get_group_id():
    a = np.zeros(64, np.float32)
    first_block_only[2, 64](a)
    return a


@cuda.jit
def bytes_as_words(out):
    x = cuda.shared.array(32, uint32)  # the test's unsigned char[32] viewed as 8 words
    for i in range(8):
        x[i] = cuda.threadIdx.x
    cuda.syncthreads()
    out[cuda.grid(1)] = x[0]


@case(T + "pointertests/cast/kernel.cu", "race")
def pointertests_cast():
    out = np.zeros(2 * 32, np.uint32)
    bytes_as_words[2, 32](out)
    return out


# ----------------------------------------------------------------------------- shared-memory loops

BLOCK = 8
VERTICES = 64


@cuda.jit
def transitive_closure_stage1(graph, passnum):
    buf = cuda.shared.array((BLOCK, BLOCK), uint32)
    ty, tx = cuda.threadIdx.y, cuda.threadIdx.x
    y, x = passnum * BLOCK + ty, passnum * BLOCK + tx
    buf[ty, tx] = graph[y * VERTICES + x]
    cuda.syncthreads()
    for k in range(BLOCK):
        if buf[ty, tx] == 0:
            if buf[ty, k] != 0 and buf[k, tx] != 0:
                buf[ty, tx] = passnum * BLOCK + k + 2
        cuda.syncthreads()
    graph[y * VERTICES + x] = buf[ty, tx]


@case(T + "transitiveclosure/kernel.cu", "clean")
def transitiveclosure():
    rng = np.random.default_rng(0)
    graph = (rng.random(VERTICES * VERTICES) < 0.3).astype(np.uint32)
    transitive_closure_stage1[1, (BLOCK, BLOCK)](graph, 0)
    return graph


@cuda.jit
def warp_scan_in_memory(a):
    tid = cuda.threadIdx.x
    lane = tid & 31
    if lane >= 1:
        a[tid] = a[tid - 1] + a[tid]
    if lane >= 2:
        a[tid] = a[tid - 2] + a[tid]
    if lane >= 4:
        a[tid] = a[tid - 4] + a[tid]
    if lane >= 8:
        a[tid] = a[tid - 8] + a[tid]
    if lane >= 16:
        a[tid] = a[tid - 16] + a[tid]


@case(T + "warpsync/scan_warp/kernel.cu", "clean")
def warpsync_scan_warp():
    a = np.ones(64, np.int32)
    warp_scan_in_memory[1, 64](a)
    return a


@cuda.jit
def rotate_in_warp_through_memory(a):
    tid = cuda.threadIdx.x
    warp = tid // 32
    a[tid] = a[warp * 32 + (tid + 1) % 32]


@case(T + "warpsync/shuffle/kernel.cu", "clean")
def warpsync_shuffle():
    a = np.arange(64, dtype=np.int32)
    rotate_in_warp_through_memory[1, 64](a)
    return a


# ----------------------------------------------------------------------------- constant memory

CONSTANTS = np.zeros(4, np.int32)


@cuda.jit
def store_into_constant(inp):
    c = cuda.const.array_like(CONSTANTS)
    c[cuda.threadIdx.x] = inp[cuda.threadIdx.x]


@case(T + "misc/fail/miscfail5/kernel.cu", "const")
def miscfail5():
    inp = np.arange(4, dtype=np.int32) + 1
    store_into_constant[1, 4](inp)
    return CONSTANTS.copy()


# ----------------------------------------------------------------------------- random numbers

@cuda.jit
def draw_from_state_zero(states, a):
    a[cuda.threadIdx.x] = xoroshiro128p_uniform_float32(states, 0)


@case(T + "curand_tests/fail/curand_race/kernel.cu", "race")
def curand_race():
    states, a = create_xoroshiro128p_states(2, seed=1), np.zeros(2, np.float32)
    draw_from_state_zero[1, 2](states, a)
    return a


@cuda.jit
def draw_from_own_state(states, a):
    a[cuda.threadIdx.x] = xoroshiro128p_uniform_float32(states, cuda.threadIdx.x)


@case(T + "curand_tests/pass/curand/kernel.cu", "clean")
def curand_pass():
    states, a = create_xoroshiro128p_states(64, seed=1), np.zeros(64, np.float32)
    draw_from_own_state[1, 64](states, a)
    return a


@cuda.jit
def every_thread_inits_state_zero(states, a):
    init_xoroshiro128p_state(states, 0, 0)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        a[0] = xoroshiro128p_next(states, 0)


@case(T + "curand_tests/fail/init_race/kernel.cu", "race")
def curand_init_race():
    states, a = create_xoroshiro128p_states(2, seed=1), np.zeros(1, np.uint64)
    every_thread_inits_state_zero[1, 2](states, a)
    return a
