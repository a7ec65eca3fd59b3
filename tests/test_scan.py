"""Scans, stream compaction and gathers/scatters along a dim: cuda against the NumPy reference,
then the ops (values, float64 gradchecks, cuda against cpu, errors).

Tolerances: a float scan adds in Blelloch's tree order, not NumPy's sequential order, so float32
sums agree to rtol=1e-5 / atol=1e-4 (at most ~40 terms in [-4, 4]) and products to rtol=1e-4;
float64 to 1e-12; int64 exactly (wrapping products included: multiplication mod 2**64 does not
depend on the order). Compaction, gather and masked_scatter only move values: exact.
scatter_add accumulates with atomics in timing order: float rtol=1e-6 (float64 1e-12).
"""
import importlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minigpu as mg
from minigpu import backends
from minigpu.autograd import gradcheck
from minigpu.backends import contract
from strategies import views

scan_mod = importlib.import_module("minigpu.backends.cuda.scan")
indexing = importlib.import_module("minigpu.backends.cuda.indexing")
cpu = backends.get("cpu")
cuda = backends.get("cuda")

SMALL = dict(block=32, max_blocks=2)


def tolerance(op, dtype):
    if np.dtype(dtype).kind == "i":
        return dict(rtol=0, atol=0)
    if dtype == np.float64:
        return dict(rtol=1e-12, atol=1e-12)
    return dict(rtol=1e-5, atol=1e-4) if op == "sum" else dict(rtol=1e-4, atol=1e-6)


# --- the scan primitive --------------------------------------------------------------------------
@given(st.data(), st.sampled_from(["sum", "prod"]), st.booleans(), st.booleans(),
       st.sampled_from([np.float32, np.float64, np.int64]), st.sampled_from([1, 2, 4, 32]),
       st.integers(1, 4))
def test_scan_matches_cpu(data, op, exclusive, reverse, dtype, max_block, split):
    """Ragged rows over several tiles (tile = 2*max_block) and several blocks per row; tiles of
    64 use the bank-conflict padding (one slot after every 32 elements)."""
    ndim = data.draw(st.integers(1, 3))
    shape = data.draw(hnp.array_shapes(min_dims=ndim, max_dims=ndim, max_side=5))
    axis = data.draw(st.integers(0, ndim - 1))
    shape = shape[:axis] + (data.draw(st.integers(1, 40)),) + shape[axis + 1:]
    lo, hi = (-3, 3) if dtype == np.int64 else (-2.0, 2.0)
    spec = data.draw(views(shape, dtype=dtype, lo=lo, hi=hi))
    ref = cpu.scan(op, spec.on(cpu), axis, exclusive, reverse)
    got = scan_mod.scan(op, spec.on(cuda), axis, exclusive, reverse, max_block=max_block,
                        split=split)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.copy_to_host(), ref, **tolerance(op, dtype))


def test_scan_reference_semantics():
    x = contract.dense(np.array([1.0, 2.0, 3.0, 4.0]), (4,))
    np.testing.assert_array_equal(cpu.scan("sum", x, 0), [1, 3, 6, 10])
    np.testing.assert_array_equal(cpu.scan("sum", x, 0, exclusive=True), [0, 1, 3, 6])
    np.testing.assert_array_equal(cpu.scan("sum", x, 0, reverse=True), [10, 9, 7, 4])
    np.testing.assert_array_equal(cpu.scan("prod", x, 0, True, True), [24, 12, 4, 1])


