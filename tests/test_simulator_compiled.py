"""The compiled path (``minigpu.simulator.compiled``, ``MINIGPU_SIM_FAST=always``) against the
checked interpreter: the same results on correct kernels, and on buggy ones the checked path's
verdict (the compiled path only suspects, then falls back)."""
import ast
import logging
import math
import re

import numpy as np
import pytest
from numba import cuda, float32

from minigpu.simulator import compiled as compiled_path, compiled_memory, config, rules
from minigpu.simulator.counters import counters
from minigpu.simulator.errors import OutOfBoundsError, RaceError, UninitializedReadError

pytestmark = pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="simulator only")

TILE = 8


@cuda.jit
def tile_reverse(x, out):
    """Each block reverses its TILE elements through shared memory (one barrier)."""
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TILE + t
    if i < x.size:
        s[t] = x[i]
    cuda.syncthreads()
    j = cuda.blockIdx.x * TILE + TILE - 1 - t
    if i < x.size and j < x.size:
        out[i] = s[TILE - 1 - t] * 2


@cuda.jit
def tile_reverse_racy(x, out):
    """tile_reverse without its barrier: a shared-memory race."""
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    s[t] = x[cuda.blockIdx.x * TILE + t]
    out[cuda.blockIdx.x * TILE + t] = s[TILE - 1 - t]


@cuda.jit
def shift_right(x, out):
    """out[i + 1] = x[i] for every i: the last thread writes past the end."""
    i = cuda.grid(1)
    if i < x.size:
        out[i + 1] = x[i]


