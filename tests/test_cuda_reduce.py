"""cuda ``reduce`` / ``argreduce`` and the sum ladder against the NumPy reference.

Tolerances: max/min/argmax/argmin are exact (a reduction only selects elements). Sums of
float32 are compared with rtol=1e-5, atol=1e-4: the GPU adds in a tree order, NumPy pairwise,
and |x| <= 4 with at most a few hundred terms keeps the difference well below that. Products
of float32 (``prod``): rtol=1e-4 where the exact product is within [1e-30, 1e30] (see
``check_reduce``).
"""
import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import contract
from strategies import ViewSpec, views

cpu = backends.get("cpu")
cuda = backends.get("cuda")
R = importlib.import_module("minigpu.backends.cuda.reduce")
from minigpu.lessons import reduction  # noqa: E402

needs_shuffle = pytest.mark.skipif(
    not R.WARP_SHUFFLE, reason="needs simulator warp intrinsics (simulator.py)")

SUM_TOL = dict(rtol=1e-5, atol=1e-4)
PROD_TOL = dict(rtol=1e-4, atol=0)  # a few hundred factors, each rounding by 2**-24

# Launch configurations: None = production defaults; the rest force each code path with small
# blocks (tree without shuffles, a K-split column kernel, rows split over 3 blocks, the shuffle
# variant).
CONFIGS = [
    {},
    dict(max_block=8, split=2, shuffle=False),
    dict(max_block=16, split=4, shuffle=False),
    dict(max_block=8, split=2, row_split=3, shuffle=False),
]
SHUFFLE_CONFIGS = [dict(max_block=64, split=2, shuffle=True)]


def configs():
    return st.sampled_from(CONFIGS + (SHUFFLE_CONFIGS if R.WARP_SHUFFLE else []))


def host(buf, shape):
    return cuda.to_numpy(contract.dense(buf, shape))


def ref_reduce(op, spec, axes):
    return cpu.reduce(op, spec.on(cpu), axes).reshape(
        [s for d, s in enumerate(spec.shape) if d not in axes])


def check_reduce(op, spec, axes, **config):
    out_shape = [s for d, s in enumerate(spec.shape) if d not in axes]
    got = host(R.reduce(op, spec.on(cuda), axes, **config), out_shape)
    want = ref_reduce(op, spec, axes)
    assert got.dtype == want.dtype
    if op == "sum" and want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, **SUM_TOL)
    elif op == "prod" and want.dtype.kind == "f":
        # Another multiplication order rounds differently, and near the float range it decides
        # whether (and where) a partial product over- or underflows: compare where the exact
        # (float64) product is far from both ends; beyond them, both sides must be too.
        with np.errstate(over="ignore"):  # a product of 3000 values overflows float64 too
            exact = np.prod(spec.numpy().astype(np.float64), axis=tuple(axes))
        tame = (np.abs(exact) < 1e30) & (np.abs(exact) > 1e-30)
        np.testing.assert_allclose(got[tame], want[tame], **PROD_TOL)
        assert np.all((np.abs(got[~tame]) >= 1e29) | (np.abs(got[~tame]) <= 1e-29))
    else:
        np.testing.assert_array_equal(got, want)


@st.composite
def axes_of(draw, ndim):
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(sorted(axes))


@given(st.data(), views(), st.sampled_from(contract.REDUCE_OPS), configs())
def test_reduce_matches_numpy_on_strided_views(data, spec, op, config):
    check_reduce(op, spec, data.draw(axes_of(len(spec.shape))), **config)


@given(st.data(), views(dtype=np.int64, lo=-50, hi=50), st.sampled_from(contract.REDUCE_OPS))
def test_reduce_int64(data, spec, op):
    check_reduce(op, spec, data.draw(axes_of(len(spec.shape))))


@given(st.data(), views(dtype=np.bool_), st.sampled_from(contract.REDUCE_OPS))
def test_reduce_bool(data, spec, op):
    check_reduce(op, spec, data.draw(axes_of(len(spec.shape))))


def test_bool_rows_avoid_shuffles():
    """``shfl_*_sync`` moves 32/64-bit registers only: 1-byte bool lanes use the tree (the
    simulator would shuffle them; the GPU compiler refuses)."""
    assert not R._use_shuffle(True, 64, np.uint8)
    assert R._use_shuffle(True, 64, np.float32) and R._use_shuffle(True, 64, np.int64)
    x = np.zeros((2, 70), dtype=np.bool_)
    x[0, 65] = True
    for op in contract.REDUCE_OPS:
        check_reduce(op, dense_spec(x), (1,), max_block=64, shuffle=True)
    _, idx = R.argreduce("max", dense_spec(x).on(cuda), 1, max_block=64, shuffle=True)
    np.testing.assert_array_equal(host(idx, (2,)), [65, 0])


