"""In-place ops, version counters and autograd through them, against PyTorch's documented
behaviour (NumPy references; torch is not a dependency), on cpu and on cuda (simulator)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn as nn
from minigpu.autograd import gradcheck

DEVICES = ["cpu", "cuda"]
MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace"
LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place"


def host(t):
    """A snapshot of ``t`` (a copy: a cpu tensor's ``numpy()`` shares its memory, as in torch)."""
    return t.detach().cpu().numpy().copy()


# --- version counters -------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_version_counter_is_bumped_by_inplace_ops_and_shared_by_views(device):
    a = mg.zeros(2, 3, device=device)
    assert a._version == 0
    a.add_(1)
    assert a._version == 1
    views = [a[0], a.t(), a.reshape(6), a.detach(), a[:, ::2], a.unsqueeze(0).expand(4, 2, 3)]
    a[0].mul_(2)
    assert all(v._version == 2 for v in views) and a._version == 2
    a.t()[1] += 1  # += on a view, then setitem: two writes (as in PyTorch)
    assert a._version == 4
    (a + 1).exp()  # out-of-place ops leave it alone
    assert a._version == 4
    assert a.data._version == 0  # changes through .data are invisible to autograd
    np.testing.assert_array_equal(host(a), [[2, 3, 2], [1, 2, 1]])


@pytest.mark.parametrize("device", DEVICES)
def test_modified_saved_input_raises_pytorch_error(device):
    w = mg.ones(3, device=device, requires_grad=True)
    x = mg.tensor([1.0, 2.0, 3.0], device=device)
    y = (w * x).sum()
    x.fill_(0)
    kind = "minigpu.cuda.FloatTensor" if device == "cuda" else "minigpu.FloatTensor"
    with pytest.raises(RuntimeError, match=re.escape(
            f"{MODIFIED} operation: [{kind} [3]] is at version 1; expected version 0 "
            f"instead.")):
        y.backward()


@pytest.mark.parametrize("device", DEVICES)
def test_optimizer_step_between_forward_and_backward_raises(device):
    """As in torch: Linear saves its weight only for the input's gradient, so a step between
    forward and backward is an error only when the input needs a gradient."""
    mg.manual_seed(0)
    lin = nn.Linear(3, 2).to(device)
    opt = mg.optim.SGD(lin.parameters(), lr=0.1)
    loss = lin(mg.randn(4, 3, device=device)).pow(2).sum()
    loss.backward()
    opt.step()  # fine: backward already ran
    loss = lin(mg.randn(4, 3, device=device)).pow(2).sum()
    opt.step()
    loss.backward()  # fine: the weight was not saved (the input needs no gradient)
    x = mg.randn(4, 3, device=device, requires_grad=True)
    loss = lin(x).pow(2).sum()
    opt.step()
    with pytest.raises(RuntimeError, match=MODIFIED + r".*is at version \d+; expected version"):
        loss.backward()


def test_modified_saved_output_names_its_node():
    x = mg.randn(3, requires_grad=True)
    y = x.exp()
    y += 1
    with pytest.raises(RuntimeError, match=re.escape(
            "[minigpu.FloatTensor [3]], which is output 0 of ExpBackward, is at version 1; "
            "expected version 0 instead.")):
        y.sum().backward()


# --- in-place ops vs NumPy, through dense and strided views -------------------------------------
def _views(a):
    """(name, view of a, the NumPy view of the same elements) for the layouts writes go through."""
    return [("dense", lambda t: t, lambda n: n),
            ("transposed", lambda t: t.t(), lambda n: n.T),
            ("strided slice", lambda t: t[1:, ::2], lambda n: n[1:, ::2]),
            ("row", lambda t: t[2], lambda n: n[2])]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", ["dense", "transposed", "strided slice", "row"])
def test_inplace_ops_write_through_views_like_numpy(device, layout):
    rng = np.random.default_rng(0)
    base = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    view_t, view_n = {n: (vt, vn) for n, vt, vn in _views(base)}[layout]
    other = rng.uniform(0.5, 2.0, view_n(base).shape[-1:]).astype(np.float32)  # broadcasts
    cases = [
        (lambda v, o: v.add_(o, alpha=2), lambda v, o: v + 2 * o),
        (lambda v, o: v.sub_(o), lambda v, o: v - o),
        (lambda v, o: v.mul_(o), lambda v, o: v * o),
        (lambda v, o: v.div_(o), lambda v, o: v / o),
        (lambda v, o: v.pow_(o), lambda v, o: v ** o),
        (lambda v, o: v.pow_(2), lambda v, o: v ** 2),
        (lambda v, o: v.add_(1.5), lambda v, o: v + 1.5),
        (lambda v, o: v.mul_(-3), lambda v, o: v * -3),
        (lambda v, o: v.clamp_(0.8, 1.5), lambda v, o: np.clip(v, 0.8, 1.5)),
        (lambda v, o: v.clamp_(min=1.0), lambda v, o: np.maximum(v, 1.0)),
        (lambda v, o: v.masked_fill_(v > 1, -1.0), lambda v, o: np.where(v > 1, -1.0, v)),
        (lambda v, o: v.fill_(7), lambda v, o: np.full_like(v, 7)),
        (lambda v, o: v.zero_(), lambda v, o: np.zeros_like(v)),
        (lambda v, o: v.copy_(o), lambda v, o: np.broadcast_to(o, v.shape)),
    ]
    for op, ref in cases:
        t = mg.tensor(base, device=device)
        o = mg.tensor(other, device=device)
        view = view_t(t)
        out = op(view, o)
        assert out is view
        want = base.copy()
        view_n(want)[...] = ref(view_n(base), other)
        np.testing.assert_allclose(host(t), want, rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_random_fills_are_seeded_and_in_range(device):
    t = mg.zeros(64, 4, device=device)
    mg.manual_seed(3)
    t.t()[1].uniform_(2.0, 3.0)
    col = host(t)[:, 1]
    assert (col >= 2.0).all() and (col < 3.0).all() and np.count_nonzero(host(t)) == 64
    mg.manual_seed(3)
    assert np.array_equal(host(mg.rand(64) * 1.0 + 2.0), col)
    t.normal_(5.0, 0.1)
    assert abs(host(t).mean() - 5.0) < 0.05 and t._version == 2
    mg.manual_seed(4)
    a = mg.empty(8, device=device).normal_()
    mg.manual_seed(4)
    b = mg.empty(8, device="cpu").normal_()
    np.testing.assert_allclose(host(a), host(b), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_augmented_assignment_is_in_place(device):
    a = mg.zeros(3, device=device)
    b = a
    b += 1
    assert b is a
    b -= mg.tensor([0.0, 1.0, 2.0], device=device)
    b *= 4
    b /= 2
    b **= 3
    b /= 4
    np.testing.assert_array_equal(host(a), [2, 0, -2])
    a[0] += 5
    a[1:] -= 1
    np.testing.assert_array_equal(host(a), [7, -1, -3])
    m = mg.arange(6.0, device=device).reshape(2, 3)
    m.t()[0] += 10  # through a transposed view
    np.testing.assert_array_equal(host(m), [[10, 1, 2], [13, 4, 5]])


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_setitem_writes_through_basic_indexing_like_numpy(device, data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    index = []
    for size in shape[:data.draw(st.integers(1, len(shape)))]:
        if data.draw(st.booleans()):
            index.append(data.draw(st.integers(-size, size - 1)))
        else:
            start = data.draw(st.integers(0, size - 1))
            index.append(slice(start, data.draw(st.integers(start + 1, size)),
                               data.draw(st.integers(1, 2))))
    index = tuple(index)
    ref = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    region = ref[index].shape
    value_shape = region[data.draw(st.integers(0, len(region))):]  # a broadcastable suffix
    value = np.asarray(data.draw(st.lists(st.floats(-9, 9, width=32), min_size=int(
        np.prod(value_shape)), max_size=int(np.prod(value_shape)))), np.float32).reshape(
        value_shape)
    t = mg.tensor(ref, device=device)
    op = data.draw(st.sampled_from(["set", "add", "scalar"]))
    if op == "set":
        t[index] = mg.tensor(value, device=device)
        ref[index] = value
    elif op == "add":
        t[index] += mg.tensor(value, device=device)
        ref[index] += value
    else:
        t[index] = 2.5
        ref[index] = 2.5
    np.testing.assert_array_equal(host(t), ref)


@pytest.mark.parametrize("device", DEVICES)
def test_setitem_masks_overlaps_and_cross_device_copy(device):
    t = mg.arange(6.0, device=device)
    t[t > 3] = 0.0
    np.testing.assert_array_equal(host(t), [0, 1, 2, 3, 0, 0])
    t[1:] = t[:-1]  # overlapping source: read before writing, like NumPy
    np.testing.assert_array_equal(host(t), [0, 0, 1, 2, 3, 0])
    t.copy_(mg.arange(6, device="cpu"))  # copy_ converts dtype and device
    np.testing.assert_array_equal(host(t), np.arange(6))
    t.copy_(mg.tensor([1.0, 2.0], device=device).reshape(2, 1).expand(2, 3).reshape(6))
    np.testing.assert_array_equal(host(t), [1, 1, 1, 2, 2, 2])


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_errors_match_pytorch(device):
    i = mg.arange(3, device=device)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired "
                                           "output type Long"):
        i += 1.5
    i += 2  # int stays int
    f = mg.zeros(3, device=device)
    f += i  # float += int is fine
    np.testing.assert_array_equal(host(f), [2, 3, 4])
    with pytest.raises(RuntimeError, match=re.escape(
            "output with shape [3] doesn't match the broadcast shape [2, 3]")):
        f.add_(mg.zeros(2, 3, device=device))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor "
                                           "refers to a single memory location"):
        mg.zeros(1, device=device).expand(3).add_(1)
    assert host(f).tolist() == [2, 3, 4]  # a refused op writes nothing


# --- autograd and leaves ------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_leaves_that_require_grad_are_refused_outside_no_grad(device):
    w = mg.ones(2, 2, device=device, requires_grad=True)
    for op in (lambda: w.add_(1), lambda: w.fill_(0), lambda: w.copy_(mg.zeros(2, 2)),
               lambda: w.zero_(), lambda: w.__iadd__(1)):
        with pytest.raises(RuntimeError, match=re.escape(LEAF)):
            op()
    for op in (lambda: w.__setitem__((0, 0), 1.0), lambda: w[0].mul_(2)):
        with pytest.raises(RuntimeError, match=VIEW_OF_LEAF):
            op()
    assert w._version == 0
    with mg.no_grad():  # what optimizers and initialisers do
        w.fill_(3)
        w.copy_(mg.full((2, 2), 2.0, device=device))
        w[0, 0] = 1
        w[1] *= 5
    np.testing.assert_array_equal(host(w), [[1, 2], [10, 10]])
    assert w.is_leaf and w.requires_grad and w.grad_fn is None


@pytest.mark.parametrize("device", DEVICES)
def test_tutorial_update_and_module_parameter_stay_the_same_objects(device):
    mg.manual_seed(0)
    x = mg.randn(8, 3, device=device)
    w = mg.randn(3, 1, device=device, requires_grad=True)
    w0 = host(w)
    loss = (x @ w).pow(2).mean()
    loss.backward()
    grad = host(w.grad)
    with mg.no_grad():
        w -= 0.1 * w.grad
        w.grad.zero_()
    np.testing.assert_allclose(host(w), w0 - 0.1 * grad, rtol=1e-6)
    assert w.is_leaf and host(w.grad).sum() == 0

    lin = nn.Linear(3, 2).to(device)
    weight = lin.weight
    opt = mg.optim.SGD(lin.parameters(), lr=0.5)
    with mg.no_grad():
        lin.weight += 1
    assert lin.weight is weight and isinstance(lin.weight, nn.Parameter)
    before = host(lin.weight)
    lin(x).sum().backward()
    opt.step()
    assert lin.weight is weight
    np.testing.assert_allclose(host(weight), before - 0.5 * host(weight.grad), rtol=1e-5)


def _leaf(*shape, seed=0):
    return mg.tensor(np.random.default_rng(seed).uniform(0.5, 1.5, shape),
                     dtype=mg.float64, requires_grad=True)


GRAD_CASES = {
    "add_": lambda x, w: (x * 1).add_(w, alpha=3),
    "sub_": lambda x, w: (x * 2).sub_(w),
    "mul_": lambda x, w: (x * 2).mul_(w),
    "div_": lambda x, w: (x + 1).div_(w),
    "pow_": lambda x, w: (x * 1).pow_(w),
    "clamp_": lambda x, w: (x * w).clamp_(0.7, 1.3),
    "masked_fill_": lambda x, w: (x * w).masked_fill_(x.detach() > 1, 0.5),
    "iadd through a view": lambda x, w: _iadd_row(x, w),
    "setitem value": lambda x, w: _setitem(x, w),
    "view of a view": lambda x, w: _nested(x, w),
    "fill_ of a non-leaf": lambda x, w: (x * w).fill_(2.0) * x,
    "copy_ into plain zeros": lambda x, w: mg.zeros(3, 4, dtype=mg.float64).copy_(x * w),
}


def _iadd_row(x, w):
    y = x * w
    y[1] += w[0] * x[2]  # reads y's old row through the graph
    return y


def _setitem(x, w):
    y = mg.zeros(3, 4, dtype=mg.float64)
    y[:, 1:3] = x[:, :2] * w[0, 0]
    y[0] = w[1]
    return y * x


def _nested(x, w):
    y = x * 3  # (x.exp() would refuse: exp saves its output, as in PyTorch)
    y.t()[1:3].mul_(w.t()[:2])
    return y


@pytest.mark.parametrize("name", list(GRAD_CASES))
def test_gradients_through_inplace_ops_match_finite_differences(name):
    assert gradcheck(GRAD_CASES[name], [_leaf(3, 4), _leaf(3, 4, seed=1)])


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_through_inplace_write_to_a_view_on_both_devices(device):
    xv, wv = np.random.default_rng(0).normal(size=(2, 4, 3)).astype(np.float32)
    x = mg.tensor(xv, device=device, requires_grad=True)
    w = mg.tensor(wv, device=device, requires_grad=True)
    base = x * 2
    view = base.t()[:, 1:]  # (3, 3) strided window
    view.mul_(w.t()[:, 1:])
    assert base.grad_fn.name() == "CopySlices" and view._version == base._version == 1
    (base * base).sum().backward()
    y = 2 * xv
    y[1:] *= wv[1:]
    gy = 2 * y
    gx = 2 * gy
    gx[1:] *= wv[1:]
    gw = np.zeros_like(wv)
    gw[1:] = gy[1:] * 2 * xv[1:]
    np.testing.assert_allclose(host(x.grad), gx, rtol=1e-5)
    np.testing.assert_allclose(host(w.grad), gw, rtol=1e-5)


def test_inplace_on_non_leaf_gets_a_new_grad_fn_and_keeps_retain_grad():
    x = _leaf(3)
    y = x * 2
    y.retain_grad()
    y.mul_(x)
    assert y.grad_fn.name() == "MulBackward" and not y.is_leaf
    y.sum().backward()
    np.testing.assert_allclose(host(x.grad), 4 * host(x))
    np.testing.assert_allclose(host(y.grad), np.ones(3))  # moved to the new grad_fn


def test_gradients_are_not_aliased_between_leaves():
    a, b = _leaf(3), _leaf(3, seed=1)
    (a + b).sum().backward()
    a.grad.zero_()
    np.testing.assert_array_equal(host(b.grad), np.ones(3))


CPU_ONLY = """
import minigpu as mg, minigpu.nn as nn
w = mg.ones(3, requires_grad=True)
x = mg.tensor([1.0, 2.0, 3.0])
y = (w * x).sum()
x.fill_(0)
try:
    y.backward()
except RuntimeError as e:
    assert "modified by an inplace operation" in str(e)
lin = nn.Linear(3, 2)
weight = lin.weight
with mg.no_grad():
    lin.weight += 1
    lin.weight[0, 0] = 5
assert lin.weight is weight and weight[0, 0].item() == 5
z = mg.zeros(2, 3)
z.t()[1] += 1
assert z.tolist() == [[0, 1, 0], [0, 1, 0]]
print("CPU-ONLY-OK")
"""


def test_inplace_semantics_on_a_machine_without_gpu_or_simulator():
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    result = subprocess.run([sys.executable, "-c", CPU_ONLY], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert "CPU-ONLY-OK" in result.stdout, result.stderr[-3000:]


@pytest.mark.parametrize("device", DEVICES)
def test_views_taken_before_a_write_see_it_in_their_gradient(device):
    x = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    w = mg.tensor([5.0], device=device, requires_grad=True)
    h = x * 2
    first, rest = h[:1], h[1:]
    h[0:1] = w * 3  # overwrites what `first` looks at
    h[1:].mul_(2)
    (first * 10 + rest.sum()).sum().backward()
    np.testing.assert_array_equal(host(first), [15.0])
    np.testing.assert_array_equal(host(w.grad), [30.0])  # through the write, not through x
    np.testing.assert_array_equal(host(x.grad), [0.0, 4.0, 4.0])


@pytest.mark.parametrize("device", DEVICES)
def test_mask_assignment_selects_like_pytorch(device):
    t = mg.arange(6.0, device=device).reshape(3, 2)
    t[mg.tensor([True, False, True], device=device)] = -1.0  # a mask over rows
    np.testing.assert_array_equal(host(t), [[-1, -1], [2, 3], [-1, -1]])
    t.masked_fill_(t > 2, mg.tensor(9.0, device=device))
    np.testing.assert_array_equal(host(t), [[-1, -1], [2, 9], [-1, -1]])
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor"):
        t.masked_fill_(t > 0, mg.ones(2, device=device))
    t[mg.tensor([0, 2], device=device)] = 0.0  # integer-array rows (test_index_assign.py)
    np.testing.assert_array_equal(host(t), [[0, 0], [2, 9], [0, 0]])


def test_load_state_dict_and_zero_grad_work_in_place():
    lin = nn.Linear(2, 2)
    weight, view = lin.weight, lin.weight[0]
    lin.load_state_dict({"weight": np.ones((2, 2), np.float32), "bias": np.zeros(2)})
    assert lin.weight is weight and host(view).tolist() == [1, 1] and weight._version > 0
    lin(mg.ones(1, 2)).sum().backward()
    grad = weight.grad
    lin.zero_grad(set_to_none=False)
    assert weight.grad is grad and np.count_nonzero(host(grad)) == 0


def test_only_tensors_backward_reads_are_saved_as_in_pytorch():
    x = _leaf(3)
    h = x * 2
    outs = [h + 1, h * 3, -h, h - x, h.exp(), h.relu(), h.sigmoid()]  # none of them reads h
    h.add_(1)
    sum(o.sum() for o in outs).backward()
    s = 1 / (1 + np.exp(-2 * host(x)))
    np.testing.assert_allclose(host(x.grad), 2 + 6 - 2 + 1 + 2 * np.exp(2 * host(x)) + 2
                               + 2 * s * (1 - s), rtol=1e-12)
    for reads_h in (lambda: h * x, lambda: h.log(), lambda: h.clamp(0, 1), lambda: h ** 2):
        out = reads_h()
        h.add_(1)
        with pytest.raises(RuntimeError, match=MODIFIED):
            out.sum().backward()


# --- in-place activations: relu_, leaky_relu_, nn.ReLU(inplace=True) ---------------------------
def _activate(name, slope, inplace):
    if name == "relu":
        return lambda t: t.relu_() if inplace else t.relu()
    return lambda t: nn.functional.leaky_relu(t, slope, inplace=inplace)


@pytest.mark.parametrize("device", DEVICES)
@settings(deadline=None, max_examples=12)
@given(data=st.data())
def test_inplace_activations_match_out_of_place_values_and_gradients(device, data):
    """Dense, on a view (the general recipe) and with a negative slope (the result's sign no
    longer says where the input was positive): values and gradients as out of place."""
    shape = data.draw(st.tuples(st.integers(1, 4), st.integers(1, 5)), label="shape")
    name = data.draw(st.sampled_from(["relu", "leaky_relu"]), label="name")
    slope = data.draw(st.sampled_from([0.0, 0.2, -0.5, 1.5]), label="slope")
    layout = data.draw(st.sampled_from(["dense", "row", "transposed"]), label="layout")
    x0 = np.random.default_rng(data.draw(st.integers(0, 2**16))).standard_normal(shape)
    x0[0, 0] = 0.0  # the kink: the gradient there is 0 (relu) or the slope, as in PyTorch
    results = {}
    for inplace in (False, True):
        x = mg.tensor(x0.astype(np.float32), requires_grad=True, device=device)
        h = x * 3
        target = {"dense": h, "row": h[0], "transposed": h.t()}[layout]
        out = _activate(name, slope, inplace)(target)
        if inplace:
            assert out is target and target._version == 1
        (out * out).sum().backward()
        results[inplace] = (host(out), host(x.grad))
    for got, want in zip(results[True], results[False]):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_relu_saves_its_result_in_the_input_buffer(device):
    """Conv -> BatchNorm -> ReLU(inplace=True): the ReLU node keeps the buffer it wrote over,
    no second activation; its backward reads it and gives the out-of-place gradients."""
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    grads = {}
    for inplace in (False, True):
        mg.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4),
                              nn.ReLU(inplace=inplace)).to(device)
        x = mg.tensor(x0, device=device, requires_grad=True)
        bn_out = model[1](model[0](x))
        out = model[2](bn_out)
        assert (out is bn_out) == inplace
        if inplace:
            saved, = out.grad_fn.saved_tensors
            assert saved._buf is out._buf and out.grad_fn.name() == "ReluBackward"
        out.sum().backward()
        grads[inplace] = [host(x.grad)] + [host(p.grad) for p in model.parameters()]
    for got, want in zip(grads[True], grads[False]):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_inplace_relu_rules_as_pytorch():
    x = mg.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(LEAF)):
        x.relu_()
    y = x.exp()  # saves its output, which relu_ then changes
    mg.relu_(y)
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()
    with mg.no_grad():  # not recorded: a plain write
        z = x * 1
        assert nn.functional.relu_(z) is z and z.grad_fn is None
    ints = mg.tensor([-2, 0, 3])
    assert ints.relu_().tolist() == [0, 0, 3] and ints.dtype == mg.int64


