"""The exercise grader (minigpu/exercises): every reference solution passes, also with block
sizes its stub does not suggest, and alternative correct solutions pass; every planted bug of
the corpus fails, for the right reason (the layer, the sanitizer error or the budget); the
sizes are drawn from the solution's own block size and replayed by a seed; a partly missing
compiler toolchain makes the static layer say what is missing, never fail; the command line
works from a process without the simulator.

A planted bug is the reference solution with one edit (``BUGS``) or a file in
``exercise_variants/``. Each grading runs with one fixed seed per test (a failure prints it:
``python -m minigpu.exercises check NAME FILE --seed N`` replays it).
"""
import json
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from minigpu import exercises
from minigpu.exercises import grader, specs

VARIANTS = Path(__file__).parent / "exercise_variants"
NAMES = [e.name for e in exercises.EXERCISES]

# why a planted bug must fail: (layer, text its first failure contains)
WRONG = ("correctness", "wrong result")
OOB = ("correctness", "OutOfBoundsError")
RACE = ("correctness", "RaceError")
UNINIT = ("correctness", "UninitializedReadError")
SYNC = ("correctness", "SyncError")


def budget(label):
    return ("budget", label)


# exercise -> [(bug, reasons it may fail for, edits of the reference | a variant file,
#              constants to set)]
BUGS = {
    "epilogue": [
        ("per_row_bias", WRONG, [("bias[c]", "bias[r % C]")], {}),
        ("no_column_guard", OOB, [("if r < R and c < C:", "if r < R:")], {}),
        ("uncoalesced", budget("global load sectors per request"), "epilogue_slow.py", {}),
    ],
    "stencil": [
        ("no_barrier", RACE, [("    cuda.syncthreads()\n", "")], {}),
        # the false pass of the old grader: with TPB = 128 its sizes fit in one block
        ("halo_never_loaded", WRONG,
         [("x[i - 1] if 0 < i < n + 1 else float32(0)", "float32(0)"),
          ("x[i + 1] if i + 1 < n else float32(0)", "float32(0)")], {"TPB": 128}),
        ("right_halo_past_the_end", OOB, [("if i + 1 < n else", "if i < n else")], {}),
        ("ragged_tile_unwritten", UNINIT,
         [("tile[t + 1] = x[i] if i < n else float32(0)",
           "if i < n:\n        tile[t + 1] = x[i]")], {}),
        ("no_output_guard", OOB,
         [("    if i < n:\n        out[i]", "    if True:\n        out[i]")], {}),
        ("no_shared_tile", budget("global load sectors per output"), "stencil_slow.py", {}),
    ],
    "transpose": [
        ("no_bounds", OOB, "transpose_buggy.py", {}),
        ("no_barrier", RACE, [("    cuda.syncthreads()\n", "")], {}),
        ("tile_read_by_row", WRONG + UNINIT, [("out[r, c] = tile[tx, ty + k]",
                                      "out[r, c] = tile[ty + k, tx]")], {}),
        ("bank_conflicts", budget("shared load wavefronts per request"),
         [("(TILE, PADDED)", "(TILE, TILE)")], {}),
        ("uncoalesced_writes", budget("global store sectors per request"),
         "transpose_uncoalesced.py", {}),
    ],
    "reduction": [
        ("no_barrier", RACE, "reduction_buggy.py", {}),
        ("barrier_in_a_branch", SYNC + RACE,
         [("        partial[t // 32] = v\n    cuda.syncthreads()\n",
           "        partial[t // 32] = v\n        cuda.syncthreads()\n")], {}),
        ("last_block_unguarded", OOB, [("v = x[i] if i < x.shape[0] else float32(0)",
                                        "v = x[i]")], {}),
        # the grader's strict mode: fine on Volta+ by accident, undefined by the CUDA guide
        ("early_return_before_the_barrier", SYNC, "reduction_early_return.py", {}),
        ("a_shuffle_step_short", WRONG,
         [("    offset = 16\n    while", "    offset = 8\n    while")], {}),
        ("shared_tree", budget("barriers per block"), "reduction_slow.py", {}),
        ("one_thread_per_block", budget("global load requests per input element"),
         "reduction_one_thread.py", {}),
    ],
    "softmax": [
        ("only_lane_0_has_it", WRONG, [("shfl_xor_sync", "shfl_down_sync")], {}),
        ("no_max_subtracted", WRONG, [("math.exp(x[r, c] - m)", "math.exp(x[r, c])")], {}),
        ("lanes_exit_before_the_shuffles", SYNC + RACE + WRONG,
         [("    if r >= R:\n        return", "    if r >= R or lane >= C:\n        return")],
         {}),
        ("thread_per_row", budget("global load sectors per request"), "softmax_slow.py", {}),
        ("one_lane_per_row", budget("global load requests per row"), "softmax_serial.py", {}),
    ],
    "spmv": [
        ("a_shuffle_step_short", WRONG, [("    offset = 16\n", "    offset = 8\n")], {}),
        ("row_offset_forgotten", WRONG, [("range(indptr[r] + lane, indptr[r + 1], 32)",
                                          "range(lane, indptr[r + 1] - indptr[r], 32)")], {}),
        ("every_lane_writes", RACE, [("    if lane == 0:\n        y[r] = acc",
                                      "    y[r] = acc")], {}),
        ("no_row_guard", OOB, [("    if r >= y.shape[0]:\n        return  ", "    #")], {}),
        ("thread_per_row", budget("global load sectors per request")
         + budget("global load requests per nonzero"), "spmv_thread_per_row.py", {}),
        ("one_lane_per_row", budget("global load requests per nonzero"), "spmv_serial.py", {}),
    ],
    "histogram": [
        ("bins_never_zeroed", UNINIT, "histogram_buggy.py", {}),
        ("no_barrier_after_zeroing", RACE, [("        local[t] = 0\n    cuda.syncthreads()\n",
                                             "        local[t] = 0\n")], {}),
        ("plain_increment", RACE, [("cuda.atomic.add(local, values[i], 1)",
                                    "local[values[i]] += 1")], {}),
        ("last_block_unguarded", OOB, [("    if i < values.shape[0]:\n        cuda",
                                        "    if True:\n        cuda")], {}),
        ("global_atomics", budget("global atomics per bin per block"), "histogram_slow.py",
         {}),
        ("one_thread_per_block", budget("global load requests per input element"),
         "histogram_one_thread.py", {}),
        ("strided_blocks", budget("global load sectors per request"), "histogram_strided.py",
         {}),
    ],
    "scan": [
        ("no_read_write_barrier", RACE, "scan_buggy.py", {}),
        ("off_by_one", WRONG, [("if t >= d", "if t > d")], {}),
        ("last_block_unguarded", OOB, [("buf[t] = x[i] if i < n else float32(0)",
                                        "buf[t] = x[i]")], {}),
        ("prefix_from_global", budget("global load sectors per output"), "scan_slow.py", {}),
        ("bank_conflicts", budget("shared load wavefronts per request"),
         "scan_bank_conflicts.py", {}),
    ],
    "scan_blocks": [
        ("adds_its_own_total", WRONG, [("out[i] += sums[b - 1]", "out[i] += sums[b]")], {}),
        ("ragged_total_unwritten", UNINIT,
         [("    if t == TPB - 1:\n        sums",
           "    if t == TPB - 1 and i < x.shape[0]:\n        sums")], {}),
        ("no_barrier_in_the_scan", RACE, [("        cuda.syncthreads()\n        buf[t] += v",
                                           "        buf[t] += v")], {}),
        ("block_0_adds_too", OOB, [("if b > 0 and i < out.shape[0]:", "if i < out.shape[0]:")],
         {}),
        ("block_scan_bank_conflicts", budget("shared load wavefronts per request"),
         [("buf = cuda.shared.array(TPB, float32)", "buf = cuda.shared.array(2 * TPB, float32)"),
          ("buf[t - d] if t >= d", "buf[2 * (t - d)] if t >= d"),
          ("buf[t] += v", "buf[2 * t] += v"),
          ("buf[t] = x[i] if", "buf[2 * t] = x[i] if"), ("out[i] = buf[t]", "out[i] = buf[2 * t]"),
          ("sums[cuda.blockIdx.x] = buf[t]", "sums[cuda.blockIdx.x] = buf[2 * t]"),
          ("buf[t] = sums[t] if", "buf[2 * t] = sums[t] if"),
          ("sums[t] = buf[t]", "sums[t] = buf[2 * t]")],
         {}),
    ],
    "matmul": [
        ("no_second_barrier", RACE, [("acc += sa[ty, k] * sb[k, tx]\n        cuda.syncthreads()\n",
                                      "acc += sa[ty, k] * sb[k, tx]\n")], {}),
        ("no_first_barrier", RACE, [(" else float32(0)\n        cuda.syncthreads()\n",
                                     " else float32(0)\n")], {}),
        ("tile_edge_unguarded", OOB, [("a[row, k0 + tx] if row < M and k0 + tx < K else",
                                       "a[row, k0 + tx] if row < M else")], {}),
        ("b_tile_transposed", WRONG, [("sb[ty, tx] = b[k0 + ty, col]",
                                       "sb[tx, ty] = b[k0 + ty, col]")], {}),
        ("no_tiles", budget("global load requests per warp"), "matmul_slow.py", {}),
        ("b_tile_stored_by_column", budget("shared load wavefronts per request"),
         [("sb[ty, tx] = b[k0 + ty, col]", "sb[tx, ty] = b[k0 + ty, col]"),
          ("acc += sa[ty, k] * sb[k, tx]", "acc += sa[ty, k] * sb[tx, k]")], {}),
    ],
    "conv2d": [
        ("filter_flipped", WRONG, [("acc += w[i, j] * x[rr, cc]",
                                    "acc += w[K - 1 - i, K - 1 - j] * x[rr, cc]")], {}),
        ("radius_fixed_at_1", WRONG, [("    R = K // 2\n", "    R = 1\n")], {}),
        ("halo_unguarded", OOB, [("if 0 <= cc < W:", "if True:")], {}),
        ("last_block_unguarded", OOB, [("if r < H and c < W:", "if r < H:")], {}),
        ("uncoalesced", budget("global load sectors per request"), "conv2d_uncoalesced.py",
         {}),
    ],
    "sort": [
        ("no_barrier", RACE, [("            cuda.syncthreads()\n            p = t ^ j",
                               "            p = t ^ j")], {}),
        ("padded_with_zero", WRONG, [("x[i] if i < n else INF", "x[i] if i < n else float32(0)")],
         {}),
        ("wrong_direction", WRONG + RACE, [("((t & k) == 0)", "((t & j) == 0)")], {}),
        # equal keys collide on one place and leave another unwritten: a later pass reads it
        ("ties_collide", RACE + WRONG + UNINIT,
         [("if w < v or (w == v and not left):", "if w < v:")], {}),
        ("last_run_unbounded", OOB, [("min(start + 2 * width, n)", "start + 2 * width")], {}),
        ("odd_even_transposition", budget("barriers per block of sort_blocks"),
         "sort_odd_even.py", {}),
    ],
    "online_softmax": [
        ("no_rescale", WRONG, [("s1 * math.exp(m1 - m)", "s1")], {}),
        ("empty_lanes_make_nan", WRONG, [("    if m == NEG_INF:\n        return m, s1 + s2\n",
                                          "")], {}),
        ("only_lane_0_has_it", WRONG, [("shfl_xor_sync", "shfl_down_sync")], {}),
        ("three_passes", budget("global load sectors per element"),
         str(exercises.solution_path("softmax")), {}),
        ("one_lane_per_row", budget("global load requests per row"),
         "online_softmax_one_lane.py", {}),
    ],
    "flash_attention": [
        ("no_rescale", WRONG, [("acc[c] = acc[c] * alpha + p * Vs[jj, c]",
                                "acc[c] = acc[c] + p * Vs[jj, c]")], {}),
        ("no_barrier_before_reload", RACE,
         [("        cuda.syncthreads()                           # Q loaded", "        #")], {}),
        ("two_passes", budget("global load sectors per output"),
         "flash_attention_two_pass.py", {}),
    ],
    # the debugging track: the bug handed to the student is the stub (DEBUG_STARTERS); here
    # are the "fixes" that hide it without fixing it
    "debug_bounds": [("guard_shrunk", WRONG, "debug_bounds_guard_shrunk.py", {})],
    "debug_coalescing": [
        ("one_item_per_thread", ("import", "ITEMS must be at least 2"),
         str(exercises.stub_path("debug_coalescing")), {"ITEMS": 1}),
        ("half_the_items", WRONG, [("for k in range(ITEMS):", "for k in range(ITEMS // 2):")],
         {})],
    "debug_barrier": [
        ("x_from_global", budget("global load requests per output"),
         "debug_barrier_from_global.py", {}),
        ("barrier_in_the_guard", SYNC + RACE,
         [("                acc += at[k0 + j, r] * xs[j]\n        cuda.syncthreads()",
           "                acc += at[k0 + j, r] * xs[j]\n            cuda.syncthreads()")], {})],
    "debug_race": [("thread_zero_counts", budget("global load requests per input element"),
                    "debug_race_thread_zero_counts.py", {})],
    "debug_uninit": [("zero_filled", WRONG, "debug_uninit_zero_filled.py", {})],
    "debug_banks": [("tile_dropped", budget("global load sectors per request"),
                     "debug_banks_from_global.py", {})],
}
DEBUGGING = [e.name for e in specs.DEBUGGING]