@given(st.data(), views(dtype=np.float64), st.sampled_from(contract.REDUCE_OPS))
def test_reduce_float64(data, spec, op):
    check_reduce(op, spec, data.draw(axes_of(len(spec.shape))))


def dense_spec(a):
    a = np.ascontiguousarray(a)
    return ViewSpec(a.reshape(-1), a.shape, contract.contiguous_strides(a.shape), 0)


@pytest.mark.parametrize("config", [dict(max_block=32, shuffle=False),
                                    dict(max_block=8, shuffle=False),
                                    pytest.param(dict(max_block=32, shuffle=True),
                                                 marks=needs_shuffle),
                                    pytest.param(dict(max_block=64, shuffle=True),
                                                 marks=needs_shuffle)])
@pytest.mark.parametrize("op", contract.REDUCE_OPS)
def test_row_kernel_long_rows(op, config):
    """Rows longer than the block: the strided register loop plus the block combine."""
    x = np.random.default_rng(1).uniform(-4, 4, (3, 77)).astype(np.float32)
    check_reduce(op, dense_spec(x), (1,), **config)


@pytest.mark.parametrize("split", [2, 4, 8])
@pytest.mark.parametrize("op", contract.REDUCE_OPS)
def test_column_kernel_split(op, split):
    """Few, long columns: K split over the block's y dimension, shared tree over y. Splits of
    4 and 8 (production) take the tree more than one step; 2 takes it once."""
    x = np.random.default_rng(2).uniform(-4, 4, (2, 70, 3)).astype(np.float32)
    check_reduce(op, dense_spec(x), (1,), max_block=16, split=split)


# Every reduce path (row kernel with idle lanes, short rows, columns, split columns, split
# rows, a full reduction), each launch configuration a parameter, not a draw.
ONE_SIGNED_CASES = [((3, 40), (1,)), ((4, 5), (1,)), ((9, 3), (0,)), ((2, 70, 3), (1,)),
                    ((3, 700), (1,)), ((6, 50), (0, 1))]
PATH_CONFIGS = CONFIGS + [dict(max_block=32, row_split=4, shuffle=False)] + [
    pytest.param(c, marks=needs_shuffle) for c in SHUFFLE_CONFIGS
    + [dict(max_block=32, row_split=4, shuffle=True)]]


@pytest.mark.parametrize("config", PATH_CONFIGS)
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_of_one_signed_rows(op, config):
    """max of all-negative and min of all-positive data, on every reduce path: an identity of
    0 instead of -inf/+inf (or a lost identity fill of idle lanes) wins over every element and
    shows; drawn data almost always holds both signs and hides it."""
    rng = np.random.default_rng(4)
    sign = -1 if op == "max" else 1
    for shape, axes in ONE_SIGNED_CASES:
        x = (sign * rng.uniform(0.5, 4, shape)).astype(np.float32)
        check_reduce(op, dense_spec(x), axes, **config)
        if len(axes) == 1:
            check_argreduce(op, dense_spec(x), axes[0],
                            **{k: v for k, v in config.items() if k != "split"})


def test_production_configuration():
    """The GPU launch shapes: 256-thread row blocks, and the 32x8 K-split column kernel."""
    rng = np.random.default_rng(3)
    big = dict(max_block=R.PRODUCTION_BLOCK, split=R.COLUMN_SPLIT)
    rows = rng.uniform(-4, 4, (2, 300)).astype(np.float32)
    cols = rng.uniform(-4, 4, (2, 100, 3)).astype(np.float32)
    for op in contract.REDUCE_OPS:
        check_reduce(op, dense_spec(rows), (1,), **big)
        check_reduce(op, dense_spec(cols), (1,), **big)
    check_reduce("sum", dense_spec(rows), (1,), shuffle=False, **big)
    vals, idx = R.argreduce("max", dense_spec(rows).on(cuda), 1, max_block=R.PRODUCTION_BLOCK)
    np.testing.assert_array_equal(host(idx, (2,)), rows.argmax(1))
    vector = rng.uniform(-4, 4, 1500).astype(np.float32)   # split: 2 chunks of 4 x 256
    check_reduce("sum", dense_spec(vector), (0,), row_split=2, **big)


