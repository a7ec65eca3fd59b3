"""DataRaceBench's accelerator micro-benchmarks, translated from OpenMP offload to Numba CUDA.

Source: https://github.com/LLNL/dataracebench (commit e1bffc57f35f2751afea6c9379b5863e0b2abfd9,
``micro-benchmarks/DRB*-gpu-{yes,no}.c`` and the five other ``omp target`` cases), BSD-3-Clause,
Copyright (c) 2017-20 Lawrence Livermore National Security, LLC. Each file's name carries its
label: ``-yes`` has a data race, ``-no`` has none. The kernels below are our translations, not
copies: ``target teams`` is a grid (a team is a block), ``parallel for`` the threads of a block
(``distribute`` spreads iterations over blocks), ``critical`` and ``omp_set_lock`` a spin lock
(``atomic.cas`` to take it, ``threadfence`` around the protected code, ``atomic.exch`` to give
it back) whose scope is what OpenMP's is: a ``critical`` section or a host lock excludes the
threads of one team only (hence the lock in shared memory), ``reduction`` a per-thread
partial combined with an atomic, ``ordered`` a ticket each iteration waits for, and ``simd``
lanes of one thread's loop. Sizes are small (the simulator runs Python per thread).
"""
import numpy as np
from numba import cuda, float64, int32

from . import case

ORIGIN = "micro-benchmarks/"
TPB = 32


def _blocks(n):
    return (n + TPB - 1) // TPB


@cuda.jit(device=True)
def _lock(lock, k):
    while cuda.atomic.cas(lock, k, 0, 1) != 0:
        pass
    cuda.threadfence()


@cuda.jit(device=True)
def _unlock(lock, k):
    cuda.threadfence()
    cuda.atomic.exch(lock, k, 0)


# ----------------------------------------------------------------------------- DRB026 / DRB071

@cuda.jit
def anti_dependence(a, n):
    i = cuda.grid(1)
    if i < n - 1:
        a[i] = a[i + 1] + 1


@case(ORIGIN + "DRB026-targetparallelfor-orig-yes.c", "race")
def drb026_targetparallelfor_yes():
    a = np.arange(64, dtype=np.int32)
    anti_dependence[1, 64](a, 64)
    return a


@cuda.jit
def increment_own(a, n):
    i = cuda.grid(1)
    if i < n:
        a[i] = a[i] + 1


@case(ORIGIN + "DRB071-targetparallelfor-orig-no.c", "clean")
def drb071_targetparallelfor_no():
    a = np.arange(100, dtype=np.int32)
    increment_own[_blocks(100), TPB](a, 100)
    return a


# ----------------------------------------------------------------------------- DRB097 / DRB099

