"""Every lesson, measured: the simulator's counters show what each lesson teaches.

One module-scoped run of ``python -m minigpu.lessons``'s measurement (every variant of every
lesson at the small size, about 20 s); each test asserts one lesson's direction and size.
"""
import pytest

from minigpu.lessons import measure

TILE = 16  # the matmul lesson's shared tile under the simulator (16x16 blocks)


@pytest.fixture(scope="module")
def measured():
    return measure.measure_all()


@pytest.fixture(scope="module")
def m(measured):
    """m[experiment][variant] -> metrics dict."""
    return {exp.name: {r.name: r.metrics for r in rows} for _, exp, _, rows in measured}


def per_request(x, what, kind):
    return x[f"{what}_{kind}_sectors" if what == "global" else f"{what}_{kind}_wavefronts"] / \
        x[f"{what}_{kind}_requests"]


def test_coalescing_strided_side_is_32_sectors_per_request_tiled_4(m):
    x = m["coalescing"]
    assert per_request(x["gather_strided"], "global", "load") == 32
    assert per_request(x["gather_strided"], "global", "store") == 4
    assert per_request(x["transpose_naive"], "global", "load") == 4
    assert per_request(x["transpose_naive"], "global", "store") == 32
    tiled = x["transpose_tiled_padded"]
    assert per_request(tiled, "global", "load") == per_request(tiled, "global", "store") == 4
    assert tiled["bytes_moved"] == 2 * 32 * 64 * 4 and tiled["sector_efficiency"] == 1.0
    assert x["transpose_naive"]["bytes_moved"] == 4.5 * tiled["bytes_moved"]


def test_bank_conflicts_padding_takes_32_wavefronts_to_1(m):
    x = m["bank_conflicts"]
    assert per_request(x["transpose_tiled_naive"], "shared", "load") == 32
    assert per_request(x["transpose_tiled_padded"], "shared", "load") == 1
    for v in x.values():
        assert per_request(v, "shared", "store") == 1  # rows: conflict-free either way
    assert x["transpose_tiled_naive"]["bytes_moved"] == x["transpose_tiled_padded"]["bytes_moved"]


def test_reduction_ladder(m):
    x = m["reduction"]
    assert x["interleaved"]["warp_efficiency"] < 0.6 * x["sequential"]["warp_efficiency"]
    # the first rung diverges but does not bank-conflict (lessons/reduction.py says so)
    assert per_request(x["interleaved"], "shared", "load") == 1
    assert len(x) == 6   # "six rungs" (docs/lessons.md)
    assert x["first_add"]["shared_load_requests"] < x["sequential"]["shared_load_requests"]
    assert x["shuffle_tail"]["barriers"] < x["first_add"]["barriers"] < x["sequential"]["barriers"]
    assert x["grid_two_pass"]["bytes_moved"] <= min(v["bytes_moved"] for v in x.values())


def test_matmul_ladder_global_traffic_falls_by_the_tile_factor(m):
    x = m["matmul"]
    naive, coalesced, tiled = x["naive"], x["coalesced"], x["tiled"]
    assert naive["global_load_requests"] == coalesced["global_load_requests"]
    assert naive["global_load_sectors"] > 4 * coalesced["global_load_sectors"]
    assert coalesced["global_load_requests"] == TILE * tiled["global_load_requests"]
    assert coalesced["bytes_moved"] > 6 * tiled["bytes_moved"]
    assert tiled["sector_efficiency"] == 1.0
    assert x["register_tiled"]["shared_load_requests"] < tiled["shared_load_requests"]


def test_occupancy_and_streams_do_not_change_traffic(m):
    for name in ("occupancy", "streams"):
        a, b = m[name].values()
        assert a["bytes_moved"] == b["bytes_moved"] and a["barriers"] == b["barriers"]


@pytest.mark.parametrize("exp", ["fusion_bias_act", "fusion_adam", "fusion_lstm"])
def test_fusion_moves_fewer_global_bytes(m, exp):
    unfused, fused = m[exp].values()
    assert fused["bytes_moved"] < 0.6 * unfused["bytes_moved"]
    assert fused["global_load_requests"] < unfused["global_load_requests"]


def test_constant_memory_takes_filter_loads_off_global(m):
    glob, const = m["constant_memory"].values()
    assert const["global_load_requests"] < 0.6 * glob["global_load_requests"]


