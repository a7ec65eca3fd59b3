"""``multinomial`` (its distribution: torch's own draws come from another generator),
``roll`` and ``clamp`` with tensor bounds against torch, on both devices, with gradients."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigpu as mg

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "cuda"]


@pytest.mark.parametrize("device", DEVICES)
def test_multinomial_with_replacement_follows_the_weights(device):
    """1500 draws of unnormalised weights: each frequency within 4 standard deviations of its
    probability, a zero weight never drawn; the same seed, the same draws on both devices."""
    weights = np.array([1.0, 0.0, 2.0, 5.0, 0.5])
    p = weights / weights.sum()
    mg.manual_seed(3)
    draws = mg.multinomial(mg.tensor(weights, device=device), 1500, replacement=True)
    assert draws.dtype == mg.int64 and draws.shape == (1500,) and draws.device == device
    counts = np.bincount(draws.numpy(), minlength=5) / 1500
    assert counts[1] == 0
    np.testing.assert_array_less(np.abs(counts - p), 4 * np.sqrt(p * (1 - p) / 1500) + 1e-12)
    mg.manual_seed(3)
    other = mg.multinomial(mg.tensor(weights, device="cuda" if device == "cpu" else "cpu"),
                           1500, replacement=True)
    np.testing.assert_array_equal(other.numpy(), draws.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_multinomial_without_replacement(device):
    """No index twice in a row; the first draw follows the weights (600 rows); zero weights
    come last."""
    weights = np.array([4.0, 1.0, 0.0, 3.0])
    rows = mg.tensor(np.tile(weights, (600, 1)), device=device)
    mg.manual_seed(5)
    draws = mg.multinomial(rows, 4).numpy()
    assert all(sorted(r) == [0, 1, 2, 3] for r in draws)
    assert (draws[:, 3] == 2).all()
    first = np.bincount(draws[:, 0], minlength=4) / 600
    p = weights / weights.sum()
    np.testing.assert_array_less(np.abs(first - p), 4 * np.sqrt(p * (1 - p) / 600) + 1e-12)
    g = mg.Generator().manual_seed(1)
    a = mg.multinomial(rows[:4], 2, generator=g)
    g.manual_seed(1)
    np.testing.assert_array_equal(mg.multinomial(rows[:4], 2, generator=g).numpy(), a.numpy())


@pytest.mark.parametrize("args, message", [
    (([0.0, 0.0], 1), r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
    (([1.0, 2.0], 3), r"cannot sample n_sample > prob_dist.size\(-1\) samples without "
                      r"replacement"),
    (([1.0, -1.0], 1), "probability tensor contains either `inf`, `nan` or element < 0"),
    (([1.0, float("nan")], 1), "probability tensor contains either `inf`, `nan` or element"),
    (([1.0, 2.0], 0), "cannot sample n_sample <= 0 samples"),
])
def test_multinomial_errors_as_torch(args, message):
    values, n = args
    with pytest.raises(RuntimeError, match=message):
        torch.multinomial(torch.tensor(values), n)
    with pytest.raises(RuntimeError, match=message):
        mg.multinomial(mg.tensor(values), n)
    with pytest.raises(RuntimeError, match="prob_dist must be 1 or 2 dim"):
        mg.multinomial(mg.ones(2, 2, 2), 1)


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=15)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3),
       data=st.data())
def test_roll_matches_torch(device, shape, data):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    if data.draw(st.booleans()):
        shifts, dims = data.draw(st.integers(-7, 7)), None
    else:
        dims = tuple(data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1,
                                        max_size=3)))
        shifts = tuple(data.draw(st.integers(-7, 7)) for _ in dims)
    got = mg.roll(mg.tensor(a, device=device), shifts, dims)
    np.testing.assert_array_equal(got.numpy(), torch.roll(torch.from_numpy(a), shifts,
                                                          dims).numpy())


def test_roll_gradient_and_errors():
    x = mg.tensor(np.random.default_rng(0).normal(size=(3, 4)), dtype=mg.float64,
                  requires_grad=True)
    assert mg.autograd.gradcheck(lambda t: t.roll((1, -2), (0, 1)) * mg.arange(12.0).reshape(
        3, 4).double(), [x])
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        mg.roll(x, (1, 2), (0,))


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=10)
@given(data=st.data())
def test_clamp_with_tensor_bounds_matches_torch(device, data):
    """Values and the gradients of x and both bounds, bounds broadcasting, NaN and crossed
    bounds (min > max) included."""
    shape = (3, 4)
    pick = st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 2.0, float("nan")])
    x, lo, hi = (np.array(data.draw(st.lists(pick, min_size=n, max_size=n)), np.float32)
                 .reshape(s) for n, s in ((12, shape), (4, (4,)), (12, shape)))
    kinds = data.draw(st.sampled_from(["both", "min", "max"]))
    bounds = {"min": lo, "max": hi} if kinds == "both" else {kinds: lo if kinds == "min" else hi}
    tx = torch.tensor(x, requires_grad=True)
    tb = {k: torch.tensor(v, requires_grad=True) for k, v in bounds.items()}
    want = tx.clamp(**tb)
    want.backward(torch.arange(12.0).reshape(shape))
    mx = mg.tensor(x, device=device, requires_grad=True)
    mb = {k: mg.tensor(v, device=device, requires_grad=True) for k, v in bounds.items()}
    got = mx.clamp(**mb)
    got.backward(mg.arange(12.0, device=device).reshape(shape))
    np.testing.assert_array_equal(got.detach().numpy(), want.detach().numpy())
    np.testing.assert_array_equal(mx.grad.numpy(), tx.grad.numpy())
    for k in bounds:
        np.testing.assert_array_equal(mb[k].grad.numpy(), tb[k].grad.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_in_place_and_clip_with_tensor_bounds(device):
    x = mg.tensor([-3.0, 0.5, 3.0], device=device)
    lo, hi = mg.tensor([-1.0, 1.0, -1.0], device=device), mg.tensor(2.0, device=device)
    np.testing.assert_array_equal(mg.clip(x, lo, hi).numpy(), [-1.0, 1.0, 2.0])
    x.clamp_(min=lo, max=hi)
    np.testing.assert_array_equal(x.numpy(), [-1.0, 1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"doesn't match the broadcast shape \[2, 3\]"):
        mg.zeros(3, device=device).clamp_(min=mg.zeros(2, 3, device=device))
    assert mg.clamp(mg.tensor([1, 5]), min=mg.tensor([2.0, 2.0])).dtype == mg.float32
