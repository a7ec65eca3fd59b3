"""Every common dtype as PyTorch has it: names and conversions, type promotion through the
ops, integer semantics (floor rounding, wrap-around, division by zero, bitwise ops), float16
accumulating in float32, the errors torch gives, and autocast — each checked against torch
itself where the parity extra is installed, and cuda (simulator) against cpu on drawn data."""
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st

import minigpu as mg
from minigpu import dtypes

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "cuda"]
TORCH = {d: getattr(torch, name) for d, name in dtypes.TORCH_NAMES.items()}
NUMERIC = [d for d in dtypes.DTYPES if d != dtypes.bool_]


def sample(dtype, n=5):
    """Values every dtype holds, negative ones where it can, no zero (divisors)."""
    if dtype == dtypes.bool_:
        return np.array([True, False, True, True, False][:n])
    base = np.array([3, -7, 5, 2, -1][:n]) if dtype.kind != "u" else np.array([3, 250, 5, 2, 9])
    return base[:n].astype(dtype)


def both(a_np, b_np, device):
    return (mg.tensor(a_np, device=device), mg.tensor(b_np, device=device),
            torch.tensor(a_np), torch.tensor(b_np))


def assert_same(mine, theirs):
    assert mine.dtype == np.dtype(str(theirs.dtype).split(".")[-1]), (mine.dtype, theirs.dtype)
    np.testing.assert_allclose(mine.cpu().numpy().astype(np.float64),
                               theirs.numpy().astype(np.float64), rtol=1e-3, atol=1e-3)


def test_names_and_conversions_are_torchs():
    assert (mg.half, mg.float, mg.double, mg.short, mg.int, mg.long) == (
        mg.float16, mg.float32, mg.float64, mg.int16, mg.int32, mg.int64)
    x = mg.tensor([1.7, -2.2])
    for method, dtype in (("half", mg.float16), ("int", mg.int32), ("short", mg.int16),
                          ("byte", mg.uint8), ("char", mg.int8), ("long", mg.int64),
                          ("double", mg.float64), ("bool", mg.bool)):
        y, ref = getattr(x, method)(), getattr(torch.tensor([1.7, -2.2]), method)()
        assert y.dtype == dtype and y.tolist() == ref.tolist()
    assert mg.tensor(np.zeros(2, np.uint8)).dtype == mg.uint8
    assert mg.tensor(np.int32(3)).dtype == mg.int32
    assert mg.tensor([1, 2]).dtype == mg.int64 and mg.tensor([1.5]).dtype == mg.float32


def test_the_issue_snippet_keeps_dtypes_and_raises_on_zero_division():
    assert mg.from_numpy(np.zeros(2, np.uint8)).dtype == mg.uint8
    assert mg.from_numpy(np.zeros(2, np.float16)).dtype == mg.float16
    for dt in (np.int16, np.int32, np.int8):
        assert mg.from_numpy(np.zeros(2, dt)).dtype == np.dtype(dt)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        mg.tensor([3]) // mg.tensor([0])
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.tensor([3]) // torch.tensor([0])
    with pytest.raises(TypeError, match="can't convert np.ndarray of type numpy.uint16"):
        mg.from_numpy(np.zeros(2, np.uint16))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "gt", "eq", "maximum"])
def test_promotion_of_every_dtype_pair_matches_torch(device, op):
    for a, b in itertools.product(dtypes.DTYPES, repeat=2):
        if op == "sub" and dtypes.bool_ in (a, b):
            continue  # torch refuses bool subtraction
        ma, mb, ta, tb = both(sample(a), sample(b), device)
        assert_same(getattr(mg, op)(ma, mb), getattr(torch, op)(ta, tb))