# --- add_ / sub_ of a scaled tensor in one pass (hand-written SGD) --------------------------------
@pytest.mark.parametrize("device", DEVICES)
@settings(deadline=None, max_examples=10)
@given(n=st.integers(1, 300), alpha=st.sampled_from([1, -1, 2, 0.5, -0.1, 1e-3]),
       dtype=st.sampled_from([np.float32, np.float64]), subtract=st.booleans(),
       seed=st.integers(0, 2**16))
def test_scaled_add_in_place_equals_the_composed_update(device, n, alpha, dtype, subtract,
                                                        seed):
    """``p.data.add_(p.grad, alpha=-lr)`` (and sub_) runs as one fused pass: the values of
    ``p + grad * alpha`` computed out of place, the version bumped, through a leaf's ``.data``."""
    rng = np.random.default_rng(seed)
    p0, g0 = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    p = mg.tensor(p0, device=device, requires_grad=True)
    g = mg.tensor(g0, device=device)
    with mg.no_grad():
        want = host(p - g * alpha) if subtract else host(p + g * alpha)
    data = p.data
    out = data.sub_(g, alpha=alpha) if subtract else data.add_(g, alpha=alpha)
    assert out is data and data._version == 1  # .data has its own counter, as in PyTorch
    if device == "cpu":
        np.testing.assert_array_equal(host(p), want)
    else:  # a GPU may contract the kernel's multiply-add into one FMA: one rounding less
        np.testing.assert_allclose(host(p), want, rtol=1e-6, atol=1e-7)