# block sizes the stubs do not suggest: the references must pass with them too
CONSTANTS = {
    "epilogue": [{"BX": 16, "BY": 4}, {"BX": 64, "BY": 2}],
    "stencil": [{"TPB": 48}, {"TPB": 128}],
    "transpose": [{"TILE": 16, "ROWS": 4}, {"TILE": 8, "ROWS": 8}],
    "reduction": [{"TPB": 64}, {"TPB": 96}],
    "softmax": [{"WARPS": 1}, {"WARPS": 3}],
    "spmv": [{"WARPS": 2}, {"WARPS": 8}],
    "histogram": [{"TPB": 32}, {"TPB": 128, "NBINS": 8}],
    "scan": [{"TPB": 32}, {"TPB": 48}],
    "scan_blocks": [{"TPB": 32}, {"TPB": 128}],
    "matmul": [{"TILE": 8}, {"TILE": 12}],
    "conv2d": [{"BX": 16, "BY": 16}, {"BX": 64, "BY": 2}],
    "sort": [{"TPB": 32}, {"TPB": 128}],
    "online_softmax": [{"WARPS": 1}, {"WARPS": 8}],
    "flash_attention": [{"BQ": 4, "BK": 16}],
    "debug_bounds": [{"BX": 16, "BY": 8}], "debug_coalescing": [{"TPB": 32, "ITEMS": 3}],
    "debug_barrier": [{"TPB": 16}], "debug_race": [{"TPB": 96}], "debug_uninit": [{"TPB": 32}],
    "debug_banks": [{"TILE": 16}],
}

