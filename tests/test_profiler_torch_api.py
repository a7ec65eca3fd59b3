"""torch.profiler's API on minigpu.profiler (issue #26): the profiler recipe's program runs
unchanged under ``import minigpu as torch``; activities, record_shapes, profile_memory,
with_stack, schedule + step + on_trace_ready (the same windows as torch's),
tensorboard_trace_handler, export_stacks."""
import json
import os
import subprocess
import sys

import pytest

import minigpu as mg
from minigpu import nn
from minigpu.profiler import ProfilerActivity, profile, record_function, schedule

torch = pytest.importorskip("torch")

RECIPE = """
import {module} as torch
from {module}.profiler import profile, record_function, ProfilerActivity
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(4 * 6 * 6, 5))
inputs = torch.randn(2, 3, 8, 8)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    with record_function("model_inference"):
        model(inputs)
tables = [prof.key_averages().table(sort_by="cpu_time_total", row_limit=10),
          prof.key_averages(group_by_input_shape=True).table(sort_by="cpu_time_total",
                                                              row_limit=10)]
with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
    model(inputs)
tables.append(prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=10))
tables.append(prof.key_averages().table(sort_by="cpu_memory_usage", row_limit=10))
prof.export_chrome_trace(trace_path)
with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
    model(inputs)
tables.append(prof.key_averages(group_by_stack_n=5).table(sort_by="self_cpu_time_total",
                                                          row_limit=2))
prof.export_stacks(stacks_path, "self_cpu_time_total")
steps = []
def trace_handler(p):
    steps.append(p.step_num)
    tables.append(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=-1))
with profile(activities=[ProfilerActivity.CPU],
             schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=2),
             on_trace_ready=trace_handler) as p:
    for idx in range(10):
        model(inputs)
        p.step()
"""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("module", ["torch", "minigpu"])
def test_the_profiler_recipe_runs_unchanged(module, tmp_path):
    """The recipe as a program of its own, in a fresh interpreter (torch's profiler keeps
    process-wide state that other tests' profiling would share)."""
    program = tmp_path / "recipe.py"
    program.write_text(f"trace_path = {str(tmp_path / 'trace.json')!r}\n"
                       f"stacks_path = {str(tmp_path / 'stacks.txt')!r}\n"
                       + RECIPE.format(module=module)
                       + "import json\nprint(json.dumps(dict(tables=tables, steps=steps)))\n")
    run = subprocess.run([sys.executable, "-W", "ignore", str(program)], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert run.returncode == 0, run.stderr
    scope = json.loads(run.stdout.strip().splitlines()[-1])
    tables = scope["tables"]
    assert "model_inference" in tables[0] and "Input Shapes" in tables[1]
    if module == "minigpu":
        assert "Self Mem" in tables[2] and "recipe.py" in tables[4]
    assert scope["steps"] == [4, 8]  # windows: steps 2-3 and 6-7, handed over by step()
    json.loads((tmp_path / "trace.json").read_text())
    if module == "minigpu":
        assert "ProfilerStep#6" in tables[-1] and "ProfilerStep#7" in tables[-1]
        assert "ProfilerStep#3" not in tables[-1]
        lines = (tmp_path / "stacks.txt").read_text().splitlines()
        assert lines and all(line.rsplit(" ", 1)[1].isdigit() and ";" in line for line in lines)


@pytest.mark.parametrize("args", [dict(wait=1, warmup=1, active=2),
                                  dict(wait=0, warmup=0, active=1),
                                  dict(wait=2, warmup=1, active=3, repeat=2, skip_first=3)])
def test_schedule_matches_torchs(args):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.profiler.schedule(**args)
    got = schedule(**args)
    assert [got(i).name for i in range(30)] == [want(i).name for i in range(30)]
    with pytest.raises(AssertionError, match="Invalid profiler schedule arguments"):
        schedule(wait=0, warmup=0, active=0)


def _model(dev):
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(dev), \
        mg.randn(5, 4, device=dev)


def test_activities_choose_what_is_recorded():
    model, x = _model("cuda")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x).sum().backward()
    names = {r.name for r in prof.key_averages()}
    assert "Addmm" in names and not any(n.startswith("cuda.") for n in names)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(x).sum().backward()
    rows = prof.key_averages()
    assert {r.kind for r in rows} == {"primitive"} and "cuda.matmul" in {r.name for r in rows}
    with profile() as prof:  # the default: every supported activity
        model(x).sum().backward()
    assert {"Addmm", "cuda.matmul"} <= {r.name for r in prof.key_averages()}
    assert mg.profiler.supported_activities() == {ProfilerActivity.CPU, ProfilerActivity.CUDA}
    with pytest.raises(ValueError, match="ProfilerActivity"):
        profile(activities=["cpu"])


