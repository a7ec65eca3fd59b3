"""``python -m minigpu.tools.bench --smoke``: every suite runs end to end on the simulator, every
lesson of ``lessons.ALL`` is listed and run, variants agree, and the output says its timings are
meaningless.

Runs ``bench.main`` in this process (the suite's simulator is already on), tiny sizes, one
timed run per variant: about 10 s for the three suites together.
"""
import json

import pytest

from minigpu import lessons
from minigpu.tools import bench, timing
from minigpu.backends.cuda.device import SIMULATOR


def run(capsys, tmp_path, *args):
    path = tmp_path / "out.json"
    rc = bench.main(["--smoke", "--json", str(path), *args])
    out = capsys.readouterr().out
    return rc, out, json.loads(path.read_text())


def test_list_names_every_lesson(capsys):
    assert bench.main(["--list"]) == 0
    out = capsys.readouterr().out
    for lesson in lessons.ALL:
        assert lesson.name in out


def test_lessons_smoke(capsys, tmp_path):
    rc, out, data = run(capsys, tmp_path, "--suite", "lessons")
    assert rc == 0, out
    meta = data["meta"]
    assert meta["smoke"]
    if SIMULATOR:
        assert "MEANINGLESS" in out and meta["simulator"] and meta["meaningless"]
    else:  # NUMBA_ENABLE_CUDASIM=0 on a GPU: smoke sizes on the hardware
        assert "not representative" in out and not meta["meaningless"]
    rows = data["rows"]
    assert not [r for r in rows if "error" in r], rows
    experiments = [e.name for lesson in lessons.ALL for e in lesson.experiments]
    assert set(experiments) <= {r["group"] for r in rows}
    # every experiment ran at least two variants, and they agree
    key = "launches" if SIMULATOR else "ms"
    for name in experiments:
        ran = [r for r in rows if r["group"] == name and key in r]
        assert len(ran) >= 2, name
    assert all(r.get("check", "equal") == "equal" for r in rows)
    if SIMULATOR:  # counters, and no timing or speed-up ratio printed or saved
        assert "x first" not in out and " ms " not in out and "GB/s" not in out
        assert not [r for r in rows if "ms" in r or "x_first" in r]
        assert all(r["launches"] >= 1 for r in rows if "launches" in r)
        assert "global load sectors" in out
    for r in rows:
        if "ms" in r:
            assert r["ms"] > 0 and r["rate"] > 0 and "x_first" in r


@pytest.mark.parametrize("suite,groups", [
    ("ops", {"matmul", "sum_all", "sum_rows", "add", "relu", "transpose", "softmax"}),
    ("train", {"mlp_step", "lenet_step"}),
])
def test_ops_and_train_smoke(capsys, tmp_path, suite, groups):
    rc, out, data = run(capsys, tmp_path, "--suite", suite)
    assert rc == 0, out
    rows = data["rows"]
    assert not [r for r in rows if "error" in r], rows
    assert {r["group"] for r in rows} == groups
    key = "launches" if SIMULATOR else "ms"
    assert all(r[key] > 0 for r in rows if not r.get("reference"))


def test_replay_allocations_reuses_buffers():
    """After the recording call, the same sequence of ``empty`` requests gets the same
    buffers back; a request out of step gets a fresh one."""
    import numpy as np

    replay = timing.ReplayAllocations()
    with replay.installed():
        from minigpu.backends.cuda import device
        a, b = device.empty(4, np.float32), device.empty(8, np.float32)
        replay.rewind()
        assert device.empty(4, np.float32) is a and device.empty(8, np.float32) is b
        replay.rewind()
        c = device.empty(5, np.float32)
        assert c is not a and c.size == 5
    assert device.empty is replay.real


def test_smoke_runs_for_a_user_without_the_simulator_variable():
    """``--smoke`` turns the simulator on by itself, before Numba is first imported."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-m", "minigpu.tools.bench", "--smoke", "--lesson",
                           "divergence"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MEANINGLESS" in proc.stdout and "leaky_relu_branch" in proc.stdout
    assert " 0 launches" not in proc.stdout and "1 launches" in proc.stdout   # counted
