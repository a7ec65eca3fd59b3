"""cuda gather / scatter / index_select / index_add against the NumPy reference.

gather, scatter and index_select only move values: exact. index_add accumulates repeated
indices with atomics in thread order: float32 rtol=1e-6, atol=1e-6 (few terms in [-4, 4]);
float64 rtol=1e-12.
"""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from minigpu import backends
from minigpu.backends import contract
from minigpu.backends.cuda import device, indexing
from strategies import views

cpu = backends.get("cpu")
cuda = backends.get("cuda")

SMALL = dict(block=32, max_blocks=2)
PRODUCTION = dict(block=device.BLOCK, max_blocks=device.MAX_BLOCKS)
dtypes = st.sampled_from([np.float32, np.float64])


def indices(n, high):
    """An int64 index vector of length n with entries in [0, high) (repeats welcome)."""
    return hnp.arrays(np.int64, n, elements=st.integers(0, high - 1))


def on_both(a):
    a = np.ascontiguousarray(a)
    return contract.dense(a.reshape(-1), a.shape), contract.dense(cuda.from_numpy(a), a.shape)


@given(st.data(), st.integers(1, 8), st.integers(1, 6), dtypes)
def test_gather_matches_cpu(data, rows, cols, dtype):
    spec = data.draw(views((rows, cols), dtype=dtype))
    idx_c, idx_g = on_both(data.draw(indices(rows, cols)))
    ref = cpu.gather(spec.on(cpu), idx_c)
    np.testing.assert_array_equal(
        indexing.gather(spec.on(cuda), idx_g, **SMALL).copy_to_host(), ref)


@given(st.data(), st.integers(1, 8), st.integers(1, 6), dtypes)
def test_scatter_matches_cpu(data, rows, cols, dtype):
    spec = data.draw(views((rows,), dtype=dtype))
    idx_c, idx_g = on_both(data.draw(indices(rows, cols)))
    ref = cpu.scatter(idx_c, spec.on(cpu), cols)
    got = indexing.scatter(idx_g, spec.on(cuda), cols, **SMALL)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.copy_to_host(), ref)


@given(st.data(), st.integers(1, 6), st.integers(1, 5), st.integers(1, 8), dtypes)
def test_index_select_matches_cpu(data, vocab, dim, n, dtype):
    spec = data.draw(views((vocab, dim), dtype=dtype))
    idx_c, idx_g = on_both(data.draw(indices(n, vocab)))
    ref = cpu.index_select(spec.on(cpu), idx_c)
    np.testing.assert_array_equal(
        indexing.index_select(spec.on(cuda), idx_g, **SMALL).copy_to_host(), ref)


@given(st.data(), st.integers(1, 4), st.integers(1, 5), st.integers(1, 10), dtypes)
def test_index_add_accumulates_repeated_indices(data, vocab, dim, n, dtype):
    spec = data.draw(views((n, dim), dtype=dtype))
    idx_c, idx_g = on_both(data.draw(indices(n, vocab)))  # n up to 10 > vocab: repeats
    ref = cpu.index_add(idx_c, spec.on(cpu), vocab)
    got = indexing.index_add(idx_g, spec.on(cuda), vocab, **SMALL)
    assert got.dtype == dtype
    tol = dict(rtol=1e-6, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.copy_to_host(), ref, **tol)


def test_index_add_all_rows_to_one_index():
    """Every source row lands on row 2: maximal contention; the others stay zero."""
    src = np.arange(12 * 3, dtype=np.float32).reshape(12, 3)
    idx = np.full(12, 2, np.int64)
    got = indexing.index_add(contract.dense(cuda.from_numpy(idx), (12,)),
                             contract.dense(cuda.from_numpy(src), src.shape), 4, **SMALL)
    expect = np.zeros((4, 3), np.float32)
    expect[2] = src.sum(axis=0)
    np.testing.assert_array_equal(got.copy_to_host().reshape(4, 3), expect)


def test_index_add_one_dimensional_source():
    src = np.array([1.5, -2.0, 4.0, 0.25], np.float64)
    idx = np.array([0, 2, 0, 2], np.int64)
    (ic, ig), (sc, sg) = on_both(idx), on_both(src)
    np.testing.assert_array_equal(indexing.index_add(ig, sg, 3, **SMALL).copy_to_host(),
                                  cpu.index_add(ic, sc, 3))


def test_indexing_production_launch():
    """The GPU launch configuration (device.BLOCK = 256 threads), more than one block for the (R, C) / (N, D) kernels."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 9)).astype(np.float32)
    idx = rng.integers(0, 9, 40)
    (xc, xg), (ic, ig) = on_both(x), on_both(idx)
    np.testing.assert_array_equal(indexing.gather(xg, ig, **PRODUCTION).copy_to_host(), cpu.gather(xc, ic))
    src = x[:, 0].copy()
    (sc, sg) = on_both(src)
    np.testing.assert_array_equal(indexing.scatter(ig, sg, 9, **PRODUCTION).copy_to_host(),
                                  cpu.scatter(ic, sc, 9))
    np.testing.assert_array_equal(indexing.index_select(xg, ig, **PRODUCTION).copy_to_host(),
                                  cpu.index_select(xc, ic))
    np.testing.assert_allclose(indexing.index_add(ig, xg, 9, **PRODUCTION).copy_to_host(),
                               cpu.index_add(ic, xc, 9), rtol=1e-6, atol=1e-6)


def test_assign_into_a_zero_d_window_launches_a_kernel_numba_can_type(monkeypatch):
    """``dst[...] = src`` into one element of a buffer (a 0-d window, e.g. ``x[2] = y``): the
    scatter kernel gets the window as shape (1,), since Numba cannot type ``shape[d]`` of an
    empty tuple (for a GPU the kernel would not compile; cuda.compile_ptx says so)."""
    from minigpu.backends.cuda import memory as cuda_memory
    shapes = []
    launch = cuda_memory.launch
    monkeypatch.setattr(cuda_memory, "launch",
                        lambda kernel, n, *args: (shapes.append(args[1]), launch(kernel, n, *args)))
    results = []
    for backend in (cpu, cuda):
        buf = backend.from_numpy(np.arange(5, dtype=np.int64))
        dst = contract.View(buf, (), (), 2)
        src = contract.dense(backend.from_numpy(np.array([-7], np.int64)), ())
        backend.assign_(dst, src)
        results.append(backend.to_numpy(contract.dense(buf, (5,))))
    np.testing.assert_array_equal(results[0], [0, 1, -7, 3, 4])
    np.testing.assert_array_equal(results[1], results[0])
    assert shapes == [(1,)]
