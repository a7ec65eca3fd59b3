"""``searchsorted`` and ``bucketize``: the backend primitive (``backends/cuda/search.py``
against the NumPy reference ``backends/cpu/search.py``) on hypothesis-drawn rows, views and
values (ties, NaN, infinities, unsorted rows, empty rows), and the public functions against
PyTorch itself on both devices (shapes, ``right``/``side``, ``sorter``, ``out_int32``, scalars,
dtypes, and torch's error messages)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigpu as mg
from minigpu import backends
from minigpu.backends import contract
from strategies import ViewSpec, views

cpu = backends.get("cpu")
cuda = backends.get("cuda")
DEVICES = ["cpu", "cuda"]

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0]


@st.composite
def rows_and_values(draw, dtype=np.float32):
    """(seq view (R, S), values view (R, V)): sorted rows with ties drawn from a few levels
    (or, sometimes, unsorted), and values that hit the levels, fall between and outside them,
    or are NaN/inf."""
    R, S, V = draw(st.integers(1, 3)), draw(st.integers(0, 9)), draw(st.integers(1, 9))
    levels = st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0] + draw(st.sampled_from(
        [[], [np.nan], [np.inf, -np.inf]])))
    seq = np.array(draw(st.lists(levels, min_size=R * S, max_size=R * S)),
                   dtype=dtype).reshape(R, S)
    if draw(st.booleans()):
        seq = np.sort(seq, axis=1)
    vals = st.one_of(levels, st.sampled_from(SPECIAL), st.floats(-4, 4, width=32))
    values = np.array(draw(st.lists(vals, min_size=R * V, max_size=R * V)),
                      dtype=dtype).reshape(R, V)
    seq_view = draw(views(shape=(R, S), dtype=dtype)) if S else None
    value_view = draw(views(shape=(R, V), dtype=dtype))
    return seq, values, seq_view, value_view


def laid_out(spec, array):
    """``spec``'s layout (strides, offset, broadcast dims) holding ``array``'s elements (where
    a broadcast dim aliases elements, the last one written is what the view shows)."""
    base = np.zeros_like(spec.base)
    np.lib.stride_tricks.as_strided(base[spec.offset:], array.shape,
                                    [s * base.itemsize for s in spec.strides])[...] = array
    return ViewSpec(base, spec.shape, spec.strides, spec.offset)


@given(rows_and_values(), st.booleans())
def test_cuda_matches_cpu_and_torch(data, right):
    torch = pytest.importorskip("torch")
    seq, values, seq_spec, value_spec = data
    seq_spec = laid_out(seq_spec, seq) if seq_spec is not None else \
        ViewSpec(seq.reshape(-1), seq.shape, (seq.shape[1], 1), 0)
    value_spec = laid_out(value_spec, values)
    got = {name: backend.to_numpy(contract.dense(
        backend.searchsorted(seq_spec.on(backend), value_spec.on(backend), right),
        values.shape)) for name, backend in (("cpu", cpu), ("cuda", cuda))}
    want = torch.searchsorted(torch.from_numpy(seq_spec.numpy()),
                              torch.from_numpy(value_spec.numpy()), right=right).numpy()
    np.testing.assert_array_equal(got["cuda"], got["cpu"])
    np.testing.assert_array_equal(got["cpu"], want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "float16"])
def test_public_functions_match_torch(device, dtype):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    boundaries = np.sort(rng.integers(-5, 6, 7)).astype(dtype)
    rows = np.sort(rng.integers(-5, 6, (2, 3, 6)), axis=-1).astype(dtype)
    values = rng.integers(-7, 8, (2, 3, 4)).astype(dtype)
    unsorted = rng.permutation(boundaries)
    sorter = np.argsort(unsorted, kind="stable")

    def both(fn):
        ours = fn(mg, lambda a: mg.tensor(a, device=device))
        theirs = fn(torch, torch.from_numpy)
        assert ours.device == device and str(ours.dtype) == str(theirs.dtype).split(".")[-1]
        np.testing.assert_array_equal(ours.cpu().numpy(), theirs.numpy())

    both(lambda m, t: m.searchsorted(t(boundaries), t(values)))
    both(lambda m, t: m.searchsorted(t(boundaries), t(values), right=True))
    both(lambda m, t: m.searchsorted(t(boundaries), t(values), side="right"))
    both(lambda m, t: m.searchsorted(t(rows), t(values)))
    both(lambda m, t: m.searchsorted(t(rows), t(values), out_int32=True))
    both(lambda m, t: m.searchsorted(t(unsorted), t(values), sorter=t(sorter)))
    both(lambda m, t: m.searchsorted(t(boundaries), 1.5))
    both(lambda m, t: m.searchsorted(t(boundaries), t(np.asarray(values[0, 0, 0]))))
    both(lambda m, t: m.bucketize(t(values), t(boundaries)))
    both(lambda m, t: m.bucketize(t(values), t(boundaries), right=True, out_int32=True))
    both(lambda m, t: m.bucketize(2, t(boundaries)))


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_dtypes_empty_and_no_gradient(device):
    torch = pytest.importorskip("torch")
    seq = mg.tensor([1, 2, 3], device=device)
    x = mg.tensor([1.5, 2.0], device=device, requires_grad=True)
    out = mg.searchsorted(seq, x)
    assert out.tolist() == torch.searchsorted(torch.tensor([1, 2, 3]),
                                              torch.tensor([1.5, 2.0])).tolist() == [1, 1]
    assert not out.requires_grad and out.dtype == mg.int64
    assert mg.searchsorted(mg.empty(0, device=device), mg.ones(2, device=device)).tolist() \
        == [0, 0]
    assert mg.searchsorted(seq, mg.empty(0, device=device)).shape == (0,)
    assert mg.searchsorted(mg.empty(2, 0, device=device),
                           mg.ones(2, 3, device=device)).tolist() == [[0] * 3] * 2


def errors(fn):
    try:
        fn()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return None


@pytest.mark.parametrize("call", [
    lambda m: m.searchsorted(m.tensor([[1., 2, 3], [4, 5, 6]]), m.tensor([[3., 6]])),
    lambda m: m.searchsorted(m.tensor([1., 2]), m.tensor([1.]), right=True, side="left"),
    lambda m: m.searchsorted(m.tensor([1., 2]), m.tensor([1.]), side="middle"),
    lambda m: m.searchsorted(m.tensor(1.), m.tensor([1.])),
    lambda m: m.searchsorted(m.tensor([3., 1]), m.tensor([1.]), sorter=m.tensor([1, 0, 2])),
    lambda m: m.bucketize(m.tensor([1.]), m.tensor([[1., 2]])),
])
def test_errors_in_torchs_words(call):
    torch = pytest.importorskip("torch")
    want = errors(lambda: call(torch))
    assert want is not None
    assert errors(lambda: call(mg)) == want


def test_devices_must_match():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        mg.searchsorted(mg.tensor([1., 2]), mg.tensor([1.], device="cuda"))
