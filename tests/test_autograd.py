"""Gradcheck (central differences, float64, cpu) for every differentiable tensor op, and the
autograd engine's contract: accumulation, reused nodes, no_grad, detach, errors."""
import numpy as np
import pytest

import minigpu as mg
from minigpu.autograd import gradcheck

rng = np.random.default_rng(0)


def leaf(*shape, positive=False):
    values = rng.standard_normal(shape)
    if positive:
        values = np.abs(values) + 0.5
    return mg.tensor(values, dtype=mg.float64, requires_grad=True)


CASES = {
    "add_broadcast": (lambda a, b: a + b, [(2, 3), (3,)]),
    "sub_broadcast": (lambda a, b: a - b, [(2, 1), (1, 3)]),
    "mul_broadcast": (lambda a, b: a * b, [(2, 3), (2, 1)]),
    "div": (lambda a, b: a / b, [(2, 3), "pos(3,)"]),
    "pow_tensor": (lambda a, b: a ** b, ["pos(2, 3)", (2, 3)]),
    "scalar_ops": (lambda a: 3 - 2 * a / 4 + 1, [(2, 3)]),
    "rdiv": (lambda a: 2 / a, ["pos(4,)"]),
    "pow_scalar": (lambda a: a ** 3, [(4,)]),
    "rpow": (lambda a: 2 ** a, [(4,)]),
    "neg": (lambda a: -a, [(4,)]),
    "exp": (lambda a: a.exp(), [(2, 3)]),
    "log": (lambda a: a.log(), ["pos(2, 3)"]),
    "sqrt": (lambda a: a.sqrt(), ["pos(2, 3)"]),
    "tanh": (lambda a: a.tanh(), [(2, 3)]),
    "sigmoid": (lambda a: a.sigmoid(), [(2, 3)]),
    "relu": (lambda a: a.relu(), [(2, 3)]),
    "leaky_relu": (lambda a: mg.nn.functional.leaky_relu(a, 0.2), [(2, 3)]),
    "abs": (lambda a: a.abs(), [(2, 3)]),
    "clamp": (lambda a: a.clamp(-0.5, 0.5), [(3, 4)]),
    "maximum": (lambda a, b: mg.maximum(a, b), [(3, 4), (4,)]),
    "where": (lambda a, b: mg.where(a > 0, a, b), [(3, 4), (3, 4)]),
    "sum_dims": (lambda a: a.sum((0, 2), keepdim=True), [(2, 3, 4)]),
    "mean": (lambda a: a.mean(1), [(2, 3, 4)]),
    "max_all": (lambda a: a.max(), [(3, 4)]),
    "max_dim": (lambda a: a.max(1).values, [(3, 4)]),
    "min_dim_keepdim": (lambda a: a.min(0, keepdim=True)[0], [(3, 4)]),
    "var_std": (lambda a: a.var(1) + a.std(), [(3, 4)]),
    "matmul_2d": (lambda a, b: a @ b, [(2, 3), (3, 4)]),
    "matmul_batched_broadcast": (lambda a, b: a @ b, [(2, 1, 3, 4), (3, 4, 2)]),
    "matmul_vec": (lambda a, b: a @ b, [(3,), (3, 2)]),
    "matmul_transposed": (lambda a, b: a @ b.T, [(2, 3), (4, 3)]),
    "matmul_shared_right_strided": (lambda a, b: a.transpose(0, 1) @ b, [(3, 2, 4), (4, 5)]),
    "softmax": (lambda a: a.softmax(-1), [(2, 5)]),
    "softmax_dim0": (lambda a: mg.softmax(a, 0), [(3, 2, 2)]),
    "log_softmax": (lambda a: a.log_softmax(1), [(2, 4, 2)]),
    "views": (lambda a: a.permute(2, 0, 1).reshape(4, 6).T.flatten(), [(2, 3, 4)]),
    "slice_steps": (lambda a: a[1:, ::2, None, -1], [(3, 5, 2)]),
    "expand": (lambda a: a.expand(2, 3, 4) * 1.5, [(3, 1)]),
    "squeeze_unsqueeze": (lambda a: a.unsqueeze(0).squeeze(2), [(3, 1, 2)]),
    "cat": (lambda a, b: mg.cat([a, b], 1), [(2, 3), (2, 1)]),
    "stack": (lambda a, b: mg.stack([a, b], 2), [(2, 3), (2, 3)]),
    "split_chunk": (lambda a: a.chunk(2, 1)[1] * a.split(1, 0)[0][:, :2], [(2, 4)]),
    "index_select": (lambda a: a.index_select(0, mg.tensor([2, 0, 2])), [(3, 4)]),
    "getitem_tensor": (lambda a: a[mg.tensor([1, 1])], [(3, 2)]),
    "repeat": (lambda a: a.repeat(2, 3), [(2, 2)]),
    "clone_of_view": (lambda a: a.T.clone() * a.T, [(2, 3)]),
    "linear_addmm": (lambda x, w, b: mg.nn.functional.linear(x, w, b), [(3, 4), (2, 4), (2,)]),
    "linear_addmm_strided": (lambda x, w, b: mg.nn.functional.linear(x.T, w.T, b[::2]),
                             [(4, 3), (4, 2), (4,)]),
    "linear_batched": (lambda x, w, b: mg.nn.functional.linear(x, w, b), [(2, 3, 4), (2, 4), (2,)]),
    "linear_no_bias": (lambda x, w: mg.nn.functional.linear(x, w), [(3, 4), (2, 4)]),
}