@pytest.mark.parametrize("device", DEVICES)
def test_promotion_with_python_scalars_and_0d_tensors_matches_torch(device):
    for d, s in itertools.product(dtypes.DTYPES, [True, 3, -2, 2.5]):
        m, t = mg.tensor(sample(d), device=device), torch.tensor(sample(d))
        if not (d == dtypes.bool_ and isinstance(s, bool)):
            assert_same(m * s, t * s)
        assert_same(m + s, t + s)
        zero_d = mg.tensor(np.array(s, np.float64), device=device)
        assert_same(m + zero_d, t + torch.tensor(np.array(s, np.float64)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [d for d in NUMERIC if d.kind in "iu"])
def test_integer_semantics_match_torch(device, dtype):
    a = sample(dtype)
    b = np.array([2, 3, -2, 7, -3]).astype(dtype) if dtype.kind == "i" else np.array(
        [2, 3, 4, 7, 3], dtype)
    ma, mb, ta, tb = both(a, b, device)
    for f in (lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x * y * y * y,
              lambda x, y: x + 120, lambda x, y: x & y, lambda x, y: x | y, lambda x, y: x ^ y,
              lambda x, y: ~x, lambda x, y: x << 1, lambda x, y: x >> 1, lambda x, y: x / y,
              lambda x, y: x.sum(), lambda x, y: x.sum(0, keepdim=True)):
        assert_same(f(ma, mb), f(ta, tb))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("divisor", [255, 3, 0.1, -7.5])
def test_division_by_a_python_scalar_is_torchs_bit_for_bit(dtype, divisor):
    """``x / 255`` (a data transform's scaling) is a division on the cpu device, as in
    PyTorch's: multiplying by 1/255 differs by an ulp on some of the 256 byte values."""
    values = np.concatenate([np.arange(256), np.random.default_rng(0).standard_normal(256)])
    x = values.astype(dtype)
    np.testing.assert_array_equal((mg.tensor(x) / divisor).numpy(),
                                  (torch.tensor(x) / divisor).numpy())
    inplace = mg.tensor(x)
    inplace /= divisor
    np.testing.assert_array_equal(inplace.numpy(), (torch.tensor(x) / divisor).numpy())


def test_integer_division_by_zero_raises_on_cpu_as_torch():
    for dt in (np.int8, np.int32, np.uint8, np.int64):
        a, b = np.array([4, 5], dt), np.array([1, 0], dt)
        for op in ("floor_divide", "remainder"):
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                getattr(mg, op)(mg.tensor(a), mg.tensor(b))
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                getattr(torch, op)(torch.tensor(a), torch.tensor(b))
    assert (mg.tensor([1.0]) // mg.tensor([0.0])).item() == float("inf")


def test_the_errors_torch_gives_for_dtypes_an_op_refuses():
    for lib in (mg, torch):
        i = lib.tensor([1, 2], dtype=lib.int32)
        with pytest.raises(RuntimeError, match="mean\\(\\): could not infer output dtype. "
                                               ".*Got: Int"):
            i.mean()
        with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can "
                                               "require gradients"):
            i.requires_grad_()
        with pytest.raises(RuntimeError, match='"bitwise_and_cpu" not implemented for '
                                               "'Float'"):
            lib.tensor([1.0]) & lib.tensor([1.0])
        with pytest.raises(RuntimeError, match="\"lshift_cpu\" not implemented for 'Bool'"):
            lib.tensor([True]) << lib.tensor([True])


@pytest.mark.parametrize("device", DEVICES)
def test_float16_sums_and_matmuls_accumulate_in_float32(device):
    x = np.full(4096, 0.1, np.float16)
    s = mg.tensor(x, device=device).sum()
    assert s.dtype == mg.float16
    assert s.item() == torch.tensor(x).sum().item() == np.float16(x.astype(np.float32).sum())
    assert mg.tensor(x, device=device).mean().item() == torch.tensor(x).mean().item()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 300)).astype(np.float16)
    b = rng.standard_normal((300, 4)).astype(np.float16)
    got = (mg.tensor(a, device=device) @ mg.tensor(b, device=device)).cpu().numpy()
    exact = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, exact)  # one rounding, at the end
    soft = mg.tensor(a, device=device).softmax(1)
    assert soft.dtype == mg.float16
    np.testing.assert_allclose(soft.cpu().numpy().astype(np.float32),
                               torch.tensor(a).softmax(1).float().numpy(), atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint8, np.int16, np.int32])
