"""Losses: values against NumPy transcriptions of PyTorch's formulas (every reduction, class
weights, ignore_index, label smoothing, K-dim inputs), every gradient by gradcheck (float64,
cpu), cuda against cpu (float32: rtol 1e-4, atol 1e-5) and the errors users see.
"""
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigpu as mg
import minigpu.nn.functional as F
from minigpu import nn
from minigpu.autograd import gradcheck

RTOL32, ATOL32 = 1e-4, 1e-5


def t64(a, requires_grad=False):
    return mg.tensor(np.asarray(a, dtype=np.float64), dtype=mg.float64,
                     requires_grad=requires_grad)


def ti(a):
    return mg.tensor(np.asarray(a, dtype=np.int64))


# --- NumPy references ---------------------------------------------------------------------------
def np_reduce(loss, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction](loss)


def np_log_softmax(x, axis=1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


def np_bce(x, t, w=None):
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log(1 - x), -100))
    return loss if w is None else loss * w


def np_bce_logits(x, t, w=None, pw=None):
    log_sig, log_1m_sig = -np.logaddexp(0, -x), -np.logaddexp(0, x)
    pw = 1.0 if pw is None else pw
    loss = -(pw * t * log_sig + (1 - t) * log_1m_sig)
    return loss if w is None else loss * w


def np_nll(logp, t, w=None, ignore_index=-100, reduction="mean"):
    n, c = logp.shape
    w = np.ones(c) if w is None else w
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = w[safe] * valid
    loss = -logp[np.arange(n), safe] * wt
    if reduction == "mean":
        return loss.sum() / wt.sum()
    return np_reduce(loss, reduction)


def np_cross_entropy(x, t, w=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """PyTorch's cross_entropy for (N, C) logits: nll_loss(log_softmax) mixed with the
    smoothing term -sum_c w_c log p_c (zero for ignored rows), both divided by the summed target
    weights for 'mean'."""
    n, c = x.shape
    logp = np_log_softmax(x)
    w_ = np.ones(c) if w is None else w
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = w_[safe] * valid
    nll = -logp[np.arange(n), safe] * wt
    smooth = -(logp * w_).sum(1) * valid
    loss = (1 - label_smoothing) * nll + label_smoothing / c * smooth
    if reduction == "mean":
        with np.errstate(invalid="ignore"):
            return loss.sum() / wt.sum()
    return np_reduce(loss, reduction)


# --- values -------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_and_binary_losses_match_numpy(reduction):
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    p, q = rng.uniform(0.02, 0.98, (3, 4)), rng.uniform(0, 1, (3, 4))
    w, pw = rng.uniform(0, 2, 4), rng.uniform(0.5, 3, 4)
    cases = [
        (F.mse_loss(t64(x), t64(t), reduction=reduction), (x - t) ** 2),
        (nn.MSELoss(reduction=reduction)(t64(x), t64(t)), (x - t) ** 2),
        (F.binary_cross_entropy(t64(p), t64(q), reduction=reduction), np_bce(p, q)),
        (nn.BCELoss(weight=t64(w), reduction=reduction)(t64(p), t64(q)), np_bce(p, q, w)),
        (F.binary_cross_entropy_with_logits(t64(x), t64(q), reduction=reduction),
         np_bce_logits(x, q)),
        (nn.BCEWithLogitsLoss(weight=t64(w), pos_weight=t64(pw), reduction=reduction)(
            t64(x), t64(q)), np_bce_logits(x, q, w, pw)),
    ]
    for got, loss in cases:
        np.testing.assert_allclose(got.detach().numpy(), np_reduce(loss, reduction),
                                   rtol=1e-10)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_bce_clamps_log_at_minus_100_like_pytorch(device):
    x = t64([0.0, 1.0, 0.0, 1.0, 1e-50]).to(device).requires_grad_()
    t = t64([1.0, 0.0, 0.0, 1.0, 1.0]).to(device)
    loss = F.binary_cross_entropy(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [100, 100, 0, 0, 100], atol=1e-12)
    loss.sum().backward()  # (x - t) / max(x(1-x), 1e-12): finite, as in PyTorch
    np.testing.assert_allclose(x.grad.numpy(), [-1e12, 1e12, 0, 0, -1e12], rtol=1e-6)


def test_bce_with_logits_is_stable_for_huge_logits():
    x = t64([-200.0, -30.0, 0.0, 30.0, 200.0], True)
    t = t64([1.0, 0.3, 0.5, 0.0, 0.0])
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), np_bce_logits(x.detach().numpy(),
                                                                    t.numpy()), rtol=1e-12)
    loss.sum().backward()
    sig = 1 / (1 + np.exp(-x.detach().numpy()))
    np.testing.assert_allclose(x.grad.numpy(), sig - t.numpy(), atol=1e-12)


@given(st.integers(1, 5), st.integers(1, 5), st.booleans(), st.sampled_from([0.0, 0.1, 0.5]),
       st.sampled_from(["mean", "sum", "none"]), st.integers(0, 2 ** 16))
