"""L1Loss, SmoothL1Loss, HuberLoss, KLDivLoss: values against NumPy transcriptions
of PyTorch's formulas for every reduction, float64 gradcheck in both arguments, cuda against
cpu (float32: rtol 1e-4, atol 1e-5), PyTorch's warnings and errors; ModuleDict; F.embedding."""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn.functional as F
from minigpu import nn
from minigpu.autograd import gradcheck


def np_reduce(loss, reduction, batch=None):
    if reduction == "batchmean":
        return loss.sum() / batch
    return {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction](loss)


def np_smooth_l1(d, beta):
    z = np.abs(d)
    return np.where(z < beta, 0.5 * d * d / beta, z - 0.5 * beta) if beta else z


def np_huber(d, delta):
    z = np.abs(d)
    return np.where(z < delta, 0.5 * d * d, delta * (z - 0.5 * delta))


def np_kl(x, t, log_target):
    if log_target:
        return np.exp(t) * (t - x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(t == 0, 0.0, t * np.log(np.where(t == 0, 1.0, t))) - t * x


REGRESSION = [
    ("L1Loss", {}, lambda d: np.abs(d)),
    ("SmoothL1Loss", {}, lambda d: np_smooth_l1(d, 1.0)),
    ("SmoothL1Loss", {"beta": 0.5}, lambda d: np_smooth_l1(d, 0.5)),
    ("SmoothL1Loss", {"beta": 0.0}, lambda d: np_smooth_l1(d, 0.0)),
    ("HuberLoss", {}, lambda d: np_huber(d, 1.0)),
    ("HuberLoss", {"delta": 0.3}, lambda d: np_huber(d, 0.3)),
]


def pairs(shape, seed):
    """Input and target whose differences straddle the thresholds but never sit on a kink."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, shape)
    t = rng.uniform(-2, 2, shape)
    gap = np.abs(np.abs(x - t)[..., None] - np.array([0.0, 0.3, 0.5, 1.0])).min(-1)
    return np.where(gap < 0.01, x + 0.05, x), t


@pytest.mark.parametrize("name,kwargs,ref", REGRESSION,
                         ids=[f"{n}{kw}" for n, kw, _ in REGRESSION])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses_values_grads_and_cuda(name, kwargs, ref, reduction):
    x, t = pairs((4, 5), 0)
    loss = getattr(nn, name)(reduction=reduction, **kwargs)
    got = loss(mg.tensor(x, dtype=mg.float64), mg.tensor(t, dtype=mg.float64))
    np.testing.assert_allclose(got.numpy(), np_reduce(ref(x - t), reduction), rtol=1e-12)
    fn = getattr(F, {"L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss",
                     "HuberLoss": "huber_loss"}[name])
    assert gradcheck(lambda a, b: fn(a, b, reduction=reduction, **kwargs),
                     [mg.tensor(x, dtype=mg.float64, requires_grad=True),
                      mg.tensor(t, dtype=mg.float64, requires_grad=True)])
    x32, t32 = x.astype(np.float32), t.astype(np.float32)
    outs = {}
    for device in ("cpu", "cuda"):
        xi = mg.tensor(x32, device=device, requires_grad=True)
        out = loss(xi, mg.tensor(t32, device=device))
        out.sum().backward()
        outs[device] = (out.detach().numpy(), xi.grad.numpy())
    for a, b in zip(outs["cuda"], outs["cpu"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@given(st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**16),
       st.sampled_from(["mean", "sum", "none", "batchmean"]), st.booleans())
def test_kl_div_values_and_gradients(n, c, seed, reduction, log_target):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, c))
    x = logits - np.log(np.exp(logits).sum(1, keepdims=True))          # log-probabilities
    p = rng.dirichlet(np.ones(c), n)
    t = np.log(p) if log_target else p
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 'mean' warns, as PyTorch does
        got = F.kl_div(mg.tensor(x, dtype=mg.float64), mg.tensor(t, dtype=mg.float64),
                       reduction=reduction, log_target=log_target)
        np.testing.assert_allclose(got.numpy(), np_reduce(np_kl(x, t, log_target), reduction,
                                                          n), rtol=1e-10, atol=1e-12)
        assert gradcheck(lambda a, b: F.kl_div(a, b, reduction=reduction,
                                               log_target=log_target),
                         [mg.tensor(x, dtype=mg.float64, requires_grad=True),
                          mg.tensor(t, dtype=mg.float64, requires_grad=True)])
        loss = nn.KLDivLoss(reduction=reduction, log_target=log_target)
        outs = [loss(mg.tensor(x.astype(np.float32), device=d),
                     mg.tensor(t.astype(np.float32), device=d)).numpy() for d in ("cpu", "cuda")]
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-5)


def test_kl_div_zero_target_is_zero_not_nan_and_warnings():
    x = mg.tensor([[-0.5, -1.0]], requires_grad=True)
    out = F.kl_div(x, mg.tensor([[0.0, 1.0]]), reduction="sum")
    assert out.item() == pytest.approx(1.0)  # 0*log(0) counts as 0 (xlogy)
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, -1.0]])
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the total loss by both"):
        F.kl_div(x, mg.tensor([[0.5, 0.5]]))
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        F.kl_div(x, x, reduction="bogus")
    with pytest.raises(ValueError, match="batchmean is not a valid value for reduction"):
        F.l1_loss(x, x, reduction="batchmean")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_weighted_l1_and_huber_like_pytorch(reduction):
    """PyTorch 2.13: weighted l1's 'mean' divides by sum(weight), weighted huber's by numel."""
    rng = np.random.default_rng(3)
    x, t = pairs((3, 4), 3)
    w = rng.uniform(0.1, 2, (3, 4))
    for name, terms, mean_div in (("l1_loss", np.abs(x - t), w.sum()),
                                  ("huber_loss", np_huber(x - t, 1.0), w.size)):
        want = terms * w
        want = want.sum() / mean_div if reduction == "mean" else np_reduce(want, reduction)
        args = [mg.tensor(a, dtype=mg.float64, requires_grad=True) for a in (x, t, w)]
        fn = getattr(F, name)
        np.testing.assert_allclose(fn(*args[:2], reduction=reduction, weight=args[2])
                                   .detach().numpy(), want, rtol=1e-12)
        assert gradcheck(lambda a, b, c: fn(a, b, reduction=reduction, weight=c), args)
        with pytest.raises(ValueError, match="Weights and input must have the same size."):
            fn(args[0], args[1], weight=mg.ones(4, dtype=mg.float64))


def test_regression_loss_errors_and_broadcast_warning():
    a = mg.zeros(3)
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values "
                                           "for beta."):
        nn.SmoothL1Loss(beta=-1.0)(a, a)
    with pytest.raises(RuntimeError, match="huber_loss does not support non-positive values "
                                           "for delta."):
        nn.HuberLoss(delta=0.0)(a, a)
    with pytest.warns(UserWarning, match=r"Using a target size \(\(1,\)\) that is different "
                                         r"to the input size \(\(3,\)\)"):
        nn.L1Loss()(a, mg.zeros(1))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        nn.HuberLoss()(a, mg.zeros(3, device="cuda"))
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert nn.L1Loss(size_average=False).reduction == "sum"
    assert nn.L1Loss().state_dict() == {} and nn.KLDivLoss().state_dict() == {}


# --- ModuleDict -----------------------------------------------------------------------------------
def test_module_dict_like_pytorch():
    mg.manual_seed(0)
    d = nn.ModuleDict({"conv": nn.Conv2d(1, 2, 3), "act": nn.ReLU()})
    d["head"] = nn.Linear(2, 1)
    d.update([("norm", nn.BatchNorm2d(2))])
    assert list(d) == ["conv", "act", "head", "norm"] and len(d) == 4 and "act" in d
    assert list(d.state_dict()) == ["conv.weight", "conv.bias", "head.weight", "head.bias",
                                    "norm.weight", "norm.bias", "norm.running_mean",
                                    "norm.running_var", "norm.num_batches_tracked"]
    assert [k for k, _ in d.items()] == list(d.keys())
    assert isinstance(d.pop("act"), nn.ReLU) and "act" not in d
    del d["norm"]
    assert len(list(d.parameters())) == 4

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(3, 1), "b": nn.Linear(3, 2)})

        def forward(self, x, which):
            return self.heads[which](x)

    net = Net().to("cuda")
    assert tuple(net(mg.ones(4, 3, device="cuda"), "b").shape) == (4, 2)
    assert sorted(net.state_dict()) == ["heads.a.bias", "heads.a.weight", "heads.b.bias",
                                        "heads.b.weight"]
    with pytest.raises(TypeError, match="module name should be a string. Got int"):
        d[3] = nn.ReLU()
    with pytest.raises(KeyError, match="module name can.+t contain"):
        d["a.b"] = nn.ReLU()
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        d["x"] = 3
    with pytest.raises(ValueError, match="ModuleDict update sequence element #0 has length 3"):
        d.update([("a", nn.ReLU(), 1)])
    d.clear()
    assert len(d) == 0


# --- F.embedding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_functional_embedding_padding_idx(device):
    w = mg.tensor(np.arange(12.0).reshape(4, 3), device=device, requires_grad=True)
    idx = mg.tensor([[3, 1], [3, 0]], device=device)
    out = F.embedding(idx, w, padding_idx=-1)  # negative: counts from the end, like PyTorch
    np.testing.assert_array_equal(out.detach().numpy()[0, 0], [9, 10, 11])
    out.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [[1] * 3, [1] * 3, [0] * 3, [0] * 3])
    # The padding row's numerical derivative is not zero (it is used), its gradient is by
    # definition; gradcheck checks the other rows are untouched by the padding mask.
    assert gradcheck(lambda t: F.embedding(mg.tensor([[1, 2], [2, 2]]), t, padding_idx=0),
                     [mg.tensor(np.random.default_rng(0).standard_normal((3, 2)),
                                dtype=mg.float64, requires_grad=True)])


@pytest.mark.parametrize("fn,kwargs", [(F.smooth_l1_loss, {"beta": 0.5}),
                                       (F.huber_loss, {"delta": 0.3})])
def test_smooth_l1_and_huber_second_derivative(fn, kwargs):
    """One node with a recorded backward: the gradient of the gradient is the quadratic
    branch's slope where |x - t| is below the threshold and 0 beyond it."""
    x, t = pairs((3, 4), 1)
    target = mg.tensor(t, dtype=mg.float64)

    def first_derivative(a):
        return mg.autograd.grad(fn(a, target, reduction="sum", **kwargs), a,
                                create_graph=True)[0]

    a = mg.tensor(x, dtype=mg.float64, requires_grad=True)
    threshold = kwargs.get("beta", kwargs.get("delta"))
    slope, limit = (1.0 / threshold, 1.0) if fn is F.smooth_l1_loss else (1.0, threshold)
    g = first_derivative(a)
    np.testing.assert_allclose(g.detach().numpy(), np.clip((x - t) * slope, -limit, limit))
    g.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.where(np.abs(x - t) < threshold, slope, 0.0))