def test_scan_production_configuration():
    """The GPU block (256 threads, tiles of 512), a row split over three blocks (scan, scan the
    chunk totals, propagate), and the column kernel over many columns."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (2, 1500)).astype(np.float32)
    for reverse in (False, True):
        ref = cpu.scan("sum", contract.dense(a.reshape(-1), a.shape), 1, False, reverse)
        got = scan_mod.scan("sum", contract.dense(cuda.from_numpy(a), a.shape), 1, False,
                            reverse, max_block=scan_mod.PRODUCTION_BLOCK, split=3)
        np.testing.assert_allclose(got.copy_to_host(), ref, rtol=1e-4, atol=1e-4)
    b = rng.uniform(-1, 1, (7, 300)).astype(np.float32)
    ref = cpu.scan("sum", contract.dense(b.reshape(-1), b.shape), 0)
    got = scan_mod.scan("sum", contract.dense(cuda.from_numpy(b), b.shape), 0)
    np.testing.assert_allclose(got.copy_to_host(), ref, rtol=1e-5, atol=1e-5)


def test_scan_plan_fills_the_gpu_for_few_long_rows():
    plan = scan_mod.scan_plan(1, 1 << 20, max_block=256, sms=132)
    assert plan.block == 256 and plan.chunk % 512 == 0
    assert 100 <= plan.splits <= 132 * 8 and plan.splits * plan.chunk >= 1 << 20
    assert scan_mod.scan_plan(4096, 1000, max_block=256, sms=132).splits == 1  # rows fill it
    assert scan_mod.scan_plan(1, 100, max_block=256, sms=132) == (64, 1, 128)  # short row


# --- stream compaction ---------------------------------------------------------------------------
@given(st.data(), st.sampled_from([np.float32, np.float64, np.int64]), st.sampled_from([1, 4]))
def test_masked_select_and_scatter_match_cpu(data, dtype, max_block):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=7))
    x = data.draw(views(shape, dtype=dtype))
    m = data.draw(views(shape, dtype=np.bool_))
    ref = cpu.masked_select(x.on(cpu), m.on(cpu))
    got = scan_mod.masked_select(x.on(cuda), m.on(cuda), max_block=max_block).copy_to_host()
    np.testing.assert_array_equal(got, ref)
    src = contract.dense(cuda.from_numpy(ref), ref.shape)
    back = scan_mod.masked_scatter(m.on(cuda), src, max_block=max_block).copy_to_host()
    np.testing.assert_array_equal(back, cpu.masked_scatter(m.on(cpu),
                                                           contract.dense(ref, ref.shape)))


# --- gather / scatter_add along a dim -------------------------------------------------------
@given(st.data(), st.sampled_from([np.float32, np.float64, np.int64]))
def test_gather_and_scatter_add_dim_match_cpu(data, dtype):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5))
    dim = data.draw(st.integers(0, len(shape) - 1))
    ishape = tuple(data.draw(st.integers(1, 6)) if d == dim else data.draw(st.integers(1, s))
                   for d, s in enumerate(shape))
    idx = data.draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, shape[dim] - 1)))
    ic, ig = contract.dense(idx.reshape(-1), ishape), contract.dense(cuda.from_numpy(idx), ishape)
    x = data.draw(views(shape, dtype=dtype))
    np.testing.assert_array_equal(indexing.gather_dim(x.on(cuda), dim, ig, **SMALL)
                                  .copy_to_host(), cpu.gather_dim(x.on(cpu), dim, ic))
    sshape = tuple(s + data.draw(st.integers(0, 1)) for s in ishape)  # src may be larger
    src = data.draw(views(sshape, dtype=dtype))
    tol = dict(rtol=1e-6, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        indexing.scatter_add_dim(x.on(cuda), dim, ig, src.on(cuda), **SMALL).copy_to_host(),
        cpu.scatter_add_dim(x.on(cpu), dim, ic, src.on(cpu)), **tol)


def test_scatter_add_all_same_index():
    """Every source element of a row names column 1: many threads add into one address, so an
    atomic turned into a plain += loses updates (and racecheck flags it every time)."""
    src = np.arange(3 * 16, dtype=np.float32).reshape(3, 16)
    idx = np.ones((3, 16), np.int64)
    x = np.zeros((3, 4), np.float32)
    xg, ig, sg = (contract.dense(cuda.from_numpy(a), a.shape) for a in (x, idx, src))
    want = x.copy()
    want[:, 1] = src.sum(axis=1)
    np.testing.assert_array_equal(
        indexing.scatter_add_dim(xg, 1, ig, sg, **SMALL).copy_to_host().reshape(3, 4), want)


def test_gather_scatter_add_production_launch():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((30, 20)).astype(np.float32)
    idx = rng.integers(0, 20, (30, 25))
    src = rng.standard_normal((30, 25)).astype(np.float32)
    xc, ic, sc = (contract.dense(a.reshape(-1), a.shape) for a in (x, idx, src))
    xg, ig, sg = (contract.dense(cuda.from_numpy(a), a.shape) for a in (x, idx, src))
    np.testing.assert_array_equal(indexing.gather_dim(xg, 1, ig).copy_to_host(),
                                  cpu.gather_dim(xc, 1, ic))
    np.testing.assert_allclose(indexing.scatter_add_dim(xg, 1, ig, sg).copy_to_host(),
                               cpu.scatter_add_dim(xc, 1, ic, sc), rtol=1e-5, atol=1e-5)


# --- the ops -------------------------------------------------------------------------------------
def t64(a, grad=True):
    return mg.tensor(np.asarray(a, np.float64), requires_grad=grad)


WITH_ZEROS = [[1.5, -2.0, 0.0, 3.0, 0.5], [0.0, 2.0, 0.0, -1.5, 2.0], [1.0, 2.0, -0.5, 1.5, 3.0]]


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gradcheck_scans(dim):
    x = t64(WITH_ZEROS)
    assert gradcheck(lambda v: v.cumsum(dim), [x])
    assert gradcheck(lambda v: v.cumprod(dim), [x])  # no zero, one zero, two zeros per row
    assert gradcheck(lambda v: v.prod(dim), [x])
    assert gradcheck(lambda v: v.prod(dim, keepdim=True), [x])


def test_gradcheck_prod_all_and_cumprod_random():
    assert gradcheck(lambda v: v.prod(), [t64([[1.5, 0.5], [2.0, -1.0]])])
    assert gradcheck(lambda v: v.prod(), [t64([[1.5, 0.0], [2.0, -1.0]])])  # one zero
    assert gradcheck(lambda v: v.prod(), [t64([[0.0, 0.0], [2.0, -1.0]])])  # two: grad 0
    rng = np.random.default_rng(3)
    assert gradcheck(lambda v: v.cumprod(2), [t64(rng.uniform(0.5, 1.5, (2, 3, 6)))])


def test_scan_values_and_dtypes():
    x = mg.tensor([[1, 2, 3], [4, 5, 6]])
    assert x.cumsum(1).tolist() == [[1, 3, 6], [4, 9, 15]] and x.cumsum(0).dtype == mg.int64
    assert mg.tensor([True, False, True]).cumsum(0).tolist() == [1, 1, 2]
    assert mg.cumprod(mg.tensor([1.0, 2.0, 3.0]), 0).tolist() == [1.0, 2.0, 6.0]
    assert x.prod().item() == 720 and x.prod(1).tolist() == [6, 120]
    assert mg.tensor(3.0).cumsum(0).item() == 3.0
    assert x.float().cumsum(1, dtype=mg.float64).dtype == mg.float64


def both(fn, *arrays):
    """fn on cpu and on cuda (float64, requires grad): values and gradients of sum(out * w)."""
    results = []
    for dev in ("cpu", "cuda"):
        ts = [mg.tensor(a, device=dev, requires_grad=a.dtype.kind == "f") for a in arrays]
        out = fn(*ts)
        w = mg.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape), device=dev)
        (out * w).sum().backward()
        results.append((out.detach().cpu().numpy(), [t.grad.cpu().numpy() for t in ts
                                                     if t.requires_grad]))
    (v0, g0), (v1, g1) = results
    np.testing.assert_allclose(v1, v0, rtol=1e-10, atol=1e-12)
    for a, b in zip(g0, g1):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    return v0


def test_ops_cuda_matches_cpu():
    x = np.array(WITH_ZEROS)
    both(lambda v: v.cumsum(1), x)
    both(lambda v: v.cumprod(1), x)
    both(lambda v: v.cumprod(0), x)
    both(lambda v: v.prod(1), x)
    both(lambda v: v[v > 0.6], x)
    both(lambda v: v.norm(dim=1), x)
    idx = np.array([[0, 4, 4], [1, 1, 0], [2, 3, 0]])
    both(lambda v, i: v.gather(1, i), x, idx)
    both(lambda v, i, s: v.scatter_add(1, i, s), x, idx, x[:, :3].copy())


def test_mask_indexing():
    x = mg.arange(12.0).reshape(3, 4)
    m = mg.tensor([[True, False, False, True], [False, False, True, False],
                   [False, True, False, False]])
    assert x[m].tolist() == [0.0, 3.0, 6.0, 9.0]
    rows = mg.tensor([True, False, True])
    assert x[rows].tolist() == [[0, 1, 2, 3], [8, 9, 10, 11]]  # a mask over the leading dim
    assert x[m].ndim == 1 and x[mg.zeros(3, 4).bool()].shape == (0,)
    assert mg.masked_select(x, mg.tensor([True, False, False, True])).tolist() == \
        [0, 3, 4, 7, 8, 11]
    with pytest.raises(IndexError, match=r"The shape of the mask \[2\] at index 0 does not "
                                         r"match the shape of the indexed tensor \[3, 4\]"):
        x[mg.tensor([True, False])]


def test_mask_assign_in_place_and_gradients():
    x = mg.arange(6.0).reshape(2, 3)
    version = x._version
    x[x > 2] = mg.tensor([10.0, 20.0, 30.0])
    assert x.tolist() == [[0, 1, 2], [10, 20, 30]] and x._version > version
    x[mg.tensor([False, True])] = mg.tensor([7.0, 8.0, 9.0])  # a whole row, broadcast
    assert x.tolist() == [[0, 1, 2], [7, 8, 9]]
    with pytest.raises(RuntimeError, match="shape mismatch"):
        x[x > 0] = mg.tensor([1.0, 2.0])
    a = t64([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]])
    v = t64([0.5, 0.25, 0.125])

    def assign(a, v):
        b = a * 1
        b[b.detach() < 0] = v
        return b * b

    assert gradcheck(assign, [a, v])
    assert gradcheck(lambda a: a[a.detach() > 0] * 2, [a])


def test_gradcheck_gather_scatter_add():
    x = t64(WITH_ZEROS)
    idx = mg.tensor([[0, 4], [1, 1], [4, 0]])
    assert gradcheck(lambda v: v.gather(1, idx), [x])
    assert gradcheck(lambda v: v.gather(0, mg.tensor([[2, 0, 1, 1, 0]])), [x])
    src = t64([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    assert gradcheck(lambda v, s: v.scatter_add(1, idx, s) ** 2, [x, src])


def test_gather_scatter_add_values_and_errors():
    x = mg.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert mg.gather(x, 1, mg.tensor([[0, 0], [1, 0]])).tolist() == [[1, 1], [4, 3]]
    out = mg.zeros(3, 5).scatter_add(0, mg.tensor([[0, 1, 2, 0, 0], [2, 0, 0, 1, 2]]),
                                     mg.ones(2, 5))
    assert out.tolist() == [[1, 1, 1, 1, 1], [0, 1, 0, 1, 0], [1, 0, 1, 0, 1]]
    y = mg.zeros(3)
    assert y.scatter_add_(0, mg.tensor([1, 1, 2]), mg.tensor([1.0, 2.0, 3.0])) is y
    assert y.tolist() == [0, 3, 3] and y._version == 1
    with pytest.raises(RuntimeError, match="index 2 is out of bounds for dimension 1 with "
                                           "size 2"):
        x.gather(1, mg.tensor([[2, 0], [0, 0]]))
    with pytest.raises(RuntimeError, match="Expected dtype int64 for index"):
        x.gather(1, mg.tensor([[0.0]]))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        x.gather(1, mg.tensor([0]))
    with pytest.raises(RuntimeError, match="Expected self.dtype to be equal to src.dtype"):
        x.scatter_add(0, mg.tensor([[0]]), mg.tensor([[1]]))


def test_norm_values_and_subgradient():
    x = mg.tensor([[3.0, -4.0], [0.0, 0.0]])
    assert x.norm().item() == 5.0 and x.norm(p="fro").item() == 5.0
    assert x.norm(dim=1).tolist() == [5.0, 0.0]
    assert x.norm(1).item() == 7.0 and x.norm(float("inf")).item() == 4.0
    assert x.norm(float("-inf"), dim=1).tolist() == [3.0, 0.0]
    assert x.norm(0).item() == 2.0 and x.norm(dim=0, keepdim=True).shape == (1, 2)
    assert abs(x.norm(3).item() - (27 + 64) ** (1 / 3)) < 1e-5
    for p in (2, 1, 3, 1.5, float("inf")):
        z = mg.zeros(3, requires_grad=True)
        z.norm(p).backward()
        assert z.grad.tolist() == [0.0, 0.0, 0.0], p  # PyTorch's subgradient at the origin
    a = t64([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]])
    for p in (2, 1, float("inf"), 3, 1.5, -1):
        assert gradcheck(lambda v: v.norm(p, dim=1), [a[:, 1:]] if p < 0 else [a])
    assert gradcheck(lambda v: v.norm(), [a])
    with pytest.raises(RuntimeError, match="Expected a floating point"):
        mg.tensor([1, 2]).norm()


def test_allclose():
    a = mg.tensor([1.0, float("inf"), float("nan")])
    assert mg.allclose(a[:2], a[:2] + 1e-9)
    assert not mg.allclose(a, a) and mg.allclose(a, a, equal_nan=True)
    assert not mg.allclose(mg.tensor([float("inf")]), mg.tensor([-float("inf")]))
    assert not mg.allclose(mg.tensor([1.0]), mg.tensor([1.1]))
    assert mg.tensor([1.0, 2.0]).allclose(mg.tensor([1.0, 2.0 + 1e-6]))
    with pytest.raises(RuntimeError, match="Float did not match Double"):
        mg.allclose(mg.tensor([1.0]), mg.tensor([1.0], dtype=mg.float64))
