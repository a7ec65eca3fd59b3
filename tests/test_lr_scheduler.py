"""Learning-rate schedulers against hand-written formulas of PyTorch's documented behaviour
(rtol 1e-9: the recursive forms accumulate a few ulps), their chaining, state_dict and
warnings; gradient clipping against NumPy on cpu and cuda."""
import math
import warnings

import numpy as np
import pytest

import minigpu as mg
from minigpu import nn, optim
from minigpu.optim import lr_scheduler as sched


def sgd(lr=1.0, groups=1, **kw):
    return optim.SGD([{"params": [nn.Parameter(mg.ones(1))]} for _ in range(groups)], lr=lr,
                     **kw)


def run(scheduler, epochs):
    """The learning rate in effect at epochs 0..epochs-1 (read before each scheduler step)."""
    out = []
    for _ in range(epochs):
        out.append(scheduler.get_last_lr()[0])
        assert scheduler.get_last_lr() == [g["lr"] for g in scheduler.optimizer.param_groups]
        scheduler.optimizer.step()
        scheduler.step()
    return np.array(out)


@pytest.mark.parametrize("make,formula", [
    (lambda o: sched.StepLR(o, step_size=3, gamma=0.5), lambda e: 0.5 ** (e // 3)),
    (lambda o: sched.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.1),
     lambda e: 0.1 ** ((e >= 2) + 2 * (e >= 5) + (e >= 9))),
    (lambda o: sched.ExponentialLR(o, gamma=0.9), lambda e: 0.9 ** e),
    (lambda o: sched.CosineAnnealingLR(o, T_max=5, eta_min=0.1),
     lambda e: 0.1 + 0.9 * (1 + math.cos(math.pi * e / 5)) / 2),
    (lambda o: sched.LambdaLR(o, lambda e: 1 / (e + 1)), lambda e: 1 / (e + 1)),
    (lambda o: sched.LinearLR(o, start_factor=0.25, end_factor=0.75, total_iters=4),
     lambda e: 0.25 + 0.5 * min(e, 4) / 4),
    (lambda o: sched.LinearLR(o), lambda e: 1 / 3 + (2 / 3) * min(e, 5) / 5),
])
def test_schedules_match_their_formulas(make, formula):
    """24 epochs: CosineAnnealingLR runs past T_max (the cosine continues, PyTorch's behaviour)."""
    got = run(make(sgd(lr=1.0)), 24)
    np.testing.assert_allclose(got, [formula(e) for e in range(24)], rtol=1e-9, atol=1e-12)


def test_closed_form_with_epoch_argument_warns_and_matches():
    s = sched.StepLR(sgd(lr=2.0), step_size=2, gamma=0.5)
    s.optimizer.step()
    with pytest.warns(UserWarning, match="epoch parameter in `scheduler.step\\(\\)`"):
        s.step(5)
    assert s.get_last_lr() == [2.0 * 0.5 ** 2]


def test_one_cycle_two_and_three_phases_with_momentum():
    total, top, pct = 20, 1.0, 0.3
    lo, final = top / 25.0, top / 25.0 / 1e4

    def cos(start, end, t):
        return end + (start - end) / 2 * (1 + math.cos(math.pi * t))

    def two_phase(k):
        w = pct * total - 1
        if k <= w:
            return cos(lo, top, k / w), cos(0.95, 0.85, k / w)
        t = (k - w) / (total - 1 - w)
        return cos(top, final, t), cos(0.85, 0.95, t)

    def three_phase(k):
        w1, w2 = pct * total - 1, 2 * pct * total - 2
        if k <= w1:
            return cos(lo, top, k / w1), cos(0.95, 0.85, k / w1)
        if k <= w2:
            t = (k - w1) / (w2 - w1)
            return cos(top, lo, t), cos(0.85, 0.95, t)
        return cos(lo, final, (k - w2) / (total - 1 - w2)), 0.95

    for three, formula in ((False, two_phase), (True, three_phase)):
        opt = sgd(lr=0.123, momentum=0.9)
        s = sched.OneCycleLR(opt, max_lr=top, total_steps=total, three_phase=three)
        lrs, moms = [], []
        for _ in range(total):
            lrs.append(s.get_last_lr()[0])
            moms.append(opt.param_groups[0]["momentum"])
            opt.step()
            if len(lrs) < total:
                s.step()
        want = np.array([formula(k) for k in range(total)])
        np.testing.assert_allclose(lrs, want[:, 0], rtol=1e-9)
        np.testing.assert_allclose(moms, want[:, 1], rtol=1e-9)
        assert lrs[0] == pytest.approx(0.04) and lrs[-1] == pytest.approx(4e-6)
        assert max(lrs) == pytest.approx(1.0)
        s.step()  # step total_steps is allowed, one more is not
        with pytest.raises(ValueError, match="Tried to step 21 times. The specified number of "
                                             "total steps is 20"):
            s.step()


def test_one_cycle_cycles_adam_beta1_and_linear_annealing():
    opt = optim.Adam([nn.Parameter(mg.ones(1))], lr=1.0, betas=(0.5, 0.99))
    s = sched.OneCycleLR(opt, max_lr=0.1, epochs=2, steps_per_epoch=5, anneal_strategy="linear",
                         pct_start=0.5)
    assert opt.param_groups[0]["betas"] == (0.95, 0.99)
    lrs = run(s, 10)
    w = 0.5 * 10 - 1
    want = [0.004 + (0.1 - 0.004) * k / w if k <= w else
            0.1 + (0.004 / 1e4 - 0.1) * (k - w) / (9 - w) for k in range(10)]
    np.testing.assert_allclose(lrs, want, rtol=1e-9)
    assert opt.param_groups[0]["betas"][1] == 0.99


def test_one_cycle_errors():
    with pytest.raises(ValueError, match="You must define either total_steps OR"):
        sched.OneCycleLR(sgd(), max_lr=1.0)
    with pytest.raises(ValueError, match="Expected positive integer total_steps, but got 0"):
        sched.OneCycleLR(sgd(), max_lr=1.0, total_steps=0)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
        sched.OneCycleLR(sgd(), max_lr=1.0, total_steps=5, anneal_strategy="exp")
    with pytest.raises(ValueError, match="max_lr must have the same length as "
                                         "optimizer.param_groups. max_lr has 3 values"):
        sched.OneCycleLR(sgd(groups=2), max_lr=[1, 2, 3], total_steps=5)
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        sched.OneCycleLR(optim.Adagrad([nn.Parameter(mg.ones(1))]), max_lr=1.0, total_steps=5)


def test_groups_chaining_state_dict_and_errors():
    opt = sgd(lr=1.0, groups=2)
    opt.param_groups[1]["lr"] = 10.0
    s = sched.LambdaLR(opt, [lambda e: 0.5 ** e, lambda e: e + 1.0])
    run(s, 3)
    assert s.get_last_lr() == [0.125, 40.0]
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 3"):
        sched.LambdaLR(opt, [lambda e: 1.0] * 3)
    # Two schedulers on one optimizer compose (the recursive, chainable forms).
    opt = sgd(lr=1.0)
    a, b = sched.ExponentialLR(opt, 0.9), sched.StepLR(opt, 2, 0.1)
    for _ in range(4):
        opt.step()
        a.step()
        b.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.9 ** 4 * 0.1 ** 2)
    # state_dict: everything but the optimizer; a fresh scheduler resumes exactly.
    opt = sgd(lr=1.0)
    s = sched.CosineAnnealingLR(opt, T_max=6)
    run(s, 4)
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4 and sd["base_lrs"] == [1.0]
    rest = run(s, 3)
    opt2 = sgd(lr=1.0)
    s2 = sched.CosineAnnealingLR(opt2, T_max=99)
    s2.load_state_dict(sd)
    opt2.param_groups[0]["lr"] = sd["_last_lr"][0]
    np.testing.assert_allclose(run(s2, 3), rest, rtol=1e-12)
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in "
                                       "param_groups\\[0\\] when resuming scheduler with "
                                       "last_epoch >= 0"):
        sched.StepLR(sgd(), 2, last_epoch=3)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        sched.LinearLR(sgd(), start_factor=0)