def _inputs(specs):
    out = []
    for s in specs:
        if isinstance(s, str):
            out.append(leaf(*eval(s[3:]), positive=True))
        else:
            out.append(leaf(*s))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    fn, specs = CASES[name]
    assert gradcheck(fn, _inputs(specs))


def test_cast_backward_returns_the_source_dtype():
    x = leaf(3)
    y = x.float() * 2
    assert y.dtype == mg.float32
    y.sum().backward()
    assert x.grad.dtype == mg.float64
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 2.0))


def test_gradcheck_catches_a_wrong_backward():
    class BadSquare(mg.Function):
        def forward(self, x):
            self.save_for_backward(x)
            return x * x

        def backward(self, g):
            return g * self.saved_tensors[0]  # should be 2 * x * g

    with pytest.raises(AssertionError, match="gradient mismatch"):
        gradcheck(lambda x: BadSquare.apply(x), [leaf(3)])


def test_reused_node_gets_both_contributions():
    x = leaf(2, 2)
    y = x * x
    (y + y * x).sum().backward()
    v = x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), 2 * v + 3 * v ** 2, rtol=1e-12)


def test_grad_accumulates_across_backward_calls():
    x = leaf(3)
    (x * 2).sum().backward()
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.full(3, 5.0))


def test_non_scalar_backward_needs_gradient():
    x = leaf(2, 3)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        (x * 2).backward()
    (x * 2).backward(mg.ones(2, 3, dtype=mg.float64))
    np.testing.assert_allclose(x.grad.numpy(), np.full((2, 3), 2.0))


def test_backward_twice_without_retain_graph_fails():
    x = leaf(3)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_no_grad_and_detach_cut_the_graph():
    x = leaf(3)
    with mg.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    z = x.detach() * 2
    assert not z.requires_grad
    assert (x * 2).requires_grad


def test_no_grad_as_decorator():
    @mg.no_grad()
    def f(t):
        return t * 2

    assert not f(leaf(2)).requires_grad


def test_non_leaf_grad_is_not_kept_unless_retained():
    x = leaf(3)
    y = x * 2
    y.retain_grad()
    w = x * 3
    (y * w).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), w.detach().numpy())
    assert w.grad is None


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating point"):
        mg.tensor([1, 2]).requires_grad_()