@cuda.jit
def teams_dot(total, a, b):
    partial = cuda.shared.array(TPB, float64)
    t = cuda.threadIdx.x
    acc = 0.0
    for i in range(cuda.grid(1), a.shape[0], cuda.gridsize(1)):
        acc += a[i] * b[i]
    partial[t] = acc
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            partial[t] += partial[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        cuda.atomic.add(total, 0, partial[0])


@case(ORIGIN + "DRB097-target-teams-distribute-orig-no.c", "clean", rtol=1e-12)
def drb097_target_teams_distribute_no():
    n = 256
    a, b = np.arange(n) / 2.0, np.arange(n) / 3.0
    total = np.zeros(1)
    teams_dot[4, TPB](total, a, b)
    return total


@cuda.jit
def scale_by_index(b, a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        b[i] = a[i] * float64(i)


@case(ORIGIN + "DRB099-targetparallelfor2-orig-no.c", "clean")
def drb099_targetparallelfor2_no():
    a, b = np.arange(100) / 2.0, np.zeros(100)
    scale_by_index[_blocks(100), TPB](b, a)
    return b


# ----------------------------------------------------------------------------- DRB116

@cuda.jit
def every_team_doubles(a):
    a[50] *= 2.0


@case(ORIGIN + "DRB116-target-teams-orig-yes.c", "race")
def drb116_target_teams_yes():
    a = np.arange(100) / 2.0
    every_team_doubles[2, 1](a)
    return a


# ----------------------------------------------------------------------------- counters

@cuda.jit
def count_in_team_critical(var, n):
    """DRB144: ``critical`` inside ``teams distribute parallel for`` excludes the threads of
    one team: a lock per block, so two blocks update ``var`` at once."""
    lock = cuda.shared.array(1, int32)
    if cuda.threadIdx.x == 0:
        lock[0] = 0
    cuda.syncthreads()
    i = cuda.grid(1)
    if i < n:
        _lock(lock, 0)
        var[0] += 1
        _unlock(lock, 0)


@case(ORIGIN + "DRB144-critical-missingreduction-orig-gpu-yes.c", "race")
def drb144_critical_missingreduction_yes():
    var = np.zeros(1, np.int32)
    count_in_team_critical[_blocks(200), TPB](var, 200)
    return var


@cuda.jit
def count_reduction(var, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(var, 0, 1)


@case(ORIGIN + "DRB145-atomiccritical-orig-gpu-no.c", "clean")
def drb145_atomiccritical_no():
    var = np.zeros(1, np.int32)
    count_reduction[_blocks(100), TPB](var, 100)
    return var


@case(ORIGIN + "DRB146-atomicupdate-orig-gpu-no.c", "clean")
def drb146_atomicupdate_no():
    var = np.zeros(1, np.int32)
    count_reduction[100, 1](var, 100)  # teams distribute: one thread per team
    return var


@cuda.jit
def add_then_subtract_atomically(var, n):
    i = cuda.grid(1)
    if i < n:
        cuda.atomic.add(var, 0, 1)
        cuda.atomic.sub(var, 0, 2)


@case(ORIGIN + "DRB147-critical1-orig-gpu-no.c", "clean")
def drb147_critical1_no():
    var = np.zeros(1, np.int32)
    add_then_subtract_atomically[_blocks(100), TPB](var, 100)
    return var


@cuda.jit
def add_then_subtract_two_locks(var, locks, n):
    """DRB148: two named critical sections, one lock each: ``var += 1`` under one lock and
    ``var -= 2`` under the other exclude nothing from each other."""
    i = cuda.grid(1)
    if i < n:
        _lock(locks, 0)
        var[0] += 1
        _unlock(locks, 0)
        _lock(locks, 1)
        var[0] -= 2
        _unlock(locks, 1)


@case(ORIGIN + "DRB148-critical1-orig-gpu-yes.c", "race")
def drb148_critical1_yes():
    var, locks = np.zeros(1, np.int32), np.zeros(2, np.int32)
    add_then_subtract_two_locks[1, 64](var, locks, 64)
    return var


@cuda.jit
def matvec_rows(c, b, a):
    i = cuda.grid(1)
    n = a.shape[0]
    if i < n:
        for j in range(n):
            c[i] += b[j + i * n] * a[j]


@case(ORIGIN + "DRB149-missingdata1-orig-gpu-no.c", "clean")
def drb149_missingdata1_no():
    n = 40
    a, b, c = np.ones(n, np.int32), np.ones(n * n, np.int32), np.zeros(n, np.int32)
    matvec_rows[_blocks(n), TPB](c, b, a)
    return c


@case(ORIGIN + "DRB150-missinglock1-orig-gpu-yes.c", "race")
def drb150_missinglock1_yes():
    """A host lock in a target region excludes the threads of one team: as DRB144."""
    var = np.zeros(1, np.int32)
    count_in_team_critical[_blocks(100), TPB](var, 100)
    return var


@cuda.jit
def count_plainly(var, n):
    i = cuda.grid(1)
    if i < n:
        var[0] += 1


@case(ORIGIN + "DRB151-missinglock3-orig-gpu-yes.c", "race")
def drb151_missinglock3_yes():
    var = np.zeros(1, np.int32)
    count_plainly[_blocks(100), TPB](var, 100)
    return var


@cuda.jit
def count_under_lock(var, lock, n):
    for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        _lock(lock, 0)
        var[0] += 1
        _unlock(lock, 0)


@case(ORIGIN + "DRB152-missinglock2-orig-gpu-no.c", "clean")
def drb152_missinglock2_no():
    var, lock = np.zeros(1, np.int32), np.zeros(1, np.int32)
    count_under_lock[1, TPB](var, lock, 100)  # num_teams(1): one block
    return var


@case(ORIGIN + "DRB153-missinglock2-orig-gpu-yes.c", "race")
def drb153_missinglock2_yes():
    var = np.zeros(1, np.int32)
    count_plainly[1, 100](var, 100)
    return var


@cuda.jit
def team_private_count(var, n):
    """DRB154: ``teams distribute reduction(+:var)``: each team (one thread) counts its own
    iterations in a private copy under its lock, then the copies are combined."""
    private = cuda.shared.array(1, int32)
    lock = cuda.shared.array(1, int32)
    private[0] = 0
    lock[0] = 0
    for i in range(cuda.blockIdx.x, n, cuda.gridDim.x):
        _lock(lock, 0)
        private[0] += 1
        _unlock(lock, 0)
    cuda.atomic.add(var, 0, private[0])


@case(ORIGIN + "DRB154-missinglock3-orig-gpu-no.c", "clean")
def drb154_missinglock3_no():
    var = np.zeros(1, np.int32)
    team_private_count[8, 1](var, 100)
    return var


# ----------------------------------------------------------------------------- ordered

@cuda.jit
def prefix_in_order(var, turn, n):
    """DRB155: ``parallel for ordered``: iteration ``i`` waits for its turn (a ticket that
    iteration ``i - 1`` hands on), so ``var[i] = var[i-1] + 1`` runs in order."""
    i = cuda.grid(1) + 1
    if i < n:
        while cuda.atomic.add(turn, 0, 0) != i:
            pass
        cuda.threadfence()
        var[i] = var[i - 1] + 1
        cuda.threadfence()
        cuda.atomic.add(turn, 0, 1)


@case(ORIGIN + "DRB155-missingordered-orig-gpu-no.c", "clean")
def drb155_missingordered_no():
    var, turn = np.zeros(64, np.int32), np.ones(1, np.int32)
    prefix_in_order[1, 64](var, turn, 64)
    return var


@cuda.jit
def prefix_unordered(var, n, lag):
    i = cuda.grid(1) + lag
    if i < n:
        var[i] = var[i - lag] + 1


@case(ORIGIN + "DRB156-missingordered-orig-gpu-yes.c", "race")
def drb156_missingordered_yes():
    var = np.zeros(64, np.int32)
    prefix_unordered[_blocks(63), TPB](var, 64, 1)
    return var


@case(ORIGIN + "DRB157-missingorderedsimd-orig-gpu-yes.c", "race")
def drb157_missingorderedsimd_yes():
    var = np.zeros(100, np.int32)
    prefix_unordered[_blocks(84), TPB](var, 100, 16)  # simd safelen(16)
    return var


# ----------------------------------------------------------------------------- tasks and barriers

@cuda.jit
def dependent_tasks(x, y, a):
    """DRB158: two tasks per element with ``depend(inout: x[i])``: run in order, by one
    thread (the target region has one)."""
    for i in range(x.shape[0]):
        x[i] = a * x[i]
        x[i] = x[i] + y[i]


@case(ORIGIN + "DRB158-missingtaskbarrier-orig-gpu-no.c", "clean")
def drb158_missingtaskbarrier_no():
    x, y = np.zeros(64, np.float32), np.full(64, 3, np.float32)
    dependent_tasks[1, 1](x, y, np.float32(5))
    return x


@cuda.jit
def two_phase_steps(b, c, temp, a, steps):
    """DRB159: ``omp for`` ends with a barrier: each step's two loops (over opposite orders)
    are separated by one, in one team."""
    i = cuda.threadIdx.x
    n = b.shape[0]
    for _ in range(steps):
        temp[i] = b[i] + c[i]
        cuda.syncthreads()
        b[n - 1 - i] = temp[n - 1 - i] * a
        cuda.syncthreads()


@case(ORIGIN + "DRB159-nobarrier-orig-gpu-no.c", "clean")
def drb159_nobarrier_no():
    b, c, temp = np.zeros(8, np.int32), np.full(8, 2, np.int32), np.zeros(8, np.int32)
    two_phase_steps[1, 8](b, c, temp, 2, 10)
    return b


@cuda.jit
def two_phase_steps_across_teams(b, c, temp, a, steps):
    """DRB160: ``teams`` + ``distribute``: no barrier between the two loops, and
    ``distribute`` hands the reversed loop's iterations to other teams."""
    i = cuda.blockIdx.x
    n = b.shape[0]
    for _ in range(steps):
        temp[i] = b[i] + c[i]
        b[n - 1 - i] = temp[n - 1 - i] * a


@case(ORIGIN + "DRB160-nobarrier-orig-gpu-yes.c", "race")
def drb160_nobarrier_yes():
    b, c, temp = np.zeros(16, np.int32), np.full(16, 2, np.int32), np.zeros(16, np.int32)
    two_phase_steps_across_teams[16, 1](b, c, temp, 2, 4)
    return b


# ----------------------------------------------------------------------------- simd

@cuda.jit
def every_iteration_bumps_all(var, n):
    i = cuda.grid(1)
    if i < n:
        for k in range(var.shape[0]):
            var[k] += 1


@case(ORIGIN + "DRB161-nolocksimd-orig-gpu-yes.c", "race")
def drb161_nolocksimd_yes():
    var = np.zeros(8, np.int32)
    every_iteration_bumps_all[1, 20](var, 20)
    return var


@cuda.jit
def every_iteration_bumps_all_reduced(var, n):
    """DRB162/DRB163: ``reduction(+:var)``: each thread adds into a private copy, the copies
    are combined atomically."""
    private = cuda.local.array(64, int32)
    c = var.shape[0]
    for k in range(c):
        private[k] = 0
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        for k in range(c):
            private[k] += 1
    for k in range(c):
        cuda.atomic.add(var, k, private[k])


@case(ORIGIN + "DRB162-nolocksimd-orig-gpu-no.c", "clean")
def drb162_nolocksimd_no():
    var = np.zeros(8, np.int32)
    every_iteration_bumps_all_reduced[1, 20](var, 20)
    return var


@case(ORIGIN + "DRB163-simdmissinglock1-orig-gpu-no.c", "clean")
def drb163_simdmissinglock1_no():
    var = np.zeros(64, np.int32)
    every_iteration_bumps_all_reduced[_blocks(100), TPB](var, 100)
    return var


@case(ORIGIN + "DRB164-simdmissinglock1-orig-gpu-yes.c", "race")
def drb164_simdmissinglock1_yes():
    var = np.zeros(64, np.int32)
    every_iteration_bumps_all[_blocks(100), TPB](var, 100)
    return var
