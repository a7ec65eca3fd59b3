"""The caching allocator: size classes, free lists and counters (plain Python, any machine),
the simulator's pooled ``device.empty``, memory staying flat over training steps, and the
Numba EMM plugin's plumbing with a fake driver (no GPU needed)."""
import gc
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import minigpu as mg
from minigpu import nn, optim
from minigpu.backends.cuda import allocator, device
from minigpu.backends.cuda.allocator import KIB, MIB, CachingPool, round_size

# --- size classes ---------------------------------------------------------------------------

def test_round_size_small_classes_are_512_bytes_apart():
    assert [round_size(n) for n in (0, 1, 511, 512, 513, 1024, 1025)] == \
        [512, 512, 512, 512, 1024, 1024, 1536]
    assert round_size(MIB) == MIB


def test_round_size_large_classes_are_four_per_power_of_two():
    assert round_size(MIB + 1) == MIB + 256 * KIB
    assert round_size(3 * MIB) == 3 * MIB
    assert round_size(3 * MIB + 1) == 3 * MIB + 512 * KIB
    assert round_size(64 * MIB) == 64 * MIB
    assert round_size(64 * MIB + 1) == 80 * MIB


@pytest.mark.parametrize("n", [1, 700, 5000, 2**20 + 3, 7 * 2**20 + 11, 2**30 + 1])
def test_round_size_is_a_small_overallocation(n):
    r = round_size(n)
    assert r >= n and r % 512 == 0
    assert r - n < 512 or (r - n) / n <= 0.25
    assert round_size(r) == r  # a class maps to itself


# --- the pool ---------------------------------------------------------------------------------

class FakeDevice:
    """raw_alloc/raw_free that count calls and can run out of memory."""

    def __init__(self, capacity=None):
        self.capacity, self.used, self.allocs, self.frees = capacity, 0, 0, 0

    def alloc(self, nbytes):
        if self.capacity is not None and self.used + nbytes > self.capacity:
            raise MemoryError("fake device is full")
        self.used += nbytes
        self.allocs += 1
        return bytearray(nbytes)

    def free(self, block):
        self.used -= len(block)
        self.frees += 1


def test_a_freed_block_is_reused_for_its_size_class():
    dev = FakeDevice()
    pool = CachingPool(dev.alloc, dev.free)
    a, size = pool.allocate(1000)
    assert size == 1024 and dev.allocs == 1
    pool.release(a, size)
    b, _ = pool.allocate(600)  # same class (1024): a hit
    assert b is a and dev.allocs == 1
    c, _ = pool.allocate(1100)  # another class: a miss
    assert c is not a and dev.allocs == 2
    s = pool.stats()
    assert s["num_allocs"] == 3 and s["num_cache_hits"] == 1 and s["num_frees"] == 1
    assert s["num_device_allocs"] == 2 and s["allocated_bytes"] == 1024 + 1536
    assert s["requested_bytes"] == 600 + 1100 and s["cached_bytes"] == 0


def test_counters_and_peaks():
    dev = FakeDevice()
    pool = CachingPool(dev.alloc, dev.free)
    blocks = [pool.allocate(512) for _ in range(4)]
    for b in blocks[:3]:
        pool.release(*b)
    s = pool.stats()
    assert s["allocated_bytes"] == 512 and s["cached_bytes"] == 3 * 512
    assert s["reserved_bytes"] == 4 * 512 == s["peak_reserved_bytes"] == s["peak_allocated_bytes"]
    assert s["active_blocks"] == 1 and s["cached_blocks"] == 3
    pool.reset_peak_stats()
    assert pool.stats()["peak_allocated_bytes"] == 512


def test_empty_cache_frees_only_cached_blocks():
    dev = FakeDevice()
    pool = CachingPool(dev.alloc, dev.free)
    keep = pool.allocate(2048)
    pool.release(*pool.allocate(4096))
    pool.empty_cache()
    s = pool.stats()
    assert dev.frees == 1 and dev.used == 2048
    assert s["cached_bytes"] == 0 and s["allocated_bytes"] == 2048 and s["num_device_frees"] == 1
    pool.release(*keep)
    assert pool.stats()["cached_bytes"] == 2048