@cuda.jit
def add_one(x, out):
    """out[i] = x[i] + 1 (launched only by the ``auto`` test: never compiled before it)."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + float32(1)


@cuda.jit
def reads_unwritten(out):
    """Every thread reads shared memory nobody wrote."""
    s = cuda.shared.array(TILE, float32)
    out[cuda.threadIdx.x] = s[cuda.threadIdx.x] + 1


@cuda.jit
def rounding(x, out):
    """out[3i..3i+2] = floor, ceil, trunc of x[i] (a float on the GPU, never an int)."""
    i = cuda.grid(1)
    if i < x.size:
        out[3 * i] = math.floor(x[i])
        out[3 * i + 1] = math.ceil(x[i])
        out[3 * i + 2] = math.trunc(x[i])


@cuda.jit
def warp_sums(x, out):
    """out[w] = the sum of warp w's 32 values (a butterfly of shuffles in a loop); warps past
    the end of out skip it: a branch uniform in each warp, not in the block."""
    t = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    w = t // 32
    if w < out.size:
        v = x[t]
        offset = 16
        while offset > 0:
            v += cuda.shfl_xor_sync(0xFFFFFFFF, v, offset)
            offset //= 2
        if t % 32 == 0:
            out[w] = v


@cuda.jit
def half_warp_shuffle(out):
    """Half the lanes shuffle with a full mask: undefined on a GPU."""
    lane = cuda.threadIdx.x
    v = float32(lane)
    if lane < 16:
        v = cuda.shfl_down_sync(0xFFFFFFFF, v, 1)
    out[lane] = v


REVERSE_BLOCK = 64


@cuda.jit(device=True)
def block_reverse(s, v, t):
    """A device function with a barrier and an early return on a constant: inlined."""
    if REVERSE_BLOCK == 1:
        return v
    s[t] = v
    cuda.syncthreads()
    return s[REVERSE_BLOCK - 1 - t]


@cuda.jit
def reverse_blocks(x, out):
    s = cuda.shared.array(REVERSE_BLOCK, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * REVERSE_BLOCK + t
    out[i] = block_reverse(s, x[i], t) + float32(1)


@pytest.fixture
def compiled(monkeypatch):
    monkeypatch.setattr(config, "FAST", "always")
    compiled_path.STATS.clear()
    return compiled_path.STATS


def test_barrier_kernel_matches_checked_path(compiled, monkeypatch):
    x = np.random.default_rng(0).standard_normal(8 * TILE).astype(np.float32)
    out = np.zeros_like(x)
    tile_reverse[8, TILE](x, out)
    assert compiled["tile_reverse"]["fast"] == 1
    monkeypatch.setattr(config, "FAST", "0")
    ref = np.zeros_like(x)
    tile_reverse[8, TILE](x, ref)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out, (x.reshape(8, TILE)[:, ::-1] * 2).ravel())


def test_engine_ops_on_the_compiled_path(compiled):
    import minigpu as mg
    rng = np.random.default_rng(1)
    a = rng.standard_normal(300).astype(np.float32)
    got = mg.tensor(a, device="cuda").relu().numpy()
    np.testing.assert_array_equal(got, np.maximum(a, 0))
    assert any(c["fast"] for c in compiled.values())


def test_table_ops_and_tuple_arguments_on_the_compiled_path(compiled):
    """The engine's strided maps (a device function that is a lambda of the op table, strides
    passed as tuples) and max pooling (shape and window as tuples) run compiled, with the
    checked path's results."""
    import minigpu as mg
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    b = rng.standard_normal((3, 1, 1)).astype(np.float32)
    xt, bt = mg.tensor(x, device="cuda"), mg.tensor(b, device="cuda")
    np.testing.assert_array_equal((xt.transpose(2, 3) * bt).numpy(),
                                  x.transpose(0, 1, 3, 2) * b)
    pooled, where = mg.nn.functional.max_pool2d(xt, 2, return_indices=True)
    want, want_at = mg.nn.functional.max_pool2d(mg.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(pooled.numpy(), want.numpy())
    np.testing.assert_array_equal(where.numpy(), want_at.numpy())
    ran = {name: dict(c) for name, c in compiled.items()}
    strided = [c for name, c in ran.items() if "binary_strided" in name]
    assert strided and all(set(c) == {"fast"} for c in strided), ran
    assert set(ran["maxpool2d_kernel"]) == {"fast"}, ran


def test_the_source_of_a_lambda_is_that_lambda():
    """Several lambdas on one line (an op table's entry): each code object finds its own."""
    from minigpu.backends import optable
    pair = (lambda x, a: x + a, lambda x, a: x * a)
    same_params = (lambda x: x - 1, lambda x: x * 3)
    for fn, body in ((pair[0], "x + a"), (pair[1], "x * a"), (same_params[0], "x - 1"),
                     (same_params[1], "x * 3"),
                     (optable.BINARY_BY_NAME["add"].numpy, "x + y")):
        assert ast.unparse(rules.function_ast(fn.__code__).body) == body


def test_warp_shuffles_and_inlined_barriers_run_compiled(compiled, monkeypatch):
    """A shuffle is a split point of its warp: every lane's value is stored before any lane
    reads its source's; a branch that differs between warps runs predicated. A device function
    with a barrier is inlined (its constant early return folded)."""
    x = np.random.default_rng(3).standard_normal(96).astype(np.float32)
    got, want = np.zeros(2, np.float32), np.zeros(2, np.float32)
    warp_sums[1, 96](x, got)
    xs, rev = np.resize(x, 2 * REVERSE_BLOCK), np.zeros(2 * REVERSE_BLOCK, np.float32)
    reverse_blocks[2, REVERSE_BLOCK](xs, rev)
    assert compiled["warp_sums"]["fast"] == 1 and compiled["reverse_blocks"]["fast"] == 1
    monkeypatch.setattr(config, "FAST", "0")
    warp_sums[1, 96](x, want)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, x[:64].reshape(2, 32).sum(1), rtol=1e-5)
    np.testing.assert_array_equal(rev, xs.reshape(2, -1)[:, ::-1].ravel() + 1)


def test_a_shuffle_of_half_a_warp_takes_the_checked_path(compiled, monkeypatch):
    """Lanes of one warp that disagree at a shuffle: the compiled path suspects, the checked
    path decides (the same result as without the compiled path)."""
    got, want = np.zeros(32, np.float32), np.zeros(32, np.float32)
    half_warp_shuffle[1, 32](got)
    assert "fallback: " + compiled_memory.SUSPECTS[compiled_memory.DIVERGENT] in \
        compiled["half_warp_shuffle"]
    monkeypatch.setattr(config, "FAST", "0")
    half_warp_shuffle[1, 32](want)
    np.testing.assert_array_equal(got, want)