# --- split rows: two passes over (rows, splits) partials ----------------------------------------
SPLIT_CONFIGS = [dict(max_block=32, shuffle=False),
                 pytest.param(dict(max_block=64, shuffle=True), marks=needs_shuffle)]


@pytest.mark.parametrize("config", SPLIT_CONFIGS)
@pytest.mark.parametrize("op", contract.REDUCE_OPS)
def test_split_rows_match_numpy(op, config):
    """Long rows cut into forced splits: one row of 3000 in 5 chunks (x.sum() of a vector),
    3 rows of 700 in 4 chunks each (partials laid out per row), and more splits asked for than
    blocks of work (clamped, no empty chunk)."""
    rng = np.random.default_rng(10)
    vector = rng.uniform(-4, 4, 3000).astype(np.float32)
    rows = rng.uniform(-4, 4, (3, 700)).astype(np.float32)
    check_reduce(op, dense_spec(vector), (0,), row_split=5, **config)
    check_reduce(op, dense_spec(rows), (1,), row_split=4, **config)
    check_reduce(op, dense_spec(rows[:, :100]), (1,), row_split=50, **config)


def test_split_rows_int_and_nan():
    """Identities and NaN survive the partials: an int64 row, and a NaN in one chunk only."""
    ints = np.random.default_rng(11).integers(-50, 50, (2, 500))
    for op in contract.REDUCE_OPS:
        check_reduce(op, dense_spec(ints), (1,), max_block=32, row_split=4, shuffle=False)
    x = np.arange(600, dtype=np.float32)
    x[450] = np.nan
    for op in contract.REDUCE_OPS:
        got = host(R.reduce(op, dense_spec(x).on(cuda), (0,), max_block=32, row_split=4), ())
        assert np.isnan(got), op


@pytest.mark.parametrize("config", SPLIT_CONFIGS)
@pytest.mark.parametrize("op", ["max", "min"])
def test_split_argreduce_first_index(op, config):
    """(value, index) pairs through the partials: equal extremes in different chunks (and in
    the same chunk) resolve to the first index; the first NaN wins over everything."""
    best = 1 if op == "max" else -1
    x = np.zeros((3, 900), dtype=np.float32)
    x[0, [700, 130, 131, 899]] = best         # chunks 1 and 3 (of 4): index 130
    x[1, :] = -np.inf if op == "max" else np.inf   # all equal: index 0
    x[2, [800, 250]] = np.nan                 # NaN in two chunks: index 250
    check_argreduce(op, dense_spec(x), 1, row_split=4, **config)
    vector = np.random.default_rng(12).integers(-3, 4, 3000).astype(np.float32)
    check_argreduce(op, dense_spec(vector), 0, row_split=5, **config)