def test_warns_when_scheduler_steps_before_optimizer():
    s = sched.StepLR(sgd(), 2)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before "
                                         "`optimizer.step\\(\\)`"):
        s.step()
    s = sched.StepLR(sgd(), 2)
    s.optimizer.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.step()


# --- gradient clipping ----------------------------------------------------------------------------
def grads_of(device, arrays):
    params = [nn.Parameter(mg.zeros(*a.shape, device=device)) for a in arrays]
    sum((p * mg.tensor(a, device=device)).sum() for p, a in zip(params, arrays)).backward()
    return params


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf, 0.5])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
def test_clip_grad_norm_matches_numpy(device, norm_type, max_norm):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,), (2, 1, 2)]]
    params = grads_of(device, arrays)
    flat = np.concatenate([a.ravel() for a in arrays]).astype(np.float64)
    want = (np.abs(flat).max() if norm_type == math.inf else
            (np.abs(flat) ** norm_type).sum() ** (1 / norm_type))
    total = nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    assert total.device == device and total.ndim == 0
    np.testing.assert_allclose(total.item(), want, rtol=1e-5)
    coef = min(1.0, max_norm / (want + 1e-6))
    for p, a in zip(params, arrays):
        np.testing.assert_allclose(p.grad.numpy(), a * coef, rtol=1e-5, atol=1e-7)