def test_divergence_variants_move_the_same_bytes(m):
    # the lesson's point on sm_90: the compiler predicates this branch; same traffic, same lanes
    branch, select = m["divergence"].values()
    assert branch == select


def test_unrolling_fewer_partial_sums_and_barriers(m):
    x = m["unrolling"]
    one, four, prod = x["sum_one_chain"], x["sum_four_chains"], x["reduce"]
    assert four["global_store_requests"] < one["global_store_requests"]
    assert prod["barriers"] < four["barriers"] < one["barriers"]
    assert one["warp_efficiency"] < four["warp_efficiency"] < prod["warp_efficiency"]


def test_scan_thread_per_row_is_uncoalesced(m):
    x = m["scan"]
    assert per_request(x["thread_per_row"], "global", "load") == 3  # 3 rows: one lane per row
    assert x["thread_per_row"]["sector_efficiency"] < 0.2 < 0.8 < x["hillis_steele"][
        "sector_efficiency"]


def test_sort_bitonic_reads_global_memory_far_less(m):
    rank, bitonic = m["sort"]["rank_sort"], m["sort"]["sort"]
    assert rank["global_load_requests"] > 4 * bitonic["global_load_requests"]
    assert bitonic["shared_load_requests"] > 0 == rank["shared_load_requests"]


def test_half_precision_halves_the_maps_sectors(m):
    single, half = m["half_precision_map"]["map_float32"], m["half_precision_map"]["map_float16"]
    assert single["global_load_requests"] == half["global_load_requests"]
    for what in ("global_load_sectors", "global_store_sectors", "bytes_moved"):
        assert single[what] >= 1.9 * half[what], what
    gemm = m["half_precision_gemm"]
    assert gemm["gemm_float16"]["bytes_moved"] < gemm["gemm_float32"]["bytes_moved"]


def test_flash_attention_moves_a_fraction_of_the_naive_sectors(m):
    naive, flash = m["attention_forward"]["attention_naive"], m["attention_forward"]["attention"]
    assert flash["bytes_moved"] < 0.2 * naive["bytes_moved"]
    assert flash["shared_load_requests"] > 0 == naive["shared_load_requests"]


def test_flash_attention_peak_memory_is_linear_in_the_sequence_length():
    """Doubling L = S: the naive path's peak allocation grows about 4 times (its two (L, S)
    buffers), flash attention's at most 2 times (the output and the lse)."""
    from minigpu.lessons import attention
    rows = attention.measure_lengths((16, 32))
    (_, short), (_, long) = rows
    assert f"| 32 | {long['attention_naive'][0]:,} |" in attention.lengths_table(rows)
    assert long["attention"][1] <= 2 * short["attention"][1]
    assert long["attention_naive"][1] > 2.5 * short["attention_naive"][1]
    assert long["attention"][0] < long["attention_naive"][0]


def test_every_experiment_is_asserted(m):
    asserted = {"coalescing", "bank_conflicts", "reduction", "matmul", "occupancy", "streams",
                "fusion_bias_act", "fusion_adam", "fusion_lstm", "constant_memory",
                "divergence", "unrolling", "scan", "sort", "attention_forward",
                "half_precision_map", "half_precision_gemm", "graphs_step"}
    assert set(m) == asserted


def test_docs_tables_are_current(measured):
    text = measure.DOC.read_text()
    assert measure.updated_doc(measured, text) == text, \
        "docs/lessons.md is stale: run python -m minigpu.lessons --markdown"


def test_the_readme_command_runs_without_the_simulator_variable():
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    r = subprocess.run([sys.executable, "-m", "minigpu.lessons", "--lesson", "occupancy"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "== occupancy / occupancy" in r.stdout and "global_load_sectors" in r.stdout


def test_graphs_fused_step_launches_and_moves_less(measured):
    """One training step: fused makes fewer launches and moves fewer global bytes than eager
    (the claims of docs/course/15-graphs-fusion.md); captured replays eager's kernels, less
    cross_entropy's host check of the targets (2 reductions, 2 scatters)."""
    rows = {r.name: r for _, exp, _, found in measured if exp.name == "graphs_step"
            for r in found}
    launches = {name: int(r.grid.split()[0]) for name, r in rows.items()}
    moved = {name: r.metrics["bytes_moved"] for name, r in rows.items()}
    assert launches["captured"] == launches["eager"] - 4
    assert launches["fused"] < launches["captured"] < launches["eager"]
    assert moved["fused"] < moved["captured"] < moved["eager"]
