"""The compiled path's disk cache (``minigpu.simulator.compiled_cache``): a kernel compiled in
one process is loaded, not compiled, by the next; a change to anything its machine code depends
on (here a global constant) is a miss, never a stale result."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import cuda

from minigpu.simulator import compiled_cache

pytestmark = pytest.mark.skipif(not cuda.config.ENABLE_CUDASIM, reason="simulator only")

PROGRAM = r'''
import json, os, sys
import numpy as np
from numba import cuda, float32
import minigpu
from minigpu.simulator import compiled

SCALE = float(os.environ["SCALE"])
TILE = 8

@cuda.jit
def scaled_reverse(x, out):
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TILE + t
    v = x[i] * SCALE
    s[t] = x[i]
    cuda.syncthreads()
    out[i] = s[TILE - 1 - t] + v

x = np.arange(4 * TILE, dtype=np.float32)
out = np.zeros_like(x)
scaled_reverse[4, TILE](x, out)
(driver,) = [d for (k, _), d in compiled._COMPILED.items() if k is scaled_reverse]
print(json.dumps({"out": out.tolist(), "paths": dict(compiled.STATS["scaled_reverse"]),
                  "loaded": sum(driver.driver.stats.cache_hits.values()),
                  "compiled": sum(driver.driver.stats.cache_misses.values())}))
'''


def _run(tmp_path, mode, scale):
    env = {**os.environ, "MINIGPU_SIM_CACHE": str(tmp_path / "cache"), "MINIGPU_SIM_FAST": mode,
           "SCALE": str(scale), "NUMBA_ENABLE_CUDASIM": "1"}
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _want(scale):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    return (x[:, ::-1] + x * np.float32(scale)).ravel().tolist()


def test_a_compiled_kernel_is_loaded_by_the_next_process_and_a_changed_constant_is_a_miss(
        tmp_path):
    first = _run(tmp_path, "always", 2)
    assert first["out"] == _want(2) and first["paths"] == {"fast": 1}
    assert first["compiled"] == 1 and first["loaded"] == 0
    # ``auto`` would keep so cheap a launch checked; the cache says a compile is a load
    second = _run(tmp_path, "auto", 2)
    assert second["out"] == _want(2) and second["paths"] == {"fast": 1}
    assert second["loaded"] == 1 and second["compiled"] == 0
    third = _run(tmp_path, "always", 3)
    assert third["out"] == _want(3) and third["paths"] == {"fast": 1}
    assert third["compiled"] == 1 and third["loaded"] == 0


def test_a_global_that_cannot_be_described_keeps_the_kernel_out_of_the_cache():
    assert compiled_cache.fingerprint("y = LIMIT + np.float32(1)", {"LIMIT": 3, "np": np}) == \
        ["LIMIT=int 3", "np=module numpy"]
    assert compiled_cache.fingerprint("y = thing.x", {"thing": object()}) is None
    assert compiled_cache.key(["src"], [None]) is None
    # a function holding a comprehension (a nested code object, whose repr has its address)
    # is described by its content: the same in every process
    made = [{} for _ in range(2)]
    for ns in made:
        exec("def f(x):\n    return [i * x for i in range(3)]\n", ns)
    assert repr(made[0]["f"].__code__.co_consts) != repr(made[1]["f"].__code__.co_consts)
    assert compiled_cache.describe(made[0]["f"]) == compiled_cache.describe(made[1]["f"])
    assert compiled_cache.key(["src"], [["A=int 1"]]) != compiled_cache.key(["src"], [["A=int 2"]])


def test_cache_off(monkeypatch):
    monkeypatch.setenv("MINIGPU_SIM_CACHE", "0")
    assert compiled_cache.directory() is None
    assert compiled_cache.source_file("abc", "def f(): pass\n") is None
    assert compiled_cache.carried_types("abc") is None


@cuda.jit
def keep_across_barrier(x, out):
    """``v`` lives across a barrier: the compiled path keeps it in a per-thread array whose
    type follows x's."""
    i = cuda.grid(1)
    v = x[i] * 2
    cuda.syncthreads()
    out[i] = v


def test_the_same_kernel_with_other_argument_types_is_another_entry(tmp_path, monkeypatch):
    from minigpu.simulator import compiled, config
    monkeypatch.setenv("MINIGPU_SIM_CACHE", str(tmp_path))
    monkeypatch.setattr(config, "FAST", "always")
    compiled.STATS.clear()
    ints = np.arange(32, dtype=np.int64)
    out = np.zeros_like(ints)
    keep_across_barrier[1, 32](ints, out)
    np.testing.assert_array_equal(out, ints * 2)
    halves = np.arange(32) / 4.0
    out = np.zeros_like(halves)
    keep_across_barrier[1, 32](halves, out)
    np.testing.assert_array_equal(out, halves * 2)
    assert dict(compiled.STATS["keep_across_barrier"]) == {"fast": 2}