def test_clip_grad_norm_edge_cases():
    p = nn.Parameter(mg.ones(2))
    assert nn.utils.clip_grad_norm_([p], 1.0).item() == 0.0  # no gradients: tensor(0.)
    (p * mg.tensor([math.inf, 1.0])).sum().backward()
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from "
                                           "`parameters` is non-finite"):
        nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    q = nn.Parameter(mg.ones(3))
    (q * mg.tensor([0.0, 2.0, -3.0])).sum().backward()
    # PyTorch takes the norm of the per-parameter norms: for order 0 that counts the
    # parameters whose gradient is not all zero (here 1), not the non-zero elements.
    assert nn.utils.clip_grad_norm_(q, 10.0, norm_type=0).item() == 1.0
    assert nn.utils.clip_grad_norm_(q, 10.0, norm_type=-math.inf).item() == 0.0


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_clip_grad_value(device):
    a = np.array([[-3.0, 0.2], [0.7, 9.0]], np.float32)
    (p,) = grads_of(device, [a])
    grad = p.grad
    assert nn.utils.clip_grad_value_(p, 0.5) is None
    assert p.grad is grad  # in place
    np.testing.assert_allclose(p.grad.numpy(), np.clip(a, -0.5, 0.5))


def test_lambda_lr_state_dict_saves_callable_objects_not_functions():
    class Decay:
        def __init__(self, rate):
            self.rate = rate

        def __call__(self, epoch):
            return self.rate ** epoch

    s = sched.LambdaLR(sgd(groups=2), [Decay(0.5), lambda e: 1.0])
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"rate": 0.5}, None] and "optimizer" not in sd
    sd["lr_lambdas"][0]["rate"] = 0.1
    other = sched.LambdaLR(sgd(groups=2), [Decay(0.9), lambda e: 2.0])
    other.load_state_dict(sd)
    assert other.lr_lambdas[0].rate == 0.1 and other.lr_lambdas[1](3) == 2.0
    assert "lr_lambdas" in sd  # the caller's dict is left whole