def test_engine_reductions_and_softmax_run_compiled(compiled, monkeypatch):
    """sum, argmax and softmax (warp shuffles inside inlined block reductions; softmax's
    one-warp-per-row branch) give the checked path's results: the sums and indices bit for
    bit, softmax within an ulp (``math.exp`` is the CPU's ``expf`` here, NumPy's there)."""
    import minigpu as mg
    a = np.random.default_rng(4).standard_normal((37, 300)).astype(np.float32)

    def results():
        x = mg.tensor(a, device="cuda")
        return [x.sum(-1).numpy(), x.argmax(-1).numpy(), mg.softmax(x, -1).numpy()]

    got = results()
    ran = {name.split(".")[0]: dict(c) for name, c in compiled.items()}
    for kernel in ("row_reduce_kernel", "row_argreduce_kernel", "softmax_warp_kernel"):
        assert set(ran[kernel]) == {"fast"}, ran
    monkeypatch.setattr(config, "FAST", "0")
    want = results()
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=2e-7, atol=0)


def test_rounding_keeps_nan_inf_and_negative_zero(compiled, monkeypatch):
    """Numba's CPU target makes math.floor an int64 (nan -> -9.2e18); the compiled path must
    give the GPU's float result, as the checked path does."""
    x = np.array([np.nan, np.inf, -np.inf, -0.0, -0.5, 0.5, -2.5, 1e30], np.float32)
    out = np.zeros(3 * x.size, np.float32)
    rounding[1, 32](x, out)
    assert compiled["rounding"]["fast"] == 1
    monkeypatch.setattr(config, "FAST", "0")
    ref = np.zeros_like(out)
    rounding[1, 32](x, ref)
    want = np.stack([np.floor(x), np.ceil(x), np.trunc(x)], 1).ravel()
    np.testing.assert_array_equal(ref, want)
    np.testing.assert_array_equal(out, want)
    assert np.array_equal(np.signbit(out), np.signbit(want))


@pytest.mark.parametrize("kernel, launch, error", [
    (tile_reverse_racy, lambda k: k[2, TILE](np.ones(2 * TILE, np.float32),
                                             np.zeros(2 * TILE, np.float32)), RaceError),
    (shift_right, lambda k: k[1, 32](np.ones(32, np.float32), np.zeros(32, np.float32)),
     OutOfBoundsError),
    (reads_unwritten, lambda k: k[1, TILE](np.zeros(TILE, np.float32)),
     UninitializedReadError),
])
def test_bugs_fall_back_to_the_checked_verdict(compiled, kernel, launch, error):
    with pytest.raises(error):
        launch(kernel)
    name = kernel.py_func.__qualname__
    assert any(k.startswith("fallback") for k in compiled[name]), dict(compiled[name])


@cuda.jit
def spin_on_the_last_thread(flag, out):
    """Every thread but the last waits in a ``while`` loop until the last one sets the flag."""
    t = cuda.threadIdx.x
    if t < cuda.blockDim.x - 1:
        while cuda.atomic.add(flag, 0, 0) == 0:
            pass
        out[t] = 1
    else:
        cuda.atomic.exch(flag, 0, 1)


def test_a_spin_on_a_later_thread_falls_back_instead_of_hanging(compiled):
    """The compiled path runs a region's threads one after another: thread 0 would spin for
    ever on a flag the last thread sets. After RUNAWAY_ITERATIONS iterations it is suspected,
    and the checked path, whose threads take turns, runs the launch; a loop that ends stays
    compiled."""
    from minigpu.simulator import compiled_memory
    out = np.zeros(4, np.int32)
    spin_on_the_last_thread[1, 4](np.zeros(1, np.int32), out)
    np.testing.assert_array_equal(out, [1, 1, 1, 0])
    reason = f"fallback: {compiled_memory.SUSPECTS[compiled_memory.RUNAWAY]}"
    assert compiled["spin_on_the_last_thread"][reason] == 1, dict(compiled)
    out[:] = 0
    spin_on_the_last_thread[1, 4](np.ones(1, np.int32), out)   # the flag is already set
    np.testing.assert_array_equal(out, [1, 1, 1, 0])
    assert compiled["spin_on_the_last_thread"]["fast"] == 1, dict(compiled)


