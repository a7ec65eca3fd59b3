"""The bitonic row sort against NumPy's stable argsort, and sort/argsort/topk.

The order is a strict total order (value, NaN largest, then index), so cuda must equal the
reference exactly: values (NaN in the same places) and indices.
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

sort_mod = importlib.import_module("minigpu.backends.cuda.sort")
cpu = backends.get("cpu")
cuda = backends.get("cuda")


def check_sort(spec, descending, max_block):
    rv, ri = cpu.sort(spec.on(cpu), descending)
    gv, gi = sort_mod.sort(spec.on(cuda), descending, max_block=max_block)
    np.testing.assert_array_equal(gi.copy_to_host(), ri)
    np.testing.assert_array_equal(gv.copy_to_host(), rv)  # NaNs compare equal here


@given(st.data(), st.booleans(), st.sampled_from([1, 2, 4, 16]),
       st.sampled_from([np.float32, np.float64, np.int64]))
def test_sort_matches_cpu(data, descending, max_block, dtype):
    """Ragged rows (padded to a power of two), many ties (few distinct values), NaNs, rows
    longer than a tile (tile = 2*max_block: global steps plus shared-memory steps)."""
    lead = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
    shape = tuple(lead) + (data.draw(st.integers(1, 40)),)
    if dtype == np.int64:
        spec = data.draw(views(shape, dtype=dtype, lo=-3, hi=3))
    else:
        spec = data.draw(views(shape, dtype=dtype, lo=-2, hi=2))
        spec.base = np.round(spec.base)  # ties
        nans = data.draw(hnp.arrays(np.bool_, spec.base.shape))
        spec.base[nans & (spec.base > 1)] = np.nan
    check_sort(spec, descending, max_block)


def test_sort_production_configuration():
    """The GPU block (256 threads, tiles of 512): a 300-element row in one tile, a 1500-element
    row padded to 2048 (four tiles and the global steps between them)."""
    rng = np.random.default_rng(0)
    for cols in (300, 1500):
        a = rng.integers(-50, 50, (2, cols)).astype(np.float32)
        a[0, ::7] = np.nan
        for descending in (False, True):
            rv, ri = cpu.sort(contract.dense(a.reshape(-1), a.shape), descending)
            gv, gi = sort_mod.sort(contract.dense(cuda.from_numpy(a), a.shape), descending,
                                   max_block=sort_mod.PRODUCTION_BLOCK)
            np.testing.assert_array_equal(gi.copy_to_host(), ri)
            np.testing.assert_array_equal(gv.copy_to_host(), rv)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_sort_topk_like_pytorch(device):
    nan = float("nan")
    x = mg.tensor([[3.0, nan, 1.0, 3.0, 2.0], [0.0, -1.0, 5.0, 5.0, 4.0]], device=device)
    v, i = x.sort()
    assert i.tolist() == [[2, 4, 0, 3, 1], [1, 0, 4, 2, 3]] and i.dtype == mg.int64
    v, i = x.sort(descending=True)  # NaN first, ties in input order
    assert i.tolist() == [[1, 0, 3, 4, 2], [2, 3, 4, 0, 1]]
    assert mg.sort(x, dim=0).indices.tolist() == [[1, 1, 0, 0, 0], [0, 0, 1, 1, 1]]
    assert x.argsort(descending=True).tolist() == [[1, 0, 3, 4, 2], [2, 3, 4, 0, 1]]
    top = x.topk(2)
    assert top.indices.tolist() == [[1, 0], [2, 3]] and top.values.tolist()[1] == [5.0, 5.0]
    low = mg.topk(x, 3, dim=1, largest=False)
    assert low.values.tolist() == [[1.0, 2.0, 3.0], [-1.0, 0.0, 4.0]]
    assert x.topk(0).values.shape == (2, 0)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(6)


def test_sort_topk_gradients():
    rng = np.random.default_rng(2)
    x = mg.tensor(rng.permutation(12).reshape(3, 4) * 0.5, dtype=mg.float64,
                  requires_grad=True)
    assert gradcheck(lambda v: v.sort(dim=1).values, [x])
    assert gradcheck(lambda v: v.sort(dim=0, descending=True).values, [x])
    assert gradcheck(lambda v: v.topk(2).values, [x])
    for dev in ("cpu", "cuda"):
        y = mg.tensor(x.detach().numpy(), device=dev, requires_grad=True)
        (y.topk(2, dim=0).values * mg.tensor([[1.0], [10.0]], device=dev)).sum().backward()
        order = np.argsort(-x.detach().numpy(), axis=0, kind="stable")
        expect = np.zeros((3, 4))
        np.put_along_axis(expect, order[:1], 1.0, 0)
        np.put_along_axis(expect, order[1:2], 10.0, 0)
        np.testing.assert_array_equal(y.grad.cpu().numpy(), expect)


CPU_ONLY = """
import minigpu as mg
x = mg.tensor([[3.0, float('nan'), 1.0], [0.0, 5.0, 5.0]], requires_grad=True)
v, i = x.sort(descending=True)
t = x.topk(1).values.sum() + x[x.detach() > 2].sum()
t.backward()
y = x.detach().clone()
y[y > 2] = mg.tensor([30.0, 50.0, 50.0])
print("CPU-OK", i.tolist(), y.tolist(), x.grad.tolist())
"""


def test_cpu_only_user_sorts_and_masks():
    """No GPU, no simulator: sort, topk, x[mask], x[mask] = v on cpu (conftest forces the
    simulator in this process, so a subprocess without it)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    result = subprocess.run([sys.executable, "-c", CPU_ONLY], env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "CPU-OK [[1, 0, 2], [1, 2, 0]]" in result.stdout