@pytest.mark.parametrize("dev", ["cpu", "cuda"])
def test_record_shapes_memory_and_stack(dev, tmp_path):
    model, x = _model(dev)
    with profile(record_shapes=True, profile_memory=True, with_stack=True) as prof:
        with record_function("forward"):
            y = model(x)
    by_shape = prof.key_averages(group_by_input_shape=True)
    addmm = sorted(r.input_shapes for r in by_shape if r.name == "Addmm")
    assert addmm == [((5, 4), (8, 4), (8,)), ((5, 8), (3, 8), (3,))]
    matmul = [r for r in prof.key_averages() if r.name == f"{dev}.matmul"][0]
    assert matmul.self_memory == 5 * 8 * 4 + 5 * 3 * 4  # the two float32 outputs
    (forward,) = [r for r in prof.key_averages() if r.name == "forward"]
    assert forward.memory >= 5 * 8 * 4 + 5 * 3 * 4 and forward.self_memory == 0
    if dev == "cpu":
        assert matmul.self_cpu_memory_usage == matmul.self_memory and \
            matmul.cuda_memory_usage == 0
    else:
        assert matmul.self_cuda_memory_usage == matmul.self_memory and \
            matmul.cpu_memory_usage == 0
    text = prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=3)
    assert "Self Mem" in text and ("KB" in text or " B" in text)
    assert y.shape == (5, 3)
    stacked = prof.key_averages(group_by_stack_n=2)
    assert all(r.stack and "test_profiler_torch_api.py" in r.stack[0] for r in stacked)
    assert "test_record_shapes_memory_and_stack" in stacked.table(row_limit=1)
    prof.export_chrome_trace(tmp_path / "t.json")
    events = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"]
              if e.get("name") == "Addmm"]
    assert [8, 4] in [d for e in events for d in e["args"]["Input Dims"]]
    assert "test_profiler_torch_api.py" in events[0]["args"]["Call stack"]
    # PyTorch's attribute names, microseconds
    assert matmul.key == matmul.name and matmul.count == matmul.calls
    assert matmul.cpu_time_total == pytest.approx(matmul.total_ms * 1e3)


def test_tensorboard_trace_handler_writes_one_trace_per_window(tmp_path):
    model, x = _model("cpu")
    with profile(schedule=schedule(wait=0, warmup=1, active=1, repeat=2),
                 on_trace_ready=mg.profiler.tensorboard_trace_handler(str(tmp_path / "log"),
                                                                      worker_name="w0")) as p:
        for _ in range(6):
            model(x)
            p.step()
    files = sorted((tmp_path / "log").iterdir())
    assert len(files) == 2 and all(f.name.startswith("w0.") and f.name.endswith(".pt.trace.json")
                                   for f in files)
    names = [{e["name"] for e in json.loads(f.read_text())["traceEvents"]} for f in files]
    assert "ProfilerStep#1" in names[0] and "ProfilerStep#3" in names[1]
    assert "Addmm" in names[0]


def test_on_trace_ready_without_schedule_runs_once_at_the_end():
    model, x = _model("cpu")
    seen = []
    with profile(on_trace_ready=lambda p: seen.append(len(p.records))):
        model(x)
    assert len(seen) == 1 and seen[0] > 0
