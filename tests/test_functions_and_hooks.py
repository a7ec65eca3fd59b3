"""PyTorch-style custom Functions (staticmethods, ctx) and hooks on tensors and modules,
checked against PyTorch's documented behaviour with NumPy references, on cpu and cuda."""
import re

import numpy as np
import pytest

import minigpu as mg
import minigpu.nn as nn
from minigpu.autograd import Function, gradcheck

DEVICES = ["cpu", "cuda"]


def host(t):
    return t.detach().cpu().numpy()


class ScaledExp(Function):
    """y = scale * exp(x), PyTorch's staticmethod form, with a non-tensor argument."""

    @staticmethod
    def forward(ctx, x, scale):
        y = x.exp() * scale
        ctx.save_for_backward(y)
        ctx.seen_needs = ctx.needs_input_grad
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * y, None


class MulAdd(Function):
    """(a * b + c, a - b): two outputs, and needs_input_grad used to skip work."""

    @staticmethod
    def forward(ctx, a, b, c):
        ctx.save_for_backward(a, b)
        return a * b + c, a - b

    @staticmethod
    def backward(ctx, g1, g2):  # an unused output's gradient arrives as zeros, as in PyTorch
        a, b = ctx.saved_tensors
        return (g1 * b + g2 if ctx.needs_input_grad[0] else None,
                g1 * a - g2 if ctx.needs_input_grad[1] else None,
                g1 if ctx.needs_input_grad[2] else None)


@pytest.mark.parametrize("device", DEVICES)
def test_staticmethod_function_matches_numpy(device):
    xv = np.array([0.5, -1.0, 2.0], np.float32)
    x = mg.tensor(xv, device=device, requires_grad=True)
    y = ScaledExp.apply(x, 3.0)
    assert y.grad_fn.name() == "ScaledExpBackward" and y.grad_fn.seen_needs == (True, False)
    assert not ScaledExp.apply(x.detach(), 3.0).requires_grad
    y.sum().backward()
    np.testing.assert_allclose(host(y), 3 * np.exp(xv), rtol=1e-6)
    np.testing.assert_allclose(host(x.grad), 3 * np.exp(xv), rtol=1e-6)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second "
                                           "time"):
        y.grad_fn.saved_tensors  # freed by backward, as in PyTorch


def test_staticmethod_functions_pass_gradcheck():
    rng = np.random.default_rng(0)
    leaves = [mg.tensor(rng.normal(size=(2, 3)), dtype=mg.float64, requires_grad=True)
              for _ in range(3)]
    assert gradcheck(lambda x: ScaledExp.apply(x, 0.5), leaves[:1])
    assert gradcheck(lambda a, b, c: MulAdd.apply(a, b, c), leaves)
    c = mg.tensor(rng.normal(size=(2, 3)))  # no grad: backward must not be asked for it
    assert gradcheck(lambda a, b: MulAdd.apply(a, b, c)[0], leaves[:2])


