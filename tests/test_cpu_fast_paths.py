"""The cpu backend's fast paths against the plain forms they replaced (kept as their oracles).

Each fast path is a different way to compute the same thing with fewer passes over memory;
the plain form is the readable reference. Selections (max pooling's values and argmax) must
agree exactly, and so must sums done in the same order; others may differ in rounding only.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn.functional as F
from minigpu.backends import contract, get
from minigpu.backends.cpu import conv, pool
from strategies import views

cpu = get("cpu")


@st.composite
def pool_geometry(draw):
    """(x_shape, kernel, stride, padding) with padding <= kernel // 2, as PyTorch requires."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    sides = tuple(draw(st.integers(max(1, k - 2 * p), 7)) for k, p in zip(kernel, padding))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + sides, kernel, stride, padding


specials = st.sampled_from([None, np.nan, -np.inf, np.inf])


@given(st.data(), st.sampled_from([np.float32, np.float64]))
def test_maxpool2d_equals_its_reference(data, dtype):
    """Values and argmax exactly, with ties (small integers), infinities and NaN."""
    x_shape, kernel, stride, padding = data.draw(pool_geometry())
    ties = data.draw(st.booleans())
    spec = data.draw(views(x_shape, dtype=dtype, lo=-2 if ties else -4, hi=2 if ties else 4))
    if ties:
        spec.base = np.round(spec.base)
    special = data.draw(specials)
    if special is not None:
        spec.base[data.draw(st.integers(0, spec.base.size - 1))] = special
    x = spec.on(cpu)
    got_v, got_i = pool.maxpool2d(x, kernel, stride, padding)
    ref_v, ref_i = pool.maxpool2d_reference(x, kernel, stride, padding)
    assert got_v.dtype == ref_v.dtype and got_i.dtype == ref_i.dtype == np.int64
    np.testing.assert_array_equal(got_v, ref_v)
    np.testing.assert_array_equal(got_i, ref_i)