def test_out_of_memory_empties_the_cache_and_retries():
    dev = FakeDevice(capacity=4096)
    pool = CachingPool(dev.alloc, dev.free)
    pool.release(*pool.allocate(3072))  # cached, but the wrong class for what comes next
    _, size = pool.allocate(2048)  # 3072 + 2048 > 4096: free the cache, retry
    assert size == 2048 and dev.used == 2048
    assert pool.stats()["num_oom_retries"] == 1 and pool.stats()["cached_bytes"] == 0
    with pytest.raises(MemoryError):
        pool.allocate(4096)  # really too big


def test_release_from_a_finaliser_during_allocation_is_deferred():
    """A weakref finaliser may fire inside allocate(): release only enqueues."""
    dev = FakeDevice()
    pool = CachingPool(dev.alloc, dev.free)
    held = pool.allocate(512)

    class Owner:
        pass

    owner = Owner()
    weakref.finalize(owner, pool.release, *held)
    real_alloc = pool.raw_alloc

    def alloc_that_collects(nbytes):
        nonlocal owner
        owner = None  # the finaliser runs here, with the pool's lock held
        return real_alloc(nbytes)

    pool.raw_alloc = alloc_that_collects
    pool.allocate(1024)
    s = pool.stats()
    assert s["num_frees"] == 1 and s["cached_bytes"] == 512 and s["allocated_bytes"] == 1024


def _replay(trace, pool, carried):
    """Run one recorded step through ``pool``. A free of a block the step did not allocate
    (a tensor from the previous step, e.g. last step's gradients) releases a block of the
    same requested size carried over from the previous replay. ``carried`` maps requested
    size -> [(block, size class)]; returns the number of frees that found nothing to free."""
    current, missing = {}, 0
    for kind, nbytes, key in trace:
        if kind == "alloc":
            current[key] = (nbytes, pool.allocate(nbytes))
        elif key in current:
            pool.release(*current.pop(key)[1])
        elif carried.get(nbytes):
            pool.release(*carried[nbytes].pop())
        else:
            missing += 1
    for nbytes, held in current.values():
        carried.setdefault(nbytes, []).append(held)
    return missing


# --- device.empty under the simulator -------------------------------------------------------

needs_sim_pool = pytest.mark.skipif(not (allocator.SIMULATOR and allocator.ENABLED),
                                    reason="checks the simulator's pooled device arrays")


@needs_sim_pool
def test_device_empty_recycles_blocks_and_views_keep_them_alive():
    pool = allocator.simulator_pool()
    a = device.empty(100, np.float32)
    block = a._ary.base.obj  # the pool block under the array
    view = a[10:20]
    del a
    gc.collect()
    before = pool.stats()
    b = device.empty(100, np.float32)
    assert b._ary.base.obj is not block  # the view still uses it: not reused
    del view, b
    gc.collect()
    c = device.empty(90, np.float32)  # 360 bytes -> the 512-byte class again
    assert pool.stats()["num_cache_hits"] > before["num_cache_hits"]
    assert c.size == 90 and c.dtype == np.float32


@needs_sim_pool
def test_memory_stats_and_empty_cache():
    x = mg.randn(64, device="cuda")
    y = x * 2  # noqa: F841  (keeps one buffer alive)
    del x
    stats = mg.cuda.memory_stats()
    assert stats["allocator"] == "caching (simulator)"
    assert stats["allocated_bytes"] >= 256 and stats["cached_bytes"] >= 0
    mg.cuda.empty_cache()
    after = mg.cuda.memory_stats()
    assert after["cached_bytes"] == 0 and after["reserved_bytes"] == after["allocated_bytes"]
    assert mg.cuda.memory_allocated() == after["allocated_bytes"]
    assert mg.cuda.memory_reserved() == after["reserved_bytes"]


