"""minigpu.profiler: ops and primitives of a training step, with counts; hooks removed after."""
import numpy as np
import pytest

import minigpu as mg
import minigpu.profiler
from minigpu import autograd, backends, nn, optim
from minigpu.backends.contract import PRIMITIVES


def _step(dev):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev)
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = mg.randn(5, 4, device=dev), mg.tensor([0, 1, 2, 0, 1], device=dev)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _primitives(dev):
    module = backends.get(dev)
    return {name: getattr(module, name) for name in PRIMITIVES}


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_a_training_step_lists_matmuls_with_their_counts(dev):
    step = _step(dev)
    with mg.profiler.profile() as prof:
        loss = step()
    rows = {r.name: r for r in prof.key_averages()}
    # Forward: two Linear layers -> 2 MatMul. Backward: MatMulBackward of layer 2 computes
    # both input and weight grads (2 MatMul), of layer 1 only the weight grad (x needs none).
    assert rows["MatMul"].calls == 5 and rows["MatMul"].kind == "op"
    assert rows["MatMulBackward"].calls == 2
    assert rows[f"{dev}.matmul"].calls == 5 and rows[f"{dev}.matmul"].kind == "primitive"
    assert rows[f"{dev}.sgd_step_"].calls == 4  # two weights, two biases
    assert rows["CrossEntropy"].calls == 1 and rows["CrossEntropyBackward"].calls == 1
    other = "cuda" if dev == "cpu" else "cpu"
    assert not any(name.startswith(other + ".matmul") for name in rows)
    totals = [r.total_ms for r in prof.key_averages()]
    assert totals == sorted(totals, reverse=True)
    for r in rows.values():
        assert r.total_ms >= 0 and r.self_ms <= r.total_ms + 1e-9
        assert r.mean_ms == pytest.approx(r.total_ms / r.calls)
    clock = "perf_counter (simulator)" if dev == "cuda" and mg.cuda.is_simulator() else None
    if clock:
        assert rows["cuda.matmul"].clock == clock
    if dev == "cpu":
        assert rows["cpu.matmul"].clock == "perf_counter"
    # every MatMul record holds its matmul primitive
    matmuls = [r for r in prof.events() if r.name == "MatMul"]
    assert all(any(c.name == f"{dev}.matmul" for c in r.children) for r in matmuls)
    text = prof.table()
    assert text == str(prof) and "MatMulBackward" in text and f"{dev}.matmul" in text
    assert "Total ms" in text and "Share" in text
    assert len(prof.table(sort_by="self", row_limit=3).splitlines()) == 3 + 3
    assert np.isfinite(loss.item())


def test_profiling_off_leaves_nothing_behind():
    step = _step("cuda")
    before_cpu, before_cuda = _primitives("cpu"), _primitives("cuda")
    observers = list(autograd.observers)
    with mg.profiler.profile():
        step()
        assert autograd.observers != observers
        assert backends.get("cuda").matmul is not before_cuda["matmul"]
    assert autograd.observers == observers
    assert _primitives("cpu") == before_cpu and _primitives("cuda") == before_cuda
    assert not any(hasattr(f, "__wrapped__") for f in _primitives("cuda").values())

    with pytest.raises(ZeroDivisionError), mg.profiler.profile():
        step()
        raise ZeroDivisionError
    assert autograd.observers == observers and _primitives("cuda") == before_cuda

    with mg.profiler.profile():
        with pytest.raises(RuntimeError, match="already running"):
            with mg.profiler.profile():
                pass
    assert autograd.observers == observers and _primitives("cuda") == before_cuda


def test_levels_can_be_switched_off():
    step = _step("cpu")
    with mg.profiler.profile(primitives=False) as prof:
        step()
    assert {r.kind for r in prof.key_averages()} == {"op"}
    with mg.profiler.profile(ops=False) as prof:
        step()
    assert {r.kind for r in prof.key_averages()} == {"primitive"}


@pytest.mark.gpu
def test_cuda_records_are_timed_with_events_on_a_gpu():
    step = _step("cuda")
    step()  # compile the kernels first
    with mg.profiler.profile() as prof:
        step()
    rows = {r.name: r for r in prof.key_averages()}
    assert rows["cuda.matmul"].clock == "cuda events" and rows["cuda.matmul"].total_ms > 0