def test_cross_entropy_matches_numpy(n, c, weighted, smoothing, reduction, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c)) * 3
    t = rng.integers(0, c, n)
    ignore = int(rng.integers(0, c))  # some rows ignored (maybe all of them)
    w = rng.uniform(0.1, 2, c) if weighted else None
    got = F.cross_entropy(t64(x), ti(t), None if w is None else t64(w), ignore_index=ignore,
                          reduction=reduction, label_smoothing=smoothing)
    np.testing.assert_allclose(got.numpy(), np_cross_entropy(x, t, w, ignore, reduction,
                                                             smoothing), rtol=1e-10,
                               atol=1e-12, equal_nan=True)
    got = F.nll_loss(t64(x), ti(t), None if w is None else t64(w), ignore_index=ignore,
                     reduction=reduction)
    with np.errstate(invalid="ignore"):
        expected = np_nll(x, t, w, ignore, reduction)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-12, equal_nan=True)


def test_cross_entropy_default_ignore_index_and_spatial_inputs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3))
    t = np.array([0, -100, 2, 1])
    np.testing.assert_allclose(nn.CrossEntropyLoss()(t64(x), ti(t)).numpy(),
                               np_cross_entropy(x, t), rtol=1e-12)
    # (N, C, d1, d2) logits with (N, d1, d2) targets: rows are the pixels
    x = rng.standard_normal((2, 3, 2, 4))
    t = rng.integers(0, 3, (2, 2, 4))
    rows = x.transpose(0, 2, 3, 1).reshape(-1, 3)
    got = F.cross_entropy(t64(x), ti(t), reduction="none")
    assert tuple(got.shape) == (2, 2, 4)
    np.testing.assert_allclose(got.numpy(), np_cross_entropy(rows, t.reshape(-1), None,
                                                             reduction="none").reshape(2, 2, 4),
                               rtol=1e-12)
    # unbatched (C,) logits with a 0-d target
    got = F.cross_entropy(t64(x[0, :, 0, 0]), ti(1))
    np.testing.assert_allclose(got.numpy(), -np_log_softmax(x[0, :, 0, 0][None])[0, 1],
                               rtol=1e-12)


def test_cross_entropy_with_class_probabilities():
    rng = np.random.default_rng(2)
    x, p = rng.standard_normal((3, 4)), rng.dirichlet(np.ones(4), 3)
    w = rng.uniform(0.5, 2, 4)
    got = F.cross_entropy(t64(x), t64(p), t64(w), label_smoothing=0.2)
    target = p * 0.8 + 0.2 / 4
    expected = -(np_log_softmax(x) * target * w).sum(1).mean()
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


# --- gradients -----------------------------------------------------------------------------------
_rng = np.random.default_rng(3)
_X, _T = _rng.standard_normal((4, 3)), _rng.standard_normal((4, 3))
_P, _Q = _rng.uniform(0.05, 0.95, (4, 3)), _rng.uniform(0, 1, (4, 3))
_W, _PW = _rng.uniform(0.3, 2, 3), _rng.uniform(0.5, 3, 3)
_C = np.array([0, 2, 1, 2])
GRADCHECKS = [
    ("mse", lambda x, t: F.mse_loss(x, t), [_X, _T]),
    ("mse_none", lambda x, t: F.mse_loss(x, t, reduction="none"), [_X, _T]),
    ("bce", lambda p, q: F.binary_cross_entropy(p, q), [_P, _Q]),
    ("bce_weight_sum", lambda p, q: F.binary_cross_entropy(p, q, t64(_W), reduction="sum"),
     [_P, _Q]),
    ("bce_logits", lambda x, q: F.binary_cross_entropy_with_logits(x, q), [_X, _Q]),
    ("bce_logits_pos_weight", lambda x, q, pw: F.binary_cross_entropy_with_logits(
        x, q, t64(_W), pos_weight=pw, reduction="none"), [_X, _Q, _PW]),
    ("cross_entropy", lambda x: F.cross_entropy(x, ti(_C)), [_X]),
    ("cross_entropy_sum_ignore", lambda x: F.cross_entropy(x, ti(_C), ignore_index=2,
                                                           reduction="sum"), [_X]),
    ("cross_entropy_weight_smoothing", lambda x: F.cross_entropy(
        x, ti(_C), t64(_W), label_smoothing=0.2), [_X]),
    ("cross_entropy_smoothing_none", lambda x: F.cross_entropy(
        x, ti(_C), label_smoothing=0.3, reduction="none"), [_X]),
    ("cross_entropy_spatial", lambda x: F.cross_entropy(
        x, ti(_C[:2].reshape(1, 2, 1) + np.zeros((2, 1, 2), dtype=np.int64))),
     [_rng.standard_normal((2, 3, 2, 2))]),
    ("cross_entropy_probabilities", lambda x, p: F.cross_entropy(x, p), [_X, _Q]),
    ("nll", lambda x: F.nll_loss(x, ti(_C), t64(_W)), [_X]),
    ("nll_after_log_softmax", lambda x: F.nll_loss(F.log_softmax(x, 1), ti(_C),
                                                   ignore_index=0), [_X]),
]


