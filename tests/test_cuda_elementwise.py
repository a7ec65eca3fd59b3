"""cuda vs cpu for the elementwise primitives: unary, binary, where, cast (convert).

Tolerances (cuda vs the NumPy reference):
- exact: comparisons, selects and IEEE correctly-rounded arithmetic (neg, abs, sign, relu,
  leaky_relu, clamp, add, sub, mul, div, maximum, minimum, the *_grad selects), conversions.
- float32 rtol=atol=1e-5, float64 rtol=1e-10 atol=1e-12: transcendental functions (the GPU's
  expf/logf/tanhf/powf are within a few ulp of NumPy's, not bit-equal) and expressions the
  compiler contracts into an FMA (a*x + b, x*(1 - y*y), x*y*(1 - y)), which rounds once
  instead of twice.
Exact too: floor, ceil, round, trunc, isnan, isinf, floor_divide and remainder (fmod-based
Python/NumPy division, no rounding beyond IEEE's).
Domains: every op gets [-4, 4], so log/sqrt/pow/rpow see their NaN and inf edges; the
simulator's IEEE math returns what the GPU (and NumPy) return there.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minigpu import backends
from minigpu.backends import contract, cpu, optable
from minigpu.backends.contract import COMPARISONS, View, dense
from strategies import shapes, values, views

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # simulator: 1/0, 0**-1

cuda = backends.get("cuda")
from minigpu.backends.cuda import device, elementwise  # noqa: E402
from minigpu.lessons import divergence  # noqa: E402
from minigpu.backends.cuda.device import current_stream  # noqa: E402

FLOATS = (np.float32, np.float64)
INTEGERS = (np.uint8, np.int8, np.int16, np.int32, np.int64)
INTEGER_OPS = {op.name for op in optable.BINARY if op.integer}
"""The bitwise ops: integer (and bool) tensors only, drawn from INTEGERS."""
TOL = {np.dtype(np.float32): dict(rtol=1e-5, atol=1e-5),
       np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12)}
APPROX = {op.name for op in (*optable.UNARY, *optable.BINARY) if op.approx}
"""The maps compared within TOL (the table's ``approx`` field), the others exactly."""


def fetch(buf, shape):
    return cuda.to_numpy(dense(buf, shape))


def check(op, got, want):
    assert got.dtype == want.dtype, (op, got.dtype, want.dtype)
    if op in APPROX and want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, err_msg=op, **TOL[want.dtype])
    else:
        np.testing.assert_array_equal(got, want, err_msg=op)


def cpu_view(spec):
    return View(spec.base, spec.shape, spec.strides, spec.offset)


@st.composite
def operands(draw, n, domain=(-4.0, 4.0), dtype=None):
    """dtype, shape and n views of that shape (each independently permuted/sliced/broadcast,
    or all dense)."""
    dtype = dtype or draw(st.sampled_from(FLOATS))
    shape = draw(shapes())
    contiguous = draw(st.booleans())
    lo, hi = domain
    return dtype, shape, [draw(views(shape, dtype, lo, hi, contiguous=contiguous))
                          for _ in range(n)]


@pytest.mark.parametrize("op", sorted(contract.UNARY_OPS))
@given(data=st.data())
def test_unary_matches_cpu(op, data):
    dtype, shape, (x,) = data.draw(operands(1))
    a = data.draw(values(np.float64))
    b = data.draw(values(np.float64))
    got = fetch(cuda.unary(op, x.on(cuda), a, b), shape)
    want = cpu.unary(op, cpu_view(x), a, b).reshape(shape)
    check(op, got, want)


@pytest.mark.parametrize("op", sorted(contract.BINARY_OPS))
@given(data=st.data())
def test_binary_matches_cpu(op, data):
    integer = op in INTEGER_OPS
    dtype = data.draw(st.sampled_from(INTEGERS)) if integer else None
    # shifts by at most 7 bits: wider shifts of narrow types are undefined in C and CUDA
    domain = ((0, 7) if "shift" in op else (-100, 100)) if integer else (-4.0, 4.0)
    dtype, shape, (x, y) = data.draw(operands(2, domain, dtype))
    a, b = sorted([data.draw(values(np.float64)), data.draw(values(np.float64))])
    got = fetch(cuda.binary(op, x.on(cuda), y.on(cuda), a, b), shape)
    want = cpu.binary(op, cpu_view(x), cpu_view(y), a, b).reshape(shape)
    check(op, got, want)