@given(data=st.data())
def test_cuda_matches_cpu_for_every_dtype(dtype, data):
    """The maps, a reduction and matmul: cuda (simulator) gives the cpu backend's result."""
    dtype = np.dtype(dtype)
    shape = data.draw(st.sampled_from([(3, 4), (1, 7), (5, 2)]))
    lo, hi = (-8, 8) if dtype.kind != "u" else (0, 15)
    draw = st.integers(lo, hi) if dtype.kind in "iu" else st.floats(-4, 4, width=16)
    a, b = (np.array(data.draw(st.lists(draw, min_size=shape[0] * shape[1],
                                        max_size=shape[0] * shape[1])),
                     dtype).reshape(shape) for _ in range(2))
    results = {}
    for device in DEVICES:
        x, y = mg.tensor(a, device=device), mg.tensor(b, device=device)
        out = [x + y, x * y, x - 3, (x > y), x.sum(1), x @ y.T, x.abs(), mg.maximum(x, y)]
        if dtype.kind in "iu":
            out += [x & y, x ^ y, x | 1]
        results[device] = [t.cpu().numpy() for t in out]
    for mine, ref in zip(results["cuda"], results["cpu"]):
        assert mine.dtype == ref.dtype
        np.testing.assert_allclose(mine.astype(np.float64), ref.astype(np.float64),
                                   rtol=2e-3 if dtype == np.float16 else 0)


# --- autocast -----------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_autocast_runs_matmuls_in_half_and_reductions_in_float32(device):
    a, b = mg.randn(4, 8, device=device), mg.randn(8, 3, device=device)
    lin = mg.nn.Linear(8, 3).to(device)
    with mg.autocast(device_type="cuda" if device == "cuda" else "cpu", dtype=mg.float16):
        h = a @ b
        assert h.dtype == mg.float16 and lin(a).dtype == mg.float16
        assert h.softmax(1).dtype == mg.float32 and h.sum().dtype == mg.float32
        assert mg.nn.functional.mse_loss(h, h).dtype == mg.float32
        assert (h + 1).dtype == mg.float16  # other ops: the inputs' dtype
        assert (a.double() @ b.double()).dtype == mg.float64  # float64 is left alone
        with mg.autocast(device_type=device, enabled=False):
            assert (a @ b).dtype == mg.float32
    assert (a @ b).dtype == mg.float32


def test_autocast_of_torch_gives_the_same_dtypes():
    with torch.autocast("cuda", dtype=torch.float16):  # dtypes only: no GPU needed to trace
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with mg.autocast("cpu"):
            assert (mg.randn(2, 2) @ mg.randn(2, 2)).dtype == mg.float16
    assert any("bfloat16" in str(w.message) for w in caught)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'xpu'"):
        mg.autocast("xpu")


@pytest.mark.parametrize("device", DEVICES)
def test_mixed_precision_training_with_grad_scaler_learns(device):
    mg.manual_seed(0)
    model = mg.nn.Sequential(mg.nn.Linear(4, 16), mg.nn.ReLU(), mg.nn.Linear(16, 1)).to(device)
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    scaler = mg.amp.GradScaler(device)
    x = mg.randn(32, 4, device=device)
    y = x.sum(1, keepdim=True)
    losses = []
    for _ in range(10):
        opt.zero_grad()
        with mg.autocast(device_type=device, dtype=mg.float16):
            loss = mg.nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    assert all(p.dtype == mg.float32 for p in model.parameters())  # master weights stay fp32
    assert losses[-1] < 0.3 * losses[0]