@cuda.jit
def strided_sums(x, out):
    """Each of 32 threads sums a strided column of x (2,100 loads apiece: a long log), then
    one atomic and one store per thread, reading shared memory once without and once with a
    two-way bank conflict (even words of 64: two per even bank); two blocks."""
    s = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    acc = float32(0)
    for k in range(t, x.size, 32):
        acc += x[k]
    s[t] = acc
    s[32 + t] = -acc
    cuda.syncthreads()
    cuda.atomic.add(out, 0, s[31 - t])
    out[1 + cuda.blockIdx.x * 32 + t] = s[(t * 2) % 64]


def test_counters_count_the_same_on_both_paths(compiled, monkeypatch):
    """Under the counters a launch still takes the compiled path, and counts what the checked
    path counts: here 134,400 global loads (more than the log's first 65,536 rows, so the
    launch runs again with room), a shared-memory bank conflict, atomics, barriers."""
    x = np.random.default_rng(5).standard_normal(32 * 2100).astype(np.float32)
    runs = {}
    for mode in ("always", "0"):
        monkeypatch.setattr(config, "FAST", mode)
        out = np.zeros(65, np.float32)
        with counters() as launches:
            strided_sums[2, 32](x, out)
        runs[mode] = (out, launches[0].metrics)
    assert compiled["strided_sums"]["fast"] == 1
    np.testing.assert_allclose(runs["always"][0], runs["0"][0], rtol=1e-5)
    got, want = runs["always"][1], runs["0"][1]
    assert got == want
    assert want["global_load_requests"] == 2 * 2100 and want["atomics"] == 64
    assert want["barriers"] == 2 and want["shared_load_wavefronts"] == 2 * (1 + 2)


def test_a_trace_keeps_launches_on_the_checked_path(compiled):
    """A trace records every touch with its thread: the compiled path does not log that,
    so while one is on, launches take the checked path."""
    from minigpu.simulator.access_trace import trace
    x = np.arange(TILE, dtype=np.float32)
    out = np.zeros_like(x)
    with trace() as tr:
        add_one[1, TILE](x, out)
    assert tr.launches and any(k.startswith("checked: an observer") for k in compiled["add_one"])
    np.testing.assert_array_equal(out, x + 1)


def test_auto_keeps_cheap_launches_on_the_checked_path(monkeypatch):
    """``auto`` compiles only once a kernel's checked launches cost about a compile: the
    suite's small launches never pay for one."""
    monkeypatch.setattr(config, "FAST", "auto")
    compiled_path.STATS.clear()
    x = np.arange(2 * TILE, dtype=np.float32)
    out = np.zeros_like(x)
    for _ in range(2):
        add_one[2, TILE](x, out)
    assert dict(compiled_path.STATS["add_one"]) == {"checked": 2}
    assert not any(key[0] is add_one for key in compiled_path._COMPILED)
    np.testing.assert_array_equal(out, x + 1)


@cuda.jit
def doubled(x, out):
    """out[i] = 2 x[i] (launched only by the logging test: its first compile is the one
    logged)."""
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * float32(2)


@cuda.jit
def warp_all_positive(x, out):
    """out[i] = whether every lane of i's warp holds a positive value (a vote: the compiled
    path does not take it)."""
    i = cuda.grid(1)
    out[i] = cuda.all_sync(0xFFFFFFFF, x[i] > 0)


def test_compiles_and_the_checked_path_are_logged(compiled, caplog):
    """What a user waiting on a first launch sees at INFO (the demos print it): the compile
    starting, its time once the kernel ran, and why a kernel stays on the checked path."""
    x = np.arange(1, 33, dtype=np.float32)
    out = np.zeros_like(x)
    with caplog.at_level(logging.INFO, logger="minigpu.simulator"):
        for _ in range(2):
            doubled[1, 32](x, out)
        warp_all_positive[1, 32](x, np.zeros(32, np.bool_))
    said = [r.getMessage() for r in caplog.records if r.name == "minigpu.simulator.compiled"]
    assert len(said) == 3, said
    assert said[0] in ("doubled: compiling for the compiled path (once per machine and argument "
                       "types: the disk cache keeps it)", "doubled: loading from the disk cache")
    assert re.fullmatch(r"doubled: on the compiled path after \d+\.\d s \(its first launch "
                        r"included\)", said[1])
    assert said[2].startswith("warp_all_positive: stays on the checked path (ineligible: ")
    np.testing.assert_array_equal(out, 2 * x)