def test_scaled_add_keeps_the_recorded_and_broadcast_cases_on_the_recipe():
    x = mg.randn(3, requires_grad=True)
    y = x * 2
    y.add_(mg.ones(3), alpha=3)  # recorded: a new grad_fn, gradients through it
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 2])
    z = mg.zeros(2, 3)
    z.add_(mg.tensor([1.0, 2.0, 3.0]), alpha=2)  # broadcast: the general recipe
    np.testing.assert_array_equal(z.numpy(), [[2, 4, 6], [2, 4, 6]])
    i = mg.tensor([1, 2])
    i.add_(mg.tensor([3, 4]), alpha=2)  # integers: the general recipe
    assert i.tolist() == [7, 10]
    w = mg.ones(4)
    w.add_(w, alpha=0.5)  # the same buffer on both sides
    np.testing.assert_array_equal(w.numpy(), [1.5] * 4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("recorded", [False, True])
def test_inplace_activation_maps_a_block_at_a_time(monkeypatch, device, recorded):
    """Blocks of 3 elements over 2x7 (the last one short): the values and gradients of the
    activation in one piece."""
    from minigpu.ops import inplace
    x0 = np.random.default_rng(3).standard_normal((2, 7)).astype(np.float32)
    results = []
    for block in (1 << 20, 3):
        monkeypatch.setattr(inplace, "ACTIVATION_BLOCK", block)
        x = mg.tensor(x0, device=device, requires_grad=recorded)
        h = x * 2 if recorded else mg.tensor(x0 * 2, device=device)
        out = nn.functional.leaky_relu(h, 0.1, inplace=True)
        assert out is h and h._version == 1
        if recorded:
            (out * out).sum().backward()
        results.append((host(out), host(x.grad) if recorded else None))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    if recorded:
        np.testing.assert_array_equal(results[1][1], results[0][1])