def test_unused_outputs_get_zero_gradients_unless_materialize_is_off():
    class Split(Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            ctx.seen = g2
            return g1 * 2 + (0 if g2 is None else g2 * 3), None

    x = mg.ones(2, requires_grad=True)
    first, _ = Split.apply(x, True)
    first.sum().backward()
    assert host(first.grad_fn.seen).tolist() == [0, 0] and host(x.grad).tolist() == [2, 2]
    first, _ = Split.apply(x, False)
    first.sum().backward()
    assert first.grad_fn.seen is None


def test_backward_arity_is_checked_like_pytorch():
    class TooFew(Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return g

    class TooMany(TooFew):
        @staticmethod
        def backward(ctx, g):
            return g, g, g

    class ExtraNones(TooFew):
        @staticmethod
        def backward(ctx, g):
            return g, g, None, None

    a, b = mg.ones(2, requires_grad=True), mg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(
            "function TooFewBackward returned an incorrect number of gradients (expected 2, "
            "got 1)")):
        TooFew.apply(a, b).sum().backward()
    with pytest.raises(RuntimeError, match=re.escape("(expected 2, got 3)")):
        TooMany.apply(a, b).sum().backward()
    ExtraNones.apply(a, b).sum().backward()  # trailing Nones are dropped, as in PyTorch
    assert host(a.grad).tolist() == [1, 1]


def test_saved_tensors_are_version_checked_and_mark_dirty_bumps():
    x = mg.randn(3, requires_grad=True)
    y = ScaledExp.apply(x, 2.0)
    y.mul_(2)
    with pytest.raises(RuntimeError, match=re.escape(
            "which is output 0 of ScaledExpBackward, is at version 1; expected version 0")):
        y.sum().backward()

    class AddOneInPlace(Function):
        @staticmethod
        def forward(ctx, t):
            t.add_(1)
            ctx.mark_dirty(t)
            return t

        @staticmethod
        def backward(ctx, g):
            return g

    h = x * 2
    out = AddOneInPlace.apply(h)
    assert out is h and h._version == 1 and h.grad_fn.name() == "AddOneInPlaceBackward"
    x.grad = None
    (h * h).sum().backward()
    np.testing.assert_allclose(host(x.grad), 4 * (2 * host(x) + 1), rtol=1e-6)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        AddOneInPlace.apply(mg.zeros(2, requires_grad=True))


def test_forward_returning_an_input_gives_a_new_tensor():
    class Identity(Function):
        @staticmethod
        def forward(ctx, t):
            return t

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = mg.ones(2, requires_grad=True)
    y = Identity.apply(x)
    assert y is not x and x.is_leaf and y._version_counter is x._version_counter
    y.sum().backward()
    assert host(x.grad).tolist() == [2, 2]


# --- tensor hooks -------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_tensor_hooks_see_and_replace_gradients(device):
    x = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    seen = []
    h_leaf = x.register_hook(lambda g: g * 10)
    y = x * x
    h_mid = y.register_hook(lambda g: seen.append(host(g)))
    y.register_hook(lambda g: g + 1)
    z = y * 2 + y  # two uses of y: its hooks see the summed gradient, once
    z.sum().backward()
    np.testing.assert_allclose(seen[0], [3, 3, 3])
    np.testing.assert_allclose(host(x.grad), 10 * 4 * 2 * np.array([1, 2, 3]))
    h_leaf.remove()
    h_mid.remove()
    x.grad = None
    (x * x * 3).sum().backward()
    np.testing.assert_allclose(host(x.grad), 6 * np.array([1, 2, 3]))
    assert len(seen) == 1
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't "
                                           "require gradient"):
        mg.ones(2).register_hook(print)


def test_retain_grad_sees_the_hooked_gradient():
    x = mg.ones(2, requires_grad=True)
    y = x * 3
    y.retain_grad()
    y.register_hook(lambda g: g * 2)
    y.sum().backward()
    assert host(y.grad).tolist() == [2, 2] and host(x.grad).tolist() == [6, 6]


# --- module hooks ------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_module_forward_hooks_look_at_and_replace_activations(device):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to(device)
    acts = {}
    handles = [m.register_forward_hook(lambda m, args, out, name=name: acts.update(
        {name: host(out)})) for name, m in model.named_children()]
    x = mg.randn(5, 3, device=device)
    out = model(x)
    assert set(acts) == {"0", "1", "2"} and (acts["1"] >= 0).all()
    np.testing.assert_allclose(acts["2"], host(out))
    pre = model[2].register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = model[2].register_forward_hook(lambda m, args, out: out + 1)
    np.testing.assert_allclose(host(model(x)), np.tile(host(model[2].bias) + 1, (5, 1)),
                               rtol=1e-6)
    for h in handles + [pre, post]:
        h.remove()
    acts.clear()
    np.testing.assert_allclose(host(model(x)), host(out))
    assert not acts


@pytest.mark.parametrize("device", DEVICES)
def test_full_backward_hook_sees_grad_input_and_grad_output(device):
    mg.manual_seed(0)
    lin = nn.Linear(3, 2).to(device)
    calls = []

    def hook(module, grad_input, grad_output):
        calls.append((module, [None if g is None else host(g) for g in grad_input],
                      [host(g) for g in grad_output]))

    handle = lin.register_full_backward_hook(hook)
    x = mg.randn(4, 3, device=device, requires_grad=True)
    lin(x).pow(2).sum().backward()
    module, grad_input, grad_output = calls[0]
    y = host(x) @ host(lin.weight).T + host(lin.bias)
    assert module is lin and len(calls) == 1
    np.testing.assert_allclose(grad_output[0], 2 * y, rtol=1e-5)
    np.testing.assert_allclose(grad_input[0], 2 * y @ host(lin.weight), rtol=1e-5)
    lin(mg.randn(4, 3, device=device)).sum().backward()  # input needs no grad
    assert calls[1][1] == [None]

    handle.remove()
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    x.grad = None
    lin(x).sum().backward()
    assert np.count_nonzero(host(x.grad)) == 0 and len(calls) == 2
