"""``benchmarks/host_overhead.py`` runs end to end (tiny repeat): the cpu table, and on the
simulator the cuda table, whose launch counter must leave kernels and results untouched."""
import importlib.util
import json
from pathlib import Path

import numpy as np

import minigpu as mg

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "host_overhead.py"
spec = importlib.util.spec_from_file_location("host_overhead", PATH)
host_overhead = importlib.util.module_from_spec(spec)
spec.loader.exec_module(host_overhead)


def test_benchmark_writes_both_tables(tmp_path, capsys):
    from minigpu.simulator import config
    checks = config.CHECKS
    out = tmp_path / "rows.json"
    host_overhead.main(["--rounds", "2", "--round-ms", "1", "--json", str(out)])
    assert config.CHECKS == checks  # the sanitizer is off only while the host table is timed
    data = json.loads(out.read_text())
    assert [r["workload"] for r in data["cpu"]] == list(host_overhead.workloads(mg))
    assert all(r["minigpu_us"] > 0 for r in data["cpu"])
    launches = {r["workload"]: r["launches"] for r in data["cuda"]}
    assert launches["a + b"] == 1  # one binary map
    assert all(r["host_us"] > 0 and r["launches"] >= 1 for r in data["cuda"])
    assert "cuda device" in capsys.readouterr().out


def test_counted_launches_run_nothing_and_timed_ones_run():
    a = mg.ones(3, device="cuda")
    with host_overhead.launches(run=False) as counted:
        b = a + 1  # one affine map, counted and not run
    assert counted.count == 1
    with host_overhead.launches(run=True) as timed:
        c = a * 2
    assert timed.count == 1 and timed.seconds > 0
    np.testing.assert_array_equal(c.cpu().numpy(), [2, 2, 2])
    assert b.shape == (3,)


def test_configured_launchers_are_cached_per_kernel_grid_block_and_stream():
    """On a GPU ``blocks.configured`` reuses numba-cuda's launch configuration; checked here on
    the cached helper with a stand-in kernel (the simulator configures at every launch)."""
    from minigpu.backends.cuda import blocks

    class Kernel:
        def __init__(self):
            self.configurations = 0

        def __getitem__(self, config):
            self.configurations += 1
            return ("configured", config)

    k, stream = Kernel(), object()
    first = blocks._configured(k, 2, 32, stream)
    assert blocks._configured(k, 2, 32, stream) is first and k.configurations == 1
    assert blocks._configured(k, 4, 32, stream) == ("configured", (4, 32, stream))
    assert k.configurations == 2