def test_with_numbas_jit_disabled_every_launch_stays_checked(tmp_path):
    """``NUMBA_DISABLE_JIT=1`` (stumpy's GPU tests set it): nothing can compile, so even
    ``always`` runs the checked path."""
    script = tmp_path / "no_jit.py"
    script.write_text(
        "import numpy as np\nfrom numba import cuda\nimport minigpu\n"
        "from minigpu.simulator import compiled\n"
        "@cuda.jit\ndef add_one(x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
        "        x[i] += 1\n"
        "x = np.zeros(64)\nadd_one[2, 32](x)\nprint(x.sum(), dict(compiled.STATS['add_one']))\n")
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "MINIGPU_SIM_FAST": "always",
           "MINIGPU_SIM_CACHE": str(tmp_path / "cache"), "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["64.0", "{'checked':", "1}"]


BACKGROUND = r'''
import json, logging, math, time
import numpy as np
from numba import cuda, float32
import minigpu
from minigpu.simulator import compiled

logging.basicConfig(level=logging.INFO)
TILE = 8

@cuda.jit
def reversed_roots(x, out):
    s = cuda.shared.array(TILE, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * TILE + t
    s[t] = float32(math.sqrt(x[i]))
    cuda.syncthreads()
    out[i] = s[TILE - 1 - t] + x[i]

x = np.arange(4 * TILE, dtype=np.float32)
want = np.sqrt(x).reshape(4, TILE)[:, ::-1].ravel() + x
right, deadline = [], time.time() + 400
while compiled.STATS["reversed_roots"]["fast"] < 2 and time.time() < deadline:
    out = np.zeros_like(x)
    reversed_roots[4, TILE](x, out)
    right.append(bool(np.allclose(out, want)))
    time.sleep(0.05)
(driver,) = [d for (k, _), d in compiled._COMPILED.items() if k is reversed_roots]
print(json.dumps({"right": right, "paths": dict(compiled.STATS["reversed_roots"]),
                  "loaded": sum(driver.driver.stats.cache_hits.values()),
                  "compiled": sum(driver.driver.stats.cache_misses.values())}))
'''


def test_auto_compiles_in_a_background_process_and_switches_when_the_cache_holds_it(tmp_path):
    """A threshold of a microsecond: the first launch forks the compile after its first block
    (the launcher's swaps of ``cuda`` and ``math`` in place, which the compile undoes), the
    checked path serves until the process has filled the cache, then the kernel loads from it."""
    env = {**os.environ, "MINIGPU_SIM_CACHE": str(tmp_path / "cache"), "MINIGPU_SIM_FAST": "auto",
           "MINIGPU_SIM_BACKGROUND": "1e-6", "NUMBA_ENABLE_CUDASIM": "1"}
    script = tmp_path / "program.py"
    script.write_text(BACKGROUND)
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.splitlines()[-1])
    assert "compiling in a background process" in proc.stderr
    assert r["paths"]["checked"] >= 1 and r["paths"]["fast"] == 2 and all(r["right"])
    assert r["loaded"] == 1 and r["compiled"] == 0   # the background process compiled it


GENERATED = ("from numba import cuda\n\n@cuda.jit\ndef generated_double(x, out):\n"
             "    i = cuda.grid(1)\n    if i < x.size:\n        out[i] = x[i] * 2\n")


def test_a_kernel_generated_without_a_module_name_compiles_again_not_a_broken_load(
        tmp_path, monkeypatch):
    """A kernel exec'd in a namespace without ``__name__`` (the fused kernels of
    ``minigpu/graphs``): Numba rebuilds a cached function's globals by importing its module by
    name, so a load from the disk cache failed (AttributeError) and every later launch fell
    back to the checked path. Such a kernel compiles in memory, again in each process."""
    import gc
    from minigpu.simulator import compiled, config
    monkeypatch.setenv("MINIGPU_SIM_CACHE", str(tmp_path))
    monkeypatch.setattr(config, "FAST", "always")
    compiled.STATS.clear()
    path = tmp_path / "generated.py"
    path.write_text(GENERATED)
    x = np.arange(32, dtype=np.float32)
    for _ in range(2):   # the second time as a new process sees it: nothing compiled in memory
        ns = {}
        exec(compile(GENERATED, str(path), "exec"), ns)
        out = np.zeros_like(x)
        ns["generated_double"][1, 32](x, out)
        np.testing.assert_array_equal(out, 2 * x)
        for key in [k for k in compiled._COMPILED if k[0] is ns["generated_double"]]:
            del compiled._COMPILED[key]
        del ns
        gc.collect()
    assert dict(compiled.STATS["generated_double"]) == {"fast": 2}
