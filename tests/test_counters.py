"""Simulator performance counters on kernels whose counts can be worked out by hand."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import cuda, float32, float64

import minigpu
from minigpu.simulator import counters as sim_counters, memory

N = 256          # elements: 8 warps of 32 lanes, in 2 blocks of 128
GRID, BLOCK = 2, 128
WARPS = N // 32


def measure(kernel, grid, block, *args):
    """The metrics of one launch of ``kernel[grid, block](*args)``."""
    with minigpu.cuda.counters() as launches:
        kernel[grid, block](*args)
    assert len(launches) == 1 and launches[0].name.endswith(kernel.py_func.__name__)
    return launches[0].metrics


@cuda.jit
def copy(a, out):
    i = cuda.grid(1)
    out[i] = a[i]


@cuda.jit
def copy_strided(a, out, stride):
    i = cuda.grid(1)
    out[i] = a[i * stride]


@cuda.jit
def copy_shifted(a, out):
    i = cuda.grid(1)
    out[i] = a[i + 1]


@cuda.jit
def broadcast(a, out):
    i = cuda.grid(1)
    out[i] = a[0]


@pytest.mark.parametrize("dtype, sectors", [(np.float32, 4), (np.float64, 8)])
def test_coalesced_copy(dtype, sectors):
    m = measure(copy, GRID, BLOCK, np.ones(N, dtype), np.zeros(N, dtype))
    assert m["global_load_requests"] == m["global_store_requests"] == WARPS
    assert m["global_load_sectors"] == m["global_store_sectors"] == WARPS * sectors
    assert m["sector_efficiency"] == 1.0 and m["warp_efficiency"] == 1.0
    assert m["bytes_moved"] == 2 * N * np.dtype(dtype).itemsize
    # the time model: 3 us launch + bytes / bandwidth (H100 SXM 3.35 TB/s, H200 4.8 TB/s)
    assert m["h200_predicted_us"] == pytest.approx(3 + m["bytes_moved"] / 4.8e12 * 1e6)
    assert m["h100_predicted_us"] == pytest.approx(3 + m["bytes_moved"] / 3.35e12 * 1e6)
    assert m["shared_load_requests"] == m["barriers"] == m["atomics"] == 0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_copy_touches_one_sector_per_lane(dtype):
    stride = 32 // np.dtype(dtype).itemsize  # one element per 32-byte sector
    m = measure(copy_strided, GRID, BLOCK, np.ones(N * stride, dtype), np.zeros(N, dtype), stride)
    assert m["global_load_requests"] == WARPS
    assert m["global_load_sectors"] == WARPS * 32
    assert m["global_store_sectors"] == WARPS * 32 // stride
    size = np.dtype(dtype).itemsize
    assert m["sector_efficiency"] == pytest.approx(2 * N * size / (32 * 32 * WARPS * (1 + 1 / stride)))


@pytest.mark.parametrize("dtype, sectors", [(np.float32, 5), (np.float64, 9)])
def test_misaligned_by_one_element_costs_one_more_sector(dtype, sectors):
    m = measure(copy_shifted, GRID, BLOCK, np.ones(N + 1, dtype), np.zeros(N, dtype))
    assert m["global_load_sectors"] == WARPS * sectors
    assert m["global_store_sectors"] == WARPS * (sectors - 1)


def test_broadcast_read_is_one_sector_per_request():
    m = measure(broadcast, GRID, BLOCK, np.ones(1, np.float32), np.zeros(N, np.float32))
    assert (m["global_load_requests"], m["global_load_sectors"]) == (WARPS, WARPS)
    # requested: 4 distinct bytes per load request, 128 per store request
    assert m["sector_efficiency"] == pytest.approx((4 + 128) / (32 + 128))


def transpose_tile(pad, dtype):
    @cuda.jit
    def tile_transpose(a, out):
        t = cuda.shared.array((32, 32 + pad), dtype)
        x, y = cuda.threadIdx.x, cuda.threadIdx.y
        t[y, x] = a[y, x]
        cuda.syncthreads()
        out[y, x] = t[x, y]
    return tile_transpose


@pytest.mark.parametrize("pad, read_wavefronts", [(0, 32), (1, 1)])
def test_shared_tile_bank_conflicts(pad, read_wavefronts):
    m = measure(transpose_tile(pad, float32), 1, (32, 32), np.ones((32, 32), np.float32),
                np.zeros((32, 32), np.float32))
    assert m["shared_store_requests"] == m["shared_store_wavefronts"] == 32   # rows: 1 each
    assert m["shared_load_requests"] == 32
    assert m["shared_load_wavefronts"] == 32 * read_wavefronts
    assert m["barriers"] == 1
    assert m["global_load_sectors"] == m["global_store_sectors"] == 32 * 4


def test_float64_shared_row_needs_two_wavefronts():
    m = measure(transpose_tile(1, float64), 1, (32, 32), np.ones((32, 32)), np.zeros((32, 32)))
    assert m["shared_store_wavefronts"] == 32 * 2   # 64 words over 32 banks
    # column of a (32, 33) float64 tile: word 66y + {0,1}; banks 2y, 2y+1 mod 32 -> 2 per bank
    assert m["shared_load_wavefronts"] == 32 * 2


@cuda.jit
def three_barriers(out):
    i = cuda.grid(1)
    cuda.syncthreads()
    cuda.syncthreads()
    out[i] = i
    cuda.syncthreads()


def test_barriers_are_summed_over_blocks():
    m = measure(three_barriers, 4, 64, np.zeros(256, np.int32))
    assert m["barriers"] == 3 * 4


@cuda.jit
def few_lanes(a, out):
    i = cuda.grid(1)
    if i % 32 < 4:
        out[i] = a[i]


def test_a_warp_where_only_a_few_lanes_work():
    m = measure(few_lanes, 1, 64, np.ones(64, np.float32), np.zeros(64, np.float32))
    assert m["global_load_requests"] == m["global_store_requests"] == 2
    assert m["global_load_sectors"] == 2                # 4 lanes x 4 bytes: one sector
    assert m["warp_efficiency"] == pytest.approx(4 / 32)
    assert m["sector_efficiency"] == pytest.approx(16 / 32)


@cuda.jit
def loop_sum(a, out, reps):
    i = cuda.grid(1)
    s = 0.0
    for k in range(reps):
        s += a[k * 64 + i]
    out[i] = s


def test_each_dynamic_occurrence_is_its_own_request():
    m = measure(loop_sum, 1, 64, np.ones(64 * 5, np.float32), np.zeros(64, np.float32), 5)
    assert (m["global_load_requests"], m["global_load_sectors"]) == (2 * 5, 2 * 5 * 4)


@cuda.jit
def histogram(h, x):
    i = cuda.grid(1)
    cuda.atomic.add(h, x[i], 1)


def test_atomics_count_one_per_thread_and_launches_are_separate():
    x = np.arange(64, dtype=np.int32) % 4
    with minigpu.cuda.counters() as launches:
        histogram[1, 64](np.zeros(4, np.int32), x)
        copy[1, 32](np.ones(32, np.float32), np.zeros(32, np.float32))
    assert [e.name for e in launches] == ["histogram", "copy"]
    assert launches[0].metrics["atomics"] == 64
    assert (launches[0].grid, launches[0].block) == ((1, 1, 1), (64, 1, 1))
    assert launches[1].metrics["global_load_sectors"] == 4
    summed = sim_counters.total(launches)
    assert summed.metrics["global_load_sectors"] == 4 + 8  # x: 2 warps x 4 sectors
    text = str(launches)
    assert "global_load_sectors" in text and "histogram" in text and "copy" in text


def test_no_observer_outside_the_block_and_no_nesting():
    assert memory.observers == []
    with minigpu.cuda.counters():
        assert len(memory.observers) == 1
        with pytest.raises(RuntimeError, match="nested"):
            with minigpu.cuda.counters():
                pass
    assert memory.observers == []


def _count_one_request_at_a_time(rows):
    """The test oracle of ``counters._count``: the rules as plain loops over the log."""
    C = sim_counters
    seen, groups, atomics = {}, {}, 0
    for site, kind, space, array, block, thread, offset, size in rows.tolist():
        if space == C.LOCAL:
            continue
        atomics += kind == C.ATOMIC
        k = (block, thread, site, kind, array)
        n = seen[k] = seen.get(k, -1) + 1
        groups.setdefault((space, kind, block, thread // 32, site, array, n),
                          []).append((offset, size))
    counts = dict.fromkeys(C.COUNTS, 0)
    counts["atomics"] = atomics
    requested, lanes = {"load": 0, "store": 0}, 0
    for (space, kind, *_), accs in groups.items():
        lanes += len(accs)
        if kind == C.ATOMIC:
            continue
        op = "load" if kind == C.LOAD else "store"
        if space == C.GLOBAL:
            counts[f"global_{op}_requests"] += 1
            counts[f"global_{op}_sectors"] += len({s for off, size in accs for s in
                                                   range(off // 32, (off + size - 1) // 32 + 1)})
            requested[op] += sum(size for _, size in set(accs))
        else:
            counts[f"shared_{op}_requests"] += 1
            words = {w for off, size in accs for w in range(off // 4, (off + size - 1) // 4 + 1)}
            banks = [w % 32 for w in words]
            counts[f"shared_{op}_wavefronts"] += max(banks.count(b) for b in set(banks))
    return counts, (requested["load"], requested["store"], lanes, len(groups))


@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from([0, 1, 2]),
                          st.sampled_from([0, 1, 2]), st.integers(0, 1), st.integers(0, 1),
                          st.integers(0, 69), st.integers(0, 300), st.sampled_from([1, 2, 4, 8])),
                min_size=0, max_size=120))
@settings(max_examples=150, deadline=None)
def test_counting_the_log_matches_counting_one_request_at_a_time(accesses):
    """``_count`` groups a launch's log with sorts (a compiled launch's log has millions of
    rows); it must give what the rules, applied request by request, give."""
    rows = np.array([(site, kind, space, array, block, thread, offset * size // 2, size)
                     for site, kind, space, array, block, thread, offset, size in accesses],
                    np.int64).reshape(-1, 8)
    assert sim_counters._count(rows) == _count_one_request_at_a_time(rows)
