"""``minigpu.amp.GradScaler`` against ``torch.amp.GradScaler``: the same scales, skipped steps
and parameters over a run with overflows, on both devices."""
import math

import pytest

import minigpu as mg

torch = pytest.importorskip("torch")


def _run(lib, device, grads):
    """Steps of SGD on one parameter whose scaled gradient is ``g`` at each step (inf/nan
    included); returns the scale and parameter after each step."""
    p = lib.nn.Parameter(lib.ones(3))
    if device:
        p = lib.nn.Parameter(p.detach().to(device))
    opt = lib.optim.SGD([p], lr=0.5)
    scaler = lib.amp.GradScaler(device or "cpu", init_scale=8.0, growth_interval=2)
    seen = []
    for g in grads:
        opt.zero_grad()
        loss = (p * g).sum()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        seen.append((scaler.get_scale(), [round(v, 6) for v in p.detach().cpu().tolist()]))
    return seen


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_scales_and_skipped_steps_match_torch(device):
    grads = [1.0, 2.0, math.inf, 0.5, math.nan, 1.0, 1.0, 1.0, -math.inf, 3.0]
    assert _run(mg, device, grads) == _run(torch, None, grads)


def test_unscale_then_step_and_the_errors_torch_gives():
    for lib in (mg, torch):
        p = lib.nn.Parameter(lib.ones(2))
        opt = lib.optim.SGD([p], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=4.0)
        scaler.scale((p * 3).sum()).backward()
        assert p.grad.tolist() == [12.0, 12.0]
        scaler.unscale_(opt)
        assert p.grad.tolist() == [3.0, 3.0]
        with pytest.raises(RuntimeError, match="unscale_\\(\\) has already been called"):
            scaler.unscale_(opt)
        scaler.step(opt)
        with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
            scaler.step(opt)
        scaler.update()
        assert [round(v, 6) for v in p.tolist()] == [0.7, 0.7]
        with pytest.raises(ValueError, match="must be a Tensor"):
            scaler.scale(3.0)


def test_state_dict_round_trips_and_matches_torch_keys():
    s = mg.amp.GradScaler(init_scale=16.0, growth_interval=7)
    t = torch.amp.GradScaler("cpu", init_scale=16.0, growth_interval=7)
    assert s.state_dict() == t.state_dict()
    fresh = mg.amp.GradScaler()
    fresh.load_state_dict(t.state_dict())
    assert fresh.get_scale() == 16.0 and fresh.get_growth_interval() == 7


def test_a_disabled_scaler_changes_nothing():
    s = mg.amp.GradScaler(enabled=False)
    loss = mg.ones(2).sum()
    assert s.scale(loss) is loss and s.get_scale() == 1.0 and s.state_dict() == {}