# --- every lesson variant on both paths --------------------------------------------------------
FLOAT16 = {"map_float16", "gemm_float16"}
"""Variants that stay on the checked path: Numba's CPU target has no float16 arithmetic."""


def _lesson_experiments():
    from minigpu import lessons
    return [pytest.param(e, id=e.name) for lesson in lessons.ALL for e in lesson.experiments]


@pytest.mark.parametrize("experiment", _lesson_experiments())
def test_every_lesson_variant_runs_compiled_with_the_checked_paths_result(experiment,
                                                                         monkeypatch):
    """The differential test: each variant of each lesson (the course's kernels, ending in the
    engine's production kernels) runs on the checked path, then compiled, both under the
    performance counters; the results agree (to the lesson's tolerance: ``math.exp`` and
    friends may differ in the last ulp), so do the counters of every launch, and every launch
    of the compiled run took the compiled path."""
    from minigpu import backends
    from minigpu.lessons.record import Inputs
    from minigpu.tools.bench import _host
    # the engine's matmul (a lesson's nn.Linear) picks its tiles by the path (COMPILED_TILES
    # under FAST=always): both runs take the compiled path's, so their launches are the same
    cuda_matmul = backends.cuda_module("matmul")
    tiles = cuda_matmul.simulator_tiles
    monkeypatch.setattr(cuda_matmul, "simulator_tiles",
                        lambda M, N, K, nbatch=1, compiled=False: tiles(M, N, K, nbatch, True))
    for variant in experiment.runnable(small=True):
        monkeypatch.setattr(config, "FAST", "0")
        with counters() as checked:
            want = _host(variant.run(experiment.build(Inputs(small=True))))
        monkeypatch.setattr(config, "FAST", "always")
        compiled_path.STATS.clear()
        with counters() as compiled:
            got = _host(variant.run(experiment.build(Inputs(small=True))))
        if want is not None:
            np.testing.assert_allclose(got, want, **experiment.tol, err_msg=variant.name)
        assert checked and [(k.name, k.metrics) for k in compiled] == \
            [(k.name, k.metrics) for k in checked], variant.name
        paths = {name: set(c) - {"checked"} for name, c in compiled_path.STATS.items()}
        assert paths, variant.name
        if variant.name in FLOAT16:
            assert all(any("float16" in p for p in ps) for ps in paths.values()), paths
        else:
            why = [d for d in compiled_path._COMPILED.values() if isinstance(d, str)]
            assert all(ps == {"fast"} for ps in paths.values()), (variant.name, paths, why)


@cuda.jit
def annotated_scale(x, out):
    i: int = cuda.grid(1)
    total: float32
    scaled: float32 = x[i] * float32(3)
    out[i]: float32 = scaled + float32(1)


def test_annotated_assignments_run_compiled(compiled, monkeypatch):
    """``x: T = v`` is an assignment (Numba does not evaluate the annotation), ``x: T`` alone
    nothing: both take the compiled path, with the checked path's result."""
    x = np.arange(2 * TILE, dtype=np.float32)
    out = np.zeros_like(x)
    annotated_scale[2, TILE](x, out)
    assert dict(compiled["annotated_scale"]) == {"fast": 1}
    monkeypatch.setattr(config, "FAST", "0")
    ref = np.zeros_like(x)
    annotated_scale[2, TILE](x, ref)
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out, x * 3 + 1)


@cuda.jit
def bit_counts(x, out):
    i = cuda.grid(1)
    v = x[i]
    out[i, 0] = cuda.popc(v)
    out[i, 1] = cuda.ffs(v)
    out[i, 2] = cuda.clz(v)
    out[i, 3] = cuda.brev(v)