def test_every_op_keeps_dtype_float32_and_float64():
    """Every op on a dense float32 and float64 array: output dtype (float32 stays float32,
    comparisons give bool) and values, deterministically."""
    host = np.array([0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 3.75], np.float64)
    for dtype in FLOATS:
        xs = host.astype(dtype)
        ys = xs[::-1].copy()
        xc, yc = contract.dense(xs, xs.shape), contract.dense(ys, ys.shape)
        xg, yg = contract.dense(cuda.from_numpy(xs), xs.shape), contract.dense(
            cuda.from_numpy(ys), ys.shape)
        for op in contract.UNARY_OPS:
            out = cuda.unary(op, xg, 0.5, 2.0)
            expected = np.bool_ if op in COMPARISONS else dtype
            assert out.dtype == expected, (op, dtype, out.dtype)
            check(op, fetch(out, xs.shape), cpu.unary(op, xc, 0.5, 2.0))
        for op in sorted(set(contract.BINARY_OPS) - INTEGER_OPS):
            out = cuda.binary(op, xg, yg, 0.5, 2.0)
            expected = np.bool_ if op in COMPARISONS else dtype
            assert out.dtype == expected, (op, dtype, out.dtype)
            check(op, fetch(out, xs.shape), cpu.binary(op, xc, yc, 0.5, 2.0))


@given(operands(1))
def test_leaky_relu_branch_and_select_agree(args):
    """Lesson pair: the if/else variant and the production select variant give the same
    bits (and match cpu)."""
    dtype, shape, (x,) = args
    xv = View(cuda.contiguous(x.on(cuda)), shape, contract.contiguous_strides(shape), 0)
    n = xv.numel
    grid, block = device.launch_1d(n)
    out = {}
    for kernel in (divergence.leaky_relu_branch_dense, divergence.leaky_relu_select_dense):
        buf = cuda.empty(n, dtype)
        kernel[grid, block, current_stream()](xv.buf, 0, buf, dtype(0.1), dtype(0))
        out[kernel] = fetch(buf, shape)
    branch, select = out.values()
    np.testing.assert_array_equal(branch, select)
    np.testing.assert_array_equal(select, fetch(cuda.unary("leaky_relu", xv, 0.1), shape))
    want = cpu.unary("leaky_relu", cpu_view(x), 0.1).reshape(shape)
    np.testing.assert_array_equal(select, want)
    assert elementwise.UNARY["leaky_relu"] is elementwise.unary_leaky_relu


@pytest.mark.parametrize("dtype", FLOATS)
def test_sigmoid_does_not_overflow(dtype):
    xs = np.array([-1e4, -500, -88.5, -20, 0, 20, 88.5, 500, 1e4], dtype)
    got = fetch(cuda.unary("sigmoid", dense(cuda.from_numpy(xs), xs.shape)), xs.shape)
    assert np.all(np.isfinite(got))
    want = cpu.unary("sigmoid", dense(xs, xs.shape))
    np.testing.assert_allclose(got, want, **TOL[np.dtype(dtype)])
    assert got[0] == 0 and got[-1] == 1


@given(data=st.data())
def test_where_matches_cpu(data):
    dtype, shape, (x, y) = data.draw(operands(2))
    cond = data.draw(views(shape, np.bool_))
    got = fetch(cuda.where(cond.on(cuda), x.on(cuda), y.on(cuda)), shape)
    want = cpu.where(cpu_view(cond), cpu_view(x), cpu_view(y)).reshape(shape)
    assert got.dtype == want.dtype == dtype
    np.testing.assert_array_equal(got, want)


CASTS = [(np.float32, np.float64), (np.float64, np.float32), (np.float32, np.int64),
         (np.float32, np.bool_), (np.bool_, np.float32), (np.int64, np.float32),
         (np.int64, np.bool_), (np.float32, np.float32)]


@pytest.mark.parametrize("src,dst", CASTS, ids=lambda t: np.dtype(t).name)
@given(data=st.data())
def test_cast_matches_cpu(src, dst, data):
    spec = data.draw(views(dtype=src))
    got = fetch(cuda.cast(spec.on(cuda), dst), spec.shape)
    want = cpu.cast(cpu_view(spec), dst).reshape(spec.shape)
    assert got.dtype == want.dtype == np.dtype(dst)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["neg", "abs", "gt", "eq", "ne", "le"])