@pytest.mark.parametrize("op", ["relu", "exp", "tanh", "sigmoid", "sqrt"])
def test_a_node_does_not_keep_its_own_output_alive(op):
    """Ops that save their output for backward (relu, exp, ...) keep a detached alias of it,
    not the output itself: without backward, dropping the output frees it (and its memory)
    at once, with no garbage collection; with backward, the gradient is unchanged."""
    import gc
    import weakref

    x = mg.tensor(np.abs(rng.standard_normal((3, 4))) + 0.5, requires_grad=True)
    enabled = gc.isenabled()
    gc.disable()
    try:
        y = getattr(x, op)()
        ref = weakref.ref(y)
        del y
        assert ref() is None
    finally:
        if enabled:
            gc.enable()
    loss = getattr(x, op)().sum()  # the output is gone, its node's alias still serves backward
    loss.backward()
    assert gradcheck(lambda t: getattr(t, op)(), [x.detach().requires_grad_()])
    want = {"relu": np.ones((3, 4)), "exp": np.exp(x.detach().numpy()),
            "tanh": 1 - np.tanh(x.detach().numpy()) ** 2,
            "sigmoid": (s := 1 / (1 + np.exp(-x.detach().numpy()))) * (1 - s),
            "sqrt": 0.5 / np.sqrt(x.detach().numpy())}[op]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)


def test_a_node_does_not_keep_an_intermediate_input_alive():
    """The walk needs a non-leaf input's shape only: an activation that no node saves is freed
    after the forward pass (PyTorch's memory behaviour), and backward is unchanged."""
    import weakref
    x = mg.tensor(np.arange(6.0), requires_grad=True)
    h = x * 2.0 + 1.0  # saved by nobody: add and the affine map need only shapes
    buffer = weakref.ref(h._buf)
    out = (h + x).sum()
    del h
    assert buffer() is None
    out.backward()
    assert x.grad.tolist() == [3.0] * 6


# --- a leaf takes its gradient without a copy when nothing else holds it --------------------------
def _shares(a, b):
    return np.shares_memory(a.detach().numpy(), b.detach().numpy())


def test_a_gradient_nothing_else_holds_becomes_grad_without_a_copy(monkeypatch):
    from minigpu.autograd import engine
    verdicts = []
    stealable = engine._stealable
    monkeypatch.setattr(engine, "_stealable",
                        lambda box, leaf: verdicts.append(stealable(box, leaf)) or verdicts[-1])
    model = mg.nn.Linear(4, 3)
    x = mg.randn(5, 4)
    model(x).pow(2).sum().backward()
    assert verdicts == [True, True]  # weight and bias
    w_grad = model.weight.grad.numpy().copy()
    model(x).pow(2).sum().backward()  # accumulates into the taken buffer
    np.testing.assert_allclose(model.weight.grad.numpy(), 2 * w_grad, rtol=1e-6)


def test_a_gradient_held_elsewhere_is_copied():
    a, b = mg.randn(3, requires_grad=True), mg.randn(3, requires_grad=True)
    (a + b).backward(mg.ones(3))  # the same gradient object for both leaves, and the caller's
    assert not _shares(a.grad, b.grad)
    root = mg.ones(3)
    c = mg.randn(3, requires_grad=True)
    (c + 0).backward(root)
    assert not _shares(c.grad, root)

    stash = []

    class KeepsItsGradient(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            out = g * 2
            stash.append(out)
            return out

    d = mg.randn(3, requires_grad=True)
    KeepsItsGradient.apply(d).sum().backward()
    assert not _shares(d.grad, stash[0])
    d.grad.add_(1)  # an optimizer's in-place update leaves what the Function kept alone
    np.testing.assert_array_equal(stash[0].numpy(), [2, 2, 2])

    kept = []
    e = mg.randn(3, requires_grad=True)
    e.register_hook(lambda g: kept.append(g))
    (e * 3).sum().backward()
    assert not _shares(e.grad, kept[0])