@pytest.mark.parametrize("name,fn,arrays", GRADCHECKS, ids=[g[0] for g in GRADCHECKS])
def test_loss_gradcheck(name, fn, arrays):
    assert gradcheck(fn, [t64(a, True) for a in arrays])


# --- cuda against cpu -----------------------------------------------------------------------------
CUDA_LOSSES = [
    ("MSELoss", lambda: nn.MSELoss(), "normal"),
    ("BCELoss", lambda: nn.BCELoss(), "prob"),
    ("BCEWithLogitsLoss", lambda dev: nn.BCEWithLogitsLoss(
        pos_weight=mg.tensor([0.5, 2.0, 1.5], device=dev)), "prob"),
    ("CrossEntropyLoss", lambda dev: nn.CrossEntropyLoss(
        weight=mg.tensor([1.0, 0.5, 2.0], device=dev), label_smoothing=0.1, ignore_index=1),
     "class"),
    ("NLLLoss", lambda: nn.NLLLoss(reduction="sum"), "class"),
]


@pytest.mark.parametrize("name,make,kind", CUDA_LOSSES, ids=[c[0] for c in CUDA_LOSSES])
def test_loss_cuda_matches_cpu(name, make, kind):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    if name == "BCELoss":
        x = rng.uniform(0.05, 0.95, (4, 3)).astype(np.float32)
    target = (rng.integers(0, 3, 4) if kind == "class" else
              rng.uniform(0, 1, (4, 3)).astype(np.float32))
    results = []
    for device in ("cpu", "cuda"):
        loss_fn = make(device) if make.__code__.co_argcount else make()
        xt = mg.tensor(x, device=device, requires_grad=True)
        tt = mg.tensor(target, device=device, requires_grad=kind != "class")
        loss = loss_fn(xt, tt)
        loss.backward()
        results.append([loss.detach().numpy(), xt.grad.numpy()] +
                       ([tt.grad.numpy()] if kind != "class" else []))
    for a, b in zip(*results):
        np.testing.assert_allclose(b, a, rtol=RTOL32, atol=ATOL32)


def test_class_target_range_check_on_cuda():
    x = mg.zeros(2, 3, device="cuda")
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        F.cross_entropy(x, mg.tensor([0, 3], device="cuda"))


# --- errors ---------------------------------------------------------------------------------------
def test_class_targets_out_of_range_are_caught():
    x = mg.zeros(4, 5)
    with pytest.raises(IndexError, match="Target 5 is out of bounds"):
        F.cross_entropy(x, ti([0, 5, 1, 1]))
    with pytest.raises(IndexError, match="Target -3 is out of bounds"):
        nn.CrossEntropyLoss()(x, ti([0, -3, 1, 1]))
    with pytest.raises(IndexError, match="Target 7 is out of bounds"):
        F.nll_loss(x, ti([7, 0, 1, -100]))
    # an ignored target may be anything
    assert np.isfinite(F.cross_entropy(x, ti([0, 99, 1, 1]), ignore_index=99).item())


def test_loss_argument_errors():
    x = mg.zeros(4, 3)
    with pytest.raises(ValueError, match=r"Expected input batch_size \(4\) to match target "
                                         r"batch_size \(3\)"):
        F.cross_entropy(x, ti([0, 1, 2]))
    with pytest.raises(RuntimeError, match="expected scalar type Long"):
        F.cross_entropy(x, mg.zeros(4))
    with pytest.raises(ValueError, match="banana is not a valid value for reduction"):
        F.mse_loss(x, x, reduction="banana")
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(mg.zeros(4, 3) + 0.5, mg.zeros(4, 1))
    with pytest.raises(RuntimeError, match="weight tensor should be defined either for all 3 "
                                           "classes"):
        F.cross_entropy(x, ti([0, 1, 2, 0]), weight=mg.ones(2))
    with pytest.raises(ValueError, match="label_smoothing must be between 0.0 and 1.0"):
        F.cross_entropy(x, ti([0, 1, 2, 0]), label_smoothing=1.5)
    with pytest.warns(UserWarning, match="Using a target size"):
        F.mse_loss(x, mg.zeros(3))


def test_legacy_reduction_arguments():
    x, t = t64([[1.0, 2.0]]), t64([[0.0, 0.0]])
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert F.mse_loss(x, t, size_average=False).item() == 5.0
        assert nn.MSELoss(reduce=False)(x, t).shape == (1, 2)


def test_loss_modules_repr_and_weight_buffers():
    w = mg.tensor([1.0, 2.0, 3.0])
    ce = nn.CrossEntropyLoss(weight=w)
    assert repr(ce) == "CrossEntropyLoss()" and repr(nn.BCEWithLogitsLoss()) == \
        "BCEWithLogitsLoss()"
    assert list(ce.state_dict()) == ["weight"] and list(nn.CrossEntropyLoss().state_dict()) == []
    assert ce.ignore_index == -100 and ce.label_smoothing == 0.0 and ce.reduction == "mean"
    assert list(nn.BCEWithLogitsLoss(pos_weight=w).state_dict()) == ["pos_weight"]