def _primitives(lib, x, device):
    """The primitives beyond the maps, on one tensor of any integer or float16 dtype."""
    F = lib.nn.functional
    out = {"max": x.max(), "argmax": x.argmax(1), "amax": x.amax(2), "cumsum": x.cumsum(3),
           "prod": x.prod(3), "sort": x.sort(3)[0], "argsort": x.argsort(dim=3, stable=True),
           "topk": x.topk(2, 3)[0], "index_select": x.index_select(1, lib.tensor([2, 0]).to(
               device)), "gather": x.gather(3, lib.zeros(2, 3, 4, 4, dtype=lib.int64).to(device)),
           "where": lib.where(x > 3, x, x * 2), "transpose": x.transpose(1, 3).contiguous(),
           "cat": lib.cat([x, x], 1), "clamp": x.clamp(1, 5), "flip": x.flip(2), "tril": x.tril(),
           "masked_select": x[x > 4], "nonzero": x.nonzero(), "unique": lib.unique(x)}
    if x.dtype == (mg.float16 if lib is mg else torch.float16):
        weight = lib.ones(2, 3, 3, 3).to(device).half()
        out.update(softmax=x.softmax(1), max_pool=F.max_pool2d(x, 2), avg_pool=F.avg_pool2d(x, 2),
                   conv=F.conv2d(x, weight), layer_norm=F.layer_norm(x, (4,)), mean=x.mean(1),
                   var=x.var(1), logsumexp=x.logsumexp(1))
    return out


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint8, np.int32])
def test_every_primitive_keeps_torchs_dtype_on_both_devices(dtype):
    """cuda (simulator) gives the cpu result, and the cpu result is torch's (dtype and values)."""
    a = np.random.default_rng(0).integers(0, 9, (2, 3, 4, 4)).astype(dtype)
    theirs = _primitives(torch, torch.tensor(a), "cpu")
    for device in DEVICES:
        mine = _primitives(mg, mg.tensor(a, device=device), device)
        for name in theirs:
            assert_same(mine[name], theirs[name]), name


@pytest.mark.parametrize("device", DEVICES)
def test_batch_norm_of_float16_normalises_in_float32(device):
    """A float16 activation (an autocast region's conv output) through BatchNorm: statistics,
    output and gradients as float32's, rounded to half once; running stats stay float32."""
    x = np.random.default_rng(3).standard_normal((8, 3, 4, 4)).astype(np.float16) * 30 + 200
    outs = {}
    for dtype in (mg.float16, mg.float32):
        bn = mg.nn.BatchNorm2d(3).to(device)
        xt = mg.tensor(x, device=device).to(dtype).requires_grad_()
        y = bn(xt)
        (y.float() * mg.arange(y.numel(), device=device).reshape(y.shape)).sum().backward()
        outs[dtype] = (y, xt.grad, bn.running_var, bn.weight.grad)
    half, single = outs[mg.float16], outs[mg.float32]
    assert half[0].dtype == half[1].dtype == mg.float16
    assert half[2].dtype == half[3].dtype == mg.float32
    for h, s in zip(half, single):
        np.testing.assert_allclose(h.detach().cpu().numpy().astype(np.float32),
                                   s.detach().cpu().numpy(), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_float16_random_draws_are_the_float32_ones_rounded(device):
    """2**24 does not fit in a half: the fills draw in float32 and round, so dropout on a
    float16 activation (an autocast region) keeps about 1 - p of it."""
    mg.manual_seed(7)
    single = mg.rand(4000, device=device)
    mg.manual_seed(7)
    half = mg.rand(4000, device=device, dtype=mg.float16)
    assert half.dtype == mg.float16
    np.testing.assert_array_equal(half.cpu().numpy(), single.cpu().numpy().astype(np.float16))
    kept = (mg.nn.functional.dropout(mg.ones(4000, device=device).half(), 0.5) != 0).float()
    assert 0.45 < kept.mean().item() < 0.55