@pytest.mark.parametrize("dtype", [np.uint32, np.int64])
def test_bit_intrinsics_run_compiled_with_the_checked_paths_result(compiled, monkeypatch,
                                                                   dtype):
    """``cuda.popc/ffs/clz/brev`` of 32-bit values run compiled; a negative value (which the
    checked path's Python counts otherwise than a GPU) is suspected and runs checked."""
    edges = [0, 1, 2, 3, 8, 255, 1 << 31, (1 << 32) - 1, 0x80000001, 0x12345678]
    rng = np.random.default_rng(1)
    x = np.array(edges + list(rng.integers(0, 1 << 32, 2 * TILE - len(edges))), dtype)
    out = np.zeros((x.size, 4), np.int64)
    bit_counts[2, TILE](x, out)
    assert dict(compiled["bit_counts"]) == {"fast": 1}
    monkeypatch.setattr(config, "FAST", "0")
    ref = np.zeros_like(out)
    bit_counts[2, TILE](x, ref)
    np.testing.assert_array_equal(out, ref)
    bits = [format(int(v), "032b") for v in x]
    np.testing.assert_array_equal(out[:, 0], [b.count("1") for b in bits])
    np.testing.assert_array_equal(out[:, 3], [int(b[::-1], 2) for b in bits])
    if dtype is np.int64:   # the verdict is the checked path's: its brev refuses "-101"
        monkeypatch.setattr(config, "FAST", "always")
        x[3] = -5
        with pytest.raises(ValueError, match="invalid literal"):
            bit_counts[2, TILE](x, out)
        suspected = "fallback: " + compiled_memory.SUSPECTS[compiled_memory.BITS]
        assert compiled["bit_counts"][suspected] == 1


@cuda.jit
def row_sums(a, out):
    """Each thread sums one row of a 2-d array, reached as ``a[i]`` and as ``a[(i,)]``."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        row = a[i]
        total = row[0] + a[(i,)][1]
        for j in range(2, row.shape[0]):
            total += a[i][j]
        out[i] = total


def test_a_row_of_a_2d_array_runs_compiled(compiled, monkeypatch):
    """``a[i]`` of a 2-d array is its row (a 1-d view), as in a CUDA kernel: compiled, with the
    checked path's result; a row past the end is the checked path's out-of-bounds error."""
    a = np.arange(2 * TILE * 3, dtype=np.float32).reshape(2 * TILE, 3)
    out = np.zeros(2 * TILE, np.float32)
    row_sums[2, TILE](a, out)
    assert dict(compiled["row_sums"]) == {"fast": 1}
    np.testing.assert_array_equal(out, a.sum(1))
    with pytest.raises(OutOfBoundsError):
        row_sums[2, TILE](a[:-1], out)
    assert "fallback: " + compiled_memory.SUSPECTS[compiled_memory.OUTSIDE] in \
        compiled["row_sums"], dict(compiled["row_sums"])


@cuda.jit
def cube_roots(x, out):
    i = cuda.grid(1)
    out[i] = cuda.cbrt(x[i])


@pytest.mark.parametrize("fast", ["0", "always"])
def test_cbrt_is_the_real_cube_root_on_both_paths(monkeypatch, fast):
    """A GPU's ``cbrt(-8)`` is -2 (stock's ``a ** (1/3)`` gives nan); float32 stays float32;
    the compiled path takes it."""
    monkeypatch.setattr(config, "FAST", fast)
    compiled_path.STATS.clear()
    x = np.array([-8, -27, 8, 0, -0.0, np.inf, -np.inf, np.nan] + [-1e-30] * 24, np.float32)
    out = np.zeros_like(x)
    cube_roots[1, 32](x, out)
    np.testing.assert_allclose(out, np.cbrt(x), rtol=1e-6)
    assert out[0] == -2 and out[1] == -3 and np.signbit(out[4])
    if fast == "always":
        assert dict(compiled_path.STATS["cube_roots"]) == {"fast": 1}


@cuda.jit
def set_in_some_threads(x, out):
    i = cuda.grid(1)
    if x[i] > 0:
        v = x[i] * 2
    out[i] = v


def test_a_local_unset_in_some_threads_falls_back_to_the_checked_verdict(compiled):
    """A local assigned on some paths only: the compiled path runs it when every thread
    assigned it, and suspects it (then the checked path reports the uninitialised value) when
    one did not: Numba's CPU target would read whatever its register held."""
    x = np.ones(2 * TILE, np.float32)
    out = np.zeros_like(x)
    set_in_some_threads[2, TILE](x, out)
    np.testing.assert_array_equal(out, 2 * x)
    assert dict(compiled["set_in_some_threads"]) == {"fast": 1}
    x[5] = -1
    with pytest.raises(UninitializedReadError, match="'v'"):
        set_in_some_threads[2, TILE](x, out)
    assert "fallback: " + compiled_memory.SUSPECTS[compiled_memory.UNSET] in \
        compiled["set_in_some_threads"], dict(compiled["set_in_some_threads"])
