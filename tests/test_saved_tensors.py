"""What a node saves for backward, as PyTorch saves it: a second backward after an optimizer
step raises the in-place error exactly where torch raises it (each module checked against
torch itself where the parity extra is installed)."""
import pytest

import minigpu as mg

torch = pytest.importorskip("torch")


def _second_backward_after_step(lib, make, make_input, device=None):
    lib.manual_seed(0)
    module = make(lib)
    if device:
        module = module.to(device)
    opt = lib.optim.SGD(module.parameters(), lr=0.1)
    x = make_input(lib) if device is None else make_input(lib).to(device)
    out = module(x)
    out = out[0] if isinstance(out, tuple) else out
    loss = (out * out).sum()
    loss.backward(retain_graph=True)
    opt.step()
    try:
        (loss * 2).backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return "error"
    return "ok"


MODULES = {
    "linear": (lambda L: L.nn.Linear(3, 2), lambda L: L.randn(4, 3)),
    "linear_no_bias": (lambda L: L.nn.Linear(3, 2, bias=False), lambda L: L.randn(4, 3)),
    "linear_batched": (lambda L: L.nn.Linear(3, 2), lambda L: L.randn(2, 4, 3)),
    "two_linears": (lambda L: L.nn.Sequential(L.nn.Linear(3, 4), L.nn.Linear(4, 2)),
                    lambda L: L.randn(4, 3)),
    "conv2d": (lambda L: L.nn.Conv2d(1, 2, 3), lambda L: L.randn(1, 1, 5, 5)),
    "batchnorm": (lambda L: L.nn.BatchNorm1d(3), lambda L: L.randn(4, 3)),
    "embedding": (lambda L: L.nn.Embedding(5, 3), lambda L: L.tensor([1, 2])),
}


@pytest.mark.parametrize("name", sorted(MODULES))
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_second_backward_after_a_step_matches_torch(name, device):
    make, make_input = MODULES[name]
    expected = _second_backward_after_step(torch, make, make_input)
    assert _second_backward_after_step(mg, make, make_input, device) == expected


def test_the_gradient_of_the_second_backward_is_still_right():
    x = mg.randn(4, 3, dtype=mg.float64)
    w = mg.randn(2, 3, dtype=mg.float64, requires_grad=True)
    loss = (x @ w.T).sum()
    loss.backward(retain_graph=True)
    first = w.grad.clone()
    with mg.no_grad():
        w.add_(1.0)  # the gradient of a linear map in w does not depend on w
    loss.backward()
    assert mg.allclose(w.grad, 2 * first)
