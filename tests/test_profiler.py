"""minigpu.profiler: ops and primitives of a training step, with counts; hooks removed after;
PyTorch's key_averages().table(), record_function, a Chrome trace, and no CUDA needed."""
import json
import os
import subprocess
import sys

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
    # Forward: two Linear layers -> 2 Addmm (each one matmul). Backward: AddmmBackward of
    # layer 2 computes input and weight grads (2 matmuls), of layer 1 only the weight grad
    # (x needs none): 5 matmul primitives in all, and bias grads as row sums.
    assert rows["Addmm"].calls == 2 and rows["Addmm"].kind == "op"
    assert rows["AddmmBackward"].calls == 2
    assert rows[f"{dev}.matmul"].calls == 5 and rows[f"{dev}.matmul"].kind == "primitive"
    assert rows[f"{dev}.reduce"].calls >= 2
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
    # every Addmm record holds its matmul primitive; layer 2's backward holds two
    matmuls = [r for r in prof.events() if r.name == "Addmm"]
    assert len(matmuls) == 2
    assert all(any(c.name == f"{dev}.matmul" for c in r.children) for r in matmuls)
    backwards = [r for r in prof.events() if r.name == "AddmmBackward"]
    assert sorted(sum(c.name == f"{dev}.matmul" for c in r.children) for r in backwards) == [1, 2]
    text = prof.table()
    assert text == str(prof) and "AddmmBackward" in text and f"{dev}.matmul" in text
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


def test_key_averages_table_like_pytorch_and_record_function():
    step = _step("cpu")
    with mg.profiler.record_function("outside: ignored"):
        pass
    with mg.profiler.profile() as prof:
        with mg.profiler.record_function("train step"):
            step()
    averages = prof.key_averages()
    assert isinstance(averages, list) and {r.name for r in averages} >= {"train step", "Addmm"}
    text = averages.table(sort_by="cpu_time_total", row_limit=10)
    lines = text.splitlines()
    assert len(lines) == 3 + 10 and "sorted by cpu_time_total" in lines[0]
    assert lines[3].startswith("train step") and " user " in lines[3]  # it contains the rest
    assert str(averages) == averages.table()
    calls = [r.calls for r in averages.sorted("count")]
    assert calls == sorted(calls, reverse=True)
    with pytest.raises(ValueError, match="sort_by must be one of"):
        averages.table(sort_by="flops")
    (user,) = [r for r in prof.records if r.kind == "user"]
    assert user.name == "train step" and {c.name for c in user.children} >= {"Addmm"}
    assert "outside" not in text


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_export_chrome_trace_is_valid_trace_event_json(tmp_path, dev):
    step = _step(dev)
    with mg.profiler.profile() as prof:
        with mg.profiler.record_function("step"):
            step()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(prof.events())
    assert {e["name"] for e in events if e["ph"] == "M"} >= {"process_name", "thread_name"}
    for e in complete:
        assert set(e) >= {"name", "cat", "ph", "pid", "tid", "ts", "dur"}
        assert isinstance(e["name"], str) and e["cat"] in ("op", "primitive", "user")
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
        assert e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["pid"], int)
    # on one track, complete events nest or follow each other (what Perfetto requires)
    host = sorted((e for e in complete if e["tid"] == 0), key=lambda e: (e["ts"], -e["dur"]))
    stack = []
    for e in host:
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - 1e-3:
            stack.pop()
        if stack:
            assert e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"] + 1e-3, (e, stack[-1])
        stack.append(e)
    (outer,) = [e for e in complete if e["name"] == "step"]
    assert all(outer["ts"] - 1e-3 <= e["ts"] for e in host)
    assert prof.wall_ms * 1e3 + 1 >= max(e["ts"] + e["dur"] for e in host)


PROFILE_ON_CPU_ONLY_MACHINE = """
import json, sys
import minigpu as mg
import minigpu.profiler
model = mg.nn.Linear(4, 2)
x = mg.randn(3, 4)
with mg.profiler.profile() as prof:
    with mg.profiler.record_function("forward"):
        loss = model(x).sum()
    loss.backward()
print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
prof.export_chrome_trace(sys.argv[1])
json.load(open(sys.argv[1]))
print("cuda available:", mg.cuda.is_available())
"""


def test_profiler_works_without_gpu_or_simulator(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    r = subprocess.run([sys.executable, "-c", PROFILE_ON_CPU_ONLY_MACHINE,
                        str(tmp_path / "t.json")], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "cpu.matmul" in r.stdout and "forward" in r.stdout and "AddmmBackward" in r.stdout