def test_row_plan_splits_few_long_rows():
    """The production heuristic (H200: 132 SMs, 256-thread blocks -> a wave of 1056 blocks):
    x.sum() of 100M elements is one row, split over one full wave in block-aligned chunks;
    rows that already fill half a wave, or are too short to give every thread
    ``MIN_SPLIT_WORK`` elements, stay one block per row."""
    block, sms = R.PRODUCTION_BLOCK, R.H200_SMS
    K = 100_000_000
    plan = R.row_plan(1, K, block, sms=sms)
    assert plan.block == block and plan.splits == sms * 8 == 1056
    assert plan.chunk % block == 0
    assert (plan.splits - 1) * plan.chunk < K <= plan.splits * plan.chunk   # none empty
    assert R.row_plan(100, K // 100, block, sms=sms).splits == 10   # 1000 blocks <= one wave
    assert R.row_plan(600, 1 << 20, block, sms=sms).splits == 1     # > half a wave already
    assert R.row_plan(1, 4000, block, sms=sms).splits == 1          # < 2 * 256 * 16 elements
    assert R.row_plan(1, K, block, row_split=1, sms=sms) == R.RowPlan(block, 1, K)
    # Under the simulator the same heuristic, with SIM_SMS, splits a long vector too:
    assert R.row_plan(1, 3000, 64, sms=R.SIM_SMS).splits == 2


def test_empty_sum_is_zero():
    x = np.zeros((0, 3), dtype=np.float32)
    got = host(R.reduce("sum", dense_spec(x).on(cuda), (0,)), (3,))
    np.testing.assert_array_equal(got, np.zeros(3, np.float32))


def test_nan_propagates_like_numpy():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    x[1, 2] = np.nan
    for op in ("max", "min", "sum"):
        for axes in ((0,), (1,), (0, 1)):
            want = ref_reduce(op, dense_spec(x), axes)
            got = host(R.reduce(op, dense_spec(x).on(cuda), axes), want.shape)
            np.testing.assert_array_equal(got, want)
    for op in ("max", "min"):
        for axis in (0, 1):
            _, idx = R.argreduce(op, dense_spec(x).on(cuda), axis)
            _, want = cpu.argreduce(op, dense_spec(x).on(cpu), axis)
            np.testing.assert_array_equal(host(idx, want.shape), want)


# --- argreduce ----------------------------------------------------------------------------------
def check_argreduce(op, spec, axis, **config):
    out_shape = [s for d, s in enumerate(spec.shape) if d != axis]
    values, idx = R.argreduce(op, spec.on(cuda), axis, **config)
    want_v, want_i = cpu.argreduce(op, spec.on(cpu), axis)
    got_i = host(idx, out_shape)
    assert got_i.dtype == np.int64
    np.testing.assert_array_equal(got_i.reshape(-1), want_i)
    np.testing.assert_array_equal(host(values, out_shape).reshape(-1), want_v)


# Values from {-1, 0, 1}: most rows have ties, which must resolve to the first index.
tie_views = views(lo=-1, hi=1).map(
    lambda s: ViewSpec(np.round(s.base), s.shape, s.strides, s.offset))


@given(st.data(), st.one_of(views(), tie_views), st.sampled_from(["max", "min"]), configs())
def test_argreduce_matches_numpy(data, spec, op, config):
    config.pop("split", None)
    check_argreduce(op, spec, data.draw(st.integers(0, len(spec.shape) - 1)), **config)


@pytest.mark.parametrize("config", [dict(max_block=16, shuffle=False),
                                    pytest.param(dict(max_block=64, shuffle=True),
                                                 marks=needs_shuffle)])
@pytest.mark.parametrize("op", ["max", "min"])
def test_argreduce_ties_across_threads(op, config):
    """Equal extremes in different threads and warps of one row: the first index wins."""
    x = np.zeros((4, 90), dtype=np.float32)
    x[0, [5, 40, 70]] = 1 if op == "max" else -1     # three equal extremes, three threads
    x[1, [33, 34, 89]] = 1 if op == "max" else -1    # lanes of different warps
    x[3, :] = -np.inf if op == "max" else np.inf     # all equal: index 0
    for axis, spec in ((1, dense_spec(x)), (0, dense_spec(x.T))):
        check_argreduce(op, spec, axis, **config)


@given(views(dtype=np.int64, lo=-3, hi=3), st.sampled_from(["max", "min"]))
def test_argreduce_int64(spec, op):
    check_argreduce(op, spec, len(spec.shape) - 1)


# --- the teaching ladder --------------------------------------------------------------------------
LADDER_RUNGS = [pytest.param(name, id=name,
                             marks=[needs_shuffle] if name in reduction.SHUFFLE_RUNGS else [])
                for name in reduction.LADDER]


@pytest.mark.parametrize("name", LADDER_RUNGS)
@given(spec=st.integers(1, 300).flatmap(lambda n: views(shape=(n,))),
       block=st.sampled_from([32, 64]))
def test_sum_ladder_matches_numpy(name, spec, block):
    got = host(reduction.LADDER[name](spec.on(cuda), block=block), ())
    np.testing.assert_allclose(got, spec.numpy().sum(), **SUM_TOL)


@pytest.mark.parametrize("name", LADDER_RUNGS)
def test_sum_ladder_small_blocks_and_passes(name):
    """Several passes (n > block * per-thread work) with blocks small enough to need them;
    the non-shuffle rungs also run with blocks under one warp."""
    x = np.random.default_rng(4).uniform(-4, 4, 700).astype(np.float32)
    block = 32 if name in reduction.SHUFFLE_RUNGS else 8
    kw = {"warp_shuffle": dict(max_grid=4), "grid_two_pass": dict(splits=5)}.get(name, {})
    got = host(reduction.LADDER[name](dense_spec(x).on(cuda), block=block, **kw), ())
    np.testing.assert_allclose(got, x.sum(), **SUM_TOL)


@pytest.mark.parametrize("name", LADDER_RUNGS)
def test_sum_ladder_production_block(name):
    x = np.random.default_rng(5).uniform(-4, 4, 600).astype(np.float32)
    got = host(reduction.LADDER[name](dense_spec(x).on(cuda), block=R.PRODUCTION_BLOCK), ())
    np.testing.assert_allclose(got, x.sum(), **SUM_TOL)