# correct solutions written differently from the references
ALTERNATIVES = [("reduction", "reduction_serial_tail.py"),
                ("stencil", "stencil_halo_by_neighbours.py"),
                ("scan", "scan_double_buffer.py"), ("scan", "scan_blelloch.py"),
                ("softmax", "softmax_shfl_down_broadcast.py"), ("epilogue", "epilogue_grid2.py"),
                ("debug_coalescing", "debug_coalescing_grid_stride.py"),
                ("debug_barrier", "debug_barrier_double_buffer.py"),
                ("debug_race", "debug_race_syncthreads_count.py"),
                ("debug_uninit", "debug_uninit_guarded_reads.py"),
                ("debug_banks", "debug_banks_swizzled.py")]


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode()) % 100_000


def _with_constants(text, constants):
    for name, value in constants.items():
        text, n = re.subn(rf"^{name}\s*=\s*[^#\n]*", f"{name} = {value}", text, count=1,
                          flags=re.M)
        assert n, name
    return text


@pytest.fixture(scope="module")
def write(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("variants")

    def write(name, text):
        path = tmp / f"{name}.py"
        path.write_text(text)
        return path
    return write


def _planted(exercise, bug, change, constants, write):
    if isinstance(change, str):
        path = Path(change) if os.sep in change else VARIANTS / change
        text = path.read_text()
    else:
        text = exercises.solution_path(exercise).read_text()
        for old, new in change:
            assert old in text, (exercise, bug, old)
            text = text.replace(old, new)
    return write(f"{exercise}_{bug}", _with_constants(text, constants))


@pytest.mark.parametrize("name", NAMES)
def test_reference_passes(name):
    res = exercises.check(name, exercises.solution_path(name), static=False,
                          seed=_seed("ref", name))
    assert res.passed, res.text()
    assert res.scores and all(s[1] <= s[2] for s in res.scores)
    assert not any("skipped" in n for n in res.notes), res.text()


@pytest.mark.parametrize("name,constants", [(n, c) for n in NAMES for c in CONSTANTS[n]],
                         ids=lambda v: "-".join(f"{k}{x}" for k, x in v.items())
                         if isinstance(v, dict) else v)
def test_reference_passes_with_other_block_sizes(name, constants, write):
    text = _with_constants(exercises.solution_path(name).read_text(), constants)
    path = write(f"{name}_" + "_".join(f"{k}{v}" for k, v in constants.items()), text)
    res = exercises.check(name, path, static=False, seed=_seed("blocks", name, constants))
    assert res.passed, res.text()
    assert not any("skipped" in n for n in res.notes), res.text()


@pytest.mark.parametrize("name,variant", ALTERNATIVES)
def test_alternative_correct_solutions_pass(name, variant):
    res = exercises.check(name, VARIANTS / variant, static=False, seed=_seed("alt", variant))
    assert res.passed, res.text()


@pytest.mark.parametrize("name,bug,reasons,change,constants",
                         [(n, *b) for n in NAMES for b in BUGS[n]],
                         ids=[f"{n}-{b[0]}" for n in NAMES for b in BUGS[n]])
def test_planted_bug_fails_for_the_right_reason(name, bug, reasons, change, constants, write):
    path = _planted(name, bug, change, constants, write)
    seed = _seed("bug", name, bug)
    res = exercises.check(name, path, static=False, seed=seed)
    assert not res.passed, f"seed {seed}\n{res.text()}"
    wanted = list(zip(reasons[::2], reasons[1::2]))
    assert {layer for layer, _ in res.failures} <= {lay for lay, _ in wanted}, res.text()
    assert any(layer == lay and text in message for layer, message in res.failures
               for lay, text in wanted), f"expected one of {wanted}; seed {seed}\n{res.text()}"
    assert all("docs/course/" in message for _, message in res.failures)


# One edge bug per exercise, written as a student would hand it in (exercise_variants/*_edge_*):
# each goes wrong only at some edge (a last block of one element, one short of full, ragged).
EDGE_BUGS = {
    "epilogue": ("epilogue_edge_rows.py", OOB), "stencil": ("stencil_edge_halo.py", WRONG),
    "transpose": ("transpose_edge_write.py", OOB), "reduction": ("reduction_edge_load.py", OOB),
    "softmax": ("softmax_edge_rows.py", OOB), "spmv": ("spmv_edge_rows.py", OOB),
    "histogram": ("histogram_edge_count.py", OOB), "scan": ("scan_edge_store.py", WRONG),
    "scan_blocks": ("scan_blocks_edge_add.py", OOB), "matmul": ("matmul_edge_k_loop.py", WRONG),
    "conv2d": ("conv2d_edge_halo.py", OOB), "sort": ("sort_edge_merge.py", OOB),
    "online_softmax": ("online_softmax_edge_rows.py", OOB),
    "flash_attention": ("flash_attention_edge_keys.py", WRONG),
}
# The debugging track's starters (the stubs), each failing for the bug it teaches
DEBUG_STARTERS = {
    "debug_bounds": OOB, "debug_coalescing": budget("global load sectors per request"),
    "debug_barrier": RACE, "debug_race": RACE, "debug_uninit": UNINIT,
    "debug_banks": budget("shared load wavefronts per request"),
}
EDGE_BUGS.update({name: (str(exercises.stub_path(name)), reasons)
                  for name, reasons in DEBUG_STARTERS.items()})
# seeds per edge bug: 3 in the suite; MINIGPU_EXERCISE_SEEDS=10 for the once-off wider run
EDGE_SEEDS = range(int(os.environ.get("MINIGPU_EXERCISE_SEEDS", 3)))


@pytest.mark.parametrize("name", NAMES)
def test_edge_bug_fails_on_every_seed(name):
    """The false passes of the old grader (a stencil halo off by one PASSED 5 seeds of 8):
    every seed's sizes hold every edge, so the bug fails each time, for its reason."""
    variant, (layer, text) = EDGE_BUGS[name]
    for k in EDGE_SEEDS:
        seed = _seed("edge", name, k)
        res = exercises.check(name, VARIANTS / variant, static=False, seed=seed)
        assert not res.passed, f"seed {seed}\n{res.text()}"
        assert res.failures[0][0] == layer and text in res.failures[0][1], \
            f"seed {seed}\n{res.text()}"


def test_every_exercise_has_stub_solution_chapter_and_a_corpus():
    chapters = [int(Path(e.chapter).name[:2]) for e in exercises.EXERCISES]
    assert chapters == sorted(chapters), "EXERCISES is not in course order"
    root = Path(__file__).parents[1]
    for ex in exercises.EXERCISES:
        assert exercises.stub_path(ex.name).exists() and exercises.solution_path(ex.name).exists()
        assert "TODO" in exercises.stub_path(ex.name).read_text()
        assert (root / ex.chapter).exists() and ex.name in (root / ex.chapter).read_text()
        layers = {reasons[0] for _, reasons, _, _ in BUGS[ex.name]}
        if ex.name in DEBUGGING:    # its starter fails, and a fix that hides the bug too
            assert BUGS[ex.name] and "TODO" in exercises.stub_path(ex.name).read_text()
        else:
            assert layers == {"correctness", "budget"}, ex.name
    assert len(NAMES) >= 20 and len(DEBUGGING) >= 6 and NAMES[-len(DEBUGGING):] == DEBUGGING


def test_stubs_are_graded_not_crashed():
    for name in ("stencil", "sort", "scan_blocks"):
        res = exercises.check(name, exercises.stub_path(name), static=False, seed=1)
        assert not res.passed and res.failures[0][0] == "correctness", res.text()
        assert "wrong result" in res.failures[0][1] and "never written" in res.failures[0][1]


@pytest.mark.parametrize("name", NAMES)
def test_sizes_span_several_blocks_with_every_edge(name):
    """Drawn from the solution's constants: for the stub's and the other block sizes, every
    shape covers more than one block, and along every blocked axis the sizes of one grading
    include an exact multiple of the block, one more, one less and a drawn ragged one,
    whatever the seed; a seed replays the sizes and different seeds differ."""
    ex = exercises.BY_NAME[name]
    base = grader.constants_of(ex, grader.load(exercises.solution_path(name)))
    for consts in [base] + [{**base, **c} for c in CONSTANTS[name]]:
        drawn = set()
        extents = _extents(name, consts)
        for seed in range(12):
            sizes = ex.sizes(np.random.default_rng(seed), consts)
            assert sizes == ex.sizes(np.random.default_rng(seed), consts)
            drawn.add(repr(sizes))
            dims = [s if isinstance(s, tuple) else (s,) for s in sizes]
            for shape in dims:
                blocks = [-(-d // e) for d, e in zip(shape, extents) if e]
                assert np.prod(blocks) >= 2, (name, consts, shape)
            for axis, e in enumerate(extents):
                if not e or e == 1:
                    continue
                left = {d[axis] % e for d in dims}
                assert {0, 1, e - 1} <= left, (name, consts, axis, sizes)
                assert len(left) >= min(e, 3), (name, consts, axis, sizes)
        assert len(drawn) > 1


def _extents(name, c):
    """Elements per block along each dimension of a size (0: not blocked)."""
    return {"epilogue": (c.get("BY"), c.get("BX")), "transpose": (c.get("TILE"),) * 2,
            "matmul": (c.get("TILE"),) * 3, "softmax": (c.get("WARPS"), 32),
            "online_softmax": (c.get("WARPS"), 32), "spmv": (c.get("WARPS"), 0),
            "conv2d": (c.get("BY"), c.get("BX"), 0),
            "flash_attention": (c.get("BQ"), c.get("BK")),
            "debug_bounds": (c.get("BY"), c.get("BX")),
            "debug_coalescing": (c["TPB"] * c["ITEMS"],) if "ITEMS" in c else (0,),
            "debug_barrier": (c.get("TPB"),) * 2, "debug_banks": (c.get("TILE"),) * 2,
            }.get(name, (c.get("TPB"),))


def test_seed_is_printed_and_replays_the_sizes(write):
    first = exercises.check("stencil", exercises.solution_path("stencil"), static=False)
    seed = int(re.search(r"seed (\d+):", "\n".join(first.header)).group(1))
    again = exercises.check("stencil", exercises.solution_path("stencil"), static=False,
                            seed=seed)
    assert first.header == again.header and f"--seed {seed}" in first.text()


def test_constants_are_checked_with_a_clear_message(write):
    text = exercises.solution_path("reduction").read_text()
    res = exercises.check("reduction", write("reduction_tpb100",
                                             _with_constants(text, {"TPB": 100})), static=False)
    assert res.failures == [("import", "ValueError: TPB must be a multiple of 32 (whole warps), "
                                       "got 100")]
    res = exercises.check("sort", write("sort_no_merge", "TPB = 64\n"), static=False)
    assert res.failures[0][0] == "import" and "sort_blocks, merge" in res.failures[0][1]


def test_static_limits_on_canned_reports():
    from minigpu.tools.kernel_report import KernelReport
    ex = exercises.BY_NAME["reduction"]
    good = KernelReport("k", 128, "float32", registers=20, occupancy=1.0)
    assert grader.static_limits(ex, good) == []
    bad = KernelReport("k", 128, "float32", registers=200, spill_stores=8, f64=3,
                       occupancy=0.25, limited_by="registers")
    msgs = grader.static_limits(ex, bad)
    assert len(msgs) == 4 and all("docs/course/" in m for m in msgs)


def test_cli_from_a_process_without_the_simulator(tmp_path):
    """list, stub + check as the README runs them: the grader restarts itself on the
    simulator, and layer (c) runs or says it was skipped and why."""
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    run = lambda *a: subprocess.run([sys.executable, "-m", "minigpu.exercises", *a],
                                    capture_output=True, text=True, env=env, cwd=tmp_path)
    listed = run("list")
    assert listed.returncode == 0
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines[::2]] == NAMES
    assert [line.split()[0] for line in lines[1::2]] == [e.chapter for e in exercises.EXERCISES]
    assert run("stub", "histogram", "mine.py").returncode == 0
    failed = run("check", "histogram", "mine.py", "--no-static", "--seed", "5")
    assert failed.returncode == 1 and "FAILED" in failed.stdout and "seed 5:" in failed.stdout
    (tmp_path / "mine.py").write_text(exercises.solution_path("histogram").read_text())
    ok = run("check", "histogram", "mine.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASSED" in ok.stdout
    assert "sm_90 kernel:" in ok.stdout or "layer c) skipped: missing" in ok.stdout
    bad = run("check", "nosuch", "mine.py")
    assert bad.returncode == 2 and "the exercises are: epilogue, stencil" in bad.stderr
    assert "Traceback" not in bad.stderr


SITE_NO_NVRTC = '''
import numba.cuda.cudadrv.nvrtc as nvrtc
from numba.cuda.cudadrv.error import NvrtcSupportError
def _missing(*args, **kwargs):
    raise NvrtcSupportError("libNVRTC cannot be found (test: hidden)")
nvrtc.compile = nvrtc.get_supported_ccs = _missing
import numba.cuda
_compile_ptx = numba.cuda.compile_ptx
def compile_ptx(*args, **kwargs):
    raise OSError("libnvrtc.so.13: cannot open shared object file (test: hidden)")
numba.cuda.compile_ptx = compile_ptx
'''

SITE_NO_PTXAS = '''
import minigpu.tools.kernel_report as kr
_find = kr._find_binary
kr._find_binary = lambda name: None if name == "ptxas" else _find(name)
'''


SITE_NO_NVVM = '''
import numba.cuda.cudadrv.nvvm as nvvm
from numba.cuda.cudadrv.error import NvvmSupportError
class _Hidden:
    def __new__(cls, *args, **kwargs):
        raise NvvmSupportError("libNVVM cannot be found (test: hidden)")
nvvm.NVVM = _Hidden
nvvm.is_available = lambda: False
'''


def _hiding(site, tmp_path, monkeypatch):
    """Child processes start with ``site`` (a sitecustomize hiding part of the toolchain)."""
    (tmp_path / "sitecustomize.py").write_text(site)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


@pytest.mark.parametrize("site,why", [(SITE_NO_NVRTC, "libnvrtc"), (SITE_NO_PTXAS, "ptxas"),
                                      (SITE_NO_NVVM, "NVVM")],
                         ids=["no-libnvrtc", "no-ptxas", "no-nvvm"])
def test_partial_toolchain_types_the_kernels_and_says_what_went_unchecked(
        site, why, tmp_path, monkeypatch):
    """NVVM present but libnvrtc absent (every compile fails in the toolchain), ptxas absent,
    or NVVM absent (the install without the inspect extra): layer (c) says what is missing,
    the kernels are typed for the CUDA target instead, and the verdict says what was not
    compiled."""
    _hiding(site, tmp_path, monkeypatch)
    res = exercises.check("epilogue", exercises.solution_path("epilogue"), seed=1)
    assert res.passed, res.text()
    skipped = [n for n in res.notes if n.startswith("static limits (layer c) skipped")]
    assert skipped and why in skipped[0], res.text()
    assert any(n.startswith("typed for the CUDA target instead") for n in res.notes)
    assert res.text().endswith(f"PASSED (simulated; not compiled for sm_90: {res.unchecked})")
    assert why in res.unchecked


# what a GPU build refuses though the simulator runs it (python semantics): a Python list
# built in the kernel, and float64 arithmetic in a float32 exercise
REFUSED = [("stencil", "out[i] = tile[t] + tile[t + 1] + tile[t + 2]",
            "out[i] = sum([tile[t], tile[t + 1], tile[t + 2]])", "sum(list(float32)"),
           ("epilogue", "SLOPE * v", "0.1 * v", "float64 instructions")]


@pytest.mark.parametrize("hidden", [False, True], ids=["toolchain", "no-nvvm"])
@pytest.mark.parametrize("name,old,new,why", REFUSED, ids=["list", "float64"])
def test_what_a_gpu_refuses_never_passes(name, old, new, why, hidden, write, tmp_path,
                                         monkeypatch):
    """With the full toolchain (compiled for sm_90) and without it (typed by Numba's front
    end): correct on the simulator, FAILED in layer (c), naming why."""
    if hidden:
        _hiding(SITE_NO_NVVM, tmp_path, monkeypatch)
    text = exercises.solution_path(name).read_text()
    assert old in text
    res = exercises.check(name, write(f"{name}_refused", text.replace(old, new)), seed=4)
    if not hidden and any("layer c) skipped: missing" in n for n in res.notes):
        pytest.skip("CUDA compiler toolchain not installed: the no-nvvm case covers it")
    assert [layer for layer, _ in res.failures] == ["static"], res.text()
    assert why in res.failures[0][1] and "docs/course/" in res.failures[0][1], res.text()
    assert res.text().endswith("FAILED")


def _scores(name, path, seed):
    return {label: v for label, v, *_ in
            exercises.check(name, path, static=False, seed=seed).scores}


def test_numbers_quoted_in_the_course():
    """docs/course/02 and 05 quote these: keep them true."""
    ref = _scores("stencil", exercises.solution_path("stencil"), 7)
    slow = _scores("stencil", VARIANTS / "stencil_slow.py", 7)
    key = "global load sectors per output"
    assert slow[key] > 2 * ref[key]          # "more than twice the sectors"
    assert _scores("reduction", exercises.solution_path("reduction"), 7)[
        "barriers per block"] == 1
    assert _scores("reduction", VARIANTS / "reduction_slow.py", 7)["barriers per block"] == 8
    key = "global load sectors per element"     # 12: three passes read 1.5 times two
    three = _scores("online_softmax", exercises.solution_path("softmax"), 7)[key]
    two = _scores("online_softmax", exercises.solution_path("online_softmax"), 7)[key]
    assert three == pytest.approx(1.5 * two)


def test_numbers_and_messages_quoted_in_chapter_14():
    """docs/course/14-debugging.md quotes the starters' counters and messages (seed 1)."""
    starter = _scores("debug_coalescing", exercises.stub_path("debug_coalescing"), 1)
    fixed = _scores("debug_coalescing", exercises.solution_path("debug_coalescing"), 1)
    for key in ("global load sectors per request", "global store sectors per request"):
        assert round(starter[key]) == 14 and round(fixed[key]) == 4, (starter, fixed)
    key = "shared load wavefronts per request"
    assert _scores("debug_banks", exercises.stub_path("debug_banks"), 1)[key] == 32
    assert _scores("debug_banks", exercises.solution_path("debug_banks"), 1)[key] == 1
    chapter = (Path(__file__).parents[1] / "docs/course/14-debugging.md").read_text()
    for name, mine in (("debug_bounds", "my_bounds.py"), ("debug_barrier", "my_barrier.py")):
        message = exercises.check(name, exercises.stub_path(name), static=False,
                                  seed=1).failures[0][1]
        message = message.replace(str(exercises.stub_path(name)), mine)
        quoted = re.search(r"```text\n(.*?)```", chapter.split(f"(`{name}`)")[1], re.S).group(1)
        words = [" ".join(re.sub(r"block \(\d+, \d+, 0\)", "block", t).split())   # blocks
                 for t in (quoted, message)]                               # run shuffled
        assert words[0] in words[1], message


def test_static_layer_catches_float64(write):
    """Layer (c) on the sm_90 build (skipped without the toolchain, as the grader says)."""
    ref = exercises.check("epilogue", exercises.solution_path("epilogue"), seed=2)
    assert ref.passed, ref.text()
    if any("layer c) skipped" in n for n in ref.notes):
        pytest.skip("CUDA compiler toolchain not installed")
    assert any(n.startswith("sm_90 kernel:") for n in ref.notes)
    text = exercises.solution_path("epilogue").read_text().replace("SLOPE * v", "0.1 * v")
    res = exercises.check("epilogue", write("epilogue_float64", text), seed=2)
    assert [layer for layer, _ in res.failures] == ["static"], res.text()
    assert "float64" in res.failures[0][1] and "docs/course/" in res.failures[0][1]


def test_readme_shows_the_path_the_cli_test_runs():
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for cmd in ("pip install -e . && .venv/bin/python -m minigpu.exercises list",
                "minigpu.exercises stub stencil my_stencil.py",
                "minigpu.exercises check stencil my_stencil.py"):
        assert cmd in readme


def test_specs_budgets_name_a_chapter_and_the_reference_measures_them():
    for ex in exercises.EXERCISES:
        assert ex.budgets
        for b in ex.budgets:
            assert b.chapter in specs.CH.values()


def test_plot_draws_the_solution_next_to_the_reference(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    res = exercises.check("histogram", VARIANTS / "histogram_slow.py", static=False, seed=3,
                          plot=tmp_path)
    assert not res.passed and (tmp_path / "exercise_histogram.png").stat().st_size > 20_000
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # as without the demos extra
    res = exercises.check("histogram", exercises.solution_path("histogram"), static=False,
                          seed=3, plot=tmp_path / "none")
    assert res.passed and "no picture: pictures need matplotlib" in "\n".join(res.notes)


# English that stays in the Japanese report: names (constants, tools, Python's), code
KEEP_ENGLISH = {"NaN", "int", "CUDA", "NVVM", "Numba", "TILE", "ROWS", "NBINS", "WARPS", "ITEMS",
                "TPB", "pip", "install", "inspect", "matplotlib", "demos", "ptxas", "nvidia",
                "nvcc", "python", "minigpu", "exercises", "stub", "float", "GPU", "Python",
                "NOPE", "merge", "sort_blocks"}


def _english_left(text):
    """The English words of ``text`` outside code, paths, identifiers and KEEP_ENGLISH."""
    text = re.sub(r"`[^`]*`|--\w+|\w+(?:-\w+)+|\S+/\S+|\S*\.py\b|\w*_\w*|\w+Error\b|'[^']*'|\[[^\]]*\]", " ", text)
    return [w for w in re.findall(r"[A-Za-z]{3,}", text) if w not in KEEP_ENGLISH | set(NAMES)]


def _every_grader_message(tmp_path, monkeypatch):
    """One report text for every message path of the grader (real runs where they are
    cheap, the grader's own functions on canned inputs where they are not)."""
    from minigpu.exercises.__main__ import _refused
    from minigpu.tools.kernel_report import KernelReport
    texts = [exercises.check(n, p, static=False, seed=1, plot=tmp_path).text() for n, p in (
        ("stencil", VARIANTS / "stencil_edge_halo.py"),                 # a wrong result
        ("debug_coalescing", exercises.stub_path("debug_coalescing")),  # budgets, a picture
        ("debug_race", exercises.solution_path("debug_race")))]        # passed, no picture
    raised = exercises.check("debug_race", exercises.stub_path("debug_race"), static=False,
                             seed=1).text()                # the sanitizer's own words stay
    texts.append(re.sub(r"RaceError: .*?(?= \(see docs/simulator)", "RaceError: `...`", raised,
                        flags=re.S))
    res = grader.Result("sort")
    for ex in exercises.EXERCISES:                         # every constant refused
        for value in (0, 3, 100, 2000, "8"):
            try:
                grader.constants_of(ex, type("m", (), {k: value for k in ex.constants}))
            except ValueError as exc:
                res.failures.append(("import", f"ValueError: {exc}"))
    for load in (lambda: grader.constants_of(exercises.BY_NAME["stencil"], object()),
                 lambda: grader.load(exercises.solution_path("stencil"), {"NOPE": 1})):
        try:
            load()
        except ValueError as exc:
            res.failures.append(("import", f"ValueError: {exc}"))
    (tmp_path / "no_merge.py").write_text("TPB = 64\n")
    res.failures += exercises.check("sort", tmp_path / "no_merge.py", static=False).failures
    ex = exercises.BY_NAME["sort"]
    bad = KernelReport("my_kernel", 128, "float32", registers=200, spill_stores=8, f64=3,
                       occupancy=0.25, limited_by="registers")
    res.failures += [("static", m) for m in grader.static_limits(ex, bad) + [
        grader.float64_failure("my_kernel", 3, "%x = fmul double"),
        _refused("my_kernel", Exception("`sum(list)`"), True),
        _refused("my_kernel", Exception("`sum(list)`"), False)]]
    empty = grader.Measurement([], 0, [np.zeros(4)], np.zeros(4), 4, {"TPB": 32})
    for reference in (empty, None):                        # unmeasurable; no reference run
        monkeypatch.setattr(grader, "reference_measurement", lambda *a, r=reference: r)
        grader._budgets(ex, {"TPB": 32}, 4, 1, empty, res)
    res.failures.append(("correctness", f"size 3: {grader._mismatch(np.zeros(2), np.zeros(3), 0, 1)}"
                                        f" (see {ex.chapter})"))
    canned = dict(reports=[dict(name="my_kernel", registers=20, smem=0, occupancy=1.0,
                                spill_stores=0, spill_loads=0, f64=0)],
                  failures=[], typed=["my_kernel"], missing="ptxas (pip install nvidia-cuda-nvcc)",
                  skipped=["my_kernel: the compiler failed (OSError: `x`)"])
    for stdout in (json.dumps(canned), ""):
        monkeypatch.setattr(grader.subprocess, "run", lambda *a, out=stdout, **k:
                            subprocess.CompletedProcess(a, 1, out, "`boom`"))
        grader._static(ex, "mine.py", res)
        texts.append(grader.Result("sort", unchecked=res.unchecked).text())
    texts.append(res.text())

    def stopped(*args, **kwargs):
        raise subprocess.TimeoutExpired(args, 1)
    monkeypatch.setattr(grader.subprocess, "run", stopped)
    texts.append(grader._in_subprocess("stencil", "mine.py", False, 3, None).text())
    return texts


def test_every_grader_message_in_japanese(tmp_path, monkeypatch, capsys):
    """``--lang ja``: every message the grader itself writes comes out in Japanese, with the
    course's terms (ja.TERMS, none of ja.AVOID), and every budget label has its translation."""
    from minigpu.exercises import ja
    from minigpu.exercises.__main__ import main
    for text in _every_grader_message(tmp_path, monkeypatch):
        japanese = ja.translate(text)
        assert not _english_left(japanese), (_english_left(japanese), japanese)
        assert not [v for v in ja.AVOID if v in japanese], japanese
    with pytest.raises(SystemExit):
        main(["check", "stencil", str(tmp_path / "nope.py"), "--lang", "ja"])
    error = capsys.readouterr().err.splitlines()[-1]
    assert "はありません" in error and not _english_left(error.split(": error: ")[1]), error
    for ex in exercises.EXERCISES:
        for b in ex.budgets:
            assert re.sub(r" of \w+$", "", b.label) in ja.LABELS, b.label


def test_report_in_japanese(capsys, monkeypatch):
    """``--lang ja`` or a ja locale: the report's fixed phrases in the course's Japanese."""
    from minigpu.exercises import ja
    from minigpu.exercises.__main__ import main
    path = str(VARIANTS / "stencil_edge_halo.py")
    assert main(["check", "stencil", path, "--no-static", "--seed", "1", "--lang", "ja"]) == 1
    text = capsys.readouterr().out
    assert "不合格（正しさ）: サイズ" in text and "結果が違います" in text, text
    assert text.rstrip().endswith("不合格") and "FAIL" not in text
    for env, japanese in (({"LANG": "ja_JP.UTF-8"}, True), ({"LC_ALL": "C", "LANG": "ja_JP"}, False),
                          ({"LANG": "en_US.UTF-8"}, False)):
        for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
            monkeypatch.delenv(var, raising=False)
        for var, value in env.items():
            monkeypatch.setenv(var, value)
        assert ja.locale_is_japanese() == japanese
    passed = ja.translate("exercise x\n  note: static limits (layer c) skipped: missing: ptxas\n"
                          "PASSED (simulated; not compiled for sm_90: ptxas)")
    assert passed.endswith("合格（シミュレータ上のみ。sm_90 向けにはコンパイルしていません: ptxas）")