@given(st.data(), st.sampled_from([np.float32, np.float64]))
def test_maxpool2d_backward_equals_its_reference(data, dtype):
    """Exactly (the same additions in the same order). Overlapping windows (stride < kernel)
    route several gradients to one pixel; a window of -inf routes its gradient to its first
    pixel inside the image."""
    x_shape, kernel, stride, padding = data.draw(pool_geometry())
    x = data.draw(views(x_shape, dtype=dtype, lo=-2, hi=2))
    x.base = np.round(x.base)
    if data.draw(st.booleans()):
        x.base[:] = -np.inf
    _, argmax = pool.maxpool2d(x.on(cpu), kernel, stride, padding)
    out_shape = x_shape[:2] + (argmax.size // (x_shape[0] * x_shape[1]), 1)
    g = data.draw(views(out_shape, dtype=dtype))
    idx = contract.dense(argmax, out_shape)
    got = pool.maxpool2d_backward(g.on(cpu), idx, x_shape)
    ref = pool.maxpool2d_backward_reference(g.on(cpu), idx, x_shape)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


# --- conv weight gradients: sum_of_products' two forms -------------------------------------
# (x shape, weight shape): images of one or a few pixels take the one-GEMM form (the copies
# are smaller than the per-image products), larger ones the per-image products summed over n.
CONV_WEIGHT_CASES = [
    ("conv2d", (2, 3, 2, 2), (4, 3, 2, 2)),             # 1 output pixel: one GEMM
    ("conv2d", (2, 2, 5, 5), (3, 2, 3, 3)),             # 9 pixels: per image
    ("conv_transpose2d", (2, 3, 1, 1), (3, 2, 2, 2)),   # 1 input pixel: one GEMM
    ("conv_transpose2d", (2, 2, 4, 4), (2, 3, 2, 2)),   # 16 pixels: per image
]


@pytest.mark.parametrize("name,x_shape,w_shape", CONV_WEIGHT_CASES)
def test_conv_weight_gradient_in_both_forms(name, x_shape, w_shape):
    """float64 gradcheck on cpu, and cuda's gradients equal cpu's (float32)."""
    rng = np.random.default_rng(0)
    fn = getattr(F, name)
    x = mg.tensor(rng.normal(size=x_shape), dtype=mg.float64, requires_grad=True)
    w = mg.tensor(rng.normal(size=w_shape), dtype=mg.float64, requires_grad=True)
    assert mg.autograd.gradcheck(lambda x, w: fn(x, w), (x, w))
    grads = []
    for device in ("cpu", "cuda"):
        ts = [mg.tensor(t.detach().numpy(), dtype=mg.float32, device=device,
                        requires_grad=True) for t in (x, w)]
        out = fn(*ts)
        (out * out).sum().backward()
        grads.append([t.grad.numpy() for t in ts])
    for got, want in zip(grads[1], grads[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@st.composite
def conv_geometry(draw):
    """(x_shape, kernel, stride, padding, dilation) whose output is at least 1x1; widths up to
    12 give outputs on both sides of col2im's OW < 4 switch."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    span = [d * (k - 1) + 1 for k, d in zip(kernel, dilation)]
    sides = tuple(draw(st.integers(max(1, s - 2 * p), 12)) for s, p in zip(span, padding))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 3))) + sides, kernel, stride, \
        padding, dilation


@given(st.data(), st.sampled_from([np.float32, np.float64, np.float16]))
def test_col2im_equals_its_reference(data, dtype):
    """Exactly: both add the taps in the same (ki, kj) order (float16 is not compiled: the
    reference itself, or the transposed adds below OW 4)."""
    x_shape, kernel, stride, padding, dilation = data.draw(conv_geometry())
    n, c = x_shape[:2]
    out = [(s + 2 * p - d * (k - 1) - 1) // st_ + 1 for s, k, st_, p, d in
           zip(x_shape[2:], kernel, stride, padding, dilation)]
    cols = data.draw(views((n, c * kernel[0] * kernel[1], out[0] * out[1]), dtype=dtype))
    args = (x_shape, kernel, stride, padding, dilation)
    got = cpu.col2im(cols.on(cpu), *args)
    ref = conv.col2im_reference(cols.on(cpu), *args)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


@given(st.data(), st.sampled_from([np.float32, np.float64]))
def test_matmul_with_one_right_matrix_equals_per_batch_products(data, dtype):
    """b with batch stride 0 (a Linear layer over a batch of sequences) takes the stacked-rows
    GEMM; a is any layout (strided, transposed, broadcast)."""
    bsz, m, k, n = (data.draw(st.integers(1, 4)) for _ in range(4))
    a = data.draw(views((bsz, m, k), dtype=dtype))
    b = data.draw(views((1, k, n), dtype=dtype))
    b_view = contract.View(cpu.from_numpy(b.base), (bsz, k, n), (0,) + b.strides[1:], b.offset)
    got = cpu.matmul(a.on(cpu), b_view).reshape(bsz, m, n)
    want = np.stack([a.numpy()[i] @ b.numpy()[0] for i in range(bsz)])
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


@given(st.data(), st.sampled_from([np.float16, np.float32, np.float64, np.int32, np.int64]),
       st.booleans(), st.booleans())
def test_select_by_bits_equals_np_where_bit_for_bit(data, dtype, with_y, broadcast_x):
    """optable.select, with the threshold lowered so that every draw takes the bit-mask path:
    the same bits as np.where (NaN payloads, -0.0, infinities), the same dtype and shape."""
    from minigpu.backends import optable
    n = data.draw(st.integers(1, 64))
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    raw = st.integers(0, np.iinfo(bits).max)  # any bit pattern, NaNs with payloads included
    x = np.array(data.draw(st.lists(raw, min_size=n, max_size=n)), bits).view(dtype)
    y = np.array(data.draw(st.lists(raw, min_size=n, max_size=n)), bits).view(dtype)
    cond = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if broadcast_x:
        x = x[:1]
    expected = np.where(cond, x, y if with_y else 0)
    old = optable.SELECT_BY_BITS_FROM
    optable.SELECT_BY_BITS_FROM = 0
    try:
        got = optable.select(cond, x, y if with_y else None)
    finally:
        optable.SELECT_BY_BITS_FROM = old
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


def _any_floats(data, dtype, n):
    """n floats of any bit pattern (NaN, infinities, -0.0, subnormals included)."""
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    raw = st.integers(0, np.iinfo(bits).max)
    return np.array(data.draw(st.lists(raw, min_size=n, max_size=n)), bits).view(dtype)


@given(st.data(), st.sampled_from([np.float16, np.float32, np.float64]))
def test_sigmoid_equals_its_two_branch_form_bit_for_bit(data, dtype):
    """optable.sigmoid (one division, max(e, x >= 0) as numerator) against the two-branch form
    it replaced: the same bits for every input, NaN and infinities included."""
    from minigpu.backends import optable
    x = _any_floats(data, dtype, data.draw(st.integers(1, 64)))
    one = x.dtype.type(1)
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(x))
        expected = np.where(x >= 0, one / (one + e), e / (one + e))
        got = optable.sigmoid(x)
    assert got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes()


@given(st.data(), st.sampled_from([np.float32, np.float64]))
def test_lstm_cell_equals_its_formulas_bit_for_bit(data, dtype):
    """The cell's forward and backward (products written into their outputs) against the
    formulas of the contract computed plainly: the same operations, so the same bits."""
    from minigpu.backends import optable
    n, hs = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5))
    gates, c_prev = (data.draw(views(s, dtype=dtype, lo=-6, hi=6))
                     for s in ((n, 4 * hs), (n, hs)))
    grad_h, grad_c = (data.draw(views((n, hs), dtype=dtype)) for _ in range(2))
    g4, c0, gh, gc = gates.numpy(), c_prev.numpy(), grad_h.numpy(), grad_c.numpy()
    one = g4.dtype.type(1)
    i, f, o = (optable.sigmoid(g4[:, k * hs:(k + 1) * hs]) for k in (0, 1, 3))
    g = np.tanh(g4[:, 2 * hs:3 * hs])
    c = f * c0 + i * g
    h = o * np.tanh(c)
    tc = np.tanh(c)
    dc = gc + gh * o * (one - tc * tc)
    want_dgates = np.concatenate([dc * g * i * (one - i), dc * c0 * f * (one - f),
                                  dc * i * (one - g * g), gh * tc * o * (one - o)], axis=1)

    h_buf, c_buf, act = cpu.lstm_cell(gates.on(cpu), c_prev.on(cpu))
    assert h_buf.tobytes() == h.tobytes() and c_buf.tobytes() == c.tobytes()
    assert act.tobytes() == np.concatenate([i, f, g, o], axis=1).tobytes()
    dgates, dc_prev = cpu.lstm_cell_backward(
        contract.dense(act, (n, 4 * hs)), c_prev.on(cpu), contract.dense(c_buf, (n, hs)),
        grad_h.on(cpu), grad_c.on(cpu))
    assert dgates.tobytes() == want_dgates.tobytes()
    assert dc_prev.tobytes() == (dc * f).tobytes()


@given(st.data(), st.sampled_from([np.float32, np.float64]), st.sampled_from([0.0, 0.01]))
def test_adam_step_equals_its_formulas_bit_for_bit(data, dtype, weight_decay):
    """adam_step_ (in place, two scratch buffers) against PyTorch's update written plainly,
    over three steps."""
    n = data.draw(st.integers(1, 40))
    p, g, m = (data.draw(views((n,), dtype=dtype, contiguous=True)).numpy().copy()
               for _ in range(3))
    v = np.abs(data.draw(views((n,), dtype=dtype, contiguous=True)).numpy())
    t = np.dtype(dtype).type
    lr, b1, b2, eps = 1e-2, 0.9, 0.999, 1e-8
    bufs = [p.copy(), g, m.copy(), v.copy()]
    for step in (1, 2, 3):
        cpu.adam_step_(*bufs, step, lr, b1, b2, eps, weight_decay)
        d = g + t(weight_decay) * p if weight_decay else g
        m = t(b1) * m + t(1 - b1) * d
        v = t(b2) * v + t(1 - b2) * d * d
        denom = np.sqrt(v) / t(np.sqrt(1 - b2 ** step)) + t(eps)
        p = p - t(lr / (1 - b1 ** step)) * m / denom
    for got, want in zip((bufs[0], bufs[2], bufs[3]), (p, m, v)):
        assert got.tobytes() == want.tobytes()


@settings(deadline=None, max_examples=15)
@given(data=st.data(), dtype=st.sampled_from([np.float32, np.float64]),
       momentum=st.sampled_from([0.0, 0.9]), nesterov=st.booleans(),
       weight_decay=st.sampled_from([0.0, 1e-2]))
def test_sgd_step_equals_its_formulas_bit_for_bit(data, dtype, momentum, nesterov,
                                                  weight_decay):
    """sgd_step_ (in place, a block at a time: sizes across several blocks drawn too) against
    PyTorch's update written plainly, over three steps."""
    from minigpu.backends.cpu import optim as cpu_optim
    n = data.draw(st.sampled_from([1, 7, cpu_optim.BLOCK + 3, 2 * cpu_optim.BLOCK]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    p, g = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    t = np.dtype(dtype).type
    lr, dampening = 0.1, 0.1
    bufs = [p.copy(), g, np.empty(n, dtype)]
    buf = None
    for step in (1, 2, 3):
        cpu.sgd_step_(*bufs, lr, momentum, dampening, weight_decay, nesterov, step == 1)
        d = g + t(weight_decay) * p if weight_decay else g
        if momentum:
            buf = d.copy() if buf is None else t(momentum) * buf + t(1 - dampening) * d
            d = d + t(momentum) * buf if nesterov else buf
        p = p - t(lr) * d
        assert bufs[0].tobytes() == p.tobytes()
        if momentum:
            assert bufs[2].tobytes() == buf.tobytes()


@settings(deadline=None, max_examples=20)
@given(m=st.sampled_from([1, 5, 64, 65]), k=st.integers(1, 40),
       n=st.sampled_from([127, 128, 300]), batched=st.booleans(), seed=st.integers(0, 2**16))
def test_matmul_by_a_transposed_weight_equals_the_plain_product(m, k, n, batched, seed):
    """A few rows by a column-major (transposed) weight is computed the other way round,
    ``(W @ x^T)^T`` (``backends/cpu/matmul.py``): the same values as NumPy's product."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2 if batched else 1, m, k)).astype(np.float32)
    w = rng.standard_normal((n, k)).astype(np.float32)
    xv = contract.dense(x.reshape(-1), x.shape)
    wt = contract.View(w.reshape(-1), (x.shape[0], k, n), (0 if batched else k * n, 1, k), 0)
    got = cpu.matmul(xv, wt).reshape(x.shape[0], m, n)
    want = x.astype(np.float64) @ w.T.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_maps_in_blocks_equal_the_maps_in_one_piece(monkeypatch, dtype):
    """Every unary and binary map of the op table over flat operands of 40 elements, in blocks
    of 7 (the last one short) and with a repeated scalar operand: the same bits and dtype as
    in one piece."""
    from minigpu.backends import optable
    from minigpu.backends.cpu import elementwise
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(40) * 3).astype(dtype)
    y = (rng.standard_normal(40) * 3).astype(dtype)
    if dtype == np.int32:
        y[y == 0] = 1  # integer division by zero raises, as in PyTorch
    xv, yv = contract.dense(x, (40,)), contract.dense(y, (40,))
    scalar = contract.View(y[:1].copy(), (40,), (0,), 0)

    def maps():
        out = {}
        for op in optable.UNARY:
            if dtype == np.float32 or not op.float_input:
                out[op.name] = cpu.unary(op.name, xv, 0.5, 0.25)
        for op in optable.BINARY:
            if (dtype == np.int32) == op.name.startswith("bitwise") or dtype == np.int32 and \
                    op.name in ("add", "sub", "mul", "floor_divide", "remainder"):
                out[op.name] = cpu.binary(op.name, xv, yv)
                out[op.name + " scalar"] = cpu.binary(op.name, xv, scalar)
        return out

    with np.errstate(all="ignore"):
        whole = maps()
        monkeypatch.setattr(elementwise, "MAP_BLOCK", 7)
        monkeypatch.setattr(elementwise, "BLOCKS_FROM", 8)
        monkeypatch.setattr(elementwise, "SEVERAL_PASSES", frozenset(whole) | {
            name.split()[0] for name in whole})
        blocked = maps()
    assert whole.keys() == blocked.keys() and len(whole) > 10
    for name in whole:
        assert blocked[name].dtype == whole[name].dtype, name
        assert blocked[name].tobytes() == whole[name].tobytes(), name


@pytest.mark.parametrize("op", ["sub", "div", "maximum", "lt"])
@pytest.mark.parametrize("value_first", [False, True])
def test_binary_with_one_value_seen_through_size_1_dims(op, value_first):
    """A per-channel mean of one channel broadcast over an image, (1, 1, 1) -> (1, 3, 4): its
    view keeps stride 1 in the size-1 dim, and still repeats one value; the map runs on the
    flat buffer against that value, with NumPy's broadcast as the oracle, bit for bit."""
    image = np.random.default_rng(0).standard_normal(12).astype(np.float32)
    values = np.array([0.5, -0.25, 3.0], np.float32)  # the view sees values[1] only
    dense = contract.View(image, (1, 3, 4), (12, 4, 1), 0)
    one = contract.View(values, (1, 3, 4), (1, 0, 0), 1)
    operands = (one, dense) if value_first else (dense, one)
    got = cpu.binary(op, *operands)
    arrays = [image.reshape(1, 3, 4), values[1:2].reshape(1, 1, 1)]
    want = getattr(np, {"sub": "subtract", "div": "divide", "lt": "less"}.get(op, op))(
        *(arrays[::-1] if value_first else arrays))
    assert got.shape == (12,) and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want.reshape(-1))