@needs_sim_pool
def test_training_memory_stays_flat_and_the_driver_is_only_called_at_first():
    """A real MLP + SGD loop on the cuda device (simulator): after two warm-up steps every
    allocation is a cache hit and reserved bytes do not move. The simulator runs ~0.3 s a
    step, so 6 steps run here; the recorded allocation pattern of one steady step is then
    replayed through a fresh pool for 1 000 steps. (``benchmarks/allocator_flat_memory.py`` runs
    1 000 real steps.)"""
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to("cuda")
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = mg.randn(5, 4, device="cuda"), mg.tensor([0, 1, 2, 0, 1], device="cuda")
    loss_fn = nn.CrossEntropyLoss()
    pool = allocator.simulator_pool()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    history = []
    for k in range(6):
        if k == 4:
            pool.trace = []
        losses = step()
        if k == 4:
            trace, pool.trace = pool.trace, None
        history.append(pool.stats())

    assert np.isfinite(losses)
    steady = history[2:]
    assert len({s["reserved_bytes"] for s in steady}) == 1
    assert len({s["num_device_allocs"] for s in steady}) == 1
    assert len({s["allocated_bytes"] for s in steady}) == 1
    per_step = steady[1]["num_allocs"] - steady[0]["num_allocs"]
    assert per_step > 10
    assert steady[1]["num_cache_hits"] - steady[0]["num_cache_hits"] == per_step

    # 1 000 steps of that exact pattern through a fresh pool.
    assert sum(e[0] == "alloc" for e in trace) == per_step
    dev = FakeDevice()
    replay = CachingPool(dev.alloc, dev.free)
    carried, reserved = {}, []
    for k in range(1000):
        missing = _replay(trace, replay, carried)
        assert k == 0 or missing == 0  # the trace is one closed cycle of the loop
        reserved.append(replay.stats()["reserved_bytes"])
    assert len(set(reserved[1:])) == 1 and reserved[-1] < 64 * KIB
    assert dev.allocs == replay.stats()["num_device_allocs"] <= per_step


# --- the EMM plugin with a fake driver (real-GPU code path, checked without a GPU) ----------

EMM_SCRIPT = textwrap.dedent("""
    import gc
    from cuda.bindings import driver as binding
    from numba.cuda.cudadrv import driver as drv
    from minigpu.backends.cuda import allocator

    calls = {"alloc": 0, "free": 0}
    next_address = [1 << 20]
    fail_once = [False]

    def cuMemAlloc(nbytes):
        if fail_once[0]:
            fail_once[0] = False
            raise drv.CudaAPIError(binding.CUresult.CUDA_ERROR_OUT_OF_MEMORY, "oom")
        calls["alloc"] += 1
        next_address[0] += nbytes
        return binding.CUdeviceptr(next_address[0])

    def cuMemFree(ptr):
        calls["free"] += 1

    drv.driver.cuMemAlloc, drv.driver.cuMemFree = cuMemAlloc, cuMemFree

    class Context:
        pass

    context = Context()
    Manager = allocator._make_emm_plugin()
    manager = Manager(context=context)
    assert manager.interface_version == 1
    mem = manager.memalloc(1000)
    first = int(mem.device_pointer)
    assert manager.pool.stats()["allocated_bytes"] == 1024 and len(manager.allocations) == 1
    del mem
    gc.collect()
    assert manager.pool.stats()["cached_bytes"] == 1024 and not manager.allocations
    again = manager.memalloc(700)
    assert int(again.device_pointer) == first and calls["alloc"] == 1
    fail_once[0] = True
    other = manager.memalloc(5000)  # OOM: the cache is emptied (nothing cached now), retried
    assert manager.pool.stats()["num_oom_retries"] == 1 and calls["alloc"] == 2
    del again, other
    gc.collect()
    manager.pool.empty_cache()
    assert calls["free"] == 2
    print("EMM-OK")
""")


def test_emm_plugin_plumbing_with_a_fake_driver():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    try:
        import cuda.bindings  # noqa: F401
    except ImportError:
        pytest.skip("cuda-python bindings (numba-cuda[cu13]) are not installed")
    result = subprocess.run([sys.executable, "-c", EMM_SCRIPT], env=env, capture_output=True,
                            text=True, timeout=120, check=False)
    assert "EMM-OK" in result.stdout, result.stderr[-3000:]


@pytest.mark.gpu
def test_caching_plugin_is_numbas_memory_manager_on_a_gpu():
    from numba import cuda
    if not allocator.ENABLED:
        pytest.skip("MINIGPU_CUDA_ALLOCATOR=native")
    x = mg.randn(1000, device="cuda")
    assert allocator.device_pool() is not None, type(cuda.current_context().memory_manager)
    before = mg.cuda.memory_stats()
    for _ in range(20):
        x = (x * 2).relu()
    after = mg.cuda.memory_stats()
    assert after["allocator"] == "caching"
    assert after["num_device_allocs"] - before["num_device_allocs"] <= 2
    assert after["num_cache_hits"] > before["num_cache_hits"]