@given(data=st.data())
def test_unary_int64(op, data):
    _, shape, (x,) = data.draw(operands(1, dtype=np.int64))
    got = fetch(cuda.unary(op, x.on(cuda), 1), shape)
    want = cpu.unary(op, cpu_view(x), 1).reshape(shape)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "maximum", "gt", "eq", "ne", "ge"])
@given(data=st.data())
def test_binary_int64(op, data):
    _, shape, (x, y) = data.draw(operands(2, dtype=np.int64))
    got = fetch(cuda.binary(op, x.on(cuda), y.on(cuda)), shape)
    want = cpu.binary(op, cpu_view(x), cpu_view(y)).reshape(shape)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_bool_and_int_where_and_compare():
    c = np.array([True, False, True, False])
    xi, yi = np.array([1, 2, 3, 4], np.int64), np.array([-1, -2, -3, -4], np.int64)
    xb, yb = np.array([True, True, False, False]), np.array([True, False, True, False])
    g = lambda a: dense(cuda.from_numpy(a), a.shape)  # noqa: E731
    n = lambda a: dense(a, a.shape)  # noqa: E731
    np.testing.assert_array_equal(fetch(cuda.where(g(c), g(xi), g(yi)), (4,)),
                                  cpu.where(n(c), n(xi), n(yi)))
    np.testing.assert_array_equal(fetch(cuda.where(g(c), g(xb), g(yb)), (4,)),
                                  cpu.where(n(c), n(xb), n(yb)))
    for op in ("eq", "ne"):
        np.testing.assert_array_equal(fetch(cuda.binary(op, g(xb), g(yb)), (4,)),
                                      cpu.binary(op, n(xb), n(yb)))
    np.testing.assert_array_equal(fetch(cuda.unary("gt", g(xi), 2.5), (4,)),
                                  cpu.unary("gt", n(xi), 2.5))


def test_collapse_dims_and_path_choice(monkeypatch):
    collapse = elementwise.collapse_dims
    assert collapse((2, 3, 4), (12, 4, 1)) == ((24,), ((1,),))
    assert collapse((2, 1, 4), (4, 99, 1)) == ((8,), ((1,),))
    assert collapse((3, 4), (1, 3)) == ((3, 4), ((1, 3),))  # transposed: no merge
    assert collapse((3, 4), (4, 1), (0, 1)) == ((3, 4), ((4, 1), (0, 1)))  # broadcast row
    assert collapse((1, 1), (5, 7)) == ((), ((),))

    paths = []
    real = elementwise.map_kernel
    monkeypatch.setattr(elementwise, "map_kernel",
                        lambda kind, op, path, half: paths.append(path) or real(kind, op, path,
                                                                                 half))
    base = cuda.from_numpy(np.arange(30, dtype=np.float32))
    layouts = {"dense": View(base, (2, 3, 4), (12, 4, 1), 3),   # offset slice: still dense
               "expand1": View(base, (4, 1, 5), (5, 0, 1), 0),  # size-1 expand: dense
               "transposed": View(base, (5, 4), (1, 5), 0),
               "broadcast": View(base, (3, 5), (0, 1), 2)}
    expected = {"dense": "dense", "expand1": "dense", "transposed": "strided",
                "broadcast": "strided"}
    for name, v in layouts.items():
        paths.clear()
        got = fetch(cuda.unary("neg", v), v.shape)
        np.testing.assert_array_equal(got, -cpu.to_numpy(
            View(np.arange(30, dtype=np.float32), v.shape, v.strides, v.offset)))
        assert paths == [expected[name]], name


def test_empty_and_scalar_views():
    buf = cuda.from_numpy(np.array([2.0, -3.0], np.float32))
    assert cuda.unary("neg", View(buf, (0, 3), (3, 1), 0)).size == 0
    scalar = View(buf, (), (), 1)
    np.testing.assert_array_equal(fetch(cuda.binary("mul", scalar, scalar), ()), np.float32(9))


def test_unknown_op_message():
    buf = cuda.from_numpy(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="unknown unary op 'cube'"):
        cuda.unary("cube", dense(buf, (2,)))
